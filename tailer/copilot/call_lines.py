"""The lines a log holds most of, read the short way: model calls and tool calls.

Of the lines the parser decodes, some 86% are a model call (`session.usage_record`) or a
tool's start or end (`tool.execution_start`, `tool.execution_complete`), and nearly all of
them come in one shape: the type first, every code a code, every figure a whole number in
range. `call_record` reads such a line straight into its record, without the steps every
other line goes through (tailer/copilot/events.py's parse_line: the type looked up, the
generic record, the decoder, the notes); the line gives exactly the record parse_line gives
for it. Anything else, however slightly off the common shape (a value of another type, a
figure out of range, a code never seen that is no code, damage of any kind), gives None,
and the caller reads the line the general way, which decides it. tests/test_call_lines.py
holds the two ways to the same records on generated lines, odd and malicious ones included,
and holds the common line to this way, so that it never turns slow unnoticed.

Only the fields the decoders read are read here, through the same checks
(tailer/copilot/event_values.py's is_code and parse_timestamp, event_decoders.py's bounds).
"""

from __future__ import annotations

from ..fast_json import NOT_JSON, scan_once
from .event_decoders import CREDITS_NOT_GIVEN, MAX_CALL_MS, MAX_CALL_TOKENS, MAX_TOOL_REQUESTS
from .event_records import ModelCall, ToolCompleted, ToolStarted, Usage
from .event_types import TOOL_COMPLETED, TOOL_STARTED, USAGE_RECORD
from .event_values import MAX_COUNT, MAX_NANO_AIU, code_fields, is_code, parse_timestamp
from .line_json import WHOLE_BELOW, loads, loads_without_bulk

TYPE_CHECKING = False  # typing costs the footer's start-up (copilot/lines.py)
if TYPE_CHECKING:
    from typing import Callable


def call_record(line: bytes) -> ModelCall | ToolStarted | ToolCompleted | None:
    """The record of a model call's or a tool event's line (without its newline) in the
    common shape, as events.parse_line gives it; None for any other line: read it so."""
    read = _READERS.get(line[:_KEY_BYTES])
    if read is None:
        return None
    head, event_type, written_type, decode = read
    # A line that starts with its whole head and ends its object has nothing for
    # parse_line to strip, and its type is written without an escape.
    if not line.startswith(head) or line[-1] != _CLOSING_BRACE:
        return None
    try:
        if len(line) < WHOLE_BELOW:
            text = line.decode("utf-8", "surrogatepass")  # as line_json.loads decodes
            obj, end = scan_once(text, 0)
            if end != len(text):
                return None
        else:
            obj = loads_without_bulk(line, written_type) or loads(line)
    except _NO_OBJECT:
        return None
    if obj.get("type") != event_type:
        return None
    time_ns = parse_timestamp(obj.get("timestamp"))
    data = obj.get("data")
    if time_ns is None or data.__class__ is not dict:
        return None
    try:
        return decode(time_ns, data)
    except TypeError:  # a value no text is, and no set holds: a map or a list (_is_new)
        return None


_CLOSING_BRACE = ord("}")
# What reading a line's JSON raises where parse_line finds the line damaged (a
# UnicodeDecodeError is a ValueError).
_NO_OBJECT = (ValueError, RecursionError) + NOT_JSON


# -- The checks, as the decoders make them ------------------------------------------------
#
# A code passes unchanged when it is a text that is a code of its kind: looked for first
# among the codes of that kind seen lately (is_code's own set, which code_fields gives), in
# line, then by _is_new. A value of another type is no code: a map or a list fails the set
# lookup with TypeError (call_record then returns None), any other fails _is_new. A text
# that is no code is refused by the decoder (and counted): that line is left to it.


def _code_check(record_type: type, name: str) -> tuple:
    """The kind of code of a field of `record_type`, and the set of its codes seen lately."""
    ((_, _, kind, seen),) = code_fields(record_type, **{name: name})
    return kind, seen


_MODEL, _MODELS = _code_check(ModelCall, "model")
_TOOL, _TOOLS = _code_check(ModelCall, "provider")
_ENUM, _ENUMS = _code_check(ModelCall, "finish_reason")
_ID, _IDS = _code_check(ModelCall, "fusion_id")


def _is_new(value: object, kind) -> bool:
    """Whether read_codes passes on as it is a value not among the codes seen lately: a
    text that is a code of its kind."""
    return value.__class__ is str and is_code(kind, value)


# -- Model calls ----------------------------------------------------------------------------


def _model_call(time_ns: int, data: dict) -> ModelCall | None:
    """event_decoders._model_call for a record in the common shape: the checks in line,
    where calls would cost more than the rest (a usage record is a third of a log's lines)."""
    usage = data.get("usage")
    if usage.__class__ is not dict:
        return None
    model, provider = usage.get("model"), usage.get("provider")
    input_tokens, output_tokens = usage.get("inputTokens"), usage.get("outputTokens")
    cache_read, cache_write = usage.get("cacheReadTokens"), usage.get("cacheWriteTokens")
    duration, first_token = usage.get("duration"), usage.get("timeToFirstTokenMs")
    finish_reason, initiator = usage.get("finishReason"), usage.get("initiator")
    credits, block = usage.get("copilotUsage"), usage.get("fusion")
    if cache_read is None:
        cache_read = 0
    if cache_write is None:
        cache_write = 0
    # Whole numbers of tokens, durations whole or not (a NaN or an infinity fails the range).
    if not (input_tokens.__class__ is int and 0 <= input_tokens <= MAX_CALL_TOKENS
            and output_tokens.__class__ is int and 0 <= output_tokens <= MAX_CALL_TOKENS
            and cache_read.__class__ is int and 0 <= cache_read <= MAX_CALL_TOKENS
            and cache_write.__class__ is int and 0 <= cache_write <= MAX_CALL_TOKENS
            and (duration.__class__ is int or duration.__class__ is float)
            and 0 <= duration <= MAX_CALL_MS
            and (first_token is None or (first_token.__class__ is int or first_token.__class__ is float)
                 and 0 <= first_token <= MAX_CALL_MS)):
        return None
    if credits.__class__ is dict:
        nano_aiu = credits.get("totalNanoAiu")
        if not (nano_aiu is None or nano_aiu.__class__ is int and 0 <= nano_aiu <= MAX_NANO_AIU):
            return None
    elif credits is None:
        nano_aiu = None
    else:
        return None
    if usage.get("aiCreditsStatus") in CREDITS_NOT_GIVEN:
        nano_aiu = None
    if provider.__class__ is dict:
        provider = provider.get("id")
    if block.__class__ is dict:
        fusion_id, phase_id = block.get("fusionId"), block.get("phaseId")
        phase_kind = block.get("phaseKind")
    else:
        fusion_id = phase_id = phase_kind = None
    if not ((model in _MODELS or _is_new(model, _MODEL))
            and (provider is None or provider in _TOOLS or _is_new(provider, _TOOL))
            and (finish_reason is None or finish_reason in _ENUMS or _is_new(finish_reason, _ENUM))
            and (initiator is None or initiator in _ENUMS or _is_new(initiator, _ENUM))
            and (fusion_id is None or fusion_id in _IDS or _is_new(fusion_id, _ID))
            and (phase_id is None or phase_id in _IDS or _is_new(phase_id, _ID))
            and (phase_kind is None or phase_kind in _ENUMS or _is_new(phase_kind, _ENUM))):
        return None
    tool_requests = _tool_requests(usage.get("toolCounts"))
    if tool_requests is None:
        return None
    return ModelCall(time_ns, model, provider,
                     Usage(1, input_tokens, output_tokens, cache_read, cache_write, nano_aiu or 0),
                     nano_aiu is not None, float(duration),
                     None if first_token is None else float(first_token), finish_reason,
                     initiator, fusion_id, phase_id, phase_kind, tool_requests)


def _tool_requests(counts: object) -> tuple[str, ...] | None:
    """`toolCounts` as the decoder reads it (one name per request, sorted, bounded), or None
    when a name is no tool's or a count no whole number. Most calls ask for one tool once,
    or for none."""
    if counts.__class__ is not dict or not counts:
        return ()  # as the decoder: anything but a map of names is no request
    if len(counts) == 1:
        ((name, count),) = counts.items()
        if count == 1 and count.__class__ is int and (name in _TOOLS or _is_new(name, _TOOL)):
            return (name,)
    names = []
    for name, count in counts.items():
        if not (count.__class__ is int and 0 <= count <= MAX_COUNT
                and (name in _TOOLS or _is_new(name, _TOOL))):
            return None
        names += [name] * min(count, MAX_TOOL_REQUESTS)
    return tuple(sorted(names)[:MAX_TOOL_REQUESTS])


# -- Tool calls -------------------------------------------------------------------------------


def _tool_fusion(block: object) -> tuple[str | None, str | None] | None:
    """A tool event's fusion id and phase id (Nones on an ordinary turn), or None when the
    block is off the common shape. Its phaseKind is read as any text (event_decoders):
    only one with a lone surrogate damages the line, and no ASCII text holds one."""
    if block.__class__ is not dict:
        return None, None
    fusion_id, phase_id, phase_kind = block.get("fusionId"), block.get("phaseId"), block.get("phaseKind")
    if not ((fusion_id is None or fusion_id in _IDS or _is_new(fusion_id, _ID))
            and (phase_id is None or phase_id in _IDS or _is_new(phase_id, _ID))
            and not (phase_kind.__class__ is str and not phase_kind.isascii())):
        return None
    return fusion_id, phase_id


def _tool_started(time_ns: int, data: dict) -> ToolStarted | None:
    """The key (toolCallId) must be an id: else the line is damaged, the general way says how."""
    tool_call_id, fusion = data.get("toolCallId"), _tool_fusion(data.get("fusion"))
    name, server, tool = data.get("toolName"), data.get("mcpServerName"), data.get("mcpToolName")
    if fusion is None or not ((tool_call_id in _IDS or _is_new(tool_call_id, _ID))
                              and (name is None or name in _TOOLS or _is_new(name, _TOOL))
                              and (server is None or server in _TOOLS or _is_new(server, _TOOL))
                              and (tool is None or tool in _TOOLS or _is_new(tool, _TOOL))):
        return None
    return ToolStarted(time_ns, tool_call_id, name, server, tool, *fusion)


def _tool_completed(time_ns: int, data: dict) -> ToolCompleted | None:
    tool_call_id, fusion = data.get("toolCallId"), _tool_fusion(data.get("fusion"))
    if fusion is None or not (tool_call_id in _IDS or _is_new(tool_call_id, _ID)):
        return None
    success = data.get("success")
    return ToolCompleted(time_ns, tool_call_id, success if success.__class__ is bool else None,
                         *fusion)


# The line's start as the CLI writes it, up to the type's closing quote; the readers by the
# first _KEY_BYTES of it, each with the whole head, the type (as text and as written) and
# its decoder. The first bytes tell the three heads apart (tests/test_call_lines.py).
_TYPE_PREFIX = b'{"type":"'
_HEADS: dict[str, Callable[[int, dict], object]] = {
    USAGE_RECORD: _model_call, TOOL_STARTED: _tool_started, TOOL_COMPLETED: _tool_completed,
}
_KEY_BYTES = min(len(_TYPE_PREFIX) + len(event_type) + 1 for event_type in _HEADS)
_READERS = {
    (_TYPE_PREFIX + event_type.encode() + b'"')[:_KEY_BYTES]:
        (_TYPE_PREFIX + event_type.encode() + b'"', event_type, event_type.encode(), decode)
    for event_type, decode in _HEADS.items()
}
