"""Which record of a turn held by two logs counts: a copy of a session's folder kept in the
state folder (`cp -r ID ID.bak`) holds the session's turns under the keys the CLI gave
them, cut short where the copy was made while a turn ran. The report (report/gather.py's
OnePerTurn) and the daemon (reported.py, sessions.py) keep the same one.

Kept apart from reported.py, which logs: a warm report imports no logging (tests/test_imports.py).
"""

from __future__ import annotations

from typing import Container, Iterable

from .assembly import INCOMPLETE_OUTCOME, Turn


def fullness(outcome: str, calls: int) -> tuple[bool, int]:
    """How much of a turn a log holds, to keep the fuller of two records of one turn: a
    copy made while the turn ran holds it cut short (`incomplete`, fewer calls)."""
    return outcome != INCOMPLETE_OUTCOME, calls


def first_open_per_key(open_turns: Iterable[Turn], counted: Container[str]) -> list[Turn]:
    """Open turns, the first of each key, none of a key already `counted`: a copy of a log
    made while a turn ran holds it open too."""
    first: dict[str, Turn] = {}
    for turn in open_turns:
        if turn.key not in counted:
            first.setdefault(turn.key, turn)
    return list(first.values())
