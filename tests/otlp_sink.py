"""A local OTLP/HTTP trace receiver for tests, standing in for a collector or Tempo.

Payloads are decoded with the official opentelemetry-proto definitions rather than read as
plain JSON, so a payload this sink accepts is one a real collector accepts too. Protobuf's
JSON mapping expects bytes as base64 while OTLP/HTTP JSON sends ids as hex, so ids are
converted before parsing (and back afterwards, for assertions).

A body that does not decode is answered 400 and recorded in `errors`; leaving the `with`
block (or the `otlp_sink` fixture) then fails the test.
"""

import base64
import gzip
import json
import ssl
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import NamedTuple

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

ID_BYTES = {"traceId": 16, "spanId": 8, "parentSpanId": 8}
PLAIN_VALUES = {"stringValue": str, "intValue": int, "doubleValue": float, "boolValue": bool}


def _convert_ids(node, convert):
    """Applies convert(key, value) to every id field, wherever it sits (spans, links)."""
    if isinstance(node, dict):
        return {key: convert(key, value) if key in ID_BYTES else _convert_ids(value, convert)
                for key, value in node.items()}
    if isinstance(node, list):
        return [_convert_ids(item, convert) for item in node]
    return node


def _hex_to_base64(key: str, value: str) -> str:
    raw = bytes.fromhex(value)
    if len(raw) != ID_BYTES[key] and not (key == "parentSpanId" and not raw):
        raise ValueError(f"{key} {value!r} is not {ID_BYTES[key]} bytes of hex")
    return base64.b64encode(raw).decode()


def _base64_to_hex(key: str, value: str) -> str:
    return base64.b64decode(value).hex()


def decode_body(body: bytes) -> ExportTraceServiceRequest:
    """Parses an uncompressed OTLP JSON body strictly (unknown fields are errors)."""
    document = _convert_ids(json.loads(body), _hex_to_base64)
    return json_format.Parse(json.dumps(document), ExportTraceServiceRequest(), ignore_unknown_fields=False)


def decode_metrics_body(body: bytes) -> ExportMetricsServiceRequest:
    """Parses an uncompressed OTLP JSON metrics body strictly (unknown fields are errors)."""
    return json_format.Parse(body, ExportMetricsServiceRequest(), ignore_unknown_fields=False)


def plain_attributes(key_values: list[dict]) -> dict:
    """{"key": k, "value": {"intValue": "3"}} entries as {k: 3}, for readable assertions."""
    result = {}
    for key_value in key_values:
        kind, value = next(iter(key_value.get("value", {}).items()), (None, None))
        result[key_value["key"]] = PLAIN_VALUES[kind](value) if kind in PLAIN_VALUES else value
    return result


def span_dicts(request: ExportTraceServiceRequest) -> list[dict]:
    """The request's spans in OTLP JSON shape (hex ids, integer enums), each with its
    `resource` attributes as plain values and its `scope`."""
    document = json_format.MessageToDict(request, use_integers_for_enums=True)
    spans = []
    for resource_spans in _convert_ids(document, _base64_to_hex).get("resourceSpans", []):
        resource = plain_attributes(resource_spans.get("resource", {}).get("attributes", []))
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                spans.append({**span, "resource": resource, "scope": scope_spans.get("scope", {})})
    return spans


class Reply(NamedTuple):
    """A scripted answer; OtlpSink.script() also takes a bare status code."""
    status: int = 200
    body: bytes = b""
    retry_after: str | None = None


class OtlpSink:
    """An OTLP/HTTP receiver on 127.0.0.1 (free port) serving from its own thread.

    Every POST to /v1/traces is decompressed (when gzip), kept in `raw_bodies` with its headers
    (names lowercased) in `request_headers`, and decoded. It is answered with the next scripted Reply, or 200 once
    the script is used up; only requests answered 2xx count as received spans.
    A POST to /v1/metrics is decoded as metrics, kept in `metric_bodies` (with its headers
    in `metric_headers`) and `metric_requests`, and answered 200.
    """

    def __init__(self, tls=None, port: int = 0):
        """tls: (certificate file, key file) to serve https instead of http; port: a
        given one, for a backend that comes up where a sender already points."""
        self.raw_bodies: list[bytes] = []
        self.request_headers: list[dict[str, str]] = []
        self.requests: list[ExportTraceServiceRequest] = []
        self.metric_bodies: list[bytes] = []
        self.metric_headers: list[dict[str, str]] = []
        self.metric_requests: list[ExportMetricsServiceRequest] = []
        self.errors: list[str] = []
        self._replies: deque[Reply] = deque()
        self._changed = threading.Condition()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        self._server.sink = self
        self._scheme = "http"
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*map(str, tls))
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
            self._scheme = "https"
        # A short poll interval keeps shutdown (once per test) quick.
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="otlp-sink", daemon=True)

    @property
    def endpoint(self) -> str:
        return f"{self._scheme}://127.0.0.1:{self._server.server_address[1]}"

    @property
    def url(self) -> str:
        return self.endpoint + "/v1/traces"

    def script(self, *replies: int | Reply) -> None:
        """Answer the next requests with these replies, in order (e.g. 503, 503, 200)."""
        with self._changed:
            self._replies.extend(Reply(reply) if isinstance(reply, int) else reply for reply in replies)

    def spans(self) -> list[dict]:
        """All spans of accepted requests, in arrival order (see span_dicts)."""
        with self._changed:
            return [span for request in self.requests for span in span_dicts(request)]

    def wait_for_spans(self, count: int, timeout: float = 5.0) -> list[dict]:
        """Blocks until at least count spans were accepted; fails the test on timeout."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.spans()) >= count, timeout):
                raise AssertionError(f"expected {count} spans, received {len(self.spans())}")
            return self.spans()

    def wait_for_roots(self, fusion_ids: set[str], timeout: float = 5.0) -> list[dict]:
        """Blocks until a root span of each of `fusion_ids` was accepted; fails the test on
        timeout. Where the tailer was killed and restarted, spans sent again count twice in
        wait_for_spans, so a count can be reached while a turn's spans are still on the way."""
        def roots() -> set[str]:
            return {plain_attributes(span["attributes"]).get("hydrafusion.fusion_id")
                    for span in self.spans() if "parentSpanId" not in span}

        with self._changed:
            if not self._changed.wait_for(lambda: fusion_ids <= roots(), timeout):
                raise AssertionError(f"no root span yet of {sorted(fusion_ids - roots())}")
            return self.spans()

    def receive(self, headers: dict[str, str], body: bytes) -> Reply:
        """Handles one POST body; called by the server thread."""
        with self._changed:
            try:
                request = decode_body(self._keep(headers, body, self.raw_bodies, self.request_headers))
            except Exception as error:  # whatever the cause, the payload is not valid OTLP
                self.errors.append(f"{type(error).__name__}: {error}")
                self._changed.notify_all()
                return Reply(400, json.dumps({"code": 3, "message": str(error)}).encode())
            reply = self._replies.popleft() if self._replies else Reply()
            if 200 <= reply.status < 300:
                self.requests.append(request)
            self._changed.notify_all()
            return reply

    def receive_metrics(self, headers: dict[str, str], body: bytes) -> Reply:
        """Handles one metrics POST body (answered 200 when it decodes)."""
        with self._changed:
            try:
                body = self._keep(headers, body, self.metric_bodies, self.metric_headers)
                self.metric_requests.append(decode_metrics_body(body))
            except Exception as error:  # whatever the cause, the payload is not valid OTLP
                self.errors.append(f"metrics: {type(error).__name__}: {error}")
                return Reply(400, json.dumps({"code": 3, "message": str(error)}).encode())
            finally:
                self._changed.notify_all()
            return Reply()

    @staticmethod
    def _keep(headers: dict[str, str], body: bytes, bodies: list, kept_headers: list) -> bytes:
        """The body decompressed, kept with its headers."""
        if headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        bodies.append(body)
        kept_headers.append(headers)
        return body

    def wait_for_metrics(self, count: int, timeout: float = 10.0) -> list:
        """Blocks until at least count metrics requests arrived; fails the test on timeout."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.metric_requests) >= count, timeout):
                raise AssertionError(f"expected {count} metrics requests, got {len(self.metric_requests)}")
            return list(self.metric_requests)

    def __enter__(self) -> "OtlpSink":
        self._thread.start()
        return self

    def __exit__(self, error_type, error, traceback) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
        if self.errors and error_type is None:
            raise AssertionError("OTLP sink received invalid payloads: " + "; ".join(self.errors))


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        headers = {name.lower(): value for name, value in self.headers.items()}
        if self.path == "/v1/traces":
            reply = self.server.sink.receive(headers, body)
        elif self.path == "/v1/metrics":
            reply = self.server.sink.receive_metrics(headers, body)
        else:
            reply = Reply(404)
        self.send_response(reply.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply.body)))
        if reply.retry_after is not None:
            self.send_header("Retry-After", reply.retry_after)
        self.end_headers()
        self.wfile.write(reply.body)

    def log_message(self, format, *args) -> None:
        pass  # keep test output clean


@pytest.fixture
def otlp_sink():
    """A running OtlpSink (import this name into a test module or conftest.py to use it)."""
    with OtlpSink() as sink:
        yield sink
