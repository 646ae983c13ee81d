"""Remote write: the hand-written protobuf and snappy encoders, and pushes to a real Prometheus.

The real tests start the stack's Prometheus (tests/prom.py) with the remote-write receiver and a 31-day
out-of-order window, push three days of history and read it back through the query API.
"""

import http.server
import struct
import threading
import time
from contextlib import contextmanager

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bad_endpoint import BadEndpoint, answer, redirect, trickle
from prom import free_port, push_history, running_prometheus
from tailer import __version__
from tailer.outputs.remote_write import (
    RemoteWriteError,
    RemoteWriter,
    encode_write_request,
    snappy_block,
    split_requests,
    varint,
)

MINUTE_MS = 60_000
DAY_MS = 24 * 60 * MINUTE_MS


def snappy_decode(data: bytes) -> bytes:
    """Decode snappy's block format, literals only: enough for what snappy_block emits."""
    length, shift, position = 0, 0, 0
    while True:
        byte = data[position]
        position += 1
        length |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            break
    out = bytearray()
    while position < len(data):
        tag = data[position]
        position += 1
        assert tag & 3 == 0, "only literals expected"
        literal_length = tag >> 2
        if literal_length >= 60:
            size = literal_length - 59
            literal_length = int.from_bytes(data[position:position + size], "little")
            position += size
        literal_length += 1
        out += data[position:position + literal_length]
        position += literal_length
    assert len(out) == length
    return bytes(out)


# --- protobuf --------------------------------------------------------------------------

@pytest.mark.parametrize("number, encoded", [
    (0, "00"),
    (1, "01"),
    (127, "7f"),
    (128, "8001"),
    (300, "ac02"),
    (1_700_000_000_000, "80d095ffbc31"),
    (-1, "ffffffffffffffffff01"),  # int64, not zigzag: ten bytes of two's complement
    (-2, "feffffffffffffffff01"),
])
def test_varint(number, encoded):
    assert varint(number).hex() == encoded


def test_write_request_matches_hand_encoded_bytes():
    # Labels and samples arrive out of order; the encoding must hold them sorted.
    request = encode_write_request([([("job", "a"), ("__name__", "m")], [(2, 1.5), (1, 1.0)])])
    label_name = "0a08" + b"__name__".hex() + "1201" + b"m".hex()       # Label{name, value}
    label_job = "0a03" + b"job".hex() + "1201" + b"a".hex()
    sample_1 = "09" + "000000000000f03f" + "1001"                      # double 1.0 LE, ts 1
    sample_2 = "09" + "000000000000f83f" + "1002"                      # double 1.5 LE, ts 2
    series = "0a0d" + label_name + "0a08" + label_job + "120b" + sample_1 + "120b" + sample_2
    assert request.hex() == "0a33" + series


def test_negative_timestamp_is_a_ten_byte_varint():
    request = encode_write_request([([("__name__", "m")], [(-1, 0.0)])])
    assert request.endswith(bytes.fromhex("10" + "ffffffffffffffffff01"))


def test_a_series_without_a_name_is_refused():
    with pytest.raises(ValueError):
        encode_write_request([([("job", "a")], [(1, 1.0)])])


# --- snappy ----------------------------------------------------------------------------

@pytest.mark.parametrize("data, encoded", [
    (b"", b"\x00"),
    (b"hello", b"\x05\x10hello"),
    (b"x" * 60, b"\x3c\xecx" + b"x" * 59),        # the longest length held in the tag
    (b"x" * 61, b"\x3d\xf0\x3c" + b"x" * 61),     # then one length byte follows
])
def test_snappy_short_inputs(data, encoded):
    assert snappy_block(data) == encoded


def test_snappy_splits_long_input_into_literals_of_64_kib():
    data = (bytes(range(256)) * 274)[:70_000]  # varied bytes, so a misplaced cut shows
    encoded = snappy_block(data)
    first, second = data[:65536], data[65536:]
    assert encoded == (bytes.fromhex("f0a204")                 # varint 70,000
                       + bytes.fromhex("f4ffff") + first        # 2 length bytes: 65,535
                       + bytes.fromhex("f46f11") + second)      # 4,463
    assert snappy_decode(encoded) == data


@given(st.binary(max_size=140_000))
def test_snappy_round_trip(data):
    assert snappy_decode(snappy_block(data)) == data


# --- splitting -------------------------------------------------------------------------

def test_split_cuts_series_across_requests_in_time_order():
    a = ([("__name__", "a")], [(5, 5.0), (1, 1.0), (3, 3.0), (2, 2.0), (4, 4.0)])
    b = ([("__name__", "b")], [(9, 9.0), (8, 8.0)])
    requests = list(split_requests([a, b], max_samples=3))
    assert [[(labels[0][1], [t for t, _ in samples]) for labels, samples in request] for request in requests] == [
        [("a", [1, 2, 3])],
        [("a", [4, 5]), ("b", [8])],
        [("b", [9])],
    ]


# --- HTTP behaviour against a stub -----------------------------------------------------

@contextmanager
def stub_receiver(status: int, body: bytes = b""):
    """A receiver that answers every POST with status and body and keeps what it got.
    Stands in for Prometheus where the real one cannot be made to answer 429 or 503."""
    received = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            received.append((dict(self.headers), self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/api/v1/write", received
    finally:
        server.shutdown()
        thread.join()
        server.server_close()


def test_push_posts_snappy_protobuf_with_the_remote_write_headers():
    series = [([("__name__", "m"), ("model", "x")], [(1000, 1.0), (2000, 2.0)])]
    with stub_receiver(204) as (url, received):
        RemoteWriter(url).push(series)
    [(headers, body)] = received
    assert headers["Content-Encoding"] == "snappy"
    assert headers["Content-Type"] == "application/x-protobuf"
    assert headers["X-Prometheus-Remote-Write-Version"] == "0.1.0"
    assert headers["User-Agent"] == f"hydrafusion-tailer/{__version__}"
    assert snappy_decode(body) == encode_write_request(series)


@pytest.mark.parametrize("status, body, retryable", [
    (400, b"out of bounds", False),
    (429, b"slow down", True),
    (503, b"unavailable", True),
    (500, b"some storage failure", True),
    (500, b"too old sample", False),  # Prometheus < 2.49 answers 500 to a sample it will never take
])
def test_http_errors_say_whether_to_retry(status, body, retryable):
    with stub_receiver(status, body) as (url, _):
        with pytest.raises(RemoteWriteError) as raised:
            RemoteWriter(url).push([([("__name__", "m")], [(1000, 1.0)])])
    assert raised.value.retryable is retryable
    assert str(raised.value) == f"remote write answered {status}: {body.decode()}"


def test_error_text_is_truncated():
    with stub_receiver(400, b"e" * 1000) as (url, _):
        with pytest.raises(RemoteWriteError) as raised:
            RemoteWriter(url).push([([("__name__", "m")], [(1000, 1.0)])])
    assert str(raised.value) == "remote write answered 400: " + "e" * 300


def test_connection_refused_is_retryable():
    writer = RemoteWriter(f"http://127.0.0.1:{free_port()}/api/v1/write", timeout=5)
    with pytest.raises(RemoteWriteError) as raised:
        writer.push([([("__name__", "m")], [(1000, 1.0)])])
    assert raised.value.retryable is True


def samples_of(body: bytes, value: float) -> int:
    """How many samples of this value a WriteRequest body holds (field 1, fixed64: 0x09)."""
    return snappy_decode(body).count(b"\x09" + struct.pack("<d", value))


def test_a_413_halves_the_request_down_to_the_one_sample_refused_alone(caplog):
    """Only the series whose label is `huge` is refused, whatever else a request holds."""
    def refuse_huge(connection, request):
        (answer(413) if b"huge" in snappy_decode(request.body) else answer(204))(connection, request)

    series = [([("__name__", "m"), ("k", "a")], [(1000 * n, 1.5) for n in range(10)]),
              ([("__name__", "m"), ("k", "huge")], [(1000, 2.0)])]
    with BadEndpoint(refuse_huge) as endpoint:
        dropped = RemoteWriter(endpoint.url + "/api/v1/write").push(series)
    stored = [samples_of(r.body, 1.5) for r in endpoint.requests if b"huge" not in snappy_decode(r.body)]
    assert dropped == 1 and sum(stored) == 10
    assert "refused one sample as too large (HTTP 413)" in caplog.text


@pytest.mark.parametrize("status", [302, 307])
def test_a_redirect_is_a_failure_to_retry_and_the_credentials_stay_home(status):
    with BadEndpoint(answer(204)) as elsewhere, \
            BadEndpoint(redirect(status, elsewhere.url + "/api/v1/write")) as prometheus:
        writer = RemoteWriter(prometheus.url + "/api/v1/write", headers={"Authorization": "Bearer t0ken"})
        with pytest.raises(RemoteWriteError) as raised:
            writer.push([([("__name__", "m")], [(1000, 1.0)])])
    assert raised.value.retryable is True
    assert f"HTTP {status}, a redirect to 127.0.0.1, not followed" in str(raised.value)
    assert elsewhere.requests == [] and prometheus.requests[0].headers["authorization"] == "Bearer t0ken"


def test_a_trickling_answer_ends_by_the_deadline_as_a_failure_to_retry():
    with BadEndpoint(trickle(0.2)) as prometheus:
        started = time.monotonic()
        with pytest.raises(RemoteWriteError) as raised:
            RemoteWriter(prometheus.url + "/api/v1/write", timeout=1.0).push([([("__name__", "m")], [(1, 1.0)])])
        took = time.monotonic() - started
    assert raised.value.retryable is True and took < 2.5


def test_an_error_text_cannot_forge_a_log_line():
    with stub_receiver(400, b"out of bounds\n2026-12-01 19:00:00,000 ERROR forged\x1b[2J") as (url, _):
        with pytest.raises(RemoteWriteError) as raised:
            RemoteWriter(url).push([([("__name__", "m")], [(1000, 1.0)])])
    assert str(raised.value) == ("remote write answered 400: out of bounds 2026-12-01 19:00:00,000 "
                                 "ERROR forged\\x1b[2J")


# --- a real Prometheus -----------------------------------------------------------------

# The newest sample is a little in the past, on a whole 5 minutes plus 123 ms, so the API's
# float timestamps also show that milliseconds survive.
NOW_MS = int(time.time() * 1000)
END_MS = NOW_MS - NOW_MS % (5 * MINUTE_MS) - 5 * MINUTE_MS + 123
CREDITS = [("__name__", "rw_test_credits_total"), ("model", "gpt-5.4"), ("pattern", "single")]
TURNS = [("pattern", "cascade"), ("__name__", "rw_test_turns_total")]


def counter(step_ms: int, days: int, increment) -> list[tuple[int, float]]:
    """A counter's samples over the last `days`, oldest first, ending at END_MS."""
    count = days * DAY_MS // step_ms
    samples, total = [], 0.0
    for index in range(count):
        total += increment(index)
        samples.append((END_MS - (count - 1 - index) * step_ms, total))
    return samples


# Increments of tenths make values with long binary fractions: equality proves exact doubles.
CREDIT_SAMPLES = counter(5 * MINUTE_MS, 3, lambda index: 0.1 * (index % 7))
TURN_SAMPLES = counter(15 * MINUTE_MS, 3, lambda index: float(index % 3))
HISTORY = [(CREDITS, CREDIT_SAMPLES), (TURNS, TURN_SAMPLES)]


def selector(labels) -> str:
    name = dict(labels)["__name__"]
    return name + "{" + ",".join(f'{key}="{value}"' for key, value in labels if key != "__name__") + "}"


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    """Prometheus holding HISTORY, pushed in requests of 100 samples so each series spans
    several requests, as the history push sends it (newest samples first)."""
    with running_prometheus(
        tmp_path_factory.mktemp("remote-write"), [],
        extra_config={"storage": {"tsdb": {"out_of_order_time_window": "31d"}}},
        extra_flags=["--web.enable-remote-write-receiver"],
    ) as prom:
        writer = RemoteWriter(f"{prom.url}/api/v1/write")
        push_history(writer, HISTORY, max_samples_per_request=100)
        yield prom, writer


def stored(prom, labels) -> list[tuple[int, float]]:
    """Every sample Prometheus holds for the series, as (timestamp_ms, value)."""
    [series] = prom.query(f"{selector(labels)}[4d]", time=NOW_MS / 1000)
    return [(round(timestamp * 1000), float(value)) for timestamp, value in series["values"]]


def test_history_reads_back_exactly_as_pushed(prometheus):
    prom, _ = prometheus
    assert len(CREDIT_SAMPLES) == 864 and len(TURN_SAMPLES) == 288
    assert stored(prom, CREDITS) == CREDIT_SAMPLES
    assert stored(prom, TURNS) == TURN_SAMPLES
    for timestamp_ms, value in (CREDIT_SAMPLES[0], CREDIT_SAMPLES[100], CREDIT_SAMPLES[500], CREDIT_SAMPLES[-1]):
        two_minutes_later = (timestamp_ms + 2 * MINUTE_MS) / 1000
        [result] = prom.query(f"timestamp({selector(CREDITS)})", time=two_minutes_later)
        assert round(float(result["value"][1]) * 1000) == timestamp_ms
        [result] = prom.query(selector(CREDITS), time=two_minutes_later)
        assert float(result["value"][1]) == value
    # One day back from just after the last sample holds exactly one day of 5-minute samples.
    [result] = prom.query(f"count_over_time({selector(CREDITS)}[1d])", time=(END_MS + MINUTE_MS) / 1000)
    assert result["value"][1] == "288"


def test_pushing_the_same_history_again_changes_nothing(prometheus):
    prom, writer = prometheus
    writer.push(HISTORY, max_samples_per_request=100)
    assert stored(prom, CREDITS) == CREDIT_SAMPLES
    assert stored(prom, TURNS) == TURN_SAMPLES


def test_a_sample_older_than_the_window_is_refused_for_good_with_its_request(prometheus):
    prom, writer = prometheus
    fresh = [("__name__", "rw_test_fresh_total")]
    too_old = [(END_MS - 32 * DAY_MS, 1.0)]
    with pytest.raises(RemoteWriteError) as raised:
        writer.push([(fresh, [(END_MS, 1.0)]), (CREDITS, too_old)])
    assert raised.value.retryable is False
    assert str(raised.value).endswith(": too old sample")  # a 500 from 2.42, a 400 from 2.49 on
    # Prometheus stores a request whole or not at all: the good sample beside it is gone too.
    assert prom.query(f"{selector(fresh)}[4d]", time=NOW_MS / 1000) == []
