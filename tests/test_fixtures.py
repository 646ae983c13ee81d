"""The demo fixtures: reproducible, scrubbed, and covering every kind of turn."""

import json
import re
import subprocess
import sys
from collections import Counter
from datetime import datetime, timedelta

import jsonschema

import ccusage
from fixture_truth import (CASES, FIXTURES, REPO, call_tokens, case_of, fixture_turns,
                           ordinary_turns, read_lines)
from sessiongen import CANARY
from tailer.commands import demo


def files_under(folder):
    return {path.relative_to(folder): path.read_bytes() for path in folder.rglob("*") if path.is_file()}


def test_fixtures_are_exactly_what_make_fixtures_produces(tmp_path):
    result = subprocess.run([sys.executable, str(REPO / "tests" / "make_fixtures.py"), str(tmp_path / "out")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert files_under(tmp_path / "out") == files_under(FIXTURES)


def test_the_demo_sessions_live_in_one_place_the_top_level_fixtures_folder():
    """As the project was founded: the demo replays sessions checked into fixtures/ (which
    pyproject.toml packages as tailer/fixtures: tests/test_wheel.py)."""
    assert FIXTURES == REPO / "fixtures" == demo.FIXTURES
    assert not list((REPO / "tailer").rglob("events.jsonl"))


def test_fixtures_hold_no_canary_and_are_small():
    contents = files_under(FIXTURES)
    assert all(CANARY.encode() not in content for content in contents.values())
    assert sum(map(len, contents.values())) < 400_000


def test_fixtures_cover_every_case_over_two_days():
    turns = fixture_turns()
    assert len(turns) >= 20
    assert len({turn.session_id for turn in turns}) >= 4
    cases = Counter(case_of(turn) for turn in turns)
    assert cases.keys() == set(CASES), cases
    times = [datetime.fromisoformat(line["timestamp"].replace("Z", "+00:00"))
             for folder in FIXTURES.iterdir() for line in read_lines(folder / "events.jsonl")]
    assert timedelta(days=1) < max(times) - min(times) <= timedelta(days=2)


# The real CLI's schema of the events it writes (tests/realcli/record.py keeps it).
CLI_SCHEMA = REPO / "tests" / "data" / "realcli" / "1.0.102" / "session-events.schema.json"
CLI_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def test_fixtures_are_shaped_as_cli_1_0_102_writes_them():
    """Every timestamp with three fraction digits; a usage record per model call; every
    session ended by a shutdown with the keys 1.0.102 writes (its accounting snapshot and
    start time among them); the shutdowns and usage records valid by the CLI's own schema."""
    definitions = json.loads(CLI_SCHEMA.read_text())["definitions"]
    valid = {event_type: jsonschema.Draft7Validator({"$ref": f"#/definitions/{name}",
                                                     "definitions": definitions})
             for event_type, name in (("session.shutdown", "ShutdownEvent"),
                                      ("session.usage_record", "UsageAccountingRecordEvent"))}
    for folder in FIXTURES.iterdir():
        lines = read_lines(folder / "events.jsonl")
        times = [line["timestamp"] for line in lines] + [
            value for line in lines for name, value in line["data"].items() if name.endswith("Time")
            and isinstance(value, str)]
        assert all(CLI_TIMESTAMP.fullmatch(time) for time in times), folder.name
        for line in lines:
            if line["type"] in valid:
                valid[line["type"]].validate(line)
        assert lines[-1]["type"] == "session.shutdown", folder.name
        shutdown = lines[-1]["data"]
        assert {"accountingSnapshot", "sessionStartTime", "providerModelMetrics",
                "usageAccountingWatermarks", "agentMetrics", "eventsFileSizeBytes"} <= shutdown.keys()
        assert shutdown["usageAccountingWatermarks"] == {folder.name: sum(
            line["type"] == "session.usage_record" for line in lines)}
        legs = [line["data"]["usage"] for line in lines if line["type"].startswith("assistant.fusion_phase")]
        ordinary = [turn for turn in ordinary_turns() if turn.session_id == folder.name]
        assert shutdown["usageAccountingWatermarks"][folder.name] == (
            sum(leg["requestCount"] for leg in legs) + sum(turn.calls for turn in ordinary))


def test_fixtures_hold_ordinary_turns_with_tools_beside_the_fusion_ones():
    ordinary = ordinary_turns()
    assert len(ordinary) == 3 and all(turn.calls for turn in ordinary)
    names = {name for turn in ordinary for name in turn.tool_names}
    assert {"bash", "github-mcp-server-get_pull_request", "view"} <= names
    replayed = [line for folder in FIXTURES.iterdir() for line in read_lines(folder / "events.jsonl")
                if line["type"] == "tool.execution_start" and line["data"].get("fusion")]
    assert replayed and all(set(line["data"]) <= {"toolCallId", "toolName", "mcpServerName", "mcpToolName",
                                                   "model", "fusion"} for line in replayed)


def test_ccusage_reads_every_demo_session_with_the_tokens_of_its_calls(tmp_path):
    """The fixtures are logs as CLI 1.0.102 writes them, so the tool a user may compare the
    report with reads all of them: every session, per model the tokens of its calls."""
    found = ccusage.copilot_sessions(FIXTURES, tmp_path)
    truth = call_tokens()
    assert {session["sessionId"] for session in found["sessions"]} == set(truth)
    for session in found["sessions"]:
        models = {model["modelName"]: model for model in session["modelBreakdowns"]}
        assert models.keys() == truth[session["sessionId"]].keys(), session["sessionId"]
        for name, model in models.items():
            calls = truth[session["sessionId"]][name]
            assert (model["inputTokens"] + model["cacheReadTokens"] + model["cacheCreationTokens"],
                    model["outputTokens"], model["cacheReadTokens"], model["cacheCreationTokens"]) == (
                calls["inputTokens"], calls["outputTokens"], calls["cacheReadTokens"],
                calls["cacheWriteTokens"]), (session["sessionId"], name)
    assert found["totals"]["outputTokens"] == sum(
        calls["outputTokens"] for models in truth.values() for calls in models.values())
