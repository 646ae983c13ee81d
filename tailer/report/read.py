"""Read session logs into the turns a report covers, the way the daemon reads them.

The same stages as the daemon (tailer/turns/sessions.py): files -> lines -> events -> turns, through
the same SessionLog (tailer/turns/session_log.py), so with the same rules: damaged lines are
skipped and counted, unknown fusion events ignored, a log the CLI rewrote is read again
without reporting its turns twice. What differs is the end: a
report reads each log to its end and finishes a turn still open there as `incomplete`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterator

from ..records import field, record
from ..copilot.event_values import LATEST_NS
from ..turns import session_state
from ..turns.session_log import SessionLog
from ..turns.assembly import IDLE_TIMEOUT_S
from ..turns.assembly import Turn
from ..turns.reconciliation import Reconciliation
from ..turns.in_flight import running


@record(frozen=True)
class Selection:
    """Which turns a report covers. None is no limit; times are unix nanoseconds."""

    since_ns: int | None = None
    until_ns: int | None = None
    session: str | None = None  # a session id or the start of one
    model: str | None = None  # part of a model's name, any case
    pattern: str | None = None  # a report pattern (report_pattern), any case

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
        return self.wants_figures(turn.session_id, turn.start_ns, report_pattern(turn),
                                  lambda: turn.models)

    def wants_figures(self, session_id: str, start_ns: int, pattern: str,
                      models: Callable[[], list[str]]) -> bool:
        """`wants` on what a turn's row keeps of it (the report's cache holds rows, not
        turns); `models` is asked only when --model is given."""
        if not self.wants_session(session_id):
            return False
        if self.since_ns is not None and start_ns < self.since_ns:
            return False
        if self.until_ns is not None and start_ns >= self.until_ns:
            return False
        if self.pattern is not None and pattern.lower() != self.pattern.lower():
            return False
        if self.model is not None:
            return any(self.model.lower() in model.lower() for model in models())
        return True


def report_pattern(turn: Turn) -> str:
    """The pattern a report shows and filters on: the turn's (Turn.pattern: a route failure's
    is `fallback`), or `ordinary` for a prompt answered without fusion."""
    return turn.kind if turn.ordinary else turn.pattern


@record(slots=True)
class Found:
    """What reading one log found besides its turns since it was first read (or read again
    from its start, after `forget`): the CLI's totals checked, the damaged lines skipped,
    and why the last read could not read the log, in the words every command uses
    (tailer/turns/session_log.py). Per log, so that a watch counts only the logs there.

    The reader's checks are Reconciliations; where a watch shows a log's figures they are
    the report's Checks (checks.check_figures), in this same record: one place for what a
    report counts of a log besides its turns."""

    checks: list = field(factory=list)  # of Reconciliation, or of the report's Check
    damaged_lines: int = 0
    problem: str | None = None


class SessionReader:
    """Reads session logs into finished turns, each through its SessionLog as the daemon does.

    It keeps each log's SessionLog, so reading a log again costs only what was appended
    since (which is what --watch needs), and what reading it found (`found`).
    """

    def __init__(self) -> None:
        self._logs: dict[str, SessionLog] = {}
        self._found: dict[str, Found] = {}

    def found(self, session_id: str) -> Found:
        """What reading the session's log found (nothing before it is read)."""
        found = self._found.get(session_id)
        return found if found is not None else Found()

    @property
    def reconciliations(self) -> list[Reconciliation]:
        """The CLI's totals checked, of every log read, log after log."""
        return [check for found in self._found.values() for check in found.checks]

    @property
    def problems(self) -> dict[str, str]:
        """Session id -> why its log could not be read, of every log read."""
        return {session_id: found.problem for session_id, found in self._found.items()
                if found.problem is not None}

    @property
    def damaged_lines(self) -> int:
        """The damaged lines skipped, of every log read."""
        return sum(found.damaged_lines for found in self._found.values())

    def resume(self, session_id: str, path: Path, saved: dict) -> None:
        """Read the log on from where `saved` (`state`) left off, as the daemon resumes
        from its checkpoint (the report's cache). ValueError, KeyError or TypeError when
        `saved` is not shaped as `state` gives it (session_state.check)."""
        session_state.check({"sessions": {session_id: saved}})
        self._logs[session_id] = SessionLog.from_state(session_id, path, saved)

    def state(self, session_id: str) -> dict:
        """Where reading the log stands, to `resume` from later: its position, open turns,
        the keys of the turns it finished and its context (tailer/turns/session_state.py)."""
        return self._logs[session_id].to_state()

    def reached(self, session_id: str) -> int:
        """How far into its log the read under way has got, for another thread to look at
        (SessionLog.reached); 0 before the log is first read."""
        log = self._logs.get(session_id)
        return log.reached if log is not None else 0

    def rewritten(self, session_id: str) -> bool:
        """Whether the log was found rewritten (and read again from its start) since it
        was first read or resumed."""
        log = self._logs.get(session_id)
        return log is not None and log.generation > 0

    def read(self, session_id: str, path: Path,
             on_rewritten: Callable[[], object] | None = None) -> Iterator[Turn]:
        """The turns the lines appended since the last read finish (often none), each as
        soon as it does: a log of thousands of turns is never held as all their records.

        A log found rewritten (truncated, replaced) is read on from its start without the
        turns finished before, as the daemon must read it; with `on_rewritten`, it is read
        as a new log instead (`forget`), every turn of it handed out, and `on_rewritten`
        called before the first of them: the caller drops what it kept of the old content
        and reads the log once, where reading on and again from its start read it twice."""
        log = self._logs.get(session_id)
        if log is None:
            log = self._logs[session_id] = SessionLog(session_id, path)
        # A model call or tool read the short way is nothing to a report but the turn it
        # joined: not handed out (every record's time is before LATEST_NS). The damage and
        # the checks of the CLI's totals are the log's own counts.
        found = self._found.setdefault(session_id, Found())
        damaged, generation = sum(log.damage.values()), log.generation
        try:
            for read in log.read(quiet_until_ns=LATEST_NS):
                if on_rewritten is not None and log.generation != generation:
                    break  # before the new content finishes a turn: none is handed out twice
                yield from read.finished
        finally:
            found.damaged_lines += sum(log.damage.values()) - damaged
            found.checks += log.turns.take_reconciliations()
        if on_rewritten is not None and log.generation != generation:
            self.forget(session_id)
            on_rewritten()
            yield from self.read(session_id, path)
        else:
            found.problem = log.problem

    def forget(self, session_id: str) -> None:
        """Forget where reading one log stands (its open turns, the keys of the turns it
        finished) and what it found: the next read reads it from its start, as a new log."""
        self._logs.pop(session_id, None)
        self._found.pop(session_id, None)

    def finish(self, session_id: str) -> list[Turn]:
        """Finish the open turns of one session as they stand (`incomplete` without a rollup)."""
        log = self._logs.get(session_id)
        return log.finish_open() if log is not None else []

    def finish_if_idle(self, session_id: str, now: float) -> list[Turn]:
        """Finish the open turns of a session whose log has been quiet for the idle timeout."""
        log = self._logs.get(session_id)
        return log.finish_if_idle(now, IDLE_TIMEOUT_S) if log is not None else []

    def in_flight(self) -> list[Turn]:
        """The turns running in the logs read so far: begun and neither ended nor idle."""
        return [turn for log in self._logs.values() for turn in log.turns.open_turns
                if running(turn)]

    def answered(self) -> list[Turn]:
        """The open turns of the logs read so far that have answered but may still grow: an
        ordinary turn, open until the next prompt (see in_flight.running)."""
        return [turn for log in self._logs.values() for turn in log.turns.open_turns
                if not running(turn)]

    def finish_at_end(self, session_id: str, now: float) -> list[Turn]:
        """At the end of a log: every open turn when the log is idle, else those that are no
        longer running (an answered ordinary turn, whose next prompt is still to come)."""
        log = self._logs.get(session_id)
        if log is None:
            return []
        return log.finish_if_idle(now, IDLE_TIMEOUT_S) or log.turns.finish_where(
            lambda turn: not running(turn))

    def open_turns(self, session_id: str) -> int:
        log = self._logs.get(session_id)
        return log.turns.open_count if log is not None else 0

    def skipped(self) -> dict[str, int]:
        return {"damaged_lines": self.damaged_lines, "unreadable_logs": len(self.problems)}
