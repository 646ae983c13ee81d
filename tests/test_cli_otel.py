"""tailer/cli_otel.py: the CLI's own OTel file export, followed and turned into OTLP/JSON.

tests/test_realcli.py runs the same conversion on the export files the real CLI wrote
with content capture on; here hand-made lines pin down each rule.
"""

import json

from google.protobuf import json_format
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)

from otlp_sink import decode_body, plain_attributes, span_dicts
from tailer import cli_otel

CANARY = "CANARY-cli-otel-content"
RESOURCE = {"attributes": {"service.name": "github-copilot", "service.version": "1.0.102",
                           "host.name": CANARY}}
SCOPE = {"name": "github.copilot", "version": "1.0.102"}


def span_line(**overrides) -> dict:
    record = {
        "type": "span", "traceId": "66f506b430071b87151f2ff2ab35aca1",
        "spanId": "e17a0fc1240dc535", "parentSpanId": "ad84e60a72de378a",
        "name": "chat gpt-5.6-sol", "kind": 2, "startTime": [1796026443, 849000000],
        "endTime": [1796026443, 861000000],
        "attributes": {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-5.6-sol",
            "gen_ai.usage.input_tokens": 1200, "github.copilot.nano_aiu": 250000000,
            "gen_ai.input.messages": CANARY, "gen_ai.output.messages": CANARY,
            "gen_ai.tool.call.arguments": CANARY, "enduser.pseudo.id": CANARY,
            "gen_ai.response.finish_reasons": ["stop"],
        },
        "status": {"code": 2, "message": CANARY},
        "events": [{"name": "exception", "time": [1796026443, 850000000],
                    "attributes": {"exception.message": CANARY, "error.type": "model_call"}}],
        "resource": RESOURCE, "instrumentationScope": SCOPE,
    }
    return {**record, **overrides}


def metric_line(name: str, value) -> dict:
    return {"type": "metric", "name": name, "unit": "s", "description": "d", "dataPoints": [
        {"attributes": {"gen_ai.operation.name": "chat", "gen_ai.prompt": CANARY},
         "startTime": [1796026441, 657886921], "endTime": [1796026444, 100332571],
         "value": value}], "resource": RESOURCE, "instrumentationScope": SCOPE}


def test_a_span_keeps_its_metadata_and_loses_every_content_attribute():
    body = json.dumps(cli_otel.traces_request([span_line()])).encode()
    assert CANARY not in body.decode()
    (span,) = span_dicts(decode_body(body))
    assert span["kind"] == 3  # the JavaScript SDK's CLIENT (2) is OTLP's 3
    assert span["startTimeUnixNano"] == "1796026443849000000"
    assert span["parentSpanId"] == "ad84e60a72de378a"
    assert plain_attributes(span["attributes"]) == {
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-5.6-sol",
        "gen_ai.usage.input_tokens": 1200, "github.copilot.nano_aiu": 250000000,
        "gen_ai.response.finish_reasons": {"values": [{"stringValue": "stop"}]}}
    assert span["status"] == {"code": 2}
    assert plain_attributes(span["events"][0]["attributes"]) == {"error.type": "model_call"}
    assert span["resource"] == {"service.name": "github-copilot", "service.version": "1.0.102"}
    assert span["scope"] == SCOPE


def test_spans_with_bad_ids_are_left_out():
    records = [span_line(traceId="xyz"), span_line(spanId="0" * 16), {"type": "span"}]
    assert cli_otel.traces_request(records) == {"resourceSpans": []}


def test_metrics_become_histograms_sums_and_gauges_without_content():
    histogram = {"buckets": {"boundaries": [0.01, 0.02], "counts": [1, 0, 2]},
                 "count": 3, "sum": 0.5, "min": 0.001, "max": 0.3}
    records = [metric_line("gen_ai.client.operation.duration", histogram),
               metric_line("github.copilot.tool.call.count", 4),
               metric_line("github.copilot.context.tokens", 0.5)]
    document = cli_otel.metrics_request(records)
    assert CANARY not in json.dumps(document)
    request = json_format.ParseDict(document, ExportMetricsServiceRequest())
    metrics = {m.name: m for m in request.resource_metrics[0].scope_metrics[0].metrics}
    point = metrics["gen_ai.client.operation.duration"].histogram.data_points[0]
    assert list(point.bucket_counts) == [1, 0, 2] and point.count == 3 and point.max == 0.3
    counted = metrics["github.copilot.tool.call.count"].sum
    assert counted.is_monotonic and counted.data_points[0].as_int == 4
    assert metrics["github.copilot.context.tokens"].gauge.data_points[0].as_double == 0.5


def test_the_follower_returns_complete_new_lines_of_a_file_or_folder(tmp_path):
    folder = tmp_path / "otel"
    folder.mkdir()
    first = folder / "a.jsonl"
    line = json.dumps(span_line())
    first.write_text(line + "\n" + line[:40])  # the second line is still being written
    follower = cli_otel.ExportFollower(folder)
    assert len(follower.poll()) == 1
    assert follower.poll() == []
    with open(first, "a") as export:
        export.write(line[40:] + "\nnot json\n")
    (folder / "b.jsonl").write_text(json.dumps(metric_line("m.count", 1)) + "\n")
    assert [r["type"] for r in follower.poll()] == ["span", "metric"]
    first.write_text(line + "\n")  # replaced by a shorter file: read again from its start
    assert len(follower.poll()) == 1
    assert cli_otel.ExportFollower(first).poll()[0]["spanId"] == "e17a0fc1240dc535"
