"""The /metrics server under hostile and broken clients: floods, trickles, resets, IPv6.

Every test is bounded: scrapes are made with a one-second timeout, and sockets are closed
at the end. What it answers to a well-behaved client is tested in test_exposition.py.
"""

import contextlib
import logging
import socket
import socketserver
import threading
import time
import urllib.error
import urllib.request

import pytest

from tailerproc import running_tailer
from tailer.outputs import metrics_server
from tailer.outputs.exposition import Registry
from tailer.outputs.metrics_server import MAX_CLIENTS, MetricsServer


@pytest.fixture
def server():
    registry = Registry()
    registry.gauge("g", "A gauge.").set(None, 1)
    served = MetricsServer("127.0.0.1", 0, registry)
    served.start()
    yield served
    served.close()


def scrape(host: str, port: int, path: str = "/metrics", method: str = "GET") -> int:
    """The status of one request, which must be answered within a second."""
    request = urllib.request.Request(f"http://{host}:{port}{path}", method=method)
    try:
        with urllib.request.urlopen(request, timeout=1) as response:
            response.read()
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


@contextlib.contextmanager
def clients(port: int, count: int):
    """`count` open connections that send nothing."""
    sockets = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(count)]
    try:
        yield sockets
    finally:
        for sock in sockets:
            sock.close()


@contextlib.contextmanager
def trickling(sockets: list[socket.socket], request: bytes):
    """Send `request` on every socket, one byte per socket every 20 ms, until done or closed."""
    stop = threading.Event()

    def trickle():
        for byte in request:
            for sock in sockets:
                with contextlib.suppress(OSError):
                    sock.send(bytes([byte]))
            if stop.wait(0.02):
                return

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def connection_threads() -> int:
    """Threads the server runs for connections, one each."""
    return sum("process_request_thread" in thread.name for thread in threading.enumerate())


def one_line_warnings_at_most(caplog, capfd) -> None:
    for record in caplog.records:
        assert record.levelno <= logging.WARNING, record.getMessage()
        assert "\n" not in record.getMessage() and record.exc_info is None
    printed = capfd.readouterr().err
    assert "Traceback" not in printed and "Exception" not in printed, printed


def test_scrapes_answer_while_more_idle_and_slow_clients_than_the_cap_hold_on(server, caplog, capfd):
    caplog.set_level(logging.DEBUG)
    slow_request = b"GET /metrics HTTP/1.0\r\n" + b"X-Padding: x\r\n" * 100 + b"\r\n"
    with clients(server.port, MAX_CLIENTS + 16) as idle, clients(server.port, 20) as slow:
        with trickling(slow, slow_request):
            for _ in range(5):
                assert scrape("127.0.0.1", server.port) == 200
                time.sleep(0.1)
            # More idle clients after the scrapes: the scrapes' room was made again.
            with clients(server.port, MAX_CLIENTS):
                assert scrape("127.0.0.1", server.port) == 200
                time.sleep(0.2)  # the connections hung up on have seen it
                assert connection_threads() <= MAX_CLIENTS
        assert len(idle) + len(slow) > MAX_CLIENTS
    one_line_warnings_at_most(caplog, capfd)


def test_a_client_that_never_completes_its_request_is_hung_up_on(server, monkeypatch):
    monkeypatch.setattr(metrics_server, "REQUEST_DEADLINE_S", 0.3)
    with clients(server.port, 1) as [sock], trickling([sock], b"GET /metrics HTTP/1.0\r\n" * 500):
        sock.settimeout(3)
        assert sock.recv(100) == b""  # hung up on, well before the 3 s timeout


def test_clients_that_go_away_early_print_no_traceback(caplog, capfd):
    caplog.set_level(logging.DEBUG)
    registry = Registry()
    gauge = registry.gauge("big", "Enough text that the answer outgrows a socket buffer.", ["n"])
    for n in range(3000):
        gauge.set({"n": f"{n:0>40}"}, n)
    served = MetricsServer("127.0.0.1", 0, registry)
    served.start()
    try:
        for _ in range(20):
            sock = socket.create_connection(("127.0.0.1", served.port))
            sock.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")
            sock.close()  # a reset, with the answer unsent
        assert scrape("127.0.0.1", served.port) == 200
    finally:
        served.close()
    one_line_warnings_at_most(caplog, capfd)


def test_a_failing_accept_does_not_spin(server, monkeypatch, caplog):
    calls = []

    def out_of_files(self):
        calls.append(1)
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(socketserver.TCPServer, "get_request", out_of_files)
    with clients(server.port, 1):  # queued, so the listening socket stays readable
        time.sleep(1.0)
    assert 1 <= len(calls) <= 1 / metrics_server.ACCEPT_PAUSE_S + 2
    assert [r.getMessage() for r in caplog.records] == [
        "metrics: cannot accept a connection: Too many open files"]


def test_when_every_client_is_being_answered_a_new_one_is_closed_at_once(caplog):
    registry = Registry()
    release = threading.Event()
    registry.render = lambda: release.wait(10) and ""  # every scrape hangs in rendering
    served = MetricsServer("127.0.0.1", 0, registry)
    served.start()
    scrapes = [threading.Thread(target=scrape_slowly, args=(served.port,), daemon=True)
               for _ in range(MAX_CLIENTS)]
    try:
        for thread in scrapes:
            thread.start()
        time.sleep(0.5)  # all of them accepted and rendering
        with clients(served.port, 1) as [sock]:
            sock.settimeout(3)
            assert sock.recv(100) == b""
        assert "metrics: 64 clients are being answered; a new connection was closed" in [
            r.getMessage() for r in caplog.records]
    finally:
        release.set()
        for thread in scrapes:
            thread.join(5)
        served.close()


def scrape_slowly(port: int) -> None:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        response.read()


def test_other_methods_and_paths_answer_as_before(server):
    assert scrape("127.0.0.1", server.port, "/nope") == 404
    assert scrape("127.0.0.1", server.port, "/metrics", method="POST") == 501
    assert scrape("127.0.0.1", server.port, "/metrics", method="DELETE") == 501
    assert scrape("127.0.0.1", server.port, "/healthz") == 200


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


ipv6 = pytest.mark.skipif(not _has_ipv6_loopback(), reason="this machine has no ::1")


@ipv6
@pytest.mark.parametrize("host", ["::1", "::"])
def test_ipv6_addresses_are_served(host):
    served = MetricsServer(host, 0, Registry())
    served.start()
    try:
        assert scrape("[::1]", served.port) == 200
    finally:
        served.close()


@ipv6
def test_the_daemon_serves_a_bracketed_ipv6_metrics_address(tmp_path):
    with socket.socket(socket.AF_INET6) as probe:
        probe.bind(("::1", 0))
        port = probe.getsockname()[1]
    (tmp_path / "state").mkdir()
    with running_tailer(tmp_path, "--state-dir", str(tmp_path / "state"), "--otlp-endpoint",
                        "none", "--metrics-address", f"[::1]:{port}") as tailer:
        assert scrape("[::1]", port) == 200
        assert f"metrics http://[::1]:{port}/metrics" in tailer.log()
