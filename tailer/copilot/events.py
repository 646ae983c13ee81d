"""Parse one events.jsonl line into a small record of allowlisted metadata.

This is the only module that knows the Copilot CLI's field names. The log is the CLI's
private resume state, so the parser is lenient (absent, null and wrongly typed fields all
read as "absent") and it copies out only the metadata named below: text fields such as
`content`, `projectionMessage`, `stagedTerminal`, `message` or `errorMessage` are never
read, so they cannot leak into traces, metrics or logs downstream.

Besides the fusion events, the parser reads what rebuilds a whole turn: each model call
(`session.usage_record`), each tool call (`tool.execution_start` / `_complete`: names, ids
and success, never arguments or results), the moment of each prompt (`user.message`: its
id and time, never its text), where each CLI run begins (`session.start`, `session.resume`)
and the CLI's own totals (`session.shutdown`, `session.usage_checkpoint`).

Most lines of a session (messages, reasoning, permissions) cannot matter to us. The CLI
writes `type` first, so `parse_line` tells them by the line's first bytes and rejects them
before any JSON parsing. The largest lines of a log are tool events and prompts, whose bulk
(a tool's output or arguments, a prompt's text) is never read: those lines are parsed
without it (see `_without_bulk`), so a backfill of large sessions stays close to the speed
of reading the files.

Every number and text it copies out is checked against the range its outputs can carry
(OTLP's int64 and uint64 nanoseconds, doubles, Prometheus's float counters, the checkpoint's
JSON) by the few helpers below that every field goes through. A value of the right type but
an absurd size (a count of 1e300, a duration of centuries, a year 2554 timestamp, an id
holding a lone surrogate) makes the line damaged: `Malformed("absurd_<kind>")` (or
`bad_timestamp`), counted, never exported.

Every text that leaves the tailer as a machine code (a pattern, a reason, a model or tool
name, an id) must also look like one (tailer/codes.py): `codes_only` checks each record
against CODE_FIELDS as it is built, so no output downstream ever sees free text there. A
value that is no code becomes `other` (an id: absent, since `other` would join unrelated
records), and the record names the field in `not_codes` for the metrics to count.
"""

from __future__ import annotations

import functools
import json
import json.scanner
import math
import re
from datetime import datetime, timedelta, timezone

from ..records import field, record, replace
from ..codes import ENUM, FIELD, IDENTIFIER, MODEL, OTHER, TOOL, VERSION, WORDS, CodeKind

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
_ANY_DAMAGE_MARKER = re.compile(b"|".join(re.escape(marker) for marker in DAMAGE_MARKERS))
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
_READ_CALL = {
    **{f"usage{name}": "object" for name in ("", ".copilotUsage", ".fusion", ".toolCounts")},
    **{f"usage.{name}": "string" for name in (
        "model", "finishReason", "initiator", "provider.id", "fusion.fusionId",
        "fusion.phaseId", "fusion.phaseKind", "aiCreditsStatus")},
    **{f"usage.{name}": "number" for name in (
        "inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens", "duration",
        "timeToFirstTokenMs", "copilotUsage.totalNanoAiu")},
}
READ_AS = {
    RESOLVED: {
        **dict.fromkeys(("fusionId", "pattern", "syntheticModel", "policy", "routeSource",
                         "policyVersion", "planVersion", "modelUniverseVersion", "ruleId",
                         "selectedRuleId"), "string"),
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
    USAGE_RECORD: _READ_CALL,
}

# What a value read from a log may be. The bounds are far beyond anything real and far
# inside what every output carries, so no sum or conversion downstream can overflow.
#
# Metadata strings are identifiers and enum values; anything longer is cut here, and the
# cap keeps a damaged log from producing huge spans.
MAX_TEXT = 200
# Tokens and requests of one leg or turn: every whole number up to here is exact in a
# float (Prometheus counters are floats), and a turn must sum over 1,000 such legs before
# its total leaves int64 (OTLP intValue; tailer.outputs.spans clamps even that).
MAX_COUNT = 2**53
# Nano-credits of one leg or turn: a million credits, about a million times a real leg's.
# Exact in a float, so credits (nano-AIU / 1e9) lose nothing, and a float holds the sum of
# any number of them that a lifetime of turns can reach.
MAX_NANO_AIU = 10**15
# durationMs and routingLatencyMs: 30 days, where real turns take minutes. Turned into
# nanoseconds and taken off a timestamp, it stays far inside int64.
MAX_DURATION_MS = 30 * 86_400_000
# Event timestamps: the years 2000 to 2199. Unix nanoseconds fit int64 up to 2262, so every
# span time stays a valid int64 and uint64 with room for the durations taken off it.
EARLIEST_NS = 946_684_800 * 10**9  # 2000-01-01T00:00:00Z
LATEST_NS = 7_258_118_400 * 10**9  # 2200-01-01T00:00:00Z


# The records are slotted but not frozen: a frozen record sets each field through
# object.__setattr__, which made building records the largest cost of parsing after
# json.loads. Treat them as values all the same (records.replace).
@record(slots=True)
class Usage:
    """Token and credit figures of a leg or a whole turn."""

    request_count: int = 0
    input_tokens: int = 0  # includes the cache reads and writes, as in the GenAI conventions
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

    def uncached_input(self) -> int:
        """Uncached input, as the CLI's `/usage` and ccusage count input: the input tokens
        less the cache reads and writes they hold, never below 0 (ccusage's max(..., 0), for
        figures that do not add up)."""
        return max(self.input_tokens - self.cache_read_tokens - self.cache_write_tokens, 0)

    def __sub__(self, other: Usage) -> Usage:
        return Usage(
            self.request_count - other.request_count,
            self.input_tokens - other.input_tokens,
            self.output_tokens - other.output_tokens,
            self.cache_read_tokens - other.cache_read_tokens,
            self.cache_write_tokens - other.cache_write_tokens,
            self.nano_aiu - other.nano_aiu,
        )

    @property
    def aiu(self) -> float:
        """Credits: the CLI counts them in billionths."""
        return self.nano_aiu / 1e9


@record(slots=True)
class Event:
    """Fields every record has: when it was written and what the parser noticed.

    `event_type` is filled in only with the notes, for the drift metrics that need it.
    `not_codes` names the fields whose value was no code and was replaced (see CODE_FIELDS).
    """

    time_ns: int
    event_type: str = field(default="", kw_only=True)
    unknown_fields: tuple[str, ...] = field(default=(), kw_only=True)
    missing_fields: tuple[str, ...] = field(default=(), kw_only=True)
    not_codes: tuple[str, ...] = field(default=(), kw_only=True)


@record(frozen=True, slots=True)
class PlannedLeg:
    """One leg of a routed turn's phase plan: what will run, known before any of it ends.

    Its codes are checked as a record's are (codes_only). `conditional` legs (a repair, a
    revision) run only when a review asks for them."""

    kind: str | None
    role: str | None
    scope: str | None
    conditional: bool


# Legs a phase plan holds at most: real plans have three to five.
MAX_PLANNED_LEGS = 16


@record(slots=True)
class Resolved(Event):
    """`fusion_resolved`: the router chose a pattern and a plan for the turn."""

    fusion_id: str
    pattern: str | None
    synthetic_model: str | None
    policy: str | None
    route_source: str | None
    routing_latency_ms: float | None
    # The remote routing service's own ids: which policy, plan and rule decided the route.
    # Ids only, checked as VERSION codes; `ruleName` and `hint` beside them are free text and
    # never read. Defaults: a turn saved open by an older tailer has none.
    policy_version: str | None = None
    plan_version: str | None = None
    model_universe_version: str | None = None
    rule_id: str | None = None
    selected_rule_id: str | None = None
    phase_plan: tuple[PlannedLeg, ...] = field(default=(), kw_only=True)


# The verdicts of a judge (or a critic) that send the draft back for a repair or a revision.
REJECTING_VERDICTS = ("reject", "revise")


@record(slots=True)
class LegEnded(Event):
    """A `phase_completed` or `phase_failed`: a leg becomes visible only when it ends.

    `credits_given` is False when its usage has no `totalNanoAiu` (the CLI's schema requires
    one): `usage.nano_aiu` is 0 then and means "not given". Where the leg's calls' records
    are, they say what its credits leave out (turns.assembly.Turn.leg_credits)."""

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
    # A default: a leg saved open by an older tailer gave its credits as every real one does.
    credits_given: bool = field(default=True, kw_only=True)


@record(slots=True)
class Handoff(Event):
    """`fusion_handoff`: one leg's output passed on to the next."""

    fusion_id: str
    source_phase_id: str | None
    target_phase_id: str | None


@record(slots=True)
class CommitStarted(Event):
    """`fusion_commit_started`: the chosen leg's answer begins to be committed."""

    fusion_id: str
    source_phase_id: str | None
    source_model: str | None


@record(slots=True)
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


@record(slots=True)
class RouteFailed(Event):
    """The router gave up; the prompt ran as an ordinary turn on the fallback model."""

    fusion_id: str  # the attemptId without `:route`, which the fallback leg carries
    synthetic_model: str | None
    policy: str | None
    fallback_model: str | None
    reason: str | None
    routing_latency_ms: float | None


@record(slots=True)
class ModelCall(Event):
    """One model call (`session.usage_record`, written when the call ended).

    `fusion_id` and `phase_id` name the leg it served; both are None on an ordinary turn.
    `tool_requests` holds the names of the tools the call asked for, one per request.
    `credits_known` is False when the record gives no credits (no `copilotUsage`: a
    bring-your-own-key model, a CLI that did not report them; or `aiCreditsStatus`
    `unavailable` or `partial`, whatever figure is beside it): `usage.nano_aiu` is 0 then
    and means "unknown", never "free", so no sum that holds it is checked for credits.
    """

    model: str
    provider: str | None
    usage: Usage  # request_count is 1
    credits_known: bool
    duration_ms: float
    time_to_first_token_ms: float | None
    finish_reason: str | None
    initiator: str | None
    fusion_id: str | None
    phase_id: str | None
    phase_kind: str | None
    tool_requests: tuple[str, ...]


@record(slots=True)
class ToolStarted(Event):
    """`tool.execution_start`: a tool call began (never its arguments)."""

    tool_call_id: str
    tool_name: str | None
    mcp_server: str | None
    mcp_tool: str | None
    fusion_id: str | None
    phase_id: str | None


@record(slots=True)
class ToolCompleted(Event):
    """`tool.execution_complete`: a tool call ended (never its output)."""

    tool_call_id: str
    success: bool | None
    fusion_id: str | None
    phase_id: str | None


@record(slots=True)
class Prompt(Event):
    """A `user.message`: only when it was written and its event id, never what it says."""

    prompt_id: str


@record(slots=True)
class RunStarted(Event):
    """A CLI process began writing this log: `session.start`, or `session.resume` (`resumed`)."""

    resumed: bool


@record(slots=True)
class SessionTotals(Event):
    """The CLI's own figures for the current run, to check our sums against.

    `nano_aiu` is the run's credits; `models` the figures per model (request_count,
    tokens, credits), None when the event gives none.
    """

    nano_aiu: int | None = None
    models: dict[str, Usage] | None = None


@record(slots=True)
class SessionEnded(SessionTotals):
    """`session.shutdown`: the run ended; its totals per model."""


@record(slots=True)
class UsageCheckpoint(SessionTotals):
    """`session.usage_checkpoint`: the run's credits so far."""


@record(slots=True)
class UnknownFusionEvent(Event):
    """A fusion event type this version does not know: a sign the log format moved on."""


@record(slots=True)
class Malformed:
    """Why a line that may have mattered was skipped. Never holds the line's text."""

    reason: str


# The fields of each record that leave the tailer as machine codes (span attributes and
# names, metric labels, log words, report cells), each with the kind of code it must be.
# The field's name is also the `field` label its refusals are counted under. The keys that
# place a record (fusionId, attemptId, phaseId of a leg, toolCallId) are checked apart: a
# record whose key is no id is damaged. docs/TRACES.md shows this table.
CODE_FIELDS: dict[type, tuple[tuple[str, CodeKind], ...]] = {
    Resolved: (("pattern", ENUM), ("synthetic_model", MODEL), ("policy", ENUM),
               ("route_source", ENUM), ("policy_version", VERSION), ("plan_version", VERSION),
               ("model_universe_version", VERSION), ("rule_id", VERSION),
               ("selected_rule_id", VERSION)),
    LegEnded: (("phase_kind", ENUM), ("role", ENUM), ("scope", ENUM), ("model", MODEL),
               ("status", ENUM), ("verdict", ENUM), ("failure_reason", ENUM),
               ("degraded_to_phase_id", IDENTIFIER)),
    Handoff: (("source_phase_id", IDENTIFIER), ("target_phase_id", IDENTIFIER)),
    CommitStarted: (("source_phase_id", IDENTIFIER), ("source_model", MODEL)),
    Completed: (("pattern", ENUM), ("synthetic_model", MODEL), ("outcome", ENUM),
                ("final_source_phase_id", IDENTIFIER), ("final_source_model", MODEL),
                ("degraded_reason", ENUM)),
    RouteFailed: (("synthetic_model", MODEL), ("policy", ENUM), ("fallback_model", MODEL),
                  ("reason", ENUM)),
    ModelCall: (("model", MODEL), ("provider", TOOL), ("finish_reason", ENUM),
                ("initiator", ENUM), ("fusion_id", IDENTIFIER), ("phase_id", IDENTIFIER),
                ("phase_kind", ENUM), ("tool_requests", TOOL)),
    ToolStarted: (("tool_name", TOOL), ("mcp_server", TOOL), ("mcp_tool", TOOL),
                  ("fusion_id", IDENTIFIER), ("phase_id", IDENTIFIER)),
    ToolCompleted: (("fusion_id", IDENTIFIER), ("phase_id", IDENTIFIER)),
    SessionEnded: (("models", MODEL),),
}
# Every `field` a refusal is counted under: CODE_FIELDS's and a prompt's event id, which is
# checked apart (a prompt without one is placed by its time). A resolved record's phase plan
# is checked apart too (codes_only): its legs' refusals count as a leg's, under phase_kind,
# role and scope. The names of unknown fields
# and the types of unknown fusion events also become OTHER when they are no codes; the drift
# counters count those already.
NOT_CODE_FIELDS = tuple(sorted(
    {name for fields in CODE_FIELDS.values() for name, _ in fields} | {"prompt_id"}))


class _Absurd(Exception):
    """A value of the right type outside the range its outputs can carry (see MAX_COUNT)."""

    def __init__(self, kind: str):
        super().__init__(kind)
        self.kind = kind


def parse_line(line: bytes) -> Event | Malformed | None:
    """Turn one line (without its newline) into a record, a Malformed, or None to ignore."""
    line = line.strip(b"\0 \t\r")
    written_type = _leading_type(line)
    if written_type is None:
        if _ANY_MARKER.search(line) is None:
            return None
        obj = None
    elif written_type in _READ_TYPES:
        obj = _loads_without_bulk(line, written_type)
    elif written_type.find(b"fusion_") < 0 or written_type in _KNOWN_UNUSED_TYPES:
        return None
    else:
        obj = None
    if obj is None:
        try:
            obj = _loads(line)
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
    try:
        return _record(event_type, obj)
    except _Absurd as absurd:
        return Malformed(f"absurd_{absurd.kind}")


def _record(event_type: str, obj: dict) -> Event | Malformed | None:
    """parse_line's work once the line is a JSON object with a type; raises _Absurd."""
    parse = _PARSERS.get(event_type)
    if parse is None:
        if "fusion_" in event_type and event_type not in KNOWN_UNUSED:
            time_ns = parse_timestamp(obj.get("timestamp"))
            return UnknownFusionEvent(time_ns or 0,
                                      event_type=ENUM.accept(_text(event_type)) or "unknown")
        return None
    time_ns = parse_timestamp(obj.get("timestamp"))
    if time_ns is None:
        return Malformed("bad_timestamp")
    data = obj.get("data")
    if data is None and event_type not in _KEY_FIELDS:
        data = {}
    if not isinstance(data, dict):
        return Malformed("bad_data")
    key = None
    not_codes = ()
    key_field = _KEY_FIELDS.get(event_type)
    if key_field is not None:
        key = _text(data.get(key_field))
        if key is None:
            return Malformed(_MISSING_KEY[key_field])
        if not _is_code(IDENTIFIER, key):
            return Malformed(_BAD_KEY[key_field])
    elif event_type == USER_MESSAGE:
        key = _text(obj.get("id"))
        if key is not None and not IDENTIFIER.is_code(key):
            key, not_codes = None, ("prompt_id",)  # the prompt is placed by its time instead
    record = parse(time_ns, key, data)
    if isinstance(record, Malformed):
        return record
    not_codes += codes_only(record)
    if not_codes:
        record.not_codes = not_codes
    if event_type not in KNOWN_FIELDS:
        return record
    # Both notes are empty on almost every line: see that cheaply, build them only if not.
    known = KNOWN_FIELDS[event_type]
    missing = [k for k in REQUIRED_FIELDS[event_type] if data.get(k) is None]
    if missing or not known.issuperset(data):
        unknown = tuple(sorted(_field_name(k) for k in data if k not in known))
        record = replace(
            record, event_type=event_type, unknown_fields=unknown, missing_fields=tuple(missing)
        )
    return record


def _field_name(name: str) -> str:
    """An unknown field's name as it is reported: OTHER when it is no field name."""
    if FIELD.is_code(name):
        return name
    _text(name)  # a lone surrogate damages the line, as in any text
    return OTHER


# The codes of each kind seen lately: nearly every value (a model, a pattern, a leg's phase
# id) repeats on many lines, and a set lookup costs a fraction of a match. Bounded: cleared
# when full. Only accepted values are kept, so a refusal is always decided by the pattern.
# By the kind's name: hashing a CodeKind hashes its pattern, on every line.
_SEEN_LIMIT = 4096
_SEEN: dict[str, set[str]] = {kind.name: set() for kind in (ENUM, MODEL, TOOL, IDENTIFIER, VERSION)}
# CODE_FIELDS with each field's set of seen codes, for the loop below.
_CODE_CHECKS = {
    record_type: tuple((name, kind, _SEEN[kind.name]) for name, kind in fields)
    for record_type, fields in CODE_FIELDS.items()
}


def _is_code(kind: CodeKind, value: str) -> bool:
    seen = _SEEN[kind.name]
    if value in seen:
        return True
    if kind.pattern.fullmatch(value) is None:
        return False
    if len(seen) >= _SEEN_LIMIT:
        seen.clear()
    seen.add(value)
    return True


def codes_only(record: Event) -> tuple[str, ...]:
    """Put OTHER (None for an id) in each field of CODE_FIELDS that holds no code of its
    kind; the names of those fields. For a record not yet handed on (the parser's, or one
    rebuilt from saved data), which it changes in place."""
    refused = ()
    for name, kind, seen in _CODE_CHECKS.get(type(record), ()):
        value = getattr(record, name)
        if value.__class__ is str:
            if value not in seen and not _is_code(kind, value):
                setattr(record, name, None if kind is IDENTIFIER else OTHER)
                refused += (name,)
        elif value and not seen.issuperset(value) and not all(
                [_is_code(kind, item) for item in value]):  # tool names, or a map by model
            setattr(record, name, _named_codes_only(value, kind))
            refused += (name,)
    if record.__class__ is Resolved and record.phase_plan:
        refused += _plan_codes_only(record)
    return refused


_PLAN_CODES = (("kind", "phase_kind"), ("role", "role"), ("scope", "scope"))


def _plan_codes_only(record: Resolved) -> tuple[str, ...]:
    """codes_only for the phase plan: each leg's kind, role and scope is an ENUM, and a
    refusal is counted under the field a leg record holds it in."""
    refused = set()
    plan = []
    for leg in record.phase_plan:
        codes = {}
        for name, counted_as in _PLAN_CODES:
            value = getattr(leg, name)
            codes[name] = ENUM.accept(value)
            if codes[name] != value:
                refused.add(counted_as)
        plan.append(PlannedLeg(**codes, conditional=leg.conditional))
    if refused:
        record.phase_plan = tuple(plan)
    return tuple(sorted(refused))


def _named_codes_only(value: tuple[str, ...] | dict[str, Usage], kind: CodeKind):
    """The names (or a map's keys) with each that is no code made OTHER: a map's figures
    under refused names add up under OTHER, as the calls of such models do."""
    if isinstance(value, tuple):
        return tuple(sorted(name if kind.is_code(name) else OTHER for name in value))
    merged: dict[str, Usage] = {}
    for name, usage in value.items():
        name = name if kind.is_code(name) else OTHER
        merged[name] = merged[name] + usage if name in merged else usage
    return merged


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
    written_type = _leading_type(line)
    if written_type:
        return written_type in _MARKED_TYPES or written_type.startswith(_MARKED_PREFIXES)
    leading = _LEADING_TYPE.match(line)
    if leading is not None:
        return _ANY_MARKER.match(line, leading.start(1) - 1) is not None
    return _ANY_MARKER.search(line) is not None


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


def _leading_type(line: bytes) -> bytes | None:
    """The `type` the line starts with, as the CLI writes it; None for any other start."""
    if line.startswith(_TYPE_PREFIX):
        end = line.find(b'"', _TYPE_START, _TYPE_END)
        if end >= 0:
            written_type = line[_TYPE_START:end]
            if _BACKSLASH not in written_type:
                return written_type
    return None


# json.loads less the work around its C scanner (detecting the encoding, a decoder object's
# checks): a few microseconds, on each of the tens of thousands of lines a backfill reads.
_SCAN_ONCE = json.scanner.make_scanner(json.JSONDecoder())


def _loads(line: bytes) -> object:
    """json.loads(line): the same value, the same exceptions."""
    if not line.startswith(b'{"'):  # json.loads may read it as another encoding
        return json.loads(line)
    text = line.decode("utf-8", "surrogatepass")  # as json.loads decodes
    try:
        value, end = _SCAN_ONCE(text, 0)
    except StopIteration:
        raise ValueError("not a JSON value") from None
    if end != len(text) and text[end:].strip(" \t\n\r"):
        raise ValueError("extra data after the JSON value")
    return value


# -- Reading a large line without its bulk ---------------------------------------------
#
# A tool's output or arguments and a prompt's text can run to megabytes, and decoding them
# (unescaping every quote and newline) is most of what a full json.loads of such a line
# costs. The parser never reads them, so it cuts them out first: the line is parsed as its
# head (everything before the bulky member) joined to its tail (the members after it). No
# JSON string can hold the bytes `,"` (a quote inside a string is escaped), so every `,"`
# is a boundary between members at some depth; the first one in the last _TAIL_BYTES that
# makes the joined text a valid object is the boundary at the bulk's own depth, the first
# member after the bulk. Any doubt (no bulky member near the start, nothing that joins)
# and the line is parsed whole: slower, never wrong.

_WHOLE_BELOW = 4096  # shorter lines are parsed whole: cheaper than cutting them
_HEAD_BYTES = 4096  # where the bulky member's key is looked for
_TAIL_BYTES = 16384  # where the members after the bulk are looked for
_TAIL_TRIES = 8
_BULK_KEYS = {
    b"tool.execution_start": (b',"arguments":',),
    b"tool.execution_complete": (b',"result":', b',"error":'),
}
# A prompt's `data` is all text: the whole object is bulk.
_ALL_DATA_BULK = {b"user.message": b'{"type":"user.message","data":{'}


def _loads_without_bulk(line: bytes, event_type: bytes) -> object | None:
    """The line's JSON value without its bulky member, or None: parse the line whole."""
    if len(line) < _WHOLE_BELOW:
        return None
    cut = _bulk_start(line, event_type)
    if cut is None:
        return None
    head = line[:cut]
    data_opened = head.endswith(b"{")
    boundary = max(cut, len(line) - _TAIL_BYTES)
    for _ in range(_TAIL_TRIES):
        boundary = line.find(b',"', boundary + 1)
        if boundary < 0:
            return None
        tails = [line[boundary + 1:] if data_opened else line[boundary:]]
        if line[boundary - 1] == 0x7D:  # "}": maybe the end of `data` itself
            tails.append(line[boundary - 1:])
        for tail in tails:
            try:
                return _loads(head + tail)
            except (ValueError, RecursionError):
                continue
    return None


def _bulk_start(line: bytes, event_type: bytes) -> int | None:
    """Where the bulky member begins (its `,`, or the inside of a bulky `data`)."""
    opening = _ALL_DATA_BULK.get(event_type)
    if opening is not None:
        return len(opening) if line.startswith(opening) else None
    found = [line.find(key, 0, _HEAD_BYTES) for key in _BULK_KEYS.get(event_type, ())]
    found = [position for position in found if position > 0]
    return min(found) if found else None


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
    """ISO-8601 with 0 to 9+ fraction digits to unix nanoseconds; naive means UTC.

    None for a text that is no such time, and for a time outside EARLIEST_NS..LATEST_NS.
    """
    if not isinstance(value, str):
        return None
    return _parse_text_timestamp(value)


def format_timestamp(time_ns: int) -> str:
    """A time as the CLI writes it: ISO-8601 UTC, always three fraction digits (1.0.102).
    `time_ns` lies within EARLIEST_NS..LATEST_NS, as any parse_timestamp gives."""
    seconds, rest = divmod(time_ns, 1_000_000_000)
    moment = datetime.fromtimestamp(seconds, timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{rest // 1_000_000:03d}Z"


# Lines written together share their time (the CLI replays a leg's messages and tools at
# one instant), so a few remembered answers spare most lines the parsing.
@functools.lru_cache(maxsize=64)
def _parse_text_timestamp(value: str) -> int | None:
    time_ns = None
    if _CLI_TIMESTAMP.fullmatch(value):
        try:
            time_ns = (datetime.fromisoformat(value) - _UNIX_EPOCH) // _MICROSECOND * 1000
        except ValueError:
            pass  # no such day, like February 30: the general way rejects it too
    if time_ns is None:
        time_ns = _parse_any_timestamp(value)
    if time_ns is None or not EARLIEST_NS <= time_ns < LATEST_NS:
        return None
    return time_ns


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


# The helpers every field goes through. Absent, null and wrongly typed values read as absent
# (the log is lenient); a value of the right type outside its range raises _Absurd.

# The halves of a UTF-16 pair, which JSON may escape on their own (`"\ud800"`): they have
# no UTF-8 encoding, so a text holding one cannot reach a span, a log line or a checkpoint.
_SURROGATE = re.compile("[\ud800-\udfff]")


def _text(value: object) -> str | None:
    if type(value) is str and 0 < len(value) <= MAX_TEXT and value.isascii():
        return value  # nearly every text: an id, a name, an enum value
    if not isinstance(value, str) or not value:
        return None
    text = value[:MAX_TEXT]
    if not text.isascii() and _SURROGATE.search(text):
        raise _Absurd("text")
    return text


def _count(value: object, limit: int = MAX_COUNT, kind: str = "count") -> int:
    """A whole number from 0 to limit (a float such as 3.0 too); absent reads as 0."""
    # `type`, not isinstance: a JSON true is a bool, an int subclass, and reads as absent.
    if type(value) is int and 0 <= value <= limit:
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    if isinstance(value, float) and value.is_integer() and 0 <= value <= limit:
        return int(value)
    raise _Absurd(kind)  # negative, fractional, NaN, infinite or too big


def _number(value: object) -> float | None:
    """A finite number as a float; absent, wrongly typed, too big or not finite read as None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)  # an integer of hundreds of digits does not fit a float
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _duration(value: object) -> float | None:
    """Milliseconds from 0 to MAX_DURATION_MS."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if 0 <= value <= MAX_DURATION_MS:  # False for NaN; no float overflow for a huge int
        return float(value)
    raise _Absurd("duration")


def _usage(data: dict) -> Usage:
    return Usage(
        request_count=_count(data.get("requestCount")),
        input_tokens=_count(data.get("inputTokens")),
        output_tokens=_count(data.get("outputTokens")),
        cache_read_tokens=_count(data.get("cachedTokens")),
        cache_write_tokens=_count(data.get("cacheWriteTokens")),
        nano_aiu=_count(data.get("totalNanoAiu"), MAX_NANO_AIU, "credits"),
    )


def _resolved(time_ns: int, fusion_id: str, data: dict) -> Resolved:
    return Resolved(
        time_ns,
        fusion_id=fusion_id,
        pattern=_text(data.get("pattern")),
        synthetic_model=_text(data.get("syntheticModel")),
        policy=_text(data.get("policy")),
        route_source=_text(data.get("routeSource")),
        routing_latency_ms=_duration(data.get("routingLatencyMs")),
        policy_version=_text(data.get("policyVersion")),
        plan_version=_text(data.get("planVersion")),
        model_universe_version=_text(data.get("modelUniverseVersion")),
        rule_id=_text(data.get("ruleId")),
        selected_rule_id=_text(data.get("selectedRuleId")),
        phase_plan=_phase_plan(data.get("phasePlan")),
    )


def _phase_plan(plan: object) -> tuple[PlannedLeg, ...]:
    """The plan's legs as written (codes_only checks them); what is no leg is left out."""
    if not isinstance(plan, list):
        return ()
    return tuple(
        PlannedLeg(_text(leg.get("kind")), _text(leg.get("role")), _text(leg.get("scope")),
                   leg.get("conditional") is True)
        for leg in plan[:MAX_PLANNED_LEGS] if isinstance(leg, dict)
    )


def _leg_completed(time_ns: int, fusion_id: str, data: dict) -> LegEnded | Malformed:
    return _leg(time_ns, fusion_id, data, default_status="succeeded")


def _leg_failed(time_ns: int, fusion_id: str, data: dict) -> LegEnded | Malformed:
    return _leg(time_ns, fusion_id, data, default_status="failed")


def _leg(time_ns: int, fusion_id: str, data: dict, *, default_status: str) -> LegEnded | Malformed:
    phase_id = _text(data.get("phaseId"))
    if phase_id is None:
        return Malformed("missing_phase_id")
    if not _is_code(IDENTIFIER, phase_id):
        return Malformed("bad_phase_id")
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
        duration_ms=_duration(data.get("durationMs")) or 0.0,
        usage=_usage(usage if isinstance(usage, dict) else {}),
        failure_reason=_text(data.get("reason")),
        degraded_to_phase_id=_text(data.get("degradedToPhaseId")),
        credits_given=isinstance(usage, dict) and _is_number(usage.get("totalNanoAiu")),
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
        duration_ms=_duration(data.get("durationMs")) or 0.0,
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
        routing_latency_ms=_duration(data.get("routingLatencyMs")),
    )


# What a model call's figures may be; past these a record is damaged, not a call.
_MAX_CALL_TOKENS = 100_000_000
_MAX_CALL_MS = 7 * 86_400_000.0
# (field of `usage`, its limit, whether it must be there, whether it counts tokens)
_CALL_FIGURES = (
    ("inputTokens", _MAX_CALL_TOKENS, True, True),
    ("outputTokens", _MAX_CALL_TOKENS, True, True),
    ("cacheReadTokens", _MAX_CALL_TOKENS, False, True),
    ("cacheWriteTokens", _MAX_CALL_TOKENS, False, True),
    ("duration", _MAX_CALL_MS, True, False),
)
_MAX_TOOL_REQUESTS = 64
_MAX_MODELS = 64
_DAMAGED_CALL = Malformed("damaged_usage_record")


def _model_call(time_ns: int, key: None, data: dict) -> ModelCall | Malformed:
    """A usage record with a missing or impossible figure is damage: it is not a call.

    The call's credits are `copilotUsage.totalNanoAiu`, what the API charged for it, in
    the billionths the leg's and the turn's `totalNanoAiu` count. `cost` is not: it is the
    model's premium-request multiplier (1.0 for most models).
    """
    usage = data.get("usage")
    if not isinstance(usage, dict):
        return _DAMAGED_CALL
    model = _text(usage.get("model"))
    figures = []
    for name, limit, required, whole in _CALL_FIGURES:
        value = usage.get(name)
        if type(value) is int and 0 <= value <= limit:  # nearly every figure: kept as it is
            figures.append(value)
            continue
        if value is None and not required:
            value = 0
        figure = _call_figure(value, limit)
        if figure is None or (whole and figure != int(figure)):
            return _DAMAGED_CALL
        figures.append(figure)
    if model is None:
        return _DAMAGED_CALL
    input_tokens, output_tokens, cache_read, cache_write, duration = figures
    nano_aiu = _call_nano_aiu(usage.get("copilotUsage"))
    if usage.get("aiCreditsStatus") in _CREDITS_NOT_GIVEN:
        nano_aiu = None
    fusion_id, phase_id, phase_kind = _fusion_block(usage.get("fusion"))
    provider = usage.get("provider")
    provider = _text(provider.get("id") if isinstance(provider, dict) else provider)
    call_usage = Usage(1, int(input_tokens), int(output_tokens), int(cache_read),
                       int(cache_write), nano_aiu or 0)
    time_to_first_token_ms = _call_figure(usage.get("timeToFirstTokenMs"), _MAX_CALL_MS)
    finish_reason, initiator = _text(usage.get("finishReason")), _text(usage.get("initiator"))
    # In the order of ModelCall's fields: by position, as the records of every line are made
    # (see _tool_started).
    return ModelCall(time_ns, model, provider, call_usage, nano_aiu is not None, float(duration),
                     time_to_first_token_ms, finish_reason, initiator, fusion_id, phase_id,
                     phase_kind, _tool_requests(usage.get("toolCounts")))


# The `aiCreditsStatus` of a call whose credits the CLI does not know: "Missing billing is
# unavailable, not a zero charge" (its schema). `partial` is a subtotal, of no one call.
# Any other word (`complete`, one to come) leaves the figure, if there is one, as it is.
_CREDITS_NOT_GIVEN = ("unavailable", "partial")


def _call_nano_aiu(copilot_usage: object) -> int | None:
    """`copilotUsage.totalNanoAiu` range-checked as a leg's; None when the record has none."""
    if not isinstance(copilot_usage, dict):
        return None
    value = copilot_usage.get("totalNanoAiu")
    if not _is_number(value):
        return None
    return _count(value, MAX_NANO_AIU, "credits")


def _is_number(value: object) -> bool:
    """A JSON number (true and false are none, though Python's bools are ints)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _call_figure(value: object, limit: float) -> float | None:
    if type(value) is int and 0 <= value <= limit:  # nearly every figure: said at once
        return float(value)
    number = _number(value)
    return number if number is not None and 0 <= number <= limit else None


def _fusion_block(block: object) -> tuple[str | None, str | None, str | None]:
    """fusionId, phaseId and phaseKind of a `fusion` block; Nones on an ordinary turn."""
    if not isinstance(block, dict):
        return None, None, None
    return _text(block.get("fusionId")), _text(block.get("phaseId")), _text(block.get("phaseKind"))


def _tool_requests(counts: object) -> tuple[str, ...]:
    """`toolCounts` ({tool name: count}) as one name per request, sorted, bounded."""
    if not isinstance(counts, dict) or not counts:
        return ()
    names: list[str] = []
    for name, count in counts.items():
        name = _text(name)
        if name is not None:
            names += [name] * min(_count(count), _MAX_TOOL_REQUESTS)
    return tuple(sorted(names)[:_MAX_TOOL_REQUESTS])


# The records of the lines a log holds most of (a model call, a tool's start and end) are
# made with their fields by position, in the order the class lists them: CPython 3.11 makes
# a record with a dozen keywords in twice the instructions it takes by position.
def _tool_started(time_ns: int, tool_call_id: str, data: dict) -> ToolStarted:
    fusion_id, phase_id, _ = _fusion_block(data.get("fusion"))
    tool_name, mcp_server = _text(data.get("toolName")), _text(data.get("mcpServerName"))
    mcp_tool = _text(data.get("mcpToolName"))
    return ToolStarted(time_ns, tool_call_id, tool_name, mcp_server, mcp_tool, fusion_id, phase_id)


def _tool_completed(time_ns: int, tool_call_id: str, data: dict) -> ToolCompleted:
    fusion_id, phase_id, _ = _fusion_block(data.get("fusion"))
    success = data.get("success")
    success = success if isinstance(success, bool) else None
    return ToolCompleted(time_ns, tool_call_id, success, fusion_id, phase_id)


def _prompt(time_ns: int, event_id: str | None, data: dict) -> Prompt:
    return Prompt(time_ns, prompt_id=event_id or f"at-{time_ns}")


def _run_started(time_ns: int, key: None, data: dict) -> RunStarted:
    return RunStarted(time_ns, resumed=False)


def _run_resumed(time_ns: int, key: None, data: dict) -> RunStarted:
    return RunStarted(time_ns, resumed=True)


def _shutdown(time_ns: int, key: None, data: dict) -> SessionEnded:
    return SessionEnded(
        time_ns, nano_aiu=_total(data.get("totalNanoAiu")),
        models=_model_totals(data.get("modelMetrics")),
    )


def _usage_checkpoint(time_ns: int, key: None, data: dict) -> UsageCheckpoint:
    return UsageCheckpoint(time_ns, nano_aiu=_total(data.get("totalNanoAiu")))


def _total(value: object) -> int | None:
    return None if value is None else _count(value)


def _model_totals(metrics: object) -> dict[str, Usage] | None:
    """`modelMetrics`: {model: {requests {count}, usage {tokens}, totalNanoAiu}}."""
    if not isinstance(metrics, dict):
        return None
    totals = {}
    for model, figures in list(metrics.items())[:_MAX_MODELS]:
        model = _text(model)
        if model is None or not isinstance(figures, dict):
            continue
        requests, usage = figures.get("requests"), figures.get("usage")
        requests = requests if isinstance(requests, dict) else {}
        usage = usage if isinstance(usage, dict) else {}
        totals[model] = Usage(
            _count(requests.get("count")), _count(usage.get("inputTokens")),
            _count(usage.get("outputTokens")), _count(usage.get("cacheReadTokens")),
            _count(usage.get("cacheWriteTokens")), _count(figures.get("totalNanoAiu")),
        )
    return totals


# The field that places a record in its turn: a line without it cannot be used at all.
_KEY_FIELDS = {
    RESOLVED: "fusionId", PHASE_COMPLETED: "fusionId", PHASE_FAILED: "fusionId",
    HANDOFF: "fusionId", COMMIT_STARTED: "fusionId", COMPLETED: "fusionId",
    ROUTE_FAILED: "attemptId", TOOL_STARTED: "toolCallId", TOOL_COMPLETED: "toolCallId",
}
_MISSING_KEY = {
    "fusionId": "missing_fusion_id", "attemptId": "missing_attempt_id",
    "toolCallId": "missing_tool_call_id",
}
# A key that is no id cannot place its record either: the line is damaged.
_BAD_KEY = {
    "fusionId": "bad_fusion_id", "attemptId": "bad_attempt_id", "toolCallId": "bad_tool_call_id",
}

_PARSERS = {
    RESOLVED: _resolved,
    PHASE_COMPLETED: _leg_completed,
    PHASE_FAILED: _leg_failed,
    HANDOFF: _handoff,
    COMMIT_STARTED: _commit,
    COMPLETED: _completed,
    ROUTE_FAILED: _route_failed,
    SHUTDOWN: _shutdown,
    USAGE_CHECKPOINT: _usage_checkpoint,
    USAGE_RECORD: _model_call,
    TOOL_STARTED: _tool_started,
    TOOL_COMPLETED: _tool_completed,
    USER_MESSAGE: _prompt,
    SESSION_START: _run_started,
    SESSION_RESUME: _run_resumed,
}
_READ_TYPES = frozenset(event_type.encode() for event_type in _PARSERS)
_KNOWN_UNUSED_TYPES = frozenset(event_type.encode() for event_type in KNOWN_UNUSED)


# -- Any line, for `doctor`, which reports on every event type and not only fusion --------

# The CLI writes `type` first, so most lines, and the kept head of an oversized line, give
# their type without a JSON parse.
_LEADING_TYPE = re.compile(rb'[\0 \t\r]*\{\s*"type"\s*:\s*"([^"\\]{1,%d})"' % MAX_TEXT)
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
        return ENUM.accept(_text(obj.get("type"))) if obj is not None else None
    except _Absurd:
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
    try:
        obj = json.loads(line.strip(b"\0 \t\r"))
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


# -- What `python -m tailer scrub` keeps of each event (tailer/commands/scrub.py explains why) ------


class Kept:
    """How the scrubber keeps a field it is allowed to keep; every other field is dropped.

    A CodeKind (tailer/codes.py) in place of one of these keeps a number or a boolean as
    written and a string only when it is a code of that kind: any other string becomes
    `other`, so free text in a field that should hold an enum or a name is never shared.
    """

    VALUE = "value"  # a number or a boolean as written (a count, a flag); never a string
    TIMESTAMP = "timestamp"  # as written; the demo moves these to recent times
    EPOCH_MS = "epoch_ms"  # a time as a number of unix milliseconds; moved as a TIMESTAMP is
    EVENT_ID = "event_id"  # a fresh uuid, the same one for every mention of the old id
    SESSION_ID = "session_id"  # likewise; the session folder is renamed to match
    FUSION_ID = "fusion_id"  # `fusion-<uuid>`; an id written `<fusionId>:<suffix>` keeps its suffix
    TOOL_CALL_ID = "tool_call_id"
    # As a field name: every entry of a map keyed by model names, or by tool names. An entry
    # whose name is no code of that kind is dropped.
    ANY_MODEL = "*model"
    ANY_TOOL = "*tool"
    # As a field name: every entry of a map keyed by session ids, each name replaced as a
    # SESSION_ID is.
    ANY_SESSION = "*session"


# The kind of name each map marker stands for.
NAMES_OF = {Kept.ANY_MODEL: MODEL, Kept.ANY_TOOL: TOOL}


def _values(*names: str) -> dict[str, str]:
    return dict.fromkeys(names, Kept.VALUE)


def _codes(kind: CodeKind, *names: str) -> dict[str, CodeKind]:
    return dict.fromkeys(names, kind)


# A dict lists the fields kept of a nested object; a list holding one dict, those of each
# object in a list. Event types not named keep only the envelope and `data: {}`.
SCRUB_ENVELOPE = {
    "type": ENUM, "id": Kept.EVENT_ID, "timestamp": Kept.TIMESTAMP,
    "parentId": Kept.EVENT_ID,
}
_SCRUB_USAGE = _values(
    "requestCount", "inputTokens", "outputTokens", "cachedTokens", "cacheWriteTokens",
    "totalNanoAiu",
)
_SCRUB_LEG = {
    **_codes(ENUM, "phaseKind", "role", "conversationScope", "reasoningEffort", "status",
             "verdict", "projectionMode", "reason", "policy", "pattern"),
    **_codes(MODEL, "model", "syntheticModel"),
    **_values("durationMs"),
    "fusionId": Kept.FUSION_ID, "phaseId": Kept.FUSION_ID, "turnId": Kept.FUSION_ID,
    "degradedToPhaseId": Kept.FUSION_ID, "usage": _SCRUB_USAGE,
}
_SCRUB_CALL_FUSION = {
    **_codes(ENUM, "policy", "pattern", "phaseKind", "role", "conversationScope"),
    **_codes(MODEL, "syntheticModel", "sourceModel"),
    "fusionId": Kept.FUSION_ID, "phaseId": Kept.FUSION_ID, "commitId": Kept.FUSION_ID,
}
_SCRUB_TOKEN_DETAILS = {kind: {"tokenCount": Kept.VALUE} for kind in ("input", "output")}
_SCRUB_MODEL_METRIC = {
    "requests": _values("count", "cost"),
    "usage": _values("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens",
                     "reasoningTokens"),
    "totalNanoAiu": Kept.VALUE, "aiCreditsStatus": ENUM, "cacheExpiresAt": Kept.TIMESTAMP,
    "tokenDetails": _SCRUB_TOKEN_DETAILS,
}
# What a shutdown and its accounting snapshot both total: numbers, model names and codes.
# Of the code changes only the counts: `filesModified` keeps no entry, since [{}] keeps the
# objects of a list and its entries are paths.
_SCRUB_SESSION_TOTALS = {
    **_values("totalPremiumRequests", "totalPremiumRequestCost", "totalUserRequests",
              "totalNanoAiu", "totalApiDurationMs", "lastCallInputTokens", "lastCallOutputTokens"),
    "aiCreditsStatus": ENUM, "currentModel": MODEL, "tokenDetails": _SCRUB_TOKEN_DETAILS,
    "codeChanges": {**_values("linesAdded", "linesRemoved", "filesModifiedCount"),
                    "filesModified": [{}]},
    "modelMetrics": {Kept.ANY_MODEL: _SCRUB_MODEL_METRIC},
    # The main conversation's; a sub-agent's key may be a name someone chose.
    "agentMetrics": {"main": {**_values("totalApiDurationMs", "totalNanoAiu"),
                              "modelMetrics": {Kept.ANY_MODEL: _SCRUB_MODEL_METRIC}}},
    "providerModelMetrics": [{"provider": {"id": TOOL, "label": WORDS, "kind": ENUM},
                              "modelId": MODEL, "modelDisplayName": MODEL,
                              "metrics": _SCRUB_MODEL_METRIC}],
}
SCRUB_DATA = {
    RESOLVED: {
        **_codes(VERSION, "contractVersion", "planVersion", "policyVersion",
                 "modelUniverseVersion", "ruleId", "selectedRuleId"),
        **_codes(ENUM, "policy", "routeSource", "pattern"),
        **_codes(MODEL, "syntheticModel", "primaryModel", "secondaryModel", "judgeModel",
                 "repairModel", "fallbackModel", "followUpModel"),
        **_values("routingLatencyMs"),
        "fusionId": Kept.FUSION_ID, "turnId": Kept.FUSION_ID,
        "phasePlan": [{**_codes(ENUM, "kind", "role", "scope"), **_values("conditional")}],
        "critics": [{"phaseId": Kept.FUSION_ID, "model": MODEL, "reasoningEffort": ENUM}],
    },
    PHASE_COMPLETED: _SCRUB_LEG,
    PHASE_FAILED: _SCRUB_LEG,
    HANDOFF: {
        "fusionId": Kept.FUSION_ID, "sourcePhaseId": Kept.FUSION_ID,
        "targetPhaseId": Kept.FUSION_ID, "targetModel": MODEL,
    },
    COMMIT_STARTED: {
        "sourceModel": MODEL, "kind": ENUM,
        "fusionId": Kept.FUSION_ID, "commitId": Kept.FUSION_ID,
        "sourcePhaseId": Kept.FUSION_ID, "toolCallId": Kept.TOOL_CALL_ID,
    },
    COMPLETED: {
        **_codes(ENUM, "pattern", "outcome", "degradedReason", "policy"),
        **_codes(MODEL, "syntheticModel", "finalSourceModel", "followUpModel"),
        **_values(
            "phaseCount", "requestCount", "inputTokens", "outputTokens", "cachedTokens",
            "cacheWriteTokens", "totalNanoAiu", "durationMs",
        ),
        "fusionId": Kept.FUSION_ID, "commitId": Kept.FUSION_ID, "turnId": Kept.FUSION_ID,
        "finalSourcePhaseId": Kept.FUSION_ID,
    },
    ROUTE_FAILED: {
        **_codes(ENUM, "policy", "reason"),
        **_codes(MODEL, "syntheticModel", "fallbackModel"),
        **_values("routingLatencyMs"),
        "attemptId": Kept.FUSION_ID,
    },
    "session.fusion_change_checkpoint": {
        "fusionId": Kept.FUSION_ID, "codeChanges": _values("linesAdded", "linesRemoved"),
    },
    SESSION_START: {
        **_codes(VERSION, "version", "copilotVersion"),
        "producer": ENUM, "selectedModel": MODEL,
        "sessionId": Kept.SESSION_ID, "startTime": Kept.TIMESTAMP,
    },
    SESSION_RESUME: {"resumeTime": Kept.TIMESTAMP, "eventCount": Kept.VALUE},
    SHUTDOWN: {
        **_SCRUB_SESSION_TOTALS,
        "shutdownType": ENUM,
        **_values("eventsFileSizeBytes", "currentTokens", "systemTokens", "conversationTokens",
                  "toolDefinitionsTokens"),
        "sessionStartTime": Kept.EPOCH_MS,
        "usageAccountingWatermarks": {Kept.ANY_SESSION: Kept.VALUE},
        "accountingSnapshot": {**_SCRUB_SESSION_TOTALS, "sessionStartTime": Kept.TIMESTAMP},
    },
    USAGE_CHECKPOINT: _values("totalNanoAiu"),
    "session.model_change": _codes(MODEL, "newModel", "previousModel"),
    TOOL_STARTED: {
        **_codes(TOOL, "toolName", "mcpServerName", "mcpToolName"),
        "model": MODEL,
        "toolCallId": Kept.TOOL_CALL_ID, "fusion": _SCRUB_CALL_FUSION,
    },
    TOOL_COMPLETED: {
        "success": Kept.VALUE, "model": MODEL,
        "toolCallId": Kept.TOOL_CALL_ID, "fusion": _SCRUB_CALL_FUSION,
    },
    USAGE_RECORD: {"usage": {
        **_values(
            "inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens",
            "cost", "duration", "timeToFirstTokenMs", "isAuto", "isByok",
        ),
        **_codes(ENUM, "initiator", "finishReason", "reasoningEffort", "aiCreditsStatus"),
        "model": MODEL,
        "provider": {"id": TOOL, "kind": ENUM, "label": WORDS},
        "copilotUsage": _values("totalNanoAiu"),
        "toolCounts": {Kept.ANY_TOOL: Kept.VALUE},
        "fusion": _SCRUB_CALL_FUSION,
    }},
    "abort": {"reason": ENUM},
}
