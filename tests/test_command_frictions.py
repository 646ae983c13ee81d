"""The frictions a new user met in the commands (issue 22), each reproduced as they met it."""

import contextlib
import fcntl
import json
import os
import pty
import random
import re
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import termios
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from report_helpers import run_report
from sessiongen import SessionWriter
from tailer.commands import demo, demo_report
from tailer.commands.cli import COMMANDS, parse_args
from tailer.report import command as report
from tailer.report import live as report_live
from tailerproc import ROOT, ctrl_c_quits, tailer_env
from test_report_live import Session, read_until
from tmux import Terminal, needs_tmux


def run_tailer(*args, env=None):
    return subprocess.run([sys.executable, "-m", "tailer", *args], cwd=ROOT, env=env or tailer_env(),
                          capture_output=True, text=True, timeout=120)


def one_line(done) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


# -- --html to a place it cannot be written -------------------------------------------------


@pytest.mark.parametrize("where", ["missing/r.html", "folder"])
def test_an_html_path_that_cannot_be_written_is_refused_before_a_log_is_read(tmp_path, where):
    (tmp_path / "folder").mkdir()
    # The state folder is missing too: checked first, the --html is what the line is about.
    done = run_report("--state-dir", str(tmp_path / "none"), "--html", str(tmp_path / where))
    assert done.returncode == 2 and "--html" in one_line(done)


@pytest.mark.parametrize("command", ["report", "run"])
def test_an_output_path_that_is_a_device_is_refused_not_replaced(tmp_path, command):
    """`--html /dev/null`, `--textfile /dev/stdout` (a link to the process's stdout): the
    file written is renamed onto its path, so, run as root, the device itself (the link at
    /dev/stdout) was replaced by a regular file, for every program on the machine. Here a
    link to /dev/null stands for it: it was replaced by the page, or the metrics."""
    (tmp_path / "state").mkdir()
    (tmp_path / "out").symlink_to("/dev/null")
    if command == "report":
        done = run_report("--state-dir", str(tmp_path / "state"), "--html", str(tmp_path / "out"))
    else:
        done = run_tailer("run", "--once", "--otlp-endpoint", "none", "--state-dir", str(tmp_path / "state"),
                          "--checkpoint", str(tmp_path / "cp.json"), "--textfile", str(tmp_path / "out"))
    assert done.returncode == 2 and "is not a regular file" in one_line(done)
    assert (tmp_path / "out").is_symlink()


# -- SIGTERM during --watch ---------------------------------------------------------------


def watch_in_a_terminal(tmp_path, *args, **env):
    """`report ARGS --watch` in a pseudo-terminal, until its first whole frame: the process,
    the terminal's side of it and what it showed."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    process = subprocess.Popen(
        [sys.executable, "-m", "tailer", "report", *args, "--watch"], cwd=ROOT,
        env=tailer_env(TMPDIR=str(tmp_path / "tmp"), **env), stdin=follower, stdout=follower,
        stderr=subprocess.PIPE, start_new_session=True, preexec_fn=ctrl_c_quits,
    )
    os.close(follower)
    output = read_until(leader, lambda out: b"\x1b[J" in out.partition(b"Ctrl-C quits")[2])
    assert b"Ctrl-C quits" in output, "no whole frame drawn within a minute"
    return process, leader, output.decode()


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda stop: stop.name)
@pytest.mark.parametrize("demo", [True, False])
def test_a_stop_signal_ends_a_watch_as_ctrl_c_does(tmp_path, demo, stop):
    (tmp_path / "tmp").mkdir()
    args = ["--demo"]
    if not demo:
        Session(tmp_path / "state").add()
        args = ["--state-dir", str(tmp_path / "state")]
    process, leader, _ = watch_in_a_terminal(tmp_path, *args)
    try:
        process.send_signal(stop)
        ending = read_until(leader, lambda out: report_live.SHOW_CURSOR.encode() in out)
        assert report_live.SHOW_CURSOR.encode() in ending, "the cursor was left hidden"
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
        os.close(leader)
    assert "Traceback" not in process.stderr.read().decode()
    assert list((tmp_path / "tmp").iterdir()) == []  # no hydrafusion-demo-XXXX left


def test_a_demo_watch_stopped_while_it_copies_its_fixtures_exits_as_a_stopped_watch(tmp_path, monkeypatch):
    """Ctrl-C before the watch's first frame, while the demo copied its fixtures: it exited
    130, where a stopped watch exits 0 (docs/REPORT.md's exit codes). The copy goes too."""
    from tailer.commands import cli

    def stopped_while_copying(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)

    environ = tailer_env()
    monkeypatch.setattr(demo, "prepare", stopped_while_copying)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert cli.main(["report", "--demo", "--watch"], environ) == 0
    assert list(tmp_path.iterdir()) == []
    assert cli.main(["report", "--demo"], environ) == 130  # a report cut short


def test_a_watch_shows_the_time_zone_it_is_given(tmp_path):
    """`--watch --timezone`: the turns' times and days in that zone, which the table names."""
    (tmp_path / "tmp").mkdir()
    Session(tmp_path / "state").add()  # its turn starts at 10:00Z, 15:30 in Kolkata
    process, leader, frame = watch_in_a_terminal(
        tmp_path, "--state-dir", str(tmp_path / "state"), "--timezone", "Asia/Kolkata", TZ="UTC")
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0
    os.close(leader)
    assert "Asia/Kolkata" in frame and "last turn 15:3" in frame, frame


def test_a_piped_watch_is_refused_and_writes_no_cursor_escapes(tmp_path):
    done = run_report("--demo", "--watch", env=tailer_env(TMPDIR=str(tmp_path)))
    assert done.returncode == 2 and "--watch" in one_line(done)
    assert "\x1b" not in done.stdout
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kind", ["file", "FIFO"])
def test_a_watched_state_folder_that_is_a_file_is_not_said_missing(tmp_path, kind):
    """`report --watch --state-dir FILE` (a session's events.jsonl given for the folder)
    said 'FILE does not exist.' of a file that is there."""
    path = tmp_path / "events.jsonl"
    if kind == "file":
        path.write_text("")
    else:
        os.mkfifo(path)
    done = run_report("--state-dir", str(path), "--watch")
    first = done.stderr.splitlines()[0]
    assert done.returncode == 2 and first.endswith(f"{path} is not a folder."), done.stderr


@pytest.mark.parametrize("output", ["file", "closed"])
def test_a_watch_to_a_file_or_a_closed_output_is_not_said_piped(tmp_path, output):
    """`report --watch > FILE` or `>&-` was refused as 'piped'."""
    with open(tmp_path / "out.txt", "w") as file:
        done = subprocess.run(
            [sys.executable, "-m", "tailer", "report", "--state-dir", str(ROOT / "fixtures"),
             "--watch"], cwd=ROOT, env=tailer_env(), stderr=subprocess.PIPE, text=True,
            timeout=60, stdout=file if output == "file" else None,
            preexec_fn=(lambda: os.close(1)) if output == "closed" else None)
    assert done.returncode == 2
    assert one_line(done) == ("hydrafusion-tailer report: --watch redraws a terminal, and the "
                              "output is not one (a pipe, a file, closed): leave it out")


# -- The demo's ids -----------------------------------------------------------------------


def test_the_demo_sessions_have_the_same_ids_on_every_run():
    def session_ids():
        done = run_report("--demo", "--format", "json")
        assert done.returncode == 0, done.stderr
        return sorted({turn["session_id"] for turn in json.loads(done.stdout)["turns"]})

    first = session_ids()
    assert first == session_ids() and any(sid.startswith("c523b6e0") for sid in first)
    done = run_report("--demo", "--session", "c523b6e0")  # the README's example
    assert done.returncode == 0 and "only --session c523b6e0" in done.stdout
    assert "No turn matches" not in done.stderr


# -- `~` in paths -------------------------------------------------------------------------


def test_a_tilde_in_the_state_folder_is_the_home_folder(tmp_path):
    Session(tmp_path / "hfx").add()
    home = {"HOME": str(tmp_path)}
    by_variable = run_report("--format", "json", env=tailer_env(COPILOT_STATE_DIR="~/hfx", **home))
    by_option = run_report("--format", "json", "--state-dir=~/hfx", env=tailer_env(**home))
    doctor = run_tailer("doctor", "--state-dir=~/hfx", env=tailer_env(**home))
    for done in (by_variable, by_option):
        assert done.returncode == 0, done.stderr
        assert len(json.loads(done.stdout)["turns"]) == 1
    assert "does not exist" not in doctor.stderr and doctor.returncode == 0, doctor.stderr


def test_a_tilde_of_no_such_user_is_a_path_as_typed_not_a_traceback(tmp_path):
    """`--state-dir=~nobody-here/x` (after `=`, the shell expands no `~`) or such a
    $COPILOT_STATE_DIR: pathlib raised RuntimeError ("Could not determine home directory")
    as the command line was read. As a shell does, the path stays as typed: a folder that
    does not exist, a page's folder that does not exist."""
    gone = "~no-such-user-of-the-tailer"
    for done in (run_report(f"--state-dir={gone}/x", "--format", "json"),
                 run_report("--format", "json", env=tailer_env(COPILOT_STATE_DIR=f"{gone}/x")),
                 run_report("--format", "json", env=tailer_env(COPILOT_HOME=gone)),
                 run_report("--state-dir", str(ROOT / "fixtures"), f"--html={gone}/r.html"),
                 run_tailer("doctor", f"--state-dir={gone}/x")):
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert gone in done.stderr


NO_HOME = """
import os, pwd, sys

def unknown(uid):
    raise KeyError(f"getpwuid(): uid not found: {uid}")

pwd.getpwuid = unknown  # a uid the user database does not know, as a container's
from tailer.commands import launch
sys.exit(launch.main(sys.argv[1:]))
"""


def test_a_user_with_no_home_gets_a_report_and_one_line_from_install():
    """$HOME unset and a uid the user database does not know (a container's): Path.home()
    raised RuntimeError as the command line was read, even for `report --demo`, which needs
    no home. The demo is reported; `statusline --install`, which has nowhere to look for
    the CLI's settings, says so in one line."""
    env = tailer_env()
    env.pop("HOME", None)

    def run(*args):
        return subprocess.run([sys.executable, "-c", NO_HOME, *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)

    demo = run("report", "--demo", "--format", "csv")
    assert demo.returncode == 0 and demo.stdout.startswith("session_id,"), demo.stderr
    install = run("statusline", "--install")
    assert install.returncode == 2 and "COPILOT_HOME" in one_line(install)
    assert run("report").returncode == 2 and "Traceback" not in run("report").stderr


# -- The command line's own options -------------------------------------------------------


def test_no_command_lists_the_commands_instead_of_starting_the_daemon():
    """`run` is what options alone run; nothing at all is the commands and what each does."""
    done = run_tailer()
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(f"usage: {sys.executable} -m tailer COMMAND")
    listed = [line.split()[0] for line in done.stderr.splitlines() if line.startswith("  ") and
              not line.startswith("   ")]
    assert listed == list(COMMANDS)
    assert "follow the session logs (also what options alone run: `--once` is `run --once`)" in done.stderr
    assert f"`{sys.executable} -m tailer COMMAND --help` lists a command's options." in done.stderr


# -- Hints name the command as the user ran it -----------------------------------------------


def test_hints_name_the_command_as_it_was_run(tmp_path):
    """`python3 -m tailer` from a checkout, the interpreter as it was typed; the installed
    script's name otherwise (tests/test_wheel.py runs the real one)."""
    (tmp_path / "empty").mkdir()
    as_module = run_report("--state-dir", str(tmp_path / "empty"))
    assert f"`{sys.executable} -m tailer report --demo`" in as_module.stderr
    as_script = subprocess.run(
        [sys.executable, "-c", "import sys; from tailer.commands.cli import main; sys.exit(main())",
         "report", "--state-dir", str(tmp_path / "empty")],
        cwd=ROOT, env=tailer_env(), capture_output=True, text=True, timeout=60)
    assert "`hydrafusion-tailer report --demo`" in as_script.stderr
    assert "-m tailer" not in as_script.stderr


# -- A filter that matches nothing names what there is -----------------------------------------


def demo_truth() -> list[dict]:
    done = run_report("--demo", "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["turns"]


@pytest.mark.parametrize("options", [["--pattern", "foo"], ["--session", "nope"], ["--model", "x"],
                                     ["--since", "2020-01-01", "--until", "2020-02-01"],
                                     ["--session", "c523b6e0", "--pattern", "foo"]])
def test_a_filter_that_matches_nothing_names_what_there_is(options):
    """Exit 1 and what the logs hold, per filter, where a table of zeros (and the CLI totals
    of every session) said nothing, exit 0."""
    turns = demo_truth()
    done = run_report("--demo", *options)
    assert done.returncode == 1 and done.stdout == "" and "Traceback" not in done.stderr
    first, *named = done.stderr.splitlines()
    assert first.startswith(f"No turn matches {' '.join(options)} (")
    if "--session" in options and "c523b6e0" in options:
        turns = [turn for turn in turns if turn["session_id"].startswith("c523b6e0")]
    expected = []
    if "nope" in options:
        ids = sorted({turn["session_id"] for turn in turns})
        assert named[0].startswith(f"  --session nope: no session id starts with it; the closest "
                                   f"of {len(ids)} sessions: ")
        assert set(named[0].split(": ")[-1].split(", ")) <= set(ids) and len(named) == 1
        return
    if "--pattern" in options:
        seen = Counter(turn["pattern"] for turn in turns)
        expected.append("  --pattern foo: the patterns seen: " + ", ".join(
            f"{pattern} ({count})" for pattern, count in sorted(seen.items(), key=lambda i: (-i[1], i[0]))))
    if "--model" in options:
        models = {leg["model"] for turn in turns for leg in turn["legs"]} | {
            turn["model"] for turn in turns if turn["kind"] != "fusion"}
        assert named[0].startswith("  --model x: the models seen: ")
        assert set(named[0].partition("seen: ")[2].split(", ")) == models
        return
    if "--since" in options:
        starts = sorted(datetime.fromisoformat(turn["start"]) for turn in turns)
        expected.append(f"  --since 2020-01-01 --until 2020-02-01: the turns began from "
                        f"{starts[0]:%Y-%m-%d %H:%M} to {starts[-1]:%Y-%m-%d %H:%M}")
    assert named == expected


@pytest.mark.parametrize("options", [["--pattern", "fallback "], ["--model", " sonnet"],
                                     ["--session", "c523b6e0\t"]])
def test_a_filter_pasted_with_spaces_around_it_is_the_filter(options):
    """It matched nothing (exit 1), and the line naming what there is listed the very value:
    '--pattern fallback : the patterns seen: ..., fallback (2)'."""
    done = run_report("--demo", "--format", "json", *options)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["turns"]


def test_a_program_still_gets_its_document_when_nothing_matches():
    done = run_report("--demo", "--format", "json", "--pattern", "foo")
    assert done.returncode == 1 and json.loads(done.stdout)["turns"] == []
    done = run_report("--demo", "--format", "csv", "--pattern", "foo")
    assert done.returncode == 1 and done.stdout.startswith("session_id,")


@pytest.mark.parametrize("options", [("--format", "json"), ("--format", "csv"), ()])
def test_output_to_a_full_disk_is_one_line(options):
    """`report > FILE` on a full disk (/dev/full): the write failed with a traceback. One
    line saying the report could not be written, exit 2."""
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "tailer", "report", "--state-dir",
                               str(ROOT / "fixtures"), "--no-cache", *options], cwd=ROOT,
                              env=tailer_env(), stdout=full, stderr=subprocess.PIPE, text=True,
                              timeout=120)
    assert done.returncode == 2 and "cannot write the report" in one_line(done), done.stderr


@pytest.mark.parametrize("options", [("--html", "page.html"), ("--format", "json"), ()])
def test_a_report_started_with_its_stdout_closed_writes_its_page(tmp_path, options):
    """`report --html FILE >&-` (or a scheduler's job without a stdout): Python makes
    sys.stdout None, and the report ended in an AttributeError traceback before reading a
    log, though the page needs no stdout. The page is written; what is printed goes nowhere."""
    options = [str(tmp_path / option) if option.endswith(".html") else option for option in options]
    done = subprocess.run([sys.executable, "-m", "tailer", "report", "--state-dir",
                           str(ROOT / "fixtures"), "--no-cache", *options], cwd=ROOT,
                          env=tailer_env(), stderr=subprocess.PIPE, text=True, timeout=120,
                          preexec_fn=lambda: os.close(1))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    if "--html" in options:
        assert (tmp_path / "page.html").read_text().startswith("<!doctype html>")


@pytest.mark.parametrize("closed", [1, 2], ids=["stdout", "stderr"])
@pytest.mark.parametrize("command", ["report", "doctor", "run", "statusline"])
def test_a_command_started_with_its_stdout_or_its_stderr_closed_ends_without_a_traceback(
        tmp_path, command, closed):
    """`cmd >&-` or `cmd 2>&-` (a scheduler's job): Python makes that stream None. Used as a
    file, it ended in a traceback; given to print(file=sys.stderr), None means the stdout,
    so a closed stderr put the errors in the stdout, a program's document. One rule for
    every command (commands/launch.py): what is printed there goes nowhere."""
    Session(tmp_path / "logs").add()
    for state, code in (("logs", 0), ("missing", 2)):
        if command == "statusline":  # a wrong value is its error: it needs no state folder
            args = ["statusline", "--width", "90" if state == "logs" else "wide"]
        else:
            args = command_line(command, tmp_path / state, tmp_path)
        done = subprocess.run([sys.executable, "-m", "tailer", *args], cwd=ROOT,
                              env=tailer_env(), input="{}", capture_output=True, text=True,
                              timeout=120, preexec_fn=lambda: os.close(closed))
        assert done.returncode == code, done
        assert "Traceback" not in done.stdout + done.stderr, done
        if code and closed == 2:
            assert not done.stdout, done.stdout


# -- A log of random bytes is named as damaged, not counted as lines of no type -----------------


def random_bytes_beside_a_real_log(state):
    Session(state).add()  # a real session, with a turn
    rng = random.Random(40)
    for name, data in (("noise", bytes(rng.randrange(256) for _ in range(20_000))),
                       ("nul-padded", b"\0" * 4096 + b"\n" + b"\xff\xfe garbage\n" * 50)):
        (state / name).mkdir()
        (state / name / "events.jsonl").write_bytes(data.replace(b'{"type"', b"{"))
    started = SessionWriter("started-only", datetime(2026, 11, 4, 9, tzinfo=timezone.utc))
    started.write(state)  # session.start alone: a log of events, with no turn
    return state


def test_doctor_names_a_log_of_random_bytes_as_damaged(tmp_path):
    state = random_bytes_beside_a_real_log(tmp_path / "state")
    done = run_tailer("doctor", "--state-dir", str(state))
    assert done.returncode == 1 and "Traceback" not in done.stderr  # drift
    out = done.stdout
    for name in ("noise", "nul-padded"):
        assert (f"  session {name}: no line of its log is an event (damaged, or not a Copilot CLI "
                "log); skipped") in out.partition("Damaged logs\n")[2].partition("\n\n")[0]
    assert "started-only" not in out.partition("Damaged logs\n")[2].partition("\n\n")[0]
    assert re.search(r"\n  damaged logs \(no line an event\) +2\n", out)
    assert "(no type)" not in out.partition("Event types (lines)")[2].partition("\n\n")[0]
    assert "session.start" in out.partition("Event types (lines)")[2]


def test_the_report_names_a_log_of_random_bytes_as_damaged(tmp_path):
    state = random_bytes_beside_a_real_log(tmp_path / "state")
    for options in ([], ["--format", "json"]):
        done = run_report("--state-dir", str(state), "--no-cache", *options)
        assert done.returncode == 0 and "Traceback" not in done.stderr
        named = [line for line in done.stderr.splitlines() if "no line of its log is an event" in line]
        assert named == [f"hydrafusion-tailer report: session {name}: no line of its log is an event "
                         "(damaged, or not a Copilot CLI log); skipped" for name in ("noise", "nul-padded")]
    document = json.loads(done.stdout)
    assert document["skipped"]["unreadable_logs"] == 2 and len(document["turns"]) == 1


# -- Options that would do nothing are refused ------------------------------------------------

RUN = ["--otlp-endpoint", "none", "--state-dir", "{state}", "--checkpoint", "{tmp}/checkpoint.json"]


@pytest.mark.parametrize("command, named", [
    (["report", "--demo", "--state-dir", "{state}"], "--state-dir"),
    (["doctor", "--cli", "{tmp}", "--state-dir", "{state}"], "--state-dir"),
    (["run", *RUN, "--metrics-address", "none", "--once", "--wait-for-state-dir"],
     "--wait-for-state-dir"),
    (["run", *RUN, "--once", "--metrics-address", "127.0.0.1:0"], "--metrics-address"),
    (["run", *RUN, "--metrics-address", "none", "--once", "--otlp-metrics-interval", "5"],
     "--otlp-metrics-interval"),
    (["run", *RUN, "--metrics-address", "none", "--once", "--history-labels", "job=a,instance=b"],
     "--history-labels"),
    (["run", *RUN, "--metrics-address", "none", "--once", "--cli-otel", "{tmp}/otel.jsonl"],
     "--cli-otel"),
    (["demo", *RUN, "--metrics-address", "none", "--once", "--otlp-metrics-interval", "5"],
     "--otlp-metrics-interval"),
])
def test_an_option_that_would_do_nothing_is_refused(tmp_path, command, named):
    Session(tmp_path / "state").add()
    done = subprocess.run([sys.executable, "-m", "tailer",
                           *(word.format(state=tmp_path / "state", tmp=tmp_path) for word in command)],
                          cwd=ROOT, env=tailer_env(), capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert named in done.stderr.splitlines()[0]
    assert not (tmp_path / "checkpoint.json").exists()


def test_what_a_variable_sets_is_not_refused_with_the_options_it_does_not_matter_to(tmp_path):
    """$COPILOT_STATE_DIR with --demo, $HYDRAFUSION_METRICS_ADDRESS with --once: set for
    every run, they are no mistake of this one."""
    Session(tmp_path / "state").add()
    done = run_report("--demo", "--format", "json", env=tailer_env(COPILOT_STATE_DIR=str(tmp_path)))
    assert done.returncode == 0, done.stderr
    done = run_tailer("run", "--once", "--otlp-endpoint", "none", "--metrics-address", "none",
                      "--state-dir", str(tmp_path / "state"), "--checkpoint", str(tmp_path / "c.json"),
                      env=tailer_env(HYDRAFUSION_METRICS_ADDRESS="127.0.0.1:0",
                                     HYDRAFUSION_WAIT_FOR_STATE_DIR="1"))
    assert done.returncode == 0, done.stderr


def test_a_textfile_at_the_checkpoints_path_is_refused(tmp_path):
    """--textfile and --checkpoint (or their variables) naming one file: every save's
    textfile replaced the checkpoint, and the next run moved it aside as damaged and started
    afresh, every turn it had read exported again."""
    Session(tmp_path / "state").add()
    (tmp_path / "other").mkdir()
    for textfile in (tmp_path / "checkpoint.json", tmp_path / "other" / ".." / "checkpoint.json"):
        done = run_tailer("run", *(word.format(state=tmp_path / "state", tmp=tmp_path) for word in RUN),
                          "--once", "--textfile", str(textfile))
        assert done.returncode == 2 and "--textfile" in one_line(done)
        assert not (tmp_path / "checkpoint.json").exists()


def test_a_checkpoint_under_a_file_is_named_so(tmp_path):
    """A file where a folder of --checkpoint's path should be (or $XDG_STATE_HOME a file):
    "cannot read .../checkpoint.json: Not a directory, and it cannot be moved aside ...;
    move or delete it", of a checkpoint that is not there to move."""
    Session(tmp_path / "state").add()
    (tmp_path / "notes").write_text("mine")
    done = run_tailer("run", "--once", "--otlp-endpoint", "none", "--state-dir", str(tmp_path / "state"),
                      "--checkpoint", str(tmp_path / "notes" / "sub" / "checkpoint.json"))
    assert done.returncode == 2
    assert one_line(done).endswith(f"{tmp_path / 'notes'} is not a folder")
    assert (tmp_path / "notes").read_text() == "mine"


def test_a_checkpoint_in_a_folder_it_cannot_be_written_in_is_refused():
    """A --checkpoint whose folder is not writable (as --textfile's is refused): the run
    read and exported everything, warned "cannot save the checkpoint", and every restart
    exported the same turns again. Its folders that are not there yet are made, so the
    nearest one that is must be writable. Run as `nobody`, whom the folder's mode binds."""
    from test_reading_parity import nobody

    (become, _), python = nobody()
    top = Path(tempfile.mkdtemp(prefix="tailer-read-only-checkpoint-"))
    try:
        os.chmod(top, 0o755)
        Session(top / "state").add()
        for path in (top / "cp.json", top / "new" / "sub" / "cp.json"):
            done = subprocess.run([python, "-m", "tailer", "run", "--once", "--otlp-endpoint", "none",
                                   "--state-dir", str(top / "state"), "--checkpoint", str(path)],
                                  cwd=ROOT, env=tailer_env(), capture_output=True, text=True,
                                  timeout=120, preexec_fn=become)
            assert done.returncode == 2
            assert one_line(done).endswith(f"--checkpoint {path}: {top} is not writable")
    finally:
        shutil.rmtree(top)


@pytest.mark.parametrize("what", ["a device", "a link to a device"])
def test_a_checkpoint_that_is_a_device_is_refused_not_moved_aside(tmp_path, what):
    """`--checkpoint /dev/null`, a way to say "no checkpoint": taken for a damaged one, it
    was renamed aside, the device itself (/dev/null.unreadable, as root), and a regular
    file of the checkpoint's put in its place; `/dev/stdout`'s link so too. Here a device
    made in tmp_path (as root), or a link to /dev/null, stands for it."""
    Session(tmp_path / "state").add()
    path = tmp_path / "null"
    if what == "a device":
        try:
            os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("making a device needs root")
    else:
        path.symlink_to("/dev/null")
    done = run_tailer("run", "--once", "--otlp-endpoint", "none", "--state-dir", str(tmp_path / "state"),
                      "--checkpoint", str(path))
    assert done.returncode == 2 and "is not a regular file" in one_line(done)
    assert sorted(entry.name for entry in tmp_path.iterdir()) == ["null", "state"]
    assert path.is_symlink() or path.is_char_device()


def test_a_watch_reads_in_the_processes_jobs_asks_for(tmp_path, monkeypatch):
    """--jobs was ignored by --watch, which always read in one process per CPU."""
    Session(tmp_path / "state").add()
    asked = []
    through_cache = report_live.gather.through_cache

    def recorded(*args, workers, **kwargs):
        asked.append(workers)
        return through_cache(*args, workers=workers, **kwargs)

    monkeypatch.setattr(report_live.gather, "through_cache", recorded)
    live = report_live.LiveTurns(tmp_path / "state", report.Selection(), workers=3)
    try:
        live.poll(0)
    finally:
        live.close()
    assert asked == [3] and len(live.turns) == 1


# -- Words the command line knows, in any case -------------------------------------------------


@pytest.mark.parametrize("options", [
    "--format JSON", "--format Csv-Calls", "--by DAY", "--by Week --order DESC", "--timezone utc",
    "--timezone europe/berlin --format json", "--pattern CASCADE --format json"])
def test_a_reports_words_take_any_case(options):
    done = run_report("--demo", *options.split())
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    if "JSON" in options or "json" in options:
        document = json.loads(done.stdout)
        assert document["turns"]
        if "europe/berlin" in options:
            assert document["timezone"] == "Europe/Berlin"  # as the IANA spells it
    if "utc" in options:
        assert done.stdout.splitlines()[0].endswith(" UTC")


def test_the_other_commands_words_take_any_case(tmp_path):
    Session(tmp_path / "state").add()
    done = run_tailer("completion", "BASH")
    assert done.returncode == 0 and done.stdout.startswith("# hydrafusion-tailer completion for bash")
    done = run_tailer("run", "--once", "--otlp-endpoint", "NONE", "--metrics-address", "None",
                      "--history-url", "NONE", "--log-level", "info", "--state-dir",
                      str(tmp_path / "state"), "--checkpoint", str(tmp_path / "checkpoint.json"),
                      "--textfile", str(tmp_path / "m.prom"))
    assert done.returncode == 0, done.stderr
    assert "fusion" in done.stderr and "4318" not in done.stderr  # nothing sent anywhere


# -- A mistyped word: one line naming the closest, and where the rest are listed ---------------


@pytest.mark.parametrize("typed, said", [
    ("report --sinse 1d", "hydrafusion-tailer report: no option --sinse; did you mean --since?"),
    ("report --sesion=x", "hydrafusion-tailer report: no option --sesion; did you mean --session?"),
    ("doctor --stat-dir x", "hydrafusion-tailer doctor: no option --stat-dir; did you mean --state-dir?"),
    ("--once --textflie x", "hydrafusion-tailer run: no option --textflie; did you mean --textfile?"),
    ("reprot", "hydrafusion-tailer: no command reprot; did you mean report?"),
    ("report --qqq", "hydrafusion-tailer report: no option --qqq"),
    ("report extra", "hydrafusion-tailer report: unexpected argument extra"),
    ("report --jobs x", "hydrafusion-tailer report: argument --jobs: 'x' is not a whole number of "
                        "processes (1 or more)"),
])
def test_a_mistyped_word_is_named_with_the_closest_in_two_lines(typed, said):
    done = run_tailer(*typed.split())
    assert done.returncode == 2 and "Traceback" not in done.stderr
    command = typed.split()[0] if not typed.startswith("-") else "run"
    listed = "commands" if typed == "reprot" else "options"
    where = "" if typed == "reprot" else f" {command}"
    assert done.stderr.splitlines() == [said, f"  (`{sys.executable} -m tailer{where} --help` lists the {listed})"]


def test_report_takes_version_and_no_color():
    done = run_report("--version")
    assert done.returncode == 0 and done.stdout.startswith("hydrafusion-tailer ")
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
    shown = {}
    for flags in ([], ["--no-color"]):
        process = subprocess.Popen([sys.executable, "-m", "tailer", "report", "--demo", *flags],
                                   cwd=ROOT, env=tailer_env(), stdout=follower,
                                   stderr=subprocess.PIPE)
        output = read_until(leader, lambda out: process.poll() is not None and b"fusion" in out)
        assert process.wait(timeout=60) == 0
        shown[bool(flags)] = output
    os.close(follower)
    os.close(leader)
    assert b"\x1b[" in shown[False] and b"\x1b[" not in shown[True]


# -- Small things ---------------------------------------------------------------------------


def test_counts_in_messages_are_singular_for_one(tmp_path):
    Session(tmp_path / "state").add()
    done = run_tailer("scrub", str(tmp_path / "state"), str(tmp_path / "out"))
    assert done.returncode == 0 and done.stdout.startswith("scrubbed 1 session into"), done.stdout
    done = run_report("--state-dir", str(tmp_path / "state"), "--session", "nobody")
    assert "(0 of 1 session log read)" in done.stderr


def test_the_page_written_counts_its_turns_as_the_table_does(tmp_path):
    title = run_report("--demo").stdout.splitlines()[0]
    counts = title.removeprefix("HydraFusion: ").partition(", ")[0]  # 26 turns (+3 ordinary)
    done = run_report("--demo", "--html", str(tmp_path / "r.html"))
    assert done.returncode == 0 and done.stderr.strip().endswith(f"r.html: {counts}")
    assert "ordinary" in counts


@pytest.mark.parametrize("options, named", [
    (["--html", "{tmp}/r.html", "--format", "csv"], "--format"),
    (["--since", "1d", "--until", "2d"], "--until"),
    (["--since", "2026-11-04", "--until", "2026-11-03"], "--until"),
])
def test_conflicting_options_are_refused_in_one_line(tmp_path, options, named):
    options = [option.format(tmp=tmp_path) for option in options]
    done = run_report("--demo", *options, env=tailer_env(TMPDIR=str(tmp_path)))
    assert done.returncode == 2 and named in one_line(done)
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("when", ["1w", "yesterday", "today", "Yesterday", "TODAY", "3D"])
def test_weeks_and_named_days_are_accepted_in_any_case(when):
    done = run_report("--demo", "--format", "json", "--since", when)
    assert done.returncode == 0, done.stderr


def test_yesterday_and_a_week_mean_what_they_say():
    now = datetime(2026, 11, 4, 12, tzinfo=timezone.utc)
    local_day = now.astimezone().date()
    assert report.parse_when("1w", now) == now - timedelta(days=7)
    assert report.parse_when("yesterday", now).date() == local_day - timedelta(days=1)
    assert report.parse_when("yesterday", now, whole_day_after=True) == report.parse_when("today", now)


# -- --since and --until cut at the report's midnight -------------------------------------
# Europe/Berlin's 2026-10-25 has 25 hours: from 22:00Z the day before to 23:00Z. New York
# is still on summer time then (until 2026-11-01): its 2026-10-25 runs from 04:00Z to 04:00Z.
BERLIN, NEW_YORK = ZoneInfo("Europe/Berlin"), ZoneInfo("America/New_York")


def test_named_days_are_the_report_zones_days_and_spans_of_time_are_not():
    now = datetime(2026, 10, 25, 23, 30, tzinfo=timezone.utc)  # Berlin 26th 00:30, New York 25th
    assert report.parse_when("today", now, zone=BERLIN) == datetime(2026, 10, 25, 23, tzinfo=timezone.utc)
    assert report.parse_when("yesterday", now, zone=BERLIN) == datetime(2026, 10, 24, 22, tzinfo=timezone.utc)
    assert report.parse_when("today", now, zone=NEW_YORK) == datetime(2026, 10, 25, 4, tzinfo=timezone.utc)
    assert report.parse_when("2026-10-25", now, zone=BERLIN, whole_day_after=True) == datetime(
        2026, 10, 25, 23, tzinfo=timezone.utc)  # the 25th's 25 hours, not 24
    assert report.parse_when("2026-10-25T12:00", now, zone=NEW_YORK) == datetime(
        2026, 10, 25, 16, tzinfo=timezone.utc)
    assert report.parse_when("1w", now, zone=BERLIN) == now - timedelta(weeks=1)


@pytest.mark.parametrize("system, option, when", [
    ("Asia/Tokyo", None, "--since 0001-01-01"),  # in the system's zone, ahead of UTC: UTC's year 0
    ("UTC", None, "--until 9999-12-31"),  # to the day's end: the year 10000
    ("America/New_York", "Asia/Tokyo", "--until 9999-12-31")])
def test_a_date_past_the_calendar_in_the_reports_zone_is_refused_in_words(system, option, when):
    """Spans of time past it: tests/test_bad_values.py."""
    zone = ["--timezone", option] if option else []
    done = run_report("--demo", *when.split(), *zone, env=tailer_env(TZ=system))
    assert done.returncode == 2
    assert one_line(done).endswith("is too far back or ahead: a date's year runs from 1 to 9999")


@pytest.mark.parametrize("system, option", [("America/New_York", "Europe/Berlin"),
                                            ("Europe/Berlin", None)])
def test_since_and_until_dates_cut_at_the_report_zones_midnight_across_a_dst_change(
        tmp_path, system, option):
    """TZ says one zone and --timezone another: the dates are --timezone's (else TZ's)."""
    starts = {"before": datetime(2026, 10, 24, 21, 30, tzinfo=timezone.utc),
              "first-hour": datetime(2026, 10, 24, 22, 30, tzinfo=timezone.utc),
              "25th-hour": datetime(2026, 10, 25, 22, 30, tzinfo=timezone.utc),
              "after": datetime(2026, 10, 25, 23, 30, tzinfo=timezone.utc)}
    for name, start in starts.items():
        writer = SessionWriter(name, start)
        writer.single("gpt-5.6-sol")
        writer.write(tmp_path / "state")
    zone = ["--timezone", option] if option else []
    done = run_report("--state-dir", str(tmp_path / "state"), "--format", "json",
                      "--since", "2026-10-25", "--until", "2026-10-25", *zone,
                      env=tailer_env(TZ=system))
    assert done.returncode == 0, done.stderr
    assert {turn["session_id"] for turn in json.loads(done.stdout)["turns"]} == {
        "first-hour", "25th-hour"}


# -- --demo's options checked before the copy ----------------------------------------------


@pytest.mark.parametrize("where", ["missing/r.html", "folder"])
def test_demo_with_an_html_path_that_cannot_be_written_makes_no_copy(tmp_path, monkeypatch,
                                                                     capsys, where):
    (tmp_path / "folder").mkdir()
    copies = []
    monkeypatch.setattr(demo, "prepare", lambda *args, **kwargs: copies.append(args))
    args = parse_args(["report", "--demo", "--html", str(tmp_path / where)], {})
    assert demo_report.report_demo(args, {}) == 2
    assert copies == []
    assert "--html" in capsys.readouterr().err


# -- One exit-code convention (docs/REPORT.md, "Exit codes") ---------------------------------


def command_line(command, state, tmp_path):
    if command == "run":
        return ["run", "--once", "--otlp-endpoint", "none", "--metrics-address", "none",
                "--checkpoint", str(tmp_path / "checkpoint.json"), "--state-dir", str(state)]
    if command == "scrub":
        return ["scrub", str(state), str(tmp_path / "copy")]
    return [command, "--state-dir", str(state)]


@pytest.mark.parametrize("command, answered, empty, missing", [
    ("report", 0, 1, 2), ("doctor", 0, 1, 2), ("scrub", 0, 1, 2), ("run", 0, 0, 2),
])
def test_each_command_keeps_the_exit_code_convention(tmp_path, command, answered, empty, missing):
    Session(tmp_path / "logs").add()
    (tmp_path / "empty").mkdir()
    codes = []
    for state in ("logs", "empty", "missing"):
        done = run_tailer(*command_line(command, tmp_path / state, tmp_path / f"out-{state}"))
        assert "Traceback" not in done.stderr
        codes.append(done.returncode)
    assert codes == [answered, empty, missing]
    docs = (ROOT / "docs" / "REPORT.md").read_text().partition("## Exit codes")[2]
    assert f"`{command}`" in docs.partition("\n\n## ")[0]


@needs_tmux
@pytest.mark.parametrize("how", ["the shell killed", "the terminal closed"])
def test_a_demo_watch_whose_terminal_goes_leaves_no_copy(tmp_path, how):
    """The shell that ran it killed (SIGKILL: it passes nothing on) or the terminal closed
    (tmux's server killed): the report is sent SIGHUP, twice in the second case."""
    (tmp_path / "tmp").mkdir()
    terminal = Terminal(ROOT, {**tailer_env(TMPDIR=str(tmp_path / "tmp")), "HOME": str(tmp_path)})
    try:
        terminal.type(f"{sys.executable} -m tailer report --demo --watch 2> {tmp_path}/stderr")
        terminal.keys("Enter")
        terminal.wait_for(lambda: "Ctrl-C quits" in terminal.screen())
        copy = next((tmp_path / "tmp").iterdir())
        if how == "the shell killed":
            os.kill(terminal.shell_pid(), signal.SIGKILL)
        else:
            terminal.kill()
        Terminal.wait_for(lambda: not copy.exists(), within_s=30)
    finally:
        terminal.kill()
    assert list((tmp_path / "tmp").iterdir()) == []
    assert (tmp_path / "stderr").read_text() == ""  # no traceback for the terminal gone


def test_stop_signals_in_a_burst_leave_no_copy_and_no_traceback(tmp_path):
    """SIGHUP, SIGTERM and SIGINT a moment apart, at random moments of a demo report: the
    first ends it, the others cannot cut its clean-up short."""
    rng = random.Random(39)
    for _ in range(12):
        process = subprocess.Popen([sys.executable, "-m", "tailer", "report", "--demo"], cwd=ROOT,
                                   env=tailer_env(TMPDIR=str(tmp_path)), stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, preexec_fn=ctrl_c_quits)
        while process.poll() is None and not list(tmp_path.iterdir()):
            pass  # until the copy is being made
        time.sleep(rng.random() * 0.15)
        for stop in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(stop)
            time.sleep(rng.random() * 0.002)
        stderr = process.stderr.read().decode()
        # 130: cut short; 0 or killed by a late signal (the first sent, SIGHUP, most often,
        # on a loaded machine): it had ended, the copy removed.
        assert process.wait(timeout=60) in (0, 130, -signal.SIGHUP, -signal.SIGTERM, -signal.SIGINT)
        assert stderr == "" and list(tmp_path.iterdir()) == []


def test_sigterm_during_a_demo_report_leaves_no_copy(tmp_path):
    """Ended while the demo's copy is being read (a slow disk, a supervisor's stop)."""
    process = subprocess.Popen([sys.executable, "-m", "tailer", "report", "--demo"], cwd=ROOT,
                               env=tailer_env(TMPDIR=str(tmp_path)), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    while process.poll() is None and not list(tmp_path.glob("*/session-state")):
        pass  # until the copy is being made
    process.send_signal(signal.SIGTERM)
    code = process.wait(timeout=60)
    assert "Traceback" not in process.stderr.read().decode()
    assert code in (0, 130)  # 0: it had printed the report already
    assert list(tmp_path.iterdir()) == []


def test_one_session_s_folder_given_as_the_state_folder_is_named_so(tmp_path):
    """`--state-dir ~/.copilot/session-state/ID` (the folder a user finds a session's log
    in): report said the folder "has no session logs (*/events.jsonl)", doctor "Nothing to
    check", and run watched it in silence, though the log is right there. Each says it is
    one session's folder and where the sessions are; report gives the command for that one
    session, which works."""
    state = tmp_path / "state"
    shutil.copytree(ROOT / "fixtures", state)
    session = min(state.iterdir())
    said = f"{session} is one session's folder (it holds events.jsonl), not the folder of sessions ({state})"

    done = run_report("--state-dir", str(session))
    assert done.returncode == 1 and done.stdout == ""
    assert said in done.stderr and "Traceback" not in done.stderr
    advice = done.stderr.splitlines()[-1].split(" report ", 1)[1].split()
    assert advice == ["--state-dir", str(state), "--session", session.name]
    alone = run_report(*advice, "--format", "json")
    assert alone.returncode == 0 and json.loads(alone.stdout)["sessions"] == 1

    doctor = run_tailer("doctor", "--state-dir", str(session))
    assert f"Nothing to check: {said}." in doctor.stdout

    daemon = run_tailer("run", "--once", "--otlp-endpoint", "none", "--state-dir", str(session),
                        "--checkpoint", str(tmp_path / "checkpoint.json"))
    assert daemon.returncode == 0 and f"{said}: no session is read there" in daemon.stderr
