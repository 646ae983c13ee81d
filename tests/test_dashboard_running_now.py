"""The dashboard's "Running now" panel: in the questions' top row, and, against the real
Prometheus scraping the real tailer, the turns in flight and the age of the oldest while a
turn is written, then nothing once it ends."""

import json
from datetime import datetime

import dashboard as dash
from prom import free_port, running_prometheus
from sessiongen import START, SessionWriter
from tailerproc import running_tailer
from test_dashboard_queries import tailer_job

TITLE = "Running now"


def test_running_now_is_in_the_top_row_of_the_questions_and_reads_the_in_flight_gauges():
    panels = dash.all_panels(dash.load_dashboard())
    rows = [i for i, panel in enumerate(panels) if panel["type"] == "row"]
    questions = panels[rows[1] + 1:rows[2]]
    top = min(panel["gridPos"]["y"] for panel in questions)
    [panel] = [p for p in questions if p["title"] == TITLE]
    assert panel["gridPos"]["y"] == top
    assert sum(p["gridPos"]["w"] for p in questions if p["gridPos"]["y"] == top) == 24
    names = set().union(*(dash.metric_names(t["expr"]) for t in panel["targets"]))
    assert names == {"hydrafusion_turns_in_flight",
                     "hydrafusion_oldest_turn_in_flight_start_timestamp_seconds"}


def running_now(prom, at):
    exprs = [expr for title, expr in dash.prometheus_exprs(60) if title == TITLE]
    return [float(prom.query(expr, time=at)[0]["value"][1]) for expr in exprs]


def test_running_now_shows_a_turn_while_it_is_written_and_nothing_once_it_ends(tmp_path):
    writer = SessionWriter("running", START)
    writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="reject")
    lines = writer.lines()
    ended = next(i for i, line in enumerate(lines)
                 if json.loads(line)["type"] == "session.fusion_completed")
    resolved = json.loads(lines[1])
    started = (datetime.fromisoformat(resolved["timestamp"].replace("Z", "+00:00")).timestamp()
               - resolved["data"]["routingLatencyMs"] / 1000)
    log = tmp_path / "state" / "running" / "events.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text("".join(line + "\n" for line in lines[:ended - 3]))
    port = free_port()
    with running_tailer(tmp_path, "--state-dir", str(tmp_path / "state"), "--from-start",
                        "--otlp-endpoint", "none", metrics_port=port) as tailer, \
            running_prometheus(tmp_path, [], extra_config={
                "scrape_configs": [tailer_job(port)]}) as prom:
        result = prom.wait_for("sum(hydrafusion_turns_in_flight)",
                               lambda r: r and float(r[0]["value"][1]) == 1, timeout=60)
        turns, oldest = running_now(prom, float(result[0]["value"][0]))
        assert turns == 1
        assert abs(oldest - (float(result[0]["value"][0]) - started)) < 1
        with open(log, "a") as file:
            file.write("".join(line + "\n" for line in lines[ended - 3:]))
        result = prom.wait_for("sum(hydrafusion_turns_in_flight)",
                               lambda r: r and float(r[0]["value"][1]) == 0, timeout=60)
        assert running_now(prom, float(result[0]["value"][0])) == [0, 0]
        assert tailer.process.poll() is None
