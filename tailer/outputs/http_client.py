"""The one way the tailer sends a request: a POST to one configured URL, with a deadline.

Every sender (spans, the CLI's telemetry, the metrics push, remote write) posts through an
`Endpoint`, from a thread of its own, so that what can go wrong on the network is handled
once and the same way:

- A request ends by its deadline, whatever the server does: urllib's and http.client's
  timeouts bound each socket operation, so a server answering a byte at a time would
  never trip them. A timer cuts the connection when the deadline passes.
- Whatever fails (refused or reset connections, TLS, a garbled status line, oversized or
  too many headers, a cut) comes back as an `Answer` without a status, never as an
  exception: for the senders it is a failure to retry.
- A redirect is never followed: a 3xx is an answer like any other failure, so neither the
  body nor the headers (credentials among them) go anywhere but the configured URL, and
  only a 2xx from that URL counts as delivered.

Text taken from an answer (an error body, a redirect's target) is made printable here, so a
body holding a newline or an escape sequence cannot forge or paint a log line.
"""

from __future__ import annotations

import email.utils
import http.client
import socket
import ssl
import threading
import time
import urllib.parse

from ..printable import printable
from .http_answer import TEXT_LIMIT, Answer, one_line

RESPONSE_READ_LIMIT = 64 * 1024


class Endpoint:
    """One URL, its headers and TLS settings; `post` sends one request there.

    `certificate_setting` names the setting that gives a CA of one's own, for the message
    when the server's certificate is not trusted.
    """

    def __init__(self, url: str, *, headers: dict[str, str], timeout: float,
                 ssl_context: ssl.SSLContext | None = None, certificate_setting: str = ""):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self.url = url
        self.timeout = timeout
        self._parts = parts
        self._target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._headers = dict(headers)
        self._ssl_context = ssl_context
        self._certificate_setting = certificate_setting
        self._lock = threading.Lock()
        self._in_flight: http.client.HTTPConnection | None = None
        self._cut_why = ""

    def post(self, body: bytes, timeout: float | None = None) -> Answer:
        """Send body once and return the answer, within timeout seconds (default: the
        endpoint's) whatever the server does."""
        timeout = self.timeout if timeout is None else max(timeout, 0.01)
        connection = self._connection(timeout)
        with self._lock:
            self._in_flight, self._cut_why = connection, ""
        timer = threading.Timer(timeout, self._cut, (connection, f"no whole answer within {timeout:g} s"))
        timer.daemon = True
        timer.start()
        try:
            connection.request("POST", self._target, body, self._headers)
            response = connection.getresponse()
            answer_body = response.read(RESPONSE_READ_LIMIT)
            answer = Answer(response.status, answer_body,
                            parse_retry_after(response.getheader("Retry-After"), time.time()))
            if 300 <= response.status < 400:
                answer = answer._replace(problem=self._redirect_problem(response))
            return answer
        except (OSError, http.client.HTTPException, ValueError) as error:
            return Answer(None, problem=self._cut_why or self._problem(error))
        finally:
            timer.cancel()
            with self._lock:
                self._in_flight = None
            connection.close()

    def cut(self) -> None:
        """End the request in flight now (the tailer is stopping): its post returns a failure."""
        with self._lock:
            connection = self._in_flight
        if connection is not None:
            self._cut(connection, "stopped")

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        host, port = self._parts.hostname, self._parts.port
        if self._parts.scheme == "https":
            return http.client.HTTPSConnection(host, port, timeout=timeout, context=self._ssl_context)
        return http.client.HTTPConnection(host, port, timeout=timeout)

    def _cut(self, connection: http.client.HTTPConnection, why: str) -> None:
        """Shut the connection's socket down under the thread using it: its blocked read or
        write returns at once. The plain socket's shutdown, so a TLS socket is not touched
        from two threads."""
        with self._lock:
            if self._in_flight is not connection or connection.sock is None:
                return
            self._cut_why = why
            try:
                socket.socket.shutdown(connection.sock, socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by the other side

    def _redirect_problem(self, response: http.client.HTTPResponse) -> str:
        """A redirect is not followed; the log says where it pointed, by host only (its
        path and query may carry tokens)."""
        location = response.getheader("Location") or ""
        try:
            host = urllib.parse.urlsplit(location).hostname or self._parts.hostname
        except ValueError:
            host = "a malformed Location"
        return f"HTTP {response.status}, a redirect to {printable(host)[:TEXT_LIMIT]}, not followed"

    def _problem(self, error: Exception) -> str:
        """Why a request got no answer; for a certificate not trusted, which setting gives
        the CA that signed it."""
        if isinstance(error, ssl.SSLCertVerificationError):
            return (f"the certificate of {self.url} is not trusted ({error.verify_message}): "
                    f"give the CA certificate that signed it in {self._certificate_setting}")
        return one_line(str(error) or type(error).__name__)


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait according to a Retry-After header (delta-seconds or HTTP-date), or None."""
    if not value:
        return None
    value = value.strip()
    if value.isdecimal():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return max(0.0, when.timestamp() - now)

