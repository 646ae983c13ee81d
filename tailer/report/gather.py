"""The turns of a report: from the cache where a log is unchanged, read where it is not, in
worker processes when there are several logs to read.

Each log to read is read on from where the cache says reading stopped (the daemon's own
resume: SessionReader.resume), or from its start: without a cache entry, with `--no-cache`,
when the log is another file now (device, inode), or when reading finds it rewritten (the
position's digest), in which case what the cache held of it is dropped with it. Either
way the one reading path is SessionReader over SessionLog (tailer/report/read.py).

A worker sends back a LogRead: rows, the state to resume from and counts, never Turns with
their records, so parent and workers stay small. Results are merged in the order of the
session ids, whatever order they came in, so the report is the same for any --jobs. A
worker that dies or fails ends the report with WorkerFailed: never a smaller report; and
the workers end with the report, however it ends (tailer/report/workers.py).

How far reading has got is in a Reading, which a progress line looks at from a thread of its
own while the logs are read (command.Progress): inside each log too, never per line.
"""

from __future__ import annotations

import functools
import gc
import json
import os
from contextlib import contextmanager
from datetime import tzinfo
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping

from ..records import field, record
from ..printable import printable
from ..private_files import NotPrivate
from ..saved_state import parsed
from ..turns import session_state
from ..turns.assembly import IDLE_TIMEOUT_S, Turn
from ..turns.in_flight import running
from ..turns.copies import first_open_per_key, fullness
from . import cache
from .cache import LogEntry
from .checks import Check, check_figures
from .rows import TurnRow, row_from_data, turn_data
from .read import Selection, SessionReader

# A worker starts as a copy of this process (the only way that does not run the command
# line again in each worker); where there is no fork, logs are read in this process.
CAN_FORK = hasattr(os, "fork")
JOBS_PER_CPU = 4


class WorkerFailed(Exception):
    """A worker process died or failed: the report cannot be whole. The message is one line."""


def default_jobs() -> int:
    """The CPUs this process may use (os.process_cpu_count from Python 3.13)."""
    count = getattr(os, "process_cpu_count", os.cpu_count)()
    return count or 1


def pool_size(workers: int, jobs: int) -> int:
    """The worker processes to start for `jobs` logs when `workers` are asked for: never
    more than there are logs, nor more than JOBS_PER_CPU per CPU, which would only share
    the cores and multiply the memory (`--jobs 99999` is not 99,999 processes)."""
    return min(workers, jobs, JOBS_PER_CPU * default_jobs())


@record(frozen=True)
class Job:
    """A log to read, from the state the cache holds, as its JSON (None: from its start)."""

    session_id: str
    path: Path
    state: bytes | None
    to_read: int  # bytes past where reading stopped: the biggest jobs go first


@record
class LogRead:
    """What reading one log gave (see LogEntry); `fresh`: read from its start, so it
    replaces what the cache held of the log instead of adding to it."""

    session_id: str
    fresh: bool
    turns: list[list]
    open_turns: list[list]
    checks: list[list]
    damaged_lines: int
    state: bytes  # the JSON of SessionReader.state
    read_to: int  # the offset reading stopped at
    problem: str | None  # why the log could not be read: it then gives nothing


class Reading:
    """How far the reading of the logs has got, for a progress line drawn by another thread
    while it runs: the logs to read and their sizes, those read whole, and how far into its
    log each reading under way is. A worker's progress comes as it sends it (read_all);
    the log read in this process is looked at through its reader's file position
    (SessionReader.reached), so reading does nothing for it, line by line or otherwise."""

    def __init__(self, sizes: dict[str, int]):
        self.sizes = sizes  # session id -> its log's size, as the log was listed
        self.logs_read = 0
        self.bytes_read = 0  # of the logs read whole
        self.into: dict[str, int] = {}  # session id -> how far into its log a worker is
        self._here: tuple[SessionReader, str] | None = None  # the log this process reads

    def bytes(self) -> int:
        """How many bytes have been read: those of the logs read, and into those under way
        (a log read on from the cache counts from its start)."""
        return self.bytes_read + sum(list(self.into.values())) + self.here()

    def here(self) -> int:
        """How far into its log the reading in this process is (0: none under way)."""
        here = self._here
        return here[0].reached(here[1]) if here is not None else 0

    def reads(self, reader: SessionReader, session_id: str) -> None:
        self._here = reader, session_id

    def into_log(self, job: Job, reached: int) -> None:
        self.into[job.session_id] = reached

    def log_read(self, job: Job) -> None:
        self.bytes_read += self.sizes.get(job.session_id, 0)
        self.logs_read += 1
        self.into.pop(job.session_id, None)
        self._here = None


def read_log(job: Job, reading: Reading | None = None) -> LogRead:
    """Read one log to its end, in a worker or in this process, looked at by `reading`.

    With the cycle collector paused (lasting_objects): reading makes objects by the million
    and frees them as its turns end, with no cycle among them, and what it keeps, the rows,
    lasts as long as the report (the collector's walks were some 2% of a cold report's CPU
    time, the peak memory the same without them)."""
    with lasting_objects():
        return _read_log(job, reading)


def _read_log(job: Job, reading: Reading | None) -> LogRead:
    reader = SessionReader()
    if reading is not None:
        reading.reads(reader, job.session_id)
    state = job.state
    if state is not None:
        try:
            reader.resume(job.session_id, job.path, parsed(state))
        except (ValueError, KeyError, TypeError):
            state = None  # not shaped as saved: read the log from its start
    turns: list[list] = []

    def read_from_its_start() -> None:  # rewritten since the cache's read: read once, whole
        nonlocal state
        state = None
        turns.clear()

    for turn in reader.read(job.session_id, job.path, on_rewritten=read_from_its_start):
        turns.append(turn_data(turn))
    read_state = reader.state(job.session_id)
    saved = json.dumps(read_state, separators=(",", ":")).encode("ascii")
    open_turns = [turn_data(turn) for turn in reader.finish(job.session_id)]
    return LogRead(job.session_id, state is None, turns, open_turns,
                   [cache.check_data(check_figures(check)) for check in reader.reconciliations],
                   reader.damaged_lines, saved, read_state["position"][0],
                   reader.problems.get(job.session_id))


def read_all(jobs: list[Job], workers: int, reading: Reading) -> dict[str, LogRead]:
    """Every job's LogRead, by session id: in `workers` processes (tailer/report/workers.py),
    the biggest jobs first, or in this one when there is one worker or one job; how far
    it has got in `reading`. Raises WorkerFailed."""
    if workers == 1 or len(jobs) < 2 or not CAN_FORK:
        reads = {}
        for job in jobs:
            reads[job.session_id] = read_log(job, reading)
            reading.log_read(job)
        return reads
    # Imported here, where workers start: pickle and the rest cost start-up that a warm
    # report, which reads in this process, would pay for nothing.
    from .workers import CannotStart, JobFailed, Pool, WorkerDied

    # Each worker's copy of `reading` looks at its own reader, and sends what it sees.
    pool = Pool(pool_size(workers, len(jobs)), functools.partial(read_log, reading=reading),
                progress=reading.here)
    reads = {}
    try:
        with pool:
            for job, read in pool.run(sorted(jobs, key=lambda job: -job.to_read),
                                      on_progress=reading.into_log):
                reads[job.session_id] = read
                reading.log_read(job)
    except CannotStart as error:
        raise WorkerFailed(f"cannot start the processes that read the session logs "
                           f"({error.args[0]}): no report; --jobs 1 reads in one process") from None
    except WorkerDied as error:
        raise WorkerFailed(f"a process reading the session logs stopped ({error}): no report; "
                           "--jobs 1 reads in one process") from None
    except JobFailed as error:
        job, name = error.args
        raise WorkerFailed(f"reading session {printable(job.session_id)} failed ({name}): "
                           "no report") from None
    return reads


@record
class Refreshed:
    """The cache's entries brought up to date with the logs, and what reading found."""

    entries: dict[str, LogEntry]  # session id -> its entry, for every listed log with one
    problems: dict[str, str]  # session id -> why its log could not be read
    changed: bool  # whether the entries differ from the cache's file


def refresh(logs: Mapping[str, Path | str], wanted: set[str], entries: dict[str, LogEntry], *,
            workers: int, on_reading: Callable[[Reading], None] | None = None,
            looked: dict[str, tuple[os.stat_result, int]] | None = None,
            now: float | None = None) -> Refreshed:
    """Bring the entries of the `wanted` sessions of `logs` (every log of the state folder,
    its path by session id; as text for --watch, as the watcher gives it) up to date,
    reading only the logs that changed since their entry was made; drop the entries of
    sessions no longer listed. `on_reading` is given the Reading of the logs about to be
    read (how far reading has got, as it goes). `looked`: stats of logs taken already (watch.Changes's),
    by session id, each with the time just before it; the others are stat'ed here. `now`
    (unix seconds): the entries' states that `gather` will read at that time are checked
    first, and their logs read again when they are not as saved. Raises WorkerFailed."""
    looked = looked or {}
    kept = {session_id: entries[session_id] for session_id in logs.keys() & entries.keys()}
    refreshed = Refreshed(kept, {}, kept.keys() != entries.keys())
    identities: dict[str, tuple[list[int], int]] = {}  # session id -> its log's identity, when
    jobs = []
    for session_id in sorted(wanted):
        path, entry = logs[session_id], kept.get(session_id)
        try:
            identities[session_id] = (cache.identity_of(*looked[session_id]) if session_id in looked
                                      else cache.identity(path))
        except FileNotFoundError:
            refreshed.changed |= kept.pop(session_id, None) is not None  # gone since listed
            continue
        except OSError:
            identities[session_id] = [0, 0, 0, 0, 0], 0  # reading it says why
        if entry is not None and entry.unchanged(identities[session_id][0]) and (
                now is None or _state_holds(session_id, entry, now)):
            continue
        jobs.append(_job(session_id, Path(path), entry, identities[session_id][0]))
    reading = Reading({job.session_id: identities[job.session_id][0][2] for job in jobs})
    if on_reading is not None:
        on_reading(reading)
    for session_id, read in sorted(read_all(jobs, workers, reading).items()):
        if read.problem is not None:
            refreshed.problems[session_id] = read.problem
            kept.pop(session_id, None)  # nothing of a log that cannot be read is reported
        else:
            kept[session_id] = _merged(kept.get(session_id), read, *identities[session_id])
        refreshed.changed = True
    return refreshed


@record
class Gathered:
    """The wanted turns of a report and what reading found, in the order of the session ids."""

    rows: list[TurnRow] = field(factory=list)
    in_flight: list[Turn] = field(factory=list)  # open at the logs' ends, running
    checks: list[Check] = field(factory=list)
    damaged_lines: int = 0
    problems: dict[str, str] = field(factory=dict)  # session id -> why it was not read
    cache_problem: str | None = None  # one line: the cache was ignored, or not saved
    states: dict[str, bytes] = field(factory=dict)  # session id -> its log's state (ledger.py)


def gather(logs: dict[str, Path], wanted: set[str], selection: Selection, tz: tzinfo | None, *,
           now: float, cache_path: Path | None, workers: int,
           on_reading: Callable[[Reading], None] | None = None) -> Gathered:
    """The report's turns: those `selection` wants of the `wanted` sessions of `logs`, rows
    in the time zone `tz`, through the cache at `cache_path` (None: no cache, nothing read
    from it or written). A turn open at the end of its log is finished as `incomplete` when
    the log has been quiet for the idle timeout at `now` (unix seconds), and is in flight
    while it runs (read.SessionReader.finish_at_end's rule). See `refresh`. Raises
    WorkerFailed."""
    refreshed, cache_problem = through_cache(cache_path, logs, wanted, workers=workers,
                                             on_reading=on_reading, now=now)
    gathered = Gathered(problems=refreshed.problems, cache_problem=cache_problem)
    rows = OnePerTurn()
    with lasting_objects():
        for session_id in sorted(wanted & refreshed.entries.keys()):
            entry = refreshed.entries[session_id]
            gathered.damaged_lines += entry.damaged_lines
            gathered.checks += map(cache.check_from_data, entry.checks)
            gathered.states[session_id] = entry.state
            ending, flying = _at_end(session_id, entry, now)
            for row, _ in wanted_rows(entry.turns + ending, selection, tz):
                rows.add(row)
            gathered.in_flight += filter(selection.wants, flying)
    gathered.rows = rows.rows
    gathered.in_flight = rows.open_ones(gathered.in_flight)
    return gathered


class OnePerTurn:
    """The rows of turns, one per turn: a copy of a session's log kept in the state folder
    holds its turns again, under their own keys (tailer/turns/reported.py). Of the rows of
    one turn the fullest is shown: one not `incomplete`, then the one of more calls, then
    the one of the session first in name order (a report adds its sessions in that order
    and keeps the first). A copy made while a turn ran ends in that turn, cut short and open
    for good, which the session itself finished (as the daemon, which reports the one
    finished first, counts it).

    The rows not shown are kept too, one per session that holds the turn, only where a
    turn has more than one: when the session shown leaves (`drop_sessions`: its log gone,
    or rewritten), a copy that stays shows the turn, as a report of the logs left would."""

    def __init__(self) -> None:
        self.rows: list[TurnRow] = []
        self.changes = 0  # rows kept, replaced or dropped: what a redraw looks at
        self._at: dict[str, int] = {}  # turn key -> its row's place in `rows`
        self._others: dict[str, list[TurnRow]] = {}  # turn key -> its rows not shown

    def add(self, row: TurnRow) -> bool:
        """Show `row` unless its turn has a row to show before it; whether it is shown."""
        at = self._at.get(row.fusion_id)
        if at is None:
            self._at[row.fusion_id] = len(self.rows)
            self.rows.append(row)
        elif _rank(row) < _rank(self.rows[at]):
            self._others.setdefault(row.fusion_id, []).append(self.rows[at])
            self.rows[at] = row
        else:
            self._others.setdefault(row.fusion_id, []).append(row)
            return False
        self.changes += 1
        return True

    def open_ones(self, turns: Iterable[Turn]) -> list[Turn]:
        """Turns still open, one per key, none of a turn that has a row."""
        return first_open_per_key(turns, self._at)

    def drop_sessions(self, session_ids: set[str]) -> dict[str, list[TurnRow]]:
        """Forget the rows of these sessions, shown or not: each turn one of them showed is
        shown from another session that holds it, if one does. Returns the rows forgotten,
        by session id. One walk over the rows, however many sessions go at once (a state
        folder removed takes them all)."""
        dropped: dict[str, list[TurnRow]] = {}
        for key, others in list(self._others.items()):
            staying = [row for row in others if row.session_id not in session_ids]
            for row in others:
                if row.session_id in session_ids:
                    dropped.setdefault(row.session_id, []).append(row)
            if len(staying) < len(others):
                if staying:
                    self._others[key] = staying
                else:
                    del self._others[key]
        kept = []
        for row in self.rows:
            if row.session_id not in session_ids:
                kept.append(row)
                continue
            dropped.setdefault(row.session_id, []).append(row)
            self.changes += 1
            others = self._others.pop(row.fusion_id, [])
            if others:
                best = min(others, key=_rank)
                others.remove(best)
                kept.append(best)
                if others:
                    self._others[row.fusion_id] = others
        if dropped:
            self.rows = kept
            self._at = {row.fusion_id: at for at, row in enumerate(kept)}
        return dropped


def _rank(row: TurnRow) -> tuple[bool, int, str]:
    """Of the rows of one turn, the one of the lowest rank is shown (OnePerTurn): the
    fuller, then the one of the session first in name order."""
    finished, calls = fullness(row.outcome, row.calls)
    return not finished, -calls, row.session_id


def through_cache(cache_path: Path | None, logs: Mapping[str, Path | str], wanted: set[str], *, workers: int,
                  on_reading: Callable[[Reading], None] | None = None,
                  looked: dict[str, tuple[os.stat_result, int]] | None = None,
                  now: float | None = None) -> tuple[Refreshed, str | None]:
    """The cache at `cache_path` (None: none, nothing read or written) brought up to date
    with the logs (`refresh`) and saved when that changed it; with one line when the cache
    was ignored, not used or could not be saved, else None. A cache that was ignored
    (damaged, another version's, not a regular file) is made again; one in a folder not
    to trust (tailer/private_files.py) is neither read nor written. Raises WorkerFailed."""
    try:
        with lasting_objects():
            entries, problem = cache.load(cache_path) if cache_path is not None else ({}, None)
    except NotPrivate as error:
        refreshed = refresh(logs, wanted, {}, workers=workers, on_reading=on_reading,
                            looked=looked)
        return refreshed, f"the cache's folder {error}: the cache is not used (--no-cache reads without it)"
    refreshed = refresh(logs, wanted, entries, workers=workers, on_reading=on_reading,
                        looked=looked, now=now)
    message = problem and f"the cache {problem}: ignored, and made again (--no-cache reads without it)"
    if cache_path is not None and (refreshed.changed or problem is not None):
        message = save(cache_path, refreshed.entries) or message
    return refreshed, message


@contextmanager
def lasting_objects():
    """Make objects that live as long as the report (the cache's entries, the rows) with
    the cycle collector paused, and keep them out of its later walks: each collection
    would walk every one of their many lists again and free nothing (on a month of logs,
    a warm report's cache load took twice as long with it running)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


def wanted_rows(turns: list[list], selection: Selection, tz: tzinfo | None) -> Iterator[tuple[TurnRow, int]]:
    """The rows of the cached `turns` that `selection` wants, in the time zone `tz`, each
    with its turn's end (unix nanoseconds)."""
    for data in turns:
        if selection.wants_figures(data[2], data[0], data[6], lambda: data[1]):
            yield row_from_data(data, tz), data[0] + round(data[11] * 1e6)


def _at_end(session_id: str, entry: LogEntry, now: float) -> tuple[list[list], list[Turn]]:
    """Of a log's open turns: the rows of those that end with the read (all of them when the
    log is idle, else those no longer running), and the turns still running."""
    if not _may_run(entry, now):
        return entry.open_turns, []
    flying = [turn for turn in session_state.turns_from_state(session_id, parsed(entry.state)).open_turns
              if running(turn)]
    keys = {turn.key for turn in flying}
    return [data for data in entry.open_turns if data[3] not in keys], flying


def _may_run(entry: LogEntry, now: float) -> bool:
    """Whether a turn of the entry's log may still be running at `now`: it has open turns,
    and has not been quiet for the idle timeout. Its state then says which (`_at_end`)."""
    return bool(entry.open_turns) and now - entry.identity[3] / 1e9 < IDLE_TIMEOUT_S


def _state_holds(session_id: str, entry: LogEntry, now: float) -> bool:
    """Whether the entry's state is as saved, where `_at_end` will read it at `now` (it is
    parsed only there, and where the log is read on, which checks it too)."""
    if not _may_run(entry, now):
        return True
    try:
        session_state.check({"sessions": {session_id: parsed(entry.state)}})
    except (ValueError, KeyError, TypeError):
        return False
    return True


def save(cache_path: Path, entries: dict[str, LogEntry]) -> str | None:
    """Save the cache; why it could not be, or None."""
    try:
        cache.save(cache_path, entries)
    except NotPrivate as error:
        return f"the cache's folder {error}: the cache is not used (--no-cache reads without it)"
    except OSError as error:
        return f"the cache cannot be saved ({error.strerror}): the next report reads every log again"
    return None


def _job(session_id: str, path: Path, entry: LogEntry | None, now: list[int]) -> Job:
    """Read on from the cache's state only when the log is the file it was (device, inode)
    and has grown: one of the size it had, or shorter, whose identity moved was edited in
    place or rewritten, so it is read from its start. (Reading on checks the digest of the
    bytes before where reading stopped, which finds a log rewritten and grown past it.)"""
    if entry is None or entry.identity[:2] != now[:2] or now[2] <= entry.identity[2]:
        return Job(session_id, path, None, now[2])
    return Job(session_id, path, entry.state, now[2] - entry.identity[2])


def _merged(old: LogEntry | None, read: LogRead, now: list[int], seen_ns: int) -> LogEntry:
    """The cache entry after `read`: what it read added to what the cache held, or instead.
    Its size is where reading stopped when the log grew while it was read: an edit in place
    that keeps that size is then not taken for an append."""
    identity = [*now[:2], max(now[2], read.read_to), *now[3:]]
    if old is None or read.fresh:
        return LogEntry(identity, seen_ns, read.state, read.turns, read.open_turns, read.checks,
                        read.damaged_lines)
    return LogEntry(identity, seen_ns, read.state, old.turns + read.turns, read.open_turns,
                    old.checks + read.checks, old.damaged_lines + read.damaged_lines)
