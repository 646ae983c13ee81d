"""Turns in flight, written record by record in the real CLI's order (tests/sessiongen.py),
for every pattern, a route failure and an ordinary prompt: each intermediate state in
`report --format json` and on the daemon's gauges, and a turn that never ends leaving them,
across a restart too. The truth is tests/in_flight_truth.py, from the lines alone."""

import io
import json
import os
import time
from contextlib import redirect_stdout

import jsonschema
import pytest

from exposition_helpers import samples
from in_flight_truth import running_after
from prom import free_port
from sessiongen import START, SessionWriter
from tailer.commands import cli
from tailer.outputs.exposition import Registry
from tailer.outputs.metrics import Metrics
from tailer.turns.sessions import Tailer
from tailerproc import ROOT, running_tailer, start_on_a_terminal, tailer_env
from test_in_flight import TURNS

SCHEMA = json.loads((ROOT / "docs" / "report.schema.json").read_text())
IN_FLIGHT = "hydrafusion_turns_in_flight"
OLDEST = "hydrafusion_oldest_turn_in_flight_start_timestamp_seconds"
LIVE_KINDS = ("single", "accept", "reject", "critique", "revision", "route_failed", "ordinary")


def one_turn(kind):
    """A session's start, then one turn of `kind` and the next prompt's start (an ordinary
    turn ends there), as lines."""
    writer = SessionWriter(f"live-{kind}", START)
    TURNS[kind](writer)
    writer.ordinary("gpt-5.6-mini", tools=())
    lines = writer.lines()
    return writer, lines[:_second_prompt(lines) + 1]


def _second_prompt(lines):
    prompts = [i for i, line in enumerate(lines) if json.loads(line)["type"] == "user.message"]
    return prompts[1]


def report_json(state_dir, *options):
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")  # the JSON is written as bytes
    with redirect_stdout(out):
        assert cli.main(["report", "--state-dir", str(state_dir), "--format", "json",
                         *options], {}) == 0
    out.flush()
    document = json.loads(out.buffer.getvalue())
    jsonschema.validate(document, SCHEMA)
    return document


def check_json(in_flight, truth):
    if truth is None:
        assert in_flight == []
        return
    [now] = in_flight
    assert (now["fusion_id"], now["kind"]) == (truth.key, truth.kind)
    done = sorted((leg["kind"], leg["model"], leg["verdict"], round(leg["credits"] * 1e9))
                  for leg in now["legs"] if leg["state"] == "done")
    assert done == sorted(truth.done)
    assert sum(leg["state"] == "running" for leg in now["legs"]) == len(truth.running)
    assert now["calls"] == truth.calls and round(now["credits"] * 1e9) == truth.call_nano
    unrun = {leg["state"] for leg in now["legs"]} - {"done", "running"}
    assert unrun <= {"skipped" if truth.committed else "pending"}


@pytest.mark.parametrize("kind", LIVE_KINDS)
def test_each_record_s_state_is_in_the_report_s_json(tmp_path, kind):
    _, lines = one_turn(kind)
    log = tmp_path / f"live-{kind}" / "events.jsonl"
    log.parent.mkdir()
    seen = set()
    for count in range(1, len(lines) + 1):
        log.write_text("".join(line + "\n" for line in lines[:count]))
        document = report_json(tmp_path)
        truth = running_after(lines[:count])
        check_json(document["in_flight"], truth)
        seen |= {(leg["kind"], leg["state"]) for turn in document["in_flight"] for leg in turn["legs"]}
    planned = {"reject": {("repair", "pending"), ("repair", "running"), ("repair", "done")},
               "accept": {("repair", "pending"), ("repair", "skipped")},
               "critique": {("revision", "pending"), ("revision", "skipped")},
               "revision": {("revision", "running"), ("revision", "done")},
               "route_failed": {("primary", "pending"), ("primary", "running")}}
    assert planned.get(kind, set()) <= seen


class Clock:
    def __init__(self):
        self.now = time.time()

    def __call__(self):
        return self.now


def gauges(metrics):
    text = metrics.registry.render_final()
    return ({labels[0][1]: value for labels, value in samples(text, IN_FLIGHT).items()},
            samples(text, OLDEST)[()])


@pytest.mark.parametrize("kind", LIVE_KINDS)
def test_each_record_s_state_is_on_the_daemon_s_gauges(tmp_path, kind):
    _, lines = one_turn(kind)
    log = tmp_path / "s1" / "events.jsonl"
    log.parent.mkdir()
    log.write_text("")
    metrics, clock = Metrics(Registry()), Clock()
    tailer = Tailer(tmp_path, metrics=metrics, from_start=True, idle_timeout_s=1800, clock=clock)
    try:
        tailer.poll()
        for count in range(1, len(lines) + 1):
            with open(log, "a") as file:
                file.write(lines[count - 1] + "\n")
            tailer.poll()
            truth = running_after(lines[:count])
            counts, oldest = gauges(metrics)
            expected = {"fusion": 0, "ordinary": 0}
            if truth is not None:
                expected["ordinary" if truth.kind == "ordinary" else "fusion"] = 1
            assert counts == expected, count
            assert (oldest > 0) == (truth is not None)
        # the next prompt's ordinary turn never ends: it leaves the gauges once idle
        clock.now = os.stat(log).st_mtime + 1800
        tailer.poll()
        assert gauges(metrics) == ({"fusion": 0, "ordinary": 0}, 0)
    finally:
        tailer.close()


def test_a_daemon_restarted_mid_turn_shows_it_in_flight_then_finishes_it(tmp_path):
    writer = SessionWriter("restart", START)
    writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="reject")
    lines = writer.lines()
    judged = next(i for i, line in enumerate(lines) if '"phaseKind":"judge"' in line
                  and json.loads(line)["type"] == "assistant.fusion_phase_completed")
    state_dir = tmp_path / "state"
    log = state_dir / "restart" / "events.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text("".join(line + "\n" for line in lines[:judged + 1]))
    env = tailer_env()
    args = ("--state-dir", str(state_dir), "--from-start", "--otlp-endpoint", "none",
            "--idle-timeout", "8")
    first = {"fusion": 1.0, "ordinary": 0.0}
    port = free_port()
    with running_tailer(tmp_path, *args, metrics_port=port, env=env) as tailer:
        body = tailer.wait_for_metrics(f'{IN_FLIGHT}{{kind="fusion"}} 1')
        assert samples(body, OLDEST)[()] == pytest.approx(
            json.loads(lines[1])["data"]["routingLatencyMs"] * -1e-3
            + _seconds(json.loads(lines[1])["timestamp"]), abs=1e-3)
    os.utime(log)  # the idle timeout counts from now: the restart comes well inside it
    port = free_port()
    with running_tailer(tmp_path, *args, metrics_port=port, env=env) as tailer:
        body = tailer.metrics()
        shown = {labels[0][1]: value for labels, value in samples(body, IN_FLIGHT).items()}
        assert shown == first  # restored from the checkpoint, before the idle timeout
        tailer.wait_for_metrics(f'{IN_FLIGHT}{{kind="fusion"}} 0', timeout=30)
        body = tailer.metrics()
        assert samples(body, OLDEST)[()] == 0
        assert 'hydrafusion_turns_total{pattern="cascade",outcome="incomplete"' in body


def _seconds(timestamp):
    from datetime import datetime
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


MARKS = {"done": "+", "running": "*", "pending": ".", "skipped": "-"}


def now_section(screen):
    """The "now" lines of the last whole frame on a terminal's output."""
    frames = [frame for frame in screen.split("\x1b[H") if frame.endswith("\x1b[J")]
    if not frames:
        return []
    lines = frames[-1].replace("\x1b[K", "").replace("\r\n", "\n").split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("now: "))
    end = lines.index("", start)
    return lines[start:end]


def expected_now(truth):
    """What the "now" lines must hold for the truth: the heading, calls and each leg's mark."""
    if truth is None:
        return "now: nothing running", None
    marks = {"+": len(truth.done), "*": len(truth.running)}
    return "now: 1 running", (f" {truth.calls} calls ", marks, truth.committed)


def shows(lines, expected):
    heading, detail = expected
    if not lines or lines[0] != heading:
        return False
    if detail is None:
        return len(lines) == 1
    calls, marks, committed = detail
    legs = " ".join(lines[2:]).split()
    found = {mark: sum(leg.startswith(mark) for leg in legs) for mark in "+*.-"}
    return (calls in lines[1] and all(found[mark] == count for mark, count in marks.items())
            and found["." if committed else "-"] == 0)


def test_each_record_s_state_is_on_screen_in_watch(tmp_path):
    """Every pattern, a route failure and an ordinary prompt, one after another in one
    session, appended a record at a time while `report --watch` runs in a pseudo-terminal."""
    from test_report_live import read_until

    writer = SessionWriter("watched", START)
    for kind in LIVE_KINDS:
        TURNS[kind](writer)
    lines = writer.lines()
    log = tmp_path / "watched" / "events.jsonl"
    log.parent.mkdir()
    log.write_text(lines[0] + "\n")
    process, leader = start_on_a_terminal("report", "--watch", "--state-dir", str(tmp_path),
                                          rows=60, columns=200)
    screen = ""
    try:
        for count in range(1, len(lines) + 1):
            if count > 1:
                with open(log, "a") as file:
                    file.write(lines[count - 1] + "\n")
            expected = expected_now(running_after(lines[:count]))

            def drawn(output):
                text = screen + output.decode(errors="replace")
                return shows(now_section(text), expected)
            output = read_until(leader, drawn, timeout=20)
            screen += output.decode(errors="replace")
            assert shows(now_section(screen), expected), (count, lines[count - 1][:80],
                                                          now_section(screen))
            screen = screen[screen.rfind("\x1b[H"):]  # keep the last frame only
    finally:
        process.kill()
        process.wait()
        os.close(leader)


def test_the_now_lines_print_every_name_escaped():
    from tailer.report.now import InFlightRow, LegNowRow, render_now
    from test_printable import assert_inert

    hostile = "\x1b]0;TITLE\x07\r\nforged row\u202e"
    leg = LegNowRow(hostile, hostile, hostile, True, "running", hostile, hostile, 2, 0.5)
    row = InFlightRow(hostile, hostile, "fusion", hostile, "2026-11-04T10:00:00.000+00:00",
                      75.0, 2, 0.5, False, [leg, leg])
    text = "\n".join(render_now([row], 100))
    assert_inert(text)
    assert "\\x1b]0;TITLE\\x07" in text and "1m15s 2 calls >=0.50 credits" in text


def test_an_answered_ordinary_prompt_is_no_longer_in_flight_but_is_reported(tmp_path):
    """Its turn stays open until the next prompt (a later call may be its), yet it answered:
    the report counts it, and nothing shows it running."""
    writer = SessionWriter("answered", START)
    writer.ordinary("claude-sonnet-4.6", calls=3)
    writer.write(tmp_path)
    document = report_json(tmp_path)
    assert [(t["kind"], t["outcome"]) for t in document["turns"]] == [("ordinary", "completed")]
    assert document["in_flight"] == []
    metrics = Metrics(Registry())
    tailer = Tailer(tmp_path, metrics=metrics, from_start=True, idle_timeout_s=1800, clock=Clock())
    try:
        tailer.poll()
        assert tailer.open_turns("answered") and gauges(metrics) == ({"fusion": 0, "ordinary": 0}, 0)
    finally:
        tailer.close()


def test_watch_gives_the_turns_in_flight_in_its_time_zone(tmp_path):
    """`--watch --timezone` draws a running turn's start in that zone, as the report's JSON
    gives it with the same --timezone."""
    from zoneinfo import ZoneInfo

    from tailer.report.live import LiveTurns
    from tailer.report.read import Selection

    _, lines = one_turn("reject")
    count = next(n for n in range(1, len(lines) + 1) if running_after(lines[:n]) is not None)
    log = tmp_path / "live-reject" / "events.jsonl"
    log.parent.mkdir()
    log.write_text("".join(line + "\n" for line in lines[:count]))
    [reported] = report_json(tmp_path, "--timezone", "Asia/Kolkata")["in_flight"]
    live = LiveTurns(tmp_path, Selection(), zone=ZoneInfo("Asia/Kolkata"))
    try:
        live.poll(0)
        [drawn] = live.in_flight(time.time_ns())
    finally:
        live.close()
    assert drawn.start == reported["start"] and drawn.start.endswith("+05:30")
