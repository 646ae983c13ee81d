"""The trace shape contract, checked on realistic turns and decoded by the official proto."""

import gzip
import json
import os

import pytest

from otlp_sink import decode_body, plain_attributes, span_dicts
from assembly import assemble
from sessiongen import EVERY_PATTERN_KINDS, every_pattern
from tailer import records
from tailer.copilot.event_records import LegEnded, Resolved, Usage
from tailer.outputs.otlp import attributes_json, encode_request
from tailer.outputs.spans import span_id, trace_id, turn_spans
from tailer.turns.assembly import Turn

SESSION = "5f0c2d1e-spans"


@pytest.fixture(scope="module")
def turns():
    writer = every_pattern(SESSION)
    return dict(zip(EVERY_PATTERN_KINDS, assemble(writer.lines(), SESSION))), writer.expected


def decoded(spans):
    """Through the wire format and back: what a collector would see."""
    body = gzip.decompress(encode_request(spans, {"service.name": "hydrafusion"}, "t", "0"))
    return span_dicts(decode_body(body))


def written(spans):
    """Each span's JSON as the tailer wrote it, before any decoding."""
    return [json.loads(span.json) for span in spans]


def by_name(spans):
    return {span["name"]: span for span in spans}


def turn_and_legs(spans):
    """The root, route and leg spans: the model calls and tool calls left out."""
    return [span for span in spans if not span["name"].startswith(("chat ", "execute_tool "))]


def attrs(span):
    return plain_attributes(span.get("attributes", []))


def test_rejected_cascade_shape(turns):
    turn = turns[0]["reject"]
    spans = turn_and_legs(decoded(turn_spans(turn)))
    root, route, primary, judge, repair = spans
    assert [s["name"] for s in spans] == [
        "hydrafusion cascade", "route hydrafusion", "primary mai-code-1.1-flash",
        "judge gpt-5.6-sol", "repair gpt-5.6-sol"]
    tid = trace_id(SESSION, turn.key)
    assert {s["traceId"] for s in spans} == {tid}
    assert "parentSpanId" not in root
    assert {s["parentSpanId"] for s in spans[1:]} == {root["spanId"]}
    a = attrs(root)
    assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.provider.name"] == "github"
    assert a["gen_ai.request.model"] == "hydrafusion"
    assert a["gen_ai.response.model"] == "gpt-5.6-sol"
    assert a["gen_ai.conversation.id"] == SESSION
    assert a["hydrafusion.pattern"] == "cascade" and a["hydrafusion.outcome"] == "completed"
    assert a["hydrafusion.phase_count"] == 3
    assert a["hydrafusion.models"] == "gpt-5.6-sol,mai-code-1.1-flash"
    assert a["hydrafusion.model_sequence"] == "mai-code-1.1-flash,gpt-5.6-sol,gpt-5.6-sol"
    assert a["hydrafusion.compound"] is True and a["hydrafusion.usage_mismatch"] is False
    assert a["hydrafusion.verdict"] == "reject"
    assert a["hydrafusion.aiu"] == pytest.approx(turn.usage.nano_aiu / 1e9)
    assert a["hydrafusion.review_aiu"] == pytest.approx(
        (turn.legs[0].usage.nano_aiu + turn.legs[1].usage.nano_aiu) / 1e9)
    assert a["gen_ai.usage.input_tokens"] == turn.usage.input_tokens
    assert a["gen_ai.usage.cache_read.input_tokens"] == turn.usage.cache_read_tokens
    assert a["gen_ai.usage.cache_write.input_tokens"] == turn.usage.cache_write_tokens
    assert a["gen_ai.usage.output_tokens"] == turn.usage.output_tokens
    for key in ("hydrafusion.fusion_id", "hydrafusion.policy", "hydrafusion.route_source",
                "hydrafusion.routing_latency_ms", "hydrafusion.request_count"):
        assert key in a
    assert attrs(repair)["hydrafusion.phase.committed"] is True
    assert attrs(primary)["hydrafusion.phase.committed"] is False
    assert attrs(judge)["hydrafusion.phase.verdict"] == "reject"
    assert attrs(judge)["gen_ai.response.model"] == "gpt-5.6-sol"
    assert attrs(primary)["gen_ai.response.model"] == "mai-code-1.1-flash"


def test_timing_follows_rollup_and_duration(turns):
    turn = turns[0]["accept"]
    root, route, *legs = turn_and_legs(written(turn_spans(turn)))
    assert int(root["endTimeUnixNano"]) == turn.completed.time_ns
    assert int(root["startTimeUnixNano"]) == turn.completed.time_ns - round(
        turn.completed.duration_ms * 1e6)
    assert int(route["startTimeUnixNano"]) == int(root["startTimeUnixNano"])
    assert int(route["endTimeUnixNano"]) - int(route["startTimeUnixNano"]) == round(
        turn.routing_latency_ms * 1e6)
    for leg, span in zip(turn.legs, legs):
        assert int(span["endTimeUnixNano"]) == leg.time_ns
        assert int(span["startTimeUnixNano"]) == leg.time_ns - round(leg.duration_ms * 1e6)


def test_verdict_is_an_evaluation_event_on_the_judged_leg(turns):
    spans = by_name(decoded(turn_spans(turns[0]["reject"])))
    [event] = spans["primary mai-code-1.1-flash"]["events"]
    assert event["name"] == "gen_ai.evaluation.result"
    assert attrs(event)["gen_ai.evaluation.name"] == "hydrafusion.judge"
    assert attrs(event)["gen_ai.evaluation.score.label"] == "reject"
    assert "events" not in spans["judge gpt-5.6-sol"]


def test_handoff_is_a_link_from_the_leg_that_took_over(turns):
    spans = by_name(decoded(turn_spans(turns[0]["reject"])))
    [link] = spans["repair gpt-5.6-sol"]["links"]
    assert link["spanId"] == spans["judge gpt-5.6-sol"]["spanId"]
    critique = decoded(turn_spans(turns[0]["revision"]))
    revision = next(s for s in critique if s["name"].startswith("revision"))
    critics = {s["spanId"] for s in critique if s["name"].startswith("critic")}
    assert {link["spanId"] for link in revision["links"]} <= critics
    assert revision["links"]


def test_failed_leg_is_an_error_and_the_turn_is_still_exported(turns):
    turn = turns[0]["degraded"]
    spans = turn_and_legs(decoded(turn_spans(turn)))
    failed = [s for s in spans if s.get("status", {}).get("code") == 2]
    assert [s["name"] for s in failed] == ["judge gpt-5.6-sol"]
    assert attrs(failed[0])["hydrafusion.phase.failure_reason"] == "timeout"
    assert attrs(spans[0])["hydrafusion.degraded_reason"] == "judge_failed"
    assert "status" not in spans[0] or spans[0]["status"].get("code", 0) == 0


def test_route_failure_is_one_error_trace_with_its_fallback_leg(turns):
    spans = turn_and_legs(decoded(turn_spans(turns[0]["route_failed"])))
    root, route, fallback = spans
    assert root["name"] == "hydrafusion route_failed" and root["status"]["code"] == 2
    assert route["status"]["code"] == 2
    a = attrs(root)
    assert (a["hydrafusion.outcome"], a["hydrafusion.route_failure_reason"]) == (
        "route_failed", "transport")
    assert a["hydrafusion.fallback_model"] == "gpt-5.6-mini"
    assert fallback["name"] == "primary gpt-5.6-mini"
    assert attrs(fallback)["hydrafusion.phase.committed"] is True


def test_incomplete_turn_has_outcome_and_cancelled_leg(turns):
    spans = turn_and_legs(decoded(turn_spans(turns[0]["incomplete"])))
    assert attrs(spans[0])["hydrafusion.outcome"] == "incomplete"
    cancelled = [s for s in spans if attrs(s).get("hydrafusion.phase.status") == "cancelled"]
    assert cancelled and all(s["status"]["code"] == 2 for s in cancelled)


def test_ids_are_deterministic_and_distinct(turns):
    all_turns = list(turns[0].values())
    first = [turn_spans(t) for t in all_turns]
    again = [turn_spans(t) for t in all_turns]
    assert first == again
    ids = [s["spanId"] for spans in first for s in written(spans)]
    assert len(ids) == len(set(ids))
    assert len({spans[0].key for spans in first}) == len(all_turns)
    assert all(span.key == json.loads(span.json)["traceId"] for spans in first for span in spans)
    assert trace_id("a", "b") != trace_id("a2", "b")
    assert span_id("s", "f", "turn") != span_id("s", "f", "route")
    assert len(trace_id("s", "f")) == 32 and len(span_id("s", "f", "x")) == 16


def test_absent_values_are_left_out(turns):
    root = written(turn_spans(turns[0]["single"]))[0]
    keys = {a["key"] for a in root["attributes"]}
    assert "hydrafusion.verdict" not in keys
    assert "hydrafusion.route_failure_reason" not in keys
    assert all(a["value"] != {"stringValue": "None"} for a in root["attributes"])


def test_surrogates_and_out_of_range_values_still_make_spans_a_collector_takes():
    """Defence in depth: even values the parser would reject (tailer.copilot.event_values) give valid OTLP.

    A session folder whose name is not UTF-8 reaches the tailer as surrogate escapes
    (os.fsdecode); ids with lone surrogates, times past the year 2262, durations of 1e300 ms
    and sums beyond int64 must neither raise nor make the batch invalid.
    """
    session = os.fsdecode(b"sess-\xff\xfe")
    leg = LegEnded(
        2**70, fusion_id="fusion-\ud800", phase_id="\udfff:judge", phase_kind="judge",
        role="judge", scope="review", model="m\ud800", status="failed", verdict="reject",
        duration_ms=1e300, usage=Usage(2**64, 2**80, 2**63, 10**30, 1, 2**62),
        failure_reason="\ud800", degraded_to_phase_id=None,
    )
    turn = Turn(session, "fusion-\ud800", legs=[leg, records.replace(leg, phase_id="p2")])
    turn.resolved = Resolved(-(2**70), fusion_id="fusion-\ud800", pattern="\ud800",
                             synthetic_model=None, policy=None, route_source=None,
                             routing_latency_ms=1e300)
    spans = turn_spans(turn)
    assert trace_id(session, turn.key) == trace_id(session, turn.key)
    decoded_spans = decoded(spans)
    assert len(decoded_spans) == 4
    for span in decoded_spans:
        start, end = (int(span.get(key, 0)) for key in ("startTimeUnixNano", "endTimeUnixNano"))
        assert 0 <= start <= end < 2**63
        for value in attrs(span).values():
            assert not isinstance(value, int) or -(2**63) <= value < 2**63
    root = attrs(decoded_spans[0])
    assert root["gen_ai.usage.input_tokens"] == 2**63 - 1  # the legs' sum, clamped
    for span in written(spans):
        json.dumps(span).encode("utf-8", "surrogatepass")


def test_a_non_finite_double_is_left_out_and_a_huge_int_clamped():
    text = attributes_json({"a": float("inf"), "b": float("nan"), "c": 10**5000, "d": -(10**30),
                            "e": 1.5})
    assert json.loads(f"[{text}]") == [
        {"key": "c", "value": {"intValue": str(2**63 - 1)}},
        {"key": "d", "value": {"intValue": str(-(2**63))}},
        {"key": "e", "value": {"doubleValue": 1.5}},
    ]
