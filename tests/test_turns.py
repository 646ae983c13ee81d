"""The turn assembler, with plain records: every lifecycle and every way it can break."""


import pytest

from assembly import assemble
from sessiongen import every_pattern
from tailer.copilot.event_records import (
    CommitStarted, Completed, Handoff, LegEnded, Resolved, RouteFailed, SessionEnded, Usage,
)
from tailer.copilot.events import parse_line
from tailer.turns.assembly import SessionTurns

S = 1_000_000_000


def resolved(fusion, t, pattern="cascade", latency=250.0):
    return Resolved(t, fusion_id=fusion, pattern=pattern, synthetic_model="hydrafusion",
                    policy="standard", route_source="capi_plan", routing_latency_ms=latency)


def leg(fusion, suffix, t, kind="primary", model="mai-code-1.1-flash", *, scope="root",
        role="solver", status="succeeded", verdict=None, nano=1_000_000_000, duration=2000.0,
        reason=None):
    return LegEnded(t, fusion_id=fusion, phase_id=f"{fusion}:{suffix}", phase_kind=kind,
                    role=role, scope=scope, model=model, status=status, verdict=verdict,
                    duration_ms=duration, usage=Usage(1, 100, 10, 50, 0, nano),
                    failure_reason=reason, degraded_to_phase_id=None)


def completed(fusion, t, final_suffix, final_model, nano, duration=9000.0, **extra):
    return Completed(t, fusion_id=fusion, pattern=extra.get("pattern", "cascade"),
                     synthetic_model="hydrafusion", outcome="completed",
                     final_source_phase_id=f"{fusion}:{final_suffix}",
                     final_source_model=final_model, degraded_reason=extra.get("degraded"),
                     duration_ms=duration,
                     usage=extra.get("usage", Usage(nano_aiu=nano)))


def feed_all(records, session="s1"):
    assembler = SessionTurns(session)
    finished = []
    for record in records:
        finished += assembler.feed(record)
    return assembler, finished


def test_cascade_rejected_and_repaired():
    f = "fusion-a"
    judge = leg(f, "judge", 12 * S, "judge", "gpt-5.6-sol", scope="review", role="judge",
                verdict="reject", nano=500_000_000)
    legs_usage = Usage(3, 300, 30, 150, 0, 2_500_000_000)
    assembler, finished = feed_all([
        resolved(f, 1 * S),
        leg(f, "phase:0", 8 * S),
        judge,
        Handoff(12 * S, fusion_id=f, source_phase_id=f"{f}:judge",
                target_phase_id=f"{f}:repair"),
        leg(f, "repair", 20 * S, "repair", "gpt-5.6-sol"),
        CommitStarted(20 * S, fusion_id=f, source_phase_id=f"{f}:repair",
                      source_model="gpt-5.6-sol"),
        completed(f, 21 * S, "repair", "gpt-5.6-sol", 0, duration=20_250.0, usage=legs_usage),
    ])
    [turn] = finished
    assert assembler.open_count == 0
    assert (turn.pattern, turn.outcome, turn.verdict) == ("cascade", "completed", "reject")
    assert turn.committed_phase_id == f"{f}:repair"
    assert turn.models == ["gpt-5.6-sol", "mai-code-1.1-flash"] and turn.compound
    assert turn.model_sequence == ["mai-code-1.1-flash", "gpt-5.6-sol", "gpt-5.6-sol"]
    assert turn.usage == legs_usage and not turn.usage_mismatch
    assert turn.review_nano_aiu == 1_500_000_000
    assert turn.judged_leg(judge).phase_id == f"{f}:phase:0"
    assert (turn.start_ns, turn.end_ns) == (750_000_000, 21 * S)
    assert turn.response_model == "gpt-5.6-sol"


def test_rollup_that_disagrees_with_its_legs_is_flagged_not_added():
    f = "fusion-b"
    _, [turn] = feed_all([
        resolved(f, 1 * S, "single"),
        leg(f, "phase:0", 5 * S, nano=2_000_000_000),
        completed(f, 6 * S, "phase:0", "m", 0, usage=Usage(1, 100, 10, 50, 0, 3_000_000_000)),
    ])
    assert turn.usage.nano_aiu == 3_000_000_000
    assert turn.usage_mismatch


def test_turn_without_rollup_ends_at_next_resolved():
    assembler, finished = feed_all([
        resolved("f1", 1 * S), leg("f1", "phase:0", 4 * S), resolved("f2", 10 * S),
    ])
    [turn] = finished
    assert (turn.key, turn.outcome) == ("f1", "incomplete")
    assert turn.usage == turn.legs_usage and not turn.usage_mismatch
    assert turn.start_ns == 1 * S - 250_000_000 and turn.end_ns == 4 * S
    assert assembler.open_count == 1


def test_turn_without_rollup_ends_at_route_failure_and_at_shutdown():
    _, finished = feed_all([resolved("f1", 1 * S), RouteFailed(
        5 * S, fusion_id="f2", synthetic_model="hydrafusion", policy="standard",
        fallback_model="gpt-5.6-mini", reason="transport", routing_latency_ms=300.0)])
    assert [(t.key, t.outcome) for t in finished] == [("f1", "incomplete")]
    _, finished = feed_all([resolved("f1", 1 * S), SessionEnded(3 * S)])
    assert [(t.key, t.outcome) for t in finished] == [("f1", "incomplete")]


def test_phase_for_unknown_fusion_still_makes_a_turn():
    assembler, finished = feed_all([leg("f9", "phase:0", 4 * S), completed(
        "f9", 5 * S, "phase:0", "mai-code-1.1-flash", 1_000_000_000,
        usage=Usage(1, 100, 10, 50, 0, 1_000_000_000), pattern="single")])
    [turn] = finished
    assert turn.resolved is None and turn.pattern == "single"
    assert turn.routing_latency_ms is None


def test_route_failure_and_its_fallback_leg_are_one_trace():
    failure = RouteFailed(5 * S, fusion_id="f2", synthetic_model="hydrafusion",
                          policy="standard", fallback_model="gpt-5.6-mini",
                          reason="transport", routing_latency_ms=300.0)
    assembler, finished = feed_all([failure, leg("f2", "phase:0", 30 * S, model="gpt-5.6-mini")])
    [turn] = finished
    assert (turn.outcome, turn.pattern, len(turn.legs)) == ("route_failed", "fallback", 1)
    assert turn.committed_phase_id == "f2:phase:0"
    assert assembler.open_count == 0
    # The same leg reported again must not come back as a turn of its own.
    assert assembler.feed(leg("f2", "phase:0", 31 * S)) == []
    assert assembler.open_count == 0


def test_failed_leg_reported_twice_is_one_leg():
    f = "f3"
    failed = leg(f, "judge", 6 * S, "judge", status="failed", reason="timeout", nano=0)
    again = leg(f, "judge", 6 * S, "judge", status="failed", reason=None, nano=7)
    _, [turn] = feed_all([resolved(f, S), failed, again, completed(f, 9 * S, "phase:0", "m", 7)])
    [only] = turn.legs
    assert (only.failure_reason, only.usage.nano_aiu) == ("timeout", 7)


def test_late_events_of_a_finished_turn_are_dropped():
    f = "f4"
    assembler, _ = feed_all([resolved(f, S), leg(f, "phase:0", 2 * S),
                             completed(f, 3 * S, "phase:0", "m", 1)])
    assert assembler.feed(leg(f, "judge", 4 * S, "judge")) == []
    assert assembler.feed(completed(f, 5 * S, "phase:0", "m", 1)) == []
    assert assembler.open_count == 0


def test_a_session_remembers_its_latest_finished_turns_oldest_forgotten_first(monkeypatch):
    """Late events of the turns it still remembers are dropped; past the bound, the oldest
    finished id goes first, through a checkpoint and back too."""
    from tailer.turns import assembly

    monkeypatch.setattr(assembly, "REMEMBERED_FINISHED", 3)
    records = []
    for number in range(5):
        f = f"f{number}"
        records += [resolved(f, (3 * number + 1) * S), leg(f, "phase:0", (3 * number + 2) * S),
                    completed(f, (3 * number + 3) * S, "phase:0", "m", 1)]
    assembler, finished = feed_all(records)
    assert len(finished) == 5 and assembler.finished == ["f2", "f3", "f4"]
    again = SessionTurns("s1", [], assembler.finished)
    assert again.feed(leg("f2", "judge", 20 * S, "judge")) == []
    assert again.feed(completed("f4", 21 * S, "phase:0", "m", 1)) == []
    assert again.open_count == 0
    again.feed(resolved("f1", 22 * S))  # forgotten: a turn of its own again
    assert again.open_count == 1
    [*_, turn] = feed_all(records + [resolved("f5", 16 * S), leg("f5", "phase:0", 17 * S),
                                     completed("f5", 18 * S, "phase:0", "m", 1)])[1]
    assert turn.key == "f5"


def test_an_ordinary_turn_is_answered_by_the_model_most_of_its_calls_used_the_first_on_a_tie():
    from types import SimpleNamespace

    from tailer.turns.assembly import Turn

    def turn_of(*models):
        turn = Turn("s1", "prompt-1", ordinary=True)
        turn.calls = [SimpleNamespace(model=model) for model in models]  # all it reads of a call
        return turn

    assert turn_of("a", "b", "b").main_model == "b"
    assert turn_of("b", "a", "a", "b").main_model == "b"
    assert turn_of("a", "b").main_model == "a"
    assert turn_of().main_model == "unknown"


def test_finish_open_is_how_idle_sessions_end():
    assembler, _ = feed_all([resolved("f5", S), leg("f5", "phase:0", 2 * S)])
    [turn] = assembler.finish_open()
    assert turn.outcome == "incomplete" and assembler.open_count == 0


def test_resolved_after_its_own_leg_does_not_finish_it():
    assembler, finished = feed_all([leg("f6", "phase:0", 2 * S), resolved("f6", 1 * S)])
    assert finished == [] and assembler.open_count == 1


@pytest.fixture(scope="module")
def assembled():
    writer = every_pattern("sess-realistic")
    return writer.expected, assemble(writer.lines(), "sess-realistic")


def test_real_cli_order_gives_every_turn_once(assembled):
    expected, finished = assembled
    assert [t.key for t in finished] == [e.fusion_id for e in expected]
    for turn, truth in zip(finished, expected):
        assert (turn.pattern, turn.outcome) == (truth.pattern, truth.outcome)
        assert turn.models == truth.models
        assert turn.usage.nano_aiu == truth.nano_aiu
        assert turn.committed_phase_id == truth.committed_phase_id
        assert turn.degraded_reason == truth.degraded_reason
        assert not turn.usage_mismatch


def test_real_cli_order_gives_every_leg(assembled):
    expected, finished = assembled
    for turn, truth in zip(finished, expected):
        got = [(l.phase_id, l.phase_kind, l.model, l.status, l.verdict, turn.is_committed(l),
                l.usage.nano_aiu, l.failure_reason) for l in turn.legs]
        want = [(l.phase_id, l.phase_kind, l.model, l.status, l.verdict, l.committed,
                 l.nano_aiu, l.failure_reason) for l in truth.legs]
        assert got == want


def test_a_finished_turns_tools_are_placed_once_and_an_open_turns_as_they_come(assembled):
    """Every output reads a finished turn's tools: they are placed when it finishes, not at
    each read; an open turn's are found from what it holds so far."""
    expected, finished = assembled
    with_tools = [turn for turn in finished if turn.tools]
    assert with_tools and all(turn.tools is turn.tools for turn in with_tools)
    writer = every_pattern("sess-open")
    turns, seen = SessionTurns("sess-open"), []
    for text in writer.lines():
        record = parse_line(text.encode())
        if record is not None:
            turns.feed(record)
            seen += [len(turn.tools) for turn in turns.open_turns]
    assert max(seen) > 0, "an open turn's tools show before it ends"
