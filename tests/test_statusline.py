"""`statusline`: HydraFusion in Copilot CLI's footer, from the JSON the CLI pipes to it.

The line is checked against the report (the last turn, the session's credits and review
share, defined once in tailer/report/figures.py) and against the raw lines of a log cut
anywhere (the turn in flight, tests/in_flight_truth.py); the saved state against reading
afresh (a log appended to piece by piece shows what the whole log read at once shows). The
footer's promise is checked by feeding it what can go wrong: stdin that is no object of the
CLI's, a log or a state that is missing, damaged, a FIFO, a symbolic link or another user's,
a disk that takes no write, two runs at once, a process killed mid-run. Timings are the
benchmark's (bench/benchmark.py, measure_statusline), never asserted here.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from in_flight_truth import running_after
from sessiongen import START, SessionWriter, every_pattern, retuned, whole_session
from tailerproc import ROOT, tailer_env
from tailer.statusline import command, saved
from tailer.statusline.options import Options, parse_format
from tailer.statusline.render import short_model

FIXTURES = ROOT / "fixtures"
FIELDS = "{state}|{pattern}|{legs}|{verdict}|{credits}|{answer}|{session_credits}|{review_share}|{running}"
HOUR_NS = 3600 * 10**9
SGR = re.compile(r"\x1b\[[0-9;]*m")


def status_input(log_folder: Path | str, **more) -> bytes:
    """What the CLI pipes to the command (1.0.102: docs/STATUSLINE.md), for a session."""
    return json.dumps({"session_id": Path(log_folder).name, "transcript_path": str(log_folder),
                       "cwd": "/somewhere", "model": {"id": "auto"}, **more}).encode()


def run_statusline(*options: str, stdin=b"", env: dict[str, str] | None = None,
                   timeout: float = 60) -> subprocess.CompletedProcess:
    """`python -m tailer statusline OPTIONS`, as the CLI runs it: stdin and stdout pipes,
    no terminal of its own (a session of its own, so the test's terminal is not its)."""
    kwargs = {"input": stdin} if isinstance(stdin, bytes) else {"stdin": stdin}
    return subprocess.run([sys.executable, "-m", "tailer", "statusline", *options], cwd=ROOT,
                          env=env or tailer_env(NO_COLOR="1"), capture_output=True,
                          timeout=timeout, start_new_session=True, **kwargs)


def environ(tmp_path: Path) -> dict[str, str]:
    return {"XDG_CACHE_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path), "NO_COLOR": "1"}


def line_of(log_folder: Path, env: dict[str, str], template: str = FIELDS, width: int | None = None) -> str:
    """The line, worked out in this process (as `show` does, without stdin and stdout)."""
    return command.our_line(status_input(log_folder), Options(parse_format(template)), width, env)


def settled_line(log_folder: Path, env: dict[str, str], template: str = FIELDS) -> str:
    """The line once reading has caught up with the log (a loaded machine may need more
    than one refresh's READ_BUDGET_S for a log of some MB)."""
    for _ in range(1000):
        shown = line_of(log_folder, env, template)
        if not shown.startswith("HydraFusion: reading the log"):
            return shown
    raise AssertionError("reading never caught up")


def quiet(log: Path, seconds: float = 3600) -> None:
    """Make the log's last change `seconds` ago."""
    at = time.time_ns() - int(seconds * 1e9)
    os.utime(log, ns=(at, at))


def assert_footer_safe(done: subprocess.CompletedProcess, lines: int = 1) -> str:
    """The promise to the footer: exit 0, nothing on stderr, no control character (NO_COLOR
    is set), no path; the line (`lines` of them with --then), as text."""
    assert done.returncode == 0, done
    assert done.stderr == b"", done.stderr[-2000:]
    text = done.stdout.decode("utf-8")
    assert text.count("\n") <= lines and text.rstrip("\n").replace("\n", "").isprintable(), text
    assert "/" not in text.replace("/s", ""), text  # no path (a rate's `/s` is no path)
    return text.rstrip("\n")


# -- the line against the report ----------------------------------------------------------


def report_json(state: Path, session_id: str, env: dict[str, str]) -> dict:
    done = subprocess.run([sys.executable, "-m", "tailer", "report", "--state-dir", str(state),
                           "--session", session_id, "--format", "json"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.partition("\n")[0])


def expected_fields(report: dict) -> list[str]:
    """FIELDS as the report's figures of the session say they must read (its log idle)."""
    row = max(report["turns"], key=lambda turn: turn["start"])
    legs = [f"{leg['kind']} {short_model(leg['model'])}" + (f" {leg['verdict']}" if leg["verdict"] else "")
            + (" failed" if leg["status"] in ("failed", "cancelled") else "") + f" {leg['credits']:.2f}"
            for leg in row["legs"]]
    answered = [leg for leg in row["legs"] if leg["committed"]]
    if row["pattern"] == "ordinary":
        answer = short_model(row["model"])
    else:
        answer = f"{answered[0]['kind']} {short_model(answered[0]['model'])}" if answered else ""
    verdicts = [leg["verdict"] for leg in row["legs"] if leg["verdict"]]
    share = report["headline"]["review_share"]
    session = sum(kind["credits"] for kind in report["by_kind"])
    return ["last", row["pattern"], " > ".join(legs), verdicts[-1] if verdicts else "",
            f"{row['credits']:.2f}", answer, f"{session:.2f}",
            "-" if share is None else f"{100 * share:.0f}%", ""]


def fixture_sessions(tmp_path: Path) -> Path:
    """Every session the tests have a writer for, and the demo's, in one state folder,
    each log last written an hour ago (a turn left open there is idle, as in the report)."""
    state = tmp_path / "state"
    shutil.copytree(FIXTURES, state)
    for writer in (every_pattern("sl-every"), whole_session("sl-whole"), retuned("sl-retuned")):
        writer.write(state)
    for log in state.glob("*/events.jsonl"):
        quiet(log)
    return state


def test_the_last_turn_and_the_sessions_figures_are_the_reports(tmp_path):
    state = fixture_sessions(tmp_path)
    env = tailer_env(XDG_CACHE_HOME=str(tmp_path / "cache"), NO_COLOR="1")
    for folder in sorted(path.parent for path in state.glob("*/events.jsonl")):
        expected = expected_fields(report_json(state, folder.name, env))
        for run in ("first", "from the saved state"):
            done = run_statusline("--format", FIELDS, stdin=status_input(folder), env=env)
            assert assert_footer_safe(done).split("|") == expected, (folder.name, run)


def test_the_log_is_found_by_its_folder_its_file_or_the_session_id(tmp_path):
    writer = every_pattern("sl-found")
    log = writer.write(tmp_path / "home" / "session-state")
    quiet(log)
    env = environ(tmp_path)
    shown = line_of(log.parent, env)
    assert shown.startswith("last|")
    by_file = command.our_line(json.dumps({"transcript_path": str(log)}).encode(), Options(parse_format(FIELDS)),
                               None, env)
    by_id = command.our_line(json.dumps({"session_id": "sl-found"}).encode(), Options(parse_format(FIELDS)),
                             None, dict(env, COPILOT_HOME=str(tmp_path / "home")))
    assert by_file == by_id == shown
    for wrong in ({"session_id": ".."}, {"session_id": "a/b"}, {"session_id": ""}, {"session_id": 7},
                  {"transcript_path": 7}, {"transcript_path": ""}, [], "x", None, {}):
        assert command.our_line(json.dumps(wrong).encode(), Options(), None,
                                dict(env, COPILOT_HOME=str(tmp_path / "home"))) == ""


def test_the_json_the_real_cli_pipes_finds_its_log(tmp_path):
    """The object captured from Copilot CLI 1.0.102's footer (tests/test_realcli.py keeps
    it up to date): its transcript_path is the session's folder."""
    captured = json.loads((ROOT / "tests" / "data" / "realcli" / "1.0.102" / "statusline-input.json").read_text())
    assert {"session_id", "transcript_path", "model", "cost", "context_window"} <= captured.keys()
    folder = tmp_path / "copilot-home" / "session-state" / captured["session_id"]
    every_pattern(captured["session_id"]).write(folder.parent)
    captured["transcript_path"] = str(folder)
    assert line_of(folder, environ(tmp_path)).startswith("last|")
    shown = command.our_line(json.dumps(captured).encode(), Options(), None, environ(tmp_path))
    assert shown.startswith("HydraFusion last single")


# -- the turn in flight, leg by leg ---------------------------------------------------------

SESSION_LINES = {name: writer.lines() for name, writer in
                 (("every", every_pattern("sl-flight")), ("whole", whole_session("sl-flight")))}


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(name=st.sampled_from(sorted(SESSION_LINES)), cuts=st.lists(st.integers(1, 400), min_size=1, max_size=8))
def test_a_log_read_in_pieces_shows_what_it_shows_read_at_once_and_what_is_in_flight(tmp_path_factory, name, cuts):
    """The log is written piece by piece, a refresh after each piece: every line equals the
    one a fresh read of the same bytes gives (no saved state), and shows the turn in flight
    the raw lines say is open (tests/in_flight_truth.py): its pattern, its legs running,
    its calls' credits."""
    lines = SESSION_LINES[name]
    tmp_path = tmp_path_factory.mktemp("pieces")
    log = tmp_path / "state" / "sl-flight" / "events.jsonl"
    log.parent.mkdir(parents=True)
    log.write_bytes(b"")
    env, at = environ(tmp_path), 0
    template = "{state}|{pattern}|{running}|{credits}|{legs}|{session_credits}|{review_share}"
    for cut in sorted({min(cut, len(lines)) for cut in cuts}):
        with open(log, "a") as handle:
            handle.write("".join(line + "\n" for line in lines[at:cut]))
        at = cut
        pieces = line_of(log.parent, env, template)
        fresh = line_of(log.parent, dict(env, XDG_CACHE_HOME=str(tmp_path / f"fresh-{cut}")), template)
        assert pieces == fresh, cut
        state, pattern, running, credits, *_ = pieces.split("|")
        truth = running_after(lines[:cut])
        assert (state == "running") == (truth is not None), (cut, pieces)
        if truth is not None:
            assert pattern == {"ordinary": "ordinary", "fallback": "fallback"}.get(
                truth.kind, pattern if pattern in ("single", "cascade", "critique") else None), pieces
            assert credits.removeprefix(">=") == f"{truth.call_nano / 1e9:.2f}", (cut, pieces)
            assert bool(running) == bool(truth.running), (cut, pieces)


def test_a_turn_in_flight_goes_from_leg_to_leg_and_idle_finishes_it(tmp_path):
    writer = SessionWriter("sl-legs", START)
    writer.single("gpt-5.6-sol")
    writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="reject", repair_model="claude-sonnet-4.6")
    lines = writer.lines()
    log = tmp_path / "state" / "sl-legs" / "events.jsonl"
    log.parent.mkdir(parents=True)
    env = environ(tmp_path)
    seen = []
    for cut in range(1, len(lines) + 1):
        log.write_text("".join(line + "\n" for line in lines[:cut]))
        seen.append(line_of(log.parent, env, "{state} {legs}"))
    order = ["running .primary > .judge > .repair", "running *primary 1.1-flash",
             "running +primary 1.1-flash", "+judge 5.6-sol reject", "*repair sonnet-4.6", "+repair sonnet-4.6"]
    found = [next(index for index, text in enumerate(seen) if part in text) for part in order]
    assert found == sorted(found), seen
    assert seen[-1].startswith("last primary 1.1-flash"), seen[-1]
    # Cut inside the repair and left alone past the idle timeout: the turn as it stands.
    repair = next(index for index, text in enumerate(seen) if "*repair" in text)
    log.write_text("".join(line + "\n" for line in lines[:repair + 1]))
    assert line_of(log.parent, env, "{state} {pattern}").startswith("running cascade")
    quiet(log, 3 * 3600)
    assert line_of(log.parent, env, "{state} {pattern} {credits}").startswith("last cascade")


# -- only the new bytes ---------------------------------------------------------------------


def test_a_refresh_reads_only_what_was_appended_since(tmp_path):
    """After a refresh, the log's older bytes are changed where a reader from the start
    would see it (an earlier turn's credits) but its saved position would not (the end
    before it is kept): the next refresh's sums hold the new turn added to the old sums,
    so it read on from where it stopped, and none of the older bytes."""
    writer = SessionWriter("sl-new-bytes", START)
    writer.single("gpt-5.6-sol")
    writer.single("claude-sonnet-4.6")
    log = writer.write(tmp_path / "state")
    env = environ(tmp_path)
    before = line_of(log.parent, env, "{session_credits}")
    data = log.read_bytes()
    leg = data.index(b'"assistant.fusion_phase_completed"')  # the first leg's own credits
    first_credits = re.compile(rb'"totalNanoAiu":(\d)').search(data, leg)
    changed = data[:first_credits.start(1)] + (b"1" if first_credits.group(1) != b"1" else b"2") \
        + data[first_credits.end(1):]
    assert len(changed) == len(data) and changed[-2048:] == data[-2048:]
    writer.single("gpt-5.6-sol")
    log.write_bytes(changed + "".join(line + "\n" for line in writer.lines()[data.count(b"\n"):]).encode())
    added = writer.expected[-1].nano_aiu
    after = line_of(log.parent, env, "{session_credits}")
    assert after == f"{float(before) + added / 1e9:.2f}"
    fresh = line_of(log.parent, dict(env, XDG_CACHE_HOME=str(tmp_path / "fresh")), "{session_credits}")
    assert fresh != after  # a reader from the start does see the older bytes changed


def test_a_log_as_it_was_is_not_read_at_all(tmp_path, monkeypatch):
    writer = every_pattern("sl-unread")
    log = writer.write(tmp_path / "state")
    env = environ(tmp_path)
    first = line_of(log.parent, env)
    quiet(log, 60)
    second = line_of(log.parent, env)  # the identity seen now is old enough to trust
    from tailer.statusline import summary

    monkeypatch.setattr(summary, "read_on", lambda *args: pytest.fail("the log was read"))
    assert line_of(log.parent, env) == second == first


def test_a_log_rewritten_or_cut_between_refreshes_is_read_again(tmp_path):
    writer = every_pattern("sl-rewritten")
    log = writer.write(tmp_path / "state")
    env = environ(tmp_path)
    lines = writer.lines()
    for keep in (len(lines) // 2, 5, len(lines) - 1):
        line_of(log.parent, env)
        log.write_text("".join(line + "\n" for line in lines[:keep]))
        fresh = line_of(log.parent, dict(env, XDG_CACHE_HOME=str(tmp_path / f"fresh-{keep}")))
        assert line_of(log.parent, env) == fresh, keep
    other = whole_session("sl-rewritten")  # another log, longer, at the same path
    other.write(tmp_path / "state")
    fresh = line_of(log.parent, dict(env, XDG_CACHE_HOME=str(tmp_path / "fresh-other")))
    assert line_of(log.parent, env) == fresh


def test_a_first_look_at_a_big_log_is_spread_over_refreshes(tmp_path, monkeypatch):
    """Each refresh reads for READ_BUDGET_S, saves where it got and says how far; the
    last one shows what one read of the whole log shows."""
    writer = SessionWriter("sl-big", START)
    for number in range(400):
        writer.single("gpt-5.6-sol") if number % 2 else writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol")
    log = writer.write(tmp_path / "state")
    env = environ(tmp_path)
    from tailer.statusline import summary

    monkeypatch.setattr(command, "READ_BUDGET_S", 0.0)
    monkeypatch.setattr(summary, "LEFT_BYTES", 0)
    shown = [line_of(log.parent, env, "{turn}")]
    while shown[-1].startswith("HydraFusion: reading the log") and len(shown) < 100_000:
        shown.append(line_of(log.parent, env, "{turn}"))
    percents = [int(text.rpartition(" ")[2].rstrip("%")) for text in shown[:-1]]
    assert len(percents) > 10 and percents == sorted(percents)
    monkeypatch.undo()
    assert shown[-1] == settled_line(log.parent, dict(env, XDG_CACHE_HOME=str(tmp_path / "fresh")), "{turn}")


# -- never break the footer: what stdin may hold ---------------------------------------------

STDINS = {
    "empty": b"",
    "not JSON": b"hello\n",
    "a JSON list": b"[1, 2, 3]",
    "binary": bytes(range(256)) * 64,
    "no session": b'{"cwd": "/home/user/x"}',
    "a path that is a number": b'{"transcript_path": 12}',
    "a session id that climbs": b'{"session_id": "../../../etc"}',
    "nested brackets": b"[" * 60_000,
    "a NUL in the path": b'{"transcript_path": "/tmp/x\\u0000y"}',
    "a lone surrogate": b'{"transcript_path": "\\ud800/x"}',
}


@pytest.mark.parametrize("name", sorted(STDINS))
def test_any_stdin_is_a_short_neutral_line_or_nothing(tmp_path, name):
    text = assert_footer_safe(run_statusline(stdin=STDINS[name], env=tailer_env(
        NO_COLOR="1", XDG_CACHE_HOME=str(tmp_path / "cache"), COPILOT_HOME=str(tmp_path / "home"))))
    assert text in ("", "HydraFusion no turn yet · session 0.00 cr, review -",
                    "HydraFusion: the session log cannot be read"), text


def test_100_mb_of_stdin_are_not_read(tmp_path):
    big = tmp_path / "big"
    with open(big, "wb") as handle:
        handle.truncate(100 << 20)
    with open(big, "rb") as stdin:
        assert assert_footer_safe(run_statusline(stdin=stdin)) == ""
        assert stdin.tell() <= 1 << 20  # it left the rest unread


def test_a_stdin_that_never_ends_is_not_waited_for_long():
    reader, writer = os.pipe()
    try:
        started = time.monotonic()
        assert assert_footer_safe(run_statusline(stdin=reader)) == ""
        assert time.monotonic() - started < 30  # bounded (the time itself is the benchmark's)
    finally:
        os.close(reader)
        os.close(writer)


# -- the log's path ------------------------------------------------------------------------


def test_a_missing_log_is_no_turn_yet_and_one_that_is_no_file_is_unreadable(tmp_path):
    env = tailer_env(NO_COLOR="1", XDG_CACHE_HOME=str(tmp_path / "cache"))
    missing = assert_footer_safe(run_statusline(stdin=status_input(tmp_path / "nothing"), env=env))
    assert missing == "HydraFusion no turn yet · session 0.00 cr, review -"
    fifo = tmp_path / "fifo-session"
    fifo.mkdir()
    os.mkfifo(fifo / "events.jsonl")
    folder = tmp_path / "folder-session"
    (folder / "events.jsonl").mkdir(parents=True)
    for session in (fifo, folder):
        shown = assert_footer_safe(run_statusline(stdin=status_input(session), env=env))
        assert shown == "HydraFusion: the session log cannot be read"
    assert stat_kind(fifo / "events.jsonl") == "fifo"


def stat_kind(path: Path) -> str:
    mode = os.lstat(path).st_mode
    import stat

    return ("fifo" if stat.S_ISFIFO(mode) else "link" if stat.S_ISLNK(mode)
            else "file" if stat.S_ISREG(mode) else "other")


def test_a_symlinked_or_another_users_log_is_read_as_the_report_reads_it(tmp_path):
    writer = every_pattern("sl-owner")
    log = writer.write(tmp_path / "real")
    quiet(log)
    env = environ(tmp_path)
    expected = line_of(log.parent, env)
    linked = tmp_path / "linked" / "sl-owner"
    linked.mkdir(parents=True)
    (linked / "events.jsonl").symlink_to(log)
    assert line_of(linked, dict(env, XDG_CACHE_HOME=str(tmp_path / "other-cache"))) == expected
    if os.geteuid() != 0:
        pytest.skip("another user's file needs root to make")
    os.chown(log, 65534, 65534)
    log.chmod(0o600)
    assert line_of(log.parent, dict(env, XDG_CACHE_HOME=str(tmp_path / "third-cache"))) == expected


# -- the saved state ----------------------------------------------------------------------


def state_file(tmp_path: Path, log: Path) -> Path:
    return tmp_path / "cache" / "hydrafusion" / "statusline" / saved.state_name(os.path.abspath(log))


def test_the_state_folder_and_file_are_private_and_named_by_checksums(tmp_path):
    log = every_pattern("sl-private").write(tmp_path / "state")
    line_of(log.parent, environ(tmp_path))
    folder = tmp_path / "cache" / "hydrafusion" / "statusline"
    assert os.stat(folder).st_mode & 0o777 == 0o700
    (path,) = folder.iterdir()
    assert path == state_file(tmp_path, log) and os.stat(path).st_mode & 0o777 == 0o600
    text = path.read_text()
    assert "sl-private" not in text and str(tmp_path) not in text  # no path, no session id


@pytest.mark.parametrize("thing", ["fifo", "symlink", "another user's file"])
def test_anything_but_our_own_file_at_the_states_path_is_left_alone(tmp_path, thing):
    """It is neither opened for reading (a FIFO would block) nor replaced; the line is the
    one a fresh read gives."""
    log = every_pattern("sl-state-path").write(tmp_path / "state")
    quiet(log)
    env = environ(tmp_path)
    expected = line_of(log.parent, dict(env, XDG_CACHE_HOME=str(tmp_path / "fresh")))
    path = state_file(tmp_path, log)
    path.parent.mkdir(parents=True, mode=0o700)
    target = tmp_path / "elsewhere.json"
    if thing == "fifo":
        os.mkfifo(path)
    elif thing == "symlink":
        line_of(log.parent, dict(env, XDG_CACHE_HOME=str(tmp_path / "other")))
        shutil.copy(tmp_path / "other" / "hydrafusion" / "statusline" / path.name, target)
        path.symlink_to(target)  # a whole state of this very log, but not ours to trust
    else:
        if os.geteuid() != 0:
            pytest.skip("another user's file needs root to make")
        line_of(log.parent, env)
        os.chown(path, 65534, 65534)
    before = (stat_kind(path), os.lstat(path).st_mtime_ns, target.read_bytes() if target.exists() else None)
    for _ in range(2):
        done = run_statusline("--format", FIELDS, stdin=status_input(log.parent),
                              env=tailer_env(NO_COLOR="1", XDG_CACHE_HOME=str(tmp_path / "cache")))
        assert assert_footer_safe(done) == expected
    assert (stat_kind(path), os.lstat(path).st_mtime_ns,
            target.read_bytes() if target.exists() else None) == before


@pytest.mark.parametrize("thing", ["symlink", "another user's folder", "a folder open to all"])
def test_a_state_folder_not_our_own_private_one_is_not_used(tmp_path, thing):
    log = every_pattern("sl-state-folder").write(tmp_path / "state")
    quiet(log)
    env = environ(tmp_path)
    expected = line_of(log.parent, dict(env, XDG_CACHE_HOME=str(tmp_path / "fresh")))
    folder = tmp_path / "cache" / "hydrafusion" / "statusline"
    folder.parent.mkdir(parents=True)
    if thing == "symlink":
        (tmp_path / "theirs").mkdir(mode=0o700)
        folder.symlink_to(tmp_path / "theirs")
    elif thing == "another user's folder":
        if os.geteuid() != 0:
            pytest.skip("another user's folder needs root to make")
        folder.mkdir(mode=0o700)
        os.chown(folder, 65534, 65534)
    else:
        folder.mkdir()
        folder.chmod(0o777)
    assert line_of(log.parent, env) == expected
    if thing == "a folder open to all":  # ours: closed, then used
        assert os.stat(folder).st_mode & 0o777 == 0o700 and list(folder.iterdir())
    else:
        assert not list((tmp_path / "theirs" if thing == "symlink" else folder).iterdir())


def test_a_state_folder_the_user_made_read_only_stays_so_and_the_line_is_shown(tmp_path):
    """A folder of the user's own closed to writing (0500) is the user's choice: the line is
    the one a fresh read gives, and the folder is never made writable again. Run as a user
    the mode binds too (root writes in any), where nothing can be saved there."""
    log = every_pattern("sl-read-only").write(tmp_path / "state")
    quiet(log)
    env = environ(tmp_path)
    expected = line_of(log.parent, dict(env, XDG_CACHE_HOME=str(tmp_path / "fresh")))
    folder = tmp_path / "cache" / "hydrafusion" / "statusline"
    folder.mkdir(parents=True, mode=0o500)
    os.chmod(folder, 0o500)
    for _ in range(2):
        assert line_of(log.parent, env) == expected
        assert oct(os.stat(folder).st_mode & 0o7777) == oct(0o500)
    if os.geteuid() != 0:
        return
    from test_reading_parity import nobody

    (become, user), python = nobody()
    top = Path(tempfile.mkdtemp(prefix="tailer-read-only-statusline-"))
    try:
        os.chmod(top, 0o755)
        shutil.copytree(tmp_path / "state", top / "state")
        theirs = top / "cache" / "hydrafusion" / "statusline"
        theirs.mkdir(parents=True)
        for path in [top, *top.rglob("*")]:
            os.chown(path, user.pw_uid, user.pw_gid, follow_symlinks=False)
        os.chmod(theirs, 0o500)
        for _ in range(2):
            done = subprocess.run([python, "-m", "tailer", "statusline", "--format", FIELDS],
                                  input=status_input(top / "state" / log.parent.name), cwd=ROOT,
                                  env=tailer_env(NO_COLOR="1", XDG_CACHE_HOME=str(top / "cache")),
                                  capture_output=True, timeout=60, preexec_fn=become)
            assert assert_footer_safe(done) == expected
        assert oct(os.stat(theirs).st_mode & 0o7777) == oct(0o500) and not list(theirs.iterdir())
    finally:
        shutil.rmtree(top)


def saved_state(tmp_path: Path, log: Path) -> bytes:
    line_of(log.parent, environ(tmp_path))
    return state_file(tmp_path, log).read_bytes()


DAMAGE_LOG_LINES = every_pattern("sl-damaged").lines()


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_any_bytes_in_the_state_give_the_same_line_or_the_neutral_one(tmp_path_factory, data):
    """Random bytes, the saved state cut or with a byte changed, or its view replaced by any
    JSON under a header whose CRC matches it: the line is the one a fresh read gives (or
    the neutral `reading` on the way to it). A state forged with care (one value of its
    view changed, its CRC made again: only the user can write the folder) may change the
    figures, but the line still holds only printable text (every value is checked as it is
    read back), and no exception leaves the command."""
    tmp_path = tmp_path_factory.mktemp("damaged")
    cut = data.draw(st.integers(20, len(DAMAGE_LOG_LINES)))
    log = tmp_path / "state" / "sl-damaged" / "events.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text("".join(line + "\n" for line in DAMAGE_LOG_LINES[:cut]))
    quiet(log)
    good = saved_state(tmp_path, log)
    json_values = st.recursive(st.none() | st.booleans() | st.integers(-2, 2**64) | st.text(max_size=8),
                               lambda children: st.lists(children, max_size=9), max_leaves=30)
    how = data.draw(st.sampled_from(["bytes", "cut", "changed byte", "any view", "a value changed"]))
    if how == "bytes":
        damaged = data.draw(st.binary(max_size=400))
    elif how == "cut":
        damaged = good[:data.draw(st.integers(0, len(good) - 1))]
    elif how == "changed byte":
        at = data.draw(st.integers(0, len(good) - 1))
        damaged = good[:at] + bytes([data.draw(st.integers(0, 255).filter(lambda b: b != good[at]))]) + good[at + 1:]
    else:
        header, view, reading, _ = good.split(b"\n")
        if how == "any view":
            view = json.dumps(data.draw(json_values)).encode()
        else:
            value = json.loads(view)
            place = data.draw(st.sampled_from(list(paths_of(value))))
            old = value_at(value, place)
            unlike = {str: st.sampled_from(["\x1b[2J", "a\u202eb", "\n", "", "x" * 300]) | st.text(max_size=6),
                      int: st.sampled_from([-1, 2**63, 2**64]) | st.integers(-1, 2**64),
                      bool: st.integers(0, 1) | st.none()}.get(type(old), json_values)
            view = json.dumps(replace_at(value, place, data.draw(unlike | json_values))).encode()
        head = json.loads(header)
        head["view_crc"] = f"{__import__('zlib').crc32(view):08x}"
        damaged = b"\n".join((json.dumps(head).encode(), view, reading)) + b"\n"
    state_file(tmp_path, log).write_bytes(damaged)
    fresh = line_of(log.parent, dict(environ(tmp_path), XDG_CACHE_HOME=str(tmp_path / "fresh")))
    shown = line_of(log.parent, environ(tmp_path))
    if how == "a value changed":
        assert shown.isprintable() and len(shown) < 10_000, shown
        return
    assert shown == fresh or shown.startswith("HydraFusion: reading the log"), (how, shown, fresh)
    assert settled_line(log.parent, environ(tmp_path)) == fresh


def paths_of(value, path=()):
    """The path (indices) of every value inside a JSON list tree, the lists themselves too."""
    yield path
    if isinstance(value, list):
        for index, item in enumerate(value):
            yield from paths_of(item, (*path, index))


def value_at(value, path):
    for index in path:
        value = value[index]
    return value


def replace_at(value, path, new):
    if not path:
        return new
    copy = list(value)
    copy[path[0]] = replace_at(value[path[0]], path[1:], new)
    return copy


def test_a_disk_that_takes_no_write_costs_the_state_not_the_line(tmp_path, monkeypatch):
    import errno

    log = every_pattern("sl-full").write(tmp_path / "state")
    quiet(log)
    env = environ(tmp_path)
    expected = line_of(log.parent, dict(env, XDG_CACHE_HOME=str(tmp_path / "fresh")))

    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(saved.os, "write", full)
    assert line_of(log.parent, env) == expected
    folder = tmp_path / "cache" / "hydrafusion" / "statusline"
    assert list(folder.iterdir()) == []  # neither a state nor a leftover
    monkeypatch.undo()
    # A process whose files may not grow (RLIMIT_FSIZE: writes fail with EFBIG): the same.
    done = subprocess.run(
        [sys.executable, "-c", "import resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
         "resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64)); from tailer.commands.launch import main; "
         "sys.exit(main(['statusline', '--format', sys.argv[1]]))", FIELDS],
        cwd=ROOT, env=tailer_env(NO_COLOR="1", XDG_CACHE_HOME=str(tmp_path / "limited")),
        input=status_input(log.parent), capture_output=True, timeout=60, start_new_session=True)
    assert assert_footer_safe(done) == expected
    assert not [path for path in (tmp_path / "limited").rglob("*") if path.is_file()]


def test_old_leftovers_and_old_states_are_removed_and_nothing_else(tmp_path):
    log = every_pattern("sl-clean").write(tmp_path / "state")
    env = environ(tmp_path)
    line_of(log.parent, env)
    folder = tmp_path / "cache" / "hydrafusion" / "statusline"
    name = saved.state_name(os.path.abspath(log))
    now, hour = time.time_ns(), 3600 * 10**9

    def make(file_name: str, at: int) -> str:
        (folder / file_name).write_text("x")
        os.utime(folder / file_name, ns=(at, at))
        return file_name

    removed = {make(f".{name}.123.0a1b2c3d.tmp", now - hour)}  # a killed save's, an hour old
    kept = {make(f".{name}.124.0a1b2c3e.tmp", now),  # a save still under way
            *(make(other, now - hour) for other in ("notes.txt", ".other.tmp", "0123456789abcdeX.json"))}
    # Other sessions' states: with this one's, MAX_FILES + 6 of them; the 6 oldest go.
    others = [make(f"{number:016x}.json", now - hour + number * 10**9) for number in range(saved.MAX_FILES + 5)]
    removed |= set(others[:6])
    kept |= set(others[6:])
    foreign = make(f".{name}.125.0a1b2c3f.tmp", now - hour)
    if os.geteuid() == 0:
        os.chown(folder / foreign, 65534, 65534)
        kept.add(foreign)  # another user's: never ours to remove
    else:
        removed.add(foreign)
    log.write_text(log.read_text() + DAMAGE_LOG_LINES[0] + "\n")
    line_of(log.parent, env)  # saves, then cleans
    assert {path.name for path in folder.iterdir()} == kept | {name}


# -- processes: two at once, killed mid-run -------------------------------------------------


def start_statusline(*options: str, stdin: bytes, env: dict[str, str]) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-m", "tailer", "statusline", *options], cwd=ROOT, env=env,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               start_new_session=True)
    process.stdin.write(stdin)
    process.stdin.close()
    process.stdin = None  # for communicate, which would flush it
    return process


def test_runs_at_once_while_the_log_grows_each_show_a_whole_line(tmp_path):
    """The CLI may refresh while the last run still runs (and two CLIs may share a session):
    every run ends well, and the state they leave gives the line a fresh read gives."""
    writer = whole_session("sl-together")
    lines = writer.lines()
    log = tmp_path / "state" / "sl-together" / "events.jsonl"
    log.parent.mkdir(parents=True)
    env = tailer_env(NO_COLOR="1", XDG_CACHE_HOME=str(tmp_path / "cache"))
    at = 0
    for step in range(8):
        with open(log, "a") as handle:
            handle.write("".join(line + "\n" for line in lines[at:at + len(lines) // 8 + 1]))
        at += len(lines) // 8 + 1
        runs = [start_statusline("--format", FIELDS, stdin=status_input(log.parent), env=env) for _ in range(4)]
        for run in runs:
            out, err = run.communicate(timeout=60)
            assert assert_footer_safe(subprocess.CompletedProcess(run.args, run.returncode, out, err))
    quiet(log)
    fresh = line_of(log.parent, dict(environ(tmp_path), XDG_CACHE_HOME=str(tmp_path / "fresh")))
    assert settled_line(log.parent, environ(tmp_path)) == fresh


def test_a_run_killed_anywhere_leaves_a_state_that_gives_the_right_line(tmp_path):
    writer = SessionWriter("sl-killed", START)
    for number in range(150):
        writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="reject" if number % 3 else "accept")
    log = writer.write(tmp_path / "state")
    quiet(log)
    env = tailer_env(NO_COLOR="1", XDG_CACHE_HOME=str(tmp_path / "cache"))
    for delay in (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5):
        run = start_statusline(stdin=status_input(log.parent), env=env)
        time.sleep(delay)
        os.killpg(run.pid, signal.SIGKILL)
        run.communicate(timeout=60)
    folder = tmp_path / "cache" / "hydrafusion" / "statusline"
    for leftover in folder.glob(".*.tmp"):  # a killed save's: age it, for the next save to remove
        os.utime(leftover, ns=(time.time_ns() - 3600 * 10**9,) * 2)
    fresh = settled_line(log.parent, dict(environ(tmp_path), XDG_CACHE_HOME=str(tmp_path / "fresh")))
    env = environ(tmp_path)
    assert settled_line(log.parent, env) == fresh
    log.write_text(log.read_text() + "\n")  # one more save: it removes the aged leftovers
    line_of(log.parent, env)
    assert not list(folder.glob(".*.tmp"))


# -- --then: the user's own status line command ---------------------------------------------


def then_line(tmp_path: Path, command_text: str, *options: str, stdin: bytes | None = None,
              timeout: float = 60) -> subprocess.CompletedProcess:
    log = tmp_path / "state" / "sl-then" / "events.jsonl"
    if not log.exists():
        every_pattern("sl-then").write(tmp_path / "state")
        quiet(log)
    return run_statusline("--then", command_text, *options, stdin=stdin or status_input(log.parent),
                          env=tailer_env(NO_COLOR="1", XDG_CACHE_HOME=str(tmp_path / "cache")),
                          timeout=timeout)


def test_then_gets_the_same_stdin_and_its_line_comes_first(tmp_path):
    received = tmp_path / "received.json"
    stdin = status_input(tmp_path / "state" / "sl-then", session_name="my session")
    done = then_line(tmp_path, f"cat > {received}; printf 'git: main'", "--width", "300", stdin=stdin)
    text = assert_footer_safe(done)
    assert received.read_bytes() == stdin
    assert text.startswith("git: main  HydraFusion last single")
    # Too wide for one line: theirs, then ours below it.
    narrow = assert_footer_safe(then_line(tmp_path, "printf 'git: main'", "--width", "40"), lines=2)
    theirs, ours = narrow.split("\n") if "\n" in narrow else (None, narrow)
    assert theirs == "git: main" and len(ours) <= 40


def test_then_failing_or_silent_leaves_our_line_alone(tmp_path):
    ours = assert_footer_safe(then_line(tmp_path, "true"))
    assert ours.startswith("HydraFusion last single")
    for failing in ("echo broken; exit 3", "kill -9 $$", "exec /nonexistent/command", "echo oops >&2"):
        assert assert_footer_safe(then_line(tmp_path, failing)) == ours, failing


def test_then_keeps_its_colours_and_loses_what_else_a_terminal_obeys(tmp_path):
    done = then_line(tmp_path, r"printf '\033[32mgreen\033[0m \033]0;title\007 \033[2J end\n\n'",
                     "--width", "300")
    assert done.returncode == 0 and done.stderr == b""
    theirs = done.stdout.decode().partition("  HydraFusion")[0]
    assert theirs == "\x1b[32mgreen\x1b[0m \\x1b]0;title\\x07 \\x1b[2J end"


def sleeper(number: int) -> str:
    """A sleep's length no other process shows in `ps`: it marks the processes of a test."""
    return f"{100 + os.getpid() % 9000}.{number}1"


def test_then_past_its_time_is_killed_with_its_whole_group(tmp_path):
    marker = sleeper(1)
    started = time.monotonic()
    done = then_line(tmp_path, f"sh -c 'sleep {marker}' & sleep {marker}; echo late",
                     "--then-timeout", "0.5")
    assert time.monotonic() - started < 30
    assert assert_footer_safe(done).startswith("HydraFusion last single")
    assert not sleepers(marker)


def sleepers(marker: str) -> list[str]:
    time.sleep(0.2)
    found = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in found.splitlines() if line.split()[1:] == ["sleep", marker]]


def test_then_that_floods_its_output_is_cut_off(tmp_path):
    started = time.monotonic()
    done = then_line(tmp_path, "yes flood", "--then-timeout", "5")
    assert time.monotonic() - started < 30
    assert assert_footer_safe(done).startswith("HydraFusion last single")


def test_killing_us_kills_then_and_killing_then_leaves_us(tmp_path):
    every_pattern("sl-then").write(tmp_path / "state")
    env = tailer_env(NO_COLOR="1", XDG_CACHE_HOME=str(tmp_path / "cache"))
    marker = sleeper(2)
    stdin = status_input(tmp_path / "state" / "sl-then")
    for signal_number in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        run = start_statusline("--then", f"sleep {marker} & sleep {marker}", "--then-timeout", "8",
                               stdin=stdin, env=env)
        while not sleepers(marker):
            assert run.poll() is None
        run.send_signal(signal_number)  # the CLI kills its command with SIGTERM after 10 s
        out, err = run.communicate(timeout=30)
        assert run.returncode == -signal_number and err == b"", (signal_number, err)
        assert not sleepers(marker)
    run = start_statusline("--then", f"sleep {marker}", "--then-timeout", "8", stdin=stdin, env=env)
    while not (found := sleepers(marker)):
        pass
    os.kill(int(found[0].split()[0]), signal.SIGKILL)
    out, err = run.communicate(timeout=30)
    assert run.returncode == 0 and err == b"" and out.decode().startswith("HydraFusion last single")


# -- --install and --uninstall ------------------------------------------------------------


def setting_command(home: Path, *options: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "tailer", "statusline", *options], cwd=ROOT,
                          env=tailer_env(COPILOT_HOME=str(home)), capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    if check:
        assert done.returncode == 0 and done.stdout.count("\n") == 1, done
    return done


def test_install_sets_a_command_the_cli_can_run_and_uninstall_removes_it(tmp_path):
    home = tmp_path / "copilot-home"
    setting_command(home, "--install", "--format", "HF {turn}", "--width", "90")
    settings = json.loads((home / "settings.json").read_text())
    installed = settings["statusLine"]["command"]
    assert list(settings) == ["statusLine"] and "--format 'HF {turn}' --width 90" in installed
    log = every_pattern("sl-installed").write(home / "session-state")
    # As the CLI runs it: through the shell, from the session's folder, its JSON on stdin.
    done = subprocess.run(["/bin/sh", "-c", installed], cwd=tmp_path, input=status_input(log.parent),
                          capture_output=True, timeout=60, env={"PATH": os.environ["PATH"],
                                                                "HOME": str(tmp_path), "NO_COLOR": "1"},
                          start_new_session=True)
    assert assert_footer_safe(done).startswith("HF last single")
    assert "installed already" in setting_command(home, "--install").stdout
    setting_command(home, "--uninstall")
    assert json.loads((home / "settings.json").read_text()) == {}
    assert "no HydraFusion status line" in setting_command(home, "--uninstall").stdout


def test_install_keeps_every_other_setting_and_wraps_the_command_already_set(tmp_path):
    home = tmp_path / "copilot-home"
    home.mkdir()
    path = home / "settings.json"
    before = {"model": "auto", "theme": {"name": "dark", "ünïcode": "✓"},
              "statusLine": {"padding": 2, "command": "~/bin/my-status --short", "refreshInterval": 5},
              "trusted_folders": ["/a", "/b"]}
    original = json.dumps(before, indent=4).encode()
    path.write_bytes(original)
    path.chmod(0o640)
    setting_command(home, "--install")
    after = json.loads(path.read_text())
    assert list(after) == list(before) and list(after["statusLine"]) == list(before["statusLine"])
    assert {key: value for key, value in after.items() if key != "statusLine"} == \
        {key: value for key, value in before.items() if key != "statusLine"}
    assert after["statusLine"]["padding"] == 2 and after["statusLine"]["refreshInterval"] == 5
    assert after["statusLine"]["command"].endswith("--then '~/bin/my-status --short'")
    assert (home / "settings.json.hydrafusion-backup").read_bytes() == original
    assert os.stat(path).st_mode & 0o777 == 0o640
    refused = setting_command(home, "--install", "--then", "x", check=False)
    assert refused.returncode == 2 and "leave out --then" in refused.stderr  # ours wraps one
    setting_command(home, "--uninstall")
    assert json.loads(path.read_text()) == before


# The command --install wrote before it started Python without site (-S), from a clone.
OLD_FORM = "PYTHONPATH={root} {python} -P -c 'import sys; from tailer.commands.launch import main; sys.exit(main())' statusline"


def copied_tailer(folder: Path) -> Path:
    """A copy of the tailer's package in `folder`, as pip installs it there; `folder`."""
    shutil.copytree(ROOT / "tailer", folder / "tailer", ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def command_of(root: Path, *options: str) -> str:
    """The command `statusline --install` of the tailer in `root` writes."""
    return subprocess.run([sys.executable, "-S", "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                           "from tailer.statusline.settings import our_command; print(our_command(sys.argv[2:]))",
                           str(root), *options], capture_output=True, text=True, check=True).stdout.rstrip("\n")


def footer_of(command: str, tmp_path: Path, log: Path, name: str) -> tuple[str, bool]:
    """The line `command` prints run as the CLI runs it (through the shell, from the
    session's folder, its JSON on stdin, a cache of its own), and whether site ran: a .pth
    file of the user's site-packages (PYTHONUSERBASE) leaves a marker when processed."""
    user_base, marker = tmp_path / "userbase", tmp_path / f"site-ran-{name}"
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "NO_COLOR": "1", "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONUSERBASE": str(user_base), "SITE_MARKER": str(marker),
           "XDG_CACHE_HOME": str(tmp_path / f"cache-{name}")}
    done = subprocess.run(["/bin/sh", "-c", command], cwd=tmp_path, input=status_input(log.parent), env=env,
                          capture_output=True, timeout=60, start_new_session=True)
    ran = marker.exists()
    marker.unlink(missing_ok=True)
    return assert_footer_safe(done), ran


def user_site(tmp_path: Path) -> Path:
    """The user's site-packages under tmp_path/userbase, with a .pth file that marks each
    run of site (footer_of); skips where this Python has no user site."""
    base = tmp_path / "userbase"
    found = subprocess.run([sys.executable, "-c", "import site; print(site.ENABLE_USER_SITE, "
                            "site.getusersitepackages())"], env={**os.environ, "PYTHONUSERBASE": str(base)},
                           capture_output=True, text=True, check=True).stdout.split()
    if found[0] != "True":
        pytest.skip("this Python reads no user site-packages")
    folder = Path(found[1])
    folder.mkdir(parents=True)
    (folder / "marker.pth").write_text("import os; open(os.environ['SITE_MARKER'], 'a').close()\n")
    return folder


def test_the_installed_command_runs_without_site_as_the_old_one_ran_with_it(tmp_path):
    site_packages = user_site(tmp_path)
    log = every_pattern("sl-no-site").write(tmp_path / "session-state")
    old = OLD_FORM.format(root=shlex.quote(str(ROOT)), python=shlex.quote(sys.executable))
    expected, ran = footer_of(old, tmp_path, log, "old")
    assert expected.startswith("HydraFusion last single") and ran  # the marker can mark
    from_clone = command_of(ROOT)
    assert " -S -P -c " in from_clone and "PYTHONPATH" not in from_clone
    assert footer_of(from_clone, tmp_path, log, "clone") == (expected, False)
    installed = command_of(copied_tailer(site_packages))  # pip's copy, in a site-packages
    assert footer_of(installed, tmp_path, log, "installed") == (expected, False)
    # The venv rebuilt: the recorded folder holds no tailer, site finds one as without -S.
    moved = command_of(copied_tailer(tmp_path / "old-venv"))
    shutil.rmtree(tmp_path / "old-venv")
    assert footer_of(moved, tmp_path, log, "moved") == (expected, True)


def test_install_replaces_an_older_form_of_ours_and_uninstall_removes_one(tmp_path):
    home = tmp_path / "copilot-home"
    home.mkdir()
    path = home / "settings.json"
    old = OLD_FORM.format(root=shlex.quote(str(ROOT)), python=shlex.quote(sys.executable))
    older = {"statusLine": {"command": f"{old} --width 90 --then 'echo mine'", "padding": 1}}
    path.write_text(json.dumps(older))
    assert "updated" in setting_command(home, "--install").stdout
    after = json.loads(path.read_text())["statusLine"]
    assert after == {"command": command_of(ROOT, "--width", "90", "--then", "echo mine"), "padding": 1}
    assert "installed already" in setting_command(home, "--install").stdout
    path.write_text(json.dumps(older))
    setting_command(home, "--uninstall")
    assert json.loads(path.read_text()) == {"statusLine": {"command": "echo mine", "padding": 1}}


def test_install_again_with_other_options_puts_them_in_place_and_keeps_the_rest(tmp_path):
    """`--install --width 90` after an `--install` said "installed already; nothing changed"
    and left the command as it was: the options given were dropped without a word. They
    take the place of those installed, in one line; the command ours runs after it
    (--then) and every other setting stay. The same options again change nothing, and so
    does no option at all."""
    home = tmp_path / "copilot-home"
    home.mkdir()
    path = home / "settings.json"
    before = {"model": "auto", "statusLine": {"command": "echo mine", "padding": 2}}
    path.write_text(json.dumps(before))
    setting_command(home, "--install", "--format", "HF {turn}")
    assert "updated to the options given" in setting_command(home, "--install", "--width", "90").stdout
    after = json.loads(path.read_text())
    assert after == {"model": "auto", "statusLine": {
        "command": command_of(ROOT, "--width", "90", "--then", "echo mine"), "padding": 2}}
    for again in (["--width", "90"], []):
        assert "installed already; nothing changed" in setting_command(home, "--install", *again).stdout
    assert json.loads(path.read_text()) == after
    setting_command(home, "--uninstall")
    assert json.loads(path.read_text()) == before


@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", b'{"statusLine": "x"}',
                                     b'{"statusLine": {"command": 5}}', b"\xff\xfe{}", b"{" * 100_000,
                                     b'{"a": NaN}', b'{"a": -Infinity}'])
def test_install_refuses_settings_it_cannot_read_as_the_cli_does(tmp_path, content):
    home = tmp_path / "copilot-home"
    home.mkdir()
    (home / "settings.json").write_bytes(content)
    for option in ("--install", "--uninstall"):
        done = setting_command(home, option, check=False)
        assert done.returncode in ((2,) if option == "--install" else (0, 2)), done
        assert "Traceback" not in done.stderr and (done.stderr + done.stdout).count("\n") == 1
        assert (home / "settings.json").read_bytes() == content
        assert not (home / "settings.json.hydrafusion-backup").exists()


@pytest.mark.parametrize("option", ["--install", "--uninstall"])
def test_a_number_json_reads_as_infinite_is_never_written_back_as_infinity(tmp_path, option):
    """1e999 is JSON, which the CLI reads; json reads it as inf, and wrote it back as
    `Infinity`, which is none: the CLI then refused the whole settings file. It is left as
    it was, with one line saying why."""
    home = tmp_path / "copilot-home"
    home.mkdir()
    command = "echo mine" if option == "--install" else "hydrafusion-tailer statusline --then 'echo mine'"
    content = b'{"big": 1e999, "statusLine": {"command": %s}}' % json.dumps(command).encode()
    (home / "settings.json").write_bytes(content)
    done = setting_command(home, option, check=False)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done
    assert "Traceback" not in done.stderr and "1e308" in done.stderr
    assert (home / "settings.json").read_bytes() == content


@pytest.mark.parametrize("content, options", [
    (b'{"note": "\\ud800"}', ["--install"]),
    (b'{"note": "\\ud800", "statusLine": {"command": "hydrafusion-tailer statusline"}}', ["--uninstall"]),
    (b'{"model": "auto"}', ["--install", "--then", os.fsdecode(b"echo \xff")]),
])
def test_text_that_is_no_utf_8_is_refused_in_one_line(tmp_path, content, options):
    """A lone surrogate, as a `\\ud800` escape in the settings (JSON, which the CLI reads)
    or as --then's bytes that are not UTF-8 (a command line is bytes), cannot be written as
    UTF-8: --install and --uninstall ended in a traceback. One line, nothing changed."""
    home = tmp_path / "copilot-home"
    home.mkdir()
    (home / "settings.json").write_bytes(content)
    done = setting_command(home, *options, check=False)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done
    assert "Traceback" not in done.stderr and "not UTF-8" in done.stderr
    assert (home / "settings.json").read_bytes() == content
    assert not (home / "settings.json.hydrafusion-backup").exists()


@pytest.mark.parametrize("thing", ["symlink", "fifo", "another user's file", "folder"])
def test_install_refuses_anything_but_the_users_own_settings_file(tmp_path, thing):
    home = tmp_path / "copilot-home"
    home.mkdir()
    path, target = home / "settings.json", tmp_path / "dotfiles-settings.json"
    target.write_text('{"model": "auto"}')
    if thing == "symlink":
        path.symlink_to(target)
    elif thing == "fifo":
        os.mkfifo(path)
    elif thing == "folder":
        path.mkdir()
    else:
        if os.geteuid() != 0:
            pytest.skip("another user's file needs root to make")
        shutil.copy(target, path)
        os.chown(path, 65534, 65534)
    before = (stat_kind(path), os.lstat(path).st_mtime_ns)
    for option in ("--install", "--uninstall"):
        done = setting_command(home, option, check=False)  # a FIFO would block an open: it is not opened
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done
    assert (stat_kind(path), os.lstat(path).st_mtime_ns) == before
    assert target.read_text() == '{"model": "auto"}'


def test_installs_at_once_leave_one_command_and_valid_json(tmp_path):
    home = tmp_path / "copilot-home"
    home.mkdir()
    (home / "settings.json").write_text('{"statusLine": {"command": "echo mine"}, "model": "auto"}')
    runs = [subprocess.Popen([sys.executable, "-m", "tailer", "statusline", "--install"], cwd=ROOT,
                             env=tailer_env(COPILOT_HOME=str(home)), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE) for _ in range(4)]
    for run in runs:
        run.communicate(timeout=60)
        assert run.returncode == 0
    after = json.loads((home / "settings.json").read_text())
    assert after["model"] == "auto" and after["statusLine"]["command"].count("--then") == 1
    assert after["statusLine"]["command"].endswith(" statusline --then 'echo mine'")
    assert not list(home.glob(".*.tmp"))


# -- the options, the template, the width ------------------------------------------------------


def test_every_option_reads_the_same_before_and_after_argparse():
    from tailer.commands.cli import parse_args
    from tailer.statusline.options import quick_options

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.sampled_from(["--format", "--format=", "--width", "--width=", "--then", "--then=",
                                     "--then-timeout", "--install", "--form", "-h", "{turn}", "x {legs}",
                                     "{nope}", "80", "0", "-3", "1.5", "9", "echo hi", "", "--", "{{"]),
                    max_size=6).map(lambda words: [a + b if a.endswith("=") and b else a
                                                    for a, b in zip(words, words[1:] + [""])]))
    def check(words):
        quick = quick_options(words)
        if quick is None:
            return
        args = parse_args(["statusline", *words], {})
        assert not args.install and not args.uninstall
        assert quick == Options(args.template, args.width, args.then, args.then_timeout_s)

    check()
    assert quick_options(["--format", "{legs}", "--width", "50", "--then=echo x"]) is not None


@pytest.mark.parametrize("template, error", [
    ("{nope}", "no field {nope}"), ("{turn", "opens no field"), ("turn}", "closes no field"),
    ("", "empty"), ("\x1b[31m{turn}", "control"), ("x" * 501, "more than 500"),
])
def test_a_template_says_what_is_wrong_with_it(template, error):
    with pytest.raises(ValueError, match=re.escape(error)):
        parse_format(template)


def test_a_template_fills_its_fields_and_keeps_doubled_braces(tmp_path):
    log = every_pattern("sl-template").write(tmp_path / "state")
    quiet(log)
    shown = line_of(log.parent, environ(tmp_path), "{{x}} {pattern}/{verdict} {answer}")
    assert shown == "{x} single/ primary sonnet-4.6"


def test_short_model_names():
    assert [short_model(name) for name in ("claude-sonnet-4.6", "gpt-5.6-sol", "mai-code-1.1-flash",
                                           "gpt-5.4", "openai/gpt-4o", "o3", None)] == \
        ["sonnet-4.6", "5.6-sol", "1.1-flash", "gpt-5.4", "gpt-4o", "o3", "?"]


def snapshots():
    from tailer.statusline.view import LegView, Snapshot, TurnView

    codes = st.text(st.characters(min_codepoint=32, max_codepoint=0x3000).filter(str.isprintable),
                    min_size=1, max_size=40)
    legs = st.builds(LegView, st.sampled_from(["done", "running", "pending", "skipped"]), codes,
                     st.none() | codes, st.none() | st.sampled_from(["accept", "reject", "revise"]),
                     st.integers(0, 10**12), st.booleans())
    turns = st.builds(lambda kind, pattern, outcome, start, nano, known, model, legs: TurnView(
        kind, pattern, outcome, start, nano, known, model, len(legs) - 1, legs),
        st.sampled_from(["fusion", "fallback", "ordinary"]), codes, codes, st.integers(0, 2**62),
        st.integers(0, 10**12), st.booleans(), st.none() | codes, st.lists(legs, max_size=6))
    return st.builds(Snapshot, st.none() | turns, st.none() | turns, st.integers(0, 10**13),
                     st.integers(10**12, 10**13), st.integers(0, 10**12), st.none() | st.integers(0, 99))


@settings(max_examples=300, deadline=None)
@given(snapshot=snapshots(), width=st.integers(1, 300), color=st.booleans(),
       template=st.sampled_from(["HydraFusion {turn} · {session}", "{legs} {running} {answer}",
                                 "界 {pattern} {credits} {review_share}"]))
def test_a_line_is_never_wider_than_its_width_and_holds_only_colours(snapshot, width, color, template):
    from tailer.statusline.render import line, visible_width

    shown = line(snapshot, parse_format(template), width, color, 2**62)
    plain = SGR.sub("", shown)
    assert visible_width(plain) <= width and plain.isprintable()
    assert color or shown == plain
    assert line(snapshot, parse_format(template), None, False, 2**62) == SGR.sub(
        "", line(snapshot, parse_format(template), None, True, 2**62))


def test_the_width_is_the_terminals_even_with_stdin_and_stdout_piped(tmp_path):
    """As in the CLI: stdout a pipe, COLUMNS unset, the terminal the controlling one."""
    import pty

    log = every_pattern("sl-tty").write(tmp_path / "state")
    quiet(log)
    leader, follower = pty.openpty()
    import fcntl
    import struct
    import termios

    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 33, 0, 0))

    def own_terminal():
        os.setsid()
        fcntl.ioctl(follower, termios.TIOCSCTTY, 0)

    env = tailer_env(NO_COLOR="1", XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("COLUMNS", None)
    try:
        done = subprocess.run([sys.executable, "-m", "tailer", "statusline"], cwd=ROOT, env=env,
                              input=status_input(log.parent), capture_output=True, timeout=60,
                              preexec_fn=own_terminal)
    finally:
        os.close(follower)
        os.close(leader)
    shown = assert_footer_safe(done)
    assert len(shown) == 33 and shown.endswith("…"), shown
    columns = assert_footer_safe(run_statusline(stdin=status_input(log.parent), env=dict(env, COLUMNS="41")))
    assert len(columns) == 41


def test_columns_of_digits_int_does_not_read_cost_the_width_not_the_line(tmp_path):
    """`²` is a digit to str.isdigit and none to int: a $COLUMNS of such digits raised as the
    width was worked out, and the footer got no line at all. It is no number of columns:
    the line is drawn as with no $COLUMNS."""
    log = every_pattern("sl-columns").write(tmp_path / "state")
    quiet(log)
    env = tailer_env(NO_COLOR="1", XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("COLUMNS", None)
    expected = assert_footer_safe(run_statusline(stdin=status_input(log.parent), env=env))
    for columns in ("²", "¹²⁰", "①"):
        shown = assert_footer_safe(run_statusline(stdin=status_input(log.parent),
                                                  env=dict(env, COLUMNS=columns)))
        assert shown == expected != ""


# -- JSON without `import json` ----------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=5), children, max_size=5),
    max_leaves=25)


def decoded_both_ways(text):
    """What tailer/fast_json.py and json make of `text`: (value or the error's kind) each."""
    from tailer import fast_json

    found = []
    for loads in (fast_json.loads, json.loads):
        try:
            found.append(json.dumps(loads(text)))  # NaN != NaN: compared as written again
        except ValueError:  # json's JSONDecodeError is one
            found.append("ValueError")
        except RecursionError:
            found.append("RecursionError")
    return found


@settings(max_examples=300)
@given(value=JSON_VALUES, indent=st.none() | st.integers(0, 3), space=st.sampled_from(["", " ", "\n\t\r "]))
def test_fast_json_reads_what_json_writes_as_json_reads_it(value, indent, space):
    text = space + json.dumps(value, indent=indent) + space
    fast, slow = decoded_both_ways(text)
    assert fast == slow
    assert decoded_both_ways(text.encode()) == [slow, slow]


@settings(max_examples=300)
@given(text=st.text(alphabet='{}[]",:0123456789.eE+-tfnrulaxNIy \\\n', max_size=30) | st.binary(max_size=30))
# Bytes json.loads reads as UTF-16 (a NUL first) or after a byte order mark: found by CI.
@example(text=b"\x000")
@example(text=b"\xef\xbb\xbf0")
@example(text=b"\xff\xfe0\x00")
def test_fast_json_refuses_what_json_refuses(text):
    if isinstance(text, bytes):
        try:
            text.decode("utf-8")
        except UnicodeDecodeError:  # json reads it in the encoding it finds, or refuses it
            from tailer import fast_json

            try:
                expected = json.loads(text)
            except ValueError:
                with pytest.raises(ValueError):
                    fast_json.loads(text)
            else:
                assert fast_json.loads(text) == expected, text
            return
    fast, slow = decoded_both_ways(text)
    assert fast == slow, text


# A tool's end as the CLI writes it, its result's text long enough to be cut out unread
# (copilot/line_json.py): the first joins of its head and tail tried are no JSON.
LONG_TOOL_END = json.dumps({
    "type": "tool.execution_complete",
    "data": {"toolCallId": "call-1", "model": "gpt-5.6-sol", "success": True,
             "fusion": {"fusionId": "fusion-1", "phaseId": "fusion-1:phase:0", "pattern": "single"},
             "result": {"content": "x" * 20_000, "detailedContent": "y" * 30}},
    "id": "event-1", "timestamp": "2026-11-02T09:13:58.000Z", "parentId": None}, separators=(",", ":"))
READ_WITHOUT_JSON = """
import sys
from tailer import fast_json
from tailer.copilot import events, line_json

def outcome(read, text):
    try:
        return repr(read(text))
    except ValueError:
        return "ValueError"

for text in sys.stdin.buffer.read().split(b"\\n"):
    print(outcome(fast_json.loads, text), outcome(line_json.loads, text), repr(events.parse_line(text)))
print(sorted(name for name in sys.modules if name.split(".")[0] == "json"))
"""


def test_json_read_where_json_was_never_imported_fails_as_json_does(tmp_path):
    """The footer's refresh reads JSON with json's C scanner and never imports json: there,
    Python 3.11's scanner raised SystemError for text that is no JSON, and a tool's end
    whose bulk was cut out was lost as the tailer's own error. Each text reads in such a
    process as it does here, where json is imported."""
    from tailer import fast_json
    from tailer.copilot import events, line_json

    def outcome(read, text):
        try:
            return repr(read(text))
        except ValueError:
            return "ValueError"

    # Each an object's first key, as line_json.loads reads without json (it imports json
    # for any other start).
    texts = [LONG_TOOL_END.encode(), b'{"a" 1}', b'{"a":1,}', b'{"a":[1 2]}', b'{"a":"abc', b'{"a":"\\x"}',
             b'{"a":', b'{"type":"session.shutdown","data":{"a":[1 2]}}', b'{"a":1}', b'{"a":[1,2]}']
    done = subprocess.run([sys.executable, "-S", "-c", READ_WITHOUT_JSON], cwd=tmp_path,
                          env=tailer_env(), input=b"\n".join(texts), capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    *read, modules = done.stdout.decode().splitlines()
    assert modules == "[]"  # json was never imported there: the check can fail
    assert read == [f"{outcome(fast_json.loads, text)} {outcome(line_json.loads, text)} "
                    f"{events.parse_line(text)!r}" for text in texts]
    assert read[0].endswith("fusion_id='fusion-1', phase_id='fusion-1:phase:0')")  # the tool's end
    assert read[1].startswith("ValueError ValueError ")


@settings(max_examples=300)
@given(value=JSON_VALUES | st.dictionaries(st.integers() | st.floats() | st.booleans() | st.none(), st.integers(),
                                           max_size=3))
def test_fast_json_writes_what_json_writes(value):
    from tailer import fast_json

    assert fast_json.dumps(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=True)


@pytest.mark.parametrize("value", [{(1, 2): 3}, [b"bytes"], {"set": {1}}, "circular"])
def test_fast_json_refuses_to_write_what_json_refuses(value):
    from tailer import fast_json

    if value == "circular":
        value = []
        value.append(value)
    with pytest.raises((TypeError, ValueError)) as slow:
        json.dumps(value, separators=(",", ":"))
    with pytest.raises(slow.type) as fast:
        fast_json.dumps(value)
    assert str(fast.value) == str(slow.value)


@pytest.mark.parametrize("kind", [str, int, bool, list])
def test_a_forged_state_still_prints_only_printable_text(tmp_path, kind):
    """Each value of a saved view in turn, of one kind, made what no state of ours holds (a
    terminal's escape, a number out of range, another type), its CRC made again, the log
    as it was (so the view is what the line is drawn from): the line stays printable and
    the command ends well; with a turn in flight, and with the log idle."""
    log = tmp_path / "state" / "sl-damaged" / "events.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text("".join(line + "\n" for line in DAMAGE_LOG_LINES[:60]))
    forged = {str: "\x1b]0;title\x07\x1b[2J", int: 2**64, bool: "yes", list: {"a": 1}}[kind]
    for quiet_for in (60, 3 * 3600):
        quiet(log, quiet_for)
        header, view, reading, _ = saved_state(tmp_path, log).split(b"\n")
        value = json.loads(view)
        places = [place for place in paths_of(value) if type(value_at(value, place)) is kind and place]
        assert places and line_of(log.parent, environ(tmp_path)).startswith("running" if quiet_for == 60 else "last")
        for place in places:
            new_view = json.dumps(replace_at(value, place, forged)).encode()
            head = json.loads(header)
            head["view_crc"] = f"{__import__('zlib').crc32(new_view):08x}"
            state_file(tmp_path, log).write_bytes(b"\n".join((json.dumps(head).encode(), new_view, reading)) + b"\n")
            shown = line_of(log.parent, environ(tmp_path))
            assert shown.isprintable() and "\x1b" not in shown, (place, shown)


def test_a_refresh_of_its_own_ends_at_once_and_main_called_with_arguments_returns(tmp_path):
    """The CLI's refresh (main reading sys.argv) skips the interpreter's tear-down once its
    line is written (launch.refresh: no atexit handler runs, the line is whole); main called
    with its arguments, as tests and scripts call it, returns, the collector left on."""
    log = every_pattern("own-process").write(tmp_path / "state")
    env = tailer_env(NO_COLOR="1", XDG_CACHE_HOME=str(tmp_path / "cache"))
    on_exit = "import atexit, os; atexit.register(lambda: os.write(1, b'torn down'))\n"
    own = subprocess.run([sys.executable, "-c", on_exit + "from tailer.commands.launch import main; main()",
                          "statusline"], cwd=ROOT, env=env, input=status_input(log.parent),
                         capture_output=True, timeout=60, start_new_session=True)
    called = subprocess.run([sys.executable, "-c", on_exit + "import gc, os, sys\n"
                             "from tailer.commands.launch import main\n"
                             "code = main(['statusline'], dict(os.environ))\n"
                             "print('returned', code, gc.isenabled(), flush=True)"],
                            cwd=ROOT, env=env, input=status_input(log.parent),
                            capture_output=True, timeout=60, start_new_session=True)
    assert own.returncode == 0 and own.stderr == b""
    assert own.stdout.startswith(b"HydraFusion") and own.stdout.endswith(b"\n")
    assert b"torn down" not in own.stdout
    line, after = called.stdout.split(b"\n", 1)
    assert line == own.stdout.rstrip(b"\n")
    assert after == b"returned 0 True\ntorn down" and called.stderr == b""
