"""Each event type's decoder: a line's `data` into its record, every field checked.

A decoder takes the event's time, the key that places its record (KEY_FIELDS: a fusion
id, an attempt id, a tool call id, a prompt's event id, or None) and its `data`, and reads
only the fields it names, each through tailer/copilot/event_values.py's helpers.
"""

from __future__ import annotations

from .event_records import (
    CODE_FIELDS, CommitStarted, Completed, Handoff, LegEnded, Malformed, ModelCall, PlannedLeg, Prompt,
    Resolved, RouteFailed, RunStarted, SessionEnded, ToolCompleted, ToolStarted, Usage,
    UsageCheckpoint, MAX_PLANNED_LEGS,
)
from .event_types import (
    COMMIT_STARTED, COMPLETED, HANDOFF, PHASE_COMPLETED, PHASE_FAILED, RESOLVED, ROUTE_FAILED,
    SESSION_RESUME, SESSION_START, SHUTDOWN, TOOL_COMPLETED, TOOL_STARTED, USAGE_CHECKPOINT,
    USAGE_RECORD, USER_MESSAGE,
)
from .event_values import (
    MAX_NANO_AIU, code_fields, is_code, names_only, read_codes, read_count, read_duration,
    read_number, read_text,
)
from ..codes import IDENTIFIER


def _usage(data: dict) -> Usage:
    return Usage(
        request_count=read_count(data.get("requestCount")),
        input_tokens=read_count(data.get("inputTokens")),
        output_tokens=read_count(data.get("outputTokens")),
        cache_read_tokens=read_count(data.get("cachedTokens")),
        cache_write_tokens=read_count(data.get("cacheWriteTokens")),
        nano_aiu=read_count(data.get("totalNanoAiu"), MAX_NANO_AIU, "credits"),
    )


def _resolved(time_ns: int, fusion_id: str, data: dict) -> Resolved:
    return Resolved(
        time_ns,
        fusion_id=fusion_id,
        pattern=read_text(data.get("pattern")),
        synthetic_model=read_text(data.get("syntheticModel")),
        policy=read_text(data.get("policy")),
        route_source=read_text(data.get("routeSource")),
        routing_latency_ms=read_duration(data.get("routingLatencyMs")),
        policy_version=read_text(data.get("policyVersion")),
        plan_version=read_text(data.get("planVersion")),
        model_universe_version=read_text(data.get("modelUniverseVersion")),
        rule_id=read_text(data.get("ruleId")),
        selected_rule_id=read_text(data.get("selectedRuleId")),
        repair_model=read_text(data.get("repairModel")),
        phase_plan=_phase_plan(data.get("phasePlan")),
    )


def _phase_plan(plan: object) -> tuple[PlannedLeg, ...]:
    """The plan's legs as written (codes_only checks them); what is no leg is left out."""
    if not isinstance(plan, list):
        return ()
    return tuple(
        PlannedLeg(read_text(leg.get("kind")), read_text(leg.get("role")), read_text(leg.get("scope")),
                   leg.get("conditional") is True)
        for leg in plan[:MAX_PLANNED_LEGS] if isinstance(leg, dict)
    )


def _leg_completed(time_ns: int, fusion_id: str, data: dict) -> LegEnded | Malformed:
    return _leg(time_ns, fusion_id, data, default_status="succeeded")


def _leg_failed(time_ns: int, fusion_id: str, data: dict) -> LegEnded | Malformed:
    return _leg(time_ns, fusion_id, data, default_status="failed")


def _leg(time_ns: int, fusion_id: str, data: dict, *, default_status: str) -> LegEnded | Malformed:
    phase_id = read_text(data.get("phaseId"))
    if phase_id is None:
        return Malformed("missing_phase_id")
    if not is_code(IDENTIFIER, phase_id):
        return Malformed("bad_phase_id")
    usage = data.get("usage")
    return LegEnded(
        time_ns,
        fusion_id=fusion_id,
        phase_id=phase_id,
        phase_kind=read_text(data.get("phaseKind")),
        role=read_text(data.get("role")),
        scope=read_text(data.get("conversationScope")),
        model=read_text(data.get("model")),
        status=read_text(data.get("status")) or default_status,
        verdict=read_text(data.get("verdict")),
        duration_ms=read_duration(data.get("durationMs")) or 0.0,
        usage=_usage(usage if isinstance(usage, dict) else {}),
        failure_reason=read_text(data.get("reason")),
        degraded_to_phase_id=read_text(data.get("degradedToPhaseId")),
        credits_given=isinstance(usage, dict) and _is_number(usage.get("totalNanoAiu")),
    )


def _handoff(time_ns: int, fusion_id: str, data: dict) -> Handoff:
    return Handoff(
        time_ns,
        fusion_id=fusion_id,
        source_phase_id=read_text(data.get("sourcePhaseId")),
        target_phase_id=read_text(data.get("targetPhaseId")),
    )


def _commit(time_ns: int, fusion_id: str, data: dict) -> CommitStarted:
    return CommitStarted(
        time_ns,
        fusion_id=fusion_id,
        source_phase_id=read_text(data.get("sourcePhaseId")),
        source_model=read_text(data.get("sourceModel")),
    )


def _completed(time_ns: int, fusion_id: str, data: dict) -> Completed:
    return Completed(
        time_ns,
        fusion_id=fusion_id,
        pattern=read_text(data.get("pattern")),
        synthetic_model=read_text(data.get("syntheticModel")),
        outcome=read_text(data.get("outcome")),
        final_source_phase_id=read_text(data.get("finalSourcePhaseId")),
        final_source_model=read_text(data.get("finalSourceModel")),
        degraded_reason=read_text(data.get("degradedReason")),
        duration_ms=read_duration(data.get("durationMs")) or 0.0,
        usage=_usage(data),
    )


def _route_failed(time_ns: int, attempt_id: str, data: dict) -> RouteFailed:
    return RouteFailed(
        time_ns,
        fusion_id=attempt_id.removesuffix(":route"),
        synthetic_model=read_text(data.get("syntheticModel")),
        policy=read_text(data.get("policy")),
        fallback_model=read_text(data.get("fallbackModel")),
        reason=read_text(data.get("reason")),
        routing_latency_ms=read_duration(data.get("routingLatencyMs")),
    )


# What a model call's figures may be; past these a record is damaged, not a call.
MAX_CALL_TOKENS = 100_000_000
MAX_CALL_MS = 7 * 86_400_000.0
# (field of `usage`, its limit, whether it must be there, whether it counts tokens)
_CALL_FIGURES = (
    ("inputTokens", MAX_CALL_TOKENS, True, True),
    ("outputTokens", MAX_CALL_TOKENS, True, True),
    ("cacheReadTokens", MAX_CALL_TOKENS, False, True),
    ("cacheWriteTokens", MAX_CALL_TOKENS, False, True),
    ("duration", MAX_CALL_MS, True, False),
)
MAX_TOOL_REQUESTS = 64
_MAX_MODELS = 64
_DAMAGED_CALL = Malformed("damaged_usage_record")


_CALL_MODEL = code_fields(ModelCall, model="model")
_CALL_PROVIDER = code_fields(ModelCall, provider="provider")
_CALL_PROVIDER_ID = code_fields(ModelCall, provider="id")  # of a `provider` object
_CALL_WORDS = code_fields(ModelCall, finish_reason="finishReason", initiator="initiator")
_CALL_FUSION = code_fields(ModelCall, fusion_id="fusionId", phase_id="phaseId",
                           phase_kind="phaseKind")


def _model_call(time_ns: int, key: None, data: dict) -> ModelCall | Malformed:
    """A usage record with a missing or impossible figure is damage: it is not a call.

    The call's credits are `copilotUsage.totalNanoAiu`, what the API charged for it, in
    the billionths the leg's and the turn's `totalNanoAiu` count. `cost` is not: it is the
    model's premium-request multiplier (1.0 for most models).

    Its codes are checked here (CODES_CHECKED), in CODE_FIELDS' order; a text, a figure and
    the credits are read in the order that decides which damage a line is counted under.
    """
    usage = data.get("usage")
    if not isinstance(usage, dict):
        return _DAMAGED_CALL
    (model,), refused = read_codes(usage, _CALL_MODEL)
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
    if usage.get("aiCreditsStatus") in CREDITS_NOT_GIVEN:
        nano_aiu = None
    provider = usage.get("provider")
    (provider,), more = (read_codes(provider, _CALL_PROVIDER_ID) if isinstance(provider, dict)
                         else read_codes(usage, _CALL_PROVIDER))
    (finish_reason, initiator), words = read_codes(usage, _CALL_WORDS)
    block = usage.get("fusion")
    if isinstance(block, dict):
        (fusion_id, phase_id, phase_kind), fusion = read_codes(block, _CALL_FUSION)
        refused += more + words + fusion
    else:
        fusion_id = phase_id = phase_kind = None
        refused += more + words
    call_usage = Usage(1, int(input_tokens), int(output_tokens), int(cache_read),
                       int(cache_write), nano_aiu or 0)
    time_to_first_token_ms = _call_figure(usage.get("timeToFirstTokenMs"), MAX_CALL_MS)
    tool_requests = _tool_requests(usage.get("toolCounts"))
    if tool_requests:
        named = names_only(tool_requests, _TOOL_KIND)
        if named is not None:
            tool_requests, refused = named, refused + ("tool_requests",)
    # In the order of ModelCall's fields: by position, as the records of every line are made
    # (see _tool_started).
    call = ModelCall(time_ns, model, provider, call_usage, nano_aiu is not None, float(duration),
                     time_to_first_token_ms, finish_reason, initiator, fusion_id, phase_id,
                     phase_kind, tool_requests)
    if refused:
        call.not_codes = refused
    return call


_TOOL_KIND = dict(CODE_FIELDS[ModelCall])["tool_requests"]


# The `aiCreditsStatus` of a call whose credits the CLI does not know: "Missing billing is
# unavailable, not a zero charge" (its schema). `partial` is a subtotal, of no one call.
# Any other word (`complete`, one to come) leaves the figure, if there is one, as it is.
CREDITS_NOT_GIVEN = ("unavailable", "partial")


def _call_nano_aiu(copilot_usage: object) -> int | None:
    """`copilotUsage.totalNanoAiu` range-checked as a leg's; None when the record has none."""
    if not isinstance(copilot_usage, dict):
        return None
    value = copilot_usage.get("totalNanoAiu")
    if not _is_number(value):
        return None
    return read_count(value, MAX_NANO_AIU, "credits")


def _is_number(value: object) -> bool:
    """A JSON number (true and false are none, though Python's bools are ints)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _call_figure(value: object, limit: float) -> float | None:
    if type(value) is int and 0 <= value <= limit:  # nearly every figure: said at once
        return float(value)
    number = read_number(value)
    return number if number is not None and 0 <= number <= limit else None


def _tool_requests(counts: object) -> tuple[str, ...]:
    """`toolCounts` ({tool name: count}) as one name per request, sorted, bounded."""
    if not isinstance(counts, dict) or not counts:
        return ()
    names: list[str] = []
    for name, count in counts.items():
        name = read_text(name)
        if name is not None:
            names += [name] * min(read_count(count), MAX_TOOL_REQUESTS)
    return tuple(sorted(names)[:MAX_TOOL_REQUESTS])


# The records of the lines a log holds most of (a model call, a tool's start and end) are
# made with their fields by position, in the order the class lists them: CPython 3.11 makes
# a record with a dozen keywords in twice the instructions it takes by position. Their codes
# are checked as they are read (CODES_CHECKED), in CODE_FIELDS' order.
_TOOL_NAMES = code_fields(ToolStarted, tool_name="toolName", mcp_server="mcpServerName",
                          mcp_tool="mcpToolName")
_TOOL_FUSION = code_fields(ToolStarted, fusion_id="fusionId", phase_id="phaseId")


def _tool_started(time_ns: int, tool_call_id: str, data: dict) -> ToolStarted:
    (tool_name, mcp_server, mcp_tool), refused = read_codes(data, _TOOL_NAMES)
    fusion_id, phase_id, fusion = _tool_fusion(data.get("fusion"))
    started = ToolStarted(time_ns, tool_call_id, tool_name, mcp_server, mcp_tool, fusion_id,
                          phase_id)
    if refused or fusion:
        started.not_codes = refused + fusion
    return started


def _tool_completed(time_ns: int, tool_call_id: str, data: dict) -> ToolCompleted:
    fusion_id, phase_id, refused = _tool_fusion(data.get("fusion"))
    success = data.get("success")
    success = success if isinstance(success, bool) else None
    completed = ToolCompleted(time_ns, tool_call_id, success, fusion_id, phase_id)
    if refused:
        completed.not_codes = refused
    return completed


def _tool_fusion(block: object) -> tuple[str | None, str | None, tuple[str, ...]]:
    """fusionId and phaseId of a tool event's `fusion` block (Nones on an ordinary turn),
    and the names of those that are no ids. Its phaseKind is read as any text (a lone
    surrogate damages the line), though a tool's record keeps none."""
    if not isinstance(block, dict):
        return None, None, ()
    (fusion_id, phase_id), refused = read_codes(block, _TOOL_FUSION)
    read_text(block.get("phaseKind"))
    return fusion_id, phase_id, refused


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
    return None if value is None else read_count(value)


def _model_totals(metrics: object) -> dict[str, Usage] | None:
    """`modelMetrics`: {model: {requests {count}, usage {tokens}, totalNanoAiu}}."""
    if not isinstance(metrics, dict):
        return None
    totals = {}
    for model, figures in list(metrics.items())[:_MAX_MODELS]:
        model = read_text(model)
        if model is None or not isinstance(figures, dict):
            continue
        requests, usage = figures.get("requests"), figures.get("usage")
        requests = requests if isinstance(requests, dict) else {}
        usage = usage if isinstance(usage, dict) else {}
        totals[model] = Usage(
            read_count(requests.get("count")), read_count(usage.get("inputTokens")),
            read_count(usage.get("outputTokens")), read_count(usage.get("cacheReadTokens")),
            read_count(usage.get("cacheWriteTokens")), read_count(figures.get("totalNanoAiu")),
        )
    return totals


# The field that places a record in its turn: a line without it cannot be used at all.
KEY_FIELDS = {
    RESOLVED: "fusionId", PHASE_COMPLETED: "fusionId", PHASE_FAILED: "fusionId",
    HANDOFF: "fusionId", COMMIT_STARTED: "fusionId", COMPLETED: "fusionId",
    ROUTE_FAILED: "attemptId", TOOL_STARTED: "toolCallId", TOOL_COMPLETED: "toolCallId",
}
MISSING_KEY = {
    "fusionId": "missing_fusion_id", "attemptId": "missing_attempt_id",
    "toolCallId": "missing_tool_call_id",
}
# A key that is no id cannot place its record either: the line is damaged.
BAD_KEY = {
    "fusionId": "bad_fusion_id", "attemptId": "bad_attempt_id", "toolCallId": "bad_tool_call_id",
}

DECODERS = {
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
# The types whose decoders check their record's codes themselves (read_codes): the parser
# leaves codes_only out for them.
CODES_CHECKED = frozenset({USAGE_RECORD, TOOL_STARTED, TOOL_COMPLETED})
