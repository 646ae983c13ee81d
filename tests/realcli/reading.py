"""What the tailer makes of the sessions the real CLI wrote, compared with the scenarios.

The same comparison serves the tests (which assert there is no difference) and the
version command (which prints the differences of a newer CLI instead of failing).
"""

from __future__ import annotations

from pathlib import Path

from tailer.copilot import event_records, events
from tailer.turns.assembly import SessionTurns, Turn

from .scenarios import Expected, Leg, Scenario


def session_turns(log: Path, session_id: str) -> list[Turn]:
    """Every turn of one log, read the daemon's way: parse_line, then SessionTurns."""
    assembler = SessionTurns(session_id)
    finished: list[Turn] = []
    with open(log, "rb") as lines:
        for line in lines:
            record = events.parse_line(line.rstrip(b"\n"))
            if isinstance(record, event_records.Event):
                finished += assembler.feed(record)
    return finished + assembler.finish_open()


def turn_summary(turn: Turn) -> Expected:
    """A turn in the terms of the scenarios, to compare with what they expect."""
    committed = next((leg.phase_kind for leg in turn.legs if turn.is_committed(leg)), None)
    failure = turn.route_failure
    return Expected(
        pattern=turn.pattern,
        legs=tuple(Leg(leg.phase_kind or "", leg.model or "", leg.verdict, leg.status or "")
                   for leg in turn.legs),
        committed=committed or "",
        outcome=turn.outcome,
        synthetic_model=turn.synthetic_model,
        policy=turn.policy or "",
        degraded_reason=turn.degraded_reason,
        route_failure_reason=failure.reason if failure else None,
    )


def differences(scenario: Scenario, turns: list[Turn]) -> list[str]:
    """How the tailer's turns differ from what the scenario expects; empty when they agree."""
    found = [turn_summary(turn) for turn in turns if turn.kind != "ordinary"]
    problems = []
    ordinary = sum(1 for turn in turns if turn.kind == "ordinary")
    if ordinary != scenario.ordinary:
        problems.append(f"{scenario.name}: {ordinary} ordinary turns, expected "
                        f"{scenario.ordinary}")
    tools = sum(len(turn.tools) for turn in turns)
    if tools != scenario.tools:
        problems.append(f"{scenario.name}: {tools} tool calls, expected {scenario.tools}")
    if len(found) != len(scenario.turns):
        return problems + [
            f"{scenario.name}: {len(found)} fusion turns, expected {len(scenario.turns)}"]
    for number, (expected, got) in enumerate(zip(scenario.turns, found), 1):
        for name in Expected.__dataclass_fields__:
            want, have = getattr(expected, name), getattr(got, name)
            if want != have:
                problems.append(f"{scenario.name} turn {number}: {name} is {have!r}, "
                                f"expected {want!r}")
    return problems
