"""One session's log read into turns: the one rule every command reads a log by.

The daemon (tailer/turns/sessions.py), `report` and `report --watch` (tailer/report/read.py,
tailer/report/live.py), `doctor`, `scrub` and the demo all read a log through a
`SessionLog`, so they agree on what a line means:

- a line is judged by `judge`: a record, damage (`event_records.Malformed`, counted by its reason
  in `damage`), or nothing that matters; an oversized line is damage only if it may have
  mattered; a line the tailer fails on (a bug) is damage `internal_error`, never a crash;
- a log the CLI rewrote or replaced is read again from its start, its open turns
  forgotten, the turns it already finished never finished again (SessionTurns keeps them);
- a log that cannot be read leaves its `problem`, one line in the words of the shared
  vocabulary (tailer/copilot/problems.py), which every command prints as it is;
  a log that vanished is no problem: its session simply ends;
- open turns are finished as `incomplete` when the log has been quiet for the idle
  timeout (`finish_if_idle`), or when the caller is done with the log (`finish_open`).

What a command does with the turns and the counts is its own business.
"""

from __future__ import annotations

import os

from ..copilot import event_records, event_types, events
from . import session_state
from ..copilot.call_lines import call_record
from ..copilot.lines import Line, LineReader, Position, open_regular
from ..copilot.problems import log_problem
from ..records import TupleRecord
from .assembly import SessionTurns, Turn

TYPE_CHECKING = False  # as in copilot/lines.py: neither typing nor pathlib at run time
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Iterator

INTERNAL_ERROR = "internal_error"



# -- Reading ---------------------------------------------------------------------------------


def judge(line: Line) -> event_records.Event | event_records.Malformed | None:
    """What a line is: a record, damage, or None for a line that cannot matter."""
    if line.oversized:
        return event_records.Malformed("oversized") if event_types.may_matter(line.data) else None
    return events.parse_line(line.data)


class Read(TupleRecord):
    """One line handed out by `SessionLog.read` (a Line), with what it became (an Event, a
    Malformed or None) and the turns it finished (a list of Turn). `error_type` names the
    exception when the tailer failed on it (a bug), else None."""

    __slots__ = ()
    _fields = ("line", "record", "finished", "error_type")

    def __new__(cls, line: Line, record, finished: list[Turn], error_type: str | None = None):
        return tuple.__new__(cls, (line, record, finished, error_type))


_NONE: list[Turn] = []  # what most lines finish; never added to
# A Read made without the Python frame of its __new__, for every record of a log
# (as copilot/lines.py makes its lines).
_new_read = tuple.__new__


class SessionLog:
    """A session's log, where we are in it, and its turns; see the module docstring.

    By default only the lines that may be records are handed out (event_types.may_be_read);
    `every_line` hands out all of them, for a command that looks at every line (doctor,
    scrub).
    """

    __slots__ = ("session_id", "reader", "turns", "damage", "error", "quiet_records",
                 "newest_quiet_ns")

    def __init__(self, session_id: str, path: Path, position: Position = Position(),
                 turns: SessionTurns | None = None, *, every_line: bool = False):
        self.session_id = session_id
        self.reader = LineReader(path, position, None if every_line else event_types.may_be_read)
        self.turns = turns if turns is not None else SessionTurns(session_id)
        self.quiet_records = 0  # of the last read: see `read`
        self.newest_quiet_ns = 0
        self.damage: dict[str, int] = {}  # reason -> damaged lines
        self.error: OSError | None = None  # why the last read could not read the log

    @classmethod
    def from_state(cls, session_id: str, path: Path, saved: dict) -> "SessionLog":
        """Resume where `to_state` left off (`saved` checked by session_state.check)."""
        return cls(session_id, path, Position.from_data(saved["position"]),
                   session_state.turns_from_state(session_id, saved))

    def to_state(self) -> dict:
        return session_state.session_to_state(self.reader.position, self.turns)

    @property
    def path(self) -> Path:
        return self.reader.path

    @property
    def reached(self) -> int:
        """How far into the log the read under way has got (LineReader.reached)."""
        return self.reader.reached

    @property
    def generation(self) -> int:
        """Goes up each time the log is found rewritten and read again from its start."""
        return self.reader.generation

    @property
    def problem(self) -> str | None:
        """Why the last read could not read the log, in the vocabulary's words."""
        return None if self.error is None else log_problem(self.session_id, self.error)

    def read(self, quiet_until_ns: int = -1) -> Iterator[Read]:
        """Each line appended since the last read that became something (every line with
        `every_line`), judged and fed to the session's turns.

        A model call or tool event read the short way (never damage, no notes, finishing
        no turn) and written at or before `quiet_until_ns` is not handed out: it is counted
        in `quiet_records`, the newest of their times kept in `newest_quiet_ns`. For the
        daemon and the report, to which such a record is a line to count and a time: they
        are most of a log's records, and handing each out cost some 6% of a backfill's
        bytecodes and 2.5% of a cold report's.

        Stopping early is fine: the next read goes on after the last line handed out. A
        log that cannot be read sets `error`; one that is gone does not. This is the loop
        every record of every log goes through: kept to what must run per line.
        """
        self.error = None
        self.quiet_records = self.newest_quiet_ns = 0
        reader, turns, every_line = self.reader, self.turns, self.reader.wanted is None
        take_call, take_tool = turns.call, turns.tool
        malformed, unknown = event_records.Malformed, event_records.UnknownFusionEvent
        model_call = event_records.ModelCall
        generation = reader.generation
        try:
            for line in reader.read():
                if reader.generation != generation:
                    generation = reader.generation
                    turns.forget_open()
                finished = _NONE
                try:
                    # Most records are model calls and tool events: read the short way, and
                    # taken by the turns without feed's tests. judge reads any other line.
                    record = None if line.oversized else call_record(line.data)
                    if record is None:
                        record = judge(line)
                        kind = type(record)
                        if kind is malformed:
                            self.damage[record.reason] = self.damage.get(record.reason, 0) + 1
                        elif record is not None and kind is not unknown:
                            finished = turns.feed(record) or _NONE
                    else:
                        if record.__class__ is model_call:
                            take_call(record)
                        else:
                            take_tool(record)
                        if record.time_ns <= quiet_until_ns:
                            self.quiet_records += 1
                            if record.time_ns > self.newest_quiet_ns:
                                self.newest_quiet_ns = record.time_ns
                            continue
                except Exception as error:  # a bug must cost one line, not the command
                    self.damage[INTERNAL_ERROR] = self.damage.get(INTERNAL_ERROR, 0) + 1
                    yield Read(line, malformed(INTERNAL_ERROR), _NONE, type(error).__name__)
                    continue
                if record is not None or every_line:
                    yield _new_read(Read, (line, record, finished, None))
        except FileNotFoundError:
            pass  # gone: the session ends
        except OSError as error:  # unreadable, or not a regular file
            self.error = error
        if reader.generation != generation:
            self.turns.forget_open()

    def skip_to_end(self) -> None:
        """Start at the log's end (the daemon's start without saved state)."""
        try:
            self.reader.skip_to_end()
        except OSError:
            pass  # reading it reports the problem

    def finish_open(self) -> list[Turn]:
        """Finish the open turns as they stand (`incomplete` without a rollup)."""
        return self.turns.finish_open()

    def finish_if_idle(self, now: float, idle_timeout_s: float) -> list[Turn]:
        """Finish the open turns when the log has not changed for `idle_timeout_s`."""
        if not self.turns.open_count or not self.idle(now, idle_timeout_s):
            return []
        return self.turns.finish_open()

    def idle(self, now: float, idle_timeout_s: float) -> bool:
        """Whether the log has not changed for `idle_timeout_s` (not when it cannot be
        looked at: its read says why)."""
        try:
            modified = os.stat(self.reader.path).st_mtime
        except OSError:
            return False
        return now - modified >= idle_timeout_s


HEAD_LINES, HEAD_BYTES = 8, 65_536


def holds_no_event(path: Path) -> bool:
    """Whether the log has lines and none of its first HEAD_LINES (within HEAD_BYTES) is an
    event: random bytes, or another program's file, where the CLI starts every log with
    `session.start`. For a log that gave a command nothing (a fuller test, every line, is
    doctor's); cheap: a real log decides on its first line. False when it cannot be read
    (reading it says why)."""
    try:
        with open_regular(path) as log:  # a FIFO put there would never answer
            head = log.read(HEAD_BYTES)
            whole = not log.read(1)
    except OSError:
        return False
    lines = head.split(b"\n")
    if not whole:
        lines.pop()  # cut short by HEAD_BYTES: not a line
    lines = [line for line in lines if line.strip()][:HEAD_LINES]
    return bool(lines) and not any(event_types.event_type_of(line.strip(b"\0 \t\r"))
                                   for line in lines)


def finish_tombstone(session_id: str, saved: dict) -> list[Turn]:
    """Finish the open turns of a session whose log vanished, in its saved state too."""
    turns = session_state.turns_from_state(session_id, saved)
    finished = turns.finish_open()
    saved["open"], saved["finished"] = [], turns.finished
    return finished
