"""`doctor`: the report a user reads after a CLI upgrade, its exit codes, and its privacy."""

import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from datetime import datetime, timezone

import pytest

from sessiongen import CANARY, SessionWriter
from tailer.commands import doctor
from tailer.copilot import lines
from tailer.turns import session_log
from tailer.commands.cli import main
from tailer.copilot.event_types import cli_version_of, event_type_of
from tailerproc import ROOT, tailer_env
from sessiongen import every_pattern

STAMP = "2026-11-04T12:00:00Z"
# One of each kind of drift, text fields holding the canary.
UNKNOWN_TYPE = {"type": "session.fusion_explained", "timestamp": STAMP,
                "data": {"fusionId": "fusion-drift", "explanation": CANARY}}
UNKNOWN_FIELD = {"type": "assistant.fusion_phase_completed", "timestamp": STAMP, "data": {
    "fusionId": "fusion-drift", "phaseId": "fusion-drift:phase:0", "phaseKind": "primary",
    "model": "gpt-5.6-sol", "status": "succeeded", "durationMs": 900, "usage": {},
    "rationale": CANARY}}
MISSING_FIELDS = {"type": "session.fusion_completed", "timestamp": STAMP, "data": {
    "fusionId": "fusion-drift", "pattern": "single", "outcome": CANARY}}
CUT_OFF = '{"type":"assistant.fusion_phase_completed","data":{"content":"' + CANARY
NUL_PADDING = "\0\0\0\0"


def drifted_lines():
    return [json.dumps(UNKNOWN_TYPE), json.dumps(UNKNOWN_FIELD), json.dumps(MISSING_FIELDS),
            CUT_OFF, NUL_PADDING]


def append(path, texts):
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("".join(text + "\n" for text in texts))


def table(report, heading):
    """One section of the report as {its names joined by a space: the count}; {} for `none`."""
    report_lines = report.splitlines()
    start = next(i for i, line in enumerate(report_lines)
                 if line == heading or line.startswith(heading + " ("))
    rows = {}
    for line in report_lines[start + 1:]:
        if not line.startswith("  "):
            break
        cells = re.split(r"\s{2,}", line.strip())
        if cells != ["none"]:
            rows[" ".join(cells[:-1])] = int(cells[-1]) if cells[-1].isdigit() else cells[-1]
    return rows


def doctor_run(capsys, state, environ=None):
    code = main(["doctor", "--state-dir", str(state)], environ or {})
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def logs(tmp_path):
    """A state dir: two sessions of every pattern on CLI 1.0.102, one older single-turn one."""
    state = tmp_path / "state"
    state.mkdir()
    writers = [every_pattern("session-a"), every_pattern("session-b")]
    older = SessionWriter("session-old", datetime(2026, 10, 1, tzinfo=timezone.utc),
                          copilot_version="1.0.95")
    older.single("gpt-5.6-sol")
    writers.append(older)
    for writer in writers:
        writer.write(state)
    return state, writers


def test_clean_logs_are_reported_in_full_and_exit_0(capsys, logs):
    state, writers = logs
    code, out, err = doctor_run(capsys, state)
    assert (code, err) == (0, "")
    every_line = [line for w in writers for line in w.lines()]
    assert table(out, "Sessions") == {
        "sessions found": 3, "lines read": len(every_line), "unreadable logs": 0,
        "damaged logs (no line an event)": 0}
    assert table(out, "Copilot CLI versions") == {"1.0.102": 2, "1.0.95": 1}
    turns = [t for w in writers for t in w.expected]
    assert table(out, "Fusion turns") == {
        "turns (distinct fusion ids)": sum(t.outcome != "route_failed" for t in turns),
        "route failures (distinct attempts)": sum(t.outcome == "route_failed" for t in turns)}
    assert table(out, "Event types") == Counter(json.loads(line)["type"] for line in every_line)
    for heading in ("Fusion event types the tailer does not know", "Unknown fields on fusion events",
                    "Required fields missing", "Malformed lines"):
        assert table(out, heading) == {}, heading
    assert out.splitlines()[-1].startswith("No drift")


def test_drift_is_named_and_counted_and_exits_1(capsys, logs):
    state, writers = logs
    before = table(doctor_run(capsys, state)[1], "Event types")
    append(state / "session-a" / "events.jsonl", drifted_lines())
    append(state / "session-b" / "events.jsonl", [json.dumps(UNKNOWN_TYPE)])

    code, out, err = doctor_run(capsys, state)
    assert (code, err) == (1, "")
    assert table(out, "Fusion event types the tailer does not know") == {
        "session.fusion_explained": 2}
    assert table(out, "Unknown fields on fusion events") == {
        "assistant.fusion_phase_completed rationale": 1}
    assert table(out, "Required fields missing") == {
        "session.fusion_completed durationMs": 1, "session.fusion_completed totalNanoAiu": 1}
    assert table(out, "Malformed lines") == {"invalid_json": 1}
    # A cut-off line still shows under the type it starts with; NUL padding has none.
    assert table(out, "Event types") == Counter(before) + Counter({
        "session.fusion_explained": 2, "assistant.fusion_phase_completed": 2,
        "session.fusion_completed": 1, "(no type)": 1})
    turns = table(out, "Fusion turns")["turns (distinct fusion ids)"]
    assert turns == sum(t.outcome != "route_failed" for w in writers for t in w.expected) + 1
    assert out.splitlines()[-1].startswith("Drift found")


def test_oversized_lines_are_judged_as_the_daemon_judges_them(capsys, monkeypatch, tmp_path):
    """Only a fusion line too long to read is damage; any oversized line keeps its type."""
    monkeypatch.setattr(lines, "MAX_LINE_BYTES", 10_000)
    state = tmp_path / "state"
    writer = SessionWriter("session-big", datetime(2026, 11, 4, tzinfo=timezone.utc))
    path = writer.write(state)
    big = "x" * 20_000
    append(path, [json.dumps({"type": "tool.execution_complete", "data": {"result": big}})])
    code, out, _ = doctor_run(capsys, state)
    assert code == 0
    assert table(out, "Event types")["tool.execution_complete"] == 1

    append(path, [json.dumps({"type": "assistant.fusion_phase_completed", "timestamp": STAMP,
                              "data": {"fusionId": "fusion-big", "content": big}})])
    code, out, _ = doctor_run(capsys, state)
    assert code == 1
    assert table(out, "Malformed lines") == {"oversized": 1}
    assert table(out, "Event types")["assistant.fusion_phase_completed"] == 1


def test_an_unreadable_log_is_listed_and_the_others_are_read(capsys, monkeypatch, logs):
    """Root, which runs these tests here, reads any file whatever its mode: the error is
    simulated (tests/test_reading_parity.py has the real one, as another user)."""
    class Reader(session_log.LineReader):
        def read(self):
            if self.path.parent.name == "session-b":
                raise PermissionError(13, "Permission denied")
            return super().read()

    monkeypatch.setattr(session_log, "LineReader", Reader)
    code, out, _ = doctor_run(capsys, logs[0])
    assert code == 0
    assert table(out, "Sessions")["unreadable logs"] == 1
    assert "\nUnreadable logs\n  session session-b: cannot read its log: Permission denied\n" in out
    assert table(out, "Copilot CLI versions") == {"1.0.102": 1, "1.0.95": 1, "(none)": 1}


def test_names_that_could_garble_a_terminal_are_escaped(capsys, tmp_path):
    state = tmp_path / "state"
    path = SessionWriter("session-odd", datetime(2026, 11, 4, tzinfo=timezone.utc)).write(state)
    data = dict(UNKNOWN_FIELD["data"], **{"\x1b[2Jwiped": 1, "": 2, "caf\u00e9": 3})
    append(path, [json.dumps(dict(UNKNOWN_FIELD, data=data))])
    code, out, _ = doctor_run(capsys, state)
    assert code == 1
    assert "\x1b" not in out and out.isascii()
    # A name that is no field name is never shown: it is counted as `other`.
    assert set(table(out, "Unknown fields on fusion events")) == {
        "assistant.fusion_phase_completed " + name for name in ("rationale", "other")}


def test_a_flood_of_distinct_names_is_counted_together(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(doctor, "MAX_NAMES", 3)
    state = tmp_path / "state"
    path = SessionWriter("session-flood", datetime(2026, 11, 4, tzinfo=timezone.utc)).write(state)
    append(path, [json.dumps({"type": f"made.up.{i}"}) for i in range(5)])
    _, out, _ = doctor_run(capsys, state)
    assert table(out, "Event types") == {
        "session.start": 1, "made.up.0": 1, "made.up.1": 1, "(others)": 3}


def test_missing_state_dir_is_one_clear_line_and_exit_2(capsys, tmp_path):
    code, out, err = doctor_run(capsys, tmp_path / "nowhere")
    assert (code, out) == (2, "")
    [line] = err.splitlines()
    assert "nowhere" in line and "does not exist" in line


def test_a_state_dir_that_is_a_file_is_named_so(capsys, tmp_path):
    """A session's log given for the folder: "does not exist", of a file that does."""
    (tmp_path / "events.jsonl").write_text("")
    code, out, err = doctor_run(capsys, tmp_path / "events.jsonl")
    assert (code, out) == (2, "")
    [line] = err.splitlines()
    assert "events.jsonl is not a folder" in line


def test_a_reader_gone_before_the_report_is_no_traceback(logs):
    """`doctor | less` quit before doctor was done (it reads every log first): a
    BrokenPipeError traceback. The exit code is what the logs say, as when read."""
    import os

    state, _ = logs
    command = [sys.executable, "-m", "tailer", "doctor", "--state-dir", str(state)]
    read = subprocess.run(command, cwd=ROOT, env=tailer_env(), capture_output=True, timeout=60)
    reader, writer = os.pipe()
    os.close(reader)
    try:
        gone = subprocess.run(command, cwd=ROOT, env=tailer_env(), stdout=writer,
                              stderr=subprocess.PIPE, timeout=60)
    finally:
        os.close(writer)
    assert (gone.returncode, gone.stderr) == (read.returncode, b"")


def test_as_users_run_it_it_prints_no_value_from_the_logs(logs):
    """A subprocess reading the state dir from the environment, as `run` does.

    Every text field of the logs, the paths in session.start included, holds the canary,
    and so do the drifted lines; the report must name their types and fields only.
    """
    state, _ = logs
    path = state / "session-a" / "events.jsonl"
    append(path, drifted_lines())
    assert CANARY.encode() in path.read_bytes()
    result = subprocess.run(
        [sys.executable, "-m", "tailer", "doctor"], cwd=ROOT, timeout=60,
        env=tailer_env(COPILOT_STATE_DIR=str(state)), capture_output=True, text=True,
    )
    assert result.returncode == 1, result.stderr
    assert f"Copilot session logs in {state}" in result.stdout
    assert "rationale" in result.stdout  # the drift was read, so the test proves something
    output = result.stdout + result.stderr
    assert "CANARY" not in output.upper()
    assert "/home/dev" not in output  # session.start's cwd and gitRoot


@pytest.mark.parametrize("line, event_type", [
    (b'{"type":"session.start","data":{}}', "session.start"),
    (b'\0\0 {"type" : "abort","data":{}}', "abort"),
    (b'{"data":{},"type":"later.key"}', "later.key"),
    (b'{"type":"assistant.message","data":{"content":"cut', "assistant.message"),
    (b'{"type":"esc\\u0061ped"}', "escaped"),
    (b'{"type":7}', None),
    (b'["session.start"]', None),
    (b"not json", None),
    (b"", None),
])
def test_event_type_of_any_line(line, event_type):
    assert event_type_of(line) == event_type


@pytest.mark.parametrize("data, version", [
    ({"copilotVersion": "1.0.102"}, "1.0.102"),
    ({"copilotVersion": "1.0.84-2"}, "1.0.84-2"),
    ({"copilotVersion": "/home/dev/src"}, None),
    ({"copilotVersion": "fix the parser"}, None),
    ({"copilotVersion": 1}, None),
    ({}, None),
])
def test_cli_version_of_session_start(data, version):
    assert cli_version_of(json.dumps({"type": "session.start", "data": data}).encode()) == version


def test_cli_version_of_other_events_is_none():
    line = {"type": "session.resume", "data": {"copilotVersion": "1.0.102"}}
    assert cli_version_of(json.dumps(line).encode()) is None


def test_sessions_whose_sums_differ_from_the_clis_totals_are_listed_and_exit_1(capsys, tmp_path):
    from sessiongen import whole_session
    state = tmp_path / "state"
    whole_session("session-agrees").write(state)
    code, out, _ = doctor_run(capsys, state)
    assert code == 0
    assert table(out, "The CLI's own totals") == {
        "totals checked (shutdowns and usage checkpoints)": 3, "totals our sums disagree with": 0}
    assert table(out, "Sessions whose sums differ from the CLI's totals") == {}

    writer = whole_session("session-differs", totals_off_by=2_000_000_000)
    writer.write(state)
    code, out, _ = doctor_run(capsys, state)
    assert code == 1
    shutdown = json.loads(writer.lines()[-1])["data"]
    model = min(shutdown["modelMetrics"])
    theirs = shutdown["modelMetrics"][model]["totalNanoAiu"] / 1e9
    assert table(out, "Sessions whose sums differ from the CLI's totals") == {
        f"session-differs shutdown {model} {theirs - 2:.9g}": f"{theirs:.9g}"}
    assert table(out, "The CLI's own totals")["totals our sums disagree with"] == 1


def test_a_copy_of_a_session_counts_no_turn_twice(capsys, logs):
    """Turns and route failures are counted by their ids, as every command counts them: a
    copy of a session's folder kept in the state folder adds none."""
    state, _ = logs
    before = table(doctor_run(capsys, state)[1], "Fusion turns")
    shutil.copytree(state / "session-a", state / "session-a.bak")
    assert table(doctor_run(capsys, state)[1], "Fusion turns") == before
    assert before["route failures (distinct attempts)"] > 0
