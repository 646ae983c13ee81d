"""tailer/outputs/copilot_otel.py: the CLI's own OTel file export, followed and turned into OTLP/JSON.

tests/test_realcli.py runs the same conversion on the export files the real CLI wrote
with content capture on; here hand-made lines pin down each rule. The pairing with turns
is tests/test_prompt_links.py.
"""

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest
from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from exposition_helpers import samples
from otlp_sink import decode_body, plain_attributes, span_dicts
from tailer.outputs import copilot_otel as cli_otel
from tailer.outputs.exposition import Registry
from tailer.outputs.metrics import Metrics
from tailer.outputs.prompt_links import PromptLinks

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
    return cli_otel.ExportFollower(path, Metrics(Registry()), **options)


def poll(export: cli_otel.ExportFollower, budget: int = 100) -> list[cli_otel.Record]:
    records = []
    export.poll(budget, records.append)
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


# Hostile and broken lines (issue 19). Each is converted or skipped, never raised on, and
# what comes out is JSON a collector takes.

def strict_json(body: bytes) -> dict:
    """JSON as the spec has it: no NaN or Infinity."""
    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")
    return json.loads(body, parse_constant=refuse)


def sent_body(record: cli_otel.Record) -> bytes:
    """The request a record goes out in (a span also with a link), checked: strict JSON
    that opentelemetry-proto parses as an export request, field names and ranges included."""
    if record.is_span:
        link = cli_otel.Root("s", "ab" * 16, "cd" * 8, 0, 0)
        units = [cli_otel.span_unit(record), cli_otel.span_unit(record, link)]
        body = gzip.decompress(cli_otel.encode_spans(units))
        json_format.Parse(json.dumps(strict_json(body)), ExportTraceServiceRequest())
    else:
        body = gzip.decompress(cli_otel.encode_metrics([cli_otel.metric_unit(record)]))
        json_format.Parse(json.dumps(strict_json(body)), ExportMetricsServiceRequest())
    return body


def converted_or_skipped(line: bytes) -> tuple[bytes | None, Counter]:
    """The body a line is sent in (None: skipped), and what was changed in it."""
    changes = Counter()
    try:
        record = cli_otel.convert(line, changes)
    except cli_otel.Unusable as skipped:
        assert skipped.reason in SKIP_REASONS
        return None, changes
    assert set(changes) <= set(CHANGE_REASONS)
    if record.is_span:  # and whatever its times and ids, pairing takes it
        links = PromptLinks(lambda session: [])
        links.add_cli(record)
        links.held()
        links.expire(everything=True)
        assert links.take()[1] == [cli_otel.span_unit(record)]
    return sent_body(record), changes


SKIP_REASONS = set(cli_otel.SKIP_REASONS) - {"internal_error"}
CHANGE_REASONS = set(cli_otel.CHANGE_REASONS)


def deep(depth: int) -> list:
    value = ["stop"]
    for _ in range(depth):
        value = [value]
    return value


def histogram(**value) -> dict:
    return {"buckets": {"boundaries": [1], "counts": [1, 1]}, "count": 2, **value}


ISSUE_LINES = {  # the lines of issue 19, finding 1, and their kin
    "NaN bucket count": metric_line("m", {"buckets": {"boundaries": [1], "counts": [
        float("nan"), 1]}, "count": 1}),
    "Infinity count": metric_line("m", histogram(count=float("inf"))),
    "dataPoints not a list": {**metric_line("m", 1), "dataPoints": 5},
    "400-digit value": metric_line("m.count", 10**400),
    "400-digit bucket count": metric_line("m", histogram(count=10**400)),
    "NaN gauge": metric_line("m", float("nan")),
    "Infinity bound": metric_line("m", {"buckets": {"boundaries": [float("inf")],
                                                    "counts": [1, 1]}, "count": 2}),
    "600-deep finish reasons": span_line(attributes={"gen_ai.response.finish_reasons":
                                                     deep(600)}),
    "400-digit time": span_line(startTime=[10**400, 0]),
    "time past int64": span_line(endTime=[2**63 // 10**9 + 1, 0]),
    "400-digit attribute": span_line(attributes={"gen_ai.usage.input_tokens": 10**400}),
    "status code 1.0": span_line(status={"code": 1.0}),
    "kind true": span_line(kind=True),
    "events not a list": span_line(events={"name": "x"}),
    "attributes a list": span_line(attributes=[1, 2]),
    "value an object": metric_line("m.count", {"count": "three"}),
}


@pytest.mark.parametrize("name", ISSUE_LINES)
def test_every_broken_line_of_the_issue_is_converted_or_skipped_into_valid_json(name):
    record = ISSUE_LINES[name]
    body, changes = converted_or_skipped(json.dumps(record).encode())
    assert body is None or b"NaN" not in body and b"Infinity" not in body
    if body is not None:
        assert changes, f"{name}: what was changed must be counted"


def test_a_nan_or_infinity_is_left_out_and_counted():
    body, changes = converted_or_skipped(json.dumps(ISSUE_LINES["Infinity bound"]).encode())
    (point,) = strict_json(body)["resourceMetrics"][0]["scopeMetrics"][0]["metrics"][0][
        "histogram"]["dataPoints"]
    assert "bucketCounts" not in point and point["count"] == "2"
    assert changes == {"not_finite": 1}
    assert converted_or_skipped(json.dumps(ISSUE_LINES["NaN gauge"]).encode()) == (
        None, Counter({"not_finite": 1}))


# Values that broke or could break a conversion: drawn as often as all others together.
HOSTILE = [float("nan"), float("inf"), float("-inf"), 10**400, -(10**400), 2**63, 2**64,
           -(2**63) - 1, 1e308, -1, True, "", "0" * 32, CANARY, deep(60), ["stop"] * 100,
           [[1, 2]], {"code": 1}, [float("nan")], [10**30, -5]]


def json_values():
    scalars = (st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20))
    arbitrary = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                             | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                             max_leaves=12)
    return st.one_of(st.sampled_from(HOSTILE), arbitrary)


def positions(value, path=()):
    """The path of every value in a record: the record itself, its fields, theirs."""
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from positions(item, path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from positions(item, path + (index,))


def replaced(record, path, value):
    if not path:
        return value
    copy = dict(record) if isinstance(record, dict) else list(record)
    copy[path[0]] = replaced(copy[path[0]], path[1:], value)
    return copy


TEMPLATES = [
    span_line(), span_line(parentSpanId=None, name="invoke_agent", attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": "s-1"}),
    metric_line("gen_ai.client.operation.duration", {
        "buckets": {"boundaries": [0.01, 0.02], "counts": [1, 0, 2]},
        "count": 3, "sum": 0.5, "min": 0.001, "max": 0.3}),
    metric_line("github.copilot.tool.call.count", 4),
    metric_line("github.copilot.context.tokens", 0.5),
]
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_json_value_anywhere_in_a_span_or_metric_is_never_raised_on(data):
    record = data.draw(st.sampled_from(TEMPLATES))
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(list(positions(record))))
        record = replaced(record, path, data.draw(json_values()))
    converted_or_skipped(json.dumps(record).encode())


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted({key for t in TEMPLATES for key in t})),
                       json_values()), st.sampled_from(["span", "metric"]))
def test_any_record_of_either_type_is_never_raised_on(fields, kind):
    converted_or_skipped(json.dumps({**fields, "type": kind}).encode())


SECRET = "SECRETX /home/alice/proj/.env password=hunter2"
SECRET_PARTS = ("SECRETX", "alice", "hunter2", "password")


def counted(metrics: Metrics, family) -> dict[str, float]:
    """{reason: count} of a family, the reasons counted at least once."""
    return {dict(labels)["reason"]: value
            for labels, value in samples(metrics.registry.render_final(), family.name).items()
            if value}


def test_a_secret_in_any_name_or_code_of_the_export_is_sent_as_other_and_never_logged(
        tmp_path, caplog):
    """Span, event, metric, scope and resource names and versions, every string attribute
    we keep (on spans, events and points): none carries the secret out, the log neither."""
    attributes = {key: SECRET for key, kind in cli_otel.ATTRIBUTES.items() if kind}
    attributes["gen_ai.response.finish_reasons"] = [SECRET, "stop"]
    resource = {"attributes": {"service.name": SECRET, "service.version": SECRET}}
    scope = {"name": SECRET, "version": SECRET}
    span = span_line(name=SECRET, attributes=attributes, resource=resource,
                     instrumentationScope=scope, events=[
                         {"name": SECRET, "time": [1, 0], "attributes": attributes}])
    metric = {**metric_line("m.count", 1), "unit": SECRET, "resource": resource,
              "instrumentationScope": scope}
    metric["dataPoints"][0]["attributes"] = attributes
    export = tmp_path / "otel.jsonl"
    export.write_text("".join(json.dumps(line) + "\n" for line in [
        span, metric, {**metric_line(SECRET, 1)}, {"type": SECRET}]))
    metrics = Metrics(Registry())
    records = []
    with caplog.at_level("DEBUG", logger="tailer"):
        cli_otel.ExportFollower(export, metrics, from_start=True).poll(100, records.append)
    assert kinds(records) == ["span", "metric"]
    bodies = b"".join(sent_body(record) for record in records).decode()
    for part in SECRET_PARTS:
        assert part not in bodies and part not in caplog.text
    (sent,) = spans_of([span])
    assert sent["name"] == "other" and sent["scope"] == {"name": "other", "version": "other"}
    assert sent["events"][0]["name"] == "other"
    kept = plain_attributes(sent["attributes"])
    assert {key: value for key, value in kept.items() if isinstance(value, str)} == {
        key: "other" for key in attributes if key != "gen_ai.response.finish_reasons"}
    assert kept["gen_ai.response.finish_reasons"] == {
        "values": [{"stringValue": "other"}, {"stringValue": "stop"}]}
    assert counted(metrics, metrics.cli_skipped) == {"bad_name": 1, "not_a_record": 1}
    assert counted(metrics, metrics.cli_changed)["not_a_code"] >= 3 * len(attributes)


def test_a_line_of_a_million_strings_is_skipped_in_bounded_memory(tmp_path):
    """Issue 19, finding 8: an 8 MB line of a million strings was a 23 MB request and
    about 100 MB of memory. Now: skipped as oversized, memory a small multiple of the line."""
    import tracemalloc

    reasons = [f"{n:05x}" for n in range(1_000_000)]
    line = json.dumps(span_line(attributes={"gen_ai.response.finish_reasons": reasons}),
                      separators=(",", ":"))
    assert 7 << 20 < len(line) < 8 << 20
    export = tmp_path / "otel.jsonl"
    export.write_text(line + "\n")
    metrics = Metrics(Registry())
    records = []
    tracemalloc.start()
    try:
        cli_otel.ExportFollower(export, metrics, from_start=True).poll(100, records.append)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert records == [] and counted(metrics, metrics.cli_skipped) == {"oversized": 1}
    assert peak < 3 * len(line)


def test_a_long_line_of_captured_content_is_read_and_long_lists_are_cut():
    """Content capture puts megabytes of prompt into one string: the line is read (its
    strings cost their size only) and its metadata kept. A list longer than its bound is cut."""
    content = "a prompt, with commas, " * 200_000
    record = span_line(attributes={**span_line()["attributes"], "gen_ai.input.messages":
                                   content, "gen_ai.response.finish_reasons": ["stop"] * 10_000})
    line = json.dumps(record).encode()
    assert len(line) > 4 << 20
    body, changes = converted_or_skipped(line)
    assert changes == {"cut": 1} and len(body) < 4096
    span = span_dicts(decode_body(body))[0]  # sent_body sends it twice: with a link, without
    values = plain_attributes(span["attributes"])["gen_ai.response.finish_reasons"]["values"]
    assert len(values) == cli_otel.MAX_ARRAY


def test_a_record_our_own_code_fails_on_costs_that_record_only(tmp_path, caplog):
    export = tmp_path / "otel.jsonl"
    export.write_text("".join(json.dumps(span_line(spanId=f"{n:016x}")) + "\n"
                              for n in range(1, 4)))
    taken = []

    def take(record):
        if record.key.endswith("2"):
            raise KeyError("a bug")
        taken.append(record)

    metrics = Metrics(Registry())
    assert cli_otel.ExportFollower(export, metrics, from_start=True).poll(100, take) == 3
    assert span_ids(taken) == [f"{1:016x}", f"{3:016x}"]
    assert counted(metrics, metrics.cli_skipped) == {"internal_error": 1}
    assert "line 2 skipped: internal_error (KeyError)" in caplog.text


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_fifo_or_a_device_as_the_export_gives_one_warning(tmp_path, caplog, kind):
    import os

    path = Path("/dev/zero") if kind == "device" else tmp_path / "fifo"
    if kind == "fifo":
        os.mkfifo(path)
    export = follower(path, from_start=True)
    with caplog.at_level("WARNING", logger="tailer"):
        for _ in range(3):
            assert poll(export) == []
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "neither a file nor a folder" in warning and "not followed" in warning


class Clock:
    def __init__(self):
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def test_a_folder_of_5000_old_files_costs_a_few_stats_a_second(tmp_path, monkeypatch):
    """Issue 19, finding 8: 5,000 export files cost 8% of a core idle, each opened at every
    pass. Now only a file written in the last ten minutes is stat'ed at every pass, the
    others in turn, each about every 30 s; none is opened unless its stat changed. Work is
    counted in system calls, one pass a second as the daemon makes when idle."""
    import os
    import time

    folder = tmp_path / "otel"
    folder.mkdir()
    old = time.time() - 3600
    line = json.dumps(metric_line("m.count", 1)) + "\n"
    for number in range(5_000):
        path = folder / f"{number:05d}.jsonl"
        path.write_text(line)
        os.utime(path, (old, old))
    live = folder / "live.jsonl"
    live.write_text(line)
    os.utime(folder, (old, old))  # not just changed: listed again only when it changes
    clock = Clock()
    export = follower(folder, from_start=True, clock=clock)
    assert len(poll(export, 10_000)) == 5_001
    calls = Counter()
    for name in ("stat", "open", "scandir"):
        real = getattr(os, name)
        monkeypatch.setattr(os, name, lambda *a, _real=real, _name=name, **k: (
            calls.update([_name]), _real(*a, **k))[1])
    for _ in range(60):
        clock.now += 1.0
        assert poll(export) == []
    assert calls["open"] == 0 and calls["scandir"] <= 2
    assert calls["stat"] / 60 < 5_000 / cli_otel.COLD_CHECK_S + 10  # was 5,000+ a pass
    # A cold file written again is read within COLD_CHECK_S; the live one at once.
    with open(folder / "01234.jsonl", "a") as handle:
        handle.write(line)
    with open(live, "a") as handle:
        handle.write(line)
    clock.now += 1.0
    assert len(poll(export)) == 1
    found = 0
    for _ in range(int(cli_otel.COLD_CHECK_S) + 1):
        clock.now += 1.0
        found += len(poll(export))
    assert found == 1


def test_skipped_lines_count_against_a_polls_budget(tmp_path):
    """A flood of bad lines is read a budget at a time, as good ones are: a pass stays short."""
    path = tmp_path / "otel.jsonl"
    path.write_text("not json\n" * 5 + json.dumps(span_line()) + "\n")
    export = follower(path, from_start=True)
    taken = []
    assert export.poll(3, taken.append) == 3 and taken == []
    assert export.poll(3, taken.append) == 3 and len(taken) == 1
