"""Wire the stages together: session logs -> lines -> events -> turns -> spans, metrics, log.

`Tailer.poll()` is one pass over every session log; the caller decides how often to call
it and what to do with finished turns (`on_turn`). Nothing here knows about HTTP or OTLP,
so the whole pipeline runs in tests against a temporary state directory.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import events
from .files import session_logs
from .lines import LineReader
from .logs import WarningLimiter
from .metrics import TurnMetrics
from .turns import SessionTurns, Turn

log = logging.getLogger("tailer")

# Listing the state directory costs more than a stat per known file, so new sessions are
# looked for less often than known logs are read.
DISCOVERY_INTERVAL_S = 5.0


@dataclass
class Session:
    reader: LineReader
    turns: SessionTurns


class Tailer:
    """Follows every session log under `state_dir` and hands each finished turn to `on_turn`.

    Logs that exist when the tailer starts are read from their end unless `from_start`;
    logs that appear later are new sessions and are read from their beginning. A session
    whose log has not changed for `idle_timeout_s` has its open turns finished as
    `incomplete`.
    """

    def __init__(
        self,
        state_dir: Path,
        *,
        metrics: TurnMetrics,
        on_turn: Callable[[Turn], None],
        from_start: bool,
        idle_timeout_s: float,
        clock: Callable[[], float] = time.time,
    ):
        self.state_dir = state_dir
        self.metrics = metrics
        self.on_turn = on_turn
        self.idle_timeout_s = idle_timeout_s
        self.clock = clock
        self.sessions: dict[str, Session] = {}
        self._warnings = WarningLimiter()
        self._warned_drift: set[tuple[str, str]] = set()
        self._next_discovery = 0.0
        self._discover(start_at_end=not from_start)

    def poll(self) -> None:
        """Read what was appended to every log and finish the turns that are done."""
        now = self.clock()
        if now >= self._next_discovery:
            self._discover(start_at_end=False)
        for session_id, session in list(self.sessions.items()):
            self._read(session_id, session, now)
        self.metrics.open_turns.set(None, sum(s.turns.open_count for s in self.sessions.values()))

    def finish_all(self) -> None:
        """Finish every open turn now: used by `--once`, where there is no later."""
        for session in self.sessions.values():
            self._report(session.turns.finish_open())
        self.metrics.open_turns.set(None, 0)

    def _discover(self, *, start_at_end: bool) -> None:
        self._next_discovery = self.clock() + DISCOVERY_INTERVAL_S
        try:
            found = session_logs(self.state_dir)
        except OSError as error:
            self._warnings.warn(
                ("state_dir",), "cannot list the state directory: %s", error.strerror
            )
            return
        for session_id, path in found.items():
            if session_id in self.sessions:
                continue
            reader = LineReader(path)
            if start_at_end:
                try:
                    reader.skip_to_end()
                except OSError:
                    pass  # reading it later reports the problem
            self.sessions[session_id] = Session(reader, SessionTurns(session_id))
        for session_id in set(self.sessions) - set(found):
            gone = self.sessions.pop(session_id)
            log.info("session %s: its log is gone", session_id)
            self._report(gone.turns.finish_open())
        self.metrics.sessions.set(None, len(self.sessions))

    def _read(self, session_id: str, session: Session, now: float) -> None:
        reader = session.reader
        try:
            for line in reader.read():
                self._line(session_id, session, line)
            modified = os.stat(reader.path).st_mtime
        except FileNotFoundError:
            return  # gone: the next discovery drops the session
        except OSError as error:
            self._warnings.warn(
                (session_id, "unreadable"), "session %s: cannot read its log: %s",
                session_id, error.strerror,
            )
            return
        if session.turns.open_count and now - modified >= self.idle_timeout_s:
            self._report(session.turns.finish_open())

    def _line(self, session_id: str, session: Session, line) -> None:
        if line.oversized:
            record = events.Malformed("oversized") if events.may_matter(line.data) else None
        else:
            record = events.parse_line(line.data)
        if record is None:
            self.metrics.count_line("ignored")
            return
        if isinstance(record, events.Malformed):
            self.metrics.count_line("malformed", record.reason)
            self._warnings.warn(
                (session_id, record.reason), "session %s: skipped line %d of events.jsonl: %s",
                session_id, line.number, record.reason,
            )
            return
        self.metrics.count_line("fusion")
        self.metrics.count_event(record)
        self._warn_drift(record)
        if isinstance(record, events.UnknownFusionEvent):
            return
        self._report(session.turns.feed(record))

    def _warn_drift(self, record: events.Event) -> None:
        """Warn once per kind of drift: the metrics count every occurrence."""
        notes = [("unknown event type", record.event_type)] if isinstance(
            record, events.UnknownFusionEvent
        ) else []
        notes += [(f"unknown field on {record.event_type}", f) for f in record.unknown_fields]
        notes += [(f"missing field on {record.event_type}", f) for f in record.missing_fields]
        for kind, name in notes:
            if (kind, name) not in self._warned_drift and len(self._warned_drift) < 1000:
                self._warned_drift.add((kind, name))
                log.warning("log format drift: %s: %s (the CLI may have changed)", kind, name)

    def _report(self, turns: list[Turn]) -> None:
        for turn in turns:
            self.on_turn(turn)
