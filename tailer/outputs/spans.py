"""Build the OTLP spans of one finished turn.

The trace shape is a contract that the dashboard and users' own TraceQL depend on
(docs/TRACES.md): a root span per turn, a `route hydrafusion` span for the routing
decision, one span per leg named `{phase_kind} {model}`, and under each leg its model calls
(`chat {model}`) and tool calls (`execute_tool {tool}`). An ordinary turn (a prompt answered
without fusion) has a root `ordinary {model}` with its calls and tools under it. Names
follow the OpenTelemetry GenAI conventions where they have one and use `hydrafusion.*`
where they do not.

Ids are derived from the session id and the fusion and phase ids, never random, so the same
turn exported twice (after a restart, or a retry) yields the same trace and span ids.

Each span is written straight to its OTLP/JSON text (hex ids, times as decimal strings):
a backfill makes thousands of spans a second, and building them as nested dictionaries for
`json.dumps` cost more than everything else done per turn. Strings and attributes are
written by tailer.outputs.otlp's helpers, so escaping happens in one place.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone

from .copilot_otel import Root
from ..copilot.event_records import LegEnded, ModelCall, Usage
from .otlp import Unit, attributes_json, json_string, unix_nano
from ..turns.assembly import AT_COMMIT, ToolCall, Turn, call_start_ns, leg_start_ns

KIND_INTERNAL = 1
KIND_CLIENT = 3
STATUS_ERROR = 2
PROVIDER = "github"


def trace_id(session_id: str, turn_key: str) -> str:
    return _digest(session_id, turn_key, size=16)


def span_id(session_id: str, turn_key: str, part: str) -> str:
    return _digest(session_id, turn_key, part, size=8)


def _digest(*parts: str, size: int) -> str:
    # surrogatepass: a session folder whose name is not UTF-8 comes as surrogate escapes
    # (os.fsdecode), and it still needs ids; valid text encodes as plain UTF-8.
    digest = hashlib.sha256("\n".join(parts).encode("utf-8", "surrogatepass")).digest()[:size]
    # An all-zero id is invalid in OTLP.
    return digest.hex() if any(digest) else "01".rjust(size * 2, "0")


def turn_spans(turn: Turn, cli_root: Root | None = None) -> list[Unit]:
    """The root span first, then the route span, one span per leg in log order, then the
    model calls and the tool calls. `cli_root`: the CLI's own root span of the same prompt
    (tailer/outputs/prompt_links.py), which the root links to."""
    tid = trace_id(turn.session_id, turn.key)
    root_id = span_id(turn.session_id, turn.key, "turn")
    tools = turn.tools
    links = [] if cli_root is None else [
        f'{{"traceId":"{cli_root.trace_id}","spanId":"{cli_root.span_id}",'
        f'"attributes":[{_CLI_LINK_ATTRIBUTES}]}}']
    if turn.ordinary:
        spans = [_ordinary_root_span(turn, tools, tid, root_id, links)]
    else:
        spans = [_root_span(turn, tools, tid, root_id, links)]
        latency = turn.routing_latency_ms
        if latency is not None:
            spans.append(_route_span(turn, tid, root_id, latency))
        for leg in turn.legs:
            spans.append(_leg_span(turn, leg, tid, root_id))
    for index, call in enumerate(turn.calls):
        spans.append(_call_span(turn, call, index, tid, _parent_of(turn, call.phase_id, root_id)))
    for tool in tools:
        spans.append(_tool_span(turn, tool, tid, _parent_of(turn, tool.phase_id, root_id)))
    return spans


def turn_key(end_ns: int, root_name: str, tid: str) -> str:
    """`<end, UTC to the ms> <root span name> <trace id>`: the dashboard lists these values
    (a Tempo label-values variable), sorts them as text, newest first, and opens the first
    one's trace, so the waterfall shows the newest turn until the user picks another."""
    seconds, ms = divmod(unix_nano(end_ns) // 1_000_000, 1000)
    return f"{datetime.fromtimestamp(seconds, timezone.utc):%Y-%m-%dT%H:%M:%S}.{ms:03d}Z {root_name} {tid}"


def _parent_of(turn: Turn, phase_id: str | None, root_id: str) -> str:
    """The span of the leg a call or tool served, else the root."""
    leg = turn.leg_of(phase_id)
    return root_id if leg is None else _leg_span_id(turn, leg.phase_id)


def _root_span(turn: Turn, tools: list[ToolCall], tid: str, root_id: str,
               links: list[str]) -> Unit:
    usage = turn.usage
    failure, resolved = turn.route_failure, turn.resolved
    attributes = {
        **_gen_ai(turn.session_id, turn.synthetic_model, turn.response_model, usage),
        "hydrafusion.turn.kind": turn.kind,
        "hydrafusion.fusion_id": turn.key,
        "hydrafusion.pattern": turn.pattern,
        "hydrafusion.policy": turn.policy,
        "hydrafusion.route_source": resolved.route_source if resolved else None,
        "hydrafusion.policy_version": resolved.policy_version if resolved else None,
        "hydrafusion.plan_version": resolved.plan_version if resolved else None,
        "hydrafusion.rule_id": resolved.rule_id if resolved else None,
        "hydrafusion.routing_latency_ms": turn.routing_latency_ms,
        "hydrafusion.outcome": turn.outcome,
        "hydrafusion.degraded_reason": turn.degraded_reason,
        "hydrafusion.phase_count": len(turn.legs),
        "hydrafusion.request_count": usage.request_count,
        "hydrafusion.tool_count": len(tools),
        "hydrafusion.aiu": usage.aiu if turn.credits_known else None,
        "hydrafusion.review_aiu": turn.review_nano_aiu / 1e9 if turn.credits_known else None,
        "hydrafusion.unknown_credit_calls": turn.unknown_credit_calls or None,
        "hydrafusion.models": ",".join(turn.models),
        "hydrafusion.model_sequence": ",".join(turn.model_sequence),
        "hydrafusion.compound": turn.compound,
        "hydrafusion.verdict": turn.verdict,
        "hydrafusion.usage_mismatch": turn.usage_mismatch,
        "hydrafusion.route_failure_reason": failure.reason if failure else None,
        "hydrafusion.fallback_model": failure.fallback_model if failure else None,
    }
    name = "hydrafusion route_failed" if failure else f"hydrafusion {turn.pattern}"
    attributes["hydrafusion.turn.key"] = turn_key(turn.end_ns, name, tid)
    error = f"route_failed: {failure.reason or 'unknown'}" if failure else None
    return _span(tid, root_id, None, name, KIND_INTERNAL, turn.start_ns, turn.end_ns,
                 attributes, error=error, links=links)


def _ordinary_root_span(turn: Turn, tools: list[ToolCall], tid: str, root_id: str,
                        links: list[str]) -> Unit:
    usage = turn.usage
    attributes = {
        **_gen_ai(turn.session_id, turn.main_model, turn.response_model, usage),
        "hydrafusion.turn.kind": turn.kind,
        "hydrafusion.outcome": turn.outcome,
        "hydrafusion.request_count": usage.request_count,
        "hydrafusion.tool_count": len(tools),
        "hydrafusion.aiu": usage.aiu if turn.credits_known else None,
        "hydrafusion.unknown_credit_calls": turn.unknown_credit_calls or None,
        "hydrafusion.models": ",".join(turn.models),
    }
    name = f"ordinary {turn.main_model}"
    attributes["hydrafusion.turn.key"] = turn_key(turn.end_ns, name, tid)
    return _span(tid, root_id, None, name, KIND_INTERNAL, turn.start_ns, turn.end_ns, attributes,
                 links=links)


def _call_span(turn: Turn, call: ModelCall, index: int, tid: str, parent_id: str) -> Unit:
    """One model call, over the time its usage record says it took."""
    ttft = call.time_to_first_token_ms
    attributes = {
        **_gen_ai(turn.session_id, call.model, call.model, call.usage),
        "gen_ai.provider.name": call.provider or PROVIDER,
        "gen_ai.response.finish_reasons": (call.finish_reason,) if call.finish_reason else None,
        "gen_ai.response.time_to_first_chunk": ttft / 1000 if ttft is not None else None,
        "hydrafusion.aiu": call.usage.aiu if call.credits_known else None,
        "hydrafusion.call.initiator": call.initiator,
        "hydrafusion.phase.id": call.phase_id,
    }
    return _span(tid, span_id(turn.session_id, turn.key, f"call {index}"), parent_id,
                 f"chat {call.model}", KIND_CLIENT, call_start_ns(call), call.time_ns,
                 attributes)


def _tool_span(turn: Turn, tool: ToolCall, tid: str, parent_id: str) -> Unit:
    """One tool call; its times are the tool's own only when `hydrafusion.tool.timing` is
    `live` (see turns.ToolCall)."""
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.conversation.id": turn.session_id,
        "gen_ai.tool.name": tool.name,
        "gen_ai.tool.call.id": tool.tool_call_id,
        "hydrafusion.tool.success": tool.success,
        "hydrafusion.tool.mcp_server": tool.mcp_server,
        "hydrafusion.tool.mcp_tool": tool.mcp_tool,
        "hydrafusion.tool.timing": tool.timing,
        "hydrafusion.tool.replayed": True if tool.timing == AT_COMMIT else None,
    }
    return _span(
        tid, span_id(turn.session_id, turn.key, f"tool {tool.tool_call_id}"), parent_id,
        f"execute_tool {tool.name or 'unknown'}", KIND_INTERNAL, tool.start_ns, tool.end_ns,
        attributes, error="tool_failed" if tool.success is False else None,
    )


def _route_span(turn: Turn, tid: str, root_id: str, latency_ms: float) -> Unit:
    start = turn.start_ns
    end = start + round(latency_ms * 1_000_000)
    attributes = {
        "gen_ai.request.model": turn.synthetic_model,
        "hydrafusion.route_source": turn.resolved.route_source if turn.resolved else None,
        "hydrafusion.routing_latency_ms": latency_ms,
        "hydrafusion.pattern": turn.pattern,
    }
    failure = turn.route_failure
    return _span(
        tid, span_id(turn.session_id, turn.key, "route"), root_id,
        "route hydrafusion", KIND_CLIENT, start, end, attributes,
        error=(failure.reason or "unknown") if failure else None,
    )


def _leg_span(turn: Turn, leg: LegEnded, tid: str, root_id: str) -> Unit:
    model = leg.model or "unknown"
    kind = leg.phase_kind or "unknown"
    unknown = turn.leg_credits(leg)[1]
    attributes = {
        **_gen_ai(turn.session_id, turn.synthetic_model, leg.model, leg.usage),
        "hydrafusion.fusion_id": turn.key,
        "hydrafusion.phase.id": leg.phase_id,
        "hydrafusion.phase.kind": leg.phase_kind,
        "hydrafusion.phase.role": leg.role,
        "hydrafusion.phase.scope": leg.scope,
        "hydrafusion.phase.status": leg.status,
        "hydrafusion.phase.verdict": leg.verdict,
        "hydrafusion.phase.committed": turn.is_committed(leg),
        "hydrafusion.phase.failure_reason": leg.failure_reason,
        "hydrafusion.phase.degraded_to": leg.degraded_to_phase_id,
        "hydrafusion.aiu": None if unknown else leg.usage.aiu,
        "hydrafusion.unknown_credit_calls": unknown or None,
        "hydrafusion.request_count": leg.usage.request_count,
        **_calls_difference(turn, leg),
    }
    failed = leg.status in ("failed", "cancelled")
    links = [
        f'{{"traceId":"{tid}","spanId":"{_leg_span_id(turn, handoff.source_phase_id)}",'
        f'"attributes":[{_HANDOFF_LINK_ATTRIBUTES}]}}'
        for handoff in turn.handoffs
        if handoff.target_phase_id == leg.phase_id
        and any(known.phase_id == handoff.source_phase_id for known in turn.legs)
    ]
    return _span(
        tid, _leg_span_id(turn, leg.phase_id), root_id, f"{kind} {model}", KIND_CLIENT,
        leg_start_ns(leg), leg.time_ns, attributes,
        error=(leg.failure_reason or leg.status) if failed else None,
        events=[_verdict_event(judge) for judge in _judges_of(turn, leg)],
        links=links,
    )


def _calls_difference(turn: Turn, leg: LegEnded) -> dict:
    """How the leg's own figures differ from its calls' (nothing when they agree)."""
    if not turn.calls:
        return {}
    difference = turn.calls_difference(leg)
    attributes = {"hydrafusion.phase.call_count": len(turn.leg_calls(leg))}
    if difference is not None:
        attributes.update({
            "hydrafusion.phase.calls_difference.aiu": difference.aiu,
            "hydrafusion.phase.calls_difference.request_count": difference.request_count,
            "hydrafusion.phase.calls_difference.input_tokens": difference.input_tokens,
            "hydrafusion.phase.calls_difference.output_tokens": difference.output_tokens,
            "hydrafusion.phase.calls_difference.cache_read_tokens": difference.cache_read_tokens,
            "hydrafusion.phase.calls_difference.cache_write_tokens":
                difference.cache_write_tokens,
        })
    return attributes


def _judges_of(turn: Turn, leg: LegEnded) -> list[LegEnded]:
    """Judges with a verdict whose judged answer is `leg` (a judge with none judges itself)."""
    return [
        judge for judge in turn.legs
        if judge.verdict and (turn.judged_leg(judge) or judge) is leg
    ]


def _verdict_event(judge: LegEnded) -> str:
    attributes = attributes_json({
        "gen_ai.evaluation.name": "hydrafusion.judge",
        "gen_ai.evaluation.score.label": judge.verdict,
        "hydrafusion.judge.model": judge.model,
        "hydrafusion.judge.phase.id": judge.phase_id,
    })
    return (f'{{"timeUnixNano":"{unix_nano(judge.time_ns)}","name":"gen_ai.evaluation.result",'
            f'"attributes":[{attributes}]}}')


def _leg_span_id(turn: Turn, phase_id: str | None) -> str:
    return span_id(turn.session_id, turn.key, f"phase {phase_id}")


def _gen_ai(session_id: str, request_model: str, response_model: str | None, usage: Usage) -> dict:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": PROVIDER,
        "gen_ai.request.model": request_model,
        "gen_ai.response.model": response_model,
        "gen_ai.conversation.id": session_id,
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
        "gen_ai.usage.cache_read.input_tokens": usage.cache_read_tokens,
        "gen_ai.usage.cache_write.input_tokens": usage.cache_write_tokens,
    }


def _span(
    tid: str, sid: str, parent: str | None, name: str, kind: int, start_ns: int, end_ns: int,
    attributes: dict, *, error: str | None = None, events: list[str] = (), links: list[str] = (),
) -> Unit:
    """One span's OTLP/JSON text; `error` is the message of an error status."""
    start = unix_nano(start_ns)
    text = [
        f'{{"traceId":"{tid}","spanId":"{sid}",',
        f'"parentSpanId":"{parent}",' if parent else "",
        f'"name":{json_string(name)},"kind":{kind},"startTimeUnixNano":"{start}",'
        f'"endTimeUnixNano":"{max(unix_nano(end_ns), start)}",'
        f'"attributes":[{attributes_json(attributes)}]',
    ]
    if error is not None:
        text.append(f',"status":{{"code":{STATUS_ERROR},"message":{json_string(error)}}}')
    if events:
        text.append(f',"events":[{",".join(events)}]')
    if links:
        text.append(f',"links":[{",".join(links)}]')
    text.append("}")
    return Unit(tid, "".join(text))


_HANDOFF_LINK_ATTRIBUTES = attributes_json({"hydrafusion.link": "handoff"})
_CLI_LINK_ATTRIBUTES = attributes_json({"hydrafusion.link": "copilot_cli"})
