"""tailer/cli_otel.py: the CLI's own OTel file export, followed and turned into OTLP/JSON.

tests/test_realcli.py runs the same conversion on the export files the real CLI wrote
with content capture on; here hand-made lines pin down each rule. The pairing with turns
is tests/test_prompt_links.py.
"""

import gzip
import json
from collections import Counter

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)

from otlp_sink import decode_body, plain_attributes, span_dicts
from tailer import cli_otel
from tailer.exposition import Registry
from tailer.metrics import TurnMetrics

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


def converted(line: dict) -> cli_otel.Record:
    return cli_otel.convert(json.dumps(line).encode(), Counter())


def spans_of(records) -> list[dict]:
    body = cli_otel.encode_spans([cli_otel.span_unit(converted(record)) for record in records])
    return span_dicts(decode_body(gzip.decompress(body)))


def metrics_of(records) -> ExportMetricsServiceRequest:
    body = gzip.decompress(cli_otel.encode_metrics(
        [cli_otel.metric_unit(converted(record)) for record in records]))
    assert CANARY not in body.decode()
    return json_format.Parse(body, ExportMetricsServiceRequest())


def follower(path, **options) -> cli_otel.ExportFollower:
    return cli_otel.ExportFollower(path, TurnMetrics(Registry()), **options)


def poll(export: cli_otel.ExportFollower, budget: int = 100) -> list[cli_otel.Record]:
    records = []
    assert export.poll(budget, records.append) == len(records)
    return records


def test_a_span_keeps_its_metadata_and_loses_every_content_attribute():
    body = gzip.decompress(cli_otel.encode_spans([cli_otel.span_unit(converted(span_line()))]))
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
    for record in [span_line(traceId="xyz"), span_line(spanId="0" * 16), {"type": "span"}]:
        with pytest.raises(cli_otel.Unusable, match="bad_ids"):
            converted(record)


def test_spans_of_several_resources_go_in_one_request_each_under_its_own():
    other = {"attributes": {"service.name": "github-copilot", "service.version": "1.0.103"}}
    spans = spans_of([span_line(), span_line(spanId="e17a0fc1240dc536", resource=other)])
    assert [span["resource"]["service.version"] for span in spans] == ["1.0.102", "1.0.103"]


def test_the_prompt_root_is_the_parentless_invoke_agent_span():
    root = span_line(parentSpanId=None, name="invoke_agent", attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": "s-1"})
    assert converted(root).root == cli_otel.Root(
        "s-1", root["traceId"], root["spanId"], 1796026443849000000, 1796026443861000000)
    assert converted(span_line()).root is None  # a chat span under it
    link = cli_otel.Root("s-1", "ab" * 16, "cd" * 8, 0, 0)
    (span,) = span_dicts(decode_body(gzip.decompress(
        cli_otel.encode_spans([cli_otel.span_unit(converted(root), link)]))))
    assert span["links"] == [{"traceId": "ab" * 16, "spanId": "cd" * 8, "attributes": [
        {"key": "hydrafusion.link", "value": {"stringValue": "hydrafusion_turn"}}]}]


def test_metrics_become_histograms_sums_and_gauges_without_content():
    histogram = {"buckets": {"boundaries": [0.01, 0.02], "counts": [1, 0, 2]},
                 "count": 3, "sum": 0.5, "min": 0.001, "max": 0.3}
    request = metrics_of([metric_line("gen_ai.client.operation.duration", histogram),
                          metric_line("github.copilot.tool.call.count", 4),
                          metric_line("github.copilot.context.tokens", 0.5)])
    metrics = {m.name: m for resource in request.resource_metrics
               for m in resource.scope_metrics[0].metrics}
    point = metrics["gen_ai.client.operation.duration"].histogram.data_points[0]
    assert list(point.bucket_counts) == [1, 0, 2] and point.count == 3 and point.max == 0.3
    counted = metrics["github.copilot.tool.call.count"].sum
    assert counted.is_monotonic and counted.data_points[0].as_int == 4
    assert metrics["github.copilot.context.tokens"].gauge.data_points[0].as_double == 0.5


def kinds(records) -> list[str]:
    return ["span" if record.is_span else "metric" for record in records]


def span_ids(records) -> list[str]:
    return [record.key[32:] for record in records]


def test_the_follower_returns_complete_new_lines_of_a_file_or_folder(tmp_path):
    folder = tmp_path / "otel"
    folder.mkdir()
    first = folder / "a.jsonl"
    line = json.dumps(span_line())
    first.write_text(line + "\n" + line[:40])  # the second line is still being written
    export = follower(folder, from_start=True)
    assert len(poll(export)) == 1
    assert poll(export) == []
    with open(first, "a") as handle:
        handle.write(line[40:] + "\nnot json\n")
    (folder / "b.jsonl").write_text(json.dumps(metric_line("m.count", 1)) + "\n")
    assert kinds(poll(export)) == ["span", "metric"]
    only = poll(follower(first, from_start=True))
    assert span_ids(only) == ["e17a0fc1240dc535"] * 2


def test_a_rewritten_or_truncated_export_is_read_again_from_its_start(tmp_path):
    path = tmp_path / "otel.jsonl"
    lines = [json.dumps(span_line(spanId=f"{n:016x}")) for n in range(1, 4)]
    path.write_text("\n".join(lines) + "\n")
    export = follower(path, from_start=True)
    assert len(poll(export)) == 3
    path.write_text(lines[0] + "\n")  # truncated and written anew
    assert span_ids(poll(export)) == ["0000000000000001"]
    swapped = [json.dumps(span_line(spanId=f"{n:016x}")) for n in range(7, 10)]
    path.write_text("\n".join(swapped) + "\n")  # longer, other lines: read again
    assert [span[-1] for span in span_ids(poll(export))] == ["7", "8", "9"]


def test_positions_survive_a_restart_and_the_budget_bounds_a_poll(tmp_path):
    path = tmp_path / "otel.jsonl"
    path.write_text("".join(json.dumps(span_line(spanId=f"{n:016x}")) + "\n"
                            for n in range(1, 6)))
    export = follower(path, from_start=True)
    assert len(poll(export, 2)) == 2
    again = follower(path, from_start=True, saved=export.state())
    assert [span[-1] for span in span_ids(poll(again))] == ["3", "4", "5"]


def test_without_from_start_only_what_is_written_later_is_read(tmp_path):
    path = tmp_path / "otel.jsonl"
    path.write_text(json.dumps(span_line()) + "\n")
    export = follower(path, from_start=False)
    assert poll(export) == []
    with open(path, "a") as handle:
        handle.write(json.dumps(span_line(spanId="00000000000000aa")) + "\n")
    assert span_ids(poll(export)) == ["00000000000000aa"]
