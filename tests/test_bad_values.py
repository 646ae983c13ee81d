"""Every option of every command, given the wrong values a user can type: one line, exit 2.

Paths that are files, folders, missing or unwritable; numbers that are words; empty
strings. Each run is otherwise right (a real state folder, no network), so the option under
test is the one thing wrong. WRONG names every option the parser has: a new option fails
test_every_option_is_fed_wrong_values until its wrong values are written here.
"""

import argparse
import subprocess
import sys

import pytest

from sessiongen import START, SessionWriter
from tailer.commands.cli import build_parser
from tailerproc import ROOT, tailer_env

# Placeholders, made real under each test's tmp_path.
FILE, FOLDER, MISSING, UNDER_FILE = "{file}", "{folder}", "{missing}", "{under_file}"
UNWRITABLE = "/proc/hydrafusion-test/x"  # not writable even by root
EMPTY, WORD = "", "soon"
PATHS = (FILE, MISSING, UNDER_FILE, EMPTY)

RUN_WRONG = {
    "--state-dir": (FILE, MISSING, EMPTY),
    "--otlp-endpoint": (WORD, EMPTY, "ftp://x"),
    "--otlp-metrics-endpoint": (WORD, EMPTY, "ftp://x"),
    "--otlp-metrics-interval": (WORD, EMPTY, "-1"),
    "--metrics-address": (WORD, EMPTY, "host:port"),
    "--textfile": (FOLDER, MISSING, UNDER_FILE, UNWRITABLE, EMPTY),
    "--checkpoint": (FOLDER, UNDER_FILE, EMPTY),
    "--backfill-days": (WORD, EMPTY, "-1", "nan"),
    "--history-url": (WORD, "ftp://x"),
    "--history-labels": (WORD, "=x"),
    "--idle-timeout": (WORD, EMPTY, "-1", "nan"),
    "--log-level": (WORD, EMPTY),
}
WRONG = {
    "run": {**RUN_WRONG,
            # Any other path may yet be written by the CLI; "" and `none` mean off.
            "--cli-otel": ()},
    "demo": {**RUN_WRONG, "--replay-interval": (WORD, EMPTY, "-1")},
    "scrub": {"SRC": (FILE, MISSING, EMPTY), "DST": (FILE, UNDER_FILE, UNWRITABLE, EMPTY),
              "--seed": (EMPTY,)},
    "doctor": {"--state-dir": (FILE, MISSING, EMPTY), "--cli": (FILE, FOLDER, MISSING)},
    "report": {
        "--state-dir": (FILE, MISSING, EMPTY),
        "--since": (WORD, EMPTY), "--until": (WORD, EMPTY),
        "--session": (EMPTY,), "--model": (EMPTY,), "--pattern": (EMPTY,),
        "--format": (WORD, EMPTY),
        "--html": (FOLDER, MISSING, UNDER_FILE, UNWRITABLE, EMPTY),
        "--by": (WORD, EMPTY), "--order": (WORD, EMPTY),
        "--timezone": (WORD, EMPTY, "Mars/Olympus", "../../etc/passwd"),
        "--turns": (WORD, EMPTY, "-1", "1.5"),
        "--jobs": (WORD, EMPTY, "0", "-1", "1.5"),
    },
    "completion": {"shell": (WORD, EMPTY)},
}


def parser_options() -> dict[str, set[str]]:
    """Each command's options that take a value, and its positionals, by name."""
    commands = next(action for action in build_parser({})._actions
                    if isinstance(action, argparse._SubParsersAction)).choices
    taken = {}
    for name, parser in commands.items():
        taken[name] = {
            action.option_strings[-1] if action.option_strings else action.metavar or action.dest
            for action in parser._actions
            if action.nargs != 0 and not isinstance(action, argparse._VersionAction)
        }
    return taken


def test_every_option_is_fed_wrong_values():
    assert {name: set(options) for name, options in WRONG.items()} == parser_options()


def command_line(command: str, option: str, value: str, tmp_path) -> list[str]:
    """A right command line for `command` with `option` set to `value`."""
    logs = str(tmp_path / "logs")
    if command in ("run", "demo"):
        right = ["--once", "--otlp-endpoint", "none", "--metrics-address", "none",
                 "--checkpoint", str(tmp_path / "checkpoint.json"), "--state-dir", logs]
        return [command, *right, option, value]
    if command == "scrub":
        source, target = logs, str(tmp_path / "copy")
        if option == "SRC":
            source = value
        elif option == "DST":
            target = value
        else:
            return [command, source, target, option, value]
        return [command, source, target]
    if command == "completion":
        return [command, value]
    return [command, "--state-dir", logs, option, value]


CASES = [(command, option, value) for command, options in WRONG.items()
         for option, values in options.items() for value in values]


@pytest.mark.parametrize("command, option, value", CASES,
                         ids=[f"{c} {o} {v or 'empty'}" for c, o, v in CASES])
def test_a_wrong_value_is_one_line_and_exit_2(tmp_path, command, option, value):
    writer = SessionWriter("bad-values", START)
    writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol")
    writer.write(tmp_path / "logs")
    (tmp_path / "file").write_text("not a folder\n")
    (tmp_path / "folder").mkdir()
    value = value.format(file=tmp_path / "file", folder=tmp_path / "folder",
                         missing=tmp_path / "missing" / "x", under_file=tmp_path / "file" / "x")
    done = subprocess.run([sys.executable, "-m", "tailer",
                           *command_line(command, option, value, tmp_path)],
                          cwd=ROOT, env=tailer_env(), capture_output=True, text=True, timeout=60)
    assert "Traceback" not in done.stderr
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr.strip(), "no line says what is wrong"
    assert not (tmp_path / "folder").is_file()  # a folder given as a file is left as it was
