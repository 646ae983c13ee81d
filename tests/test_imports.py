"""Start-up is part of every answer: each command imports what it uses, and no more.

Each case runs a command as a user does (`python -X importtime -m tailer ...`) and reads
the modules it imported from importtime's lines; the rules are structural (the daemon is
not loaded by a report), never timings, which bench/benchmark.py measures.
"""

import re
import statistics
import subprocess
import sys
from types import SimpleNamespace

import pytest
from hypothesis import given, strategies as st

from tailer.commands.cli import COMMANDS, build_parser, parse_args
from tailer.report import figures
from tailerproc import ROOT, tailer_env

FIXTURES = str(ROOT / "fixtures")
DAEMON = ("tailer.daemon", "tailer.outputs", "tailer.turns.sessions")
NETWORK = ("http.client", "urllib.request", "ssl", "socket")
REPORT = ("tailer.report",)
REPORT_EXTRAS = ("tailer.report.live", "tailer.report.html", "tailer.copilot.watch")


def imported(tmp_path, *args: str) -> set[str]:
    """The modules `python -m tailer ARGS` imports, as -X importtime lists them."""
    env = tailer_env(XDG_CACHE_HOME=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "tailer", *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    names = set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", done.stderr, re.M))
    assert "tailer.commands.cli" in names  # the lines were read
    return names


def of(names: set[str], prefixes: tuple[str, ...]) -> set[str]:
    return {name for name in names
            if any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)}


@pytest.mark.parametrize("args", [("--version",), ("--help",), ("completion", "--help")])
def test_the_top_level_imports_no_command(tmp_path, args):
    names = imported(tmp_path, *args)
    assert of(names, (*DAEMON, *REPORT, "tailer.copilot", "tailer.turns")) == set()


@pytest.mark.parametrize("args", [("run", "--help"), ("demo", "--help")])
def test_the_daemons_commands_import_no_report(tmp_path, args):
    names = imported(tmp_path, *args)
    assert of(names, REPORT) == set()
    assert "tailer.daemon.checkpoint" in names  # its default checkpoint path is in the help


def test_a_run_with_every_export_off_imports_no_network(tmp_path):
    """The first start's backfill (`run --once --from-start`, bench/reading.py's) serves,
    pushes and exports nothing: http.client, ssl and http.server are imported by the
    exporters and the server only when the options ask for them."""
    names = imported(tmp_path, "run", "--once", "--from-start", "--state-dir", FIXTURES,
                     "--metrics-address", "none", "--otlp-endpoint", "none",
                     "--checkpoint", str(tmp_path / "checkpoint.json"))
    assert "tailer.outputs.otlp" in names  # the exporters' modules are loaded: the check can fail
    assert of(names, (*NETWORK, "http", "email", "tailer.outputs.http_client",
                      "tailer.outputs.metrics_server")) == set()
    # Nor uuid nor platform: the instance id and the build's Python version are made
    # without them (tailer/uuids.py, tailer/outputs/metrics.py).
    assert of(names, ("uuid", "platform")) == set()


@pytest.mark.parametrize("args", [
    ("report", "--help"),
    ("report", "--state-dir", FIXTURES, "--format", "json"),
    ("report", "--state-dir", FIXTURES),
    ("report", "--demo", "--format", "csv"),
])
def test_the_report_imports_neither_the_daemon_nor_the_network(tmp_path, args):
    names = imported(tmp_path, *args)
    assert of(names, (*DAEMON, *NETWORK)) == set()
    assert of(names, REPORT_EXTRAS) == set()  # only --watch and --html need these
    assert "tailer.report.command" in names


def test_a_json_report_imports_no_table(tmp_path):
    """The table and --by's are imported where they are printed: JSON and CSV pay for neither."""
    names = imported(tmp_path, "report", "--state-dir", FIXTURES, "--format", "json")
    assert of(names, ("tailer.report.table", "tailer.report.groups_table")) == set()
    assert "tailer.report.table" in imported(tmp_path, "report", "--state-dir", FIXTURES)


WORKERS = ("tailer.report.workers", "pickle", "multiprocessing", "concurrent.futures")


def test_a_warm_report_and_the_demo_import_no_worker_machinery(tmp_path):
    """A report whose cache holds every log reads nothing, and the demo's small logs are
    read in its own process: neither pays for importing what worker processes need."""
    first = imported(tmp_path, "report", "--state-dir", FIXTURES, "--format", "json", "--jobs", "2")
    warm = imported(tmp_path, "report", "--state-dir", FIXTURES, "--format", "json")
    assert "tailer.report.workers" in first  # the first read does start workers: the check can fail
    assert of(warm, WORKERS) == set()
    demo = imported(tmp_path, "report", "--demo", "--format", "json")
    assert of(demo, WORKERS) == set()
    # Nor logging (the daemon's) nor uuid
    # (which imports platform): the report writes its few lines to stderr itself.
    assert of(warm | demo, ("logging", "uuid", "platform")) == set()


def test_the_page_imports_its_renderer_and_still_no_daemon(tmp_path):
    names = imported(tmp_path, "report", "--state-dir", FIXTURES, "--html",
                     str(tmp_path / "page.html"))
    assert "tailer.report.html" in names
    assert of(names, (*DAEMON, *NETWORK, "tailer.report.live")) == set()


@pytest.mark.parametrize("args", [("doctor", "--state-dir", FIXTURES), ("scrub", "--help")])
def test_doctor_and_scrub_import_neither_the_daemon_nor_the_report(tmp_path, args):
    names = imported(tmp_path, *args)
    assert of(names, (*DAEMON, *REPORT)) == set()


def footer_imports(tmp_path, stdin: bytes) -> set[str]:
    """The modules `statusline` imports, as the CLI runs the command --install sets (its
    JSON on stdin), beyond those a bare interpreter imports. Both without site (-S): a
    machine's site-packages may import re, enum, pathlib and more at every start (this
    one's do), which would hide them here."""
    from tailer.statusline.settings import command_words

    env = tailer_env(XDG_CACHE_HOME=str(tmp_path / "cache"))
    names = []
    for command in (["-S", "-c", "pass"], command_words([])[1:]):
        done = subprocess.run([sys.executable, "-X", "importtime", *command], cwd=tmp_path, env=env,
                              input=stdin, capture_output=True, timeout=120, start_new_session=True)
        assert done.returncode == 0, done
        names.append(set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$",
                                    done.stderr.decode(), re.M)))
    assert done.stdout  # the line was printed
    return names[1] - names[0]


def test_the_footer_imports_no_parser_and_an_unchanged_log_not_the_reading_stages(tmp_path):
    """The CLI runs `statusline` on every refresh: argparse and pathlib are not loaded for
    it, nor the report, the daemon or the network, nor typing, hashlib's OpenSSL, json or
    re; and when the log is as it was at the last refresh, not the stages that read logs
    either (tailer/statusline/saved.py), nor `-m`'s runpy."""
    import json
    import os
    import time

    from sessiongen import every_pattern

    log = every_pattern("imports-footer").write(tmp_path / "state")
    stdin = json.dumps({"transcript_path": str(log.parent)}).encode()
    reading = footer_imports(tmp_path, stdin)
    assert "tailer.turns.session_log" in reading  # the check can fail
    # Reading on (a turn in flight) costs start-up by what it imports: not typing (its
    # NamedTuple), nor OpenSSL for the position's digest (copilot/lines.py), nor json (its
    # lines and the saved state read and written through tailer/fast_json.py), nor re and
    # its enum (codes.py's checks, event_types.py's patterns compiled on first use), nor
    # datetime or functools (event_values.py's timestamps by arithmetic, its own cache), nor
    # collections (records.TupleRecord for the namedtuples, a dict for the finished ids).
    assert of(reading, ("typing", "hashlib", "_hashlib", "json", "re", "enum", "datetime",
                        "functools", "collections")) == set()
    at = time.time_ns() - 60 * 10**9
    os.utime(log, ns=(at, at))
    footer_imports(tmp_path, stdin)  # reads the log's new identity: from now on, unchanged
    unchanged = footer_imports(tmp_path, stdin)
    assert of(unchanged, ("tailer.copilot", "tailer.turns", "tailer.records", "re", "enum", "json",
                          "runpy", "typing")) == set()
    for names in (reading, unchanged):
        assert of(names, (*DAEMON, *REPORT, *NETWORK, "argparse", "pathlib", "subprocess",
                          "tailer.commands.cli", "dataclasses", "logging", "unicodedata")) == set()


# The parser a command builds has only its own options; it must read every command line as
# the whole parser (the one completion is made from) does.
SAMPLES = [
    ["run", "--once", "--from-start", "--state-dir", "~/s", "--idle-timeout", "0"],
    ["--once", "--metrics-address", "none"],
    ["demo", "--replay-interval", "5", "--checkpoint", "/tmp/c.json"],
    ["scrub", "a", "b", "--seed", "x"],
    ["doctor", "--cli"],
    ["report", "--format", "csv", "--since", "7d", "--by", "week", "--order", "desc"],
    ["report", "--demo", "--watch"],
    ["completion", "zsh"],
    ["statusline", "--format", "{legs}", "--then", "echo x", "--install"],
]
ENVIRONS = [{}, {"COPILOT_HOME": "/h", "HYDRAFUSION_IDLE_TIMEOUT": "60",
                 "HYDRAFUSION_ONCE": "1", "XDG_STATE_HOME": "/state"}]


@pytest.mark.parametrize("environ", ENVIRONS)
@pytest.mark.parametrize("argv", SAMPLES)
def test_a_commands_own_parser_reads_as_the_whole_one(argv, environ):
    whole = build_parser(environ)
    full_argv = argv if argv[0] in COMMANDS else ["run", *argv]
    assert parse_args(argv, environ) == whole.parse_args(full_argv)


@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=30))
def test_the_median_of_the_figures_is_the_statistics_modules(values):
    rows = [SimpleNamespace(pattern="cascade", credits=value, unknown_credit_calls=0) for value in values]
    (pattern,) = figures.by_pattern(rows)
    assert pattern.median_credits == statistics.median(values)
