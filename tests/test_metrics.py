"""The turn metrics on plain data: what one finished turn adds to which series."""

import platform

import pytest
from hypothesis import given, settings, strategies as st

from assembly import assemble
from exposition_helpers import samples, saved_series
from sessiongen import START, SessionWriter
from tailer.outputs.exposition import Registry
from tailer.outputs.logs import turn_line
from tailer.outputs.metrics import Metrics, python_version
from tailer.outputs.spans import turn_spans
from tailer.records import replace
from tailer.turns.assembly import Turn


def turns_of(write) -> list:
    writer = SessionWriter("s", START)
    write(writer)
    writer.shutdown()
    return assemble(writer.lines(), "s")


def counted(turns) -> str:
    metrics = Metrics(Registry())
    for turn in turns:
        metrics.count_turn(turn)
    return metrics.registry.render_final()


def test_each_kind_of_prompt_is_counted_under_its_own_model():
    turns = turns_of(lambda w: (w.single("gpt-5.6-sol"), w.ordinary("mai-code-1.1-flash"),
                                w.route_failed("claude-sonnet-5")))
    assert [turn.kind for turn in turns] == ["fusion", "ordinary", "fallback"]
    prompts = samples(counted(turns), "hydrafusion_prompts_total")
    assert prompts == {
        (("kind", "fusion"), ("model", "hydrafusion")): 1,
        (("kind", "ordinary"), ("model", "mai-code-1.1-flash")): 1,
        (("kind", "fallback"), ("model", "claude-sonnet-5")): 1,
    }
    assert sorted(turn.prompt_model for turn in turns) == sorted(
        dict(labels)["model"] for labels in prompts)


def test_a_route_failure_is_the_fallback_pattern_as_in_the_report_and_the_dashboard():
    """The log names no pattern for a route failure: the turn families say `fallback`, its
    `kind` (hydrafusion_prompts_total) and the report's name, never `unknown`."""
    [turn] = turns_of(lambda w: w.route_failed("claude-sonnet-5"))
    text = counted([turn])
    for family in ("hydrafusion_turns_total", "hydrafusion_legs_total", "hydrafusion_aiu_total",
                   "hydrafusion_turn_duration_seconds_count"):
        assert {dict(labels)["pattern"] for labels in samples(text, family)} == {"fallback"}, family


def test_an_ordinary_prompt_adds_to_no_fusion_family():
    [turn] = turns_of(lambda w: w.ordinary("mai-code-1.1-flash", tools=("bash", "view")))
    text = counted([turn])
    assert samples(text, "hydrafusion_turns_total") == {}
    assert samples(text, "hydrafusion_legs_total") == {}
    tools = samples(text, "hydrafusion_tool_calls_total")
    assert sum(tools.values()) == len(turn.tools) >= 2
    assert {dict(labels)["kind"] for labels in tools} == {"ordinary"}


def test_a_fusion_turn_adds_one_turn_and_its_legs_and_credits():
    [turn] = turns_of(lambda w: w.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="reject"))
    text = counted([turn])
    assert samples(text, "hydrafusion_turns_total") == {
        (("compound", str(turn.compound).lower()), ("outcome", turn.outcome),
         ("pattern", "cascade")): 1}
    assert sum(samples(text, "hydrafusion_legs_total").values()) == len(turn.legs)
    assert samples(text, "hydrafusion_judged_turns_total") == {
        (("pattern", "cascade"), ("rejected", "true")): 1}
    aiu = sum(samples(text, "hydrafusion_aiu_total").values())
    assert abs(aiu - turn.usage.aiu) < 1e-6


def test_calls_of_unknown_credits_add_no_credits_and_are_counted_apart():
    """`aiCreditsStatus: unavailable` (CLI 1.0.102, no `copilot_usage`): the leg says 0 for
    its call, which is no price. A leg or prompt that knows no credits adds no sample to a
    credits family; its calls go to hydrafusion_unknown_credit_calls_total."""
    writer = SessionWriter("s", START, unpriced=1)
    writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol")
    writer.ordinary("claude-sonnet-4.6", calls=2)
    writer.route_failed("gpt-5.6-mini")
    writer.shutdown()
    cascade, ordinary, fallback = assemble(writer.lines(), "s")
    registry = Registry()
    metrics = Metrics(registry)
    for turn in (cascade, ordinary, fallback):
        metrics.count_turn(turn)
    for family in ("hydrafusion_aiu_total", "hydrafusion_router_aiu_total",
                   "hydrafusion_prompt_aiu_total"):
        assert samples(registry.render_final(), family) == {}, family
    requests = samples(registry.render_final(), "hydrafusion_requests_total")
    assert sum(requests.values()) == len(cascade.calls) + len(fallback.calls)  # calls still count
    assert samples(registry.render_final(), "hydrafusion_unknown_credit_calls_total") == {
        (("kind", "fusion"), ("model", "mai-code-1.1-flash"), ("pattern", "cascade")):
            cascade.leg_credits(cascade.legs[0])[1],
        (("kind", "fusion"), ("model", "gpt-5.6-sol"), ("pattern", "cascade")): 1,
        (("kind", "ordinary"), ("model", "claude-sonnet-4.6"), ("pattern", "ordinary")): 2,
        (("kind", "fallback"), ("model", "gpt-5.6-mini"), ("pattern", "fallback")): len(fallback.calls)}


def test_a_series_of_unknown_credit_calls_is_scraped_at_zero_first():
    """Prometheus's increase() cannot see a series' first value: a new label set is shown at
    0 on its first scrape, as every turn family's is (tailer/outputs/exposition.py)."""
    writer = SessionWriter("s", START, unpriced=1)
    writer.single("gpt-5.6-sol")
    [turn] = assemble(writer.lines(), "s")
    registry = Registry()
    Metrics(registry).count_turn(turn)
    name = "hydrafusion_unknown_credit_calls_total"
    labels = (("kind", "fusion"), ("model", "gpt-5.6-sol"), ("pattern", "single"))
    assert samples(registry.render(), name) == {labels: 0}
    registry.save_and_publish(lambda saved: None)  # the save that records the zero was seen
    assert samples(registry.render(), name) == {labels: len(turn.calls)}


def test_a_leg_with_some_calls_of_unknown_credits_adds_the_others():
    writer = SessionWriter("partly", START, unpriced=0.5)
    for _ in range(4):
        writer.single("gpt-5.6-sol", request_count=4)
    writer.shutdown()
    turns = assemble(writer.lines(), "partly")
    partly = [turn for turn in turns if 0 < turn.unknown_credit_calls < len(turn.calls)]
    assert partly, "no leg with calls of both kinds: the test would prove nothing"
    text = counted(turns)
    assert sum(samples(text, "hydrafusion_aiu_total").values()) == sum(
        call.usage.nano_aiu for turn in turns for call in turn.calls if call.credits_known) / 1e9
    assert sum(samples(text, "hydrafusion_unknown_credit_calls_total").values()) == sum(
        not call.credits_known for turn in turns for call in turn.calls)


def test_a_turn_counted_as_history_adds_what_it_would_have_added_live():
    [turn] = turns_of(lambda w: w.single("gpt-5.6-sol"))
    live, history = Metrics(Registry()), Metrics(Registry())
    live.count_turn(turn)
    gained = history.count_turn_as_history(turn)
    assert gained and all(divisor > 0 for _, _, _, divisor in gained)
    assert history.registry.render_final() == live.registry.render_final()


def test_counts_carry_on_from_what_a_checkpoint_saved():
    turns = turns_of(lambda w: (w.single("gpt-5.6-sol"), w.single("gpt-5.6-sol")))
    before = Metrics(Registry())
    before.count_turn(turns[0])
    after = Metrics(Registry())
    after.restore(saved_series(before.registry))
    after.count_turn(turns[1])
    assert samples(after.registry.render_final(), "hydrafusion_prompts_total") == {
        (("kind", "fusion"), ("model", "hydrafusion")): 2}


def test_the_gate_counts_each_cascade_by_what_its_judge_did_and_splits_its_credits():
    """hydrafusion_gate_*: a cascade's draft kept (accepted), sent to the repair (rejected) or
    never judged (the judge failed; a turn aborted in review), with the credits of the legs
    kept and not kept; other patterns have no gate and add nothing."""
    turns = turns_of(lambda w: (
        w.cascade("mai-code-1.1-flash", "gpt-5.6-sol"),
        w.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="reject", repair_model="gpt-5.6-sol"),
        w.degraded("mai-code-1.1-flash", "claude-opus-5"),
        w.incomplete("mai-code-1.1-flash", "gpt-5.6-sol"),
        w.critique("gpt-5.6-sol", ["claude-opus-5"], revision_model="gpt-5.6-sol"),
        w.single("gpt-5.6-sol")))
    assert [turn.gate_outcome for turn in turns] == [
        "accepted", "rejected", "unjudged", "unjudged", None, None]
    text = counted(turns)
    assert samples(text, "hydrafusion_gate_turns_total") == {
        (("gate", "accepted"),): 1, (("gate", "rejected"),): 1, (("gate", "unjudged"),): 2}
    want = {}
    for turn in turns[:4]:
        for leg in turn.legs:
            key = (("committed", str(turn.is_committed(leg)).lower()), ("gate", turn.gate_outcome))
            want[key] = want.get(key, 0) + leg.usage.nano_aiu / 1e9
    got = samples(text, "hydrafusion_gate_aiu_total")
    assert got.keys() == want.keys() and all(abs(got[key] - want[key]) < 1e-9 for key in want)
    assert got[(("committed", "false"), ("gate", "rejected"))] > 0  # the draft and its judge
    # A turn family: counted as history too, as every family the dashboard reads by turn.
    metrics = Metrics(Registry())
    gained = {name for name, *_ in metrics.count_turn_as_history(turns[1])}
    assert {"hydrafusion_gate_turns_total", "hydrafusion_gate_aiu_total"} <= gained & metrics.turn_families


def test_each_legs_credits_are_found_once_and_the_router_counts_them_once(monkeypatch):
    """The turn's, the router's and the prompt's credits are sums of the same legs' credits,
    each leg's found once (Turn.leg_credits), and the router's count each leg once."""
    writer = SessionWriter("s", START, unpriced=0.5)
    writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="reject", repair_model="gpt-5.6-sol")
    writer.critique("gpt-5.6-sol", ["claude-sonnet-4.6", "gemini-3.1-pro"], revision_model="gpt-5.6-sol")
    writer.shutdown()
    turns = assemble(writer.lines(), "s")
    asked = []
    leg_credits = Turn.leg_credits
    monkeypatch.setattr(Turn, "leg_credits", lambda turn, leg: asked.append(leg) or leg_credits(turn, leg))
    text = counted(turns)
    legs = [leg for turn in turns for leg in turn.legs]
    assert len(asked) == len(legs) and {id(leg) for leg in asked} == {id(leg) for leg in legs}
    router = samples(text, "hydrafusion_router_aiu_total")
    assert sum(router.values()) == pytest.approx(sum(samples(text, "hydrafusion_aiu_total").values()))
    assert sum(router.values()) == pytest.approx(sum(turn.known_nano_aiu for turn in turns) / 1e9)


TURN_KINDS = {
    "single": lambda w: w.single("gpt-5.6-sol"),
    "accept": lambda w: w.cascade("mai-code-1.1-flash", "gpt-5.6-sol"),
    "reject": lambda w: w.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="reject",
                                  repair_model="gpt-5.6-sol"),
    "revision": lambda w: w.critique("gpt-5.6-sol", ["claude-sonnet-4.6", "gemini-3.1-pro"],
                                     revision_model="gpt-5.6-sol"),
    "degraded": lambda w: w.degraded("mai-code-1.1-flash", "gpt-5.6-sol"),
    "incomplete": lambda w: w.incomplete("mai-code-1.1-flash", "gpt-5.6-sol"),
    "route_failed": lambda w: w.route_failed("gpt-5.6-mini"),
    "ordinary": lambda w: w.ordinary("claude-sonnet-4.6", tools=("bash", "view")),
    "damaged_call": lambda w: w.single("gpt-5.6-sol", damaged_call=True),
}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(sorted(TURN_KINDS)), min_size=1, max_size=6),
       st.sampled_from([0.0, 0.5, 1.0]), st.integers(0, 99))
def test_a_finished_turns_kept_leg_calls_give_what_finding_them_afresh_gives(kinds, unpriced, seed):
    """A finished turn keeps each leg's calls (Turn.finish); the same turn unfinished finds
    them afresh at every ask: every figure of it, every output, is the same."""
    writer = SessionWriter(f"kept-{seed}", START, unpriced=unpriced)
    for kind in kinds:
        TURN_KINDS[kind](writer)
    writer.shutdown()
    metrics = Metrics(Registry())
    for turn in assemble(writer.lines(), writer.session_id):
        afresh = replace(turn, _finished_leg_calls=None, _finished_tools=None)
        assert [turn.leg_calls(leg) for leg in turn.legs] == [afresh.leg_calls(leg) for leg in turn.legs]
        assert turn.tools == afresh.tools
        assert metrics.turn_changes(turn) == metrics.turn_changes(afresh)
        assert turn_line(turn) == turn_line(afresh)
        assert turn_spans(turn) == turn_spans(afresh)


def test_the_builds_python_version_is_platforms():
    assert python_version() == platform.python_version()
