"""The turn in flight (tailer/turns/in_flight.py): for any prefix of a log written in the real
CLI's order, the open turn's snapshot agrees with what the lines of that prefix say."""

import json

from hypothesis import given, settings, strategies as st

from in_flight_truth import in_flight_after
from sessiongen import START, SessionWriter, whole_session
from tailer.codes import ENUM
from tailer.copilot import event_records, event_types, event_values, events
from tailer.copilot.event_records import PlannedLeg
from tailer.turns.assembly import SessionTurns
from tailer.turns.in_flight import DONE, PENDING, RUNNING, SKIPPED, in_flight

LINES = whole_session("live-session").lines()

# Every pattern the CLI writes, a route failure and an ordinary prompt.
TURNS = {
    "single": lambda w: w.single("gpt-5.6-sol"),
    "accept": lambda w: w.cascade("mai-code-1.1-flash", "gpt-5.6-sol"),
    "reject": lambda w: w.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="reject"),
    "critique": lambda w: w.critique("gpt-5.6-sol", ["claude-sonnet-4.6", "gemini-3.1-pro"]),
    "revision": lambda w: w.critique("gpt-5.6-sol", ["claude-sonnet-4.6"],
                                     revision_model="gpt-5.6-sol"),
    "route_failed": lambda w: w.route_failed("gpt-5.6-mini"),
    "ordinary": lambda w: w.ordinary("claude-sonnet-4.6", calls=3),
    "degraded": lambda w: w.degraded("mai-code-1.1-flash", "gpt-5.6-sol"),
}


def snapshots_after(lines, now_ns=None):
    turns = SessionTurns("live-session")
    for line in lines:
        feed(turns, line)
    return [in_flight(turn, now_ns or turn.start_ns) for turn in turns.open_turns]


def feed(turns, line):
    record = events.parse_line(line.encode())
    if isinstance(record, event_records.Event):
        turns.feed(record)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(sorted(TURNS)), min_size=1, max_size=4), st.integers(0, 99))
def test_after_every_record_the_open_turn_shows_what_the_lines_so_far_say(kinds, seed):
    writer = SessionWriter(f"live-{seed}", START)
    for kind in kinds:
        TURNS[kind](writer)
    lines = writer.lines()
    turns = SessionTurns("live-session")
    for count in range(len(lines) + 1):
        if count:
            feed(turns, lines[count - 1])
        check_prefix(lines[:count], [in_flight(turn, turn.start_ns) for turn in turns.open_turns])


def test_every_prefix_of_a_whole_session():
    for count in range(len(LINES) + 1):
        check_prefix(LINES[:count], snapshots_after(LINES[:count]))


def check_prefix(lines, found):
    truth = in_flight_after(lines)
    if truth is None:
        assert found == []
        return
    [now] = found
    assert (now.key, now.kind) == (truth.key, truth.kind)
    done = sorted((leg.kind, leg.model, leg.verdict, leg.nano_aiu) for leg in now.done_legs)
    assert done == sorted(truth.done)
    running = [leg for leg in now.legs if leg.state == RUNNING]
    assert len(running) == len(truth.running)
    assert now.calls == truth.calls and now.calls_nano_aiu == truth.call_nano
    assert sum(leg.calls for leg in running) == sum(
        phase in truth.running for phase in truth.call_phases)
    unrun = [leg.state for leg in now.legs if leg.state not in (DONE, RUNNING)]
    assert set(unrun) <= {SKIPPED if truth.committed else PENDING}
    if truth.kind == "fusion":
        assert [(leg.kind, leg.conditional) for leg in now.legs] == [
            (planned["kind"], planned["conditional"]) for planned in truth.plan]
    if truth.kind == "ordinary":
        assert now.legs == ()


def test_elapsed_time_is_the_clock_passed_in_less_the_start():
    prefix = LINES[:3]  # session.start, the first turn's resolved and its prompt
    [now] = snapshots_after(prefix)
    [later] = snapshots_after(prefix, now_ns=now.start_ns + 12_500_000_000)
    assert (now.elapsed_s, later.elapsed_s) == (0.0, 12.5)
    assert now.legs[0].state == PENDING and now.calls == 0


_PLAN_VALUES = st.sampled_from([None, "", "primary", "judge", "solver", "root", "Root Scope",
                                 "/home/me/CANARY", "other", "x" * 200]) | st.text(max_size=6)


@given(st.lists(st.tuples(_PLAN_VALUES, _PLAN_VALUES, _PLAN_VALUES, st.booleans()), max_size=5))
def test_each_plan_value_is_its_code_or_other_and_each_refusal_is_counted_under_its_field(legs):
    """codes_only over any plan: each leg's value as ENUM.accept gives it, the record's plan
    made again only when one is refused, the refused fields named once each, sorted."""
    plan = tuple(PlannedLeg(*leg) for leg in legs)
    record = event_records.Resolved(1, fusion_id="fusion-1", pattern=None, synthetic_model=None,
                                    policy=None, route_source=None, routing_latency_ms=None,
                                    phase_plan=plan)
    refused = event_values.codes_only(record)
    expected = tuple(PlannedLeg(ENUM.accept(kind), ENUM.accept(role), ENUM.accept(scope), conditional)
                     for kind, role, scope, conditional in legs)
    assert record.phase_plan == expected
    assert (record.phase_plan is plan) == (expected == plan)
    assert refused == tuple(sorted(
        {counted_as for leg, accepted in zip(plan, expected)
         for counted_as, name in (("phase_kind", "kind"), ("role", "role"), ("scope", "scope"))
         if getattr(leg, name) != getattr(accepted, name)}))


def test_a_plan_s_values_that_are_no_codes_become_other_and_are_counted():
    line = json.dumps({"type": event_types.RESOLVED, "timestamp": "2026-11-04T12:00:00Z", "data": {
        "fusionId": "fusion-1", "pattern": "cascade", "phasePlan": [
            {"kind": "primary", "role": "solver", "scope": "root", "conditional": False},
            {"kind": "/home/me/CANARY", "role": "solver", "scope": "Root Scope", "conditional": "yes"},
            "not a leg"]}})
    record = events.parse_line(line.encode())
    assert record.phase_plan == (PlannedLeg("primary", "solver", "root", False),
                                 PlannedLeg("other", "solver", "other", False))
    assert record.not_codes == ("phase_kind", "scope")
