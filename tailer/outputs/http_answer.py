"""What a request came to and the text around it, without the network: the senders' modules
import this at every daemon start, and `http_client.py` (http.client, ssl, socket) only when
an export is configured, which a run with every export off never pays for.
"""

import re
from typing import NamedTuple

from ..printable import printable

TEXT_LIMIT = 200
TOO_LARGE = 413  # a batch answered so is sent again in halves, by each sender
# RFC 9110: a field name is a token; a value is visible ASCII, Latin-1 text, spaces and tabs.
_FIELD_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_FIELD_VALUE = re.compile(r"[\t\x20-\x7e\x80-\xff]*")


class Answer(NamedTuple):
    """What became of one request. status is None when no whole answer came; problem then
    says why, for a log line."""

    status: int | None
    body: bytes = b""
    retry_after: float | None = None
    problem: str = ""

    @property
    def delivered(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    @property
    def unanswered(self) -> bool:
        """No answer from the configured URL itself: none came whole, or it pointed elsewhere
        (a redirect, never followed). Always a failure to try again."""
        return self.status is None or 300 <= self.status < 400

    def reason(self) -> str:
        """Why this answer is not a delivery, as a log line may say it."""
        return f"HTTP {self.status}" if self.status is not None and not self.problem else self.problem


def can_carry(name: str, value: str) -> bool:
    """Whether a request can carry this header. http.client refuses any other, or cannot
    encode it, and every post with it would fail as if the network had."""
    return bool(_FIELD_NAME.fullmatch(name) and _FIELD_VALUE.fullmatch(value))


def one_line(text: str, limit: int = TEXT_LIMIT) -> str:
    """Text from a server or an error as one printable line of at most limit characters."""
    return printable(" ".join(text.split()))[:limit]
