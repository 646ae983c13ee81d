"""A turn's JSON text (rows.TurnJson), written from its row and its records.

A month of logs has some 200,000 model calls and tools, and the JSON report prints each of
them. Made as the dicts json.dumps writes (the general way, which the tests keep as
report_helpers.turn_json), every one cost a dict and then a walk of it in which each key was
escaped again: most of the cost of a turn's row, more than a fifth of what reading a log
into turns costs. Here each object is
one f-string of its values in its fields' order, every text escaped by json's own function
(in C) and every number written as its repr, as json.dumps writes a finite one: the same
bytes, which tests/test_turn_text.py holds to turn_json for every value the fields' types
allow. The records' floats are finite (the decoders and session_state's checks refuse the
others), so no NaN needs json's spelling.
"""

from __future__ import annotations

from json.encoder import encode_basestring_ascii as _string

from ..copilot.event_records import ModelCall
from ..turns.assembly import ToolCall, call_start_ns


def printed(row, calls: list[str], tools: list[str]) -> tuple[bytes, int]:
    """The text of the row (a rows.TurnRow) as json.dumps writes its fields, its model
    calls and tools the texts of call_text and tool_text; and where its start goes."""
    before = (f'{{"session_id":{_string(row.session_id)},"fusion_id":{_string(row.fusion_id)},'
              f'"kind":{_string(row.kind)},"model":{_string(row.model)},"start":')
    after = (f',"pattern":{_string(row.pattern)},"outcome":{_string(row.outcome)},'
             f'"compound":{_flag(row.compound)},"credits":{_number(row.credits)},'
             f'"unknown_credit_calls":{row.unknown_credit_calls!r},"calls":{row.calls!r},'
             f'"duration_ms":{row.duration_ms!r},"routing_ms":{_number(row.routing_ms)},'
             f'"degraded_reason":{_text(row.degraded_reason)},'
             f'"route_failure_reason":{_text(row.route_failure_reason)},'
             f'"legs":[{",".join(map(_leg_text, row.legs))}],"model_calls":[{",".join(calls)}],'
             f'"tools":[{",".join(tools)}],"policy_version":{_text(row.policy_version)}}}')
    return (before + after).encode("ascii"), len(before)


def call_text(turn_start_ns: int, call: ModelCall, leg: int | None) -> str:
    """A model call as a rows.CallRow's object: `leg`, the index of the leg it served."""
    usage = call.usage
    credits = _number(usage.nano_aiu / 1e9) if call.credits_known else "null"
    return (f'{{"leg":{_number(leg)},"model":{_string(call.model)},'
            f'"start_ms":{(call_start_ns(call) - turn_start_ns) / 1e6!r},'
            f'"duration_ms":{call.duration_ms!r},"credits":{credits},'
            f'"input_tokens":{usage.uncached_input()!r},"output_tokens":{usage.output_tokens!r},'
            f'"cache_read_tokens":{usage.cache_read_tokens!r},'
            f'"cache_write_tokens":{usage.cache_write_tokens!r},'
            f'"finish_reason":{_text(call.finish_reason)}}}')


def tool_text(turn_start_ns: int, tool: ToolCall, leg: int | None) -> str:
    """A tool call as a rows.ToolRow's object: `leg`, the index of the leg that ran it."""
    success = tool.success
    return (f'{{"leg":{_number(leg)},"name":{_string(tool.name or "unknown")},'
            f'"success":{"null" if success is None else _flag(success)},'
            f'"start_ms":{(tool.start_ns - turn_start_ns) / 1e6!r},'
            f'"duration_ms":{(tool.end_ns - tool.start_ns) / 1e6!r},'
            f'"timing":{_string(tool.timing)}}}')


def _leg_text(leg) -> str:
    """A rows.LegRow's object."""
    return (f'{{"kind":{_string(leg.kind)},"role":{_string(leg.role)},'
            f'"model":{_string(leg.model)},"status":{_string(leg.status)},'
            f'"verdict":{_text(leg.verdict)},"committed":{_flag(leg.committed)},'
            f'"start_ms":{leg.start_ms!r},"duration_ms":{leg.duration_ms!r},'
            f'"calls":{leg.calls!r},"credits":{_number(leg.credits)},'
            f'"unknown_credit_calls":{leg.unknown_credit_calls!r},'
            f'"input_tokens":{leg.input_tokens!r},"output_tokens":{leg.output_tokens!r},'
            f'"cache_read_tokens":{leg.cache_read_tokens!r},'
            f'"cache_write_tokens":{leg.cache_write_tokens!r},'
            f'"failure_reason":{_text(leg.failure_reason)}}}')


def _text(value: str | None) -> str:
    return "null" if value is None else _string(value)


def _number(value: float | None) -> str:
    return "null" if value is None else repr(value)


def _flag(value: bool) -> str:
    return "true" if value else "false"
