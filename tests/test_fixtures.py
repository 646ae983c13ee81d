"""The demo fixtures: reproducible, scrubbed, and covering every kind of turn."""

import subprocess
import sys
from collections import Counter
from datetime import datetime, timedelta

from fixture_truth import CASES, FIXTURES, REPO, case_of, fixture_turns, ordinary_turns, read_lines
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


def test_fixtures_hold_ordinary_turns_with_tools_beside_the_fusion_ones():
    ordinary = ordinary_turns()
    assert len(ordinary) == 3 and all(turn.calls for turn in ordinary)
    names = {name for turn in ordinary for name in turn.tool_names}
    assert {"bash", "github-mcp-server-get_pull_request", "view"} <= names
    replayed = [line for folder in FIXTURES.iterdir() for line in read_lines(folder / "events.jsonl")
                if line["type"] == "tool.execution_start" and line["data"].get("fusion")]
    assert replayed and all(set(line["data"]) <= {"toolCallId", "toolName", "mcpServerName", "mcpToolName",
                                                   "model", "fusion"} for line in replayed)
