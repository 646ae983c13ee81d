"""What a report says when its filters chose no turn: what there is instead, per filter.

A table of zeros (and exit 0) after `--pattern foo` or `--session nope` leaves the user to
guess what went wrong. Instead the report names, for each filter given, what the logs hold:
the session ids closest to the one typed, the patterns and models seen, when the turns ran.
Names come from the logs, so they go through printable like every other.
"""

from __future__ import annotations

import difflib
from collections import Counter
from typing import Callable

from ..printable import printable
from ..wording import counted
from .rows import TurnRow
from .read import Selection

CLOSEST_SESSIONS = 3
MODELS_NAMED = 12


def what_there_is(filters: dict[str, str], session_ids: list[str],
                  rows_of: Callable[[Selection], list[TurnRow]]) -> list[str]:
    """One line per filter given in `filters` (the options as typed, by name), saying what
    there is. `rows_of` reads the turns a selection wants (a report's gathering): asked
    once, for the sessions --session chooses (every one when it chooses none), and only
    when another filter needs them."""
    lines = []
    session = filters.get("session")
    if session is not None and not any(sid.startswith(session) for sid in session_ids):
        lines.append(f"--session {session}: no session id starts with it; the closest of "
                     f"{counted(len(session_ids), 'session')}: "
                     + ", ".join(closest_sessions(session, session_ids)))
        session = None
    if not filters.keys() & {"pattern", "model", "since", "until"}:
        return [printable(line) for line in lines]
    rows = rows_of(Selection(session=session))
    if "pattern" in filters:
        seen = Counter(row.pattern for row in rows)
        lines.append(f"--pattern {filters['pattern']}: the patterns seen: "
                     + (", ".join(f"{pattern} ({count})" for pattern, count in
                                  sorted(seen.items(), key=lambda item: (-item[1], item[0])))
                        or "none"))
    if "model" in filters:
        # A fusion turn's own model is the router's name (hydrafusion), which --model never matches.
        seen = Counter(model for row in rows for model in
                       {*(leg.model for leg in row.legs), *([row.model] if row.kind != "fusion" else [])})
        named = [model for model, _ in sorted(seen.items(), key=lambda item: (-item[1], item[0]))]
        more = f" and {len(named) - MODELS_NAMED} more" if len(named) > MODELS_NAMED else ""
        lines.append(f"--model {filters['model']}: the models seen: "
                     + (", ".join(named[:MODELS_NAMED]) or "none") + more)
    times = " ".join(f"--{name} {filters[name]}" for name in ("since", "until") if name in filters)
    if times:
        starts = sorted(row.start for row in rows)
        lines.append(f"{times}: " + (f"the turns began from {_minute(starts[0])} to "
                                     f"{_minute(starts[-1])}" if starts else "there is no turn"))
    return [printable(line) for line in lines]


def closest_sessions(typed: str, session_ids: list[str]) -> list[str]:
    """The session ids whose start is most like what was typed, closest first."""
    def likeness(session_id: str) -> float:
        return difflib.SequenceMatcher(None, typed.lower(), session_id[:len(typed)].lower()).ratio()

    return sorted(session_ids, key=lambda sid: (-likeness(sid), sid))[:CLOSEST_SESSIONS]


def _minute(start: str) -> str:
    """`2026-11-30 15:36` of a row's ISO start (in the report's time zone)."""
    return start[:16].replace("T", " ")
