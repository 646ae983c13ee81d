"""`report --watch`: redrawn in place as turns arrive, reading only what is new."""

import contextlib
import fcntl
import io
import itertools
import json
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from realcli import record
from report_helpers import report_json
from sessiongen import START, SessionWriter
from tailer.copilot import event_types, events
from tailer.report import live as report_live, live_sessions
from tailer.report.live import CLEAR_BELOW, CURSOR_HOME, LiveTurns, head_lines, watch
from tailer.turns import session_log
from tailer.turns.assembly import IDLE_TIMEOUT_S
from tailer.report.read import Selection
from tailer.report.rows import turn_row
from tailer.copilot.files import find_logs
from tailer.copilot.watch import RELIST_EVERY_S, SessionWatcher
from tailer.report.gather import gather
from tailerproc import ROOT, ctrl_c_quits, start_on_a_terminal, tailer_env

SIZE = os.terminal_size((100, 40))


class Session:
    """A session log that grows a turn at a time, as the CLI writes it."""

    def __init__(self, state_dir, session_id="live"):
        self.writer = SessionWriter(session_id, START)
        self.path = state_dir / session_id / "events.jsonl"
        self.path.parent.mkdir(parents=True)
        self.written = 0

    def add(self, turns=1, incomplete=False):
        for _ in range(turns):
            if incomplete:
                self.writer.incomplete("mai-code-1.1-flash", "gpt-5.6-sol")
            else:
                self.writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="reject",
                                    repair_model="gpt-5.6-sol")
        lines = self.writer.lines()
        with open(self.path, "a") as log:
            log.write("".join(line + "\n" for line in lines[self.written:]))
        self.written = len(lines)


def frames_of(output):
    return [frame for frame in output.split(CURSOR_HOME)[1:] if "HydraFusion: " in frame]


def test_watch_redraws_in_place_as_turns_arrive(tmp_path):
    session = Session(tmp_path)
    session.add(2)
    out = io.StringIO()
    calls = []

    def terminal_size():
        """The fake terminal: a turn arrives after the first frame; Ctrl-C once it shows."""
        calls.append(1)
        if len(calls) == 2:
            session.add()
        if "3 turns, 1 session" in out.getvalue() or len(calls) > 40:
            raise KeyboardInterrupt
        return SIZE

    code = watch(tmp_path, Selection(), {}, out, color=True, terminal_size=terminal_size,
                 watcher=SessionWatcher(tmp_path, use_inotify=False))
    assert code == 0
    output = out.getvalue()
    assert output.endswith(report_live.SHOW_CURSOR)
    frames = frames_of(output.removesuffix(report_live.SHOW_CURSOR))
    assert [f for f in frames if "2 turns, " in f] and [f for f in frames if "3 turns, " in f]
    assert "\x1b[2J" not in output  # never a full clear: no flicker
    for frame in frames:
        assert frame.endswith(CLEAR_BELOW)
        assert frame.count("\n") <= SIZE.lines - 1  # never scrolls
        watching, last = frame.split("\n")[:2]
        assert watching.startswith("watching 1 session | Ctrl-C quits")
        assert last.startswith("last turn ") and "cascade completed" in last
    assert len(frames) < len(calls)  # nothing new, nothing drawn


def test_a_watch_ended_before_its_first_frame_takes_its_reading_line_away(tmp_path):
    """Ctrl-C, or a worker killed, while the first pass reads: the shell's prompt, or the
    error's one line, came on the line of 'reading the session logs...', glued to it
    ('reading the session logs...hydrafusion-tailer report: a process reading ...')."""
    Session(tmp_path).add(1)

    def stopped():
        raise KeyboardInterrupt

    out = io.StringIO()
    assert watch(tmp_path, Selection(), {}, out, color=False, on_pass=stopped,
                 watcher=SessionWatcher(tmp_path, use_inotify=False)) == 0
    assert out.getvalue().endswith("reading the session logs..." + report_live.CLEAR_LINE_END
                                   + "\r" + report_live.CLEAR_LINE_END + report_live.SHOW_CURSOR)


def test_what_the_watch_has_to_say_comes_under_its_last_frame(tmp_path, monkeypatch):
    """A damaged cache's one line was written to the terminal just before the first frame,
    which wiped it at once: on a terminal, nobody ever read it. It comes once the watch
    ends, under the frame left on screen."""
    state = tmp_path / "state"
    Session(state).add(1)
    cache_path = tmp_path / "cache.json"
    cache_path.write_bytes(b"not a cache")
    terminal = io.StringIO()  # stdout and stderr on one terminal, as a user has them
    monkeypatch.setattr(sys, "stderr", terminal)
    passes = []

    def second_pass_stops():
        passes.append(1)
        if len(passes) == 2:
            raise KeyboardInterrupt

    assert watch(state, Selection(), {}, terminal, color=False, on_pass=second_pass_stops,
                 watcher=SessionWatcher(state, use_inotify=False), cache_path=cache_path) == 0
    shown = terminal.getvalue()
    said = "hydrafusion-tailer report: the cache is damaged: ignored, and made again"
    assert shown.count(said) == 1 and shown.index(said) > shown.rindex(CURSOR_HOME), shown


def test_what_the_reading_stages_warn_of_comes_under_the_last_frame_too(tmp_path, monkeypatch):
    """The watcher's warnings (a state folder or a session's folder that cannot be listed)
    went to stderr through logging's last resort, without the command's name, where the
    next frame wiped them at once. They come with the watch's own lines when it ends."""
    state = tmp_path / "state"
    Session(state).add(1)
    terminal = io.StringIO()
    monkeypatch.setattr(sys, "stderr", terminal)
    passes = []

    def folder_removed_then_stopped():
        passes.append(1)
        if len(passes) == 2:
            shutil.rmtree(state)
        if len(passes) == 4:
            raise KeyboardInterrupt

    assert watch(state, Selection(), {}, terminal, color=False, on_pass=folder_removed_then_stopped,
                 watcher=SessionWatcher(state, use_inotify=False)) == 0
    shown = terminal.getvalue()
    said = "hydrafusion-tailer report: cannot list the state directory: it does not exist\n"
    assert shown.count(said) == 1 and shown.index(said) > shown.rindex(CURSOR_HOME), shown


def test_only_what_is_new_is_read(tmp_path, monkeypatch):
    session = Session(tmp_path)
    session.add(5)
    parsed = []  # each line read: by parse_line, or the short way of a model call or tool
    parse_line, call_record = events.parse_line, session_log.call_record
    monkeypatch.setattr(events, "parse_line", lambda line: parsed.append(line) or parse_line(line))

    def read_the_short_way(line):
        record = call_record(line)
        if record is not None:
            parsed.append(line)
        return record

    monkeypatch.setattr(session_log, "call_record", read_the_short_way)
    live = LiveTurns(tmp_path, Selection(), watcher=SessionWatcher(tmp_path, use_inotify=False))
    live.poll(0)
    assert len(live.turns) == 5
    first_read = len(parsed)
    for _ in range(3):
        live.poll(0)
    assert len(parsed) == first_read  # an unchanged log costs no parsing
    before = session.written
    session.add()
    appended = [line for line in session.writer.lines()[before:] if event_types.may_be_read(line.encode())]
    deadline = time.monotonic() + 10
    while len(live.turns) < 6 and time.monotonic() < deadline:
        live.poll(0.5)
    assert len(live.turns) == 6
    assert len(parsed) - first_read == len(appended)
    live.close()


def polled_until(live, done, timeout=10):
    """Whether done() came true while `live` polled, within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        live.poll(0.2)
    return done()


@pytest.mark.parametrize("moved", ["the state folder", "a session folder"])
def test_a_folder_moved_away_and_back_counts_its_turns_once(tmp_path, moved):
    """`mv ~/.copilot/session-state elsewhere` and back (or a session's folder) while
    watching: the sessions came back read from their start, and every turn the first pass
    had found was counted twice (52 turns where the report says 26)."""
    state = tmp_path / "state"
    Session(state).add(2)
    Session(state, "other").add(1)
    live = LiveTurns(state, Selection(), watcher=SessionWatcher(state, use_inotify=False),
                     workers=1)
    live.poll(0)
    assert (len(live.turns), live.sessions) == (3, 2)
    folder = state if moved == "the state folder" else state / "live"
    left = 0 if folder == state else 1  # the sessions watched while it is away
    folder.rename(tmp_path / "away")
    assert polled_until(live, lambda: live.sessions == left)
    (tmp_path / "away").rename(folder)
    assert polled_until(live, lambda: live.sessions == 2)
    live.poll(0.2)
    assert len(live.turns) == 3
    live.close()


def test_a_turn_whose_folder_moved_away_and_back_mid_turn_ends_as_its_log_says(tmp_path):
    """A session's folder moved away mid-turn and back: the watch finished the turn
    `incomplete` when the folder vanished, and kept it so when the log went on and the turn
    completed (22 completed, 2 incomplete where the report said 23 and 1). A vanished log's
    open turns wait as the daemon's tombstones do: for the log to come back, or for the
    idle timeout."""
    state = tmp_path / "state"
    session = Session(state)
    session.writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="accept")
    lines = [line + "\n" for line in session.writer.lines()]
    session.path.write_text("".join(lines[:-3]))
    live = LiveTurns(state, Selection(), watcher=SessionWatcher(state, use_inotify=False),
                     workers=1)
    live.poll(0)
    assert (live.turns, live.in_progress()) == ([], 1)
    session.path.parent.rename(tmp_path / "away")
    assert polled_until(live, lambda: live.sessions == 0)
    assert (live.turns, live.in_progress()) == ([], 0)  # gone from "now", not finished
    (tmp_path / "away").rename(session.path.parent)
    with open(session.path, "a") as log:
        log.write("".join(lines[-3:]))
    assert polled_until(live, lambda: live.turns)
    assert [turn.outcome for turn in live.turns] == ["completed"]
    live.close()


def test_a_turn_whose_folder_stays_gone_ends_incomplete_after_the_idle_timeout(tmp_path):
    """Ended as the daemon ends a tombstone's turn, but shown only with its session: the
    watch drew the row of a session it no longer counted, which no report would show."""
    state = tmp_path / "state"
    session = Session(state)
    session.add(incomplete=True)  # the log ends inside a turn
    now = [time.time()]
    live = LiveTurns(state, Selection(), clock=lambda: now[0],
                     watcher=SessionWatcher(state, use_inotify=False), workers=1)
    live.poll(0)
    assert (live.turns, live.in_progress()) == ([], 1)
    session.path.parent.rename(tmp_path / "away")
    assert polled_until(live, lambda: live.sessions == 0)
    assert live.turns == []
    now[0] += IDLE_TIMEOUT_S
    live.poll(0)
    assert (live.turns, live.in_progress()) == ([], 0)
    (tmp_path / "away").rename(session.path.parent)
    assert polled_until(live, lambda: live.sessions == 1)
    assert [turn.outcome for turn in live.turns] == ["incomplete"] and live.in_progress() == 0
    live.close()


def test_a_state_folder_gone_is_said_on_screen_until_it_is_back(tmp_path):
    """The state folder removed or moved while watching: 'watching 0 sessions' over the
    turns already shown, and the one line saying why was written under the frame, where
    the next frame, drawn at once, wiped it."""
    state = tmp_path / "state"
    Session(state).add(1)
    live = LiveTurns(state, Selection(), watcher=SessionWatcher(state, use_inotify=False),
                     workers=1)
    live.poll(0)
    now = datetime.now(timezone.utc)
    gone = "cannot list the state directory: it does not exist"
    assert gone not in head_lines(live, [], now, 100)
    state.rename(tmp_path / "away")
    assert polled_until(live, lambda: live.sessions == 0)
    assert gone in head_lines(live, [], now, 100)
    (tmp_path / "away").rename(state)
    assert polled_until(live, lambda: live.sessions == 1)
    assert gone not in head_lines(live, [], now, 100)
    live.close()


def test_open_turns_wait_and_idle_ones_end_incomplete(tmp_path):
    session = Session(tmp_path)
    session.add()
    session.add(incomplete=True)  # the log ends inside a turn: no shutdown
    now = [time.time()]
    live = LiveTurns(tmp_path, Selection(), clock=lambda: now[0],
                     watcher=SessionWatcher(tmp_path, use_inotify=False))
    live.poll(0)
    assert [t.outcome for t in live.turns] == ["completed"]
    assert live.in_progress() == 1
    now[0] = os.stat(session.path).st_mtime + IDLE_TIMEOUT_S
    live.poll(0)
    assert [t.outcome for t in live.turns] == ["completed", "incomplete"]
    assert live.in_progress() == 0
    live.close()


def test_an_answered_prompt_without_fusion_is_in_the_table_not_in_progress(tmp_path):
    """Such a turn stays open until the next prompt (a later call may still be its), but it
    has answered: the table shows it as a report of the same files does, and the live line
    counts only what the "now" lines show, turns running."""
    session = Session(tmp_path)
    session.add()
    session.writer.ordinary("gpt-5.6-sol")
    session.add(turns=0)  # writes its lines
    live = LiveTurns(tmp_path, Selection(), clock=time.time,
                     watcher=SessionWatcher(tmp_path, use_inotify=False))
    live.poll(0)
    assert live.reader.open_turns("live") == 1 and live.in_flight(time.time_ns()) == []
    assert live.in_progress() == 0
    reported = report_json("--state-dir", str(tmp_path), "--no-cache", "--timezone", "UTC")["turns"]
    shown = [json.loads(bytes(row.printed.text[:row.printed.start_at]) + b'""'
                        + bytes(row.printed.text[row.printed.start_at:]))
             for row in live.turns + live.answered()]
    assert [turn["kind"] for turn in reported] == ["fusion", "ordinary"]
    assert [dict(turn, start="") for turn in shown] == [dict(turn, start="") for turn in reported]
    text = report_live.table(live, live.answered(), {}, now=datetime.now(timezone.utc),
                             columns=100, rows=40, color=False)
    assert text.startswith("HydraFusion: 1 turn (+1 ordinary), 1 session")
    shown = report_live.frame(live, text, now=datetime.now(timezone.utc), columns=100, rows=40,
                              answered=live.answered())
    assert shown.split("\n")[1].endswith(" ordinary completed 7.40 credits: gpt-5.6-sol" + report_live.CLEAR_LINE_END)
    session.add(incomplete=True)
    deadline = time.monotonic() + 10
    while not live.in_flight(time.time_ns()) and time.monotonic() < deadline:
        live.poll(0.5)
    assert [row.kind for row in live.in_flight(time.time_ns())] == ["fusion"]
    assert live.in_progress() == 1
    assert [row.kind for row in live.turns] == ["fusion", "ordinary"] and live.answered() == []
    live.close()


def test_an_idle_watch_makes_no_answered_row_again(tmp_path, monkeypatch):
    """An answered turn's row is made again only after a pass that read or finished
    something: an idle watch over many such sessions would make them every second."""
    session = Session(tmp_path)
    session.add()
    session.writer.ordinary("gpt-5.6-sol")
    session.add(turns=0)
    made = []
    turn_row = report_live.turn_row
    monkeypatch.setattr(report_live, "turn_row", lambda *a: made.append(1) or turn_row(*a))
    live = LiveTurns(tmp_path, Selection(), watcher=SessionWatcher(tmp_path, use_inotify=False))
    live.poll(0)
    assert len(live.answered()) == 1
    before = len(made)
    for _ in range(5):
        live.poll(0.05)
        assert len(live.answered()) == 1
    assert len(made) == before
    session.add()  # the next prompt: the answered turn finishes, a new one comes
    deadline = time.monotonic() + 10
    while len(live.turns) < 3 and time.monotonic() < deadline:
        live.poll(0.5)
    assert [row.kind for row in live.turns] == ["fusion", "ordinary", "fusion"]
    assert live.answered() == []
    live.close()


def read_until(fd, done, timeout=60):
    """What the terminal shows until done(output) is true."""
    output, deadline = b"", time.monotonic() + timeout
    while not done(output) and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                output += os.read(fd, 65536)
            except OSError:
                break
    return output


@contextlib.contextmanager
def ended_by_ctrl_c(process, leader):
    """What the test does with the watch on a terminal, then Ctrl-C, which ends it with 0;
    whatever happens, the watch killed if still running and its terminal closed."""
    try:
        yield
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
        os.close(leader)


def test_watch_on_a_terminal_ends_cleanly_on_ctrl_c(tmp_path):
    """The demo, watched in a real pseudo-terminal of 100 x 30, stopped by Ctrl-C."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    process = subprocess.Popen(
        [sys.executable, "-m", "tailer", "report", "--demo", "--watch"], cwd=ROOT,
        env=tailer_env(TMPDIR=str(tmp_path)), stdin=follower, stdout=follower,
        stderr=subprocess.PIPE, start_new_session=True, preexec_fn=ctrl_c_quits,
    )
    os.close(follower)
    try:
        output = read_until(leader, lambda out: b"\x1b[J" in out.partition(b"Ctrl-C quits")[2])
        assert b"Ctrl-C quits" in output, "no whole frame drawn within a minute"
        process.send_signal(signal.SIGINT)
        ending = read_until(leader, lambda out: report_live.SHOW_CURSOR.encode() in out)
        assert report_live.SHOW_CURSOR.encode() in ending, "Ctrl-C did not end the watch"
        output += ending
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
        os.close(leader)
    text = output.decode()
    # The fixtures' turns, and the first replayed turn, in a session of its own, in flight:
    # the title counts the sessions of the turns in the table.
    assert "last turn " in text and re.search(r"\d+ turns( \(\+\d+ ordinary\))?, 5 sessions", text)
    assert "now: 1 running" in text
    assert "Traceback" not in text + process.stderr.read().decode()
    for frame in frames_of(text.replace(report_live.SHOW_CURSOR, "")):
        assert frame.count("\n") <= 29
    assert list(tmp_path.iterdir()) == []  # the demo's copy is gone


def test_watch_demo_shows_the_replayed_turn_in_flight_until_it_ends(tmp_path):
    """`report --demo --watch` replays a turn as the CLI writes it: "now" shows it planned,
    its leg running as its model calls come, then nothing once its rollup is written, when
    the turn is in the table. The first replayed turn is the first session's: a single."""
    process, leader = start_on_a_terminal("report", "--demo", "--watch", rows=40, columns=100,
                                          env=tailer_env(TMPDIR=str(tmp_path)))
    with ended_by_ctrl_c(process, leader):
        running = read_until(leader, lambda out: re.search(
            rb"now: 1 running\S*\r\n  \S+ \S+ single \d+s [1-9]\d* calls .*\r\n    \*primary\(gpt-5\.6-sol\)",
            out))
        assert b"*primary(gpt-5.6-sol)" in running, "no leg seen running within a minute"
        assert b".primary\x1b" in running, "the turn was not seen before its first call"
        ended = read_until(leader, lambda out: b"now: nothing running" in out)
        assert b"now: nothing running" in ended, "the replayed turn did not end within a minute"
    frames = frames_of((running + ended).decode(errors="replace"))
    assert re.search(r"27 turns \(\+3 ordinary\), 6 sessions", frames[-1])


def test_an_idle_watch_makes_its_table_once(tmp_path, monkeypatch):
    """With nothing new, the minute's redraw reuses the table: making it again from every
    turn is what an idle watch of thousands of turns would pay each minute."""
    session = Session(tmp_path)
    session.add(2)
    tables = []
    render_table = report_live.render_table
    monkeypatch.setattr(report_live, "render_table",
                        lambda *a, **k: tables.append(1) or render_table(*a, **k))
    now = [time.time()]
    out = io.StringIO()
    passes = []

    def terminal_size():
        """Each pass a minute later; a turn arrives at the fifth; Ctrl-C at the eighth."""
        passes.append(1)
        now[0] += 60
        if len(passes) == 5:
            session.add()
        if len(passes) == 8:
            raise KeyboardInterrupt
        return SIZE

    watch(tmp_path, Selection(), {}, out, color=False, terminal_size=terminal_size,
          clock=lambda: now[0], watcher=SessionWatcher(tmp_path, use_inotify=False))
    frames = frames_of(out.getvalue())
    assert len(frames) == 7  # a new minute at every pass
    assert [f for f in frames if "2 turns, " in f] and [f for f in frames if "3 turns, " in f]
    assert len(tables) == 2  # the first table, and the one with the new turn


def test_the_worth_figures_are_made_only_for_a_screen_that_shows_them(tmp_path, monkeypatch):
    """The table's summary gives way to the newest turns on a short screen, the worth figures
    among the first to go: the watch makes them (and the patterns', the router's) only where
    they may be drawn (over 10,000
    sessions they were a tenth of its first drawing), and draws what a snapshot with them
    draws, at every height."""
    from tailer.report import figures, worth
    from tailer.report.table import render_table

    session = Session(tmp_path)
    session.add(3)
    live = LiveTurns(tmp_path, Selection(), watcher=SessionWatcher(tmp_path, use_inotify=False))
    live.poll(0)
    now = datetime.now(timezone.utc)
    full = figures.snapshot(live.turns, now=now, tz=live.zone,
                            skipped=live.skipped(), checks=live.figures.checks(), groupings=("day",))
    assert full.worth.by_pattern and full.router and full.by_pattern  # the router follows the worth
    made, patterns = [], []
    monkeypatch.setattr(worth, "figures", lambda *a, **k: made.append(1) or full.worth)
    monkeypatch.setattr(figures, "by_pattern", lambda *a: patterns.append(1) or full.by_pattern)
    drawn, patterns_drawn = set(), set()
    for rows in range(5, 120):
        made.clear()
        patterns.clear()
        text = report_live.table(live, [], {}, now=now, columns=100, rows=rows, color=False)
        assert text == render_table(full, width=100, color=False, height=rows - 4)
        drawn.add(("WORTH IT" in text, bool(made)))
        patterns_drawn.add(("BY PATTERN" in text, bool(patterns)))
    # Not made on a short screen; made where drawn (and where they might just have fitted).
    assert {(False, False), (True, True)} <= drawn and (True, False) not in drawn
    assert {(False, False), (True, True)} <= patterns_drawn and (True, False) not in patterns_drawn
    live.close()


@pytest.mark.parametrize("columns", [60, 200])
def test_watch_uses_the_terminal_whole_and_cuts_nothing_of_the_last_turn(columns):
    """On the real CLI's sessions, whose last turn's credits the CLI did not give: every
    line within the terminal, the last turn's line whole (wrapped where it is longer), and
    the table as wide as the terminal (at 200 columns the legs beside every turn)."""
    state_dir, _ = record.recorded((ROOT / "tests" / "realcli" / "VERSION").read_text().strip())
    out = io.StringIO()
    passes = []

    def terminal_size():
        passes.append(1)
        if len(passes) == 2:
            raise KeyboardInterrupt
        return os.terminal_size((columns, 50))

    assert watch(state_dir, Selection(), {}, out, color=False, zone=timezone.utc,
                 terminal_size=terminal_size,
                 watcher=SessionWatcher(state_dir, use_inotify=False)) == 0
    (frame,) = frames_of(out.getvalue().removesuffix(report_live.SHOW_CURSOR))
    lines = [line.removesuffix(report_live.CLEAR_LINE_END)
             for line in frame.removesuffix(CLEAR_BELOW).splitlines()]
    assert max(map(len, lines)) <= columns and len(lines) <= 49
    start = next(i for i, line in enumerate(lines) if line.startswith("last turn "))
    last = " ".join(itertools.chain.from_iterable(
        line.split() for line in itertools.takewhile(lambda line: line.startswith(("last", "  ")),
                                                     lines[start:])))
    assert re.fullmatch(r"last turn 00:42:32 \([^)]+\) ordinary completed - credits: "
                        r"gpt-5\.6-sol", last), last
    at = next(i for i, line in enumerate(lines) if line.startswith("HydraFusion: "))
    title = " ".join(line.strip() for line in lines[at:at + 3])
    assert "HydraFusion: 12 turns (+3 ordinary), 12 sessions, 2026-12-06 00:41 - 2026-12-06 00:42 UTC" in title
    header = next(line for line in lines if line.startswith("  started "))
    assert header.endswith("legs") == (columns == 200)


def test_the_watch_lines_group_thousands(tmp_path):
    """The live lines and the "now" lines, as the table: `1,234 sessions`, `12,345.68`."""
    from tailer.records import replace
    from tailer.report.now import InFlightRow, render_now

    session = Session(tmp_path)
    session.add()
    live = LiveTurns(tmp_path, Selection(), watcher=SessionWatcher(tmp_path, use_inotify=False))
    live.poll(0)
    row = replace(live.last, credits=12345.678, legs=[])

    class Watched:
        sessions, last, state_dir_problem = 1234, row, None

        def in_progress(self) -> int:
            return 1500

    now = datetime.fromisoformat(row.start)
    shown = report_live.frame(Watched(), "", now=now, columns=200, rows=30)
    watching, last = [line.removesuffix(report_live.CLEAR_LINE_END)
                      for line in shown.removeprefix(CURSOR_HOME).split("\n")[:2]]
    assert watching == "watching 1,234 sessions, 1,500 turns in progress | Ctrl-C quits"
    assert last.endswith(" cascade completed 12,345.68 credits:")
    flight = InFlightRow("s", "f", "fusion", "cascade", row.start, 75.0, 1234, 23456.7, True, [])
    assert "1m15s 1,234 calls 23,456.70 credits" in render_now([flight], 200)[1]
    live.close()


def test_ctrl_z_shows_the_cursor_and_fg_draws_the_whole_frame_again(tmp_path):
    """Ctrl-Z (SIGTSTP) stops the watch with the cursor shown, for the shell's prompt, and fg
    (SIGCONT) hides it and draws the frame again over what the shell wrote meanwhile, though
    no turn came: the default stop left the cursor hidden, and nothing was redrawn until
    the minute changed."""
    Session(tmp_path).add(2)
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    # A process group of its own in the test's session, as a shell's job: one in a session
    # of its own is an orphan, and the system does not stop those on SIGTSTP.
    process = subprocess.Popen(
        [sys.executable, "-m", "tailer", "report", "--state-dir", str(tmp_path), "--watch",
         "--no-cache"], cwd=ROOT, env=tailer_env(), stdin=follower, stdout=follower,
        stderr=subprocess.PIPE, process_group=0, preexec_fn=ctrl_c_quits)
    os.close(follower)
    with ended_by_ctrl_c(process, leader):
        output = read_until(leader, lambda out: b"\x1b[J" in out.partition(b"Ctrl-C quits")[2])
        assert b"Ctrl-C quits" in output, "no whole frame drawn within a minute"
        process.send_signal(signal.SIGTSTP)
        stopping = read_until(leader, lambda out: report_live.SHOW_CURSOR.encode() in out, 10)
        assert report_live.SHOW_CURSOR.encode() in stopping, "stopped with the cursor hidden"
        _, status = os.waitpid(process.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status)
        process.send_signal(signal.SIGCONT)
        again = read_until(leader, lambda out: b"\x1b[J" in out.partition(b"Ctrl-C quits")[2], 10)
        hidden = again.find(report_live.HIDE_CURSOR.encode())
        assert 0 <= hidden < again.find(b"Ctrl-C quits"), "fg drew no frame, or left the cursor"
    assert "Traceback" not in process.stderr.read().decode()


def test_a_watch_whose_terminal_closed_under_nohup_ends_quietly(tmp_path):
    """The terminal closed while SIGHUP is ignored (`nohup`, a job the shell keeps): no
    signal ends the watch, and its next frame, written to a terminal that is gone, ended in
    an OSError (EIO) traceback and exit 1. It ends as a hangup ends it: exit 0, nothing said,
    and nothing left for Python's flush at exit to fail on."""
    session = Session(tmp_path)
    session.add(2)
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))

    def terminal_of_its_own_with_sighup_ignored():
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)  # closing the leader hangs it up
        ctrl_c_quits()
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    process = subprocess.Popen(
        [sys.executable, "-m", "tailer", "report", "--state-dir", str(tmp_path), "--watch",
         "--no-cache"], cwd=ROOT, env=tailer_env(), stdin=follower, stdout=follower,
        stderr=subprocess.PIPE, start_new_session=True,
        preexec_fn=terminal_of_its_own_with_sighup_ignored)
    os.close(follower)
    try:
        output = read_until(leader, lambda out: b"\x1b[J" in out.partition(b"Ctrl-C quits")[2])
        assert b"Ctrl-C quits" in output, "no whole frame drawn within a minute"
        os.close(leader)
        leader = None
        session.add()  # a frame to draw
        code = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
        if leader is not None:
            os.close(leader)
    assert (code, process.stderr.read().decode()) == (0, "")


def test_a_watch_follows_its_terminal_made_smaller_though_lines_and_columns_are_set(tmp_path):
    """$LINES and $COLUMNS exported (as some shells and multiplexers leave them) hold the
    size the terminal had when the watch began: made smaller, the frame was still drawn for
    that size, wrapped and scrolled, where a terminal's own width is the rule."""
    Session(tmp_path).add(2)
    process, leader = start_on_a_terminal(
        "report", "--state-dir", str(tmp_path), "--watch", "--no-cache", rows=30, columns=100,
        env=tailer_env(LINES="30", COLUMNS="100"))

    def drawn_small(out):
        frames = frames_of(out.decode(errors="replace"))
        return frames and frames[-1].endswith(CLEAR_BELOW) and frames[-1].count("\n") <= 14

    with ended_by_ctrl_c(process, leader):
        first = read_until(leader, lambda out: b"\x1b[J" in out.partition(b"Ctrl-C quits")[2])
        assert b"Ctrl-C quits" in first, "no whole frame drawn within a minute"
        fcntl.ioctl(leader, termios.TIOCSWINSZ, struct.pack("HHHH", 15, 60, 0, 0))
        resized = read_until(leader, drawn_small, 15)
    assert drawn_small(resized), "the frame was not drawn again for 15 x 60"
    for line in frames_of(resized.decode(errors="replace"))[-1].split("\r\n"):
        assert len(re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", line)) <= 60, line


# The watch shows what a fresh report over the files present shows: turns, totals, sessions.

FIXTURES = ROOT / "fixtures"
COPIED = "645823d9-cfb3-4ca0-88f0-6322f06c06f9"  # three fusion turns (test_session_copies.py)
OTHER = "c523b6e0-855f-4905-a475-81cf55b657a2"


def seeing_all(state):
    """A watcher that looks at every folder on each pass: its clock jumps past every
    schedule (hot, sweep, listing) each time it is read, so one `poll(0)` sees all."""
    ticks = itertools.count(0.0, RELIST_EVERY_S + 1)
    return SessionWatcher(state, use_inotify=False, clock=lambda: next(ticks))


def figures(row):
    return row.fusion_id, row.session_id, row.outcome, row.calls, row.credits


def reported(state, listed=None):
    """What a fresh one-shot report over the files in `state` now counts: its rows'
    figures, its turns in flight, its sessions, its checks of the CLI's totals and what it
    skipped (as command._report gathers them). `listed`: logs by session id that its
    listing found where they are no longer, or not as it found them."""
    try:
        logs, unreadable = find_logs(state)
    except FileNotFoundError:
        logs, unreadable = {}, {}
    logs.update(listed or {})
    gathered = gather(logs, set(logs), Selection(), timezone.utc, now=time.time(),
                      cache_path=None, workers=1)
    quiet = logs.keys() - gathered.problems.keys() - {
        shown.session_id for shown in gathered.rows + gathered.in_flight}
    no_event = {session_id for session_id in quiet if session_log.holds_no_event(logs[session_id])}
    skipped = {"damaged_lines": gathered.damaged_lines,
               "unreadable_logs": len(gathered.problems.keys() | unreadable.keys() | no_event)}
    return (sorted(map(figures, gathered.rows)), len(gathered.in_flight), len(logs),
            gathered.checks, skipped)


def shown(live):
    """The same of what the watch shows: the table's rows (finished and answered turns),
    the turns in progress, the sessions watched, the checks and the skipped counts."""
    return (sorted(map(figures, live.turns + live.answered())), live.in_progress(), live.sessions,
            live.figures.checks(), live.skipped())


def watching(state):
    live = LiveTurns(state, Selection(), zone=timezone.utc, watcher=seeing_all(state), workers=1)
    live.poll(0)
    return live


def as_reported(live, state):
    """Poll once; whether the watch then shows what a fresh report does."""
    live.poll(0)
    return shown(live) == reported(state)


@pytest.fixture
def fixtures_state(tmp_path):
    state = tmp_path / "state"
    shutil.copytree(FIXTURES, state)
    return state


@pytest.mark.parametrize("how", ["folder moved away", "folder deleted, copied back", "log deleted"])
def test_a_session_gone_leaves_the_view_and_comes_back_once(fixtures_state, tmp_path, how):
    """A session's folder removed while watching: its turns stayed in the table and its
    totals, under a count of sessions that no longer held it (the frame said 26 turns
    where the report said 23). Put back, it is counted once, read on where it was."""
    state, folder = fixtures_state, fixtures_state / COPIED
    live = watching(state)
    full = reported(state)
    assert shown(live) == full and len(full[0]) == 29
    if how == "folder moved away":
        folder.rename(tmp_path / "away")
    elif how == "folder deleted, copied back":
        shutil.rmtree(folder)
    else:
        (folder / "events.jsonl").unlink()
    assert as_reported(live, state) and len(shown(live)[0]) < 29
    if how == "folder moved away":
        (tmp_path / "away").rename(folder)
    elif how == "folder deleted, copied back":
        shutil.copytree(FIXTURES / COPIED, folder)
    else:
        shutil.copy(FIXTURES / COPIED / "events.jsonl", folder / "events.jsonl")
    assert as_reported(live, state) and shown(live) == full
    live.close()


@pytest.mark.parametrize("how", ["removed", "moved away and back", "swapped"])
def test_the_state_folder_gone_or_swapped_shows_what_is_there(fixtures_state, tmp_path, how):
    """The state folder removed while watching: the frame said '26 turns, 0 sessions';
    swapped for another, 132 turns where a fresh report said 106."""
    state = fixtures_state
    live = watching(state)
    if how == "removed":
        shutil.rmtree(state)
        assert as_reported(live, state) and shown(live)[:3] == ([], 0, 0)
        shutil.copytree(FIXTURES, state)  # made again: the same logs, other files
    elif how == "moved away and back":
        state.rename(tmp_path / "away")
        assert as_reported(live, state) and shown(live)[:3] == ([], 0, 0)
        (tmp_path / "away").rename(state)
    else:
        other = tmp_path / "other"
        other.mkdir()
        for name in (COPIED, "another"):  # one session of the same name, with other content
            (other / name).mkdir()
            shutil.copy(FIXTURES / OTHER / "events.jsonl", other / name / "events.jsonl")
        state.rename(tmp_path / "away")
        other.rename(state)
        assert as_reported(live, state) and live.sessions == 2
        state.rename(other)
        (tmp_path / "away").rename(state)
    assert as_reported(live, state) and len(shown(live)[0]) == 29
    live.close()


@pytest.mark.parametrize("how", ["truncated", "rewritten with another log"])
def test_a_rewritten_log_shows_only_what_it_holds_now(fixtures_state, how, monkeypatch):
    """A log truncated or rewritten while watching is read again from its start: its old
    turns' rows stayed beside those of the new content. It is read once: read on from its
    start, then again as a new log, the turns of another log's content were made twice."""
    state = fixtures_state
    log = state / COPIED / "events.jsonl"
    live = watching(state)
    if how == "truncated":
        lines = log.read_text().splitlines(keepends=True)
        log.write_text("".join(lines[:len(lines) // 2]))
    else:
        log.write_bytes((FIXTURES / OTHER / "events.jsonl").read_bytes())
    made = []
    for module in (report_live, live_sessions):  # the finished turns' rows, the answered ones'
        monkeypatch.setattr(module, "turn_row", lambda turn, zone: made.append(turn.key) or turn_row(turn, zone))
    live.poll(0)
    assert made and len(made) == len(set(made))
    assert shown(live) == reported(state)
    assert len(shown(live)[0]) < 29
    live.close()


CUT_LINE = '{"type":"session.fusion_completed","data":{"fusionId":"fusion-cut\n'  # damage


def with_a_damaged_line(lines):
    """The log's lines with a fusion line cut short after its first (a report counts it)."""
    return lines[:1] + [CUT_LINE] + lines[1:]


@pytest.mark.parametrize("how", ["folder moved away and back", "log deleted and put back",
                                 "truncated and grown back", "rewritten"])
def test_a_session_s_checks_and_damaged_lines_go_and_come_back_with_it(fixtures_state, tmp_path, how):
    """The CLI's totals checked and the damaged lines of a session whose log went stayed in
    the frame (5 checks and 1 damaged line where a report counted 4 and none); a log
    rewritten or truncated had them counted again on each read from its start (7 checks,
    3 damaged lines where a report counted 5 and 1). They are the session's, as a
    report's are: gone with it, back with it once, replaced when its log is read again."""
    state, folder = fixtures_state, fixtures_state / COPIED
    log = folder / "events.jsonl"
    lines = with_a_damaged_line(log.read_text().splitlines(keepends=True))
    log.write_text("".join(lines))
    live = watching(state)
    checks = len(live.figures.checks())
    assert shown(live) == reported(state) and live.skipped()["damaged_lines"] == 1 and checks == 5
    if how == "folder moved away and back":
        folder.rename(tmp_path / "away")
        assert as_reported(live, state) and live.skipped()["damaged_lines"] == 0
        assert len(live.figures.checks()) == checks - 1
        (tmp_path / "away").rename(folder)
    elif how == "log deleted and put back":
        log.unlink()
        assert as_reported(live, state) and live.skipped()["damaged_lines"] == 0
        log.write_text("".join(lines))
    elif how == "truncated and grown back":
        log.write_text("".join(lines[:len(lines) // 2]))
        assert as_reported(live, state) and live.skipped()["damaged_lines"] == 1
        with open(log, "a") as grown:
            grown.write("".join(lines[len(lines) // 2:]))
    else:  # the same lines, the damaged one last: read again from its start
        new = folder / "new.jsonl"
        new.write_text("".join(lines[:1] + lines[2:] + lines[1:2]))
        new.replace(log)
    assert as_reported(live, state) and live.skipped()["damaged_lines"] == 1
    assert len(live.figures.checks()) == checks
    live.close()


@pytest.mark.parametrize("copy", ["00-copy", f"{COPIED}.bak"], ids=["first", "last"])
def test_a_turn_kept_from_a_copy_stays_once_its_other_session_goes(fixtures_state, tmp_path, copy):
    """Of a session and its copy (`cp -r ID ID.bak`) each turn is shown once; when the
    session whose row was shown went, its turns left the view though the other still held
    them, where a report shows them once from the one left."""
    state = fixtures_state
    live = watching(state)
    shutil.copytree(state / COPIED, state / copy)
    assert as_reported(live, state) and len(shown(live)[0]) == 29
    for gone in (COPIED, copy):
        (state / gone).rename(tmp_path / "away")
        assert as_reported(live, state) and len(shown(live)[0]) == 29
        (tmp_path / "away").rename(state / gone)
        assert as_reported(live, state) and len(shown(live)[0]) == 29
    live.close()


def test_a_turn_cut_in_a_copy_is_shown_from_the_session_that_finished_it(fixtures_state, tmp_path):
    """A copy made mid-turn holds that turn cut short; the session finished it. With the
    session gone, a report shows the copy's turn as the copy holds it (open, in flight);
    back, completed, once."""
    state = fixtures_state
    lines = (FIXTURES / COPIED / "events.jsonl").read_text().splitlines(keepends=True)
    last = max(number for number, line in enumerate(lines) if "session.fusion_completed" in line)
    (state / "00-copy").mkdir()
    (state / "00-copy" / "events.jsonl").write_text("".join(lines[:last]))
    live = watching(state)
    assert shown(live) == reported(state)
    (state / COPIED).rename(tmp_path / "away")
    assert as_reported(live, state)
    (tmp_path / "away").rename(state / COPIED)
    assert as_reported(live, state) and len(shown(live)[0]) == 29
    live.close()


@pytest.mark.parametrize("put", ["a FIFO", "a link to another log", "a link to a new log",
                                 "a dangling link"])
def test_what_is_put_where_a_log_was_is_shown_as_a_report_shows_it(fixtures_state, tmp_path, put):
    """A FIFO is no log (and opening one would hang the watch); a link is followed, a log
    reached twice counted once (files.find_logs), a dangling link no log."""
    state = fixtures_state
    # The link to another log is in the folder later in name order: of a log reached
    # through two folders, the watcher keeps the one it saw first, the report the first
    # in name order (left alone here: the turns and totals are the same either way).
    session = OTHER if put == "a link to another log" else COPIED
    log = state / session / "events.jsonl"
    live = watching(state)
    log.unlink()
    if put == "a FIFO":
        os.mkfifo(log)
    elif put == "a link to another log":
        log.symlink_to(state / COPIED / "events.jsonl")
    elif put == "a link to a new log":
        elsewhere = tmp_path / "elsewhere.jsonl"
        elsewhere.write_bytes((FIXTURES / OTHER / "events.jsonl").read_bytes())
        log.symlink_to(elsewhere)
    else:
        log.symlink_to(tmp_path / "nothing")
    assert as_reported(live, state) and len(shown(live)[0]) < 29
    log.unlink()
    shutil.copy(FIXTURES / session / "events.jsonl", log)
    assert as_reported(live, state) and len(shown(live)[0]) == 29
    live.close()


class ChangedAfterLooking:
    """A watcher that lets `change()` happen just after each pass looked at the logs and
    before they are read, as a log replaced at that moment is."""

    def __init__(self, watcher, change):
        self.watcher, self.change = watcher, change

    def changes(self, timeout):
        changes = self.watcher.changes(timeout)
        self.change()
        return changes

    def __getattr__(self, name):
        return getattr(self.watcher, name)


@pytest.mark.parametrize("put", ["a FIFO", "a folder"])
def test_a_log_that_cannot_be_read_shows_its_problem_alone(fixtures_state, put):
    """A log found unreadable as it was read (replaced by a FIFO or a folder once the
    watcher had looked) kept its rows, checks and damaged lines in the frame beside its
    problem, where a report that listed it shows nothing of it but the problem. Put back,
    it is read from its start, each turn once."""
    state = fixtures_state
    log = state / COPIED / "events.jsonl"
    lines = with_a_damaged_line(log.read_text().splitlines(keepends=True))
    log.write_text("".join(lines))
    changes = []
    live = LiveTurns(state, Selection(), zone=timezone.utc, workers=1,
                     watcher=ChangedAfterLooking(seeing_all(state), lambda: changes and changes.pop()()))
    live.poll(0)
    full = shown(live)
    assert full == reported(state) and full[4]["damaged_lines"] == 1

    def replace():
        log.unlink()
        os.mkfifo(log) if put == "a FIFO" else log.mkdir()

    with open(log, "a") as grown:
        grown.write(lines[-1])
    changes.append(replace)
    live.poll(0)
    assert shown(live) == reported(state, listed={COPIED: log})
    assert shown(live)[4] == {"damaged_lines": 0, "unreadable_logs": 1} and len(shown(live)[0]) < len(full[0])
    assert as_reported(live, state)  # now listed as a log that cannot be read
    os.unlink(log) if put == "a FIFO" else log.rmdir()
    log.write_text("".join(lines))
    assert as_reported(live, state) and shown(live) == full
    live.close()


@pytest.mark.parametrize("how", ["there at the start", "written while watching"])
def test_a_log_that_holds_no_event_is_counted_as_a_report_counts_it(fixtures_state, how):
    """A log none of whose first lines is an event (random bytes, another program's file)
    is counted by a report among the logs it cannot read; the watch did not count it."""
    state = fixtures_state
    (state / "not-a-log").mkdir()
    log = state / "not-a-log" / "events.jsonl"
    if how == "there at the start":
        log.write_text("".join(NO_EVENT))
    live = watching(state)
    if how == "written while watching":
        log.write_text("".join(NO_EVENT))
        live.poll(0)
    assert shown(live) == reported(state) and live.skipped()["unreadable_logs"] == 1
    log.write_text("".join(FIXTURE_LOGS[0]))  # rewritten as a log
    assert as_reported(live, state) and live.skipped()["unreadable_logs"] == 0
    live.close()


def test_a_fifo_s_head_is_not_waited_for(tmp_path):
    """Whether a FIFO put where a log was holds no event was asked by opening it, which
    waits for a writer for good: the watch hung."""
    fifo = tmp_path / "events.jsonl"
    os.mkfifo(fifo)
    answers = []
    asking = threading.Thread(target=lambda: answers.append(session_log.holds_no_event(fifo)), daemon=True)
    asking.start()
    asking.join(5)
    if asking.is_alive():  # let it go
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert answers == [False]


def test_a_session_whose_folder_turns_unreadable_leaves_the_view_until_it_can_be_read(fixtures_state, tmp_path):
    """A session folder that could no longer be read (here a link to itself in its place)
    kept its rows, its checks and its session in the frame, beside its folder counted
    unreadable, where a report lists no log of it. Readable again, it is back, each turn
    once, though its log did not change."""
    state, folder = fixtures_state, fixtures_state / COPIED
    live = watching(state)
    full = shown(live)
    folder.rename(tmp_path / "away")
    folder.symlink_to(COPIED)
    assert as_reported(live, state) and live.skipped()["unreadable_logs"] == 1
    assert live.sessions == full[2] - 1 and len(shown(live)[0]) < len(full[0])
    assert as_reported(live, state)  # and it stays out
    folder.unlink()
    (tmp_path / "away").rename(folder)
    assert as_reported(live, state) and shown(live) == full
    live.close()


NO_EVENT = [f"not an event {number}\n" for number in range(20)]  # another program's file
FIXTURE_LOGS = [(FIXTURES / name / "events.jsonl").read_text().splitlines(keepends=True)
                for name in sorted(os.listdir(FIXTURES))] + [NO_EVENT]
NAMES = ("a", "b", "c")
names = st.sampled_from(NAMES)
steps = st.lists(st.one_of(
    st.tuples(st.just("grow"), names, st.integers(0, len(FIXTURE_LOGS) - 1), st.integers(1, 200),
              st.booleans()),
    st.tuples(st.just("remove"), names),
    st.tuples(st.just("put back"), names),
    st.tuples(st.just("make unreadable"), names),
    st.tuples(st.just("copy"), names, names),
    st.tuples(st.just("truncate"), names, st.integers(0, 150)),
    st.tuples(st.just("swap state folder")),
    st.tuples(st.just("remove state folder")),
), max_size=10)


class StateFolder:
    """A state folder of sessions `a`, `b`, `c`, each a part of a fixture log from its start
    (which one, and whether with a damaged line, in `fixture` beside it, so that copies and
    swaps carry it), changed a step at a time. `away` holds sessions removed, `other` the
    state folder it is swapped with."""

    def __init__(self, root):
        self.state, self.away, self.other = root / "state", root / "away", root / "other"
        self.away.mkdir()

    def do(self, step):
        kind, *args = step
        getattr(self, kind.replace(" ", "_"))(*args)

    def grow(self, name, fixture, lines, damaged):
        folder = self.state / name
        if folder.is_symlink():
            return
        if not folder.is_dir():
            folder.mkdir(parents=True)
            (folder / "fixture").write_text(f"{fixture} {damaged:d}")
        log = folder / "events.jsonl"
        held = log.read_text().count("\n") if log.exists() else 0
        fixture, damaged = map(int, (folder / "fixture").read_text().split())
        whole = with_a_damaged_line(FIXTURE_LOGS[fixture]) if damaged else FIXTURE_LOGS[fixture]
        with open(log, "a") as out:
            out.write("".join(whole[held:held + lines]))

    def remove(self, name):
        if (self.state / name).is_dir():
            shutil.rmtree(self.away / name, ignore_errors=True)
            (self.state / name).rename(self.away / name)

    def put_back(self, name):
        if (self.state / name).is_symlink():
            (self.state / name).unlink()
        if (self.away / name).is_dir() and self.state.is_dir() and not (self.state / name).exists():
            (self.away / name).rename(self.state / name)

    def make_unreadable(self, name):
        """The folder moved away, a link to itself in its place (`put back` puts it back)."""
        if (self.state / name).is_dir():
            self.remove(name)
            (self.state / name).symlink_to(name)

    def copy(self, name, to):
        if (self.state / name).is_dir() and not (self.state / to).exists() and not (self.state / to).is_symlink():
            shutil.copytree(self.state / name, self.state / to)

    def truncate(self, name, lines):
        log = self.state / name / "events.jsonl"
        if log.is_file():
            log.write_text("".join(log.read_text().splitlines(keepends=True)[:lines]))

    def swap_state_folder(self):
        """Exchanged with `other`: moved away when there is none, back the next time."""
        parked = self.state.with_name("parked")
        if self.state.exists():
            self.state.rename(parked)
        if self.other.exists():
            self.other.rename(self.state)
        if parked.exists():
            parked.rename(self.other)

    def remove_state_folder(self):
        shutil.rmtree(self.state, ignore_errors=True)


@settings(max_examples=40)
@given(first=st.lists(st.tuples(names, st.integers(0, len(FIXTURE_LOGS) - 1), st.integers(1, 200),
                                st.booleans()), min_size=1, max_size=3), steps=steps)
def test_the_watch_shows_what_a_report_of_the_files_there_shows(first, steps):
    """Whatever happens to the logs between two passes (appended to, removed and put back,
    copied, truncated, their folders made unreadable, the state folder swapped or removed),
    the watch shows the turns, their
    figures, the turns in flight, the sessions, the checks of the CLI's totals and the
    damaged lines of a fresh report over the files there (some logs have a damaged line)."""
    with tempfile.TemporaryDirectory() as root:
        folder = StateFolder(Path(root))
        for grown in first:
            folder.grow(*grown)
        live = watching(folder.state)
        try:
            assert shown(live) == reported(folder.state)
            for step in steps:
                folder.do(step)
                live.poll(0)
                assert shown(live) == reported(folder.state), step
        finally:
            live.close()
