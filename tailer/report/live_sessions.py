"""What `report --watch` keeps of the sessions in view (tailer/report/live.py), so that
each redraw shows what a report of the logs there shows: the table's rows, one per turn;
the sessions whose folders turned unreadable, whose logs hold no event, whose logs went;
and each session's checks of the CLI's totals, damaged lines and unreadable log."""

from __future__ import annotations

from datetime import datetime, timedelta, tzinfo
from pathlib import Path
from typing import Callable, Iterable

from . import cache, gather
from .checks import Check, check_figures
from .read import Found, Selection
from .rows import TurnRow, turn_row
from ..copilot.watch import Changes
from ..turns.assembly import IDLE_TIMEOUT_S, Turn
from ..turns.session_log import holds_no_event


class TableRows(gather.OnePerTurn):
    """The rows of the table, one per turn (gather.OnePerTurn), and the turn that ended
    last, which the first lines name: kept up to date as rows come and go, so that no pass
    looks for it among every row."""

    def __init__(self) -> None:
        super().__init__()
        self.last: TurnRow | None = None
        self._last_end_ns = 0

    def keep(self, row: TurnRow, end_ns: int) -> None:
        if self.add(row) and (self.last is None or end_ns >= self._last_end_ns):
            self.last, self._last_end_ns = row, end_ns

    def take(self, finished: Iterable[Turn], selection: Selection, zone: tzinfo | None) -> int:
        """Keep the rows of the finished turns `selection` wants, each as it comes: the first
        pass over thousands of logs never holds all their Turns at once. How many finished."""
        taken = 0
        for taken, turn in enumerate(finished, 1):
            if selection.wants(turn):
                self.keep(turn_row(turn, zone), turn.end_ns)
        return taken

    def drop_sessions(self, session_ids: set[str]) -> dict[str, list[TurnRow]]:
        """OnePerTurn.drop_sessions, and the last turn to end with them: it is then the
        last of those left."""
        dropped = super().drop_sessions(session_ids)
        if self.last is not None and self.last.session_id in dropped:
            self.last = max(self.rows, key=turn_end, default=None)
            self._last_end_ns = turn_end_ns(self.last) if self.last is not None else 0
        return dropped


class UnreadableFolders:
    """The sessions in view whose folders turned unreadable (the watcher's `unreadable`):
    a report lists no log of theirs (files.find_logs), so they leave the view as a log that
    goes does, and come back as one that comes back once their folders can be read, though
    the watcher, which found their logs unchanged, reports nothing of them."""

    def __init__(self) -> None:
        self._paths: dict[str, str] = {}  # session id -> its log's path, while it is out of view

    def seen(self, changes: Changes, logs: dict[str, str], unreadable: dict[str, OSError]) -> None:
        """Add to `changes` the sessions of `logs` whose folders turned unreadable, as
        vanished, and those whose folders can be read again, as appeared (before a vanish
        the watcher reports of them, when their logs went meanwhile)."""
        for session_id in [session_id for session_id in self._paths if session_id not in unreadable]:
            changes.appeared[session_id] = self._paths.pop(session_id)
        for session_id in unreadable:
            if session_id in logs:
                self._paths[session_id] = logs[session_id]
                changes.vanished.add(session_id)


class NoEventLogs:
    """The logs in view that hold no event (session_log.holds_no_event: random bytes,
    another program's file), which a report counts among the logs it cannot read when it
    shows nothing of them (command._no_event_logs). A log's head is looked at only after a
    read that left it without a turn, finished or open: a real log's first line is an event."""

    def __init__(self) -> None:
        self._sessions: set[str] = set()

    def read(self, session_id: str, path: str, *, quiet: bool) -> None:
        """After a read of the session's log; `quiet`: it was read whole, finished no turn
        and holds none open."""
        if quiet and holds_no_event(Path(path)):
            self._sessions.add(session_id)
        else:
            self._sessions.discard(session_id)

    def count(self, logs: dict[str, str], showing: Callable[[], set[str]]) -> int:
        """Those of `logs` of which nothing is shown: `showing` gives the sessions with a row
        or a turn in flight, asked only when a log in view holds no event."""
        held = [session_id for session_id in self._sessions if session_id in logs]
        if not held:
            return 0
        shown = showing()
        return sum(session_id not in shown for session_id in held)


class GoneSessions:
    """The sessions whose logs went while watched, kept as the daemon keeps tombstones
    (tailer/turns/sessions.py): their rows, out of the view as out of a report of the logs
    left, to be shown again if the log comes back; and, for those that left turns open,
    since when, to end those turns `incomplete` once gone for the idle timeout (ended as
    the log ends them if it comes back before)."""

    def __init__(self) -> None:
        self._rows: dict[str, list[TurnRow]] = {}
        self._since: dict[str, float] = {}  # session id -> when its log went, turns open

    def leave(self, session_id: str, rows: list[TurnRow], *, open_since: float | None) -> None:
        """The session's log went, with these rows; `open_since`: when, if it left turns open."""
        self.set_aside(session_id, rows)
        if open_since is not None:
            self._since[session_id] = open_since

    def set_aside(self, session_id: str, rows: list[TurnRow]) -> None:
        self._rows.setdefault(session_id, []).extend(rows)

    def back(self, session_id: str) -> list[TurnRow]:
        """The session's log is back: its rows, forgotten here."""
        self._since.pop(session_id, None)
        return self._rows.pop(session_id, [])

    def idle(self, now: float) -> list[str]:
        """The sessions gone with turns open for the idle timeout at `now`, forgotten from
        the wait: their turns are to be ended."""
        ended = [session_id for session_id, since in self._since.items() if now - since >= IDLE_TIMEOUT_S]
        for session_id in ended:
            del self._since[session_id]
        return ended


class SessionFigures:
    """What a report counts of each log in view besides its turns (gather.Gathered), each
    session's apart as a read.Found of the report's Checks, so that they add up to a
    report's of the logs there: they leave with the session (`drop`) and are made again
    from its reader when it comes back; a log read again from its start has its own
    replaced, never added to (`forget`)."""

    def __init__(self) -> None:
        self._of: dict[str, Found] = {}
        self._cached: dict[str, Found] = {}  # the cache's, until the log is read from its start
        # What each pass looks at, kept as the figures change: no walk over 10,000 sessions.
        self.changes = 0  # figures set to others, or dropped
        self._damaged_lines = 0
        self._unreadable = 0  # logs that cannot be read

    def cached(self, session_id: str, entry: cache.LogEntry) -> None:
        """The session's figures as its cache entry holds them, before its log is read on."""
        self._cached[session_id] = Found(list(map(cache.check_from_data, entry.checks)),
                                         entry.damaged_lines)
        self._set(session_id, self._cached[session_id])

    def read(self, session_id: str, found: Found) -> None:
        """The session's figures after a read: what the cache held of its log, then what
        reading found since (`found`), as a report adds them (gather._merged). Only the
        checks found since the last read are converted: the reader's grow between two
        `forget`s, and the figures shown hold those of the reads before."""
        cached = self._cached.get(session_id, Found())
        shown = self._of.get(session_id, cached)
        converted = len(shown.checks) - len(cached.checks)
        self._set(session_id, Found(shown.checks + [check_figures(check) for check in found.checks[converted:]],
                                    cached.damaged_lines + found.damaged_lines, found.problem))

    def forget(self, session_id: str) -> None:
        """The session's log is read from its start: what the cache held of it and what was
        counted of it go, and the next `read` gives all its figures."""
        self._cached.pop(session_id, None)
        self.drop(session_id)

    def drop(self, session_id: str) -> None:
        """The session's log went: its figures leave the view (what the cache held of it is
        kept, for when it comes back)."""
        old = self._of.pop(session_id, None)
        if old is not None:
            self._counted(old, Found())

    def checks(self) -> list[Check]:
        """In the order of the session ids, a report's."""
        return [check for session_id in sorted(self._of) for check in self._of[session_id].checks]

    def skipped(self, unreadable_folders: set[str]) -> dict[str, int]:
        """What a report skips: the damaged lines, and the logs that cannot be read, with
        those of the sessions whose folders cannot be (`unreadable_folders`), each once."""
        folders = [session_id for session_id in unreadable_folders
                   if session_id not in self._of or self._of[session_id].problem is None]
        return {"damaged_lines": self._damaged_lines, "unreadable_logs": self._unreadable + len(folders)}

    def _set(self, session_id: str, figures: Found) -> None:
        old = self._of.get(session_id)
        if old != figures:
            self._of[session_id] = figures
            self._counted(old if old is not None else Found(), figures)

    def _counted(self, old: Found, new: Found) -> None:
        self.changes += 1
        self._damaged_lines += new.damaged_lines - old.damaged_lines
        self._unreadable += (new.problem is not None) - (old.problem is not None)


def turn_end(row: TurnRow) -> datetime:
    """When the row's turn ended (its start and duration, as the row keeps them)."""
    return datetime.fromisoformat(row.start) + timedelta(milliseconds=row.duration_ms)


def turn_end_ns(row: TurnRow) -> int:
    """When the row's turn ended, in unix nanoseconds (to the millisecond the row keeps)."""
    return round(turn_end(row).timestamp() * 1e9)
