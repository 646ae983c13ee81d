"""Read session logs into the turns a report covers, the way the daemon reads them.

The same stages as the daemon (tailer/daemon.py): files -> lines -> events -> turns, with
the same rules: damaged lines are skipped and counted, unknown fusion events ignored, a log
the CLI rewrote is read again without reporting its turns twice. What differs is the end: a
report reads each log to its end and finishes a turn still open there as `incomplete`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from . import events
from .lines import Line, LineReader
from .turns import Reconciliation, SessionTurns, Turn


@dataclass(frozen=True)
class Selection:
    """Which turns a report covers. None is no limit; times are unix nanoseconds."""

    since_ns: int | None = None
    until_ns: int | None = None
    session: str | None = None  # a session id or the start of one
    model: str | None = None  # part of a model's name, any case
    pattern: str | None = None

    def wants_session(self, session_id: str) -> bool:
        return self.session is None or session_id.startswith(self.session)

    def wants_log(self, session_id: str, path: Path) -> bool:
        """Whether a log may hold wanted turns: a log last written before `since` cannot."""
        if not self.wants_session(session_id):
            return False
        if self.since_ns is None:
            return True
        try:
            return os.stat(path).st_mtime_ns >= self.since_ns
        except OSError:
            return True  # reading it reports the problem

    def wants(self, turn: Turn) -> bool:
        if not self.wants_session(turn.session_id):
            return False
        if self.since_ns is not None and turn.start_ns < self.since_ns:
            return False
        if self.until_ns is not None and turn.start_ns >= self.until_ns:
            return False
        if self.pattern is not None and turn.pattern != self.pattern:
            return False
        if self.model is not None:
            return any(self.model.lower() in model.lower() for model in turn.models)
        return True


class SessionReader:
    """Reads session logs into finished turns, the way the daemon does.

    It keeps each log's reader and open turns, so reading a log again costs only what was
    appended since (which is what --watch needs). A log the CLI rewrote or replaced is read
    again from its start; the turns already reported are not reported again.
    """

    def __init__(self) -> None:
        self._logs: dict[str, tuple[LineReader, SessionTurns]] = {}
        self.damaged_lines = 0
        self.unreadable: set[str] = set()
        self.reconciliations: list[Reconciliation] = []  # the CLI's totals, checked

    def read(self, session_id: str, path: Path) -> Iterator[Turn]:
        """The turns the lines appended since the last read finish (often none), each as
        soon as it does: a log of thousands of turns is never held as all their records."""
        if session_id not in self._logs:
            self._logs[session_id] = (LineReader(path, wanted=events.may_be_read),
                                      SessionTurns(session_id))
        reader, turns = self._logs[session_id]
        generation = reader.generation
        try:
            for line in reader.read():
                if reader.generation != generation:
                    generation = reader.generation
                    turns.forget_open()
                record = self._record(line)
                if record is not None:
                    yield from turns.feed(record)
                    if isinstance(record, events.SessionTotals):
                        self.reconciliations += turns.take_reconciliations()
        except FileNotFoundError:
            pass  # gone: the caller finishes its turns
        except OSError:  # unreadable, or not a regular file
            self.unreadable.add(session_id)

    def finish(self, session_id: str) -> list[Turn]:
        """Finish the open turns of one session as they stand (`incomplete` without a rollup)."""
        found = self._logs.get(session_id)
        return found[1].finish_open() if found is not None else []

    def finish_all(self) -> list[Turn]:
        return [turn for session_id in self._logs for turn in self.finish(session_id)]

    def open_turns(self, session_id: str) -> int:
        found = self._logs.get(session_id)
        return found[1].open_count if found is not None else 0

    def skipped(self) -> dict[str, int]:
        return {"damaged_lines": self.damaged_lines, "unreadable_logs": len(self.unreadable)}

    def _record(self, line: Line) -> events.Event | None:
        """The line's record, or None for a line that is not one (damaged lines are counted)."""
        if line.oversized:
            record = events.Malformed("oversized") if events.may_matter(line.data) else None
        else:
            record = events.parse_line(line.data)
        if isinstance(record, events.Malformed):
            self.damaged_lines += 1
            return None
        if isinstance(record, events.UnknownFusionEvent):
            return None
        return record


def wanted_turns(logs: dict[str, Path], selection: Selection, reader: SessionReader,
                 on_log: Callable[[Path], None] | None = None) -> Iterator[Turn]:
    """Every wanted turn of `logs`, as each log is read to its end (open turns are finished
    as incomplete there). `on_log` is called after each log, for progress."""
    for session_id, path in sorted(logs.items()):
        yield from filter(selection.wants, reader.read(session_id, path))
        yield from filter(selection.wants, reader.finish(session_id))
        if on_log is not None:
            on_log(path)
