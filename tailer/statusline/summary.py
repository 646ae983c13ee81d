"""The session log read on into the status line's snapshot, through its SessionLog.

Imported only when the log changed since the last refresh: the reading stages are most of
what the footer's command would otherwise import. The log is read the one way every command
reads one (tailer/turns/session_log.py), on from where the saved state says reading stopped
(as the report's cache resumes: SessionLog.from_state), or from its start: without a state,
when the log is another file now (device, inode), or when reading finds it rewritten, in
which case the state's sums are dropped with it.

Reading stops at `deadline` when more than LEFT_BYTES are still to read, and goes on at
the next refresh, so a first look at a log of hundreds of MB costs each refresh a bounded
time (the line says how far it got) instead of one refresh seconds, or all of them, were
the CLI to kill it at 10 s before it saved. What is left under LEFT_BYTES is read to the
end: a refresh that merely ran late shows the turn, not "reading".

The figures are the report's (tailer/report/figures.py), for the turns of this session:
a finished HydraFusion turn's credits are its legs', an ordinary turn's its calls'; the
review share is the credits of legs whose answer was not kept over all legs' credits. A
turn still open counts what its calls have spent so far.
"""

from __future__ import annotations

import time

from ..fast_json import dumps, loads
from ..printable import printable
from ..turns.assembly import IDLE_TIMEOUT_S, Turn
from ..turns.in_flight import in_flight, running
from ..turns.session_log import SessionLog
from ..saved_state import mapping, sequence, whole
from .view import MAX_TEXT, LegView, Snapshot, TurnView

FAILED_STATUSES = ("failed", "cancelled")
LEFT_BYTES = 1 << 20  # some 10 ms of reading


class Reading:
    """Where reading one log stands: its SessionLog, the sums of the turns it finished
    (credits of the session, of HydraFusion legs, of legs whose answer was not kept) and the
    last of those turns."""

    __slots__ = ("log", "session_nano", "leg_nano", "review_nano", "last", "resumed")

    def __init__(self, log: SessionLog, sums: tuple[int, int, int] = (0, 0, 0),
                 last: TurnView | None = None, resumed: bool = False):
        self.log, self.last, self.resumed = log, last, resumed
        self.session_nano, self.leg_nano, self.review_nano = sums

    def count(self, turn: Turn) -> None:
        """A turn the log finished: into the sums, and the last turn."""
        view = finished_view(turn)
        self.session_nano += view.nano_aiu
        if not turn.ordinary:
            self.leg_nano += view.nano_aiu
            self.review_nano += turn.review_nano_aiu
        self.last = _latest([self.last, view] if self.last else [view])

    def to_data(self) -> bytes:
        data = {"log": self.log.to_state(), "sums": [self.session_nano, self.leg_nano, self.review_nano],
                "last": None if self.last is None else self.last.to_data()}
        return dumps(data).encode("ascii")


def resumed(session_id: str, path: str, data: bytes) -> Reading:
    """The reading `Reading.to_data` saved; ValueError, KeyError or TypeError when it is
    not shaped as saved (its SessionLog part checked by session_state, as the report's is)."""
    from ..turns import session_state

    saved = mapping(loads(data), "a reading")
    session_nano, leg_nano, review_nano = (whole(number, "a sum of credits")
                                           for number in sequence(saved["sums"], "the sums"))
    if review_nano > leg_nano:
        raise ValueError("the review credits are more than the legs' credits")
    position, turns = session_state.checked_session(session_id, saved["log"])
    last = None if saved["last"] is None else TurnView.from_data(saved["last"])
    return Reading(SessionLog(session_id, path, position, turns),
                   (session_nano, leg_nano, review_nano), last, resumed=True)


def fresh(session_id: str, path: str) -> Reading:
    return Reading(SessionLog(session_id, path))


def read_on(reading: Reading, deadline: float, size: int) -> tuple[Reading, bool]:
    """Read the lines appended since, until the log's end or `deadline` (time.monotonic)
    with more than LEFT_BYTES of its `size` left; the reading (a fresh one when the log was
    found rewritten) and whether it reached the end. Raises OSError when the log cannot be
    read."""
    lines = reading.log.read()
    reader = reading.log.reader
    wanted = reader.wanted
    done = True

    def wanted_in_time(line: bytes) -> bool:
        # The lines the reader skips never reach the loop below, and most of a log's bytes
        # are such lines (the assistant's messages, tools' output): read through they were
        # seconds of one refresh. A line skipped is consumed, so stopping at one loses none.
        if wanted(line):
            return True
        if time.monotonic() > deadline and size - reader.reached > LEFT_BYTES:
            raise _OutOfTime
        return False

    reader.wanted = wanted_in_time
    try:
        for read in lines:
            for turn in read.finished:
                reading.count(turn)
            if time.monotonic() > deadline and size - reader.offset > LEFT_BYTES:
                done = False
                break
    except _OutOfTime:
        done = False
    finally:
        lines.close()
        reader.wanted = wanted
    if reading.log.error is not None:
        raise reading.log.error
    if reading.resumed and reading.log.generation:
        # Rewritten: what the saved sums held of it may be gone from it. From its start.
        return read_on(fresh(reading.log.session_id, reading.log.path), deadline, size)
    return reading, done


class _OutOfTime(Exception):
    """The read's budget spent on lines the reader skips (read_on)."""


def snapshot(reading: Reading, mtime_ns: int, now_ns: int, percent: int | None) -> Snapshot:
    """What the line shows once `reading` has read what it could: the latest turn running,
    the latest that answered (finished, or an ordinary one open until the next prompt), the
    sums with what the open turns spent so far; `percent` read while catching up. With a
    turn running, also what it shows once the log is idle: every open turn finished as it
    stands, counted as a finished turn is."""
    open_turns = reading.log.turns.open_turns
    flying = max((turn for turn in open_turns if running(turn)), key=_started, default=None)
    answered = [finished_view(turn) for turn in open_turns if not running(turn)]
    idle = None
    if flying is not None:
        ended = Reading(reading.log, (reading.session_nano, reading.leg_nano, reading.review_nano),
                        reading.last)
        for turn in sorted(open_turns, key=_started):
            ended.count(turn)
        idle = Snapshot(None, ended.last, ended.session_nano, ended.leg_nano, ended.review_nano,
                        percent)
    return Snapshot(
        flying=None if flying is None else flying_view(flying, now_ns),
        last=_latest([*answered, *([reading.last] if reading.last else [])]),
        session_nano=reading.session_nano + sum(turn.calls_usage.nano_aiu for turn in open_turns),
        leg_nano=reading.leg_nano, review_nano=reading.review_nano, reading=percent,
        idle_at_ns=mtime_ns + int(IDLE_TIMEOUT_S * 1e9), idle=idle)


def _latest(views: list[TurnView]) -> TurnView | None:
    """The turn that started last (of two that started together, the later one listed)."""
    latest = None
    for view in views:
        if latest is None or view.start_ns >= latest.start_ns:
            latest = view
    return latest


def _started(turn: Turn) -> int:
    return turn.start_ns


def finished_view(turn: Turn) -> TurnView:
    """A turn as it stands, as the line shows a turn that answered (or went idle)."""
    legs = [LegView("done", _code(leg.phase_kind) or "unknown", _code(leg.model),
                    _code(leg.verdict), leg.usage.nano_aiu, leg.status in FAILED_STATUSES)
            for leg in turn.legs]
    answer = next((index for index, leg in enumerate(turn.legs) if turn.is_committed(leg)), -1)
    if turn.ordinary:
        nano, model = turn.calls_usage.nano_aiu, _code(turn.main_model)
    else:
        nano, model = sum(leg.usage.nano_aiu for leg in turn.legs), _code(turn.response_model)
    return TurnView(turn.kind, _pattern(turn), _code(turn.outcome) or "unknown", turn.start_ns,
                    nano, turn.credits_known, model, answer, legs)


def flying_view(turn: Turn, now_ns: int) -> TurnView:
    """A turn in flight, leg by leg (tailer/turns/in_flight.py), its calls' credits so far."""
    now = in_flight(turn, now_ns)
    legs = [LegView(leg.state, _code(leg.kind) or "unknown", _code(leg.model), _code(leg.verdict),
                    leg.nano_aiu) for leg in now.legs]
    model = _code(turn.calls[-1].model) if turn.calls else None
    return TurnView(now.kind, _pattern(turn), "running", now.start_ns, now.calls_nano_aiu,
                    now.credits_known, model, -1, legs)


def _pattern(turn: Turn) -> str:
    """The report's pattern (report/read.py's report_pattern): `ordinary` without fusion."""
    return _code(turn.kind if turn.ordinary else turn.pattern) or "unknown"


def _code(value: str | None) -> str | None:
    """A code of the log as the line shows it: printable, at most MAX_TEXT characters."""
    return printable(value)[:MAX_TEXT] or None if value else None
