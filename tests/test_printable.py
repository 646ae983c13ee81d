"""Nothing we print can drive a terminal: every value from a log or a server is printable().

The payloads below set a terminal's title, clear its screen, draw a hyperlink, forge a row
or a log line, reverse the text after them, or start a C1 control sequence. They are put
into every field a report, `--watch`, doctor, scrub or the daemon's log prints, both
through the session logs (the way an attacker would) and straight into the printing layer
(the fields parsing may already have turned into `other` stay covered there), and no output
may hold one of their bytes.
"""

import codecs
import csv
import dataclasses
import fcntl
import io
import json
import logging
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
import threading
from collections import Counter
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from sessiongen import START, SessionWriter, whole_session
from tailer import records
from tailer.commands import doctor
from tailer.outputs import logs
from tailer.report import checks as report_checks, figures, rows as report_rows
from tailer.report import live
from tailer.report import table as report_table
from tailer.report import text as report_text
from tailer.daemon.checkpoint import claim
from tailer.copilot.files import session_logs
from tailer.printable import printable
from tailer.report.read import Selection, SessionReader
from report_helpers import turn_json, wanted_turns
from tailerproc import ROOT, ctrl_c_quits, tailer_env
from test_report_live import read_until

HOSTILE = ("\x1b]0;TITLE\x07\x1b[2J\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\"
           "\r\nforged row\u2028\u2029\u202e\u2066\x9b31m\x85\x00\x7f")
# A folder name can hold anything but "/" (and NUL); one made of bytes that are not UTF-8
# reaches Python as lone surrogates, which no encoder can write.
NAME = HOSTILE.replace("/", "|").replace("\x00", "")
UNDECODABLE_NAME = b"session-\x9b\xff\x1b[2J"
# What an output may never hold: C0 but LF, DEL, C1, the line and paragraph separators, the
# bidirectional marks and overrides, lone surrogates.
UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e"
                    "\u2066-\u2069\ud800-\udfff]")
# The escapes our own output writes on purpose: the table's colours, --watch's cursor.
OWN_CODES = re.compile(r"\x1b\[[0-9;]*m|\x1b\[[HKJ]|\x1b\[\?25[lh]")
# The keys of the session logs' fields that name things (and so may be printed), by event.
NAMING_KEYS = {"model", "selectedModel", "primaryModel", "secondaryModel", "judgeModel",
               "repairModel", "followUpModel", "targetModel", "sourceModel", "syntheticModel",
               "newModel", "previousModel", "currentModel", "pattern", "verdict", "kind",
               "phaseKind", "role", "status", "outcome", "reason", "degradedReason",
               "finishReason", "toolName", "name", "mcpToolName", "mcpServerName",
               "copilotVersion", "source", "errorType", "label", "ruleName"}


def assert_inert(text: str, *, own_codes: bool = False) -> None:
    """No byte of a payload in `text`; with own_codes, our own colours and cursor moves
    are allowed (and removed first)."""
    if own_codes:
        text = OWN_CODES.sub("", text)
    found = UNSAFE.search(text)
    assert found is None, f"{found.group()!r} printed at {found.start()}: {text[max(found.start() - 60, 0):found.end() + 20]!r}"
    assert "\nforged" not in text


def decoded(output: bytes) -> str:
    return output.decode("utf-8", "surrogateescape")


def unescaped(text: str) -> str:
    """printable() undone: backslash escapes read back as the characters they name."""
    return codecs.decode(text.encode("latin-1", "backslashreplace"), "unicode_escape")


# -- the rule --------------------------------------------------------------------------------


@given(st.text(st.characters(exclude_categories=())))  # lone surrogates too
def test_printable_leaves_nothing_unsafe_hides_nothing_and_escapes_once(text):
    shown = printable(text)
    assert_inert(shown.replace("\n", "\\x0a"))
    assert "\n" not in shown
    assert printable(shown) == shown  # layers that each escape show the value the same
    if "\\" not in text:
        assert unescaped(shown) == text  # what is printed is what the value holds


def test_printable_keeps_text_with_nothing_to_escape():
    line = "fusion fusion-fa51fa07-905f pattern=cascade phases=3 models=gpt-5.6-sol,claude aiu=1.00 café 模型"
    assert printable(line) == line
    assert printable("\x1b[2J\r\n\u202e\udc9b\\") == "\\x1b[2J\\x0d\\x0a\\u202e\\udc9b\\"


# -- the printing layer, fed directly ---------------------------------------------------------

# Our own values (times, days, offsets): never from a log, and read back as times.
COMPUTED = {"start", "generated_at", "utc_offset", "first_turn", "last_turn", "day", "time_ns"}
# The fields that are dicts keyed by names from the logs (other dicts have our own keys).
NAMED_KEYS = {"outcomes", "credits_by_model", "filters", "ours", "theirs"}


def hostile(value, name: str = "", keep: frozenset = frozenset()):
    """`value` with the payload appended to every string from a log, wherever it sits."""
    if isinstance(value, str):
        return value if name in COMPUTED | keep else value + HOSTILE + "\udc9b"
    if isinstance(value, list):
        return [hostile(item, name, keep) for item in value]
    if isinstance(value, dict):
        return {(hostile(key, "", keep) if name in NAMED_KEYS else key): hostile(item, "", keep)
                for key, item in value.items()}
    if isinstance(value, report_rows.TurnRow):
        # Its model calls and tools are kept as JSON text (rows.TurnJson): made again of
        # the hostile row and hostile calls and tools, as the report makes it.
        row = records.replace(value, **{
            field.name: hostile(getattr(value, field.name), field.name, keep)
            for field in records.fields(value) if field.name != "printed"})
        row.printed = turn_json(row, hostile(value.model_calls, "", keep), hostile(value.tools, "", keep))
        return row
    if records.is_record(value) and not isinstance(value, type):
        return records.replace(value, **{
            field.name: hostile(getattr(value, field.name), field.name, keep)
            for field in records.fields(value)})
    return value


def real_snapshot(tmp_path: Path) -> figures.Snapshot:
    writer = whole_session("printing", totals_off_by=7)
    writer.route_failed("gpt-5.6-sol")
    writer.degraded("mai-code-1.1-flash", "gpt-5.6-sol")
    writer.write(tmp_path / "state")
    reader = SessionReader()
    logs_ = session_logs(tmp_path / "state")
    rows = [report_rows.turn_row(turn, timezone.utc)
            for turn in wanted_turns(logs_, Selection(), reader)]
    return figures.snapshot(rows, now=START, tz=timezone.utc, skipped=reader.skipped(),
                            filters={"model": "gpt"},
                            checks=list(map(report_checks.check_figures, reader.reconciliations)))


class StubLive:
    """What live.frame reads of a LiveTurns."""

    def __init__(self, last):
        self.sessions, self.last, self.state_dir_problem = 3, last, None

    def in_progress(self) -> int:
        return 1


def test_every_printed_field_of_the_report_is_escaped(tmp_path):
    snap = real_snapshot(tmp_path)
    assert snap.reconciliation and any(not check.agrees for check in snap.reconciliation)
    # With the kinds kept, a fusion turn shows its pattern; with them changed, its kind.
    for keep in (frozenset(), frozenset({"kind"})):
        bad = hostile(snap, keep=keep)
        for color in (False, True):
            for height in (None, 30):
                table = report_table.render_table(bad, width=100, color=color, height=height)
                assert_inert(table, own_codes=color)
                assert "\\x0d\\x0aforged row" in table
        for csv_text in (report_text.render_csv(bad), report_text.render_calls_csv(bad)):
            assert_inert(csv_text)
            rows = list(csv.reader(io.StringIO(csv_text)))
            assert len(rows) - 1 == csv_text.count("\n") - 1
        for row in bad.turns:
            now = datetime.fromisoformat(row.start)
            shown = live.frame(StubLive(row), "", now=now, columns=100, rows=30)
            assert_inert(shown, own_codes=True)
            assert "\\x1b]0;TITLE\\x07" in shown


def test_every_printed_field_of_doctor_is_escaped(tmp_path):
    snap_dir = tmp_path / "state"
    whole_session("doctor", totals_off_by=7).write(snap_dir)
    findings = doctor.examine(snap_dir)
    assert findings.disagreements
    word, pair = HOSTILE + "\udc9b", (HOSTILE, HOSTILE + "\udc9b")
    findings = dataclasses.replace(
        findings, unreadable={word: word}, versions=Counter({word: 1}),
        event_types=Counter({word: 2}), unknown_types=Counter({word: 1}),
        unknown_fields=Counter({pair: 1}), missing_fields=Counter({pair: 1}),
        malformed=Counter({word: 1}), disagreements=hostile(findings.disagreements))
    shown = doctor.render(Path(NAME), findings)
    assert_inert(shown)
    assert shown.count("\\x0d\\x0aforged row") >= 8


def test_every_log_record_is_escaped_once_where_it_is_formatted():
    formatter = logs.PrintableFormatter("%(levelname)s %(message)s")
    record = logging.LogRecord("tailer.otlp", logging.WARNING, __file__, 1,
                               "OTLP export rejected (HTTP %d): %s; %d spans dropped",
                               (400, HOSTILE, 3), None)
    line = formatter.format(record)
    assert_inert(line)
    assert line == "WARNING OTLP export rejected (HTTP 400): " + printable(HOSTILE) + "; 3 spans dropped"
    try:
        raise ValueError(HOSTILE)
    except ValueError:
        failed = logging.LogRecord("tailer", logging.ERROR, __file__, 1, "stopped: %s",
                                   (HOSTILE,), sys.exc_info())
    failed.stack_info = "Stack (most recent call last):\n  " + HOSTILE
    first, *traceback = formatter.format(failed).split("\n")
    assert first == "ERROR stopped: " + printable(HOSTILE)
    assert traceback[0] == "  Traceback (most recent call last):"
    for line in traceback:  # its lines: none can pass for a record
        assert_inert(line)
        assert line.startswith("  ")
    # A record with nothing to escape is written as a plain Formatter writes it.
    plain = logging.LogRecord("tailer", logging.INFO, __file__, 1, "fusion %s pattern=%s",
                              ("fusion-fa51fa07-905f", "cascade"), None)
    assert formatter.format(plain) == logging.Formatter("%(levelname)s %(message)s").format(plain)


def test_the_daemon_installs_the_printable_formatter(monkeypatch):
    from tailer.commands import cli
    from tailer.daemon import service

    monkeypatch.setattr(service, "run", lambda config: 0)
    root = logging.getLogger()
    before = list(root.handlers)
    for handler in before:
        root.removeHandler(handler)
    try:
        assert cli.main(["run", "--once", "--metrics-address", "none"], {}) == 0
        assert [type(h.formatter) for h in root.handlers] == [logs.PrintableFormatter]
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in before:
            root.addHandler(handler)


# -- through the session logs, as a user runs the commands ------------------------------------


def poisoned(line: str) -> str:
    """An event with the payload appended to every field that names something."""
    event = json.loads(line)

    def walk(node):
        if isinstance(node, dict):
            return {key: value + HOSTILE if key in NAMING_KEYS and isinstance(value, str)
                    else walk(value) for key, value in node.items()}
        if isinstance(node, list):
            return [walk(item) for item in node]
        return node

    event["data"] = walk(event["data"])
    return json.dumps(event)  # ASCII, the payload as JSON escapes


def hostile_state(tmp_path: Path, *, undecodable: bool = True) -> Path:
    """A state folder (its own name hostile) with a session in a hostile folder (and one in
    a folder whose name is not UTF-8), every naming field of their events carrying the
    payload, and a damaged line each."""
    state = tmp_path / ("state" + NAME)
    writer = whole_session(NAME + "-a")
    writer.route_failed("gpt-5.6-sol")
    writer.degraded("mai-code-1.1-flash", "gpt-5.6-sol")
    lines = [poisoned(line) for line in writer.lines()] + ["{damaged"]
    folders = [os.fsencode(state / writer.session_id)]
    if undecodable:
        folders.append(os.fsencode(state) + b"/" + UNDECODABLE_NAME)
    for folder in folders:
        os.makedirs(folder)
        with open(os.path.join(folder, b"events.jsonl"), "w") as log:
            log.write("".join(line + "\n" for line in lines))
    return state


def tailer(*args: str, env=None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tailer", *args], cwd=ROOT,
                          env=env or tailer_env(), capture_output=True, timeout=timeout)


def test_report_doctor_and_scrub_print_no_payload(tmp_path):
    state = hostile_state(tmp_path)
    runs = [tailer("report", "--state-dir", str(state)),
            tailer("report", "--state-dir", str(state), "--format", "csv"),
            tailer("report", "--state-dir", str(state), "--format", "csv-calls"),
            tailer("report", "--state-dir", str(state), "--by", "session"),  # models under each
            tailer("report", "--state-dir", str(state), "--by", "day", "--breakdown"),
            tailer("report", "--state-dir", str(state), "--model", NAME),
            tailer("report", "--state-dir", str(state / "missing"), "--html", str(state / "x.html")),
            tailer("doctor", "--state-dir", str(state)),
            tailer("doctor", "--state-dir", str(state / NAME))]
    # scrub refuses a folder name that is not UTF-8 (it cannot make a new id from it)
    scrubbed = hostile_state(tmp_path / "scrub", undecodable=False)
    out = tmp_path / ("scrubbed" + NAME)
    runs += [tailer("scrub", str(scrubbed), str(out)), tailer("scrub", str(scrubbed), str(out))]
    runs.append(tailer("run", "--once", "--state-dir", str(state / NAME)))
    held = tmp_path / ("checkpoint" + NAME)
    with claim(held):  # another tailer's
        runs.append(tailer("run", "--once", "--state-dir", str(state), "--checkpoint", str(held)))
    # docs/REPORT.md, "Exit codes": a missing state folder is 2 in every command; a --model
    # that matches no turn is 1, with the models there are named (escaped) instead.
    assert [run.returncode for run in runs] == [0, 0, 0, 0, 0, 1, 2, 1, 2, 0, 2, 2, 2]
    for run in runs:
        assert_inert(decoded(run.stdout))
        assert_inert(decoded(run.stderr))
        assert b"Traceback" not in run.stderr
    # The payloads were printed, escaped: the session folder's name, cut to the table's
    # column, and the paths and names in the CSV cells and the messages.
    assert printable(NAME)[:8].encode() in runs[0].stdout
    shown = b"".join(run.stdout + run.stderr for run in runs)
    assert shown.count(b"\\x0d\\x0aforged row") >= 11


class ErrorBodies(BaseHTTPRequestHandler):
    """A collector that refuses everything with the payload as its error body."""

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = HOSTILE.encode()
        self.send_response(400)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_the_daemons_log_lines_hold_no_payload(tmp_path):
    state = hostile_state(tmp_path)
    server = ThreadingHTTPServer(("127.0.0.1", 0), ErrorBodies)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        done = tailer("run", "--once", "--state-dir", str(state), "--metrics-address", "none",
                      "--otlp-endpoint", f"http://127.0.0.1:{server.server_address[1]}",
                      "--checkpoint", str(tmp_path / ("checkpoint" + NAME + ".json")))
    finally:
        server.shutdown()
        server.server_close()
    text = decoded(done.stderr)
    assert_inert(text)
    assert "Traceback" not in text
    lines = text.splitlines()
    # The collector's error body, and the state folder's name, shown escaped on their lines.
    assert any("HTTP 400" in line and "\\x1b]0;TITLE\\x07" in line for line in lines), text
    assert any(printable(str(state)) in line for line in lines), text


def test_watch_on_a_terminal_shows_no_payload(tmp_path):
    state = hostile_state(tmp_path)
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
    process = subprocess.Popen(
        [sys.executable, "-m", "tailer", "report", "--watch", "--state-dir", str(state)],
        cwd=ROOT, env=tailer_env(), stdin=follower, stdout=follower, stderr=subprocess.PIPE,
        start_new_session=True, preexec_fn=ctrl_c_quits)
    os.close(follower)
    try:
        output = read_until(leader, lambda out: b"\x1b[J" in out.partition(b"last turn ")[2])
        assert b"last turn " in output, output
        process.send_signal(signal.SIGINT)
        output += read_until(leader, lambda out: live.SHOW_CURSOR.encode() in out)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
        os.close(leader)
    text = decoded(output).replace("\r\n", "\n")  # the terminal's own line ends
    assert_inert(text, own_codes=True)
    assert printable(NAME)[:8] in text  # the session folder's name, cut to its column
    assert b"Traceback" not in process.stderr.read()

