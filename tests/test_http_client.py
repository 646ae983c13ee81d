"""The one HTTP client (tailer.outputs.http_client) and the senders on it, against endpoints that
misbehave (tests/bad_endpoint.py): redirects, 413, garbage, trickles, silence, resets.

What must hold: a request ends by its deadline whatever the server does; every failure
is an answer to retry, never an exception that ends a sender's thread; a redirect is never
followed, so credentials go nowhere but the configured URL and only its 2xx counts; a 413
halves the batch down to one unit and only a unit refused alone is given up; a server's
error text cannot forge a log line.
"""

import gzip
import json
import logging
import time

import pytest

from bad_endpoint import (GARBLED_STATUS, HEADER_TOO_LONG, TOO_MANY_HEADERS, BadEndpoint, answer,
                          hang, redirect, reset, trickle)
from tailer.outputs.http_client import Endpoint
from tailer.outputs.otlp import OtlpExporter, Unit
from tailer.outputs.otlp_metrics import MetricsPusher
from tailer.outputs.outbox import Outbox

TOKEN = "Bearer s3cret-token"

FAILURES = {
    "garbled status line": GARBLED_STATUS,
    "101 headers": TOO_MANY_HEADERS,
    "a header of 70 000 bytes": HEADER_TOO_LONG,
    "reset": reset,
    "no answer": hang,
    "one byte every 0.2 s": trickle(0.2),
}


@pytest.mark.parametrize("behaviour", FAILURES.values(), ids=FAILURES.keys())
def test_every_failure_is_an_answer_without_a_status_by_the_deadline(behaviour):
    with BadEndpoint(behaviour) as server:
        endpoint = Endpoint(server.url + "/v1/traces", headers={}, timeout=2.0)
        started = time.monotonic()
        got = endpoint.post(b"{}")
        took = time.monotonic() - started
    assert got.status is None and not got.delivered
    assert got.problem and "\n" not in got.problem
    assert took < 3.0, f"the request took {took:.1f} s for a deadline of 2 s"


def test_a_trickling_answer_is_cut_at_the_deadline_and_says_so():
    with BadEndpoint(trickle(0.2)) as server:
        got = Endpoint(server.url, headers={}, timeout=1.0).post(b"x")
    assert got.problem == "no whole answer within 1 s"


def test_cut_ends_the_request_in_flight_at_once():
    import threading

    with BadEndpoint(hang) as server:
        endpoint = Endpoint(server.url, headers={}, timeout=30.0)
        answers = []
        poster = threading.Thread(target=lambda: answers.append(endpoint.post(b"x")))
        poster.start()
        server.wait_for_requests(1)
        endpoint.cut()
        poster.join(timeout=3)
    assert answers and answers[0].problem == "stopped"


def spans_of(trace: int, count: int, name: str = "s") -> list[Unit]:
    trace_id = f"{trace:032x}"
    return [Unit(trace_id, json.dumps({
        "traceId": trace_id, "spanId": f"{trace:08x}{number:08x}", "name": name, "kind": 1,
        "startTimeUnixNano": "1760000000000000000", "endTimeUnixNano": "1760000001000000000"}))
        for number in range(1, count + 1)]


def outbox_to(url: str, **options) -> Outbox:
    return Outbox(lambda on_result: OtlpExporter(
        url, headers={"Authorization": TOKEN}, resource={"service.name": "t"},
        scope_version="0", on_result=on_result, flush_interval=0.01, **options))


def settle_until(outbox: Outbox, condition, timeout: float = 10.0) -> list[tuple[str, int]]:
    results, deadline = [], time.monotonic() + timeout
    while not condition(results) and time.monotonic() < deadline:
        results += outbox.settle(wait=0.1)
    return results


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_not_followed_the_token_stays_home_and_nothing_counts_as_delivered(
        status, caplog):
    with BadEndpoint() as elsewhere, \
            BadEndpoint(redirect(status, elsewhere.url + "/x/secret-path?sig=abc")) as collector:
        outbox = outbox_to(collector.url + "/v1/traces")
        outbox.submit(spans_of(1, 3))
        collector.wait_for_requests(2)  # tried again after a backoff
        results = settle_until(outbox, lambda results: len(results) >= 2)
        outbox.close(0.0)
    assert elsewhere.requests == []
    assert collector.requests[0].headers["authorization"] == TOKEN
    assert {outcome for outcome, _ in results} == {"retry"}
    assert outbox.pending_units == 3 and len(outbox.to_state()[0]["spans"]) == 3
    assert f"HTTP {status}, a redirect to 127.0.0.1, not followed" in caplog.text
    assert "secret-path" not in caplog.text and "sig=abc" not in caplog.text


def test_a_redirect_to_another_host_is_logged_by_its_host_only(caplog):
    with BadEndpoint(redirect(302, "https://evil.example:8443/steal?token=1")) as collector:
        got = Endpoint(collector.url, headers={"Authorization": TOKEN}, timeout=5).post(b"x")
    assert got.status == 302 and not got.delivered
    assert got.problem == "HTTP 302, a redirect to evil.example, not followed"


def refuse_too_large(connection, request):
    """413 for any request holding the span named `huge`, 200 for the others."""
    (answer(413, b"request entity too large") if b'"huge"' in request.body else answer(200))(
        connection, request)


def test_a_413_halves_the_batch_down_to_the_one_span_refused_alone(caplog):
    traces = [spans_of(trace, 3) for trace in range(1, 9)]
    huge = spans_of(99, 1, name="huge")[0]
    traces[4] = traces[4][:1] + [huge._replace(key=traces[4][0].key)] + traces[4][1:]
    with BadEndpoint(refuse_too_large) as collector:
        outbox = outbox_to(collector.url + "/v1/traces")
        for trace in traces:
            outbox.submit(trace)
        results = settle_until(outbox, lambda results: sum(n for _, n in results) >= 25)
        outbox.close(0.0)
    accepted = [span["spanId"] for request in collector.requests if b'"huge"' not in request.body
                for span in json.loads(request.body)["resourceSpans"][0]["scopeSpans"][0]["spans"]]
    assert sorted(accepted) == sorted(json.loads(s.json)["spanId"] for trace in traces for s in trace
                                      if s is not traces[4][1])
    assert sum(n for outcome, n in results if outcome == "delivered") == 24
    assert [n for outcome, n in results if outcome == "rejected"] == [1]
    assert outbox.pending_units == 0
    [refusal] = [r for r in caplog.records if "rejected" in r.getMessage()]
    assert "HTTP 413" in refusal.getMessage() and "1 spans dropped" in refusal.getMessage()


def test_a_collectors_error_text_cannot_forge_a_log_line(caplog):
    body = json.dumps({"message": "bad\n2026-12-01 19:00:00,000 ERROR forged \x1b]0;TITLE\x07"}).encode()
    with BadEndpoint(answer(400, body)) as collector:
        outbox = outbox_to(collector.url + "/v1/traces")
        outbox.submit(spans_of(1, 1))
        settle_until(outbox, lambda results: results)
        outbox.close(0.0)
    [line] = [r.getMessage() for r in caplog.records if "rejected" in r.getMessage()]
    assert "\n" not in line and "\x1b" not in line and "\x07" not in line
    assert "\\x1b]0;TITLE\\x07" in line


def test_the_metrics_push_outlives_garbage_and_pushes_again_once_the_endpoint_is_healthy(caplog):
    caplog.set_level(logging.INFO, logger="tailer.otlp")
    with BadEndpoint(GARBLED_STATUS) as endpoint:
        pusher = MetricsPusher(endpoint.url + "/v1/metrics", headers={}, interval_s=60)
        pusher.offer(gzip.compress(b"first"))
        endpoint.wait_for_requests(2)  # the thread lives on and tries again
        endpoint.behaviour = TOO_MANY_HEADERS
        endpoint.wait_for_requests(3)
        endpoint.behaviour = answer(200)
        endpoint.wait_for_requests(4)
        pusher.offer(gzip.compress(b"second"))
        endpoint.wait_for_requests(5)
        assert pusher.close(gzip.compress(b"last"), timeout=5)
    assert [request.body for request in endpoint.requests[-2:]] == [b"second", b"last"]
    assert "works again" in caplog.text

