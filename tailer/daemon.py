"""Wire the reading stages together: session logs -> lines -> events -> turns.

`Tailer.poll()` is one pass: it asks the watcher which logs changed, reads what was
appended, and hands each finished turn to `on_turn`. Nothing here knows about HTTP or OTLP,
so the whole pipeline runs in tests against a temporary state directory.

`state()` and the `saved` argument carry the reading side of a checkpoint: each log's
position and identity, its open turns and the fusion ids it already reported. A log is
recognised by a digest of its first bytes; one the CLI rewrote (rewound a session) or
replaced is read again from its start, and the turns it already reported are not reported
again.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Callable

from . import events
from .checkpoint import context_from_data, context_to_data, turn_from_data, turn_to_data
from .lines import FINGERPRINT_BYTES, Line, LineReader, fingerprint
from .logs import WarningLimiter
from .metrics import TurnMetrics
from .turns import SessionTurns, Turn
from .watch import SessionWatcher

log = logging.getLogger("tailer")

# What a pass changed, for deciding when the checkpoint is worth saving.
UNCHANGED, POSITIONS, TURNS = 0, 1, 2


class Session:
    """One session log: where we are in it, and its turns."""

    __slots__ = ("reader", "turns", "identity")

    def __init__(self, reader: LineReader, turns: SessionTurns):
        self.reader = reader
        self.turns = turns
        self.identity: dict | None = None  # device, inode and first-bytes digest, once read


class Tailer:
    """Follows every session log under `state_dir` and hands each finished turn to `on_turn`.

    Without saved state, logs that exist at start are read from their end unless
    `from_start`; logs that appear later, or that the saved state does not know, are new
    sessions and are read from their beginning. Logs found at start that were last written
    more than `backfill_days` ago are read from their end all the same. A session whose log has not changed for
    `idle_timeout_s` has its open turns finished as `incomplete`.
    """

    def __init__(
        self,
        state_dir: Path,
        *,
        metrics: TurnMetrics,
        on_turn: Callable[[Turn], None],
        from_start: bool,
        idle_timeout_s: float,
        backfill_days: float | None = None,
        saved: dict | None = None,
        watcher: SessionWatcher | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.state_dir = state_dir
        self.metrics = metrics
        self.on_turn = on_turn
        self.idle_timeout_s = idle_timeout_s
        self.clock = clock
        self.watcher = watcher or SessionWatcher(state_dir)
        self.sessions: dict[str, Session] = {}
        self._warnings = WarningLimiter()
        self._warned_drift: set[tuple[str, str]] = set()
        self._saved = (saved or {}).get("sessions", {})
        self._start_at_end = saved is None and not from_start
        self._backfill_s = None if backfill_days is None else backfill_days * 86400
        self._first_pass = True
        self._unread: set[str] = set()
        self._turns_left: int | None = None
        # Only these need the idle check: walking every session each pass costs idle CPU.
        self._with_open_turns: set[str] = set()
        self._level = UNCHANGED

    def start(self) -> int:
        """Find the session logs and where to read each from; returns how many there are."""
        changes = self.watcher.changes(0.0)
        for session_id, path in changes.appeared.items():
            self.sessions[session_id] = self._open_session(session_id, path)
        self._unread.update(self.sessions)
        self._first_pass = False
        self._level = self._forget_saved_sessions_gone()
        self.metrics.sessions.set(None, len(self.sessions))
        return len(self.sessions)

    @property
    def caught_up(self) -> bool:
        """Whether everything found so far was read (a pass may stop at its turn budget)."""
        return not self._first_pass and not self._unread

    def poll(self, timeout: float = 0.0, turn_budget: int | None = None) -> int:
        """Wait up to `timeout` for changes, read them; returns UNCHANGED, POSITIONS or TURNS.

        With a `turn_budget`, the pass stops reading once it finished that many turns; what
        is left is read first by the next pass. A backfill of weeks then goes in steps the
        caller can pace (its spans must drain), rather than in one pass of unbounded memory.
        """
        if self._first_pass:
            self.start()
        if self._unread:
            changes = self.watcher.changes(0.0)  # the first read may take long: no waiting
        else:
            changes = self.watcher.changes(timeout)
        level, self._level = self._level, UNCHANGED
        for session_id, path in changes.appeared.items():
            self.sessions[session_id] = self._open_session(session_id, path)
            changes.touched.add(session_id)
        for session_id in changes.vanished:
            gone = self.sessions.pop(session_id, None)
            self._unread.discard(session_id)
            self._with_open_turns.discard(session_id)
            if gone is not None:
                log.info("session %s: its log is gone", session_id)
                level = max(level, self._report(gone.turns.finish_open()))
        to_read = self._unread | changes.touched
        self._unread = set()
        self._turns_left = turn_budget
        for session_id in sorted(to_read):
            session = self.sessions.get(session_id)
            if session is None:
                continue
            if self._turns_left is not None and self._turns_left <= 0:
                self._unread.add(session_id)
                continue
            level = max(level, self._read(session_id, session))
        level = max(level, self._finish_idle())
        self.metrics.sessions.set(None, len(self.sessions))
        self.metrics.open_turns.set(
            None, sum(self.sessions[s].turns.open_count for s in self._with_open_turns)
        )
        return level

    def state(self) -> dict:
        """The reading side of a checkpoint (see the module docstring)."""
        sessions = {}
        for session_id, session in self.sessions.items():
            reader = session.reader
            if session.identity is None and reader.offset > 0:
                session.identity = _identity(reader.path)
            sessions[session_id] = {
                "offset": reader.offset,
                "line": reader.line_number,
                "identity": session.identity,
                "open": [turn_to_data(turn) for turn in session.turns.open_turns],
                "finished": session.turns.finished,
                "context": context_to_data(session.turns.context),
            }
        return {"sessions": sessions}

    def close(self) -> None:
        self.watcher.close()

    def _open_session(self, session_id: str, path: Path) -> Session:
        reader = LineReader(path, markers=events.MARKERS)
        saved = self._saved.pop(session_id, None)
        if saved is not None:
            turns = SessionTurns(session_id, finished=saved["finished"])
            if _same_log(path, saved["identity"], saved["offset"]):
                reader.offset, reader.line_number = saved["offset"], saved["line"]
                turns = SessionTurns(
                    session_id, [turn_from_data(t) for t in saved["open"]], saved["finished"],
                    context_from_data(saved.get("context")),
                )
            else:
                log.info("session %s: its log was rewritten; reading it again", session_id)
            session = Session(reader, turns)
            session.identity = saved["identity"] if reader.offset else None
            return session
        if self._first_pass and (self._start_at_end or self._beyond_backfill(path)):
            try:
                reader.skip_to_end()
            except OSError:
                pass  # reading it reports the problem
        return Session(reader, SessionTurns(session_id))

    def _beyond_backfill(self, path: Path) -> bool:
        """A log found at start that was last written before the backfill horizon."""
        if self._backfill_s is None:
            return False
        try:
            return self.clock() - os.stat(path).st_mtime > self._backfill_s
        except OSError:
            return False

    def _forget_saved_sessions_gone(self) -> int:
        """Sessions in the checkpoint whose logs were deleted while we were stopped."""
        level = UNCHANGED
        for session_id, saved in self._saved.items():
            turns = [turn_from_data(t) for t in saved["open"]]
            level = max(level, self._report(SessionTurns(session_id, turns).finish_open()))
        self._saved = {}
        return level

    def _read(self, session_id: str, session: Session) -> int:
        reader = session.reader
        generation = reader.generation
        before = reader.line_number
        handed_out = 0
        level = UNCHANGED
        try:
            for line in reader.read():
                if reader.generation != generation:
                    generation = reader.generation
                    before, handed_out = 0, 0
                    self._rewound(session_id, session)
                handed_out += 1
                level = max(level, self._line(session_id, session, line))
                if self._turns_left is not None and self._turns_left <= 0:
                    self._unread.add(session_id)  # the rest of this log: next pass
                    break
        except FileNotFoundError:
            return level  # gone: the watcher reports it
        except OSError as error:
            self._warnings.warn(
                (session_id, "unreadable"), "session %s: cannot read its log: %s",
                session_id, error.strerror,
            )
            return level
        if reader.generation != generation:
            self._rewound(session_id, session)
            before = 0
        self._note_open_turns(session_id, session)
        ignored = reader.line_number - before - handed_out
        if ignored > 0:
            self.metrics.count_line("ignored", amount=ignored)
            level = max(level, POSITIONS)
        return level

    def _rewound(self, session_id: str, session: Session) -> None:
        log.info("session %s: its log shrank or was replaced; reading it again", session_id)
        session.turns.forget_open()
        session.identity = None

    def _note_open_turns(self, session_id: str, session: Session) -> None:
        if session.turns.open_count:
            self._with_open_turns.add(session_id)
        else:
            self._with_open_turns.discard(session_id)

    def _finish_idle(self) -> int:
        """Finish the open turns of sessions whose log has not changed for the idle timeout.

        A log a pass left half read is not idle, however old: the rest of its open turns is
        still to be read.
        """
        level = UNCHANGED
        now = self.clock()
        for session_id in self._with_open_turns - self._unread:
            session = self.sessions[session_id]
            try:
                modified = os.stat(session.reader.path).st_mtime
            except OSError:
                continue
            if now - modified >= self.idle_timeout_s:
                level = max(level, self._report(session.turns.finish_open()))
                self._with_open_turns.discard(session_id)
        return level

    def _line(self, session_id: str, session: Session, line: Line) -> int:
        if line.oversized:
            record = events.Malformed("oversized") if events.may_matter(line.data) else None
        else:
            record = events.parse_line(line.data)
        if record is None:
            self.metrics.count_line("ignored")
            return POSITIONS
        if isinstance(record, events.Malformed):
            self.metrics.count_line("malformed", record.reason)
            self._warnings.warn(
                (session_id, record.reason), "session %s: skipped line %d of events.jsonl: %s",
                session_id, line.number, record.reason,
            )
            return TURNS
        self.metrics.count_line("fusion")
        self.metrics.count_event(record)
        self._warn_drift(record)
        if not isinstance(record, events.UnknownFusionEvent):
            self._report(session.turns.feed(record))
            for check in session.turns.take_reconciliations():
                self.metrics.count_reconciliation(check)
                log.log(logging.DEBUG if check.agrees else logging.WARNING, "%s", check.describe())
        return TURNS

    def _warn_drift(self, record: events.Event) -> None:
        """Warn once per kind of drift: the metrics count every occurrence."""
        unknown_type = isinstance(record, events.UnknownFusionEvent)
        if not (unknown_type or record.unknown_fields or record.missing_fields):
            return
        notes = [("unknown event type", record.event_type)] if unknown_type else []
        notes += [(f"unknown field on {record.event_type}", f) for f in record.unknown_fields]
        notes += [(f"missing field on {record.event_type}", f) for f in record.missing_fields]
        for kind, name in notes:
            if (kind, name) not in self._warned_drift and len(self._warned_drift) < 1000:
                self._warned_drift.add((kind, name))
                log.warning("log format drift: %s: %s (the CLI may have changed)", kind, name)

    def _report(self, turns: list[Turn]) -> int:
        for turn in turns:
            self.on_turn(turn)
        if self._turns_left is not None:
            self._turns_left -= len(turns)
        return TURNS if turns else UNCHANGED


def _identity(path: Path) -> dict | None:
    try:
        status = os.stat(path)
        size = min(status.st_size, FINGERPRINT_BYTES)
        return {
            "device": status.st_dev, "inode": status.st_ino,
            "fingerprint": fingerprint(path, size), "fingerprint_size": size,
        }
    except OSError:
        return None


def _same_log(path: Path, identity: dict | None, offset: int) -> bool:
    """Whether the log at `path` is the one a checkpoint describes, still at least as long.

    The first bytes decide, not the inode: a log copied or restored elsewhere, or seen
    through a remounted volume, is still the same log.
    """
    if offset == 0:
        return True
    if identity is None:
        return False
    try:
        if os.stat(path).st_size < offset:
            return False
        return fingerprint(path, identity["fingerprint_size"]) == identity["fingerprint"]
    except OSError:
        return False
