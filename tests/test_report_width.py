"""The report's table uses the terminal whole (issue 40, point 1): no line wider than the
terminal, nothing of the title or the summary cut (they wrap between words), a turn's
legs on its line wherever they fit there, and a narrow terminal leaving out the least
read columns first (the router's times before its counts).

Checked on a real terminal (tmux) at 60, 80, 120 and 200 columns, on the demo and on the
real CLI's sessions, against the same report printed 1,000 columns wide: what nothing
had to wrap or leave out."""

import functools
import itertools
import re
import shutil
import sqlite3
import subprocess
import sys
import unicodedata
from datetime import datetime, timezone

import pytest
from hypothesis import given, strategies as st

from ledgergen import TABLE
from realcli import record
from sessiongen import SessionWriter
from tailerproc import ROOT, tailer_env
from tmux import Terminal, needs_tmux
from tailer.report.table import TURN_COLUMNS_DROPPED
from tailer.report.wrap import flow

VERSION = (ROOT / "tests" / "realcli" / "VERSION").read_text().strip()
REALCLI, _ = record.recorded(VERSION)
SOURCES = {"demo": ["--demo"], "realcli": ["--state-dir", str(REALCLI)]}
CLOCK = re.compile(r"\b\d\d:\d\d(:\d\d)?\b")
DATE = re.compile(r"\b\d{4}-\d\d-\d\d\b")
TURN_LINE = re.compile(r"^  \d\d:\d\d:\d\d  ")
# The lines of prose a report prints: each a sentence that wraps, never cut.
PROSE = ("HydraFusion:", "only ", "above, HydraFusion turns only:", "credits leave out",
         "CLI totals:", "TURNS", "  kept:", "  accepted:", "  * an estimate", "  * least squares")


def is_prose(line: str) -> bool:
    """A sentence of the report: PROSE's, or a model the price fit refused, with why."""
    return line.startswith(PROSE) or ": not fitted, " in line


def words(lines: list[str]) -> str:
    """The lines' words, a space between each two: what wrapping leaves as it was. The
    demo ends a few minutes before it runs, so its times and dates are masked."""
    return " ".join(DATE.sub("YYYY-MM-DD", CLOCK.sub("HH:MM", " ".join(lines))).split())


def wide(source: str) -> list[str]:
    """The report with room for everything on one line: 1,000 columns, piped."""
    done = subprocess.run([sys.executable, "-m", "tailer", "report", *SOURCES[source],
                           "--timezone", "UTC"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env=tailer_env(COLUMNS="1000"))
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def on_a_terminal(source: str, columns: int) -> list[str]:
    """The report run on a tmux terminal `columns` wide: every line it printed, a line the
    terminal had to wrap joined again (so one wider than the terminal shows as such)."""
    terminal = Terminal(ROOT, tailer_env(), columns=columns, rows=50)
    try:
        terminal.type(f"echo report-start; {sys.executable} -m tailer report "
                      f"{' '.join(SOURCES[source])} --timezone UTC 2>/dev/null; echo report-end $?")
        terminal.keys("Enter")
        terminal.wait_for(lambda: re.search(r"^report-end \d+$", terminal.screen(), re.M))
        lines = terminal.lines()
    finally:
        terminal.kill()
    start = lines.index("report-start")
    end = next(i for i, line in enumerate(lines) if re.fullmatch(r"report-end \d+", line))
    assert lines[end] == "report-end 0"
    return lines[start + 1:end]


def turn_list(lines: list[str]) -> tuple[int, list[str]]:
    """Where the outcome column begins in the turn list's header, and each turn's outcome."""
    header = next(line for line in lines if line.startswith("  started "))
    at = header.index("outcome")
    return at, [line[at:].split()[0] for line in lines if TURN_LINE.match(line)]


def turn_legs(lines: list[str]) -> list[list[str]]:
    """Each turn's leg labels, from a report wide enough for all of them on the turn's line."""
    header = next(line for line in lines if line.startswith("  started "))
    return [line[header.index("legs"):].split(" -> ") for line in lines if TURN_LINE.match(line)]


def note_of(lines: list[str], heading: str) -> list[str]:
    """The columns a table left out, as the line under it names them (none: [])."""
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    end = next(i for i in range(start, len(lines)) if not lines[i].strip())
    note = " ".join(line.strip() for line in lines[start:end])
    left_out = re.search(r"\(too narrow for: ([^)]*)\)", note)
    return left_out.group(1).split(", ") if left_out else []


@functools.cache
def printed(source: str, columns: int) -> tuple[list[str], list[str]]:
    """The report on a terminal `columns` wide, and the same with room for everything."""
    return on_a_terminal(source, columns), wide(source)


WIDTHS = pytest.mark.parametrize("columns", [60, 80, 120, 200])
ON_BOTH = pytest.mark.parametrize("source", ["demo", "realcli"])


@needs_tmux
@WIDTHS
@ON_BOTH
def test_no_line_is_wider_than_the_terminal_and_no_sentence_is_cut(source, columns):
    shown, whole = printed(source, columns)
    assert max(map(len, shown)) <= columns
    assert max(map(len, whole)) > columns  # else there was nothing to fit
    # Every sentence of the title and the summary, word for word, wrapped or not.
    for line in whole:
        if is_prose(line):
            assert words([line]) in words(shown), line


@needs_tmux
@WIDTHS
@ON_BOTH
def test_legs_sit_on_the_turns_line_where_they_fit(source, columns):
    """Beside the turn's columns where every label fits there (wrapped after an arrow,
    under each other), else on the lines below; all of them, none cut."""
    shown, whole = printed(source, columns)
    at, outcomes = turn_list(shown)
    column = at + max(len("outcome"), *map(len, outcomes)) + 2
    turns = [i for i, line in enumerate(shown) if TURN_LINE.match(line)]
    legs = turn_legs(whole)
    assert len(turns) == len(legs)
    beside = 0
    for index, labels in zip(turns, legs):
        block = [shown[index]] + list(itertools.takewhile(lambda line: line.startswith("    "),
                                                          shown[index + 1:]))
        if all(len(label) + 3 * (i < len(labels) - 1) <= columns - column
               for i, label in enumerate(labels)):
            beside += 1
            assert block[0][column:].startswith(labels[0]), block
            assert all(line[:column].isspace() for line in block[1:]), block
        else:
            assert len(block[0].rstrip()) < column and block[1].startswith("      "), block
        assert words([block[0][column:]] + block[1:]) == words([" -> ".join(labels)]), block
    assert beside == len(legs) if columns == 200 else beside > 0 if columns == 120 else True


@needs_tmux
@WIDTHS
@ON_BOTH
def test_narrow_terminals_leave_out_the_least_read_columns_first(source, columns):
    """The router's times before its counts, a model's share and legs before its tokens,
    the turn list's duration first; nothing left out from 120 columns on."""
    shown, _ = printed(source, columns)
    assert note_of(shown, "ROUTER") == {60: ["last seen", "first seen"], 80: ["last seen"]}.get(columns, [])
    for heading in ("BY MODEL", "BY LEG KIND"):
        left_out = note_of(shown, heading)
        assert left_out == ["share", "legs", "cache read", "output", "input"][:len(left_out)]
        assert bool(left_out) == (columns == 60) or (columns == 80 and left_out == ["share"])
    turn_note = [line for line in shown if line.startswith("  (too narrow for: duration")]
    dropped = turn_note[0].strip()[len("(too narrow for: "):-1].split(", ") if turn_note else []
    assert dropped == list(TURN_COLUMNS_DROPPED[:len(dropped)])
    assert bool(dropped) == (columns < 80)
    assert columns < 120 or not [line for line in shown if "too narrow" in line]


# -- Any width, piped: every sentence whole ----------------------------------------------


@pytest.fixture(scope="module")
def home_that_differs(tmp_path_factory):
    """The real CLI's sessions and its ledger beside them, the ledger with a call the logs
    lack (a session that differs, five figures each side) and a session without a log."""
    state_dir, sessions = record.recorded(VERSION)
    copilot = tmp_path_factory.mktemp("home") / "copilot-home"
    shutil.copytree(state_dir, copilot / "session-state")
    connection = sqlite3.connect(record.ledger_database(VERSION, copilot))
    for session in (sessions["critique_revise"], "0b5e1a2c-3d4e-4f50-8a6b-7c8d9e0f1a2b"):
        connection.execute(f"INSERT INTO {TABLE} (session_id, model, input_tokens, output_tokens, "
                           "cache_read_tokens, cache_write_tokens, total_nano_aiu) VALUES "
                           f"('{session}', 'gpt-5.6-sol', 1200000, 40, 200, 0, 250000000)")
    connection.commit()
    connection.close()
    return copilot / "session-state"


def test_every_sentence_of_the_summary_is_whole_at_any_width(home_that_differs):
    """Piped at 40 to 200 columns ($COLUMNS), with a filter, a long time zone, the CLI's
    totals, a ledger that differs and one with a session the logs lack: no line wider,
    and every sentence the 1,000-column report prints, word for word."""
    args = ["--state-dir", str(home_that_differs), "--since", "2000-01-01",
            "--timezone", "America/Argentina/ComodRivadavia"]
    env = tailer_env()

    def report(columns: int) -> list[str]:
        done = subprocess.run([sys.executable, "-m", "tailer", "report", *args], cwd=ROOT,
                              capture_output=True, text=True, timeout=120,
                              env={**env, "COLUMNS": str(columns)})
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    whole = report(1000)
    paragraph = whole.index(next(line for line in whole if line.startswith("CLI totals:")))
    sentences = [line for line in whole if is_prose(line)]
    sentences += whole[paragraph:whole.index("", paragraph)]
    assert any("differ" in line for line in sentences)
    assert any("without a log" in line for line in sentences)
    assert any(line.startswith("  * an estimate") for line in sentences)
    assert len(whole[0]) > 90 and any(len(line) > 90 for line in sentences[1:])
    for columns in (40, 47, 60, 73, 100, 133, 200):
        shown = report(columns)
        assert max(map(len, shown)) <= columns, columns
        for sentence in sentences:
            assert words([sentence]) in words(shown), (columns, sentence)


@given(parts=st.lists(st.text(st.sampled_from("ab -"), min_size=1, max_size=30).map(str.strip)
                      .filter(bool), max_size=12),
       width=st.integers(8, 60), indent=st.sampled_from(["", "  ", "     "]))
def test_flow_breaks_between_words_and_loses_nothing(parts, width, indent):
    """No line wider than `width`; the words kept as they were where each fits on a line,
    and only a word longer than a line broken (its letters all kept, in order)."""
    lines = flow(parts, width, indent)
    assert all(len(line) <= width for line in lines)
    assert all(line.startswith(indent) for line in lines[1:])
    given_words = " ".join(parts).split()
    if all(len(word) <= width - len(indent) for word in given_words):
        assert " ".join(lines).split() == given_words
    assert "".join("".join(lines).split()) == "".join(given_words)


# Session ids are the names of the state folder's folders: any text, CJK and emoji, which a
# terminal draws two columns wide, combining marks and zero-width characters, which it draws
# in none. Counted as one column each, they moved every column after them.
ODD_SESSION_IDS = ["会话日本語テスト会话日本語", "😀😀😀-emoji", "e\u0301\u0301\u0301-combining",
                   "zero\u200bwidth\u200d-joiner", "2b9e1c4a-0e9b-4c1e-9d0a-5f1f2a3b4c5d"]


def columns_of(line: str) -> int:
    """How many columns a terminal draws `line` in: two for a wide character, none for a
    combining mark or a zero-width one."""
    return sum(0 if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf")
               else 2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in line)


@pytest.mark.parametrize("view", [["--turns", "20"], ["--by", "session", "--breakdown"]])
def test_a_session_id_of_wide_or_zero_width_characters_keeps_every_column_in_place(tmp_path, view):
    for minute, session_id in enumerate(ODD_SESSION_IDS):
        writer = SessionWriter(session_id, datetime(2026, 11, 5, 10, minute, tzinfo=timezone.utc))
        writer.single("gpt-5.6-sol")
        writer.ordinary("claude-sonnet-4.6")
        writer.write(tmp_path)
    done = subprocess.run([sys.executable, "-m", "tailer", "report", "--state-dir", str(tmp_path),
                           "--ledger", "none", "--no-cache", "--timezone", "UTC", *view],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=tailer_env(COLUMNS="80"))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(map(columns_of, lines)) <= 80
    if view[0] == "--turns":  # each turn's pattern in the header's column
        header = next(line for line in lines if line.startswith("  started "))
        at = {columns_of(line[:line.index(" single ") + 1]) for line in lines
              if TURN_LINE.match(line) and " single " in line}
        assert at == {header.index("pattern")}
    else:  # the table's rows as wide as its header, its last column right-aligned
        start = next(i for i, line in enumerate(lines) if line.startswith("BY SESSION"))
        end = next(i for i in range(start, len(lines)) if lines[i].startswith("total"))
        assert {columns_of(line) for line in lines[start:end + 1]} == {len(lines[start])}


@pytest.mark.parametrize("given", ["²", "¹²⁰", "①"])
def test_columns_of_digits_int_does_not_read_is_the_piped_width(given):
    """`²` is a digit to str.isdigit and none to int: a $COLUMNS of such digits ended the
    report in a traceback. It is no number of columns, so the piped width is used, as for
    any other text."""
    def report(columns: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "tailer", "report", "--state-dir",
                               str(ROOT / "fixtures"), "--ledger", "none", "--no-cache"],
                              cwd=ROOT, capture_output=True, text=True, timeout=120,
                              env=tailer_env(COLUMNS=columns))

    done = report(given)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert done.stdout == report("wide").stdout
