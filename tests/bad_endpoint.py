"""A loopback HTTP endpoint that answers as a broken network or a hostile server would.

Each request is read whole (headers and a Content-Length body, gunzipped when gzip) and
kept in `requests`; it is then answered by the endpoint's current `behaviour`, a function
given the socket and the request. Behaviours write raw bytes, so they can send what no
well-behaved server library would: a garbled status line, a hundred and one headers, one
byte every half second, nothing at all, or a reset.
"""

from __future__ import annotations

import gzip
import socket
import struct
import threading
import time
from typing import Callable, NamedTuple


class Request(NamedTuple):
    path: str
    headers: dict[str, str]  # names lowercased
    body: bytes  # gunzipped when it came gzipped


Behaviour = Callable[[socket.socket, Request], None]


def answer(status: int, body: bytes = b"", headers: tuple[tuple[str, str], ...] = ()) -> Behaviour:
    """A complete, well-formed answer."""
    def behave(connection: socket.socket, request: Request) -> None:
        lines = [f"HTTP/1.1 {status} Whatever", f"Content-Length: {len(body)}",
                 "Connection: close", *(f"{name}: {value}" for name, value in headers)]
        connection.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    return behave


def redirect(status: int, location: str) -> Behaviour:
    return answer(status, headers=(("Location", location),))


def raw(data: bytes) -> Behaviour:
    """These bytes, then the connection closed: e.g. a status line that is not one."""
    def behave(connection: socket.socket, request: Request) -> None:
        connection.sendall(data)
    return behave


TOO_MANY_HEADERS = raw(b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-%d: y\r\n" % n for n in range(101)) + b"\r\n")
GARBLED_STATUS = raw(b"HELLO THERE\r\n\r\n")
HEADER_TOO_LONG = raw(b"HTTP/1.1 200 OK\r\nX: " + b"y" * 70_000 + b"\r\n\r\n")


def trickle(interval: float = 0.5) -> Behaviour:
    """A 200 that never ends: one byte of an endless header every `interval` seconds."""
    def behave(connection: socket.socket, request: Request) -> None:
        for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"z" * 100_000:
            connection.sendall(bytes([byte]))
            time.sleep(interval)
    return behave


def hang(connection: socket.socket, request: Request) -> None:
    """No answer, ever: waits until the client gives up and closes."""
    connection.settimeout(None)
    while connection.recv(1024):
        pass


def reset(connection: socket.socket, request: Request) -> None:
    """The connection reset (RST) instead of an answer."""
    connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


class BadEndpoint:
    """Serves on 127.0.0.1 (a free port) from threads of its own until the `with` ends."""

    def __init__(self, behaviour: Behaviour = answer(200)):
        self.behaviour = behaviour
        self.requests: list[Request] = []
        self._changed = threading.Condition()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self._open: set[socket.socket] = set()
        self._closing = False
        self._thread = threading.Thread(target=self._serve, name="bad-endpoint", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def wait_for_requests(self, count: int, timeout: float = 15.0) -> list[Request]:
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.requests) >= count, timeout):
                raise AssertionError(f"expected {count} requests, got {len(self.requests)}")
            return list(self.requests)

    def __enter__(self) -> "BadEndpoint":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._closing = True
        self._thread.join()
        with self._changed:
            for connection in self._open:
                try:
                    connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self._listener.close()

    def _serve(self) -> None:
        while not self._closing:
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._handle, args=(connection,), daemon=True).start()

    def _handle(self, connection: socket.socket) -> None:
        with self._changed:
            self._open.add(connection)
        try:
            connection.settimeout(30)
            request = _read_request(connection)
            if request is None:
                return
            with self._changed:
                self.requests.append(request)
                self._changed.notify_all()
                behaviour = self.behaviour
            behaviour(connection, request)
        except OSError:
            pass  # the client gave up: what these behaviours are for
        finally:
            with self._changed:
                self._open.discard(connection)
            connection.close()


def _read_request(connection: socket.socket) -> Request | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    request_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", 0))
    while len(body) < length:
        chunk = connection.recv(65536)
        if not chunk:
            return None
        body += chunk
    if headers.get("content-encoding") == "gzip":
        body = gzip.decompress(body)
    return Request(request_line.split(" ")[1], headers, body)
