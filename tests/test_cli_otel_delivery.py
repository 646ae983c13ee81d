"""The CLI's own telemetry, through the daemon: every line of its export reaches the
collector, across restarts and kill -9, while the CLI keeps writing (half lines included).

Its positions and the units not delivered yet are one cut of the checkpoint with the rest
(cli_telemetry.CliTelemetry), so a restart neither loses a line nor reads one again; after a
kill -9, what was delivered but not yet saved as delivered is sent again, the same unit.
And a live turn waits for the CLI's root of its prompt, written after it, to link both.
"""

import json
import random
import signal
import threading
import time
from collections import Counter

from otlp_sink import OtlpSink
from tailerproc import run_once, running_tailer

SESSION = "3a4b7c1e-5d2f-4e8a-9b0c-1d2e3f4a5b6c"


def export_lines(count: int, first: int = 0) -> list[str]:
    """Spans of old prompts (one `invoke_agent` root and a `chat` child each) and a metric
    per prompt, as the CLI's file export writes them."""
    lines = []
    for number in range(first, first + count):
        at = 1793793600 + number * 10
        root = {"type": "span", "traceId": f"{number + 1:032x}", "spanId": f"{number + 1:016x}",
                "name": "invoke_agent", "kind": 0, "startTime": [at, 0], "endTime": [at + 5, 0],
                "attributes": {"gen_ai.operation.name": "invoke_agent",
                               "gen_ai.conversation.id": SESSION},
                "resource": {"attributes": {"service.name": "github-copilot"}}}
        child = {**root, "spanId": f"{number + 1:08x}{0:08x}", "name": "chat gpt-5.6-sol",
                 "parentSpanId": root["spanId"], "startTime": [at + 1, 0]}
        metric = {"type": "metric", "name": "github.copilot.tool.call.count", "unit": "{call}",
                  "resource": {"attributes": {"service.name": "github-copilot"}},
                  "dataPoints": [{"attributes": {"gen_ai.tool.name": "bash"},
                                  "startTime": [1793793600, 0], "endTime": [at + 5, 0],
                                  "value": number}]}
        lines += [json.dumps(child), json.dumps(root), json.dumps(metric)]
    return lines


def received(sink: OtlpSink) -> tuple[list[str], list[int]]:
    """The CLI span ids and metric values the sink took, duplicates kept."""
    spans = [span["spanId"] for span in sink.spans()
             if span["resource"].get("service.name") == "github-copilot"]
    values = [point.as_int for request in sink.metric_requests
              for resource in request.resource_metrics for scope in resource.scope_metrics
              for metric in scope.metrics for point in metric.sum.data_points]
    return spans, values


def expected_of(lines: list[str]) -> tuple[Counter, Counter]:
    records = [json.loads(line) for line in lines]
    return (Counter(r["spanId"] for r in records if r["type"] == "span"),
            Counter(r["dataPoints"][0]["value"] for r in records if r["type"] == "metric"))


def test_a_restart_goes_on_from_the_line_after_the_last_one_sent(tmp_path):
    state, export = tmp_path / "state", tmp_path / "otel" / "copilot-otel.jsonl"
    state.mkdir()
    export.parent.mkdir()
    first, second = export_lines(5), export_lines(5, first=5)
    export.write_text("\n".join(first) + "\n" + second[0][:30])  # a line being written
    args = ("--state-dir", str(state), "--checkpoint", str(tmp_path / "cp.json"),
            "--cli-otel", str(export.parent))
    with OtlpSink() as sink:
        assert run_once(*args, "--otlp-endpoint", sink.endpoint).returncode == 0
        with open(export, "a") as handle:
            handle.write(second[0][30:] + "\n" + "\n".join(second[1:]) + "\n")
        done = run_once(*args, "--otlp-endpoint", sink.endpoint)
        assert done.returncode == 0, done.stderr
        spans, values = received(sink)
    # Exactly once: a clean stop saved everything it delivered.
    assert (Counter(spans), Counter(values)) == expected_of(first + second)


def test_kill_9_while_the_cli_writes_loses_no_line(tmp_path):
    """No line is lost; that none is read twice is the clean restart's test above (a kill
    sends again, from the checkpoint, what it caught unsettled)."""
    rng = random.Random(11)
    state, export = tmp_path / "state", tmp_path / "otel" / "copilot-otel.jsonl"
    state.mkdir()
    export.parent.mkdir()
    lines = export_lines(60)
    text = "".join(line + "\n" for line in lines).encode()
    cuts = sorted(rng.sample(range(1, len(text)), 80))
    pieces = [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]
    done = threading.Event()

    def write_like_the_cli():
        for piece in pieces:
            with open(export, "ab") as handle:
                handle.write(piece)
            time.sleep(rng.uniform(0.0, 0.05))
        done.set()

    args = ("--state-dir", str(state), "--checkpoint", str(tmp_path / "cp.json"),
            "--cli-otel", str(export.parent), "--from-start")
    with OtlpSink() as sink:
        writer = threading.Thread(target=write_like_the_cli)
        writer.start()
        kills = 0
        while not done.is_set() or kills < 4:
            with running_tailer(tmp_path, *args, "--otlp-endpoint", sink.endpoint) as tailer:
                time.sleep(rng.uniform(0.2, 1.2))
                tailer.process.send_signal(signal.SIGKILL)
                tailer.process.wait()
                kills += 1
        writer.join()
        assert run_once(*args, "--otlp-endpoint", sink.endpoint).returncode == 0
        spans, values = received(sink)
        every_span = sink.spans()
    expected_spans, expected_values = expected_of(lines)
    assert set(spans) == set(expected_spans) and set(values) == set(expected_values)
    # What a kill caught between its delivery and the save that records it is sent
    # again, the same span: a collector sees one span, never two versions of it.
    shapes = {}
    for span in every_span:
        key = (span["traceId"], span["spanId"])
        assert shapes.setdefault(key, json.dumps(span, sort_keys=True)) == \
            json.dumps(span, sort_keys=True)


def test_a_live_turn_waits_for_the_clis_root_written_after_it_and_both_link(tmp_path):
    """As the CLI runs: the turn's rollup is in the log before the CLI writes its root
    span (it exports on exit, or every few seconds); the daemon holds the turn's spans
    until the root comes, then sends both, each linked to the other."""
    from datetime import datetime, timedelta, timezone

    from otlp_sink import plain_attributes
    from tailer.outputs.spans import span_id, trace_id

    state, export = tmp_path / "state" / SESSION, tmp_path / "otel" / "copilot-otel.jsonl"
    state.mkdir(parents=True)
    export.parent.mkdir()
    begun = datetime.now(timezone.utc) - timedelta(seconds=3)

    def at(seconds: float) -> str:
        return (begun + timedelta(seconds=seconds)).isoformat(timespec="milliseconds")[:-6] + "Z"

    start_s = int(begun.timestamp())
    export.write_text(json.dumps({  # an earlier span: the CLI writes telemetry
        "type": "span", "traceId": "f" * 32, "spanId": "e" * 16, "parentSpanId": "d" * 16,
        "name": "chat auto", "kind": 2, "startTime": [start_s - 60, 0],
        "endTime": [start_s - 59, 0], "attributes": {}}) + "\n")
    (state / "events.jsonl").write_text("".join(json.dumps(line) + "\n" for line in [
        {"type": "session.fusion_resolved", "timestamp": at(0.1),
         "data": {"fusionId": "fusion-live", "pattern": "single", "routingLatencyMs": 50}},
        {"type": "session.fusion_completed", "timestamp": at(2.0),
         "data": {"fusionId": "fusion-live", "pattern": "single", "outcome": "completed",
                  "durationMs": 1950, "totalNanoAiu": 0}},
    ]))
    root = {"type": "span", "traceId": "a" * 32, "spanId": "b" * 16, "name": "invoke_agent",
            "kind": 0, "startTime": [start_s, 200_000_000], "endTime": [start_s + 2, 100_000_000],
            "attributes": {"gen_ai.operation.name": "invoke_agent",
                           "gen_ai.conversation.id": SESSION},
            "resource": {"attributes": {"service.name": "github-copilot"}}}
    args = ("--state-dir", str(state.parent), "--checkpoint", str(tmp_path / "cp.json"),
            "--cli-otel", str(export.parent), "--from-start")
    with OtlpSink() as sink, running_tailer(tmp_path, *args, "--otlp-endpoint",
                                            sink.endpoint) as tailer:
        tailer.wait_for_log(r" fusion fusion-live")
        time.sleep(2.0)  # the turn is finished and waits: nothing of it is sent
        assert not [s for s in sink.spans() if "parentSpanId" not in s]
        with open(export, "a") as handle:
            handle.write(json.dumps(root) + "\n")
        spans = sink.wait_for_spans(4, timeout=15)  # an earlier span, root, route, theirs
    roots = {s["resource"]["service.name"]: s for s in spans if "parentSpanId" not in s}
    ours, theirs = roots["hydrafusion"], roots["github-copilot"]
    assert plain_attributes(ours["attributes"])["hydrafusion.fusion_id"] == "fusion-live"
    assert [(l["traceId"], l["spanId"]) for l in ours["links"]] == [("a" * 32, "b" * 16)]
    assert [(l["traceId"], l["spanId"]) for l in theirs["links"]] == [
        (trace_id(SESSION, "fusion-live"), span_id(SESSION, "fusion-live", "turn"))]


def test_hostile_lines_cost_only_themselves_and_a_restart_on_them_goes_on(tmp_path):
    """Issue 19, finding 1: a NaN bucket count (and its kin) in the export killed the
    daemon, and every restart on the same checkpoint died on the same line. Now each is
    skipped or converted, counted on /metrics, and the lines around it are delivered; a
    daemon killed before it saved past them reads them again without harm."""
    from test_cli_otel import ISSUE_LINES, span_line

    from exposition_helpers import samples
    from prom import free_port

    state, export = tmp_path / "state", tmp_path / "otel" / "copilot-otel.jsonl"
    state.mkdir()
    export.parent.mkdir()
    good = export_lines(3)
    export.write_text(good[0] + "\n")
    args = ("--state-dir", str(state), "--checkpoint", str(tmp_path / "cp.json"),
            "--cli-otel", str(export.parent))
    with OtlpSink() as sink:
        assert run_once(*args, "--otlp-endpoint", sink.endpoint).returncode == 0
        with open(export, "a") as handle:
            for record in ISSUE_LINES.values():
                handle.write(json.dumps(record) + "\n")
            handle.write("\n".join(good[1:]) + "\n")
        port = free_port()
        with running_tailer(tmp_path, *args, "--otlp-endpoint", sink.endpoint,
                            metrics_port=port) as tailer:
            deadline = time.monotonic() + 30
            while not set(expected_of(good)[0]) <= set(received(sink)[0]):
                assert time.monotonic() < deadline, tailer.log()
                assert tailer.process.poll() is None, tailer.log()
                time.sleep(0.1)
            while True:  # the counts are published with the next save
                skipped = {dict(labels)["reason"]: value for labels, value in samples(
                    tailer.metrics(), "hydrafusion_tailer_cli_records_skipped_total").items()
                    if value}
                if skipped or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            tailer.process.send_signal(signal.SIGKILL)  # perhaps before it saved past them
            tailer.process.wait()
        assert "Traceback" not in tailer.log() and "unexpected error" not in tailer.log()
        assert "CLI telemetry copilot-otel.jsonl: line " in tailer.log()
        assert skipped == {"no_points": 3}  # a NaN gauge, points not a list, a 400-digit value
        again = run_once(*args, "--otlp-endpoint", sink.endpoint)
        assert again.returncode == 0, again.stderr
        assert "Traceback" not in again.stderr
        spans, values = received(sink)
    # The issue's spans that could be converted went too (they share one span id).
    assert set(spans) == set(expected_of(good)[0]) | {span_line()["spanId"]}
    assert set(values) == set(expected_of(good)[1])
    assert sink.errors == []  # every request was valid OTLP


def test_a_secret_in_any_code_of_the_export_reaches_no_request_and_no_log_line(tmp_path):
    """The canary, a path and a `password=` in every name, version and code the CLI's export
    can carry, through the daemon: not in a relayed span or metric, nor in its log."""
    from test_cli_otel import SECRET, SECRET_PARTS, metric_line, span_line

    from tailer.outputs.copilot_otel import ATTRIBUTES

    attributes = {key: SECRET for key, kind in ATTRIBUTES.items() if kind}
    resource = {"attributes": {"service.name": SECRET, "service.version": SECRET}}
    scope = {"name": SECRET, "version": SECRET}
    span = span_line(name=SECRET, attributes=attributes, resource=resource,
                     instrumentationScope=scope,
                     events=[{"name": SECRET, "time": [1, 0], "attributes": attributes}])
    metric = {**metric_line("m.count", 1), "unit": SECRET, "resource": resource,
              "instrumentationScope": scope}
    metric["dataPoints"][0]["attributes"] = attributes
    state, export = tmp_path / "state", tmp_path / "otel" / "copilot-otel.jsonl"
    state.mkdir()
    export.parent.mkdir()
    export.write_text("".join(json.dumps(line) + "\n" for line in [
        span, metric, metric_line(SECRET, 1), {"type": SECRET}, {**span, "type": SECRET}]))
    with OtlpSink() as sink:
        done = run_once("--state-dir", str(state), "--checkpoint", str(tmp_path / "cp.json"),
                        "--cli-otel", str(export.parent), "--log-level", "DEBUG",
                        "--otlp-endpoint", sink.endpoint)
        bodies = b"".join(sink.raw_bodies + sink.metric_bodies).decode()
    assert done.returncode == 0, done.stderr
    assert [span["name"] for span in sink.spans()] == ["other"]
    assert sink.metric_requests, "the metric was not relayed: the test would prove nothing"
    assert "skipped" in done.stderr
    for part in SECRET_PARTS:
        assert part not in bodies, f"{part} reached the collector"
        assert part not in done.stderr + done.stdout, f"{part} reached the log"
