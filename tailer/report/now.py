"""The turns in flight as the report shows them: JSON rows (`in_flight`) and --watch's "now"
section, both made from the snapshots of tailer/turns/in_flight.py.

A row is plain figures, as a TurnRow is, so the JSON writer and the renderer need nothing
else; the render is a pure function of the rows, and every name in it goes through
printable (a code is checked, but a terminal is owed the one rule for text it shows).
"""

from __future__ import annotations

from datetime import tzinfo

from ..records import record
from ..printable import one_column, printable
from ..turns.assembly import Turn
from ..turns.in_flight import RUNNING, in_flight
from .rows import moment
from .read import report_pattern


@record(frozen=True, slots=True)
class LegNowRow:
    """A leg of the plan: `state` done, running, pending or skipped; `model`, `calls` and
    `credits` its calls' so far while it runs, its own once done."""

    kind: str | None
    role: str | None
    scope: str | None
    conditional: bool
    state: str
    model: str | None
    verdict: str | None
    calls: int
    credits: float


@record(frozen=True, slots=True)
class InFlightRow:
    """A turn in flight; `credits` are its model calls' so far (a lower bound when
    `credits_known` is false)."""

    session_id: str
    fusion_id: str  # the turn's key, as a finished turn's row names it
    kind: str
    pattern: str
    start: str
    elapsed_s: float
    calls: int
    credits: float
    credits_known: bool
    legs: list[LegNowRow]


def in_flight_row(turn: Turn, now_ns: int, tz: tzinfo | None) -> InFlightRow:
    now = in_flight(turn, now_ns)
    return InFlightRow(
        session_id=now.session_id, fusion_id=now.key, kind=now.kind,
        pattern=report_pattern(turn), start=moment(now.start_ns, tz),
        elapsed_s=round(now.elapsed_s, 3), calls=now.calls, credits=now.calls_nano_aiu / 1e9,
        credits_known=now.credits_known,
        legs=[LegNowRow(leg.kind, leg.role, leg.scope, leg.conditional, leg.state, leg.model,
                        leg.verdict, leg.calls, leg.nano_aiu / 1e9) for leg in now.legs],
    )


def render_now(rows: list[InFlightRow], width: int) -> list[str]:
    """The "now" section: a heading, then per turn in flight (oldest first) a line of its
    figures and its legs' marks, wrapped to `width`."""
    if not rows:
        return ["now: nothing running"]
    lines = [f"now: {len(rows)} running"]
    for row in sorted(rows, key=lambda row: (row.start, row.fusion_id)):
        at_least = "" if row.credits_known else ">="
        lines.append(
            f"  {row.start[11:19]} {one_column(row.session_id[:8])} {printable(row.pattern)} "
            f"{_elapsed(row.elapsed_s)} {row.calls:,} calls {at_least}{row.credits:,.2f} credits")
        legs = [_leg(leg) for leg in row.legs]
        while legs:
            line = "    " + legs.pop(0)
            while legs and len(line) + 1 + len(legs[0]) <= width:
                line += " " + legs.pop(0)
            lines.append(line)
    return lines


# How a leg's state reads in the "now" line, one mark each so a long plan fits on a line.
_MARKS = {"done": "+", RUNNING: "*", "pending": ".", "skipped": "-"}


def _leg(leg: LegNowRow) -> str:
    """`+judge(gpt-5.6-sol,accept)`: the state's mark, the kind, the model and verdict."""
    detail = ",".join(printable(part) for part in (leg.model, leg.verdict) if part)
    return (f"{_MARKS.get(leg.state, '?')}{printable(leg.kind or 'unknown')}"
            + (f"({detail})" if detail else ""))


def _elapsed(seconds: float) -> str:
    """`42s`, `3m07s`, `2h05m`, `3d04h`: a turn left open for days reads as such."""
    minutes, seconds = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"
