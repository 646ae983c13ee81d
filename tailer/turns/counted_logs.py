"""Which turns of a log were counted before the daemon started again, as another session's.

A copy of a session's folder (`cp -r ID ID.bak`), or the folder renamed, found after a
restart is read from its start. Its turns carry the session's keys, but the checkpoint
keeps each session's last 4,096 only (assembly.REMEMBERED_FINISHED; reported.MAX_KEYS in
all): the older ones were unknown, and the copy counted those turns again. What the
checkpoint keeps of every session, whatever its length, is where its log was read to
(lines.Position: an offset, and a digest of the bytes before it), and every turn a line
before there finished was counted then. A log holding the same bytes up to the end of a
line holds the same records, which finish the same turns at the same lines. The bytes are
compared at that line's end, with the session's log where it is still there (a copy may be
read while it is being written, shorter than where its session was read to), else with the
digest the checkpoint kept (a folder renamed). A copy resumed on its own holds other bytes
from where it was made: its turns after that are counted as its own. A turn the copy holds
cut short (made while it ran) began before the cut: its bytes are compared there (before
the copy's line that finished it, where the copy was read to, or, the copy removed, with
the digest its tombstone kept).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ..copilot.lines import TAIL_BYTES, Position, tail_at


class CountedLogs:
    """The checkpoint's sessions whose older turn keys it did not keep, each with where its
    log was read to."""

    def __init__(self, read_to: dict[str, Position]):
        """`read_to`: in the order a turn is named the first's holding its line, of two (a
        session and a copy of it the checkpoint knew too) as ReportedTurns names it."""
        self._read_to = read_to
        # (session, other): a log found to differ from the other's cannot hold its bytes
        # further on either; spares reading both logs again for each of its new turns.
        self._apart: set[tuple[str, str]] = set()

    def counted_as(self, session_id: str, path: Path, end: int,
                   log_of: Callable[[str], Path | None]) -> str | None:
        """The session as which the turn finished by the line of `path` ending at `end`
        was counted before the restart, or None. `log_of`: a session's log, None if gone."""
        for other, read_to in self._read_to.items():
            if other == session_id or end > read_to.offset or (session_id, other) in self._apart:
                continue
            same = _same_bytes_before(path, end, log_of(other))
            if same is None:
                same = _holds(path, read_to)
            if same:
                return other
            if same is False:
                self._apart.add((session_id, other))
        return None

    def holding(self, session_id: str, read_to: Position,
                log_of: Callable[[str], Path | None]) -> str | None:
        """The session whose log held, when saved, the bytes a log now gone (a tombstone: a
        copy removed) was read to, or None: a turn open in it began there, and is that
        session's, counted by it or to be. `log_of`: a session's log, None if gone."""
        for other, theirs in self._read_to.items():
            if other != session_id and read_to.offset <= theirs.offset:
                other_log = log_of(other)
                if other_log is not None and _holds(other_log, read_to):
                    return other
        return None


def _same_bytes_before(path: Path, end: int, other_log: Path | None) -> bool | None:
    """Whether two logs hold the same bytes before `end` (their records have ids of their
    own: the same bytes there are the same log up to there); None if either cannot tell."""
    if other_log is None:
        return None
    size = min(end, TAIL_BYTES)
    mine, theirs = tail_at(path, end, size), tail_at(other_log, end, size)
    return None if mine is None or theirs is None else mine == theirs


def _holds(path: Path, read_to: Position) -> bool | None:
    """Whether the log holds the bytes the checkpoint's digest was taken of; None while it
    is shorter (or unreadable), or the checkpoint kept no digest (a version 2 one)."""
    if not read_to.tail_size:
        return None
    mine = tail_at(path, read_to.offset, read_to.tail_size)
    return None if mine is None else mine == read_to.tail
