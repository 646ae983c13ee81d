"""`statusline` faults found by probing it as a broken machine or a hostile user would,
beyond those tests/test_statusline.py feeds it: each test here failed before its fix."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sessiongen import every_pattern
from tailer.atomic_file import temporary_of
from tailer.statusline import settings
from tailerproc import ROOT, tailer_env
from test_statusline import environ, line_of, quiet, setting_command, settled_line, status_input


@pytest.mark.parametrize("option", ["--install", "--uninstall"])
def test_settings_the_cli_saves_while_install_writes_them_are_not_lost(tmp_path, monkeypatch, option):
    """The CLI saves settings.json itself (/settings, /statusline): a save of its between
    our read of the file and our rename over it was lost without a word."""
    path = tmp_path / "settings.json"
    path.write_text('{"model": "auto"}' if option == "--install" else json.dumps(
        {"model": "auto", "statusLine": {"command": settings.our_command([])}}))
    real, edited = settings.replace_file, []

    def cli_saves_meanwhile(target, *args, **kwargs):
        if not edited:
            saved = json.loads(path.read_text())
            saved["theme"] = "dark"
            path.write_text(json.dumps(saved))
            edited.append(target)
        return real(target, *args, **kwargs)

    monkeypatch.setattr(settings, "replace_file", cli_saves_meanwhile)
    if option == "--install":
        settings.install(Path(path), [])
    else:
        settings.uninstall(Path(path))
    after = json.loads(path.read_text())
    assert after["theme"] == "dark" and after["model"] == "auto"
    assert settings.is_ours(after.get("statusLine", {}).get("command")) == (option == "--install")


def test_a_log_whose_bulk_is_lines_it_skips_is_read_within_each_refreshs_budget(tmp_path, monkeypatch):
    """The budget was looked at only on the lines the reader hands on (records), so a log
    whose bytes are mostly lines it skips (the assistant's messages, a tool's output: most of
    a real log) was read to its end in one refresh: 5 s for 300 MB, and past the CLI's 10 s
    kill for a log a few times that, every refresh killed before it saved, the footer empty
    for good. Each refresh now stops within its budget there too, and goes on at the next."""
    from tailer.copilot.event_types import may_be_read
    from tailer.copilot.lines import BUFFER_BYTES
    from tailer.statusline import command, summary

    lines = every_pattern("sl-skipped").lines()
    message = json.dumps({"type": "assistant.message", "data": {"content": "words " * 1300},
                          "id": "m", "timestamp": "2026-05-01T10:00:00.000Z"})
    assert not may_be_read(message.encode())
    log = tmp_path / "state" / "sl-skipped" / "events.jsonl"
    log.parent.mkdir(parents=True)
    half = len(lines) // 2
    log.write_text("".join(line + "\n" for line in [*lines[:half], *[message] * 200, *lines[half:]]))
    quiet(log)
    env = environ(tmp_path)
    fresh = settled_line(log.parent, dict(env, XDG_CACHE_HOME=str(tmp_path / "fresh")))
    monkeypatch.setattr(command, "READ_BUDGET_S", 0.0)
    monkeypatch.setattr(summary, "LEFT_BYTES", 64 << 10)
    shown = [line_of(log.parent, env)]
    while shown[-1].startswith("HydraFusion: reading the log") and len(shown) < 10_000:
        shown.append(line_of(log.parent, env))
    percents = [0, *(int(text.rpartition(" ")[2].rstrip("%")) for text in shown[:-1])]
    # A step is a line; the last reads to the end what is left within LEFT_BYTES of it, as
    # far as the reader can tell (its file's offset is ahead by what it buffered).
    most = 100 * (summary.LEFT_BYTES + BUFFER_BYTES + len(message)) / log.stat().st_size + 1
    assert max(after - before for before, after in zip(percents, percents[1:])) <= most, percents
    assert shown[-1] == fresh


def test_a_then_that_cannot_be_started_costs_its_output_not_our_line(tmp_path, monkeypatch):
    """A process at its limit of open files (or a machine at its own) could not make the
    pipes for `--then`'s command: that failure cost our line as well, the footer empty."""
    import errno

    from tailer.statusline import command, then
    from tailer.statusline.options import Options, parse_format

    log = every_pattern("sl-no-pipe").write(tmp_path / "state")
    quiet(log)
    env = environ(tmp_path)
    expected = line_of(log.parent, env, "{session}")

    def no_descriptor_left():
        raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))

    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    os.write(stdin_write, status_input(log.parent))
    os.close(stdin_write)
    monkeypatch.setattr(then.os, "pipe", no_descriptor_left)
    try:
        command.show(Options(parse_format("{session}"), then="echo theirs"), env, stdin_read, stdout_write)
    finally:
        os.close(stdin_read)
        os.close(stdout_write)
    with os.fdopen(stdout_read, "rb") as output:
        assert output.read().decode() == expected + "\n"


@pytest.mark.parametrize("where", ["no home", "a folder not ours"])
def test_a_big_log_with_nowhere_to_save_is_read_whole_not_reading_for_good(tmp_path, monkeypatch, where):
    """Each refresh reads for its budget and saves where it got, for the next to go on
    from; with no state folder to save in (no $HOME, as a container's user may have; one
    that is not the user's own), each refresh began again at the log's start and stopped at
    the same place: "HydraFusion: reading the log 3%" for good, on every big log."""
    from tailer.statusline import command, summary

    log = every_pattern("sl-nowhere").write(tmp_path / "state")
    quiet(log)
    env = environ(tmp_path)
    expected = settled_line(log.parent, env)
    if where == "no home":
        env = {"NO_COLOR": "1"}
    else:
        (tmp_path / "theirs").mkdir(mode=0o700)
        (tmp_path / "other-cache" / "hydrafusion").mkdir(parents=True)
        (tmp_path / "other-cache" / "hydrafusion" / "statusline").symlink_to(tmp_path / "theirs")
        env = dict(env, XDG_CACHE_HOME=str(tmp_path / "other-cache"))
    monkeypatch.setattr(command, "READ_BUDGET_S", 0.0)
    monkeypatch.setattr(summary, "LEFT_BYTES", 0)
    assert line_of(log.parent, env) == line_of(log.parent, env) == expected
    assert where == "no home" or not list((tmp_path / "theirs").iterdir())


def test_a_forged_state_whose_open_turn_holds_no_record_is_read_again(tmp_path):
    """A saved reading whose CRC matches, an open turn in it emptied of its records (no
    turn the reader saves is: a turn opens with its first record): its start and end are
    those of its records, and finding them failed, the line empty until the log changed.
    The state is refused as damaged now, and the log read again from its start."""
    from test_statusline import DAMAGE_LOG_LINES, saved_state, state_file
    from tailer.statusline import saved

    log = tmp_path / "state" / "sl-empty-turn" / "events.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text("".join(line + "\n" for line in DAMAGE_LOG_LINES[:60]))
    quiet(log, 60)
    env = environ(tmp_path)
    header, view, reading, _ = saved_state(tmp_path, log).split(b"\n")
    state = json.loads(reading)
    opened = state["log"]["open"]
    assert opened and line_of(log.parent, env).startswith("running")
    for turn in opened:
        turn["records"] = []
    forged = json.dumps(state).encode()
    head = json.loads(header)
    head["reading_crc"] = saved._crc(forged)
    state_file(tmp_path, log).write_bytes(b"\n".join((json.dumps(head).encode(), view, forged)) + b"\n")
    with log.open("a") as more:
        more.write(DAMAGE_LOG_LINES[60] + "\n")
    quiet(log, 60)
    expected = line_of(log.parent, environ(tmp_path / "fresh"))
    assert line_of(log.parent, env) == expected and expected.startswith("running")


@pytest.mark.parametrize("option", ["--install", "--uninstall"])
def test_settings_the_user_made_read_only_are_refused_not_replaced(tmp_path, option):
    """A settings.json made read-only (0444) was replaced all the same, its mode kept: the
    rename over it needs only the folder writable. Whoever took their own write permission
    away asked for it not to change: one line says so, exit 2, nothing written, no backup."""
    home = tmp_path / "copilot-home"
    home.mkdir()
    path = home / "settings.json"
    installed = {"statusLine": {"command": settings.our_command([])}} if option == "--uninstall" else {}
    content = json.dumps({"model": "auto", **installed}).encode()
    path.write_bytes(content)
    path.chmod(0o444)
    done = setting_command(home, option, check=False)
    assert done.returncode == 2 and done.stdout == "" and done.stderr.count("\n") == 1, done
    assert "is read-only" in done.stderr and "nothing changed" in done.stderr
    assert path.read_bytes() == content and stat.S_IMODE(os.stat(path).st_mode) == 0o444
    assert os.listdir(home) == ["settings.json"]


# `python -m tailer statusline --install`, killed (SIGKILL) as it renames its new file onto
# the file named by its first argument: that file written and flushed, nothing renamed.
KILLED_AT_RENAME = """\
import os, runpy, signal, sys
rename, killed_at = os.replace, sys.argv[1]
def killed_at_rename(source, target, **kwargs):
    if os.path.basename(target) == killed_at:
        os.kill(os.getpid(), signal.SIGKILL)
    return rename(source, target, **kwargs)
os.replace = killed_at_rename
sys.argv = ["tailer", "statusline", "--install"]
runpy.run_module("tailer", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("killed_at", ["settings.json", "settings.json.hydrafusion-backup"])
def test_what_a_killed_install_left_the_next_removes_and_nothing_else(tmp_path, killed_at):
    """An --install killed between writing its new file (or backup) and the rename left
    `.settings.json.RANDOM.tmp` in ~/.copilot for good. The next run removes it, and only
    what is unmistakably a killed run's: no link so named (nor what it points to), no file
    young enough to be another run's save under way, no other file's."""
    home = tmp_path / "copilot-home"
    home.mkdir()
    path = home / "settings.json"
    path.write_text('{"model": "auto"}')
    killed = subprocess.run([sys.executable, "-c", KILLED_AT_RENAME, killed_at], cwd=ROOT,
                            env=tailer_env(COPILOT_HOME=str(home)), capture_output=True, timeout=60)
    assert killed.returncode == -signal.SIGKILL, killed
    left = [name for name in os.listdir(home) if temporary_of(name) == killed_at]
    assert len(left) == 1 and json.loads(path.read_text()) == {"model": "auto"}
    target = tmp_path / "elsewhere.json"
    target.write_text("theirs")
    link, young, other = (home / name for name in (".settings.json.0123456789ab.tmp",
                                                   ".settings.json.abcdef012345.tmp",
                                                   ".other.json.0123456789ab.tmp"))
    link.symlink_to(target)
    young.write_text("a save under way")
    other.write_text("another file's")
    an_hour_ago = time.time() - 3600  # the next --install comes later
    for name in (left[0], link.name, other.name):
        os.utime(home / name, (an_hour_ago, an_hour_ago), follow_symlinks=False)
    setting_command(home, "--install")
    after = json.loads(path.read_text())
    assert after["model"] == "auto" and settings.is_ours(after["statusLine"]["command"])
    assert sorted(os.listdir(home)) == sorted(["settings.json", "settings.json.hydrafusion-backup",
                                               link.name, young.name, other.name])
    assert target.read_text() == "theirs"


def nested(depth: int) -> bytes:
    """Settings valid as JSON (the CLI reads them), `depth` levels deep."""
    return b'{"deep": ' + b"[" * depth + b"]" * depth + b"}"


@pytest.mark.parametrize("option", ["--install", "--uninstall"])
def test_settings_nested_too_deeply_for_json_are_said_to_be_so(tmp_path, option):
    """Settings some 990 levels deep were called "not valid JSON" (json's RecursionError),
    though they are: the one line now says what is wrong with them; nothing changed."""
    home = tmp_path / "copilot-home"
    home.mkdir()
    (home / "settings.json").write_bytes(nested(990))
    done = setting_command(home, option, check=False)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done
    assert "nested too deeply" in done.stderr and "not valid JSON" not in done.stderr
    assert (home / "settings.json").read_bytes() == nested(990)
    assert os.listdir(home) == ["settings.json"]


def deepest_json_reads() -> int:
    """The deepest nesting json reads from this stack: its recursion limit less the stack."""
    low, high = 1, sys.getrecursionlimit()
    while low < high:
        middle = (low + high + 1) // 2
        try:
            json.loads("[" * middle + "]" * middle)
            low = middle
        except RecursionError:
            high = middle - 1
    return low


def test_settings_at_the_depth_json_stops_at_are_changed_or_said_too_deep(tmp_path):
    """json reads through C and writes with indent through Python, each with its own depth
    to stop at: around where reading stops, the settings are changed whole or refused as
    too deep (so far, what json reads it writes back too), never a traceback."""
    path = tmp_path / "settings.json"
    deepest, outcomes = deepest_json_reads(), set()
    for depth in range(deepest - 40, deepest + 2):
        path.write_bytes(nested(depth))
        try:
            settings.install(path, [])
        except settings.SettingsError as error:
            assert "nested too deeply" in str(error) and path.read_bytes() == nested(depth)
            outcomes.add("refused")
            continue
        written = b"".join(path.read_bytes().split())
        assert written.startswith(b"".join(nested(depth).split())[:-1] + b',"statusLine":{"command":'), depth
        outcomes.add("changed")
    assert outcomes == {"changed", "refused"}
