"""The reading stage: session logs -> lines -> events -> finished turns.

`Tailer.poll()` is one pass: it asks the watcher which logs changed, reads what was
appended and returns the turns that finished. Each log is read through its SessionLog
(tailer/turns/session_log.py), the rule every command reads by; what this module adds is the
following of many logs: which to read, a pass's turn budget, the metrics and warnings of
what was read, tombstones. Nothing here knows about HTTP, OTLP or metrics' rendering, so
the whole reading side runs in tests against a temporary folder.

`state()` and the `saved` argument carry the reading side of a checkpoint
(tailer/turns/session_state.py): for each session, its log position (lines.Position: checked
against the log before every read), its open turns and the fusion ids it already reported. A session whose log is gone keeps
that state as a tombstone, in memory and in the checkpoint: a state folder that is
briefly missing or empty (a volume not mounted yet, a folder moved and moved back) gives
its sessions back where they were instead of counting them again. A tombstone's open turns
are finished as `incomplete` once it has been gone for the idle timeout.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Callable

from ..copilot import event_records
from ..copilot.lines import NotARegularFile, Position
from ..log_limit import WarningLimiter
from ..copilot.problems import line_problem, rewritten_problem
from .session_log import INTERNAL_ERROR, Read, SessionLog, finish_tombstone
from .assembly import INCOMPLETE_OUTCOME, Turn
from .in_flight import running
from .copies import first_open_per_key
from .counted_logs import CountedLogs
from .reported import ReportedTurns
from ..copilot.watch import SessionWatcher

log = logging.getLogger("tailer")

# What a pass changed, for deciding when the checkpoint is worth saving.
UNCHANGED, POSITIONS, TURNS = 0, 1, 2
# Tombstones beyond this many (the oldest first) are forgotten: a state folder whose
# sessions are deleted for good must not grow the checkpoint for ever.
MAX_TOMBSTONES = 10_000


class Pass:
    """What one poll() did: the turns it finished, and how much the checkpoint changed."""

    __slots__ = ("turns", "level")

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.level = UNCHANGED

    def note(self, level: int) -> None:
        self.level = max(self.level, level)

    def finished(self, turns: list[Turn]) -> None:
        if turns:
            self.turns += turns
            self.level = TURNS


class Tailer:
    """Follows every session log under `state_dir`; `poll()` returns the turns that finished.

    Without saved state, logs that exist at start are read from their end unless
    `from_start`; logs that appear later, or that the saved state does not know, are new
    sessions and are read from their beginning. Logs found at start that were last written
    more than `backfill_days` ago are read from their end all the same. A session whose log
    has not changed for `idle_timeout_s` has its open turns finished as `incomplete`.
    Over 150 lines because which log to read next (the watcher's changes, a pass's turn
    budget, tombstones of vanished logs) is one decision over every session; reading one log
    is SessionLog's (tailer/turns/session_log.py).
    """

    def __init__(
        self,
        state_dir: Path,
        *,
        metrics,  # what it reads is counted into (the outputs' Metrics), passed in
        from_start: bool,
        idle_timeout_s: float,
        backfill_days: float | None = None,
        saved: dict | None = None,
        watcher: SessionWatcher | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.state_dir = state_dir
        self.metrics = metrics
        self.idle_timeout_s = idle_timeout_s
        self.clock = clock
        self.watcher = watcher or SessionWatcher(state_dir)
        self.sessions: dict[str, SessionLog] = {}
        self._warnings = WarningLimiter()
        self._warned_drift: set[tuple[str, str]] = set()
        # Sessions with no log at hand: the checkpoint's until their logs are found, and
        # tombstones of logs that vanished (with "gone_at", the clock when they did).
        self._resting: dict[str, dict] = dict((saved or {}).get("sessions", {}))
        # A key several sessions finished is named the first in name order of those whose
        # logs were found when saved, as on a first start (`poll` reads in name order), not
        # a copy listed before it, nor a tombstone's name the folder no longer has.
        named_last = sorted(self._resting, key=lambda s: ("gone_at" in self._resting[s], s),
                            reverse=True)
        self._reported = ReportedTurns((session_id, self._resting[session_id]["finished"])
                                       for session_id in named_last)
        self._counted_before = CountedLogs({
            session_id: Position.from_data(self._resting[session_id]["position"])
            for session_id in reversed(named_last)
            if not self._reported.kept_all(self._resting[session_id]["finished"])})
        self._start_at_end = saved is None and not from_start
        self._backfill_s = None if backfill_days is None else backfill_days * 86400
        self._first_pass = True
        self._unread: set[str] = set()
        self._failed: set[str] = set()  # reads that failed: retried at the next pass
        self._turns_left: int | None = None
        # Only these need the idle check: walking every session each pass costs idle CPU.
        self._with_open_turns: set[str] = set()
        self._in_flight_shown: set[tuple[str, str]] = set()  # (session id, turn key)

    def start(self) -> int:
        """Find the session logs and where to read each from; returns how many there are."""
        changes = self.watcher.changes(0.0)
        for session_id, path in changes.appeared.items():
            self.sessions[session_id] = self._open_session(session_id, Path(path))
        self._unread.update(self.sessions)
        self._first_pass = False
        now = self.clock()
        for saved in self._resting.values():
            saved.setdefault("gone_at", now)
        self.metrics.sessions.set(None, len(self.sessions))
        return len(self.sessions)

    @property
    def caught_up(self) -> bool:
        """Whether everything found so far was read (a pass may stop at its turn budget)."""
        return not self._first_pass and not self._unread

    def poll(self, timeout: float = 0.0, turn_budget: int | None = None) -> Pass:
        """Wait up to `timeout` for changes, read them; return what finished.

        With a `turn_budget`, the pass stops reading once it finished that many turns; what
        is left is read first by the next pass. A backfill of weeks then goes in steps the
        caller can pace (its spans must drain), rather than in one pass of unbounded memory.
        """
        done = Pass()
        if self._first_pass:
            self.start()
        changes = self.watcher.changes(0.0 if self._unread else timeout)
        for session_id, path in changes.appeared.items():
            self.sessions[session_id] = self._open_session(session_id, Path(path))
            changes.touched.add(session_id)
        for session_id in changes.vanished:
            self._bury(session_id, done)
        to_read = self._unread | self._failed | changes.touched
        self._unread, self._failed = set(), set()
        self._turns_left = turn_budget
        for session_id in sorted(to_read):
            session = self.sessions.get(session_id)
            if session is None:
                continue
            if self._turns_left is not None and self._turns_left <= 0:
                self._unread.add(session_id)
                continue
            self._read(session_id, session, done)
        self._finish_idle(done)
        done.turns = self._reported.to_report(done.turns)
        self.metrics.sessions.set(None, len(self.sessions))
        # _failed holds the logs whose last read failed: each is read again next pass.
        self.metrics.unreadable_logs.set(None, len(self.watcher.unreadable.keys() | self._failed))
        open_turns = first_open_per_key((turn for session_id in self._with_open_turns
                                         for turn in self.sessions[session_id].turns.open_turns),
                                        self._reported)
        self.metrics.open_turns.set(None, len(open_turns))
        in_flight = list(filter(running, open_turns))
        self.metrics.show_in_flight(in_flight)
        shown = {(turn.session_id, turn.key) for turn in in_flight}
        if shown != self._in_flight_shown:
            # Scrapes see values as of the last save: a turn that began or ended is worth one.
            done.note(TURNS)
            self._in_flight_shown = shown
        return done

    def state(self) -> dict:
        """The reading side of a checkpoint (see the module docstring)."""
        sessions = dict(self._resting)
        for session_id, session in self.sessions.items():
            sessions[session_id] = session.to_state()
        return {"sessions": sessions}

    def open_turns(self, session_id: str) -> list[Turn]:
        """The turns of a session begun in its log and not finished yet."""
        session = self.sessions.get(session_id)
        return session.turns.open_turns if session is not None else []

    def close(self) -> None:
        self.watcher.close()

    def _open_session(self, session_id: str, path: Path) -> SessionLog:
        saved = self._resting.pop(session_id, None)
        if saved is not None:
            return SessionLog.from_state(session_id, path, saved)
        session = SessionLog(session_id, path)
        if self._first_pass and (self._start_at_end or self._beyond_backfill(path)):
            session.skip_to_end()
        return session

    def _bury(self, session_id: str, done: Pass) -> None:
        """Keep a vanished log's session as a tombstone, in case the log comes back."""
        session = self.sessions.pop(session_id, None)
        self._unread.discard(session_id)
        self._failed.discard(session_id)
        self._with_open_turns.discard(session_id)
        if session is None:
            return
        log.info("session %s: its log is gone; kept in case it comes back", session_id)
        tombstone = session.to_state()
        tombstone["gone_at"] = self.clock()
        self._resting[session_id] = tombstone
        while len(self._resting) > MAX_TOMBSTONES:
            oldest = min(self._resting, key=lambda s: self._resting[s].get("gone_at", 0))
            self._finish_tombstone(oldest, self._resting.pop(oldest), done)
        done.note(POSITIONS)

    def _beyond_backfill(self, path: Path) -> bool:
        """A log found at start that was last written before the backfill horizon."""
        if self._backfill_s is None:
            return False
        try:
            return self.clock() - os.stat(path).st_mtime > self._backfill_s
        except OSError:
            return False

    def _read(self, session_id: str, session: SessionLog, done: Pass) -> None:
        reader = session.reader
        generation = reader.generation
        before = reader.position.line
        read_into, skipped = 0, 0  # lines read into a record, and damaged: counted at the end
        for read in session.read(self.metrics.believable_until_ns()):
            if reader.generation != generation:
                generation, before, read_into, skipped = reader.generation, 0, 0, 0
                log.info("%s", rewritten_problem(session_id))
            try:
                outcome = self._line(session_id, session, read, done)
            except Exception as error:  # a bug must cost one line, not the process
                outcome = None
                self._damaged(session_id, read.line.number, INTERNAL_ERROR, type(error).__name__)
            read_into += outcome is True
            skipped += outcome is None
            if self._turns_left is not None and self._turns_left <= 0:
                self._unread.add(session_id)  # the rest of this log: next pass
                break
        if session.quiet_records:
            read_into += session.quiet_records
            self.metrics.note_event_time(session.newest_quiet_ns)
        done.note(TURNS if read_into or skipped else UNCHANGED)  # once a read, not a line
        if session.error is not None:
            self._warnings.warn((session_id, "unreadable"), "%s", session.problem)
            if not isinstance(session.error, NotARegularFile):
                self._failed.add(session_id)  # no write may come to wake it up: try again
            return
        if reader.generation != generation:
            log.info("%s", rewritten_problem(session_id))
            before = 0
        self._note_open_turns(session_id, session)
        self._count_lines(reader.position.line - before, read_into, skipped, done)

    def _count_lines(self, lines: int, read_into: int, skipped: int, done: Pass) -> None:
        """Once per read, not per line: a busy log has thousands of lines a second."""
        if read_into:
            self.metrics.count_lines("fusion", amount=read_into)
        if skipped:
            self.metrics.count_lines("malformed", amount=skipped)
        if lines - read_into - skipped > 0:
            self.metrics.count_lines("ignored", amount=lines - read_into - skipped)
            done.note(POSITIONS)

    def _note_open_turns(self, session_id: str, session: SessionLog) -> None:
        if session.turns.open_count:
            self._with_open_turns.add(session_id)
        else:
            self._with_open_turns.discard(session_id)

    def _finish_idle(self, done: Pass) -> None:
        """Finish the open turns of sessions whose log has not changed for the idle timeout,
        and of tombstones gone for as long.

        None while a pass left logs unread (a backfill goes 50 turns a pass): a log half
        read is not idle, however old, and a log still to read may hold the same turn,
        finished (a copy of a session made while the turn ran, cut in it, gives way to the
        session that finished it: ReportedTurns keeps the first finished). For the same
        reason a turn another log still being written holds open is left open: that log
        finishes it, fuller, and the copy's gives way once it is idle in its turn.
        """
        if self._unread:
            return
        now = self.clock()
        idle = {session_id for session_id in self._with_open_turns
                if self.sessions[session_id].idle(now, self.idle_timeout_s)}
        still_written = {turn.key for session_id in self._with_open_turns - idle
                         for turn in self.sessions[session_id].turns.open_turns}
        for session_id in idle:
            session = self.sessions[session_id]
            finished = session.turns.finish_where(lambda turn: turn.key not in still_written)
            if finished:
                read_to = session.reader.position.offset
                self._find_counted_before(session_id, session, read_to, read_to, finished)
                self._finished(finished, done)
            self._note_open_turns(session_id, session)
        for session_id, saved in self._resting.items():
            if saved["open"] and now - saved.get("gone_at", now) >= self.idle_timeout_s:
                self._finish_tombstone(session_id, saved, done)

    def _finish_tombstone(self, session_id: str, saved: dict, done: Pass) -> None:
        finished = finish_tombstone(session_id, saved)
        read_to = Position.from_data(saved["position"])
        for turn in finished:
            if turn.key not in self._reported:
                owner = self._counted_before.holding(session_id, read_to, self._log_of)
                if owner is not None:
                    self._reported.counted_before(turn.key, owner)
        self._finished(finished, done)

    def _line(self, session_id: str, session: SessionLog, read: Read, done: Pass) -> bool | None:
        """Count one line that became something: True for a record, None when it was
        damaged (its reason counted here; the lines are counted by _read)."""
        record = read.record
        if isinstance(record, event_records.Malformed):
            self._damaged(session_id, read.line.number, record.reason, read.error_type)
            return None
        self.metrics.count_event(record)
        if record.event_type:  # only a record with notes, or of an unknown type, names it
            self._warn_drift(record)
        if read.finished:
            line = read.line
            # Where the line starts (an oversized one's data is its head only: within it,
            # a turn cut short then is counted as the copy's, as before this was looked at).
            self._find_counted_before(session_id, session, line.end_offset - len(line.data) - 1,
                                      line.end_offset, read.finished)
            self._finished(read.finished, done)
        if isinstance(record, event_records.SessionTotals):
            for check in session.turns.take_reconciliations():
                self.metrics.count_reconciliation(check)
                log.log(logging.DEBUG if check.agrees else logging.WARNING, "%s",
                        check.describe())
        return True

    def _damaged(self, session_id: str, number: int, reason: str,
                 error_type: str | None = None) -> None:
        self.metrics.count_damage(reason)
        self._warnings.warn((session_id, reason), "%s",
                            line_problem(session_id, number, reason, error_type))

    def _warn_drift(self, record: event_records.Event) -> None:
        """Warn once per kind of drift: the metrics count every occurrence."""
        unknown_type = isinstance(record, event_records.UnknownFusionEvent)
        if not (unknown_type or record.unknown_fields or record.missing_fields):
            return
        notes = [("unknown event type", record.event_type)] if unknown_type else []
        notes += [(f"unknown field on {record.event_type}", f) for f in record.unknown_fields]
        notes += [(f"missing field on {record.event_type}", f) for f in record.missing_fields]
        for kind, name in notes:
            if (kind, name) not in self._warned_drift and len(self._warned_drift) < 1000:
                self._warned_drift.add((kind, name))
                log.warning("log format drift: %s: %s (the CLI may have changed)", kind, name)

    def _find_counted_before(self, session_id: str, session: SessionLog, start: int, end: int,
                             turns: list[Turn]) -> None:
        """Turns of keys the checkpoint did not keep, finished by a line (ending at `end`)
        another session's log held when it was saved (a copy of it, read from its start):
        counted then. A turn cut short (`incomplete`) began before the line that finished it
        (starting at `start`), or before where its log was read to when it was idle: a copy
        made while it ran holds the session's bytes up to there only, and its own after
        (resumed on its own), yet the turn is the session's, counted by it or to be."""
        for turn in turns:
            if turn.key not in self._reported:
                before = start if turn.outcome == INCOMPLETE_OUTCOME else end
                owner = self._counted_before.counted_as(session_id, session.path, before,
                                                        self._log_of)
                if owner is not None:
                    self._reported.counted_before(turn.key, owner)

    def _log_of(self, session_id: str) -> Path | None:
        session = self.sessions.get(session_id)
        return None if session is None else session.path

    def _finished(self, turns: list[Turn], done: Pass) -> None:
        """Note turns finished: the pass reports them at its end, one per key (to_report)."""
        done.finished(turns)
        if self._turns_left is not None:
            self._turns_left -= len(turns)

