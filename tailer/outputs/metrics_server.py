"""Serve /metrics, / and /healthz over HTTP, in a way no local client can starve.

The port is open to every user of the machine (and to the network when bound to 0.0.0.0
or ::), so a client may be hostile or just broken. None may cost the tailer more than a
bounded share of threads, file descriptors and CPU:

- Every read and write on a connection has a timeout (TIMEOUT_S), and a connection must
  have sent its whole request within REQUEST_DEADLINE_S, however slowly it trickles in.
- At most MAX_CLIENTS connections are served at once, one thread each. When a connection
  comes and all are taken, the oldest one still waiting for its request is closed to make
  room: a scraper sends its request at once, so idle and slow clients go first and scrapes
  keep being answered. When all are busy answering, the new one is closed at once, without
  a thread.
- A failing accept (no file descriptors left) pauses the accept loop instead of spinning it.
- A client that goes away early costs a debug line, never a traceback; anything else is a
  one-line warning, at most one a minute of each kind.

The address family follows the host: an IPv6 address ("::1", "::") serves IPv6, anything
else IPv4.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from .exposition import CONTENT_TYPE, Registry
from ..log_limit import WarningLimiter

log = logging.getLogger("tailer.metrics")

MAX_CLIENTS = 64
TIMEOUT_S = 5.0
REQUEST_DEADLINE_S = 10.0
ACCEPT_PAUSE_S = 0.1


class _MetricsHandler(BaseHTTPRequestHandler):
    timeout = TIMEOUT_S  # set on the connection before anything is read from it
    _PAGES = {"/": b"Prometheus metrics are at /metrics\n", "/healthz": b"ok\n"}

    def do_GET(self):
        self._reply()

    def do_HEAD(self):
        self._reply()

    def _reply(self):
        self.server.answering(self.request)
        path = urlsplit(self.path).path
        if path == "/metrics":
            # A HEAD does not render: rendering uses up a pending series' zero, and a HEAD
            # shows it to nobody.
            body = None if self.command == "HEAD" else self.server.registry.render().encode()
            self._send(200, CONTENT_TYPE, body)
        elif path in self._PAGES:
            self._send(200, "text/plain; charset=utf-8", self._PAGES[path])
        else:
            self._send(404, "text/plain; charset=utf-8", b"not found\n")

    def _send(self, status: int, content_type: str, body: bytes | None):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if body is not None:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body is not None and self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, format, *args):
        """Silent: a line per scrape would bury the daemon's own log."""


class _MetricsHTTPServer(ThreadingHTTPServer):
    # Connections wait here only until the accept loop takes them, which is quick; the
    # default of 5 would make a burst of connections retry their handshake for seconds.
    request_queue_size = 2 * MAX_CLIENTS

    def __init__(self, address: tuple[str, int], registry: Registry):
        self.registry = registry
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self._lock = threading.Lock()
        # Connections still waiting for their request, oldest first, with when they came.
        self._waiting: dict[socket.socket, float] = {}
        self._answering: set[socket.socket] = set()
        self._warnings = WarningLimiter()
        super().__init__(address, _MetricsHandler)

    def answering(self, request: socket.socket) -> None:
        """The request has come: the connection is no longer one to close to make room."""
        with self._lock:
            if self._waiting.pop(request, None) is not None:
                self._answering.add(request)

    def get_request(self):
        try:
            return super().get_request()
        except OSError as error:
            # The connection stays queued and the listening socket readable: accepting
            # again at once would spin a core until a file descriptor is free.
            self._warnings.warn("accept", "metrics: cannot accept a connection: %s",
                                error.strerror or type(error).__name__)
            time.sleep(ACCEPT_PAUSE_S)
            raise

    def process_request(self, request, client_address):
        with self._lock:
            full = len(self._waiting) + len(self._answering) >= MAX_CLIENTS
            if full and self._waiting:
                self._hang_up(next(iter(self._waiting)))
                full = False
            if not full:
                self._waiting[request] = time.monotonic()
        if full:
            self._warnings.warn("full", "metrics: %d clients are being answered; a new "
                                "connection was closed", MAX_CLIENTS)
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def service_actions(self):
        """Called by serve_forever at least every poll interval: enforce the deadline."""
        too_old = time.monotonic() - REQUEST_DEADLINE_S
        with self._lock:
            for request, since in list(self._waiting.items()):
                if since > too_old:
                    break
                self._hang_up(request)

    def shutdown_request(self, request):
        # Forgotten under the lock before it is closed, so _hang_up never touches a
        # socket whose file descriptor may already belong to another file.
        with self._lock:
            self._waiting.pop(request, None)
            self._answering.discard(request)
        super().shutdown_request(request)

    def _hang_up(self, request: socket.socket) -> None:
        """End a connection from outside its thread, which then sees it closed and ends;
        the caller holds the lock."""
        self._waiting.pop(request, None)
        self._answering.discard(request)
        with contextlib.suppress(OSError):
            request.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request, client_address):
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionError, TimeoutError)):
            log.debug("metrics: a client went away (%s)", type(error).__name__)
        else:
            self._warnings.warn(("error", type(error).__name__),
                                "metrics: answering a client failed: %s", type(error).__name__)


class MetricsServer:
    """Serves /metrics, / and /healthz from a daemon thread. Binds at construction, so .port
    is known (and a busy port fails) before start()."""

    def __init__(self, host: str, port: int, registry: Registry):
        self._httpd = _MetricsHTTPServer((host, port), registry)
        self.port = self._httpd.server_address[1]
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="metrics-http", daemon=True)
        self._thread.start()

    def close(self) -> None:
        if self._thread is not None:
            # shutdown() waits for serve_forever() to end, so only after start().
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()
