"""The report's progress line (issue 40, point 6), as a person at a terminal sees it: a real
report in tmux over a generated log big enough that reading it lasts seconds.

- it shows once reading has lasted a second and moves at least twice a second, while the
  biggest log is read too, with --jobs 1 (read in the report) and 2 (read by workers);
- it is gone when the report is printed, after Ctrl-C, and before the one line that says a
  worker died;
- it never shows piped, with --format, or with --html.

tests/test_report_workers.py holds the worker's side: one killed while it sends progress.
"""

from __future__ import annotations

import os
import random
import re
import shlex
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

from report_helpers import MONTH_START, add_turn
from sessiongen import SessionWriter
from tailerproc import tailer_env
from test_report_workers import children_of
from tmux import Terminal, needs_tmux

pytestmark = [needs_tmux, pytest.mark.skipif(not sys.platform.startswith("linux"),
                                             reason="the workers are looked up in /proc")]

BIG_TURNS, SMALL_TURNS, SMALL_LOGS = 10_000, 60, 3  # some 160 MB: 3 s or more of reading (some 40 MB/s)
LINE = re.compile(r"read ([\d,]+) of ([\d,]+) sessions?, ([\d.]+) of ([\d.]+) MB")
LINE_START = re.compile(r"read [\d,]+ of ")  # what a terminal of 24 columns keeps of it


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Path:
    """A state folder of one big log (`a-big`, read first by any --jobs) and a few small."""
    state = tmp_path_factory.mktemp("progress") / "state"
    for number, (name, turns) in enumerate([("a-big", BIG_TURNS)] + [
            (f"small-{n}", SMALL_TURNS) for n in range(SMALL_LOGS)]):
        rng = random.Random(number)
        writer = SessionWriter(name, MONTH_START + timedelta(days=number))
        for _ in range(turns):
            add_turn(writer, rng)
        writer.shutdown()
        writer.write(state)
    return state


@pytest.fixture
def terminal(tmp_path):
    env = {name: value for name, value in tailer_env().items()
           if name in ("PATH", "PYTHONPATH", "HOME", "PYTHONDONTWRITEBYTECODE")}
    shown = Terminal(tmp_path, {**env, "XDG_CACHE_HOME": str(tmp_path / "xdg")})
    yield shown
    shown.kill()


def start(terminal: Terminal, state: Path, options: str) -> float:
    """Type a report with `options` and run it; a time before it started (taken before Enter
    is sent, since tmux's send-keys can return long after the key started the report on a
    loaded machine: a full run saw the line 0.9 s after send-keys returned)."""
    terminal.type("clear; " + " ".join([shlex.quote(sys.executable), "-m", "tailer", "report",
                                         "--state-dir", shlex.quote(str(state)), "--no-cache",
                                         options, '; echo "exit=$?"']))
    before = time.monotonic()
    terminal.keys("Enter")
    return before


def watch_lines(terminal: Terminal, until, within_s: float = 180) -> list[tuple[float, str]]:
    """Every progress line on screen, with when it was first seen, until `until(screen,
    seen)`, `seen` being those lines so far."""
    seen: list[tuple[float, str]] = []
    deadline = time.monotonic() + within_s
    while True:
        screen = terminal.screen()
        found = LINE.search(screen)
        if found and (not seen or seen[-1][1] != found.group(0)):
            seen.append((time.monotonic(), found.group(0)))
        if until(screen, seen):
            return seen
        assert time.monotonic() < deadline, f"no end in sight; seen {seen[-3:]}"
        time.sleep(0.05)


def ended(screen: str, seen=()) -> bool:
    return re.search(r"^exit=\d+", screen, re.M) is not None


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_line_moves_twice_a_second_while_the_biggest_log_is_read(big, terminal, jobs):
    started = start(terminal, big, f"--jobs {jobs} --turns 0")
    seen = watch_lines(terminal, ended)
    screen = terminal.screen()
    assert "exit=0" in screen and "turns" in screen, screen
    assert not LINE.search(screen), "the line outlived the report"
    assert seen, "no progress line was seen"
    assert seen[0][0] - started >= 1.0, "the line showed before reading had lasted a second"
    # The big log is read first, alone (--jobs 1) or by one worker while the other reads
    # the small ones: it is being read while the line shows no more sessions than those.
    during = [(when, line) for when, line in seen
              if int(LINE.search(line).group(1)) <= (0 if jobs == 1 else SMALL_LOGS)]
    assert len(during) >= 4, f"the line hardly moved while the biggest log was read: {seen}"
    lasted = during[-1][0] - during[0][0]
    assert (len(during) - 1) / lasted >= 2, f"fewer than two changes a second: {during}"
    read = [float(LINE.search(line).group(3)) for _, line in during]
    assert read == sorted(read) and read[-1] > read[0]


@pytest.mark.parametrize("options", ["--jobs 1 --turns 0 | cat", "--jobs 2 --turns 0 | cat", "--format json > out.json",
                                     "--format csv", "--html page.html"],
                         ids=["piped", "piped-jobs-2", "json", "csv", "html"])
def test_no_line_piped_or_for_a_program(big, terminal, options):
    start(terminal, big, options)
    seen = watch_lines(terminal, ended)
    assert seen == []
    assert "exit=0" in terminal.screen()


def test_ctrl_c_erases_the_line(big, terminal):
    start(terminal, big, "--jobs 1")
    # Pressed while the biggest log, the first, is read: no session read yet.
    seen = watch_lines(terminal, lambda screen, seen: ended(screen) or bool(seen))
    assert seen and not ended(terminal.screen()), "the line did not show before the report ended"
    assert seen[-1][1].startswith("read 0 of "), seen
    terminal.keys("C-c")
    terminal.wait_for(lambda: ended(terminal.screen()), 30)
    screen = terminal.screen()
    assert "exit=130" in screen and not LINE.search(screen), screen


def test_a_worker_killed_while_the_line_shows_ends_the_report_in_one_line(big, terminal):
    start(terminal, big, "--jobs 2")
    seen = watch_lines(terminal, lambda screen, seen: ended(screen) or len(seen) >= 2)
    assert not ended(terminal.screen()), f"the report ended before the line moved: {seen}"
    workers = children_of(the_report(terminal))
    assert len(workers) == 2
    os.kill(workers[0], signal.SIGKILL)
    terminal.wait_for(lambda: ended(terminal.screen()), 30)
    lines = [line.rstrip() for line in terminal.screen().splitlines() if line.strip()]
    assert lines[-3:] == [
        "hydrafusion-tailer report: a process reading the session logs stopped (killed by "
        "SIGKILL, as when memory runs out): no report; --jobs 1 reads in one process",
        "exit=2", "ready$"], lines
    assert not LINE.search("\n".join(lines))


def the_report(terminal: Terminal) -> int:
    """The report: the process the terminal's shell runs."""
    children = children_of(terminal.shell_pid())
    assert len(children) == 1, children
    return children[0]


def test_on_a_terminal_narrower_than_the_line_it_is_cut_to_fit_and_leaves_nothing(big, tmp_path):
    """A line wider than the terminal wraps, and `\\r` goes back to the start of its last row
    only: each redraw left the rows above it on screen, and the erase at the end too."""
    env = {name: value for name, value in tailer_env().items()
           if name in ("PATH", "PYTHONPATH", "HOME", "PYTHONDONTWRITEBYTECODE")}
    narrow = Terminal(tmp_path, {**env, "XDG_CACHE_HOME": str(tmp_path / "xdg")}, columns=24,
                      rows=40)
    try:
        start(narrow, big, "--jobs 1 --turns 0")
        screens = []
        narrow.wait_for(lambda: screens.append(narrow.screen()) or ended(screens[-1]), 180)
        # Every row printed since, scrolled away or not, each as the terminal shows it.
        rows = subprocess.run([*narrow.server, "capture-pane", "-p", "-S", "-"],
                              capture_output=True, text=True, timeout=30).stdout.splitlines()
    finally:
        narrow.kill()
    assert any("read 0 of " in screen for screen in screens), "no progress line was seen"
    assert all(len(LINE_START.findall(screen)) <= 1 and screen.count(" MB") <= 1 for screen in screens)
    assert not [row for row in rows if LINE_START.search(row) or row.endswith(" MB")], rows
