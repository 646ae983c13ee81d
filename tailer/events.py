"""Parse one events.jsonl line into a small record of allowlisted metadata.

This is the only module that knows the Copilot CLI's field names. The log is the CLI's
private resume state, so the parser is lenient (absent, null and wrongly typed fields all
read as "absent") and it copies out only the metadata named below: text fields such as
`content`, `projectionMessage`, `stagedTerminal`, `message` or `errorMessage` are never
read, so they cannot leak into traces, metrics or logs downstream.

Most lines of a session (user prompts, tool output, usage records) cannot matter to us.
`parse_line` rejects them by a byte search before any JSON parsing, which keeps a backfill
of large sessions close to the speed of reading the files.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

RESOLVED = "session.fusion_resolved"
PHASE_COMPLETED = "assistant.fusion_phase_completed"
PHASE_FAILED = "assistant.fusion_phase_failed"
HANDOFF = "session.fusion_handoff"
COMMIT_STARTED = "session.fusion_commit_started"
COMPLETED = "session.fusion_completed"
ROUTE_FAILED = "session.fusion_route_failed"
SHUTDOWN = "session.shutdown"

# Durable fusion and usage events we know and deliberately skip: change checkpoints only
# hold code change counts and file paths; usage checkpoints repeat the session's totals.
KNOWN_UNUSED = frozenset({"session.fusion_change_checkpoint", "session.usage_checkpoint"})

# The JSON text of the `type` values we care about. A line holding none of them is ignored
# unparsed. A prompt that quotes one of them only costs a parse: the type is checked after.
MARKERS = (b'"session.fusion_', b'"assistant.fusion_', b'"session.shutdown"')
# One search for all of them is several times faster than one search for each.
_ANY_MARKER = re.compile(b"|".join(re.escape(marker) for marker in MARKERS))

# Every field each event may carry, metadata or content. A field outside these sets is
# reported as unknown so a CLI upgrade that changes the log shows up on the dashboard.
_CONTENT = {"content", "projectionMessage", "stagedTerminal", "message", "errorMessage"}
_LEG_FIELDS = {
    "fusionId", "phaseId", "phaseKind", "role", "conversationScope", "model",
    "reasoningEffort", "status", "verdict", "durationMs", "usage", "projectionMode",
    "reason", "degradedToPhaseId", "syntheticModel", "policy", "pattern", "turnId",
}
KNOWN_FIELDS = {
    RESOLVED: {
        "fusionId", "turnId", "contractVersion", "syntheticModel", "policy", "routeSource",
        "planVersion", "policyVersion", "modelUniverseVersion", "ruleId", "selectedRuleId",
        "ruleName", "hint", "pattern", "phasePlan", "primaryModel", "secondaryModel",
        "judgeModel", "repairModel", "critics", "fallbackModel", "followUpModel", "scores",
        "routingLatencyMs", "ruleIndex", "followUp",
    },
    PHASE_COMPLETED: _LEG_FIELDS | _CONTENT | {"endedWithBackgroundWork"},
    PHASE_FAILED: _LEG_FIELDS | _CONTENT,
    HANDOFF: {"fusionId", "sourcePhaseId", "targetPhaseId", "targetModel", "message"},
    COMMIT_STARTED: {
        "fusionId", "commitId", "sourcePhaseId", "sourceModel", "kind", "toolCallId",
    },
    COMPLETED: {
        "fusionId", "commitId", "turnId", "syntheticModel", "pattern", "outcome",
        "finalSourcePhaseId", "finalSourceModel", "followUpModel", "degradedReason",
        "phaseCount", "requestCount", "inputTokens", "outputTokens", "cachedTokens",
        "cacheWriteTokens", "totalNanoAiu", "durationMs", "policy", "awaitingBackgroundWork",
    },
    ROUTE_FAILED: {
        "attemptId", "syntheticModel", "policy", "fallbackModel", "reason",
        "routingLatencyMs", "errorMessage",
    },
}

# Fields without which a record still makes sense but is worse: reported as missing so a
# renamed field is noticed. The key fields (fusionId, attemptId, phaseId) are stricter: a
# record without one cannot be placed in a turn and the line is rejected.
REQUIRED_FIELDS = {
    RESOLVED: ("pattern", "routingLatencyMs"),
    PHASE_COMPLETED: ("phaseKind", "model", "status", "durationMs", "usage"),
    PHASE_FAILED: ("phaseKind", "model", "status", "durationMs"),
    HANDOFF: ("sourcePhaseId", "targetPhaseId"),
    COMMIT_STARTED: ("sourcePhaseId",),
    COMPLETED: ("pattern", "durationMs", "totalNanoAiu"),
    ROUTE_FAILED: ("reason",),
}

# What the parser reads each field it relies on as (a JSON Schema type; null always reads
# as absent). `doctor --cli` checks the CLI's own schema against it, so a field that is
# renamed or changes type is noticed before any log has it. Nested fields are dotted.
_READ_USAGE = dict.fromkeys(
    ("requestCount", "inputTokens", "outputTokens", "cachedTokens", "cacheWriteTokens",
     "totalNanoAiu"), "number")
_READ_LEG = {
    **dict.fromkeys(("fusionId", "phaseId", "phaseKind", "role", "conversationScope", "model",
                     "status"), "string"),
    "durationMs": "number", "usage": "object",
    **{f"usage.{name}": how for name, how in _READ_USAGE.items()},
}
READ_AS = {
    RESOLVED: {
        **dict.fromkeys(("fusionId", "pattern", "syntheticModel", "policy", "routeSource"),
                        "string"),
        "routingLatencyMs": "number",
    },
    PHASE_COMPLETED: {**_READ_LEG, "verdict": "string"},
    PHASE_FAILED: {**_READ_LEG, "reason": "string", "degradedToPhaseId": "string"},
    HANDOFF: dict.fromkeys(("fusionId", "sourcePhaseId", "targetPhaseId"), "string"),
    COMMIT_STARTED: dict.fromkeys(("fusionId", "sourcePhaseId", "sourceModel"), "string"),
    COMPLETED: {
        **dict.fromkeys(("fusionId", "pattern", "syntheticModel", "outcome",
                         "finalSourcePhaseId", "finalSourceModel", "degradedReason"), "string"),
        "durationMs": "number", **_READ_USAGE,
    },
    ROUTE_FAILED: {
        **dict.fromkeys(("attemptId", "syntheticModel", "policy", "fallbackModel", "reason"),
                        "string"),
        "routingLatencyMs": "number",
    },
}

# Metadata strings are identifiers and enum values; anything longer is garbage, and the
# cap keeps a damaged log from producing huge spans.
_MAX_TEXT = 200


# The records are slotted dataclasses but not frozen ones: a frozen dataclass sets each
# field through object.__setattr__, which made building records the largest cost of
# parsing after json.loads. Treat them as values all the same (dataclasses.replace).
@dataclass(slots=True)
class Usage:
    """Token and credit figures of a leg or a whole turn."""

    request_count: int = 0
    input_tokens: int = 0  # includes the cache-read tokens, as in the GenAI conventions
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    nano_aiu: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.request_count + other.request_count,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.nano_aiu + other.nano_aiu,
        )

    @property
    def aiu(self) -> float:
        """Credits: the CLI counts them in billionths."""
        return self.nano_aiu / 1e9


@dataclass(slots=True)
class Event:
    """Fields every record has: when it was written and what the parser noticed.

    `event_type` is filled in only with the notes, for the drift metrics that need it.
    """

    time_ns: int
    event_type: str = field(default="", kw_only=True)
    unknown_fields: tuple[str, ...] = field(default=(), kw_only=True)
    missing_fields: tuple[str, ...] = field(default=(), kw_only=True)


@dataclass(slots=True)
class Resolved(Event):
    fusion_id: str
    pattern: str | None
    synthetic_model: str | None
    policy: str | None
    route_source: str | None
    routing_latency_ms: float | None


@dataclass(slots=True)
class LegEnded(Event):
    """A `phase_completed` or `phase_failed`: a leg becomes visible only when it ends."""

    fusion_id: str
    phase_id: str
    phase_kind: str | None
    role: str | None
    scope: str | None
    model: str | None
    status: str | None
    verdict: str | None
    duration_ms: float
    usage: Usage
    failure_reason: str | None
    degraded_to_phase_id: str | None


@dataclass(slots=True)
class Handoff(Event):
    fusion_id: str
    source_phase_id: str | None
    target_phase_id: str | None


@dataclass(slots=True)
class CommitStarted(Event):
    fusion_id: str
    source_phase_id: str | None
    source_model: str | None


@dataclass(slots=True)
class Completed(Event):
    """The turn rollup: its usage is the sum of the legs', never to be added to them."""

    fusion_id: str
    pattern: str | None
    synthetic_model: str | None
    outcome: str | None
    final_source_phase_id: str | None
    final_source_model: str | None
    degraded_reason: str | None
    duration_ms: float
    usage: Usage


@dataclass(slots=True)
class RouteFailed(Event):
    """The router gave up; the prompt ran as an ordinary turn on the fallback model."""

    fusion_id: str  # the attemptId without `:route`, which the fallback leg carries
    synthetic_model: str | None
    policy: str | None
    fallback_model: str | None
    reason: str | None
    routing_latency_ms: float | None


@dataclass(slots=True)
class SessionEnded(Event):
    pass


@dataclass(slots=True)
class UnknownFusionEvent(Event):
    """A fusion event type this version does not know: a sign the log format moved on."""


@dataclass(slots=True)
class Malformed:
    """Why a line that may have mattered was skipped. Never holds the line's text."""

    reason: str


def parse_line(line: bytes) -> Event | Malformed | None:
    """Turn one line (without its newline) into a record, a Malformed, or None to ignore."""
    line = line.strip(b"\0 \t\r")
    if not may_matter(line):
        return None
    try:
        obj = json.loads(line)
    except UnicodeDecodeError:
        return Malformed("invalid_utf8")
    except ValueError:
        return Malformed("invalid_json")
    except RecursionError:
        return Malformed("too_deep")
    if not isinstance(obj, dict):
        return Malformed("not_an_object")
    event_type = obj.get("type")
    if not isinstance(event_type, str):
        return Malformed("missing_type")
    parse = _PARSERS.get(event_type)
    if parse is None:
        if "fusion_" in event_type and event_type not in KNOWN_UNUSED:
            time_ns = parse_timestamp(obj.get("timestamp"))
            return UnknownFusionEvent(time_ns or 0, event_type=_text(event_type) or "unknown")
        return None
    time_ns = parse_timestamp(obj.get("timestamp"))
    if time_ns is None:
        return Malformed("bad_timestamp")
    data = obj.get("data")
    if data is None and event_type == SHUTDOWN:
        data = {}
    if not isinstance(data, dict):
        return Malformed("bad_data")
    key = None
    key_field = _KEY_FIELDS.get(event_type)
    if key_field is not None:
        key = _text(data.get(key_field))
        if key is None:
            return Malformed(_MISSING_KEY[key_field])
    record = parse(time_ns, key, data)
    if isinstance(record, Malformed) or event_type == SHUTDOWN:
        return record
    # Both notes are empty on almost every line: see that cheaply, build them only if not.
    known = KNOWN_FIELDS[event_type]
    missing = [k for k in REQUIRED_FIELDS[event_type] if data.get(k) is None]
    if missing or not known.issuperset(data):
        unknown = tuple(sorted(_text(k) or "" for k in data if k not in known))
        record = dataclasses.replace(
            record, event_type=event_type, unknown_fields=unknown, missing_fields=tuple(missing)
        )
    return record


def may_matter(line: bytes) -> bool:
    """False when the line certainly is not an event we read; cheap, no parsing."""
    return _ANY_MARKER.search(line) is not None


# The form the CLI writes, `2026-09-09T02:43:27.961Z`, which datetime.fromisoformat reads
# in a fraction of the general way's time. The pattern leaves to the general way what
# fromisoformat would read otherwise: over six fraction digits (it stops at microseconds)
# and hour 24 (which newer Pythons read as the next midnight; the general way rejects it).
_CLI_TIMESTAMP = re.compile(
    r"\d{4}-\d\d-\d\dT(?:[01]\d|2[0-3]):\d\d:\d\d(?:\.\d{1,6})?Z", re.ASCII
)
_UNIX_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)


def parse_timestamp(value: object) -> int | None:
    """ISO-8601 with 0 to 9+ fraction digits to unix nanoseconds; naive means UTC."""
    if not isinstance(value, str):
        return None
    if _CLI_TIMESTAMP.fullmatch(value):
        try:
            return (datetime.fromisoformat(value) - _UNIX_EPOCH) // _MICROSECOND * 1000
        except ValueError:
            pass  # no such day, like February 30: the general way rejects it too
    return _parse_any_timestamp(value)


_TIMESTAMP = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:\.(\d{1,9})\d*)?(Z|[+-]\d\d:?\d\d)?"
)


def _parse_any_timestamp(value: str) -> int | None:
    """The general way, for every form parse_timestamp takes."""
    match = _TIMESTAMP.fullmatch(value.strip())
    if not match:
        return None
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    try:
        moment = datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second),
            tzinfo=timezone.utc,
        )
    except ValueError:
        return None
    offset_s = 0
    if zone and zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        offset_s = sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    seconds = int(moment.timestamp()) - offset_s
    nanos = int((fraction or "0").ljust(9, "0"))
    return seconds * 1_000_000_000 + nanos


def _text(value: object) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    return value[:_MAX_TEXT]


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)  # an integer of hundreds of digits does not fit a float
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


# Integers up to this size come back unchanged from a round trip through a float.
_EXACT_IN_FLOAT = 2**53


def _count(value: object) -> int:
    """Token counts and nano-credits: a wrong or negative value counts as zero."""
    # The usual case, without the float conversion that would give the same. `type`, not
    # isinstance: a JSON true is a bool, an int subclass, and counts as zero.
    if type(value) is int and 0 <= value <= _EXACT_IN_FLOAT:
        return value
    number = _number(value)
    if number is None or number < 0:
        return 0
    return int(number)


def _duration(value: object) -> float:
    number = _number(value)
    return number if number is not None and number >= 0 else 0.0


def _usage(data: dict) -> Usage:
    return Usage(
        request_count=_count(data.get("requestCount")),
        input_tokens=_count(data.get("inputTokens")),
        output_tokens=_count(data.get("outputTokens")),
        cache_read_tokens=_count(data.get("cachedTokens")),
        cache_write_tokens=_count(data.get("cacheWriteTokens")),
        nano_aiu=_count(data.get("totalNanoAiu")),
    )


def _resolved(time_ns: int, fusion_id: str, data: dict) -> Resolved:
    return Resolved(
        time_ns,
        fusion_id=fusion_id,
        pattern=_text(data.get("pattern")),
        synthetic_model=_text(data.get("syntheticModel")),
        policy=_text(data.get("policy")),
        route_source=_text(data.get("routeSource")),
        routing_latency_ms=_number(data.get("routingLatencyMs")),
    )


def _leg_completed(time_ns: int, fusion_id: str, data: dict) -> LegEnded | Malformed:
    return _leg(time_ns, fusion_id, data, default_status="succeeded")


def _leg_failed(time_ns: int, fusion_id: str, data: dict) -> LegEnded | Malformed:
    return _leg(time_ns, fusion_id, data, default_status="failed")


def _leg(time_ns: int, fusion_id: str, data: dict, *, default_status: str) -> LegEnded | Malformed:
    phase_id = _text(data.get("phaseId"))
    if phase_id is None:
        return Malformed("missing_phase_id")
    usage = data.get("usage")
    return LegEnded(
        time_ns,
        fusion_id=fusion_id,
        phase_id=phase_id,
        phase_kind=_text(data.get("phaseKind")),
        role=_text(data.get("role")),
        scope=_text(data.get("conversationScope")),
        model=_text(data.get("model")),
        status=_text(data.get("status")) or default_status,
        verdict=_text(data.get("verdict")),
        duration_ms=_duration(data.get("durationMs")),
        usage=_usage(usage if isinstance(usage, dict) else {}),
        failure_reason=_text(data.get("reason")),
        degraded_to_phase_id=_text(data.get("degradedToPhaseId")),
    )


def _handoff(time_ns: int, fusion_id: str, data: dict) -> Handoff:
    return Handoff(
        time_ns,
        fusion_id=fusion_id,
        source_phase_id=_text(data.get("sourcePhaseId")),
        target_phase_id=_text(data.get("targetPhaseId")),
    )


def _commit(time_ns: int, fusion_id: str, data: dict) -> CommitStarted:
    return CommitStarted(
        time_ns,
        fusion_id=fusion_id,
        source_phase_id=_text(data.get("sourcePhaseId")),
        source_model=_text(data.get("sourceModel")),
    )


def _completed(time_ns: int, fusion_id: str, data: dict) -> Completed:
    return Completed(
        time_ns,
        fusion_id=fusion_id,
        pattern=_text(data.get("pattern")),
        synthetic_model=_text(data.get("syntheticModel")),
        outcome=_text(data.get("outcome")),
        final_source_phase_id=_text(data.get("finalSourcePhaseId")),
        final_source_model=_text(data.get("finalSourceModel")),
        degraded_reason=_text(data.get("degradedReason")),
        duration_ms=_duration(data.get("durationMs")),
        usage=_usage(data),
    )


def _route_failed(time_ns: int, attempt_id: str, data: dict) -> RouteFailed:
    return RouteFailed(
        time_ns,
        fusion_id=attempt_id.removesuffix(":route"),
        synthetic_model=_text(data.get("syntheticModel")),
        policy=_text(data.get("policy")),
        fallback_model=_text(data.get("fallbackModel")),
        reason=_text(data.get("reason")),
        routing_latency_ms=_number(data.get("routingLatencyMs")),
    )


def _shutdown(time_ns: int, key: None, data: dict) -> SessionEnded:
    return SessionEnded(time_ns)


# The field that places a record in its turn: a line without it cannot be used at all.
_KEY_FIELDS = {
    RESOLVED: "fusionId", PHASE_COMPLETED: "fusionId", PHASE_FAILED: "fusionId",
    HANDOFF: "fusionId", COMMIT_STARTED: "fusionId", COMPLETED: "fusionId",
    ROUTE_FAILED: "attemptId",
}
_MISSING_KEY = {"fusionId": "missing_fusion_id", "attemptId": "missing_attempt_id"}

_PARSERS = {
    RESOLVED: _resolved,
    PHASE_COMPLETED: _leg_completed,
    PHASE_FAILED: _leg_failed,
    HANDOFF: _handoff,
    COMMIT_STARTED: _commit,
    COMPLETED: _completed,
    ROUTE_FAILED: _route_failed,
    SHUTDOWN: _shutdown,
}


# -- Any line, for `doctor`, which reports on every event type and not only fusion --------

SESSION_START = "session.start"

# The CLI writes `type` first, so most lines, and the kept head of an oversized line, give
# their type without a JSON parse.
_LEADING_TYPE = re.compile(rb'[\0 \t\r]*\{\s*"type"\s*:\s*"([^"\\]{1,%d})"' % _MAX_TEXT)
# A version is short and plain; a field holding anything else is not reported.
_VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+-]{0,63}")


def event_type_of(line: bytes) -> str | None:
    """The `type` of any line (without its newline), or None when it has no readable one."""
    match = _LEADING_TYPE.match(line)
    if match:
        try:
            return match.group(1).decode()
        except UnicodeDecodeError:
            return None
    obj = _json_object(line)
    return _text(obj.get("type")) if obj is not None else None


def cli_version_of(line: bytes) -> str | None:
    """The Copilot CLI version a `session.start` line names, else None."""
    obj = _json_object(line)
    if obj is None or obj.get("type") != SESSION_START:
        return None
    data = obj.get("data")
    version = data.get("copilotVersion") if isinstance(data, dict) else None
    if isinstance(version, str) and _VERSION.fullmatch(version):
        return version
    return None


def _json_object(line: bytes) -> dict | None:
    try:
        obj = json.loads(line.strip(b"\0 \t\r"))
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


# -- What `python -m tailer scrub` keeps of each event (tailer/scrub.py explains why) ------


class Kept:
    """How the scrubber keeps a field it is allowed to keep; every other field is dropped."""

    VALUE = "value"  # a number, boolean or short string as written: an enum, a model, a count
    TIMESTAMP = "timestamp"  # as written; the demo moves these to recent times
    EVENT_ID = "event_id"  # a fresh uuid, the same one for every mention of the old id
    SESSION_ID = "session_id"  # likewise; the session folder is renamed to match
    FUSION_ID = "fusion_id"  # `fusion-<uuid>`; an id written `<fusionId>:<suffix>` keeps its suffix
    TOOL_CALL_ID = "tool_call_id"


SESSION_RESUME = "session.resume"


def _values(*names: str) -> dict[str, str]:
    return dict.fromkeys(names, Kept.VALUE)


# A dict lists the fields kept of a nested object; a list holding one dict, those of each
# object in a list. Event types not named keep only the envelope and `data: {}`.
SCRUB_ENVELOPE = {
    "type": Kept.VALUE, "id": Kept.EVENT_ID, "timestamp": Kept.TIMESTAMP,
    "parentId": Kept.EVENT_ID,
}
_SCRUB_USAGE = _values(
    "requestCount", "inputTokens", "outputTokens", "cachedTokens", "cacheWriteTokens",
    "totalNanoAiu",
)
_SCRUB_LEG = {
    **_values(
        "phaseKind", "role", "conversationScope", "model", "reasoningEffort", "status",
        "verdict", "durationMs", "projectionMode", "reason", "syntheticModel", "policy",
        "pattern",
    ),
    "fusionId": Kept.FUSION_ID, "phaseId": Kept.FUSION_ID, "turnId": Kept.FUSION_ID,
    "degradedToPhaseId": Kept.FUSION_ID, "usage": _SCRUB_USAGE,
}
SCRUB_DATA = {
    RESOLVED: {
        **_values(
            "contractVersion", "syntheticModel", "policy", "routeSource", "planVersion",
            "policyVersion", "modelUniverseVersion", "ruleId", "selectedRuleId", "pattern",
            "primaryModel", "secondaryModel", "judgeModel", "repairModel", "fallbackModel",
            "followUpModel", "routingLatencyMs",
        ),
        "fusionId": Kept.FUSION_ID, "turnId": Kept.FUSION_ID,
        "phasePlan": [_values("kind", "role", "scope", "conditional")],
        "critics": [{"phaseId": Kept.FUSION_ID, **_values("model", "reasoningEffort")}],
    },
    PHASE_COMPLETED: _SCRUB_LEG,
    PHASE_FAILED: _SCRUB_LEG,
    HANDOFF: {
        "fusionId": Kept.FUSION_ID, "sourcePhaseId": Kept.FUSION_ID,
        "targetPhaseId": Kept.FUSION_ID, "targetModel": Kept.VALUE,
    },
    COMMIT_STARTED: {
        **_values("sourceModel", "kind"),
        "fusionId": Kept.FUSION_ID, "commitId": Kept.FUSION_ID,
        "sourcePhaseId": Kept.FUSION_ID, "toolCallId": Kept.TOOL_CALL_ID,
    },
    COMPLETED: {
        **_values(
            "syntheticModel", "pattern", "outcome", "finalSourceModel", "followUpModel",
            "degradedReason", "phaseCount", "requestCount", "inputTokens", "outputTokens",
            "cachedTokens", "cacheWriteTokens", "totalNanoAiu", "durationMs", "policy",
        ),
        "fusionId": Kept.FUSION_ID, "commitId": Kept.FUSION_ID, "turnId": Kept.FUSION_ID,
        "finalSourcePhaseId": Kept.FUSION_ID,
    },
    ROUTE_FAILED: {
        **_values("syntheticModel", "policy", "fallbackModel", "reason", "routingLatencyMs"),
        "attemptId": Kept.FUSION_ID,
    },
    "session.fusion_change_checkpoint": {
        "fusionId": Kept.FUSION_ID, "codeChanges": _values("linesAdded", "linesRemoved"),
    },
    SESSION_START: {
        **_values("version", "producer", "copilotVersion", "selectedModel"),
        "sessionId": Kept.SESSION_ID, "startTime": Kept.TIMESTAMP,
    },
    SESSION_RESUME: {"resumeTime": Kept.TIMESTAMP, "eventCount": Kept.VALUE},
    SHUTDOWN: _values(
        "shutdownType", "totalPremiumRequests", "totalNanoAiu", "totalApiDurationMs",
        "currentTokens", "systemTokens", "conversationTokens", "toolDefinitionsTokens",
    ),
    "session.usage_record": {"usage": {
        **_values(
            "model", "inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens",
            "cost", "duration", "timeToFirstTokenMs", "initiator", "finishReason",
            "reasoningEffort", "isAuto", "isByok",
        ),
        "fusion": {
            **_values(
                "syntheticModel", "policy", "pattern", "phaseKind", "role", "sourceModel",
                "conversationScope",
            ),
            "fusionId": Kept.FUSION_ID, "phaseId": Kept.FUSION_ID, "commitId": Kept.FUSION_ID,
        },
    }},
    "abort": {"reason": Kept.VALUE},
}
