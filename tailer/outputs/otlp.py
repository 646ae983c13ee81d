"""Export spans over OTLP/HTTP with JSON encoding, using only the standard library.

Spans arrive ready-made as OTLP/JSON text (see tailer.outputs.spans). This module only groups them
into batches, gzips them, posts them from a background thread so the tailer never waits on
the network, retries what the OTLP specification says may be retried, and tells the caller
what became of every span through on_result.

A collector that is down is retried for as long as it takes: the queue is bounded
(max_queued_spans, oldest dropped first) and the caller keeps what is unsettled in its
checkpoint, so an outage of hours loses nothing as long as the queue holds.

Nothing logged here ever contains span content: messages carry counts, HTTP statuses and
the collector's own error text.
"""

from __future__ import annotations

import collections
import gzip
import json
import logging
import math
import os
import random
import stat
import threading
import time
import urllib.parse
from typing import TYPE_CHECKING, Callable, NamedTuple

from .http_answer import TOO_LARGE, Answer, can_carry, one_line

if TYPE_CHECKING:
    import ssl

log = logging.getLogger("tailer.otlp")

SCOPE_NAME = "hydrafusion-tailer"
RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})
FIRST_BACKOFF = 1.0
MAX_BACKOFF = 60.0


def retryable(answer: Answer) -> bool:
    """Whether an answer is a failure to try again: no answer from the configured URL, or a
    status OTLP says to retry."""
    return answer.unanswered or answer.status in RETRYABLE_STATUSES


class Unit(NamedTuple):
    """One item an exporter sends: the key it is grouped and sent under (a span's trace id),
    and its OTLP/JSON object text. The CLI relay's metric points travel as units too."""

    key: str
    json: str


def traces_url(endpoint: str) -> str:
    """The traces URL for an OTLP/HTTP endpoint: a base URL gets `/v1/traces` appended."""
    return _signal_url(endpoint, "/v1/traces")


def metrics_url(endpoint: str) -> str:
    """The metrics URL for an OTLP/HTTP endpoint, likewise."""
    return _signal_url(endpoint, "/v1/metrics")


def _signal_url(endpoint: str, path: str) -> str:
    url = endpoint.strip().rstrip("/")
    parts = urllib.parse.urlsplit(url)
    if parts.username is not None:  # never sent, it was logged in the start line: not quoted
        raise ValueError("OTLP endpoint has a user:password, which is not sent: give it as "
                         "a header in OTEL_EXPORTER_OTLP_HEADERS (Authorization=Basic%20...)")
    if not is_http_url(parts):
        raise ValueError(f"OTLP endpoint is not an http(s) URL: {endpoint!r}")
    return url if parts.path.endswith(path) else url + path


def is_http_url(parts: urllib.parse.SplitResult) -> bool:
    """An http(s) URL with a host and a port, if any, that a request can go to. Any other
    (port 99999, a control character or undecodable bytes in the host) would be refused by
    each request alone: every export dropped or retried, the metrics push's a traceback."""
    try:
        host, _ = parts.hostname, parts.port  # .port raises ValueError on a bad one
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(host) and host.isprintable()


def parse_headers(value: str) -> dict[str, str]:
    """Headers from OTEL_EXPORTER_OTLP_HEADERS ("k=v,k2=v2", values percent-encoded). One
    that HTTP cannot carry (a newline decoded into its value, a name beyond ASCII) is left
    out as a malformed entry is: sent, it would fail every export, retried forever."""
    headers = {}
    for name, text in _parse_key_values(value, "OTLP headers").items():
        if can_carry(name, text):
            headers[name] = text
        else:  # named neither: header values are often credentials
            log.warning("ignoring an OTLP header that HTTP cannot carry (a control character, "
                        "or a name that is not a plain token)")
    return headers


def parse_resource_attributes(value: str) -> dict[str, str]:
    """Attributes from OTEL_RESOURCE_ATTRIBUTES (same format as the headers)."""
    return _parse_key_values(value, "resource attributes")


def _parse_key_values(value: str, what: str) -> dict[str, str]:
    result = {}
    for entry in value.split(","):
        if not entry.strip():
            continue
        key, equals, raw_value = entry.partition("=")
        key = key.strip()
        if not equals or not key:
            # The entry itself stays out of the log: header values are often credentials.
            log.warning("ignoring a malformed entry in the %s", what)
            continue
        result[key] = urllib.parse.unquote(raw_value.strip())
    return result


def encode_request(spans: list[Unit], resource: dict[str, str], scope_name: str, scope_version: str) -> bytes:
    """A gzipped ExportTraceServiceRequest in OTLP JSON holding spans under one resource and scope."""
    text = (
        f'{{"resourceSpans":[{{"resource":{{"attributes":[{attributes_json(resource)}]}},'
        f'"scopeSpans":[{{"scope":{{"name":{json_string(scope_name)},'
        f'"version":{json_string(scope_version)}}},'
        f'"spans":[{",".join(span.json for span in spans)}]}}]}}]}}'
    )
    # A lone surrogate read from a damaged log would otherwise make the whole batch invalid UTF-8.
    # Level 1: span JSON shrinks about as well as at the default 9, several times faster.
    return gzip.compress(text.encode("utf-8", "replace"), compresslevel=1)


# The range of OTLP's int64 fields (intValue). Times are uint64, but backends read them as
# int64 nanoseconds too (the year 2262), so they are kept to 0..INT64_MAX.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def unix_nano(time_ns: int) -> int:
    """A span or event time as OTLP and its backends can carry it."""
    return min(max(time_ns, 0), INT64_MAX)


def attributes_json(values: dict) -> str:
    """The items of an OTLP/JSON key-value list; None values are left out rather than sent empty,
    and a tuple is sent as an array of strings.

    The parser keeps every value in range (tailer.copilot.event_values); should one slip through all the
    same (a sum over thousands of legs), an integer is clamped to int64 and a non-finite
    float is left out, because one value out of range makes the collector refuse the whole
    batch, other sessions' turns with it.

    Written as one loop over the values with each key's text remembered: spans carry about
    sixteen attributes each, and this is the innermost loop of a backfill.
    """
    items = []
    for key, value in values.items():
        if value is None:
            continue
        head = _KEY_HEADS.get(key)
        if head is None:
            head = _KEY_HEADS[key] = f'{{"key":{json_string(key)},"value":'
        kind = type(value)
        if kind is str:
            items.append(f'{head}{{"stringValue":{json_string(value)}}}}}')
        elif kind is bool:
            items.append(f'{head}{{"boolValue":{"true" if value else "false"}}}}}')
        elif kind is int:
            if not INT64_MIN <= value <= INT64_MAX:
                value = INT64_MAX if value > 0 else INT64_MIN
            items.append(f'{head}{{"intValue":"{value}"}}}}')
        elif kind is float:
            if math.isfinite(value):
                items.append(f'{head}{{"doubleValue":{value!r}}}}}')
        elif kind is tuple:
            strings = ",".join(f'{{"stringValue":{json_string(str(item))}}}' for item in value)
            items.append(f'{head}{{"arrayValue":{{"values":[{strings}]}}}}}}')
        else:
            items.append(f'{head}{{"stringValue":{json_string(str(value))}}}}}')
    return ",".join(items)


# Attribute keys are the few names the tailer writes, plus the resource's.
_KEY_HEADS: dict[str, str] = {}

# A JSON string literal as json.dumps(ensure_ascii=False) writes it: every string of a
# request is escaped here.
json_string = json.encoder.encode_basestring


def tls_context(cafile: str | None) -> ssl.SSLContext | None:
    """The TLS settings for an https endpoint whose certificate is signed by the CA in
    cafile (OTEL_EXPORTER_OTLP_CERTIFICATE); None: the system's trusted CAs.
    Raises ValueError when the file cannot be read as PEM certificates."""
    if not cafile:
        return None
    import ssl  # here, as http_client's imports: a run with every export off never pays for TLS

    try:
        if not stat.S_ISREG(os.stat(cafile).st_mode):  # a FIFO blocked the start for good
            raise ValueError(f"cannot read the CA certificate {cafile}: not a regular file")
        return ssl.create_default_context(cafile=cafile)
    except (OSError, ssl.SSLError) as error:
        raise ValueError(f"cannot read the CA certificate {cafile}: "
                         f"{getattr(error, 'strerror', None) or error}") from None


def error_text(body: bytes) -> str:
    """The collector's message from an error body (a JSON google.rpc.Status, or plain text),
    as one printable line."""
    text = body.decode("utf-8", "replace")
    try:
        status = json.loads(text)
        if isinstance(status, dict) and isinstance(status.get("message"), str):
            text = status["message"]
    except ValueError:
        pass
    return one_line(text)


class SpanQueue:
    """The spans waiting for the exporter's worker, as per-trace units in submission order.

    Units are numbered as they come, so a flush can tell when everything up to a point has
    been settled, whatever became of each unit. Past max_queued_spans the oldest units are
    dropped, because during a long outage fresh traces are worth more than stale ones; the
    dropped spans wait in `take_dropped` for the worker to report.
    """

    def __init__(self, *, max_batch_spans: int, max_queued_spans: int, flush_interval: float):
        self._max_batch_spans = max_batch_spans
        self._max_queued_spans = max_queued_spans
        self._flush_interval = flush_interval
        self._units: collections.deque[tuple[int, list[Unit]]] = collections.deque()
        self._spans = 0
        self._next_number = 0
        self._in_flight_number: int | None = None
        self._dropped: list[Unit] = []
        self._flush_waiters = 0
        self._closing = False
        self._lock = threading.Condition()

    def put(self, spans: list[Unit]) -> None:
        """Queue spans, a trace split across units only when it alone exceeds max_batch_spans."""
        traces: dict[str, list[Unit]] = {}
        for span in spans:
            traces.setdefault(span.key, []).append(span)
        with self._lock:
            was_empty = not self._units
            for trace in traces.values():
                for start in range(0, len(trace), self._max_batch_spans):
                    unit = trace[start:start + self._max_batch_spans]
                    self._units.append((self._next_number, unit))
                    self._next_number += 1
                    self._spans += len(unit)
            while self._spans > self._max_queued_spans:
                _, oldest = self._units.popleft()
                self._spans -= len(oldest)
                self._dropped += oldest
            # Wake the worker only when what it waits for may have come (see `take`):
            # waking it for every turn's few spans cost more than sending them.
            if was_empty or self._spans >= self._max_batch_spans or self._dropped:
                self._lock.notify_all()

    def wait_settled(self, timeout: float) -> bool:
        """Hurry the worker; True once everything put so far is settled (`settle`)."""
        with self._lock:
            target = self._next_number
            self._flush_waiters += 1
            self._lock.notify_all()
            try:
                return self._lock.wait_for(lambda: self._oldest_unsettled() >= target, timeout)
            finally:
                self._flush_waiters -= 1

    @property
    def closed(self) -> bool:
        return self._closing

    def close(self) -> None:
        """Ends `take`: it returns None from now on."""
        with self._lock:
            self._closing = True
            self._lock.notify_all()

    def take(self) -> list[Unit] | None:
        """Wait for spans, then take whole units up to max_batch_spans; None once closing."""
        with self._lock:
            self._lock.wait_for(lambda: self._units or self._closing)
            self._lock.wait_for(lambda: self._spans >= self._max_batch_spans or self._flush_waiters
                                or self._closing, self._flush_interval)
            if self._closing:
                return None
            batch: list[Unit] = []
            while self._units and len(batch) + len(self._units[0][1]) <= self._max_batch_spans:
                number, unit = self._units.popleft()
                if not batch:
                    self._in_flight_number = number
                batch.extend(unit)
                self._spans -= len(unit)
            return batch

    def settle(self) -> None:
        """The batch `take` gave is done with (delivered, retried to the end, or given up)."""
        with self._lock:
            self._in_flight_number = None
            self._lock.notify_all()

    def take_dropped(self) -> list[Unit]:
        with self._lock:
            dropped, self._dropped = self._dropped, []
        return dropped

    def _oldest_unsettled(self) -> int:
        if self._in_flight_number is not None:
            return self._in_flight_number
        return self._units[0][0] if self._units else self._next_number


class OtlpExporter:
    """Delivers spans (or, with `encode`, other OTLP units) to one OTLP/HTTP URL from a
    single background thread.

    Submitted spans wait in a SpanQueue. The worker sends whole units, so a trace is split
    across requests only when it alone exceeds max_batch_spans. While a batch is being
    retried, newer spans wait behind it; past max_queued_spans the oldest units are dropped.

    A batch the collector refuses as too large (413) is sent again in halves, each halved
    again while refused, so only a span refused on its own is given up.

    on_result(outcome, spans) is called from the worker with the spans concerned and outcome
    "delivered", "retry" (an attempt failed and will be retried), "rejected" (the collector
    refused them) or "dropped" (queue overflow). Spans still unsettled at close() are not
    reported: they are the caller's to keep for the next run.
    """

    def __init__(self, url: str, *, headers: dict[str, str], resource: dict[str, str], scope_version: str,
                 on_result: Callable[[str, list[Unit]], None] = lambda outcome, spans: None,
                 max_batch_spans: int = 512, flush_interval: float = 1.0, max_queued_spans: int = 100_000,
                 timeout: float = 10.0, sleep: Callable[[float], object] | None = None,
                 rng=random.random,
                 encode: Callable[[list[Unit]], bytes] | None = None,
                 ssl_context: ssl.SSLContext | None = None):
        """`encode` makes a request body of a batch; by default the spans go under
        `resource` and the tailer's scope (encode_request). `ssl_context`: for an https URL
        whose certificate a CA of its own signed (tls_context). `timeout`: the deadline of
        each request. `sleep` waits between attempts (by default a wait that close() ends)."""
        from .http_client import Endpoint  # here: http.client and ssl cost every start-up otherwise

        self._endpoint = Endpoint(
            url, timeout=timeout, ssl_context=ssl_context,
            headers={**headers, "Content-Type": "application/json", "Content-Encoding": "gzip",
                     "User-Agent": f"hydrafusion-tailer/{scope_version}"},
            certificate_setting="OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE or OTEL_EXPORTER_OTLP_CERTIFICATE")
        self._resource = dict(resource)
        self._scope_version = scope_version
        self._on_result = on_result
        self._queue = SpanQueue(max_batch_spans=max_batch_spans, max_queued_spans=max_queued_spans,
                                flush_interval=flush_interval)
        self._stopped = threading.Event()
        self._sleep = sleep or self._stopped.wait
        self._rng = rng
        self._encode = encode
        self._worker = threading.Thread(target=self._run, name="otlp-exporter", daemon=True)
        self._worker.start()

    def submit(self, spans: list[Unit]) -> None:
        """Queue spans for export; never blocks on the network."""
        self._queue.put(spans)

    def flush(self, timeout: float) -> bool:
        """Send now; True once everything submitted so far was delivered or given up on."""
        return self._queue.wait_settled(timeout)

    def close(self, timeout: float) -> None:
        """Flush, then stop the worker; whatever is still unsettled is left to the caller."""
        deadline = time.monotonic() + timeout
        self.flush(timeout)
        self._queue.close()
        self._stopped.set()
        self._endpoint.cut()
        self._worker.join(max(0.0, deadline - time.monotonic()))

    def _run(self) -> None:
        while True:
            batch = self._queue.take()
            self._report_overflow()
            if batch is None:
                return
            try:
                if batch:  # empty only if an oversized submit overflowed the whole queue
                    self._deliver(batch)
            except Exception as exc:  # the worker must outlive any surprise
                log.error("OTLP export failed unexpectedly (%s); %d spans dropped", type(exc).__name__, len(batch))
                self._report("dropped", batch)
            self._queue.settle()

    def _deliver(self, spans: list[Unit]) -> None:
        """Send spans until the collector answers; a 413 sends them again in halves."""
        if self._encode is not None:
            body = self._encode(spans)
        else:
            body = encode_request(spans, self._resource, SCOPE_NAME, self._scope_version)
        count = len(spans)
        backoff = FIRST_BACKOFF
        attempts = 0
        while not self._queue.closed:
            attempts += 1
            self._report_overflow()
            answer = self._endpoint.post(body)
            if answer.delivered:
                self._accept(spans, answer.body.decode("utf-8", "replace"))
                return
            if answer.status == TOO_LARGE and count > 1:
                self._deliver(spans[:count // 2])
                self._deliver(spans[count // 2:])
                return
            if not retryable(answer):
                log.warning("OTLP export rejected (HTTP %d): %s; %d spans dropped",
                            answer.status, error_text(answer.body), count)
                self._report("rejected", spans)
                return
            if self._queue.closed:
                return
            # Full jitter: a fleet of tailers recovering together does not hit the collector in step.
            # A Retry-After is honoured but never below the backoff's step: a collector
            # answering "0" or a past date would otherwise get a request per round trip.
            delay = self._rng() * backoff if answer.retry_after is None else max(answer.retry_after, backoff)
            if attempts == 1:
                log.warning("OTLP export failed (%s); retrying until the collector answers", answer.reason())
            self._report("retry", spans)
            self._sleep(min(delay, MAX_BACKOFF))
            backoff = min(backoff * 2, MAX_BACKOFF)

    def _accept(self, spans: list[Unit], body: str) -> None:
        """Reports a 2xx answer, which may still reject some spans (an OTLP partial success).

        OTLP does not say which spans were rejected, so the last ones are reported as such.
        """
        count = len(spans)
        try:
            partial = json.loads(body).get("partialSuccess") or {}
            rejected = min(max(int(partial.get("rejectedSpans", 0)), 0), count)
        except (ValueError, TypeError, AttributeError):  # an empty or non-JSON body means all accepted
            partial, rejected = {}, 0
        if rejected:
            message = one_line(str(partial.get("errorMessage", "")))
            log.warning("OTLP collector rejected %d of %d spans: %s", rejected, count, message)
            self._report("rejected", spans[count - rejected:])
        if count - rejected:
            self._report("delivered", spans[:count - rejected])

    def _report_overflow(self) -> None:
        dropped = self._queue.take_dropped()
        if dropped:
            log.warning("OTLP export queue full; %d oldest spans dropped", len(dropped))
            self._report("dropped", dropped)

    def _report(self, outcome: str, spans: list[Unit]) -> None:
        try:
            self._on_result(outcome, spans)
        except Exception:  # a faulty callback must not stop the export
            log.exception("OTLP on_result callback failed")
