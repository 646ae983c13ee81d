"""What a session log's prefix holds in flight, read from the raw JSON lines alone.

The truth for the in-flight tests: which turn is open after the first n lines of a log the
SessionWriter wrote (tests/sessiongen.py), which of its legs ended, which have calls but no
leg record yet, its calls and their credits. Computed from the lines as written, never
through the tailer's parser, so it can judge it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field


@dataclass
class OpenTurn:
    key: str
    kind: str  # fusion, fallback, ordinary
    plan: list[dict] = field(default_factory=list)
    done: list[tuple] = field(default_factory=list)  # (kind, model, verdict, nano) per leg record
    ended_phases: set = field(default_factory=set)
    call_phases: list = field(default_factory=list)  # the phase id of each call, in order
    call_nano: int = 0
    committed: bool = False
    last_finish: str | None = None  # the finish reason of its latest call

    @property
    def answered(self) -> bool:
        """An ordinary turn whose latest call asked for no tools: open, no longer running."""
        return self.kind == "ordinary" and bool(self.call_phases) and self.last_finish != "tool_calls"

    @property
    def calls(self) -> int:
        return len(self.call_phases)

    @property
    def running(self) -> set:
        """The legs with calls and no record yet; an ordinary turn has no legs."""
        if self.kind == "ordinary":
            return set()
        return {phase for phase in self.call_phases if phase not in self.ended_phases}


def in_flight_after(lines: list[str]) -> OpenTurn | None:
    """The turn open after these lines (the SessionWriter's sessions run one at a time)."""
    turn: OpenTurn | None = None
    awaiting = False
    for line in lines:
        event = json.loads(line)
        kind, data = event["type"], event["data"]
        if kind == "session.fusion_resolved":
            turn, awaiting = OpenTurn(data["fusionId"], "fusion", plan=data["phasePlan"]), True
        elif kind == "session.fusion_route_failed":
            turn, awaiting = OpenTurn(data["attemptId"].removesuffix(":route"), "fallback"), True
        elif kind == "user.message":
            if not awaiting:
                turn = OpenTurn("prompt-" + event["id"], "ordinary")
            awaiting = False
        elif kind in ("session.resume", "session.start", "session.shutdown"):
            turn = None
        elif turn is None:
            continue
        elif kind == "session.usage_record":
            fusion = data["usage"].get("fusion") or {}
            turn.call_phases.append(fusion.get("phaseId"))
            turn.last_finish = data["usage"].get("finishReason")
            turn.call_nano += (data["usage"].get("copilotUsage") or {}).get("totalNanoAiu", 0)
        elif kind == "assistant.fusion_phase_completed" or kind == "assistant.fusion_phase_failed":
            turn.done.append((data["phaseKind"], data["model"], data.get("verdict"),
                              data["usage"]["totalNanoAiu"]))
            turn.ended_phases.add(data["phaseId"])
            if turn.kind == "fallback":
                turn = None  # the fallback leg is the last a failed route writes
        elif kind == "session.fusion_commit_started":
            turn.committed = True
        elif kind == "session.fusion_completed":
            turn = None
    return turn


def running_after(lines: list[str]) -> OpenTurn | None:
    """The turn in flight after these lines: the open one, unless it has answered."""
    turn = in_flight_after(lines)
    return None if turn is None or turn.answered else turn
