"""The records a log line becomes: small values of allowlisted metadata, never text.

Every command takes these from tailer/copilot/events.py's parse_line. CODE_FIELDS names the
fields of each that leave the tailer as machine codes, which tailer/copilot/event_values.py's
codes_only checks as each record is built.
"""

from __future__ import annotations

try:  # operator's functions, in C, without operator.py's import (the footer's start-up)
    from _operator import add as _add, sub as _sub
except ImportError:  # another Python than CPython
    from operator import add as _add, sub as _sub

from ..records import TupleRecord, field, record
from ..codes import ENUM, IDENTIFIER, MODEL, TOOL, VERSION, CodeKind

_new = tuple.__new__


class Usage(TupleRecord):
    """Token and credit figures of a leg or a whole turn: input_tokens includes the cache
    reads and writes, as in the GenAI conventions; nano_aiu is credits in billionths.

    A tuple, made and added in C: a model call makes one and every sum of calls one per
    call (the ledgers, each leg's and turn's figures), and a record's compiled __init__
    and __add__ were some 3% of what reading a log into a report cost."""

    __slots__ = ()
    _fields = ("request_count", "input_tokens", "output_tokens", "cache_read_tokens",
               "cache_write_tokens", "nano_aiu")

    def __new__(cls, request_count: int = 0, input_tokens: int = 0, output_tokens: int = 0,
                cache_read_tokens: int = 0, cache_write_tokens: int = 0, nano_aiu: int = 0):
        return _new(cls, (request_count, input_tokens, output_tokens, cache_read_tokens,
                          cache_write_tokens, nano_aiu))

    def __add__(self, other: Usage) -> Usage:
        return _new(Usage, map(_add, self, other))

    def __sub__(self, other: Usage) -> Usage:
        return _new(Usage, map(_sub, self, other))

    def uncached_input(self) -> int:
        """Uncached input, as the CLI's `/usage` and ccusage count input: the input tokens
        less the cache reads and writes they hold, never below 0 (ccusage's max(..., 0), for
        figures that do not add up)."""
        return max(self.input_tokens - self.cache_read_tokens - self.cache_write_tokens, 0)

    @property
    def aiu(self) -> float:
        """Credits: the CLI counts them in billionths."""
        return self.nano_aiu / 1e9


# The records are slotted but not frozen: a frozen record sets each field through
# object.__setattr__, which made building records the largest cost of parsing after
# json.loads. Treat them as values all the same (records.replace).
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
    # The model the plan names for a cascade's repair: what a kept draft saved is priced on
    # it (the report's "worth it", docs/REPORT.md). None where the plan names none.
    repair_model: str | None = None
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
               ("selected_rule_id", VERSION), ("repair_model", MODEL)),
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
