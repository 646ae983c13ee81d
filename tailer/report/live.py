"""`report --watch`: the table kept on a terminal, redrawn as turns arrive.

It follows the logs the way the daemon does: the daemon's SessionWatcher says which logs
changed (inotify, or cheap polling), and each log's reader is kept between passes, so a
pass reads only what was appended and an idle watch costs what an idle daemon costs. A
turn still open is not counted until it finishes: it is drawn above the table, in the
"now" lines (tailer/report/now.py), leg by leg; one whose log has been quiet for the
daemon's idle timeout is finished as `incomplete`, by the daemon's own rule
(SessionLog.finish_if_idle).

A session whose log goes (its folder removed or moved away, the state folder with it, or its
folder no longer readable) leaves the view, as a report of the logs left would: its rows are
set aside, with its reader, and shown again if it comes back, each turn once; its checks of
the CLI's totals, damaged lines and unreadable log leave the frame's figures with it and
come back with it (what the watch keeps of each session: tailer/report/live_sessions.py).
A log found rewritten is read again from its start, its old rows and figures dropped, as a
report reads it (gather.refresh); so is one that cannot be read, which shows only its problem
until it can be.

An answered prompt without fusion stays open until the next prompt, as a later call may
still be its: the table shows it as a report would (read.SessionReader.finish_at_end),
from its turn as it stands at each pass, and keeps it once it finishes.

A redraw moves the cursor home and overwrites the old frame line by line, clearing what
each line leaves and what lies below the last one: no screen clear, so no flicker. The
frame is cut to the terminal's size, so it never scrolls. Ctrl-C leaves the last frame
on screen and exits with 0.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import signal
import sys
import time
from datetime import datetime, timezone, tzinfo
from pathlib import Path
from typing import Callable, TextIO

from ..printable import printable
from ..saved_state import parsed
from ..wording import counted
from . import gather
from .figures import Snapshot, add_patterns, add_worth, snapshot
from .rows import TurnRow, turn_row
from .now import InFlightRow, in_flight_row, render_now
from .read import Found, Selection, SessionReader
from .table import (PATTERN_SECTION, WORTH_SECTION, call_models, credits_text, kept_sections, leg_label, painter,
                    render_table, summary_sections)
from .wrap import cut, flow
from .live_sessions import (GoneSessions, NoEventLogs, SessionFigures, TableRows, UnreadableFolders,
                            turn_end, turn_end_ns)
from ..turns.assembly import Turn
from ..copilot.watch import SessionWatcher

CURSOR_HOME, CLEAR_LINE_END, CLEAR_BELOW = "\x1b[H", "\x1b[K", "\x1b[J"
HIDE_CURSOR, SHOW_CURSOR = "\x1b[?25l", "\x1b[?25h"
PASS_S = 1.0


class TerminalGone(Exception):
    """The terminal the watch draws on is gone: a frame could not be written to it (EIO once
    it closed while SIGHUP was ignored, as under nohup, where no signal ends the watch)."""


class LiveTurns:
    """The finished turns under a state directory, brought up to date by `poll`, their
    times in `zone` (None: the system's).

    The first pass starts from the report's cache (`cache_path`, None: none), as a report
    does (gather.refresh): a log unchanged since is not read, and one that changed is read
    on from where the cache stopped; the cache is then written. A log whose cached state
    has no open turn is resumed only once it changes again; the logs it must read, in
    `workers` processes (None: one per CPU), as a report reads them."""

    def __init__(self, state_dir: Path, selection: Selection, *, zone: tzinfo | None = None,
                 watcher: SessionWatcher | None = None, clock: Callable[[], float] = time.time,
                 cache_path: Path | None = None, workers: int | None = None):
        self.selection = selection
        self.workers = workers or gather.default_jobs()
        self.zone = zone
        self.watcher = watcher or SessionWatcher(state_dir)
        self.clock = clock
        self.cache_path = cache_path
        self.cache_problem: str | None = None  # one line: the cache was ignored, or not saved
        self.reader = SessionReader()
        self.figures = SessionFigures()  # the checks, damaged lines and problems of the logs there
        self.rows = TableRows()  # the finished turns'
        self._logs: dict[str, str] = {}  # session id -> its log's path, as the watcher gives it
        self._open: set[str] = set()  # sessions with turns still open
        self._gone = GoneSessions()
        self._unreadable = UnreadableFolders()
        self._no_event = NoEventLogs()
        self._first = True
        self._resume: dict[str, bytes] = {}  # session id -> its cached state's JSON, until it changes
        self._answered: list[TurnRow] | None = None  # until a pass reads or finishes something
        self._cache_read: gather.Refreshed | None = None  # the first pass's, until the second

    @property
    def turns(self) -> list[TurnRow]:
        return self.rows.rows

    @property
    def last(self) -> TurnRow | None:
        """The turn that ended last."""
        return self.rows.last

    @property
    def sessions(self) -> int:
        return len(self._logs)

    @property
    def state_dir_problem(self) -> str | None:
        """Why the state folder cannot be listed now, None when it can: the sessions
        watched are gone with it until it is back."""
        return self.watcher.listing_problem

    def skipped(self) -> dict[str, int]:
        """What a report of the logs there skips: damaged lines, logs that cannot be read."""
        skipped = self.figures.skipped({session_id for session_id in self.watcher.unreadable
                                        if self.selection.wants_session(session_id)})
        skipped["unreadable_logs"] += self._no_event.count(self._logs, self._showing)
        return skipped

    def _showing(self) -> set[str]:
        """The sessions with a row in the table or a turn in flight."""
        return {shown.session_id for shown in (*self.rows.rows, *self.answered(),
                                               *self.rows.open_ones(filter(self._shown, self.reader.in_flight())))}

    def in_progress(self) -> int:
        """The wanted turns running now, the ones the "now" lines show: an answered prompt
        without fusion stays open until the next prompt, but is no longer in progress."""
        return len(self.rows.open_ones(filter(self._shown, self.reader.in_flight())))

    def _shown(self, turn: Turn) -> bool:
        """Whether an open turn is shown: wanted, and its log not gone."""
        return self.selection.wants(turn) and turn.session_id in self._logs

    def answered(self) -> list[TurnRow]:
        """The rows of the wanted turns that have answered but are still open (see the
        module docstring), made anew after a pass that read or finished something: they
        may still change, and an idle watch makes none."""
        if self._answered is None:
            self._answered = [turn_row(turn, self.zone)
                              for turn in self.rows.open_ones(filter(self._shown, self.reader.answered()))]
        return self._answered

    def in_flight(self, now_ns: int) -> list[InFlightRow]:
        """The wanted turns open now, for the "now" section, in local time."""
        return [in_flight_row(turn, now_ns, self.zone)
                for turn in self.rows.open_ones(filter(self._shown, self.reader.in_flight()))]

    def poll(self, timeout: float) -> None:
        """Wait up to `timeout` seconds for a log to change, and read what changed."""
        # Let go only now, its frame drawn: freeing the lists of 10,000 sessions' entries
        # was some 25 ms of the first drawing.
        self._cache_read = None
        changes = self.watcher.changes(timeout)
        self._unreadable.seen(changes, self._logs, self.watcher.unreadable)
        if self._first or changes:
            self._answered = None
        if self._first:
            self._first = False
            self._start(changes.appeared, changes.looked)
        for session_id, path in changes.appeared.items():
            if self.selection.wants_session(session_id) and session_id not in self._logs:
                self._logs[session_id] = path
                for row in self._gone.back(session_id):
                    self.rows.keep(row, turn_end_ns(row))
                changes.touched.add(session_id)
        vanished = {session_id for session_id in changes.vanished
                    if self._logs.pop(session_id, None) is not None}
        dropped = self.rows.drop_sessions(vanished)
        for session_id in vanished:
            # Its reader is kept too: a log that comes back (its folder moved away and back)
            # is read on from where it was, its turns not counted again.
            self._gone.leave(session_id, dropped.get(session_id, []),
                             open_since=self.clock() if session_id in self._open else None)
            self._open.discard(session_id)
            self.figures.drop(session_id)  # counted again from its reader if it comes back
        for session_id in sorted(changes.touched & self._logs.keys()):
            self._read(session_id)
            if self.reader.open_turns(session_id):
                self._open.add(session_id)
            else:
                self._open.discard(session_id)
        idle = self._finish_idle()
        if idle:
            self._answered = None
            self.rows.take(idle, self.selection, self.zone)

    def _read(self, session_id: str) -> None:
        """Read what the session's log added; all of it, as a new log, when it turns out to
        be rewritten (truncated, replaced by another file): the new content may hold the
        turns counted before again or not, so their rows and figures go first, as a report
        reads it."""
        if self.reader.found(session_id).problem is not None:  # from its start, as a report
            self.reader.forget(session_id)  # after one that could not read it (gather.refresh)
        path = self._logs[session_id]
        finished = self.rows.take(self._reader_of(session_id).read(
            session_id, Path(path), functools.partial(self._rewritten, session_id)), self.selection, self.zone)
        found = self.reader.found(session_id)
        if found.problem is not None:  # nothing of it is in a report but its problem
            self._rewritten(session_id)
            found = Found(problem=found.problem)
        self.figures.read(session_id, found)
        self._no_event.read(session_id, path, quiet=not finished and found.problem is None
                            and not self.reader.open_turns(session_id))

    def _rewritten(self, session_id: str) -> None:
        """The session's log is read again from its start, or cannot be read: what was
        shown of it goes."""
        self.rows.drop_sessions({session_id})
        self.figures.forget(session_id)

    def _start(self, logs: dict[str, str], looked: dict[str, tuple[os.stat_result, int]]) -> None:
        """The first pass: every log through the cache (checked by the watcher's stat of
        it), read where it changed."""
        wanted = {session_id for session_id in logs if self.selection.wants_session(session_id)}
        refreshed, self.cache_problem = gather.through_cache(self.cache_path, logs, wanted,
                                                             workers=self.workers, looked=looked)
        self._cache_read = refreshed
        # A log the cache's refresh could not read has no entry: this pass reads it, and says why.
        with gather.lasting_objects():  # the rows live as long as the watch
            for session_id in sorted(wanted & refreshed.entries.keys()):
                entry = refreshed.entries[session_id]
                self._logs[session_id] = logs[session_id]
                self.figures.cached(session_id, entry)
                self._no_event.read(session_id, logs[session_id], quiet=not entry.turns and not entry.open_turns)
                # Not the open turns: they are in progress, as a pass leaves them.
                for row, end_ns in gather.wanted_rows(entry.turns, self.selection, self.zone):
                    self.rows.keep(row, end_ns)
                self._resume[session_id] = entry.state
                if entry.open_turns:  # a row for each open turn of its state
                    self._reader_of(session_id)
                    self._open.add(session_id)

    def _reader_of(self, session_id: str) -> SessionReader:
        """The reader, with the session's log resumed from its cached state if not yet."""
        saved = self._resume.pop(session_id, None)
        if saved is not None:
            try:
                self.reader.resume(session_id, Path(self._logs[session_id]), parsed(saved))
            except (ValueError, KeyError, TypeError):  # not as saved: read it from its start
                self._rewritten(session_id)
                self.cache_problem = (f"the cache is damaged: session {printable(session_id)} "
                                      "is read from its start")
        return self.reader

    def close(self) -> None:
        self.watcher.close()

    def _finish_idle(self) -> list[Turn]:
        """The open turns of the logs quiet for the idle timeout, finished. Those of a log
        gone for that long are finished too, but set aside with its rows (GoneSessions)."""
        finished = []
        for session_id in list(self._open):
            idle = self.reader.finish_if_idle(session_id, self.clock())
            if idle:
                finished += idle
                self._open.discard(session_id)
        for session_id in self._gone.idle(self.clock()):
            self._gone.set_aside(session_id, [turn_row(turn, self.zone) for turn in self.reader.finish(session_id)
                                              if self.selection.wants(turn)])
        return finished


def table(live: LiveTurns, answered: list[TurnRow], filters: dict[str, str], *, now: datetime,
          columns: int, rows: int, color: bool) -> str:
    """The table of the finished turns and the `answered` ones as it fits under the live
    lines: the costly part of a frame (its figures are made again from every turn), so it
    is made only when `table_key` changes."""
    snap = snapshot(live.turns + answered, now=now, tz=live.zone, skipped=live.skipped(),
                    filters=filters, checks=live.figures.checks(), groupings=("day",), worth=False)
    height = max(rows - 4, 1)
    # A section's figures are made only where the screen may show it, the patterns' first.
    if may_show(snap, PATTERN_SECTION, width=columns, height=height):
        add_patterns(snap)
        if may_show(snap, WORTH_SECTION, width=columns, height=height):
            add_worth(snap, ("day",))
    return render_table(snap, width=columns, color=color, height=height)


def may_show(snap: Snapshot, section: int, *, width: int, height: int) -> bool:
    """Whether render_table(snap, height=height) may have room for the summary's `section`
    (table.PATTERN_SECTION, WORTH_SECTION), for a snapshot made without its figures
    (figures.snapshot's `worth`): not when the sections before it already fill the room
    the table keeps for its summary (table.kept_sections), as on all but a tall screen."""
    before = summary_sections(snap, width, painter(False))[:section]
    return len(kept_sections(before, height)) == section


def table_key(live: LiveTurns, answered: list[TurnRow], size: os.terminal_size,
              now: datetime) -> tuple:
    """Everything the table shows depends on: the turns, the sessions, what was skipped or
    checked, the terminal's size and the UTC offset (a daylight saving time change).
    Finished turns are only ever added, replaced or dropped (OnePerTurn.changes counts
    each), and the sessions' checks and damaged lines set or dropped (SessionFigures.changes),
    so their counts tell when they changed; a folder that cannot be read is not a figure of
    a session read, so the skipped counts are part of the key; an answered turn may still
    grow, so its figures are part of the key too."""
    return (live.rows.changes, tuple(answered), live.sessions, tuple(live.skipped().values()),
            live.figures.changes, tuple(size),
            now.astimezone(live.zone).utcoffset())


def frame(live: LiveTurns, table_text: str, *, now: datetime, columns: int, rows: int,
          now_lines: list[str] = (), answered: list[TurnRow] = ()) -> str:
    """One screenful: the head_lines, then the table cut to fit."""
    lines = head_lines(live, answered, now, columns, now_lines) + [""] + table_text.splitlines()
    return CURSOR_HOME + "".join(line + CLEAR_LINE_END + "\n" for line in lines[:rows - 1]) + CLEAR_BELOW


def head_lines(live: LiveTurns, answered: list[TurnRow], now: datetime, columns: int,
               now_lines: list[str] = ()) -> list[str]:
    """What a frame shows above the table, in `columns`: what is being watched (and why
    not, while the state folder cannot be listed), the last turn to end (an `answered` one
    too), wrapped where it is longer (nothing of it cut), and the turns in flight (the
    "now" lines of render_now)."""
    watching = [f"watching {counted(live.sessions, 'session')}"]
    if live.in_progress():
        watching = [watching[0] + ",", f"{counted(live.in_progress(), 'turn')} in progress"]
    lines = flow(watching + ["| Ctrl-C quits"], columns)
    if live.state_dir_problem is not None:
        lines += flow([live.state_dir_problem], columns)
    ended_turns = [row for row in (live.last, *answered) if row is not None]
    if not ended_turns:
        return lines + ["last turn: none yet"] + [cut(line, columns) for line in now_lines]
    row = max(ended_turns, key=turn_end)
    if row.kind == "ordinary":  # call_models and leg_label give printable names
        legs = call_models(row)
    else:
        legs = [leg_label(leg, row.kind == "fallback") for leg in row.legs]
    lines += flow(["last turn", row.start[11:19], f"({_ago(int((now - turn_end(row)).total_seconds()))})",
                   printable(row.pattern if row.kind == "fusion" else row.kind),
                   printable(row.outcome),
                   f"{credits_text(row.credits, row.unknown_credit_calls)} credits:"]
                  + [leg + " ->" for leg in legs[:-1]] + legs[-1:], columns)
    return lines + [cut(line, columns) for line in now_lines]


def watch(state_dir: Path, selection: Selection, filters: dict[str, str], out: TextIO, *,
          color: bool, zone: tzinfo | None = None, on_pass: Callable[[], object] | None = None,
          terminal_size: Callable[[], os.terminal_size] | None = None,
          clock: Callable[[], float] = time.time, watcher: SessionWatcher | None = None,
          cache_path: Path | None = None, jobs: int | None = None) -> int:
    """Redraw `out` whenever a turn finishes, a turn starts, a turn in flight moves on (a
    record arrives; its elapsed time ticks each second), the terminal is resized or the
    minute changes (the live line says how long ago the last turn was); until Ctrl-C.
    A record appended to a log is on screen within a pass: the watcher wakes as it comes.
    Raises TerminalGone when the terminal went away and no signal ended the watch.
    `terminal_size` gives the size to draw for (None: `out`'s terminal's, see _size_of).

    Only a change the table shows makes the table again: the minute's redraw of an idle
    watch over thousands of turns costs the live lines alone."""
    terminal_size = terminal_size or functools.partial(_size_of, out)
    live = LiveTurns(state_dir, selection, zone=zone, watcher=watcher, clock=clock,
                     cache_path=cache_path, workers=jobs)
    _draw(out, HIDE_CURSOR + CURSOR_HOME + CLEAR_BELOW + "reading the session logs..." + CLEAR_LINE_END)
    drawn = tabled = table_text = None
    said: list[str] = []  # printed now, each line would be wiped by the next frame at once
    stops = [0]  # how many times Ctrl-Z stopped the watch: fg draws the frame again
    with _cursor_shown_while_stopped(out, stops), _warnings_kept_in(said):
        try:
            while True:
                if on_pass is not None:
                    on_pass()
                live.poll(PASS_S)
                if live.cache_problem is not None:
                    _keep_said(said, live.cache_problem)
                    live.cache_problem = None
                size = terminal_size()
                now = datetime.fromtimestamp(clock(), timezone.utc)
                # The turns in flight are drawn above the table, which gives them its rows.
                now_lines = render_now(live.in_flight(round(now.timestamp() * 1e9)), size.columns)
                answered = live.answered()
                head = head_lines(live, answered, now, size.columns, now_lines)
                key = table_key(live, answered, size, now) + (len(head),)
                state = (key, now.strftime("%H:%M"), tuple(head), stops[0])
                if state == drawn:
                    continue
                if key != tabled:
                    # Under the head lines and a blank one, the last line of the screen left free.
                    table_text = table(live, answered, filters, now=now, columns=size.columns,
                                       rows=size.lines - len(head) + 2, color=color)
                    tabled = key
                # After fg, the shell's lines are on the screen, and the cursor shown.
                resumed = drawn is not None and drawn[-1] != stops[0]
                _draw(out, (HIDE_CURSOR if resumed else "")
                      + frame(live, table_text, now=now, columns=size.columns,
                              rows=size.lines, now_lines=now_lines, answered=answered))
                drawn = state
        except KeyboardInterrupt:
            return 0
        finally:
            # Ended before a frame was begun (Ctrl-C, a worker killed in the first pass): the
            # reading line goes, so that the shell's prompt or the error's line starts a line
            # of its own. Not `drawn`, set only once a frame is written: a stop landing just
            # after the first frame would add this after it.
            try:
                out.write(("" if table_text is not None else "\r" + CLEAR_LINE_END) + SHOW_CURSOR)
                out.flush()
            except OSError:
                pass  # the terminal hung up: no cursor to show, and nobody to tell
            live.close()
            for line in said:  # under the frame left on screen
                with contextlib.suppress(OSError):
                    print(line, file=sys.stderr)


def _size_of(out: TextIO) -> os.terminal_size:
    """The size of the terminal `out` is on, as it is now; shutil's answer ($COLUMNS and
    $LINES, else 80 x 24) only where the terminal gives none. Not shutil's first: $COLUMNS
    and $LINES, where a shell exports them, hold the size the watch began with, and a frame
    drawn for it wraps and scrolls once the terminal is made smaller."""
    try:
        size = os.get_terminal_size(out.fileno())
    except (OSError, ValueError):  # no terminal, or a closed one
        return shutil.get_terminal_size()
    return size if size.columns and size.lines else shutil.get_terminal_size()


def _draw(out: TextIO, text: str) -> None:
    """Write `text` to the terminal whole; TerminalGone when it takes no more."""
    try:
        out.write(text)
        out.flush()
    except OSError as error:
        raise TerminalGone(error.strerror) from None


def _keep_said(said: list[str], problem: str) -> None:
    """Keep `problem` to be said when the watch ends, once however often it came."""
    line = f"hydrafusion-tailer report: {printable(problem)}"
    if line not in said:
        said.append(line)


class _KeptWarnings(logging.Handler):
    """The reading stages' warnings (the watcher's: a folder that cannot be listed, inotify
    refused), kept in `said` while the watch draws."""

    def __init__(self, said: list[str]):
        super().__init__(logging.WARNING)
        self.said = said

    def emit(self, record: logging.LogRecord) -> None:
        _keep_said(self.said, record.getMessage())


@contextlib.contextmanager
def _warnings_kept_in(said: list[str]):
    """The tailer's log warnings kept in `said` while the watch runs: with no handler they
    went to stderr through logging's last resort, without the command's name, and the next
    frame wiped them at once."""
    logger, kept = logging.getLogger("tailer"), _KeptWarnings(said)
    logger.addHandler(kept)
    try:
        yield
    finally:
        logger.removeHandler(kept)


@contextlib.contextmanager
def _cursor_shown_while_stopped(out: TextIO, stops: list[int]):
    """Ctrl-Z (SIGTSTP) shows the cursor before the watch stops, for the shell's prompt,
    and counts the stop in `stops`, so that after fg the frame the shell wrote over is
    drawn again (and the cursor hidden), though nothing in it changed. Written straight to
    the terminal: the handler may run in the middle of a write to `out`'s buffer."""
    if not hasattr(signal, "SIGTSTP"):
        yield
        return
    owner = os.getpid()

    def stop(signum, frame):
        if os.getpid() == owner:  # not in a worker forked from the watch
            try:
                os.write(out.fileno(), SHOW_CURSOR.encode())
            except (OSError, ValueError):
                pass  # no terminal to show it on
        signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTSTP)  # stopped here, until fg
        signal.signal(signal.SIGTSTP, stop)
        stops[0] += 1

    previous = signal.signal(signal.SIGTSTP, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTSTP, previous)


def _ago(seconds: int) -> str:
    if seconds < 90:
        return "just now" if seconds < 60 else "a minute ago"
    if seconds < 5400:
        return f"{seconds // 60} min ago"
    if seconds < 2 * 86400:
        return f"{seconds // 3600} h ago"
    return f"{seconds // 86400} days ago"
