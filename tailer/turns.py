"""Assemble the fusion turns of one session from its parsed events.

A pure state machine: records in, finished turns out. It knows nothing of files, HTTP or
clocks, so every lifecycle (and every way a lifecycle can break) is a unit test with a
list of records.

Only durable events reach the log, and the CLI may crash or be killed anywhere, so a turn
may lack its `resolved`, its rollup or some legs. A turn without a rollup is finished as
`incomplete` when the session moves on (the next `resolved` or `route_failed`), when the
session shuts down, or when the caller decides the session has gone idle
(`finish_open`). Never at `user.message`: the CLI writes a turn's own prompt after its
`resolved`.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from .events import (
    CommitStarted,
    Completed,
    Event,
    Handoff,
    LegEnded,
    Resolved,
    RouteFailed,
    SessionEnded,
    Usage,
)

# How many finished fusion ids a session remembers, so a late or repeated event of a turn
# already reported does not come back as a second turn.
_REMEMBERED_FINISHED = 4096


@dataclass
class Turn:
    """Everything the log said about one fusion turn, plus the figures derived from it."""

    session_id: str
    fusion_id: str
    resolved: Resolved | None = None
    legs: list[LegEnded] = field(default_factory=list)
    handoffs: list[Handoff] = field(default_factory=list)
    commit: CommitStarted | None = None
    completed: Completed | None = None
    route_failure: RouteFailed | None = None

    @property
    def pattern(self) -> str:
        for source in (self.resolved, self.completed):
            if source is not None and source.pattern:
                return source.pattern
        return "unknown"

    @property
    def outcome(self) -> str:
        if self.route_failure is not None:
            return "route_failed"
        if self.completed is not None:
            return self.completed.outcome or "completed"
        return "incomplete"

    @property
    def synthetic_model(self) -> str:
        for source in (self.resolved, self.completed, self.route_failure):
            if source is not None and source.synthetic_model:
                return source.synthetic_model
        return "hydrafusion"

    @property
    def policy(self) -> str | None:
        for source in (self.resolved, self.route_failure):
            if source is not None and source.policy:
                return source.policy
        return None

    @property
    def routing_latency_ms(self) -> float | None:
        for source in (self.resolved, self.route_failure):
            if source is not None and source.routing_latency_ms is not None:
                return source.routing_latency_ms
        return None

    @property
    def committed_phase_id(self) -> str | None:
        """The leg whose answer the user got; a route failure's answer is its fallback leg."""
        if self.completed is not None and self.completed.final_source_phase_id:
            return self.completed.final_source_phase_id
        if self.commit is not None and self.commit.source_phase_id:
            return self.commit.source_phase_id
        if self.route_failure is not None and self.legs:
            return self.legs[-1].phase_id
        return None

    @property
    def response_model(self) -> str | None:
        if self.completed is not None and self.completed.final_source_model:
            return self.completed.final_source_model
        if self.commit is not None and self.commit.source_model:
            return self.commit.source_model
        committed = self.committed_phase_id
        for leg in self.legs:
            if leg.phase_id == committed:
                return leg.model
        return None

    def is_committed(self, leg: LegEnded) -> bool:
        return leg.phase_id == self.committed_phase_id

    @property
    def legs_usage(self) -> Usage:
        return sum((leg.usage for leg in self.legs), Usage())

    @property
    def usage(self) -> Usage:
        """The rollup's figures; the legs' sum only when the rollup never came."""
        return self.completed.usage if self.completed is not None else self.legs_usage

    @property
    def usage_mismatch(self) -> bool:
        return self.completed is not None and self.completed.usage != self.legs_usage

    @property
    def review_nano_aiu(self) -> int:
        """Credits spent on legs that did not produce the answer."""
        return sum(leg.usage.nano_aiu for leg in self.legs if not self.is_committed(leg))

    @property
    def models(self) -> list[str]:
        return sorted({leg.model or "unknown" for leg in self.legs})

    @property
    def model_sequence(self) -> list[str]:
        return [leg.model or "unknown" for leg in self.legs]

    @property
    def compound(self) -> bool:
        return len(self.models) > 1

    @property
    def verdict(self) -> str | None:
        """The last judge's verdict: the one that decided which answer was kept."""
        verdicts = [leg.verdict for leg in self.legs if leg.verdict]
        return verdicts[-1] if verdicts else None

    @property
    def degraded_reason(self) -> str | None:
        return self.completed.degraded_reason if self.completed is not None else None

    @property
    def end_ns(self) -> int:
        if self.completed is not None:
            return self.completed.time_ns
        return max(event.time_ns for event in self._events())

    @property
    def start_ns(self) -> int:
        if self.completed is not None:
            return self.completed.time_ns - _ms_to_ns(self.completed.duration_ms)
        starts = [leg_start_ns(leg) for leg in self.legs]
        for source in (self.resolved, self.route_failure):
            if source is not None:
                starts.append(source.time_ns - _ms_to_ns(source.routing_latency_ms or 0))
        if not starts:
            starts = [event.time_ns for event in self._events()]
        return min(starts)

    def judged_leg(self, judge: LegEnded) -> LegEnded | None:
        """The answer a judge looked at: the last root-scope leg that ended before it."""
        candidate = None
        for leg in self.legs:
            if leg is judge:
                return candidate
            if leg.scope == "root" and leg.role != "judge":
                candidate = leg
        return None

    def _events(self) -> list[Event]:
        single = (self.resolved, self.commit, self.completed, self.route_failure)
        return [e for e in single if e is not None] + self.legs + self.handoffs

    def add_leg(self, leg: LegEnded) -> None:
        """Keep one leg per phase id: a leg reported as failed and then completed is one leg."""
        for index, known in enumerate(self.legs):
            if known.phase_id == leg.phase_id:
                self.legs[index] = _merge_legs(known, leg)
                return
        self.legs.append(leg)


def leg_start_ns(leg: LegEnded) -> int:
    return leg.time_ns - _ms_to_ns(leg.duration_ms)


def _ms_to_ns(milliseconds: float) -> int:
    return round(milliseconds * 1_000_000)


def _merge_legs(first: LegEnded, second: LegEnded) -> LegEnded:
    """The later report wins, but keeps what only the earlier one said."""
    merged = {}
    for name in LegEnded.__dataclass_fields__:
        later, earlier = getattr(second, name), getattr(first, name)
        merged[name] = earlier if later in (None, (), Usage()) else later
    return LegEnded(**merged)


class SessionTurns:
    """The open turns of one session and the ids of the ones already finished."""

    def __init__(self, session_id: str, open_turns: list[Turn] = (), finished: list[str] = ()):
        """`open_turns` and `finished` come from a checkpoint (see `open_turns`, `finished`)."""
        self.session_id = session_id
        self._open: dict[str, Turn] = {turn.fusion_id: turn for turn in open_turns}
        self._finished: OrderedDict[str, None] = OrderedDict.fromkeys(finished)

    @property
    def open_count(self) -> int:
        return len(self._open)

    @property
    def open_turns(self) -> list[Turn]:
        return list(self._open.values())

    @property
    def finished(self) -> list[str]:
        """The fusion ids already reported, oldest first."""
        return list(self._finished)

    def forget_open(self) -> None:
        """Drop the open turns: the log is being read again, which rebuilds them."""
        self._open.clear()

    def feed(self, event: Event) -> list[Turn]:
        """Take one record; return the turns it finished (often none)."""
        if isinstance(event, SessionEnded):
            return self.finish_open()
        if isinstance(event, (Resolved, RouteFailed)):
            finished = self.finish_open(keep=event.fusion_id)
            turn = self._turn(event.fusion_id)
            if turn is None:
                return finished
            if isinstance(event, Resolved):
                turn.resolved = event
            else:
                turn.route_failure = event
            return finished
        turn = self._turn(event.fusion_id)
        if turn is None:
            return []
        if isinstance(event, LegEnded):
            turn.add_leg(event)
            if turn.route_failure is not None:
                # The fallback leg is the last thing the CLI logs for a failed route.
                return [self._finish(turn)]
        elif isinstance(event, Handoff):
            turn.handoffs.append(event)
        elif isinstance(event, CommitStarted):
            turn.commit = event
        elif isinstance(event, Completed):
            turn.completed = event
            return [self._finish(turn)]
        return []

    def finish_open(self, keep: str | None = None) -> list[Turn]:
        """Finish every open turn but `keep` as it stands (`incomplete` where no rollup came)."""
        return [
            self._finish(turn) for turn in list(self._open.values()) if turn.fusion_id != keep
        ]

    def _turn(self, fusion_id: str) -> Turn | None:
        """The open turn for this id, a new one, or None when it was already finished."""
        if fusion_id in self._finished:
            return None
        turn = self._open.get(fusion_id)
        if turn is None:
            turn = self._open[fusion_id] = Turn(self.session_id, fusion_id)
        return turn

    def _finish(self, turn: Turn) -> Turn:
        del self._open[turn.fusion_id]
        self._finished[turn.fusion_id] = None
        if len(self._finished) > _REMEMBERED_FINISHED:
            self._finished.popitem(last=False)
        return turn
