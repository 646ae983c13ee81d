"""The turn metrics on plain data: what one finished turn adds to which series."""

from assembly import assemble
from exposition_helpers import samples, saved_series
from sessiongen import START, SessionWriter
from tailer.outputs.exposition import Registry
from tailer.outputs.metrics import Metrics


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
