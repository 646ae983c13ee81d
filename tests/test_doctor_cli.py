"""`doctor --cli`: the Copilot CLI's own event schema as the drift alarm.

The schema kept in tests/data/realcli/<version>/ is the fusion, usage and shutdown part of
the pinned CLI version's `session-events.schema.json` (tests/realcli/record.py keeps it);
tests/test_realcli.py runs the same check on the whole file of the installed CLI.
"""

import copy
import json

import pytest

from realcli import driver, record
from tailer.copilot import schema_drift
from tailer.commands.cli import main

VERSION = driver.pinned_version()
PINNED = record.data_dir(VERSION) / record.SCHEMA
CANARY = "CANARY-schema-description-text"


def doctor_cli(capsys, *args, environ=None):
    code = main(["doctor", "--cli", *args], environ or {})
    out, err = capsys.readouterr()
    return code, out, err


def rows(report: str, heading: str) -> list[list[str]]:
    lines = report.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    found = []
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        if line.strip() != "none":
            found.append(line.split())
    return found


def test_the_pinned_versions_schema_holds_no_surprise(capsys):
    code, out, _ = doctor_cli(capsys, str(PINNED))
    assert code == 0, out
    assert out.rstrip().endswith("declares.")
    assert "none" in out and "Drift found" not in out


def edited_schema() -> dict:
    """The pinned schema with one change of each kind the alarm must name."""
    schema = json.loads(PINNED.read_text())
    d = schema["definitions"]
    d["FusionResolvedData"]["properties"]["explanation"] = {
        "type": "string", "description": CANARY}
    d["FusionResolvedData"]["properties"]["routingLatencyMs"] = {"type": "string"}
    d["FusionPhaseUsage"]["properties"]["reasoningTokens"] = {"type": "integer"}
    del d["FusionCompletedData"]["properties"]["durationMs"]
    del d["FusionCommitStartedData"]["properties"]["sourcePhaseId"]
    del d["AssistantUsageCopilotUsage"]["properties"]["totalNanoAiu"]  # a call's credits
    d["FusionHandoffData"]["properties"]["note"] = {"anyOf": [
        {"type": "null"}, {"type": "object", "properties": {"text": {"type": "string"}}}]}
    explained = copy.deepcopy(d["FusionHandoffEvent"])
    explained["properties"]["type"] = {"type": "string", "const": "session.fusion_explained"}
    explained["properties"]["data"] = {"type": "object", "properties": {
        "fusionId": {"type": "string"}, "why": {"x-opaque-json": True},
        "kind": {"type": "string", "enum": ["a", "b"]}}}
    d["FusionExplainedEvent"] = explained
    d["SessionEvent"]["anyOf"].append({"$ref": "#/definitions/FusionExplainedEvent"})
    gone = d["SessionEvent"]["anyOf"]
    d["SessionEvent"]["anyOf"] = [c for c in gone if "FusionRouteFailedEvent" not in c["$ref"]]
    del d["FusionRouteFailedEvent"]
    return schema


def test_each_added_removed_and_retyped_field_is_named(capsys, tmp_path):
    path = tmp_path / "session-events.schema.json"
    path.write_text(json.dumps(edited_schema()))
    code, out, _ = doctor_cli(capsys, str(path))
    assert code == 1
    assert rows(out, "Fusion and usage event types") == [["session.fusion_explained"]]
    assert rows(out, "Fields the tailer does not know") == [
        ["assistant.fusion_phase_completed", "usage.reasoningTokens", "integer"],
        ["assistant.fusion_phase_failed", "usage.reasoningTokens", "integer"],
        ["session.fusion_handoff", "note", "null|object"],
        ["session.fusion_resolved", "explanation", "string"],
    ]
    assert rows(out, "Event types the tailer reads that are gone") == [
        ["session.fusion_route_failed"]]
    assert rows(out, "Fields the tailer relies on that are gone") == [
        ["session.fusion_commit_started", "sourcePhaseId"],
        ["session.fusion_completed", "durationMs"],
        ["session.usage_record", "usage.copilotUsage.totalNanoAiu"],
    ]
    assert rows(out, "Fields the tailer relies on whose type changed") == [
        ["session.fusion_resolved", "routingLatencyMs", "string", "number"]]
    assert rows(out, "New fields that may carry free text") == [
        ["session.fusion_explained", "fusionId"],
        ["session.fusion_explained", "why"],
        ["session.fusion_handoff", "note.text"],
        ["session.fusion_resolved", "explanation"],
    ]
    assert CANARY not in out
    assert "Drift found" in out


def test_the_newest_installed_version_is_found_in_the_clis_cache(capsys, tmp_path):
    for version in ("1.0.9", "1.0.84-4", "1.0.102", "1.0.84"):
        folder = tmp_path / "copilot" / "pkg" / "linux-x64" / version / "schemas"
        folder.mkdir(parents=True)
        (folder / PINNED.name).write_text(PINNED.read_text())
    found = schema_drift.find_schemas({"XDG_CACHE_HOME": str(tmp_path)})
    assert [schema_drift.version_of(p) for p in found] == ["1.0.102", "1.0.84-4", "1.0.84", "1.0.9"]
    code, out, _ = doctor_cli(capsys, environ={"XDG_CACHE_HOME": str(tmp_path), "HOME": "/nowhere"})
    assert code == 0
    assert out.startswith("Copilot CLI 1.0.102 event schema: ")
    code, out, _ = doctor_cli(capsys, str(tmp_path / "copilot"))
    assert out.startswith("Copilot CLI 1.0.102 event schema: ")


@pytest.mark.parametrize("content", ["{not json", "[]", '{"definitions": {}}', "{}"])
def test_a_file_that_is_not_the_schema_is_a_clear_usage_error(capsys, tmp_path, content):
    path = tmp_path / "schema.json"
    path.write_text(content)
    code, out, err = doctor_cli(capsys, str(path))
    assert code == 2 and out == ""
    assert "cannot read the CLI's event schema" in err and "Traceback" not in err


@pytest.mark.parametrize("what", ["fifo", "too large"])
def test_a_schema_path_that_is_no_schema_file_is_refused_at_once(tmp_path, what):
    """`doctor --cli` read whatever it was given whole: a FIFO waited for a writer for
    good, and /dev/zero (or /dev/urandom) filled the memory until the process was killed.
    Here a sparse file just past the limit stands for the endless ones."""
    import os
    import subprocess
    import sys

    from tailerproc import ROOT, tailer_env

    path = tmp_path / "schema.json"
    if what == "fifo":
        os.mkfifo(path)
    else:
        with open(path, "wb") as handle:  # sparse: costs no disk
            handle.truncate(schema_drift.MAX_SCHEMA_BYTES + 1)
    done = subprocess.run([sys.executable, "-m", "tailer", "doctor", "--cli", str(path)], cwd=ROOT,
                          env=tailer_env(), capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("hydrafusion-tailer: cannot read the CLI's event schema")
    assert ("not a regular file" if what == "fifo" else "larger than") in done.stderr


def test_no_installed_cli_says_where_it_looked(capsys, tmp_path):
    code, out, err = doctor_cli(capsys, environ={"HOME": str(tmp_path)})
    assert code == 2 and out == ""
    assert "no Copilot CLI package found" in err
