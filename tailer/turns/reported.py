"""Which session reported each turn, so that a turn found in two logs is reported once.

A copy of a session's folder kept in the state folder (`cp -r ID ID.bak`), or a folder
renamed while the daemon was stopped, holds that session's turns again, under the ids the
CLI gave them (a fusionId, a prompt's event id: a turn's key), which no turn of another
session has. Each key is reported by the session that finished it first (of a pass's, the
fuller: `to_report`); the report keeps one row per key by the same rule
(tailer/report/gather.py's OnePerTurn).
"""

from __future__ import annotations

import logging
from itertools import islice
from typing import Iterable

from .assembly import REMEMBERED_FINISHED, Turn
from .copies import fullness

log = logging.getLogger("tailer")

# Keys beyond this many (the oldest first) are forgotten: a year of heavy use is some
# 50,000 turns, and each session's checkpoint keeps its own last 4,096 besides.
MAX_KEYS = 200_000
_MAX_TOLD = 1000  # pairs of sessions told of, so a copy is named once, not per turn


class ReportedTurns:
    """The keys of the turns reported, each with its session."""

    def __init__(self, sessions: Iterable[tuple[str, Iterable[str]]] = ()):
        """`sessions`: each session id with the keys of the turns it finished already, as
        its saved state holds them (session_state: "finished"). A key is named the last
        session's that holds it; beyond MAX_KEYS, the keys of the first are forgotten first."""
        session_of: dict[str, str] = {}
        for session_id, keys in sessions:
            for key in keys:
                session_of[key] = session_id
        # The excess dropped in one copy: deleted one at a time from a dict's front, each
        # deletion looks past the ones before it, and a checkpoint of many sessions (150 of
        # 4,096 keys) took minutes to start.
        self._session_of = dict(islice(session_of.items(), max(0, len(session_of) - MAX_KEYS), None))
        self._told: set[tuple[str, str]] = set()

    def __contains__(self, key: str) -> bool:
        return key in self._session_of

    def kept_all(self, keys: list[str]) -> bool:
        """Whether a session's saved keys are all its keys here: fewer than its turn
        assembly keeps, none dropped beyond MAX_KEYS."""
        return len(keys) < REMEMBERED_FINISHED and all(key in self._session_of for key in keys)

    def counted_before(self, key: str, session_id: str) -> None:
        """The turn of `key`, whose key the checkpoint did not keep, was counted as
        `session_id`'s before the daemon started again (counted_logs.py)."""
        self._session_of.setdefault(key, session_id)
        self._forget_oldest()

    def to_report(self, turns: list[Turn]) -> list[Turn]:
        """Of the turns one pass finished, those to report: of each key the fuller (not
        `incomplete`, then more calls, else the first, as the report keeps its rows), unless
        another session reported that key. A copy made while a turn ran, then resumed on
        its own, finishes the turn cut short at its next prompt, maybe read before the
        session that completed it."""
        fuller: dict[str, Turn] = {}
        for turn in turns:
            kept = fuller.setdefault(turn.key, turn)
            if fullness(turn.outcome, len(turn.calls)) > fullness(kept.outcome, len(kept.calls)):
                fuller[turn.key] = turn
        reported = [turn for turn in fuller.values() if self.first(turn)]
        for turn in turns:
            if turn is not fuller[turn.key]:
                self.first(turn)  # names the copy in the log
        return reported

    def first(self, turn: Turn) -> bool:
        """Whether `turn` is to be reported: no other session reported a turn of its key.
        The turn's key is then its session's."""
        owner = self._session_of.setdefault(turn.key, turn.session_id)
        if owner == turn.session_id:
            self._forget_oldest()
            return True
        pair = (turn.session_id, owner)
        if pair not in self._told and len(self._told) < _MAX_TOLD:
            self._told.add(pair)
            log.info("session %s: its turns are session %s's too (a copy of its log): "
                     "counted once, as that session's", turn.session_id, owner)
        return False

    def _forget_oldest(self) -> None:
        while len(self._session_of) > MAX_KEYS:
            del self._session_of[next(iter(self._session_of))]
