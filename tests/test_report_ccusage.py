"""`report --by` against ccusage 20.0.24, the tool a Copilot CLI user compares it with, on the
same sessions: the real CLI's (tests/data/realcli) and the demo's (fixtures/).

Per day and per session, the calls and every kind of token of every prompt, HydraFusion's
and ordinary, equal ccusage's, and so do each model's tokens (`--breakdown`). tests/ccusage.py
says how ccusage counts: from each session's `session.shutdown` `modelMetrics`, input
uncached. Where the two legitimately differ (docs/REPORT.md, "ccusage"), these sessions do
not: each has a shutdown, and its prompts and shutdowns fall on one day (checked first).
"""

import csv
import io
import json
from datetime import datetime, timezone

import pytest

import ccusage
from realcli import record
from report_helpers import report_json, run_report
from tailerproc import ROOT

TOKENS = {"input_tokens": "inputTokens", "output_tokens": "outputTokens",
          "cache_read_tokens": "cacheReadTokens", "cache_write_tokens": "cacheCreationTokens",
          "total_tokens": "totalTokens"}
STATES = {
    "realcli": lambda: record.recorded((ROOT / "tests/realcli/VERSION").read_text().strip())[0],
    "demo": lambda: ROOT / "fixtures",
}


def _utc_day(timestamp: str) -> str:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).astimezone(timezone.utc).date().isoformat()


def _days_of_each_session(state, document) -> dict[str, set[str]]:
    """Each session's UTC days: of its prompts' starts and of its shutdowns (what ccusage
    dates it by)."""
    days: dict[str, set[str]] = {}
    for group in document["sessions"]:
        days[group["key"]] = {group["first_turn"][:10], group["last_turn"][:10]}
    for log in state.glob("*/events.jsonl"):
        for line in log.read_text().splitlines():
            event = json.loads(line)
            if event.get("type") == "session.shutdown":
                days.setdefault(log.parent.name, set()).add(_utc_day(event["timestamp"]))
    return days


def _use(figures: dict) -> tuple:
    """Calls and tokens of a group's all_usage, as ccusage's fields name them."""
    return (figures["calls"], *(figures[name] for name in TOKENS))


def _theirs(item: dict) -> tuple:
    return (item["messageCount"], *(item[name] for name in TOKENS.values()))


def _their_models(item: dict) -> dict[str, tuple]:
    return {model["modelName"]: tuple(model[name] for name in list(TOKENS.values())[:4])
            for model in item["modelBreakdowns"]}


@pytest.mark.parametrize("where", sorted(STATES))
def test_days_sessions_and_models_have_ccusages_tokens(where, tmp_path):
    state = STATES[where]()
    sessions = report_json("--state-dir", str(state), "--timezone", "UTC", "--by", "session")
    assert all(len(days) == 1 for days in _days_of_each_session(state, sessions).values()), (
        "a session across days: ccusage dates it by its shutdowns, the report by its prompts")
    theirs = ccusage.copilot("session", state, tmp_path / "session")
    ours = {group["key"]: group for group in sessions["sessions"]}
    assert ours.keys() == {item["sessionId"] for item in theirs["sessions"]}
    for item in theirs["sessions"]:
        group = ours[item["sessionId"]]
        assert _use(group["all_usage"]) == _theirs(item), item["sessionId"]
        mine = {model["name"]: tuple(model[name] for name in list(TOKENS)[:4])
                for model in group["models"] if model["calls"]}
        assert mine == _their_models(item), item["sessionId"]
        assert sorted(item["modelsUsed"]) == sorted(mine)
    assert _use(sessions["totals"]["all_usage"])[1:] == tuple(theirs["totals"][name]
                                                              for name in TOKENS.values())

    days = report_json("--state-dir", str(state), "--timezone", "UTC", "--by", "day")
    theirs = ccusage.copilot("daily", state, tmp_path / "daily", "--timezone", "UTC")
    assert [group["key"] for group in days["daily"]] == [item["date"] for item in theirs["daily"]]
    for group, item in zip(days["daily"], theirs["daily"]):
        assert _use(group["all_usage"]) == _theirs(item), item["date"]
    # Per model, as `--breakdown` shows each day's models.
    done = run_report("--state-dir", str(state), "--timezone", "UTC", "--by", "day", "--breakdown",
                      "--format", "csv")
    assert done.returncode == 0, done.stderr
    rows = [row for row in csv.DictReader(io.StringIO(done.stdout)) if row["model"]]
    for item in theirs["daily"]:
        mine = {row["model"]: tuple(int(row[name]) for name in list(TOKENS)[:4])
                for row in rows if row["key"] == item["date"] and int(row["calls"])}
        assert mine == _their_models(item), item["date"]
    assert days["totals"] == sessions["totals"]


def test_performance_md_says_what_ccusages_copilot_source_reads():
    """docs/PERFORMANCE.md compares the report's speed with ccusage's: it must say what
    ccusage reads, the session logs' shutdowns, which the test above shows (its copy of the
    state folder has no OpenTelemetry export, and ccusage counts every session of it)."""
    text = (ROOT / "docs" / "PERFORMANCE.md").read_text()
    [row] = [line for line in text.splitlines() if line.startswith("| ccusage") and "Copilot" in line]
    assert "`session.shutdown`" in row and "`modelMetrics`" in row, row
    assert "not the session logs" not in row and "files only" not in row.split("|")[1], row
