"""A turn in flight: what an open turn shows so far, leg by leg, as one frozen value.

The CLI writes a turn's routing decision (with its phase plan) first, each model call as it
ends, and each leg only when that leg ends: phase starts are never written. So a leg of the
plan is `done` once its record came, `running` once a call of it came without its record,
`pending` before that, and `skipped` when the turn committed its answer without it (the
conditional repair of an accepted draft, the revision no critic asked for).

`in_flight` is a pure function of the open Turn (tailer/turns/assembly.py) and a clock
reading, so the report's JSON, --watch and the daemon's gauges show the same thing; each of
them shows the open turns that are `running`.
"""

from __future__ import annotations


from ..records import record
from ..copilot.event_records import PlannedLeg
from .assembly import Turn

DONE, RUNNING, PENDING, SKIPPED = "done", "running", "pending", "skipped"

# A route failure has no plan: its one leg is the fallback answer, run as an ordinary turn
# whose calls carry no phase id, and logged (with phaseKind primary) when it ends.
FALLBACK_PLAN = (PlannedLeg("primary", "solver", "root", False),)


@record(frozen=True)
class LegNow:
    """One leg of the plan (or one the plan did not name) as it stands.

    `model`, `nano_aiu` and `calls`: the leg's own figures once it is done, its calls' so
    far while it runs; `verdict` only once done."""

    kind: str | None
    role: str | None
    scope: str | None
    conditional: bool
    state: str
    model: str | None = None
    verdict: str | None = None
    nano_aiu: int = 0
    calls: int = 0


@record(frozen=True)
class InFlight:
    """An open turn: `kind` is fusion, fallback (a route failure) or ordinary; `calls` and
    `calls_nano_aiu` count every model call so far (credits are a lower bound when
    `credits_known` is False: a call gave none)."""

    session_id: str
    key: str
    kind: str
    pattern: str
    start_ns: int
    elapsed_s: float
    legs: tuple[LegNow, ...]
    calls: int
    calls_nano_aiu: int
    credits_known: bool

    @property
    def done_legs(self) -> tuple[LegNow, ...]:
        return tuple(leg for leg in self.legs if leg.state == DONE)


def running(turn: Turn) -> bool:
    """Whether an open turn is in flight. An ordinary turn is open until the next prompt (a
    later call may still be its), but once its last call ended without asking for tools it
    has answered: it is no longer running, though not yet finished."""
    return not (turn.ordinary and turn.outcome == "completed")


def in_flight(turn: Turn, now_ns: int) -> InFlight:
    """The open turn as it stands at `now_ns` (unix nanoseconds)."""
    start_ns = turn.start_ns
    return InFlight(
        session_id=turn.session_id,
        key=turn.key,
        kind=turn.kind,
        pattern=turn.pattern,
        start_ns=start_ns,
        elapsed_s=max(now_ns - start_ns, 0) / 1e9,
        legs=() if turn.ordinary else _legs(turn),
        calls=len(turn.calls),
        calls_nano_aiu=turn.calls_usage.nano_aiu,
        credits_known=all(call.credits_known for call in turn.calls),
    )


def _legs(turn: Turn) -> tuple[LegNow, ...]:
    """The plan's legs, each matched with the first leg record (then call) of its kind."""
    plan = FALLBACK_PLAN if turn.route_failure is not None else (
        turn.resolved.phase_plan if turn.resolved is not None else ())
    slots: list[LegNow | PlannedLeg] = list(plan)

    def place(kind: str | None, leg: LegNow) -> None:
        for index, slot in enumerate(slots):
            if isinstance(slot, PlannedLeg) and slot.kind == kind:
                slots[index] = LegNow(slot.kind, slot.role, slot.scope, slot.conditional,
                                      leg.state, leg.model, leg.verdict, leg.nano_aiu, leg.calls)
                return
        slots.append(leg)  # a leg the plan did not name (or a turn without its plan)

    ended = set()
    for leg in turn.legs:
        ended.add(leg.phase_id)
        place(leg.phase_kind, LegNow(leg.phase_kind, leg.role, leg.scope, False, DONE,
                                     leg.model, leg.verdict, leg.usage.nano_aiu,
                                     leg.usage.request_count))
    running: dict[str | None, list] = {}
    for call in turn.calls:
        if call.phase_id in ended or (call.phase_id is None and turn.route_failure is None):
            continue
        running.setdefault(call.phase_id, []).append(call)
    for phase_id, calls in running.items():
        kind = "primary" if phase_id is None else calls[0].phase_kind
        place(kind, LegNow(kind, None, None, False, RUNNING, calls[-1].model, None,
                           sum(call.usage.nano_aiu for call in calls), len(calls)))
    unrun = SKIPPED if turn.commit is not None or turn.completed is not None else PENDING
    return tuple(
        LegNow(slot.kind, slot.role, slot.scope, slot.conditional, unrun)
        if isinstance(slot, PlannedLeg) else slot
        for slot in slots
    )
