"""Every option of every command, given the wrong values a user can type: one line, exit 2.

Paths that are files, folders, missing or unwritable; numbers that are words; empty
strings. Each run is otherwise right (a real state folder, no network), so the option under
test is the one thing wrong. WRONG names every option the parser has: a new option fails
test_every_option_is_fed_wrong_values until its wrong values are written here.
"""

import argparse
import json
import re
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
    "--once-timeout": (WORD, EMPTY, "-1", "nan", "inf"),
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
    # A file that is no ledger is one line and no check, not a usage error (test_ledger.py).
    "doctor": {"--state-dir": (FILE, MISSING, EMPTY), "--cli": (FILE, FOLDER, MISSING),
               "--ledger": (FOLDER, MISSING, UNDER_FILE, EMPTY)},
    "report": {
        "--state-dir": (FILE, MISSING, EMPTY),
        # Past the calendar (years 1 to 9999) once moved back, or to the day's end.
        "--since": (WORD, EMPTY, "100000000w", "3000000d"), "--until": (WORD, EMPTY, "9999-12-31"),
        "--session": (EMPTY,), "--model": (EMPTY,), "--pattern": (EMPTY,),
        "--format": (WORD, EMPTY),
        "--html": (FOLDER, MISSING, UNDER_FILE, UNWRITABLE, EMPTY),
        "--by": (WORD, EMPTY), "--order": (WORD, EMPTY),
        "--timezone": (WORD, EMPTY, "Mars/Olympus", "../../etc/passwd"),
        "--turns": (WORD, EMPTY, "-1", "1.5"),
        "--jobs": (WORD, EMPTY, "0", "-1", "1.5"),
        "--ledger": (FOLDER, MISSING, UNDER_FILE, EMPTY),
    },
    "statusline": {
        # Braces doubled: made_real formats every value (a field, a lone brace, ESC, too long).
        "--format": (EMPTY, "{{nope}}", "{{turn", "turn}}", "\x1b[31m{{turn}}", "x" * 501),
        "--width": (WORD, EMPTY, "0", "-1", "1001", "1.5"),
        "--then": (EMPTY,),
        "--then-timeout": (WORD, EMPTY, "0", "-1", "nan", "9"),
    },
    "completion": {"shell": (WORD, EMPTY)},
}


def command_parsers() -> dict[str, argparse.ArgumentParser]:
    """Each command's parser, by the command's name."""
    return next(action for action in build_parser({})._actions
                if isinstance(action, argparse._SubParsersAction)).choices


def parser_options() -> dict[str, set[str]]:
    """Each command's options that take a value, and its positionals, by name."""
    taken = {}
    for name, parser in command_parsers().items():
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
    if command == "statusline":
        return [command, option, value]
    return [command, "--state-dir", logs, option, value]


def made_real(value: str, tmp_path) -> str:
    """The right state folder (one session log), and `value` with its placeholders made real
    places under tmp_path."""
    writer = SessionWriter("bad-values", START)
    writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol")
    writer.write(tmp_path / "logs")
    (tmp_path / "file").write_text("not a folder\n")
    (tmp_path / "folder").mkdir()
    return value.format(file=tmp_path / "file", folder=tmp_path / "folder",
                        missing=tmp_path / "missing" / "x", under_file=tmp_path / "file" / "x")


CASES = [(command, option, value) for command, options in WRONG.items()
         for option, values in options.items() for value in values]


@pytest.mark.parametrize("command, option, value", CASES,
                         ids=[f"{c} {o} {v or 'empty'}" for c, o, v in CASES])
def test_a_wrong_value_is_one_line_and_exit_2(tmp_path, command, option, value):
    value = made_real(value, tmp_path)
    done = subprocess.run([sys.executable, "-m", "tailer",
                           *command_line(command, option, value, tmp_path)],
                          cwd=ROOT, env=tailer_env(), capture_output=True, text=True, timeout=60)
    assert "Traceback" not in done.stderr
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr.strip(), "no line says what is wrong"
    assert not (tmp_path / "folder").is_file()  # a folder given as a file is left as it was


# -- the environment -------------------------------------------------------------------------
# Each variable a user may set, with the commands that read it and wrong values for it. A
# wrong value is refused (exit 2, with a line), or does not matter to the command; it never
# ends in a traceback. Relative paths land in the test's folder, the command's working one.
NUMBER = (WORD, "-1", "nan", "1e999", "9" * 30)
PATH = (FILE, FOLDER, UNDER_FILE, UNWRITABLE)
URL = (WORD, "ftp://x", "http://[::1")
PAIRS = (WORD, "=x", "%zz=%", "x=%0Ay", "\u00e9=1")
SWITCH = (WORD, "-1")
# Read by `run` and `demo` (their options are one).
RUN_VARIABLES = {
    "HYDRAFUSION_WAIT_FOR_STATE_DIR": SWITCH,
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": URL,
    "OTEL_EXPORTER_OTLP_ENDPOINT": URL,
    "OTEL_EXPORTER_OTLP_HEADERS": PAIRS,
    "OTEL_EXPORTER_OTLP_CERTIFICATE": PATH,
    "OTEL_RESOURCE_ATTRIBUTES": PAIRS,
    "OTEL_SERVICE_NAME": (EMPTY, "\x1b[31m"),
    "OTEL_METRICS_EXPORTER": (WORD, ","),
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": URL,
    "OTEL_EXPORTER_OTLP_METRICS_HEADERS": PAIRS,
    "OTEL_METRIC_EXPORT_INTERVAL": (*NUMBER, "0"),
    "HYDRAFUSION_METRICS_ADDRESS": (WORD, "host:port", "1.2.3.4:99999"),
    "HYDRAFUSION_TEXTFILE": PATH,
    "HYDRAFUSION_FROM_START": SWITCH,
    "HYDRAFUSION_CHECKPOINT": PATH,
    "XDG_STATE_HOME": PATH,
    "HYDRAFUSION_ONCE": SWITCH,
    "HYDRAFUSION_ONCE_TIMEOUT": NUMBER,
    "HYDRAFUSION_BACKFILL_DAYS": NUMBER,
    "HYDRAFUSION_HISTORY_URL": URL,
    "HYDRAFUSION_HISTORY_LABELS": PAIRS,
    "HYDRAFUSION_HISTORY_HEADERS": PAIRS,
    "HYDRAFUSION_HISTORY_CERTIFICATE": PATH,
    "HYDRAFUSION_IDLE_TIMEOUT": NUMBER,
    "HYDRAFUSION_LOG_LEVEL": (WORD, "-1"),
    "HYDRAFUSION_CLI_OTEL_PATH": PATH,
    "COPILOT_OTEL_FILE_EXPORTER_PATH": PATH,
}
ENV_WRONG = {
    **{name: (("run",), values) for name, values in RUN_VARIABLES.items()},
    "COPILOT_STATE_DIR": (("run", "report", "doctor"), PATH),
    "COPILOT_HOME": (("run", "report", "doctor", "statusline"), PATH),
    "HYDRAFUSION_REPLAY_INTERVAL": (("demo",), NUMBER),
    "XDG_CACHE_HOME": (("report", "statusline"), PATH),
    "NO_COLOR": (("report", "statusline"), SWITCH),
    "COLUMNS": (("report", "statusline"), NUMBER),
}
# Read only when another variable asks for what they shape; a dead port, should one be sent.
ALONGSIDE = {
    "OTEL_EXPORTER_OTLP_CERTIFICATE": {"OTEL_EXPORTER_OTLP_ENDPOINT": "https://127.0.0.1:9"},
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": {"OTEL_METRICS_EXPORTER": "otlp"},
    "OTEL_EXPORTER_OTLP_METRICS_HEADERS": {"OTEL_METRICS_EXPORTER": "otlp",
                                           "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"},
    "OTEL_METRIC_EXPORT_INTERVAL": {"OTEL_METRICS_EXPORTER": "otlp",
                                    "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"},
    **{name: {"HYDRAFUSION_HISTORY_URL": "http://127.0.0.1:9/api/v1/write",
              "HYDRAFUSION_HISTORY_LABELS": "job=j,instance=i"}
       for name in ("HYDRAFUSION_HISTORY_HEADERS", "HYDRAFUSION_HISTORY_CERTIFICATE")},
}
# The option that would stand in for the variable: left out of the right command line.
OPTION_OF = {"COPILOT_STATE_DIR": "--state-dir", "COPILOT_HOME": "--state-dir",
             "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "--otlp-endpoint",
             "OTEL_EXPORTER_OTLP_ENDPOINT": "--otlp-endpoint",
             "OTEL_EXPORTER_OTLP_CERTIFICATE": "--otlp-endpoint",
             "HYDRAFUSION_METRICS_ADDRESS": "--metrics-address",
             "HYDRAFUSION_CHECKPOINT": "--checkpoint", "XDG_STATE_HOME": "--checkpoint"}


def variables_a_user_sets() -> set[str]:
    """Those every command's --help names, and those TAILER.md lists as read from the
    environment only."""
    helps = "\n".join(parser.format_help() for parser in command_parsers().values())
    named = set(re.findall(r"\$([A-Z][A-Z0-9_]+)", helps))
    return named | set(re.findall(r"^- `([A-Z][A-Z0-9_]+)`: ", (ROOT / "docs" / "TAILER.md").read_text(),
                                  flags=re.MULTILINE))


def test_every_variable_is_fed_wrong_values():
    assert variables_a_user_sets() | {"COLUMNS"} == set(ENV_WRONG)


def environment_line(command: str, variable: str, tmp_path) -> list[str]:
    """A right command line for `command` that leaves `variable` to decide what it shapes:
    `statusline` (given the CLI's JSON naming the session only by its id, see
    status_input) shows the session's line, or installs itself where $COPILOT_HOME says."""
    if command == "statusline":
        return [command, "--install"] if variable == "COPILOT_HOME" else [command]
    right = {"--state-dir": str(tmp_path / "logs")}
    if command in ("run", "demo"):
        right.update({"--otlp-endpoint": "none", "--metrics-address": "none",
                      "--checkpoint": str(tmp_path / "checkpoint.json")})
    right.pop(OPTION_OF.get(variable), None)
    once = ["--once"] if command in ("run", "demo") else []
    return [command, *once, *(part for pair in right.items() for part in pair)]


def status_input(tmp_path) -> str:
    """What Copilot CLI pipes to `statusline`, naming the right session by its id alone: its
    log is then found in $COPILOT_HOME/session-state, else ~/.copilot/session-state."""
    return json.dumps({"session_id": "bad-values"})


ENV_CASES = [(command, variable, value) for variable, (commands, values) in ENV_WRONG.items()
             for command in commands for value in values]


@pytest.mark.parametrize("command, variable, value", ENV_CASES,
                         ids=[f"{c} {n} {v or 'empty'}" for c, n, v in ENV_CASES])
def test_a_wrong_variable_is_refused_in_words_or_does_not_matter(tmp_path, command, variable, value):
    value = made_real(value, tmp_path)
    env = tailer_env(**ALONGSIDE.get(variable, {}), **{variable: value})
    done = subprocess.run([sys.executable, "-m", "tailer",
                           *environment_line(command, variable, tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
                          input=status_input(tmp_path) if command == "statusline" else None)
    assert "Traceback" not in done.stderr
    # 1: no session log there, when the variable chose the state folder (doctor says so on
    # its report, stdout)
    assert done.returncode in (0, 1, 2), (done.returncode, done.stderr)
    assert done.returncode == 0 or (done.stderr + done.stdout).strip(), "no line says what is wrong"
