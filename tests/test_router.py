"""The router's changes: sessions whose policy version changes midway, and every output
(root spans, the counts by policy version, the report's ROUTER figures and day marks, the
daemon's first-seen lines, across a restart too, and the dashboard's annotation on the real
Prometheus) checked against the truth read from the files with plain `json`, never through
the tailer's parser."""

from __future__ import annotations

import json
import logging
import statistics
import time
from collections import Counter, defaultdict
from contextlib import contextmanager
from dataclasses import dataclass
from unittest import mock
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import yaml
from hypothesis import given, strategies as st

import dashboard as dash
from assembly import assemble
from exposition_helpers import samples
from otlp_sink import plain_attributes
from prom import free_port, promtool, running_prometheus
from report_helpers import report_json, run_report
from sessiongen import START, SessionWriter, retuned
from tailer.outputs.exposition import Registry
from tailer.outputs.metrics import LABEL_VALUE_LIMITS, MAX_POLICY_VERSIONS, Metrics
from tailer.outputs import policy_versions
from tailer.outputs.policy_versions import (HELD_LINE_EVERY_S, MAX_KEPT, MAX_LOGGED, PolicyVersions,
                                            policy_versions_from_state)
from tailer.outputs.spans import turn_spans
from tailer.copilot.event_records import Resolved
from tailer.turns.assembly import Turn
from tailerproc import run_once, running_tailer, tailer_env

FIRST, SECOND, THIRD, FOURTH = "2026-09-01", "2026-11-05", "2026-11-05.1", "2026-11-06"


def write_retuned(state: Path) -> None:
    """Session a, on 2026-11-04, retuned twice midway (FIRST, SECOND, THIRD); session b, the
    next day, carries on under THIRD, then is retuned to FOURTH."""
    retuned("retuned-a").write(state)
    write_second_day(state, more=False)


def write_second_day(state: Path, *, more: bool) -> SessionWriter:
    """Session b; `more`: a last turn under a fifth version, appended to the same log."""
    writer = SessionWriter("retuned-b", START + timedelta(days=1))
    writer.retune(THIRD, plan_version="3")
    writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol")
    writer.single("claude-sonnet-4.6")
    writer.retune(FOURTH, plan_version="3")
    writer.critique("gpt-5.6-sol", ["claude-sonnet-4.6", "gemini-3.1-pro"])
    writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="reject", repair_model="gpt-5.6-sol")
    if more:
        writer.retune("2026-11-07", plan_version="3")
        writer.single("gpt-5.6-sol")
    writer.write(state)
    return writer


@dataclass
class Routed:
    """One routed turn as its log's lines say."""

    fusion_id: str
    version: str
    plan: str
    rule: str
    pattern: str
    start: datetime  # its resolved record's time less its routing latency
    nano_aiu: int = 0
    models: frozenset[str] = frozenset()

    @property
    def credits(self) -> float:
        return self.nano_aiu / 1e9


def truth(state: Path) -> list[Routed]:
    """The routed turns of the logs (route failures and ordinary prompts have no resolved
    record), in the order they started."""
    turns: dict[str, Routed] = {}
    for path in sorted(state.rglob("events.jsonl")):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            data = event["data"]
            if event["type"] == "session.fusion_resolved":
                start = (datetime.fromisoformat(event["timestamp"])
                         - timedelta(milliseconds=data["routingLatencyMs"]))
                turns[data["fusionId"]] = Routed(
                    data["fusionId"], data["policyVersion"], data["planVersion"],
                    data["ruleId"], data["pattern"], start)
            elif event["type"] == "assistant.fusion_phase_completed" and data["fusionId"] in turns:
                turn = turns[data["fusionId"]]
                turn.nano_aiu += data["usage"]["totalNanoAiu"]
                turn.models |= {data["model"]}
    return sorted(turns.values(), key=lambda turn: turn.start)


def by_version(turns: list[Routed]) -> dict[str, list[Routed]]:
    grouped: dict[str, list[Routed]] = {}
    for turn in turns:
        grouped.setdefault(turn.version, []).append(turn)
    return grouped


def test_the_truth_holds_every_version_each_changed_midway(tmp_path):
    write_retuned(tmp_path)
    grouped = by_version(truth(tmp_path))
    assert list(grouped) == [FIRST, SECOND, THIRD, FOURTH]
    # THIRD began in one session and carried on in the next day's.
    assert {turn.start.date() for turn in grouped[THIRD]} == {START.date(), START.date() + timedelta(1)}


def test_root_spans_carry_the_routers_ids(tmp_path):
    writer = retuned("spans")
    routed = {turn.fusion_id: turn for turn in truth(writer.write(tmp_path).parent.parent)}
    seen = 0
    for turn in assemble(writer.lines(), "spans"):
        root = plain_attributes(json.loads(turn_spans(turn)[0].json)["attributes"])
        if turn.key in routed:
            truth_turn = routed[turn.key]
            assert (root["hydrafusion.policy_version"], root["hydrafusion.plan_version"],
                    root["hydrafusion.rule_id"]) == (truth_turn.version, truth_turn.plan,
                                                     truth_turn.rule)
            seen += 1
        else:  # a route failure, an ordinary prompt: no router decided them
            assert "hydrafusion.policy_version" not in root
    assert seen == len(routed) == 7


def test_report_router_figures_and_day_marks_are_the_truth(tmp_path):
    write_retuned(tmp_path)
    turns = truth(tmp_path)
    report = report_json("--state-dir", str(tmp_path), "--timezone", "UTC")
    expected = []
    for version, group in by_version(turns).items():
        credits = defaultdict(list)
        for turn in group:
            credits[turn.pattern].append(turn.credits)
        expected.append({
            "policy_version": version,
            "first_seen": group[0].start, "last_seen": group[-1].start,
            "turns": len(group),
            "patterns": dict(Counter(turn.pattern for turn in group)),
            "compound_rate": sum(len(turn.models) > 1 for turn in group) / len(group),
            "median_credits": {pattern: statistics.median(values)
                               for pattern, values in credits.items()},
        })
    shown = [{**item, "first_seen": datetime.fromisoformat(item["first_seen"]),
              "last_seen": datetime.fromisoformat(item["last_seen"])} for item in report["router"]]
    assert len(shown) == len(expected)
    for item, truth_item in zip(shown, expected):
        assert item["median_credits"] == pytest.approx(truth_item.pop("median_credits"))
        assert {key: value for key, value in item.items() if key != "median_credits"} == truth_item
    # The per-day marks: each version that followed another, on the day it first appeared.
    firsts = {version: group[0].start.date().isoformat()
              for version, group in list(by_version(turns).items())[1:]}
    marks = {day["key"]: day["new_policy_versions"] for day in report["by_day"]}
    assert marks == {"2026-11-04": [SECOND, THIRD], "2026-11-05": [FOURTH]}
    assert {version: day for day, versions in marks.items() for version in versions} == firsts
    versions = {turn["fusion_id"]: turn["policy_version"] for turn in report["turns"]}
    assert {fusion_id: versions[fusion_id] for fusion_id in {t.fusion_id for t in turns}} == {
        turn.fusion_id: turn.version for turn in turns}
    assert {version for fusion_id, version in versions.items()
            if fusion_id not in {t.fusion_id for t in turns}} == {None}


def test_report_table_groups_csv_and_page_show_the_changes(tmp_path):
    write_retuned(tmp_path)
    table = run_report("--state-dir", str(tmp_path), "--timezone", "UTC").stdout
    router = table[table.index("ROUTER"):].split("\n\n")[0].splitlines()
    assert [line.split()[0] for line in router[1:] if not line.startswith(" ")] == [
        FIRST, SECOND, THIRD, FOURTH]
    days = run_report("--state-dir", str(tmp_path), "--timezone", "UTC", "--by", "day").stdout
    lines = days.splitlines()
    day = next(i for i, line in enumerate(lines) if line.startswith("2026-11-04"))
    assert lines[day + 1:day + 3] == [f"  ^ policy {SECOND} first seen", f"  ^ policy {THIRD} first seen"]
    assert lines[day + 3].startswith("2026-11-05") and lines[day + 4] == f"  ^ policy {FOURTH} first seen"
    groups = run_report("--state-dir", str(tmp_path), "--timezone", "UTC", "--by", "day",
                        "--format", "csv").stdout.splitlines()
    assert groups[0].endswith(",new_policy_versions")
    assert [row.rsplit(",", 1)[1] for row in groups[1:]] == [f"{SECOND} {THIRD}", FOURTH]
    page = tmp_path / "report.html"
    assert run_report("--state-dir", str(tmp_path), "--timezone", "UTC", "--html", str(page)).returncode == 0
    html = page.read_text()
    assert f'<g class="policy" data-day="2026-11-04" data-policy="{SECOND} {THIRD}">' in html
    assert f'<g class="policy" data-day="2026-11-05" data-policy="{FOURTH}">' in html
    assert all(f'<tr data-policy="{version}">' in html for version in (FIRST, SECOND, THIRD, FOURTH))


def first_seen_lines(log: str) -> list[str]:
    return [line.split("router policy_version=")[1].split()[0]
            for line in log.splitlines() if "router policy_version=" in line]


def test_counts_by_policy_version_and_first_seen_survive_a_restart(tmp_path):
    state = tmp_path / "state"
    write_retuned(state)
    turns = truth(state)
    textfile = tmp_path / "metrics.prom"
    env = tailer_env()
    args = ("--state-dir", str(state), "--textfile", str(textfile), "--otlp-endpoint", "none",
            "--metrics-address", "none", "--checkpoint", str(tmp_path / "checkpoint.json"))
    done = run_once(*args, env=env)
    assert done.returncode == 0, done.stderr
    assert sorted(first_seen_lines(done.stderr)) == [FIRST, SECOND, THIRD, FOURTH]
    for version, group in by_version(turns).items():
        line = next(line for line in done.stderr.splitlines() if f"policy_version={version} " in line)
        assert f"plan_version={group[0].plan} rule_id={group[0].rule} turn {group[0].fusion_id[:20]} at " \
               f"{group[0].start:%Y-%m-%dT%H:%M:%SZ}" in line
    assert_counts(textfile.read_text(), turns)

    write_second_day(state, more=True)  # one more turn, under a version never seen
    done = run_once(*args, env=env)
    assert done.returncode == 0, done.stderr
    assert first_seen_lines(done.stderr) == ["2026-11-07"]
    assert_counts(textfile.read_text(), truth(state))


def assert_counts(exposition: str, turns: list[Routed]) -> None:
    counted = samples(exposition, "hydrafusion_router_turns_total")
    assert counted == {(("pattern", pattern), ("policy_version", version)): count for
                       (version, pattern), count in Counter((t.version, t.pattern) for t in turns).items()}
    credits = defaultdict(int)
    for turn in turns:
        credits[(("pattern", turn.pattern), ("policy_version", turn.version))] += turn.nano_aiu
    assert samples(exposition, "hydrafusion_router_aiu_total") == pytest.approx(
        {key: nano / 1e9 for key, nano in credits.items()})
    first = samples(exposition, "hydrafusion_router_policy_first_seen_timestamp_seconds")
    assert first == pytest.approx({(("policy_version", version), ): group[0].start.timestamp()
                                   for version, group in by_version(turns).items()}, abs=1e-3)


# -- The versions seen, as the daemon keeps them ---------------------------------------


def routed_by(version: str | None, number: int = 0) -> Turn:
    resolved = Resolved(10**18 + number, fusion_id=f"fusion-{number}", pattern="single",
                        synthetic_model="hydrafusion", policy="standard", route_source="capi_plan",
                        routing_latency_ms=200.0, policy_version=version)
    return Turn("s", f"fusion-{number}", resolved=resolved)


@given(st.lists(st.lists(st.sampled_from(["a", "b", "1.0", "mu-2", None]), max_size=8), max_size=5))
def test_each_version_is_first_seen_once_across_restarts(runs):
    """Each run starts from what the one before it saved, through JSON as the checkpoint."""
    saved, first = None, []
    for run in runs:
        policies = PolicyVersions(policy_versions_from_state(saved))
        first += [version for number, version in enumerate(run)
                  if policies.note(routed_by(version, number)) is not None]
        saved = json.loads(json.dumps(policies.state()))
    everything = [version for run in runs for version in run if version is not None]
    assert first == list(dict.fromkeys(everything))


def test_the_versions_kept_are_bounded_the_oldest_forgotten_first():
    policies = PolicyVersions()
    for number in range(MAX_KEPT + 10):
        policies.note(routed_by(f"v{number}", number))
    assert policies.state()["seen"] == [f"v{number}" for number in range(10, MAX_KEPT + 10)]
    assert policies.note(routed_by("v9")) == "v9" and policies.note(routed_by("v200")) is None


SAVED = {"seen": ["v1"], "logged": 1, "held": 0, "newest": None, "held_line_s": 0}


@pytest.mark.parametrize("damaged", [
    {"v": 1}, "v1", [1], ["v 1"], ["x" * 65], ["\n"], [f"v{n}" for n in range(MAX_KEPT + 1)],
    {**SAVED, "seen": "v1"}, {**SAVED, "logged": MAX_LOGGED + 1}, {**SAVED, "logged": -1},
    {**SAVED, "held": 1}, {**SAVED, "newest": "v2"}, {**SAVED, "held": 1, "newest": "v 2"},
    {**SAVED, "held_line_s": 10**12}, {**SAVED, "held": 1.5, "newest": "v2"},
    {key: value for key, value in SAVED.items() if key != "logged"},
])
def test_damaged_saved_versions_are_refused(damaged):
    with pytest.raises(ValueError):
        policy_versions_from_state(damaged)


def test_a_checkpoint_from_before_the_versions_were_kept_reads_as_none_seen():
    assert policy_versions_from_state(None) is None
    assert PolicyVersions(None).state()["seen"] == []


def test_versions_saved_before_the_lines_were_bounded_count_as_logged():
    """A list: every version in it had its line."""
    many = [f"v{number}" for number in range(MAX_LOGGED + 5)]
    assert policy_versions_from_state(many) == {"seen": many, "logged": MAX_LOGGED}
    assert policy_versions_from_state(["v1"]) == {"seen": ["v1"], "logged": 1}


# -- The lines: the first MAX_LOGGED versions, then one a day ------------------------------


def test_the_daemon_logs_the_first_versions_then_counts_across_a_restart(tmp_path):
    """A router retuned at every turn, read by `run --once`, then again with five more: the
    restart neither logs the versions past the first MAX_LOGGED nor writes the day's line
    again."""
    writer = SessionWriter("retuned-often", START)
    for number in range(MAX_LOGGED + 8):
        writer.retune(f"v{number}")
        writer.single("gpt-5.6-sol")
    writer.write(tmp_path / "state")
    args = ("--state-dir", str(tmp_path / "state"), "--otlp-endpoint", "none", "--metrics-address",
            "none", "--checkpoint", str(tmp_path / "checkpoint.json"))
    done = run_once(*args)
    assert done.returncode == 0, done.stderr
    assert first_seen_lines(done.stderr) == [f"v{number}" for number in range(MAX_LOGGED)]
    assert [line.partition("router: ")[2] for line in done.stderr.splitlines() if "router: " in line] == [
        f"1 more policy version first seen, the newest policy_version=v{MAX_LOGGED}; past the "
        f"first {MAX_LOGGED}, new versions are counted in one line a day"]
    for number in range(MAX_LOGGED + 8, MAX_LOGGED + 13):
        writer.retune(f"v{number}")
        writer.single("gpt-5.6-sol")
    writer.write(tmp_path / "state")
    done = run_once(*args)
    assert done.returncode == 0, done.stderr
    assert "router" not in done.stderr, done.stderr
    saved = json.loads((tmp_path / "checkpoint.json").read_text())["policy_versions"]
    assert saved["held"] == 12 and saved["newest"] == f"v{MAX_LOGGED + 12}"


class Lines(logging.Handler):
    """The tailer's router lines, each with the clock's time when it was logged."""

    def __init__(self, clock: list[float]):
        super().__init__()
        self.clock, self.lines = clock, []

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("router"):
            self.lines.append((self.clock[0], record.getMessage()))


@contextmanager
def router_lines(clock: list[float]):
    handler = Lines(clock)
    logger = logging.getLogger("tailer")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        yield handler.lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def held_count(line: str) -> int:
    return int(line.split("router: ")[1].split()[0])


def test_a_hundred_thousand_versions_are_not_a_hundred_thousand_lines():
    """A router retuned at every turn, a turn every 2 s: 2.3 days."""
    clock = [1_800_000_000.0]
    policies = PolicyVersions(clock=lambda: clock[0])
    with router_lines(clock) as lines:
        for number in range(100_000):
            clock[0] += 2
            policies.note(routed_by(f"v{number}", number))
    each = [line for _, line in lines if "first seen:" in line]
    held = [(when, line) for when, line in lines if line.startswith("router: ")]
    assert each == [line for _, line in lines][:MAX_LOGGED] and len(each) == MAX_LOGGED
    assert [held_count(line) for _, line in held] == [1, HELD_LINE_EVERY_S // 2, HELD_LINE_EVERY_S // 2]
    assert [b - a for (a, _), (b, _) in zip(held, held[1:])] == [HELD_LINE_EVERY_S] * 2
    assert held[0][1] == (f"router: 1 more policy version first seen, the newest "
                          f"policy_version=v{MAX_LOGGED}; past the first {MAX_LOGGED}, new "
                          "versions are counted in one line a day")
    assert "43200 more policy versions first seen since 2027-01-15T08:01:06Z, the newest policy_version=v43232;" in held[1][1]
    state = policies.state()
    assert state["held"] + sum(held_count(line) for _, line in held) == 100_000 - MAX_LOGGED


@given(st.lists(st.lists(st.tuples(st.integers(0, 12), st.sampled_from([0, 600, 40_000, 90_000])),
                         max_size=12), max_size=5))
def test_each_new_version_has_its_line_or_is_counted_once_across_restarts(runs):
    """Model: the first MAX_LOGGED (3 here) new versions have a line each, every later one
    is counted in exactly one day's line or still held in the saved state, day lines are a
    day apart, and one is written at the first turn a day after the last while any is held.
    Each run starts from what the one before saved, through JSON as the checkpoint."""
    clock, saved, first = [1_800_000_000.0], None, []
    with mock.patch.object(policy_versions, "MAX_LOGGED", 3), router_lines(clock) as lines:
        for run in runs:
            policies = PolicyVersions(policy_versions_from_state(saved), clock=lambda: clock[0])
            for number, (version, step) in enumerate(run):
                clock[0] += step
                if policies.note(routed_by(f"v{version}", number)) is not None:
                    first.append(f"v{version}")
                state = policies.state()
                assert state["held"] == 0 or clock[0] - state["held_line_s"] < HELD_LINE_EVERY_S
            saved = json.loads(json.dumps(policies.state()))
    assert first_seen_lines("\n".join(line for _, line in lines)) == first[:3]
    held = [(when, line) for when, line in lines if line.startswith("router: ")]
    assert all(b - a >= HELD_LINE_EVERY_S for (a, _), (b, _) in zip(held, held[1:]))
    still_held = saved["held"] if saved else 0
    assert sum(held_count(line) for _, line in held) + still_held == max(0, len(first) - 3)


# -- The dashboard's annotation, against the real Prometheus ----------------------------


def test_the_annotation_filters_by_tailer_and_parses(tmp_path):
    exprs = dash.annotation_exprs(60)
    assert [name for name, _ in exprs] == ["New router policy"]
    for annotation in dash.prometheus_annotations(dash.load_dashboard()):
        assert set(dash.TAILER_FILTERS) <= set(
            matcher.strip() for matcher in annotation["expr"].split("{")[1].split("}")[0].split(","))
    rules = {"groups": [{"name": "annotations", "rules": [
        {"record": f"annotation:expr{index}", "expr": expr} for index, (_, expr) in enumerate(exprs)]}]}
    (tmp_path / "annotations.yml").write_text(yaml.safe_dump(rules))
    result = promtool("check", "rules", tmp_path / "annotations.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_dashboard_marks_each_version_where_its_first_turn_began(tmp_path):
    """Grafana's part done as tests/dashboard.py does it: the annotation's range query, each
    series' value taken as the mark's time."""
    state = tmp_path / "state"
    write_retuned(state)
    turns = truth(state)
    port = free_port()
    with running_tailer(tmp_path, "--state-dir", str(state), "--from-start",
                        "--otlp-endpoint", "none", metrics_port=port), \
            running_prometheus(tmp_path, [f"127.0.0.1:{port}"]) as prom:
        prom.wait_for("sum(hydrafusion_router_turns_total)",
                      lambda result: result and float(result[0]["value"][1]) == len(turns), timeout=60)
        counted = prom.query("sum by (policy_version) (hydrafusion_router_turns_total)")
        now = time.time()
        (annotation,) = dash.prometheus_annotations(dash.load_dashboard())
        ((_, expr),) = dash.annotation_exprs(15)
        events = dash.annotation_events(annotation, prom.query_range(expr, now - 120, now, "15s"))
    assert {sample["metric"]["policy_version"]: float(sample["value"][1]) for sample in counted} == {
        version: len(group) for version, group in by_version(turns).items()}
    expected = {f"router policy {version}": group[0].start.timestamp() * 1000
                for version, group in by_version(turns).items()}
    assert {title for title, _ in events} == set(expected) and len(events) == len(expected)
    for title, time_ms in events:
        assert abs(time_ms - expected[title]) <= 1, title  # a float's last digit


# -- The counts by policy version: bounded, and history's too ----------------------------


def test_policy_versions_past_the_cap_count_under_other():
    metrics = Metrics(Registry(label_value_limits=LABEL_VALUE_LIMITS))
    for number in range(MAX_POLICY_VERSIONS + 8):
        metrics.count_turn(routed_by(f"v{number}", number))
    counted = samples(metrics.registry.render_final(), "hydrafusion_router_turns_total")
    versions = {dict(labels)["policy_version"] for labels in counted}
    assert len(versions) == MAX_POLICY_VERSIONS + 1 and "other" in versions
    assert counted[(("pattern", "single"), ("policy_version", "other"))] == 8
    assert sum(counted.values()) == MAX_POLICY_VERSIONS + 8


def test_the_counts_by_policy_version_go_to_history_too():
    metrics = Metrics(Registry(label_value_limits=LABEL_VALUE_LIMITS))
    gained = metrics.count_turn_as_history(routed_by(SECOND))
    assert ("hydrafusion_router_turns_total", [("policy_version", SECOND), ("pattern", "single")]) in [
        (name, list(labels)) for name, labels, *_ in gained]
    assert {"hydrafusion_router_turns_total", "hydrafusion_router_aiu_total"} <= metrics.turn_families
