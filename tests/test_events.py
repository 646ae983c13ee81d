"""The parser: allowlisted records out of single lines, and a reason for every rejection."""

import copy
import json
import re
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import example, given, settings, strategies as st

from tailer import records
from tailer.copilot import event_fields, event_records, event_types, event_values, events, line_json
from tailer.copilot.event_records import (
    Completed, LegEnded, Malformed, Resolved, RouteFailed, SessionEnded, UnknownFusionEvent,
    Usage,
)
from tailer.copilot.event_values import parse_timestamp
from tailer.copilot.events import parse_line


def line(event_type, data, timestamp="2026-09-09T02:43:27.96Z", **envelope):
    return json.dumps(
        {"type": event_type, "data": data, "id": "e1", "timestamp": timestamp,
         "parentId": None, **envelope},
        separators=(",", ":"),
    ).encode()


LEG = {
    "fusionId": "fusion-1", "phaseId": "fusion-1:judge", "phaseKind": "judge", "role": "judge",
    "conversationScope": "review", "model": "gpt-5.6-sol", "reasoningEffort": "high",
    "status": "succeeded", "verdict": "reject", "durationMs": 2500.5,
    "usage": {"requestCount": 2, "inputTokens": 900, "outputTokens": 80, "cachedTokens": 600,
              "cacheWriteTokens": 100, "totalNanoAiu": 1_250_000_000},
    "content": "secret", "projectionMessage": "secret", "projectionMode": "none",
    "stagedTerminal": None,
}


def test_leg_record_holds_the_metadata_only():
    record = parse_line(line("assistant.fusion_phase_completed", LEG))
    assert record == LegEnded(
        1788921807960000000, fusion_id="fusion-1", phase_id="fusion-1:judge",
        phase_kind="judge", role="judge", scope="review", model="gpt-5.6-sol",
        status="succeeded", verdict="reject", duration_ms=2500.5,
        usage=Usage(2, 900, 80, 600, 100, 1_250_000_000), failure_reason=None,
        degraded_to_phase_id=None,
    )
    assert record.usage.aiu == 1.25


def test_no_record_type_has_a_field_for_text():
    """The allowlist is the set of record fields: none of them may carry free text."""
    text_fields = {"content", "message", "error_message", "projection_message", "hint",
                   "rule_name", "staged_terminal", "arguments", "result", "path"}
    for record_type in (Resolved, LegEnded, event_records.Handoff, event_records.CommitStarted, Completed,
                        RouteFailed, SessionEnded, UnknownFusionEvent, event_records.ModelCall,
                        event_records.ToolStarted, event_records.ToolCompleted, event_records.Prompt,
                        event_records.RunStarted, event_records.UsageCheckpoint):
        names = {f.name for f in records.fields(record_type)}
        assert not names & text_fields, record_type


def test_phase_failed_defaults_to_failed_and_keeps_its_reason():
    data = {"fusionId": "f", "phaseId": "f:judge", "phaseKind": "judge", "model": "m",
            "durationMs": 10, "reason": "timeout", "degradedToPhaseId": "f:phase:0",
            "errorMessage": "secret"}
    record = parse_line(line("assistant.fusion_phase_failed", data))
    assert (record.status, record.failure_reason, record.degraded_to_phase_id) == (
        "failed", "timeout", "f:phase:0")
    assert record.usage == Usage()


def test_resolved_completed_and_route_failed():
    resolved = parse_line(line("session.fusion_resolved", {
        "fusionId": "fusion-1", "pattern": "cascade", "syntheticModel": "hydrafusion",
        "policy": "standard", "routeSource": "capi_plan", "routingLatencyMs": 231,
        "judgeModel": "gpt-5.6-sol", "repairModel": "claude-opus-5",
        "hint": "secret", "ruleName": "secret", "scores": None}))
    assert (resolved.pattern, resolved.route_source, resolved.routing_latency_ms,
            resolved.repair_model) == ("cascade", "capi_plan", 231.0, "claude-opus-5")
    completed = parse_line(line("session.fusion_completed", {
        "fusionId": "fusion-1", "pattern": "cascade", "outcome": "completed",
        "finalSourcePhaseId": "fusion-1:repair", "finalSourceModel": "gpt-5.6-sol",
        "phaseCount": 3, "requestCount": 5, "inputTokens": 10, "outputTokens": 5,
        "cachedTokens": 4, "cacheWriteTokens": 1, "totalNanoAiu": 7, "durationMs": 9000}))
    assert completed.usage == Usage(5, 10, 5, 4, 1, 7)
    assert completed.final_source_phase_id == "fusion-1:repair"
    failed = parse_line(line("session.fusion_route_failed", {
        "attemptId": "fusion-9:route", "reason": "transport", "fallbackModel": "gpt-5.6-mini",
        "errorMessage": "secret"}))
    assert (failed.fusion_id, failed.reason) == ("fusion-9", "transport")


def test_non_fusion_lines_are_ignored_without_parsing(monkeypatch):
    def refuse(*_):
        raise AssertionError("parsed a line that cannot matter")

    monkeypatch.setattr(events, "loads", refuse)
    monkeypatch.setattr(line_json, "loads", refuse)
    assert parse_line(line("assistant.message", {"content": "hello"})) is None
    assert parse_line(line("assistant.reasoning", {"content": "x" * 100_000})) is None
    # The type the line starts with decides, whatever the line quotes.
    assert parse_line(line("assistant.message", {"content": '"session.fusion_resolved"'})) is None
    assert parse_line(b"") is None
    assert parse_line(b"\0\0\0\0") is None


def test_known_unused_and_unrelated_types_are_ignored():
    assert parse_line(line("session.fusion_change_checkpoint", {"codeChanges": {}})) is None
    # A line that does not start as the CLI writes, quoting an event type, costs a parse.
    quoted = json.dumps({"data": {"content": '"session.fusion_resolved"'}, "type": "x"})
    assert parse_line(quoted.encode()) is None


def test_unknown_fusion_event_type_is_reported():
    record = parse_line(line("session.fusion_rerouted", {"fusionId": "f"}))
    assert isinstance(record, UnknownFusionEvent)
    assert record.event_type == "session.fusion_rerouted"


def test_unknown_and_missing_fields_are_noted():
    data = dict(LEG, brandNewField=1)
    del data["model"]
    record = parse_line(line("assistant.fusion_phase_completed", data))
    assert record.unknown_fields == ("brandNewField",)
    assert record.missing_fields == ("model",)
    assert record.event_type == "assistant.fusion_phase_completed"
    assert record.model is None


def test_either_note_alone_is_noted():
    unknown_only = parse_line(line("assistant.fusion_phase_completed", dict(LEG, brandNewField=1)))
    assert (unknown_only.unknown_fields, unknown_only.missing_fields) == (("brandNewField",), ())
    missing_only = parse_line(line("assistant.fusion_phase_completed", dict(LEG, model=None)))
    assert (missing_only.unknown_fields, missing_only.missing_fields) == ((), ("model",))


@given(st.lists(st.sampled_from(
    [*event_types.MARKERS, b'"session.', b"fusion_", b'"sessionXfusion_', b'"', b"x", b"\0"]
)).map(b"".join))
def test_may_matter_is_true_exactly_when_a_damage_marker_is_there(raw):
    """Tool events only add detail: one too long to read is not damage."""
    tool_markers = set(event_types.MARKERS) - set(event_types.DAMAGE_MARKERS)
    assert tool_markers == {b'"tool.execution_start"', b'"tool.execution_complete"'}
    assert event_types.may_matter(raw) == any(marker in raw for marker in event_types.DAMAGE_MARKERS)


@pytest.mark.parametrize("raw, reason", [
    (b'{"type":"session.fusion_resolved","data":{', "invalid_json"),
    (b'["session.fusion_resolved"]', "not_an_object"),
    (b'{"type":"session.fusion_resolved","data":{"fusionId":"\xff\xfe"},'
     b'"timestamp":"2026-01-01T00:00:00Z"}', "invalid_utf8"),
    (line("session.fusion_resolved", {"fusionId": "f"}, timestamp="yesterday"), "bad_timestamp"),
    (line("session.fusion_resolved", {"pattern": "single"}), "missing_fusion_id"),
    (line("session.fusion_resolved", ["not", "an", "object"]), "bad_data"),
    (line("assistant.fusion_phase_completed", {"fusionId": "f"}), "missing_phase_id"),
    (line("session.fusion_route_failed", {"reason": "transport"}), "missing_attempt_id"),
    (b'{"type":1,"data":"session.fusion_resolved"}', "missing_type"),
])
def test_damaged_lines_get_a_reason(raw, reason):
    assert parse_line(raw) == Malformed(reason)


def test_wrong_types_read_as_absent():
    data = dict(LEG, model=["x"], durationMs="long", verdict=True,
                usage={"inputTokens": "many", "outputTokens": None, "requestCount": True,
                       "totalNanoAiu": 3.0})
    record = parse_line(line("assistant.fusion_phase_completed", data))
    assert (record.model, record.duration_ms, record.verdict) == (None, 0.0, None)
    assert record.usage == Usage(nano_aiu=3)


SURROGATE = "\ud800"  # what a JSON "\\ud800" reads as: half a UTF-16 pair, with no UTF-8 form


@pytest.mark.parametrize("event_type, data, reason", [
    ("assistant.fusion_phase_completed", dict(LEG, usage={"inputTokens": 2**53 + 1}), "absurd_count"),
    ("assistant.fusion_phase_completed", dict(LEG, usage={"outputTokens": -5}), "absurd_count"),
    ("assistant.fusion_phase_completed", dict(LEG, usage={"requestCount": 2.5}), "absurd_count"),
    ("assistant.fusion_phase_completed", dict(LEG, usage={"cachedTokens": 1e300}), "absurd_count"),
    ("assistant.fusion_phase_completed", dict(LEG, usage={"inputTokens": 10**400}), "absurd_count"),
    ("assistant.fusion_phase_completed", dict(LEG, usage={"cacheWriteTokens": float("nan")}),
     "absurd_count"),
    ("assistant.fusion_phase_completed", dict(LEG, usage={"totalNanoAiu": 1.5e308}), "absurd_credits"),
    ("assistant.fusion_phase_completed", dict(LEG, usage={"totalNanoAiu": 10**15 + 1}),
     "absurd_credits"),
    ("assistant.fusion_phase_completed", dict(LEG, durationMs=1e300), "absurd_duration"),
    ("assistant.fusion_phase_completed", dict(LEG, durationMs=-1), "absurd_duration"),
    ("assistant.fusion_phase_completed", dict(LEG, durationMs=float("inf")), "absurd_duration"),
    ("assistant.fusion_phase_completed", dict(LEG, durationMs=10**400), "absurd_duration"),
    ("assistant.fusion_phase_failed", dict(LEG, durationMs=30 * 86_400_000 + 1), "absurd_duration"),
    ("session.fusion_resolved", {"fusionId": "f", "routingLatencyMs": 1e20}, "absurd_duration"),
    ("session.fusion_route_failed", {"attemptId": "f:route", "routingLatencyMs": float("-inf")},
     "absurd_duration"),
    ("session.fusion_completed", {"fusionId": "f", "totalNanoAiu": 2e15}, "absurd_credits"),
    ("session.fusion_completed", {"fusionId": "f", "inputTokens": 2**63}, "absurd_count"),
    ("session.fusion_resolved", {"fusionId": "fusion-" + SURROGATE}, "absurd_text"),
    ("assistant.fusion_phase_completed", dict(LEG, phaseId=SURROGATE + ":judge"), "absurd_text"),
    ("assistant.fusion_phase_completed", dict(LEG, model="gpt" + SURROGATE), "absurd_text"),
    ("session.fusion_route_failed", {"attemptId": "\udfff:route"}, "absurd_text"),
    ("session.fusion_handoff", {"fusionId": "f", "targetPhaseId": SURROGATE}, "absurd_text"),
    ("session.fusion_completed", {"fusionId": "f", "brand" + SURROGATE: 1}, "absurd_text"),
    ("session.fusion_" + SURROGATE, {"fusionId": "f"}, "absurd_text"),
])
def test_absurd_values_make_the_line_damaged(event_type, data, reason):
    assert parse_line(line(event_type, data)) == Malformed(reason)


def test_the_bounds_themselves_are_read():
    usage = {"requestCount": 2**53, "inputTokens": float(2**53), "totalNanoAiu": 10**15}
    record = parse_line(line("assistant.fusion_phase_completed",
                             dict(LEG, usage=usage, durationMs=30 * 86_400_000)))
    assert record.usage == Usage(2**53, 2**53, 0, 0, 0, 10**15)
    assert record.duration_ms == 30 * 86_400_000


@given(st.text(st.sampled_from("ab\u00e9\u20ac\U0001f600\ud800\udbff\udc00\udfff\ue000"), max_size=210))
def test_a_text_is_absurd_when_its_kept_part_holds_a_surrogate(text):
    """read_text asks the UTF-8 codec, where it searched for the surrogates' range."""
    try:
        kept = event_values.read_text(text)
    except event_values.Absurd:
        kept = "absurd"
    surrogate = re.search("[\ud800-\udfff]", text[:event_values.MAX_TEXT])
    assert kept == ("absurd" if surrogate else text[:event_values.MAX_TEXT] or None)


def test_a_surrogate_pair_is_text_and_a_surrogate_past_the_kept_length_is_cut_off():
    """Neither damages the line; neither is a code, so both read as `other`."""
    record = parse_line(line("assistant.fusion_phase_completed",
                             dict(LEG, model="gpt-\U0001f600", role="x" * 200 + SURROGATE)))
    assert (record.model, record.role) == ("other", "other")
    assert record.not_codes == ("role", "model")


def test_nul_padding_and_u2028_inside_strings():
    data = dict(LEG, content="line\u2028separator\u2029paragraph")
    raw = b"\0\0\0" + json.dumps({"type": "assistant.fusion_phase_completed", "data": data,
                                  "timestamp": "2026-09-09T02:43:27Z"}).encode()
    assert isinstance(parse_line(raw), LegEnded)


def test_session_shutdown_ends_the_session():
    assert parse_line(line("session.shutdown", {"shutdownType": "normal"})) == SessionEnded(
        1788921807960000000)


@pytest.mark.parametrize("text, expected", [
    ("2026-09-09T02:43:27Z", 1788921807_000000000),
    ("2026-09-09T02:43:27.9Z", 1788921807_900000000),
    ("2026-09-09T02:43:27.96Z", 1788921807_960000000),
    ("2026-09-09T02:43:27.961Z", 1788921807_961000000),
    ("2026-09-09T02:43:27.961234567891Z", 1788921807_961234567),
    ("2026-09-09T02:43:27.123456Z", 1788921807_123456000),
    ("2026-09-09T02:43:27.1234567Z", 1788921807_123456700),
    ("2026-09-09T04:43:27.5+02:00", 1788921807_500000000),
    ("2026-09-09T02:43:27", 1788921807_000000000),
    ("2000-01-01T00:00:00Z", event_values.EARLIEST_NS),
    ("2199-12-31T23:59:59.999999999Z", event_values.LATEST_NS - 1),
])
def test_timestamps(text, expected):
    assert parse_timestamp(text) == expected


@pytest.mark.parametrize("text", [
    "", "2026-13-01T00:00:00Z", "2026-09-09", None, 17, "2026-02-30T00:00:00.5Z",
    "2026-09-09T24:00:00Z", "2026-09-09T23:59:60Z", "2026-W36-3T02:43:27Z",
    # Real times outside the years 2000 to 2199: no span or gauge could carry them sensibly.
    "1969-12-31T23:59:59.5Z", "1999-12-31T23:59:59.999Z", "2200-01-01T00:00:00Z",
    "2554-07-22T00:00:00Z", "9999-12-31T23:59:59Z", "2000-01-01T00:30:00+01:00",
])
def test_bad_timestamps(text):
    assert parse_timestamp(text) is None


def test_the_cli_form_takes_the_fast_way(monkeypatch):
    """The timestamp on every line the CLI writes never needs the general pattern."""
    def refuse(_):
        raise AssertionError("took the general way")

    monkeypatch.setattr(event_values, "_parse_any_timestamp", refuse)
    monkeypatch.setattr(event_values, "_PARSED", {})  # no answer remembered: the check can fail
    assert parse_timestamp("2026-09-09T02:43:27.961Z") == 1788921807_961000000
    assert parse_timestamp("2026-09-09T02:43:27.96Z") == 1788921807_960000000
    assert parse_timestamp("2026-09-09T02:43:27Z") == 1788921807_000000000


def _two_digits(low, high):
    return st.integers(low, high).map("{:02d}".format)


def _timestamps(spaces, separators, digits, zones):
    return st.builds(
        "{}{}-{}-{}{}{}:{}:{}{}{}{}".format,
        spaces,
        st.integers(0, 9999).map("{:04d}".format),
        _two_digits(0, 13),
        _two_digits(0, 32),
        separators,
        _two_digits(0, 25),
        _two_digits(0, 61),
        _two_digits(0, 61),
        st.one_of(st.just(""), st.text(digits, max_size=12).map(".{}".format)),
        zones,
        spaces,
    )


def _one_changed(text, at, character, how):
    """`text` with `character` put in at `at`, in the place of the one there, or that one
    taken out."""
    return {"insert": text[:at] + character + text[at:], "replace": text[:at] + character + text[at + 1:],
            "delete": text[:at] + text[at + 1:]}[how]


_CLI_FORM = _timestamps(st.just(""), st.just("T"), "0123456789", st.just("Z"))
# The CLI's form, in range or just out of it (month 13, hour 24, second 60, seven or more
# fraction digits), and near-misses of it: other separators, zones and digits, stray spaces,
# a character put in, changed or taken out anywhere.
_TIMESTAMPS = st.one_of(
    _CLI_FORM,
    _timestamps(st.sampled_from(["", " "]), st.sampled_from("T t_"), "0123456789\u0663",
                st.sampled_from(["Z", "", "z", "+02:00", "-0530", "+00:00", "+24:00"])),
    st.builds(_one_changed, _CLI_FORM, st.integers(0, 31), st.sampled_from("-T:.Z0 9x\u0663+"),
              st.sampled_from(["insert", "replace", "delete"])),
)


@given(_TIMESTAMPS)
def test_the_fast_way_agrees_with_the_general_way(text):
    general = event_values._parse_any_timestamp(text)
    if general is not None and not event_values.EARLIEST_NS <= general < event_values.LATEST_NS:
        general = None
    assert parse_timestamp(text) == general


@given(_TIMESTAMPS)
@example("2026-09-09T02:43:27.1234567891Z")
@example("2026-09-09T02x43:27Z")
def test_the_arithmetic_of_the_cli_form_is_the_general_ways(text):
    """The fast way alone (not hidden behind the general way, which parse_timestamp asks
    when the fast way declines): the general way's answer, and one for every text of the
    CLI's form that is a time."""
    general = event_values._parse_any_timestamp(text)
    fast = event_values._cli_timestamp(text)
    assert fast == general or fast is None
    cli_form = re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z", text, re.ASCII)
    assert (fast is not None) == (cli_form is not None and general is not None)


@given(st.datetimes(datetime(1, 1, 1), datetime(9999, 12, 31, 23, 59, 59)), st.text("0123456789", max_size=9))
def test_the_arithmetic_of_the_cli_form_is_datetimes(moment, fraction):
    """Every time of the CLI's form, from year 1 to 9999 (leap days and the turns of
    centuries among them), as datetime counts the seconds since 1970."""
    text = moment.strftime("%Y-%m-%dT%H:%M:%S") if moment.year >= 1000 else (
        f"{moment.year:04d}" + moment.strftime("-%m-%dT%H:%M:%S"))
    text += f".{fraction}Z" if fraction else "Z"
    seconds = (moment.replace(microsecond=0) - datetime(1970, 1, 1)) // timedelta(seconds=1)
    assert event_values._cli_timestamp(text) == seconds * 10**9 + int(fraction.ljust(9, "0"))


@given(st.one_of(st.integers(-(2**70), 2**70), st.sampled_from([-1, 0, 2**53 - 1, 2**53, 2**53 + 1])),
       st.booleans())
def test_counts_read_as_themselves_in_range_and_as_damage_outside(value, as_float):
    """An integer or a whole float: the same count, or damage; never a nearby number."""
    written = float(value) if as_float else value
    record = parse_line(line("session.fusion_completed", {"fusionId": "f", "inputTokens": written}))
    if 0 <= written <= 2**53:
        assert record.usage.input_tokens == written
    else:
        assert record == Malformed("absurd_count")


@given(st.binary(max_size=400))
def test_any_bytes_give_a_record_a_reason_or_nothing(raw):
    result = parse_line(raw)
    assert result is None or isinstance(result, (event_records.Event, Malformed))


@given(st.dictionaries(st.sampled_from(sorted(LEG) + ["usage", "x"]),
                       st.one_of(st.none(), st.booleans(), st.integers(), st.floats(),
                                 st.text(max_size=5), st.lists(st.integers(), max_size=2))))
def test_any_field_values_give_a_record_or_a_reason(data):
    result = parse_line(line("assistant.fusion_phase_completed", data))
    assert isinstance(result, (LegEnded, Malformed))


# -- The whole turn: model calls, tools, prompts, runs and the CLI's totals --------------

CALL = {
    "model": "gpt-5.6-sol", "provider": {"id": "github", "kind": "capi", "label": "secret"},
    "inputTokens": 9000, "outputTokens": 700, "cacheReadTokens": 6000, "cacheWriteTokens": 400,
    "cost": 1.0, "duration": 4200, "timeToFirstTokenMs": 800, "initiator": "agent",
    "apiCallId": "secret-request", "finishReason": "tool_calls", "reasoningEffort": "medium",
    "isAuto": True, "isByok": False, "toolCounts": {"bash": 2, "view": 1},
    "aiCreditsStatus": "complete",
    "copilotUsage": {"model": "gpt-5.6-sol", "totalNanoAiu": 1_250_000_000, "tokenDetails": [
        {"batchSize": 1, "costPerBatch": 1, "tokenCount": 9000, "tokenType": "input"}]},
    "fusion": {"fusionId": "fusion-1", "phaseId": "fusion-1:phase:0", "phaseKind": "primary",
               "role": "solver", "pattern": "single"},
}


def test_usage_record_is_one_model_call():
    record = parse_line(line("session.usage_record", {"usage": CALL}))
    assert record == event_records.ModelCall(
        1788921807960000000, model="gpt-5.6-sol", provider="github",
        usage=Usage(1, 9000, 700, 6000, 400, 1_250_000_000), credits_known=True,
        duration_ms=4200.0, time_to_first_token_ms=800.0, finish_reason="tool_calls",
        initiator="agent", fusion_id="fusion-1", phase_id="fusion-1:phase:0",
        phase_kind="primary", tool_requests=("bash", "bash", "view"),
    )


@pytest.mark.parametrize("cost", [0.0, 0.33, 1.0, 10.0, None])
def test_a_calls_credits_are_its_copilot_usage_whatever_its_multiplier(cost):
    """`cost` is the model's premium-request multiplier ('Model multiplier cost for billing
    purposes' in the CLI's schema), not what the call cost."""
    record = parse_line(line("session.usage_record", {"usage": dict(CALL, cost=cost)}))
    assert (record.usage.nano_aiu, record.credits_known) == (1_250_000_000, True)


@pytest.mark.parametrize("copilot_usage", [
    None, "absent", {}, {"model": "gpt-5.6-sol"}, {"totalNanoAiu": None},
    {"totalNanoAiu": "1250000000"}, {"totalNanoAiu": True}, [1_250_000_000],
])
def test_a_call_without_credits_is_a_call_of_unknown_credits(copilot_usage):
    """A bring-your-own-key call, or a CLI that did not report them: not damage, not free."""
    usage = {k: v for k, v in CALL.items() if k != "copilotUsage"}
    if copilot_usage != "absent":
        usage["copilotUsage"] = copilot_usage
    record = parse_line(line("session.usage_record", {"usage": usage}))
    assert isinstance(record, event_records.ModelCall)
    assert (record.usage.nano_aiu, record.credits_known) == (0, False)
    assert record.usage.input_tokens == 9000


@pytest.mark.parametrize("status", ["unavailable", "partial"])
def test_a_call_the_cli_marks_unavailable_is_of_unknown_credits_whatever_figure_it_has(status):
    """`aiCreditsStatus` (1.0.102): "Missing billing is unavailable, not a zero charge"; a
    figure beside it (a 0, a subtotal) is not the call's credits."""
    for copilot_usage in ({"totalNanoAiu": 0}, {"totalNanoAiu": 1_250_000_000}):
        usage = dict(CALL, aiCreditsStatus=status, copilotUsage=copilot_usage)
        record = parse_line(line("session.usage_record", {"usage": usage}))
        assert (record.usage.nano_aiu, record.credits_known) == (0, False)
        assert record.usage.input_tokens == 9000


@pytest.mark.parametrize("status", ["complete", None, "absent", "some_new_word", 7, {}])
def test_a_calls_figure_counts_unless_the_cli_says_it_is_not_one(status):
    usage = {k: v for k, v in CALL.items() if k != "aiCreditsStatus"}
    if status != "absent":
        usage["aiCreditsStatus"] = status
    record = parse_line(line("session.usage_record", {"usage": usage}))
    assert (record.usage.nano_aiu, record.credits_known) == (1_250_000_000, True)


@pytest.mark.parametrize("usage, given", [
    ({"requestCount": 1, "totalNanoAiu": 0}, True), ({"requestCount": 1, "totalNanoAiu": 5}, True),
    ({"requestCount": 1}, False), ({"requestCount": 1, "totalNanoAiu": None}, False),
    ({"requestCount": 1, "totalNanoAiu": "5"}, False), (None, False),
])
def test_a_legs_credits_are_given_only_by_a_number(usage, given):
    """The CLI's schema requires a leg's `totalNanoAiu` (1.0.102 writes 0 where its calls'
    credits were unavailable); one absent or null is no figure, not 0 credits."""
    leg = parse_line(line("assistant.fusion_phase_completed", {
        "fusionId": "fusion-1", "phaseId": "fusion-1:phase:0", "phaseKind": "primary",
        "model": "gpt-5.6-sol", "status": "succeeded", "durationMs": 10, "usage": usage}))
    assert isinstance(leg, LegEnded)
    assert leg.credits_given is given


@pytest.mark.parametrize("total, nano_aiu", [(0, 0), (7.0, 7), (event_values.MAX_NANO_AIU,) * 2])
def test_a_calls_credits_may_be_a_whole_float_or_zero(total, nano_aiu):
    usage = dict(CALL, copilotUsage={"totalNanoAiu": total})
    record = parse_line(line("session.usage_record", {"usage": usage}))
    assert (record.usage.nano_aiu, record.credits_known) == (nano_aiu, True)


@pytest.mark.parametrize("total", [-1, 2.5, float("nan"), float("inf"),
                                   event_values.MAX_NANO_AIU + 1, 10**400])
def test_absurd_call_credits_make_the_record_damaged(total):
    usage = dict(CALL, copilotUsage={"totalNanoAiu": total})
    assert parse_line(line("session.usage_record", {"usage": usage})) == Malformed(
        "absurd_credits")


def test_ordinary_call_has_no_leg_and_optional_fields_may_be_absent():
    data = {k: v for k, v in CALL.items()
            if k not in ("fusion", "cacheReadTokens", "cacheWriteTokens", "timeToFirstTokenMs",
                         "toolCounts", "provider")}
    record = parse_line(line("session.usage_record", {"usage": data}))
    assert (record.fusion_id, record.phase_id, record.provider) == (None, None, None)
    assert (record.usage.cache_read_tokens, record.time_to_first_token_ms) == (0, None)
    assert record.tool_requests == ()


@pytest.mark.parametrize("change", [
    {"model": None}, {"inputTokens": None}, {"outputTokens": "many"}, {"duration": None},
    {"duration": 10**12}, {"inputTokens": 12.5}, {"cacheReadTokens": -3},
    {"inputTokens": 10**10}, {"duration": float("nan")}, {"duration": True},
])
def test_usage_record_with_a_missing_or_absurd_figure_is_damaged(change):
    assert parse_line(line("session.usage_record", {"usage": dict(CALL, **change)})) == Malformed(
        "damaged_usage_record")


def test_usage_record_without_usage_is_damaged():
    assert parse_line(line("session.usage_record", {})) == Malformed("damaged_usage_record")


TOOL_FUSION = {"fusionId": "fusion-1", "phaseId": "fusion-1:repair", "commitId": "c"}


def test_tool_events_keep_names_ids_and_success_only():
    start = parse_line(line("tool.execution_start", {
        "toolCallId": "call_1", "toolName": "github-get_pr", "mcpServerName": "github",
        "mcpToolName": "get_pr", "arguments": {"secret": "x"}, "fusion": TOOL_FUSION}))
    assert start == event_records.ToolStarted(
        1788921807960000000, tool_call_id="call_1", tool_name="github-get_pr",
        mcp_server="github", mcp_tool="get_pr", fusion_id="fusion-1", phase_id="fusion-1:repair")
    end = parse_line(line("tool.execution_complete", {
        "toolCallId": "call_1", "success": False, "error": {"message": "secret"}}))
    assert end == event_records.ToolCompleted(
        1788921807960000000, tool_call_id="call_1", success=False, fusion_id=None, phase_id=None)
    assert parse_line(line("tool.execution_complete", {"success": True})) == Malformed(
        "missing_tool_call_id")


def test_prompt_keeps_its_event_id_and_time_only():
    assert parse_line(line("user.message", {"content": "secret"})) == event_records.Prompt(
        1788921807960000000, prompt_id="e1")


def test_runs_and_the_clis_totals():
    assert parse_line(line("session.start", {"context": {"cwd": "/secret"}})) == event_records.RunStarted(
        1788921807960000000, resumed=False)
    assert parse_line(line("session.resume", {})).resumed
    shutdown = parse_line(line("session.shutdown", {"totalNanoAiu": 7, "modelMetrics": {
        "m1": {"requests": {"count": 2, "cost": 1}, "totalNanoAiu": 7,
               "usage": {"inputTokens": 5, "outputTokens": 3, "cacheReadTokens": 2,
                         "cacheWriteTokens": 1}},
        "m2": "not an object"}}))
    assert shutdown == SessionEnded(1788921807960000000, nano_aiu=7,
                                    models={"m1": Usage(2, 5, 3, 2, 1, 7)})
    checkpoint = parse_line(line("session.usage_checkpoint", {"totalNanoAiu": 9, "x": ["bash"]}))
    assert checkpoint == event_records.UsageCheckpoint(1788921807960000000, nano_aiu=9, models=None)


BULK = 'pytest -q "x",\\"y\\" \n\u2028 caf\u00e9 {"a": [1, ","]} ,"fusion":{' * 1000


def json_loads_sizes(monkeypatch) -> list[int]:
    sizes, loads = [], line_json.loads

    def measured(text):
        sizes.append(len(text))
        return loads(text)

    monkeypatch.setattr(events, "loads", measured)  # a line parsed whole
    monkeypatch.setattr(line_json, "loads", measured)  # a line without its bulk
    return sizes


@pytest.mark.parametrize("data", [
    # fusion before the bulk (as tests/sessiongen.py writes it) and after it
    {"toolCallId": "c1", "model": "m", "fusion": TOOL_FUSION, "success": True,
     "result": {"content": BULK, "detailedContent": BULK}},
    {"toolCallId": "c1", "model": "m", "interactionId": "i", "turnId": "0", "success": True,
     "result": {"content": BULK, "detailedContent": BULK}, "toolTelemetry": {"a": {"b": 1}},
     "fusion": TOOL_FUSION},
    {"toolCallId": "c1", "success": True, "result": {"contents": [{"type": "text", "text": BULK}]},
     "fusion": TOOL_FUSION},
])
def test_a_large_tool_output_is_not_decoded(monkeypatch, data):
    raw = line("tool.execution_complete", data)
    sizes = json_loads_sizes(monkeypatch)
    record = parse_line(raw)
    assert record == event_records.ToolCompleted(1788921807960000000, tool_call_id="c1", success=True,
                                          fusion_id="fusion-1", phase_id="fusion-1:repair")
    assert len(raw) > 60_000 and max(sizes) < 20_000


def test_large_tool_arguments_and_prompts_are_not_decoded(monkeypatch):
    sizes = json_loads_sizes(monkeypatch)
    start = parse_line(line("tool.execution_start", {
        "toolCallId": "c1", "toolName": "create", "arguments": {"file_text": BULK},
        "turnId": "0", "mcpServerName": None, "fusion": TOOL_FUSION}))
    prompt = parse_line(line("user.message", {"content": BULK, "attachments": [{"id": "x"}]}))
    assert (start.tool_name, start.phase_id) == ("create", "fusion-1:repair")
    assert prompt == event_records.Prompt(1788921807960000000, prompt_id="e1")
    assert max(sizes) < 20_000


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet=',"{}[]:\\ab\n\u2028', max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["fusion", "success", "toolCallId", "id", "a"]), inner, max_size=4),
    max_leaves=30,
)


@given(st.lists(st.tuples(
    st.sampled_from(["toolCallId", "success", "result", "error", "fusion", "toolName",
                     "arguments", "mcpServerName", "x"]),
    _JSON_VALUES), max_size=8),
    st.sampled_from(["tool.execution_start", "tool.execution_complete", "user.message"]),
    st.integers(0, 3))
def test_reading_without_the_bulk_gives_what_reading_whole_gives(members, event_type, padding):
    """Whatever the members, their order and their nesting, cutting the bulk out never
    changes the record: it either gives the same one or parses the line whole."""
    data = dict(members)
    if "result" in data or "arguments" in data:
        data[next(k for k in ("result", "arguments") if k in data)] = {"content": "x" * 5000 * padding}
    raw = line(event_type, data)
    lean = parse_line(raw)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(line_json, "WHOLE_BELOW", len(raw) + 1)
        assert parse_line(raw) == lean


_QUOTEY_BYTES = st.binary(max_size=80) | st.lists(
    st.sampled_from([b",", b'"', b'\\"', b',"', b"a", b"\\", b"}", b":"]), max_size=60).map(b"".join)


@given(_QUOTEY_BYTES, st.integers(0, 90))
@example(b'a\\"b\\"c\\"d\\"e\\"f,"g', 0)  # more quotes before the one after a comma than are walked
@example(b'a\\"b\\"c\\"d\\"e\\"f\\"g', 0)  # and none after a comma
@example(b'a\\"b\\"c\\"d\\"e,"', 0)  # the first after a comma is the last walked
def test_the_members_after_the_bulk_are_found_as_a_search_for_comma_quote_finds_them(line, start):
    """line_json walks from quote to quote, then searches: the same place as find(b',"')."""
    assert line_json._comma_quote(line, start) == line.find(b',"', start)


def test_a_process_without_re_finds_the_members_after_the_bulk_where_re_finds_them():
    """The footer's refresh never imports re: there the search after the quotes walked is
    bytes.find's, and it finds the same place, and re stays out of the process."""
    lines = [b'x' + b'\\"a' * n + tail for n in (0, 7, 8, 9, 40) for tail in (b',"b', b'\\",', b'')]
    script = ("import sys; from tailer.copilot import line_json; "
              "lines = eval(sys.stdin.read()); "
              "print([line_json._comma_quote(line, 0) for line in lines]); "
              "print('re' in sys.modules)")
    done = subprocess.run([sys.executable, "-S", "-c", script], input=repr(lines), text=True,
                          capture_output=True, cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == [repr([line.find(b',"', 0) for line in lines]), "False"]
    assert [line_json._comma_quote(line, 0) for line in lines] == [line.find(b',"', 0) for line in lines]


@given(st.lists(st.sampled_from([b',"result":', b',"error":', b',"arguments":', b"x" * 500, b'"a"']),
                max_size=20).map(b"".join),
       st.sampled_from([b"tool.execution_start", b"tool.execution_complete", b"user.message", b"x"]))
def test_the_bulk_starts_at_the_first_of_its_keys_within_the_head(line, event_type):
    """Where the bulk is cut: the first bulky key in the line's first _HEAD_BYTES, as a
    search for each key through all of them finds it."""
    found = [line.find(key, 0, line_json._HEAD_BYTES) for key in line_json._BULK_KEYS.get(event_type, ())]
    found = [position for position in found if position > 0]
    if event_type not in line_json._ALL_DATA_BULK:
        assert line_json._bulk_start(line, event_type) == (min(found) if found else None)


def test_a_line_is_read_alike_in_a_process_that_never_imported_json():
    """The status line reads logs without importing json. Python 3.11's JSON scanner then
    fails with SystemError where it should raise ValueError (fast_json.NOT_JSON): a bulky
    line whose first cut does not join, and a damaged line, must read as anywhere else."""
    result = {"content": 'a list of "x",' * 400}  # strings ending in a comma: false cuts
    lines = [line("tool.execution_complete", {"toolCallId": "c", "success": True,
                                              "result": result, "fusion": TOOL_FUSION}),
             b'{"type":"session.usage_record","data":{"usage":}}']
    script = ("import sys; from tailer.copilot.events import parse_line; "
              "assert 'json.decoder' not in sys.modules; "
              "print([repr(parse_line(line)) for line in eval(sys.stdin.read())])")
    done = subprocess.run([sys.executable, "-c", script], input=repr(lines), text=True,
                          capture_output=True, cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == repr([repr(parse_line(line)) for line in lines])


# Values at and past the bounds, and any JSON value: huge, negative, fractional and
# non-finite numbers, lone surrogates and far times included.
_EDGES = st.sampled_from([
    -1, 0, 2.5, 2**53, 2**53 + 1, 2**63, 10**15 + 1, 30 * 86_400_000 + 1, 1e20, 1e300, 10**400,
    float("nan"), float("inf"), float("-inf"), "x" + SURROGATE, "\udfff", "x" * 300,
    "x" * 300 + SURROGATE,
    "1969-12-31T23:59:59Z", "2554-07-22T00:00:00Z", "2200-01-01T00:00:00Z",
])
_FAR_TIMES = st.sampled_from(["1969-12-31T23:59:59Z", "1999-12-31T23:59:59.999Z",
                             "2200-01-01T00:00:00Z", "2554-07-22T00:00:00Z"])
_ANY_VALUE = st.one_of(_EDGES, st.recursive(
    st.one_of(_EDGES, st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=6,
))


# A valid line of every type the parser reads, whose values the property below overwrites.
_VALID = {
    "session.fusion_resolved": {"fusionId": "f", "pattern": "single", "routingLatencyMs": 200},
    "assistant.fusion_phase_completed": LEG,
    "assistant.fusion_phase_failed": LEG,
    "session.fusion_handoff": {"fusionId": "f", "sourcePhaseId": "f:judge",
                               "targetPhaseId": "f:repair"},
    "session.fusion_commit_started": {"fusionId": "f", "sourcePhaseId": "f:phase:0"},
    "session.fusion_completed": {"fusionId": "f", "pattern": "single", "inputTokens": 10,
                                 "totalNanoAiu": 7, "durationMs": 9000},
    "session.fusion_route_failed": {"attemptId": "f:route", "reason": "transport"},
    "session.fusion_rerouted": {},
    "session.usage_record": {"usage": CALL},
    "tool.execution_start": {"toolCallId": "c", "toolName": "bash", "fusion": TOOL_FUSION},
    "tool.execution_complete": {"toolCallId": "c", "success": True, "fusion": TOOL_FUSION},
    "user.message": {},
    "session.start": {},
    "session.usage_checkpoint": {"totalNanoAiu": 7},
    "session.shutdown": {"totalNanoAiu": 7, "modelMetrics": {"m": {
        "requests": {"count": 2}, "usage": {"inputTokens": 3, "outputTokens": 1},
        "totalNanoAiu": 7}}},
}


def json_slots(node) -> list[tuple]:
    """(container, key or index) of every value inside a JSON value, at any depth."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    found = []
    for key, child in items:
        found.append((node, key))
        found += json_slots(child)
    return found


@st.composite
def _event_lines(draw):
    """A valid line of any type with some of its values, at any depth (a call's figures, the
    CLI's totals per model), replaced by any value, and any timestamp."""
    event_type = draw(st.sampled_from(sorted(_VALID)))
    data = copy.deepcopy(_VALID[event_type])
    for _ in range(draw(st.integers(0, 3))):
        slots = json_slots(data)
        if slots and draw(st.booleans()):
            node, key = draw(st.sampled_from(slots))
        else:
            node, key = data, draw(st.sampled_from(sorted(event_fields.KNOWN_FIELDS.get(event_type, {"x"}))))
        node[key] = draw(st.one_of(_EDGES, _ANY_VALUE))
    timestamp = draw(st.one_of(st.just("2026-09-09T02:43:27.96Z"), _FAR_TIMES, _ANY_VALUE))
    return json.dumps({"type": event_type, "timestamp": timestamp, "data": data}).encode()


def assert_in_range(record) -> None:
    """Every number and text of a record is within the bounds tailer.copilot.event_values documents."""
    assert event_values.EARLIEST_NS <= record.time_ns < event_values.LATEST_NS or (
        isinstance(record, UnknownFusionEvent) and record.time_ns == 0)
    for field in records.fields(record):
        if field.name != "time_ns":
            assert_value_in_range(getattr(record, field.name), event_values.MAX_NANO_AIU)


def assert_value_in_range(value, nano_aiu_limit) -> None:
    if isinstance(value, Usage):
        for figure in tuple(records.as_dict(value).values()):
            assert type(figure) is int and 0 <= figure <= event_values.MAX_COUNT
        assert value.nano_aiu <= nano_aiu_limit
    elif isinstance(value, bool) or value is None:
        pass
    elif isinstance(value, int):  # a run's credits, as the CLI totals them
        assert 0 <= value <= event_values.MAX_COUNT
    elif isinstance(value, float):
        assert 0 <= value <= event_values.MAX_DURATION_MS
    elif isinstance(value, str):
        assert len(value) <= event_values.MAX_TEXT
        value.encode("utf-8")  # raises on a lone surrogate
    elif isinstance(value, tuple):
        for item in value:
            assert_value_in_range(item, nano_aiu_limit)
    else:  # the CLI's totals per model
        for model, usage in value.items():
            assert_value_in_range(model, nano_aiu_limit)
            assert_value_in_range(usage, event_values.MAX_COUNT)


@settings(max_examples=600)
@given(_event_lines())
def test_any_parsed_record_is_within_the_documented_ranges(raw):
    result = parse_line(raw)
    if isinstance(result, event_records.Event):
        assert_in_range(result)
    else:
        assert isinstance(result, Malformed) and result.reason.isidentifier()


def _outcome(read, raw):
    """What reading gives: the value, or the kind of failure parse_line tells apart."""
    try:
        return "value", read(raw)
    except UnicodeDecodeError:
        return "invalid_utf8", None
    except ValueError:
        return "invalid_json", None
    except RecursionError:
        return "too_deep", None


_JSONISH = st.one_of(
    st.builds(lambda v: json.dumps({"type": v}, ensure_ascii=False).encode(), _JSON_VALUES),
    st.builds(lambda v, junk: json.dumps({"type": v}).encode() + junk, _JSON_VALUES,
              st.binary(max_size=6) | st.sampled_from([b" \t\r\n", b"\xed\xa0\x80", b"}"])),
    st.binary(max_size=60).map(lambda b: b'{"' + b),
    st.binary(max_size=20),
)


@given(_JSONISH)
def test_the_parsers_json_reading_is_json_loads(raw):
    """line_json.loads skips json.loads' wrappers, never its answers: the same value for
    every text, the same failure for every other."""
    assert _outcome(line_json.loads, raw) == _outcome(json.loads, raw)


_TYPES_AND_LOOKALIKES = st.sampled_from([
    "session.fusion_resolved", "session.fusion_", "assistant.fusion_x", "session.shutdown",
    "session.shutdowns", "session.usage_record", "tool.execution_start", "tool.execution_",
    "user.message", "assistant.message", "assistant.messages", "assistant.turn_start",
    "abort", "", "session.start", 'a\\"b', "x" * 201,
])


@given(_TYPES_AND_LOOKALIKES,
       st.sampled_from([b'{"type":"', b' {"type": "', b'{"data":{},"type":"', b"\0"]),
       st.sampled_from([b'","data":{}}', b'"session.shutdown"', b'"}', b""]))
def test_may_be_read_decides_by_the_leading_type_as_the_markers_do(event_type, start, rest):
    """The quick look at a line's start gives what searching it for the markers gives: a
    line starting with a type is read by that type alone; any other, by its markers."""
    raw = start + event_type.encode() + rest
    leading = event_types._LEADING_TYPE.match(raw)
    if leading is not None:
        expected = event_types.ANY_MARKER.match(raw, leading.start(1) - 1) is not None
    else:
        expected = event_types.ANY_MARKER.search(raw) is not None
    assert event_types.may_be_read(raw) == expected


def test_no_skipped_type_is_one_the_markers_read():
    """may_be_read drops a line on its head alone: the head must be of a type never read."""
    for head in event_types._SKIPPED_HEADS:
        raw = head + b',"data":{}}'
        assert not event_types.ANY_MARKER.search(raw) and not event_types.may_be_read(raw)
