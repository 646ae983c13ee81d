"""Tests for tailer.outputs.otlp: encoding, delivery, retries and the queue.

The collector is replaced by tests/otlp_sink.py (no collector runs here); it decodes every
payload with the official opentelemetry-proto definitions. Waiting between retries is
replaced by a recording sleep and a fake clock, so no test waits for real backoff.
"""

import gzip
import json
import logging
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest
from google.protobuf import json_format

from otlp_sink import (OtlpSink, Reply, decode_body, otlp_sink, plain_attributes,  # noqa: F401 (a fixture)
                       span_dicts)
from tailer.outputs.http_client import parse_retry_after
from tailer.outputs.otlp import (OtlpExporter, Unit, attributes_json, encode_request, parse_headers,
                         parse_resource_attributes, traces_url)

CANARY = "CANARY-7f3e-do-not-export"
RESOURCE = {"service.name": "hydrafusion", "host.name": "test-box"}


def span_fields(trace: int, number: int, parent: int = 0, **fields) -> dict:
    """A minimal span in OTLP JSON shape, ids derived from small numbers."""
    return {"traceId": f"{trace:032x}", "spanId": f"{number:016x}", "parentSpanId": f"{parent:016x}" if parent else "",
            "name": f"span {number}", "kind": 1, "startTimeUnixNano": "1760000000000000000",
            "endTimeUnixNano": "1760000001500000000", **fields}


def span(trace: int, number: int, parent: int = 0, **fields) -> Unit:
    return wire(span_fields(trace, number, parent, **fields))


def wire(fields: dict) -> Unit:
    """The span as tailer.outputs.spans writes them: text as it is, not \\u-escaped."""
    return Unit(fields["traceId"], json.dumps(fields, ensure_ascii=False))


def trace_of(trace: int, size: int) -> list[Unit]:
    return [span(trace, trace * 100 + index) for index in range(size)]


class FakeTime:
    """Stands in for time.sleep: records the waits instead of waiting."""

    def __init__(self):
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)


@pytest.fixture
def make_exporter():
    """Builds exporters that report into a list (exporter.results) and are closed afterwards."""
    made = []

    def make(url: str, **options) -> OtlpExporter:
        results = []
        settings = {"headers": {}, "resource": RESOURCE, "scope_version": "0.1.0", "flush_interval": 0.05,
                    "on_result": lambda outcome, spans: results.append((outcome, len(spans))), **options}
        exporter = OtlpExporter(url, **settings)
        exporter.results = results
        made.append(exporter)
        return exporter

    yield make
    for exporter in made:
        exporter.close(timeout=2)


def closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1/traces"


def test_encoded_request_round_trips_through_the_official_proto():
    root = span_fields(7, 1, attributes=[
        {"key": "gen_ai.request.model", "value": {"stringValue": "hydrafusion"}},
        {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "12345678901"}},
        {"key": "hydrafusion.aiu", "value": {"doubleValue": 14.72}},
        {"key": "hydrafusion.compound", "value": {"boolValue": True}},
    ], status={"code": 2})
    leg = span_fields(7, 2, parent=1, name="judge gpt-5.6-sol", kind=3,
               events=[{"timeUnixNano": "1760000001000000000", "name": "gen_ai.evaluation.result",
                        "attributes": [{"key": "gen_ai.evaluation.score.label", "value": {"stringValue": "pass"}}]}],
               links=[{"traceId": f"{7:032x}", "spanId": f"{3:016x}"}])
    body = encode_request([wire(root), wire(leg)], RESOURCE, "hydrafusion-tailer", "0.1.0")

    assert body[:2] == b"\x1f\x8b"
    decoded = span_dicts(decode_body(gzip.decompress(body)))
    # An empty parentSpanId is proto's default value, so decoding leaves it out.
    expected_root = {key: value for key, value in root.items() if key != "parentSpanId"}
    assert [{k: v for k, v in s.items() if k not in ("resource", "scope")} for s in decoded] == [expected_root, leg]
    assert decoded[0]["resource"] == RESOURCE
    assert decoded[0]["scope"] == {"name": "hydrafusion-tailer", "version": "0.1.0"}


def test_attribute_values_of_every_type_and_awkward_text_survive_the_wire():
    awkward = 'quote " backslash \\ tab \t newline \n nul \0 line-sep \u2028 \u00fcn\u00efc\u00f8de \U0001f642'
    values = {"text": awkward, "count": 12345678901, "sum": 0.1 + 0.2, "tiny": 1e-7,
              "flag": False, "absent": None}
    attributes = json.loads(f"[{attributes_json(values)}]")
    body = encode_request([wire(span_fields(7, 1, attributes=attributes))],
                          {"service.name": awkward}, awkward, "0.1.0")

    [decoded] = span_dicts(decode_body(gzip.decompress(body)))
    assert plain_attributes(decoded["attributes"]) == {
        "text": awkward, "count": 12345678901, "sum": 0.1 + 0.2, "tiny": 1e-7, "flag": False}
    assert decoded["resource"] == {"service.name": awkward}
    assert decoded["scope"]["name"] == awkward


def test_a_lone_surrogate_from_a_damaged_log_does_not_spoil_the_batch():
    body = encode_request([span(1, 1, name="half \ud800 pair"), span(1, 2)], RESOURCE, "s", "1")
    names = [s["name"] for s in span_dicts(decode_body(gzip.decompress(body)))]
    assert names == ["half ? pair", "span 2"]


def test_a_malformed_span_is_refused_by_the_decoder():
    with pytest.raises(json_format.ParseError):
        decode_body(gzip.decompress(encode_request([span(1, 1, colour="red")], RESOURCE, "s", "1")))
    with pytest.raises(ValueError):
        decode_body(gzip.decompress(encode_request([span(1, 1, spanId="abcd")], RESOURCE, "s", "1")))


def test_the_sink_answers_400_to_a_malformed_payload_and_fails_the_test():
    with pytest.raises(AssertionError, match="invalid payloads"):
        with OtlpSink() as sink:
            request = urllib.request.Request(sink.url, data=b'{"resourceSpans":[{"bogus":1}]}', method="POST")
            with pytest.raises(urllib.error.HTTPError) as answer:
                urllib.request.urlopen(request, timeout=5)
            assert answer.value.code == 400


def test_exporter_posts_gzipped_json_with_the_configured_headers(otlp_sink, make_exporter):
    exporter = make_exporter(otlp_sink.url, headers={"authorization": "Bearer token"})
    exporter.submit(trace_of(1, 2))

    assert exporter.flush(timeout=5)
    headers = otlp_sink.request_headers[0]
    assert headers["content-type"] == "application/json"
    assert headers["content-encoding"] == "gzip"
    assert headers["user-agent"] == "hydrafusion-tailer/0.1.0"
    assert headers["authorization"] == "Bearer token"
    assert [s["spanId"] for s in otlp_sink.spans()] == [f"{100:016x}", f"{101:016x}"]
    assert exporter.results == [("delivered", 2)]


def test_spans_of_one_trace_travel_in_one_request(otlp_sink, make_exporter):
    exporter = make_exporter(otlp_sink.url, max_batch_spans=4)
    exporter.submit(trace_of(1, 3) + trace_of(2, 3) + trace_of(3, 1) + trace_of(4, 6))

    assert exporter.flush(timeout=5)
    batches = [[s["traceId"][-1] for s in span_dicts(request)] for request in otlp_sink.requests]
    # Trace 4 alone exceeds the batch size, so it is the only one split.
    assert batches == [list("111"), list("2223"), list("4444"), list("44")]


@pytest.mark.parametrize("status", [429, 502, 503, 504])
def test_retryable_status_is_retried_with_backoff_until_delivered(otlp_sink, make_exporter, status):
    fake = FakeTime()
    otlp_sink.script(status, status, 200)
    exporter = make_exporter(otlp_sink.url, sleep=fake.sleep, rng=lambda: 0.5)
    exporter.submit(trace_of(1, 2))

    assert exporter.flush(timeout=5)
    assert fake.sleeps == [0.5, 1.0]  # half of the 1 s and 2 s backoff, by the injected jitter
    assert exporter.results == [("retry", 2), ("retry", 2), ("delivered", 2)]
    assert len(otlp_sink.raw_bodies) == 3
    assert len(otlp_sink.spans()) == 2


def test_retry_after_is_honoured(otlp_sink, make_exporter):
    fake = FakeTime()
    otlp_sink.script(Reply(503, retry_after="7"), 200)
    exporter = make_exporter(otlp_sink.url, sleep=fake.sleep, rng=lambda: 0.5)
    exporter.submit(trace_of(1, 1))

    assert exporter.flush(timeout=5)
    assert fake.sleeps == [7.0]
    assert exporter.results == [("retry", 1), ("delivered", 1)]


def test_a_retry_after_of_zero_or_in_the_past_waits_the_backoff_step(otlp_sink, make_exporter):
    fake = FakeTime()
    past = "Wed, 21 Oct 2015 07:28:00 GMT"
    otlp_sink.script(Reply(429, retry_after="0"), Reply(503, retry_after=past),
                     Reply(429, retry_after="0"), 200)
    exporter = make_exporter(otlp_sink.url, sleep=fake.sleep, rng=lambda: 0.5)
    exporter.submit(trace_of(1, 1))

    assert exporter.flush(timeout=5)
    assert fake.sleeps == [1.0, 2.0, 4.0]


def test_a_collector_saying_retry_at_once_is_not_flooded(otlp_sink, make_exporter):
    """Counted against the real clock: 429 with Retry-After: 0 for 2.5 s."""
    otlp_sink.script(*[Reply(429, retry_after="0")] * 10_000)
    stopped = threading.Event()  # a sleep that ends early once the test is done
    exporter = make_exporter(otlp_sink.url, sleep=stopped.wait)
    exporter.submit(trace_of(1, 1))

    time.sleep(2.5)
    requests = len(otlp_sink.raw_bodies)
    exporter.close(timeout=0)
    stopped.set()
    assert 1 <= requests <= 3  # at 0 s, 1 s and 3 s


def test_parse_retry_after_reads_seconds_and_http_dates():
    now = 1445412480.0  # Wed, 21 Oct 2015 07:28:00 GMT
    assert parse_retry_after("120", now) == 120.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now) == 30.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now) == 0.0
    assert parse_retry_after("soon", now) is None
    assert parse_retry_after(None, now) is None


@pytest.mark.parametrize("status", [400, 500])
def test_other_errors_are_rejected_once_and_logged_without_span_content(otlp_sink, make_exporter, caplog, status):
    message = "field is invalid " + "x" * 300
    otlp_sink.script(Reply(status, json.dumps({"code": 3, "message": message}).encode()))
    exporter = make_exporter(otlp_sink.url, sleep=FakeTime().sleep)
    caplog.set_level(logging.WARNING, logger="tailer.otlp")
    exporter.submit([span(1, 1, name=CANARY), span(1, 2)])

    assert exporter.flush(timeout=5)
    assert exporter.results == [("rejected", 2)]
    assert len(otlp_sink.raw_bodies) == 1
    [record] = caplog.records
    assert f"HTTP {status}" in record.getMessage()
    assert message[:200] in record.getMessage() and message[:201] not in record.getMessage()
    assert CANARY not in caplog.text


def test_partial_success_is_logged_and_not_retried(otlp_sink, make_exporter, caplog):
    answer = {"partialSuccess": {"rejectedSpans": "1", "errorMessage": "span too old"}}
    otlp_sink.script(Reply(200, json.dumps(answer).encode()))
    exporter = make_exporter(otlp_sink.url)
    caplog.set_level(logging.WARNING, logger="tailer.otlp")
    exporter.submit(trace_of(1, 3))

    assert exporter.flush(timeout=5)
    assert sorted(exporter.results) == [("delivered", 2), ("rejected", 1)]
    assert len(otlp_sink.raw_bodies) == 1
    [record] = caplog.records
    assert "span too old" in record.getMessage()


def test_unreachable_collector_is_retried_until_it_answers(make_exporter, caplog):
    """An outage of any length loses nothing: backoff is capped at 60 s and never gives up."""
    fake = FakeTime()
    url = closed_port_url()
    port = int(url.split(":")[2].split("/")[0])
    collector = []

    def sleep(seconds):
        fake.sleep(seconds)
        if len(fake.sleeps) == 12:
            collector.append(OtlpSink(port=port).__enter__())  # the collector is back

    exporter = make_exporter(url, sleep=sleep, rng=lambda: 1.0)
    caplog.set_level(logging.WARNING, logger="tailer.otlp")
    exporter.submit([span(1, 1, name=CANARY)])
    try:
        assert exporter.flush(timeout=10)
    finally:
        for sink in collector:
            sink.__exit__(None, None, None)
    assert fake.sleeps == [1, 2, 4, 8, 16, 32, 60, 60, 60, 60, 60, 60]
    assert exporter.results == [("retry", 1)] * 12 + [("delivered", 1)]
    assert len(collector[0].spans()) == 1
    assert len(caplog.records) == 1  # one warning when retrying starts
    assert CANARY not in caplog.text


def test_close_during_an_outage_leaves_the_spans_to_the_caller(make_exporter):
    retrying = threading.Event()
    exporter = make_exporter(closed_port_url(), sleep=lambda seconds: retrying.set(), rng=lambda: 0.0)
    exporter.submit(trace_of(1, 2))
    assert retrying.wait(5)
    exporter.close(timeout=0.5)
    assert {outcome for outcome, _ in exporter.results} == {"retry"}


def test_queue_overflow_drops_the_oldest_waiting_spans(otlp_sink, make_exporter):
    retrying, release = threading.Event(), threading.Event()

    def held_sleep(seconds):
        retrying.set()
        release.wait(5)

    otlp_sink.script(503)
    exporter = make_exporter(otlp_sink.url, max_queued_spans=10, sleep=held_sleep, rng=lambda: 0.0)
    exporter.submit(trace_of(1, 2))
    assert retrying.wait(5)
    for trace in (2, 3, 4):  # 12 spans wait behind the retrying batch: trace 2 must go
        exporter.submit(trace_of(trace, 4))

    assert not exporter.flush(timeout=0.01)
    release.set()
    assert exporter.flush(timeout=5)
    assert sorted({int(s["traceId"], 16) for s in otlp_sink.spans()}) == [1, 3, 4]
    assert exporter.results == [("retry", 2), ("dropped", 4), ("delivered", 2), ("delivered", 8)]


def test_close_sends_what_is_queued_and_stops_the_worker(otlp_sink, make_exporter):
    exporter = make_exporter(otlp_sink.url, flush_interval=60)
    exporter.submit(trace_of(1, 2))

    exporter.close(timeout=5)
    assert len(otlp_sink.spans()) == 2
    assert "otlp-exporter" not in [thread.name for thread in threading.enumerate()]


def test_a_failing_callback_does_not_stop_the_worker(otlp_sink, make_exporter):
    def broken(outcome, spans):
        raise RuntimeError("metrics are broken")

    exporter = make_exporter(otlp_sink.url, on_result=broken)
    exporter.submit(trace_of(1, 1))
    assert exporter.flush(timeout=5)
    exporter.submit(trace_of(2, 1))
    assert exporter.flush(timeout=5)
    assert len(otlp_sink.spans()) == 2


@pytest.mark.parametrize("endpoint, expected", [
    ("http://localhost:4318", "http://localhost:4318/v1/traces"),
    ("http://localhost:4318/", "http://localhost:4318/v1/traces"),
    ("https://otlp.example.com/otlp", "https://otlp.example.com/otlp/v1/traces"),
    ("http://tempo:4318/v1/traces", "http://tempo:4318/v1/traces"),
])
def test_traces_url(endpoint, expected):
    assert traces_url(endpoint) == expected


@pytest.mark.parametrize("endpoint", ["localhost:4318", "ftp://host", "http://"])
def test_traces_url_refuses_what_is_not_http(endpoint):
    with pytest.raises(ValueError):
        traces_url(endpoint)


@pytest.mark.parametrize("endpoint", ["http://user:hunter2@localhost:4318",
                                      "http://hunter2@localhost:4318", "ftp://u:hunter2@x"])
def test_traces_url_refuses_a_user_and_password_without_quoting_them(endpoint):
    """Taken, they were never sent (the client connects to the host alone, so every export
    was refused unauthenticated) and the start line logged them in the clear."""
    with pytest.raises(ValueError, match="OTEL_EXPORTER_OTLP_HEADERS") as refused:
        traces_url(endpoint)
    assert "hunter2" not in str(refused.value)


def test_parse_headers_decodes_values_and_skips_malformed_entries(caplog):
    parsed = parse_headers("api-key=secret%20value, x-tenant = a=b ,no-equals-secret,=v,")
    assert parsed == {"api-key": "secret value", "x-tenant": "a=b"}
    assert "secret" not in caplog.text


def test_a_header_http_cannot_carry_is_left_out_not_retried_forever(caplog):
    """http.client refuses these, or cannot encode them: kept, every export would fail."""
    parsed = parse_headers("ok=1,x=secret%0Ay,y=secret%0D,z=secret%00,api key=secret,"
                           "\u00e9=secret,v=\u20ac,latin=caf\u00e9,tab=a%09b")
    assert parsed == {"ok": "1", "latin": "caf\u00e9", "tab": "a\tb"}
    assert caplog.text.count("HTTP cannot carry") == 6
    assert "secret" not in caplog.text


def test_parse_resource_attributes():
    parsed = parse_resource_attributes("service.name=hydrafusion,deployment.environment=dev%2Cblue")
    assert parsed == {"service.name": "hydrafusion", "deployment.environment": "dev,blue"}
    assert parse_resource_attributes("") == {}
