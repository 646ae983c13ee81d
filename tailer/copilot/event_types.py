"""The event types the tailer reads, and a line's type told from its first bytes.

Most lines of a session (messages, reasoning, permissions) cannot matter to us. The CLI
writes `type` first, so `may_be_read` (the line reader's test for every line) and
`leading_type` (tailer/copilot/events.py's) tell them by the line's first bytes and reject
them before any JSON parsing. `event_type_of` and `cli_version_of` read the type and the
CLI's version of any line, for `doctor`, which reports on every event type.
"""

from __future__ import annotations

from ..codes import ENUM, VERSION
from .event_values import MAX_TEXT, Absurd, read_text

TYPE_CHECKING = False  # typing costs the footer's start-up; a type checker takes it as True
if TYPE_CHECKING:
    import re


class _Pattern:
    """A bytes pattern compiled the first time it is searched: a line the CLI wrote starts
    with its type and needs none, and `re` with its `enum`, imported and compiling, would
    cost the footer's refresh (tailer/statusline/) some milliseconds of its start."""

    __slots__ = ("_source", "_compiled")

    def __init__(self, source: bytes | tuple[bytes, ...]):
        """`source`: a pattern, or texts of which any one matches (literally)."""
        self._source = source
        self._compiled: re.Pattern[bytes] | None = None

    def search(self, line: bytes) -> re.Match[bytes] | None:
        return self._pattern().search(line)

    def match(self, line: bytes, start: int = 0) -> re.Match[bytes] | None:
        return self._pattern().match(line, start)

    def _pattern(self) -> re.Pattern[bytes]:
        if self._compiled is None:
            import re

            source = self._source
            if isinstance(source, tuple):
                source = b"|".join(re.escape(text) for text in source)
            self._compiled = re.compile(source)
        return self._compiled


RESOLVED = "session.fusion_resolved"
PHASE_COMPLETED = "assistant.fusion_phase_completed"
PHASE_FAILED = "assistant.fusion_phase_failed"
HANDOFF = "session.fusion_handoff"
COMMIT_STARTED = "session.fusion_commit_started"
COMPLETED = "session.fusion_completed"
ROUTE_FAILED = "session.fusion_route_failed"
SHUTDOWN = "session.shutdown"
USAGE_RECORD = "session.usage_record"
USAGE_CHECKPOINT = "session.usage_checkpoint"
TOOL_STARTED = "tool.execution_start"
TOOL_COMPLETED = "tool.execution_complete"
USER_MESSAGE = "user.message"
SESSION_START = "session.start"
SESSION_RESUME = "session.resume"

# Durable fusion and usage events we know and deliberately skip: change checkpoints only
# hold code change counts and file paths; usage checkpoints repeat the session's totals.
KNOWN_UNUSED = frozenset({"session.fusion_change_checkpoint", "session.usage_checkpoint"})

# The JSON text of the `type` values we care about. A line holding none of them is ignored
# unparsed. A prompt that quotes one of them only costs a parse: the type is checked after.
# The first group are the lines whose loss damages a turn (see may_matter); tool events
# only add detail.
DAMAGE_MARKERS = (
    b'"session.fusion_', b'"assistant.fusion_', b'"session.shutdown"',
    b'"session.usage_record"', b'"session.usage_checkpoint"', b'"user.message"',
    b'"session.start"', b'"session.resume"',
)
MARKERS = DAMAGE_MARKERS + (b'"tool.execution_start"', b'"tool.execution_complete"')
# One search for all of them is several times faster than one search for each.
_ANY_DAMAGE_MARKER = _Pattern(DAMAGE_MARKERS)
ANY_MARKER = _Pattern(MARKERS)


def may_matter(line: bytes) -> bool:
    """False when the line certainly holds no record whose loss would damage a turn.

    Cheap, no parsing: for a line too long to read, this tells damage from a loss that
    costs only detail (a tool call's end, say).
    """
    return _ANY_DAMAGE_MARKER.search(line) is not None


def may_be_read(line: bytes) -> bool:
    """False when the line certainly is not an event we read; cheap, no parsing.

    The line reader's test for every line of a log. The CLI writes `type` first, so the
    type decides from the line's first bytes and the rest (a tool's output can be
    megabytes) is never searched. Only a line laid out some other way is searched whole.
    """
    if line.startswith(_MARKED_HEADS):
        return True
    if line.startswith(_SKIPPED_HEADS):
        return False
    written_type = leading_type(line)
    if written_type:
        return written_type in _MARKED_TYPES or written_type.startswith(_MARKED_PREFIXES)
    leading = _LEADING_TYPE.match(line)
    if leading is not None:
        return ANY_MARKER.match(line, leading.start(1) - 1) is not None
    return ANY_MARKER.search(line) is not None


_TYPE_PREFIX = b'{"type":"'
_TYPE_START, _TYPE_END = len(_TYPE_PREFIX), len(_TYPE_PREFIX) + MAX_TEXT + 1
# Searched as an int: in CPython 3.11, `bytes in bytes` first tries the operand as an
# int and raises and clears a TypeError inside, several times the cost of the search, on
# every line of every log.
_BACKSLASH = ord("\\")
# The markers as the types they match, for a type already cut out of the line's start:
# whole types (`"session.shutdown"`) and beginnings (`"session.fusion_`).
_MARKED_TYPES = frozenset(m[1:-1] for m in MARKERS if m.endswith(b'"'))
_MARKED_PREFIXES = tuple(m[1:] for m in MARKERS if not m.endswith(b'"'))
# The starts of the lines the CLI writes, up to the type's closing quote (or through a
# marked beginning): one startswith in C decides most lines, where cutting the type out
# took five times the instructions, on every line of every log. _SKIPPED_HEADS are the
# unread types a log holds most of.
_MARKED_HEADS = tuple(_TYPE_PREFIX + m[1:] for m in MARKERS)
_SKIPPED_HEADS = tuple(
    _TYPE_PREFIX + event_type + b'"'
    for event_type in (b"assistant.message", b"assistant.turn_start", b"assistant.turn_end",
                       b"assistant.usage", b"system.message", b"abort", b"error.message")
)


def leading_type(line: bytes) -> bytes | None:
    """The `type` the line starts with, as the CLI writes it; None for any other start."""
    if line.startswith(_TYPE_PREFIX):
        end = line.find(b'"', _TYPE_START, _TYPE_END)
        if end >= 0:
            written_type = line[_TYPE_START:end]
            if _BACKSLASH not in written_type:
                return written_type
    return None


# -- Any line, for `doctor`, which reports on every event type and not only fusion --------

# The CLI writes `type` first, so most lines, and the kept head of an oversized line, give
# their type without a JSON parse.
_LEADING_TYPE = _Pattern(rb'[\0 \t\r]*\{\s*"type"\s*:\s*"([^"\\]{1,%d})"' % MAX_TEXT)
def event_type_of(line: bytes) -> str | None:
    """The `type` of any line (without its newline), or None when it has no readable one."""
    match = _LEADING_TYPE.match(line)
    if match:
        try:
            return ENUM.accept(match.group(1).decode())
        except UnicodeDecodeError:
            return None
    obj = _json_object(line)
    try:
        return ENUM.accept(read_text(obj.get("type"))) if obj is not None else None
    except Absurd:
        return None


def cli_version_of(line: bytes) -> str | None:
    """The Copilot CLI version a `session.start` line names, else None."""
    obj = _json_object(line)
    if obj is None or obj.get("type") != SESSION_START:
        return None
    data = obj.get("data")
    version = data.get("copilotVersion") if isinstance(data, dict) else None
    if isinstance(version, str) and VERSION.is_code(version):
        return version
    return None


def _json_object(line: bytes) -> dict | None:
    import json  # here: the status line's refresh imports this module and never json

    try:
        obj = json.loads(line.strip(b"\0 \t\r"))
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None
