"""Push samples at past timestamps to Prometheus over remote write 1.0, standard library only.

Scrapes are always "now", so history goes in through Prometheus's remote-write receiver
(`--web.enable-remote-write-receiver`, POST /api/v1/write), which accepts old samples as long
as `storage.tsdb.out_of_order_time_window` covers them. The body is a prompb WriteRequest
(protobuf) compressed with snappy's block format; both encoders are written out here
because the standard library has neither, and only the few message types needed exist.

Pushing is idempotent: Prometheus ignores a sample identical to one it holds, so a push that
failed halfway can simply be repeated whole. Prometheus stores or rejects each request as a
whole: one sample it refuses (older than the window, or a different value at a timestamp it
already holds in order) loses every sample of that request. A different value at an older
timestamp it holds is taken silently, so a re-import must not change past values.
"""

import logging
import struct
from operator import itemgetter
from typing import Iterable, Iterator, Sequence

from .. import __version__
from .http_answer import TOO_LARGE, one_line

log = logging.getLogger("tailer")

Labels = Sequence[tuple[str, str]]
Samples = Sequence[tuple[int, float]]  # (timestamp in ms, value)
Series = tuple[Labels, Samples]

UINT64_MASK = (1 << 64) - 1
MAX_LITERAL = 65536
ERROR_TEXT_LIMIT = 300
TOO_OLD_TEXT = "too old sample"


class RemoteWriteError(Exception):
    """A push that did not go through. retryable says whether sending it again may succeed:
    true for network trouble, a redirect (never followed), 429 and 5xx; false when
    Prometheus rejected the data (4xx, or a sample older than its out-of-order window,
    whatever the status)."""

    def __init__(self, message: str, retryable: bool):
        super().__init__(message)
        self.retryable = retryable


def varint(number: int) -> bytes:
    """Protobuf base-128 varint. int64 fields carry negatives as their 64-bit two's
    complement (not zigzag), which always takes ten bytes."""
    number &= UINT64_MASK
    out = bytearray()
    while number >= 0x80:
        out.append(number & 0x7F | 0x80)
        number >>= 7
    out.append(number)
    return bytes(out)


def _length_delimited(field_number: int, payload: bytes) -> bytes:
    return varint(field_number << 3 | 2) + varint(len(payload)) + payload


def _sample(timestamp_ms: int, value: float) -> bytes:
    # Field 1, wire type 1 (fixed64) is 0x09; field 2, wire type 0 (varint) is 0x10.
    return b"\x09" + struct.pack("<d", value) + b"\x10" + varint(timestamp_ms)


def encode_write_request(series: Iterable[Series]) -> bytes:
    """A prompb WriteRequest: each item is (labels including __name__, samples as
    (timestamp_ms, value)). Prometheus requires labels sorted by name and appends samples
    most cheaply in time order, so both are sorted here whatever order they come in."""
    out = bytearray()
    for labels, samples in series:
        if not any(name == "__name__" for name, _ in labels):
            raise ValueError("a series needs a __name__ label")
        body = bytearray()
        for name, value in sorted(labels, key=itemgetter(0)):
            body += _length_delimited(1, _length_delimited(1, name.encode()) + _length_delimited(2, value.encode()))
        for timestamp_ms, value in sorted(samples, key=itemgetter(0)):
            body += _length_delimited(2, _sample(timestamp_ms, value))
        out += _length_delimited(1, bytes(body))
    return bytes(out)


def snappy_block(data: bytes) -> bytes:
    """data in snappy's block format (not the framed format), as literals only.

    Literals without back-references are a valid snappy stream that any decoder accepts.
    Not compressing keeps this exact and a few lines long; the payloads are a one-time
    backfill sent over loopback, where the bytes saved would not matter."""
    out = bytearray(varint(len(data)))
    for start in range(0, len(data), MAX_LITERAL):
        chunk = data[start:start + MAX_LITERAL]
        length_minus_one = len(chunk) - 1
        if length_minus_one < 60:
            out.append(length_minus_one << 2)
        else:
            # Tags 60..63 say the length follows in 1..4 little-endian bytes; 2 suffice here.
            size = (length_minus_one.bit_length() + 7) // 8
            out.append((59 + size) << 2)
            out += length_minus_one.to_bytes(size, "little")
        out += chunk
    return bytes(out)


def split_requests(series: Iterable[Series], max_samples: int) -> Iterator[list[Series]]:
    """Group series into requests of at most max_samples samples. A long series is cut
    across consecutive requests in time order, so each request only extends what the
    previous ones wrote."""
    if max_samples < 1:
        raise ValueError("max_samples must be at least 1")
    request: list[Series] = []
    size = 0
    for labels, samples in series:
        samples = sorted(samples, key=itemgetter(0))
        start = 0
        while start < len(samples):
            taken = min(max_samples - size, len(samples) - start)
            request.append((labels, samples[start:start + taken]))
            size += taken
            start += taken
            if size == max_samples:
                yield request
                request, size = [], 0
    if request:
        yield request


class RemoteWriter:
    """Posts samples to one remote-write URL (e.g. http://prometheus:9090/api/v1/write).

    Synchronous and without retries of its own: the caller decides when to try again,
    guided by RemoteWriteError.retryable, and calls it from a thread of its own, since a
    request may take until its deadline (`timeout`). A request Prometheus refuses as too
    large (413) is sent again in halves, down to one sample; a sample refused on its own is
    dropped, logged and counted in what push() returns."""

    def __init__(self, url: str, *, timeout: float = 30.0, version: str = __version__,
                 headers: dict[str, str] | None = None, ssl_context=None):
        """headers: e.g. Authorization, or a tenant's X-Scope-OrgID for Mimir;
        ssl_context: for an https URL whose certificate a CA of its own signed."""
        from .http_client import Endpoint  # here, as in otlp.py: only a configured history pays for it

        self.url = url
        self._endpoint = Endpoint(url, timeout=timeout, ssl_context=ssl_context, headers={
            **(headers or {}),
            "Content-Encoding": "snappy",
            "Content-Type": "application/x-protobuf",
            "X-Prometheus-Remote-Write-Version": "0.1.0",
            "User-Agent": f"hydrafusion-tailer/{version}",
        }, certificate_setting="HYDRAFUSION_HISTORY_CERTIFICATE")

    def push(self, series: Iterable[Series], *, max_samples_per_request: int = 20_000) -> int:
        """Send every sample, in as many requests as needed; returns how many samples were
        dropped as too large alone. Raises RemoteWriteError at the first request that
        fails; the requests before it were stored."""
        return sum(self._send(request) for request in split_requests(series, max_samples_per_request))

    def _send(self, request: list[Series]) -> int:
        answer = self._endpoint.post(snappy_block(encode_write_request(request)))
        if answer.delivered:
            return 0
        samples = sum(len(samples) for _, samples in request)
        if answer.status == TOO_LARGE:
            if samples > 1:
                return sum(self._send(half) for half in _halves_of(request, samples))
            log.error("history: remote write refused one sample as too large (HTTP 413); "
                      "it is dropped")
            return 1
        if answer.unanswered:
            raise RemoteWriteError(f"remote write failed: {answer.reason()}", retryable=True)
        # Prometheus says why in plain text, e.g. "out of bounds": keep that for the log.
        text = one_line(answer.body.decode(errors="replace"), ERROR_TEXT_LIMIT)
        # Before 2.49 Prometheus answered 500 to a sample older than the out-of-order
        # window (prometheus/prometheus#13334), though sending it again can never succeed.
        retryable = (answer.status == 429 or answer.status >= 500) and TOO_OLD_TEXT not in text
        raise RemoteWriteError(f"remote write answered {answer.status}: {text}", retryable)


def _halves_of(request: list[Series], samples: int) -> list[list[Series]]:
    """A request in two of about half its samples each, in the order they were to go."""
    return list(split_requests(request, (samples + 1) // 2))
