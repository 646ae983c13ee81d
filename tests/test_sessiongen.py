"""The session generator keeps its promises: other tests judge the tailer by its truth."""

import json
import re
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import jsonschema
import pytest

from sessiongen import CANARY, SessionWriter

START = datetime(2026, 9, 9, 2, 40, tzinfo=timezone.utc)


def full_session(session_id="0b7e5a4c-2f7d-4c1e-9a53-6f1d2e8b9c10"):
    """Every pattern, a resume and two shutdowns, as one real file can hold them."""
    writer = SessionWriter(session_id, START)
    writer.single("gpt-5.6-sol")
    writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol")
    writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="reject", repair_model="claude-sonnet-4.6")
    writer.shutdown()
    writer.resume()
    writer.critique("claude-sonnet-4.6", ["gemini-3.1-pro", "gpt-5.6-sol"])
    writer.critique("gpt-5.6-mini", ["gemini-3.1-pro", "gpt-5.6-sol"], revision_model="claude-sonnet-4.6")
    writer.degraded("mai-code-1.1-flash", "gpt-5.6-sol", reason="timeout")
    writer.route_failed("gpt-5.6-mini")
    writer.incomplete("mai-code-1.1-flash", "gpt-5.6-sol")
    writer.shutdown()
    return writer


def parse(time):
    return datetime.fromisoformat(time.replace("Z", "+00:00"))


def events(writer):
    return [json.loads(line) for line in writer.lines()]


def test_every_line_is_a_compact_envelope_chained_to_the_previous_one():
    lines = full_session().lines()
    parent = None
    digits = set()
    for line in lines:
        event = json.loads(line)
        assert list(event) == ["type", "data", "id", "timestamp", "parentId"]
        assert isinstance(event["data"], dict)
        assert line == json.dumps(event, separators=(",", ":"), ensure_ascii=False)
        assert uuid.UUID(event["id"]).version == 4
        assert event["parentId"] == parent
        parent = event["id"]
        digits.add(len(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.(\d{1,3})Z", event["timestamp"])[1]))
    assert digits == {3}  # as CLI 1.0.102 writes every timestamp, trailing zeros included
    times = [parse(json.loads(line)["timestamp"]) for line in lines]
    assert times == sorted(times)
    assert len({json.loads(line)["id"] for line in lines}) == len(lines)


def test_rollup_is_the_exact_sum_of_the_legs_and_the_truth_matches_the_file():
    writer = full_session()
    file = events(writer)
    phases = [e["data"] for e in file if e["type"].startswith("assistant.fusion_phase_")]
    rollups = {e["data"]["fusionId"]: e for e in file if e["type"] == "session.fusion_completed"}
    resolved = {e["data"]["fusionId"]: e for e in file if e["type"] == "session.fusion_resolved"}
    pairs = {"requestCount": "request_count", "inputTokens": "input_tokens", "outputTokens": "output_tokens",
             "cachedTokens": "cache_read_tokens", "cacheWriteTokens": "cache_write_tokens",
             "totalNanoAiu": "nano_aiu"}
    assert len(rollups) == 6
    for turn in writer.expected:
        legs = [p for p in phases if p["fusionId"] == turn.fusion_id]
        assert [p["phaseId"] for p in legs] == [leg.phase_id for leg in turn.legs]
        for phase, leg in zip(legs, turn.legs):
            assert phase["durationMs"] == leg.duration_ms and phase["status"] == leg.status
            assert all(phase["usage"][key] == getattr(leg, name) for key, name in pairs.items())
        assert turn.nano_aiu == sum(p["usage"]["totalNanoAiu"] for p in legs)
        if turn.fusion_id in rollups:
            rollup = rollups[turn.fusion_id]
            for key in pairs:
                assert rollup["data"][key] == sum(p["usage"][key] for p in legs)
            assert rollup["data"]["phaseCount"] == len(legs)
            assert rollup["timestamp"] == turn.end_timestamp
            # the rollup's duration starts where routing started
            routed = resolved[turn.fusion_id]
            turn_start = parse(rollup["timestamp"]) - timedelta(milliseconds=rollup["data"]["durationMs"])
            routing = timedelta(milliseconds=routed["data"]["routingLatencyMs"])
            assert turn_start + routing == parse(routed["timestamp"])
            assert 172 <= routed["data"]["routingLatencyMs"] <= 371


def test_usage_records_add_up_to_their_leg():
    writer = SessionWriter("usage", START)
    turn = writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="reject")
    records = [e["data"]["usage"] for e in events(writer) if e["type"] == "session.usage_record"]
    for leg in turn.legs:
        mine = [r for r in records if r["fusion"]["phaseId"] == leg.phase_id]
        assert len(mine) == leg.request_count
        assert sum(r["inputTokens"] for r in mine) == leg.input_tokens
        assert sum(r["cacheReadTokens"] for r in mine) == leg.cache_read_tokens


def test_calls_of_unknown_credits_are_left_out_of_every_total_as_the_real_cli_leaves_them():
    """1.0.102 without `copilot_usage` (tests/data/realcli's `unpriced` scenario): the record
    says `unavailable` and has no `copilotUsage`; the leg's, the rollup's and the run's
    credits are the other calls' sum, 0 when none is left."""
    writer = SessionWriter("unpriced", START, unpriced=0.5)
    for _ in range(6):
        writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="reject")
        writer.ordinary("claude-sonnet-4.6", calls=3)
    writer.shutdown()
    file = events(writer)
    records = [e["data"]["usage"] for e in file if e["type"] == "session.usage_record"]
    unknown = [r for r in records if r["aiCreditsStatus"] == "unavailable"]
    assert all("copilotUsage" not in r for r in unknown)
    assert all(r["aiCreditsStatus"] == "complete" and "copilotUsage" in r
               for r in records if r not in unknown)
    assert 0 < len(unknown) < len(records)
    assert sum(turn.unknown_calls for turn in writer.expected) == len(unknown)
    priced = lambda mine: sum(r["copilotUsage"]["totalNanoAiu"] for r in mine if r not in unknown)  # noqa: E731
    phases = {e["data"]["phaseId"]: e["data"] for e in file
              if e["type"] == "assistant.fusion_phase_completed"}
    for turn in writer.expected:
        for leg in turn.legs:
            mine = [r for r in records if r.get("fusion") and r["fusion"]["phaseId"] == leg.phase_id]
            assert leg.unknown_calls == sum(r in unknown for r in mine)
            assert phases[leg.phase_id]["usage"]["totalNanoAiu"] == leg.nano_aiu == priced(mine)
        assert turn.unknown_calls == sum(leg.unknown_calls for leg in turn.legs) or turn.kind == "ordinary"
    ordinary = [r for r in records if not r.get("fusion")]
    assert sum(t.nano_aiu for t in writer.expected if t.kind == "ordinary") == priced(ordinary)
    assert sum(t.unknown_calls for t in writer.expected if t.kind == "ordinary") == sum(
        r in unknown for r in ordinary)
    shutdown = next(e["data"] for e in file if e["type"] == "session.shutdown")
    assert shutdown["totalNanoAiu"] == priced(records) == sum(t.nano_aiu for t in writer.expected)


def skeleton(writer):
    """Event types in file order, phases with their kind; usage records and the session's
    start left out, each run of assistant/tool events shown as one "messages"."""
    shape = []
    for event in events(writer):
        kind = event["type"]
        if kind in ("session.start", "session.usage_record", "session.fusion_change_checkpoint"):
            continue
        if kind.startswith(("assistant.turn_", "assistant.message", "tool.")):
            kind = "messages"
        elif kind.startswith("assistant.fusion_phase_"):
            kind = f"{kind.removeprefix('assistant.fusion_')}:{event['data']['phaseKind']}"
        if not shape or shape[-1] != kind or kind != "messages":
            shape.append(kind.removeprefix("session.fusion_"))
    return shape


OPENING = ["resolved", "user.message", "system.message"]
CLOSING = ["commit_started", "messages", "completed"]


@pytest.mark.parametrize("build, expected", [
    (lambda w: w.single("gpt-5.6-sol"),
     OPENING + ["phase_completed:primary"] + CLOSING),
    (lambda w: w.cascade("mai-code-1.1-flash", "gpt-5.6-sol"),
     OPENING + ["phase_completed:primary", "phase_completed:judge"] + CLOSING),
    (lambda w: w.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="reject"),
     OPENING + ["phase_completed:primary", "phase_completed:judge", "handoff", "phase_completed:repair"] + CLOSING),
    (lambda w: w.critique("gpt-5.6-mini", ["gemini-3.1-pro", "gpt-5.6-sol"]),
     OPENING + ["phase_completed:draft", "phase_completed:critic", "phase_completed:critic"] + CLOSING),
    (lambda w: w.critique("gpt-5.6-mini", ["gemini-3.1-pro"], revision_model="claude-sonnet-4.6"),
     OPENING + ["phase_completed:draft", "phase_completed:critic", "handoff", "phase_completed:revision"] + CLOSING),
    (lambda w: w.degraded("mai-code-1.1-flash", "gpt-5.6-sol"),
     OPENING + ["phase_completed:primary", "phase_failed:judge"] + CLOSING),
    (lambda w: w.incomplete("mai-code-1.1-flash", "gpt-5.6-sol"),
     OPENING + ["phase_completed:primary", "abort", "phase_failed:judge"]),
    (lambda w: w.route_failed("gpt-5.6-mini"),
     ["route_failed", "user.message", "system.message", "messages", "phase_completed:primary"]),
])
def test_event_order_per_pattern_follows_the_real_cli(build, expected):
    writer = SessionWriter("order", START)
    build(writer)
    assert skeleton(writer) == expected


def test_committed_leg_is_replayed_at_commit_time_and_review_legs_leave_no_messages():
    writer = SessionWriter("replay", START)
    turn = writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="reject", repair_model="claude-sonnet-4.6")
    file = events(writer)
    commit = next(e for e in file if e["type"] == "session.fusion_commit_started")
    replayed = [e for e in file if e["type"].startswith(("assistant.turn_", "assistant.message", "tool."))]
    assert {e["timestamp"] for e in replayed} == {commit["timestamp"]}
    assert commit["data"]["sourcePhaseId"] == turn.committed_phase_id == turn.legs[-1].phase_id
    assert {e["data"]["fusion"]["phaseId"] for e in replayed if "fusion" in e["data"]} == {turn.committed_phase_id}
    assert [leg.committed for leg in turn.legs] == [False, False, True]
    assert turn.legs[1].verdict == "reject"


def test_critics_have_no_verdict_and_a_failed_leg_degrades_the_turn():
    writer = SessionWriter("review", START)
    critique = writer.critique("gpt-5.6-mini", ["gemini-3.1-pro", "gpt-5.6-sol"], revision_model="claude-sonnet-4.6")
    assert [(leg.role, leg.scope, leg.verdict) for leg in critique.legs if leg.phase_kind == "critic"] == \
        [("critic", "review", None)] * 2
    degraded = writer.degraded("mai-code-1.1-flash", "gpt-5.6-sol", reason="timeout")
    failed = next(e["data"] for e in events(writer) if e["type"] == "assistant.fusion_phase_failed")
    assert failed["degradedToPhaseId"] == degraded.committed_phase_id == degraded.legs[0].phase_id
    assert (degraded.legs[1].status, degraded.legs[1].failure_reason) == ("failed", "timeout")
    assert degraded.degraded_reason == "judge_failed" and degraded.outcome == "completed"


def test_route_failure_has_no_fusion_id_and_its_fallback_leg_carries_the_attempt_id():
    writer = SessionWriter("route", START)
    turn = writer.route_failed("gpt-5.6-mini", reason="transport")
    file = events(writer)
    failure = next(e["data"] for e in file if e["type"] == "session.fusion_route_failed")
    leg = next(e["data"] for e in file if e["type"] == "assistant.fusion_phase_completed")
    assert "fusionId" not in failure and failure["attemptId"].endswith(":route")
    assert leg["fusionId"] == failure["attemptId"].removesuffix(":route") == turn.fusion_id
    assert (turn.pattern, turn.outcome, turn.route_failure_reason) == ("fallback", "route_failed", "transport")
    assert turn.models == ["gpt-5.6-mini"] and turn.nano_aiu == leg["usage"]["totalNanoAiu"]


TEXT_FIELDS = {
    "session.start": ["context.cwd", "context.gitRoot", "context.repository", "context.branch"],
    "user.message": ["content", "transformedContent"],
    "system.message": ["content"],
    "assistant.message": ["content", "reasoningText", "toolRequests.*.arguments"],
    "tool.execution_start": ["arguments"],
    "tool.execution_complete": ["result", "error.message"],
    "session.fusion_resolved": ["hint", "ruleName"],
    "assistant.fusion_phase_completed": ["content", "projectionMessage", "stagedTerminal"],
    "assistant.fusion_phase_failed": ["errorMessage"],
    "session.fusion_route_failed": ["errorMessage"],
    "session.fusion_handoff": ["message"],
    "session.fusion_change_checkpoint": ["codeChanges.filesModified.*"],
    "session.shutdown": ["codeChanges.filesModified.*", "accountingSnapshot.codeChanges.filesModified.*"],
}


def values(data, path):
    """The non-null values at a dotted path; ``*`` walks a list."""
    found = [data]
    for step in path.split("."):
        found = [item for value in found
                 for item in (value if step == "*" else [value.get(step)]) if item is not None]
    return found


def test_canary_is_in_every_free_text_field(tmp_path):
    writer = full_session()
    seen = set()
    for event in events(writer):
        for path in TEXT_FIELDS.get(event["type"], []):
            for value in values(event["data"], path):
                assert CANARY in json.dumps(value), (event["type"], path)
                seen.add((event["type"], path))
    assert seen == {(kind, path) for kind, paths in TEXT_FIELDS.items() for path in paths}
    events_path = writer.write(tmp_path)
    assert events_path == tmp_path / writer.session_id / "events.jsonl"
    assert events_path.read_text().split("\n") == writer.lines() + [""]
    assert f"/{CANARY}/" in (events_path.parent / "workspace.yaml").read_text()


# The real CLI's schema of the events it writes (tests/realcli/record.py keeps it).
CLI_SCHEMA = Path(__file__).parent / "data" / "realcli" / "1.0.102" / "session-events.schema.json"


def test_shutdowns_and_usage_records_are_valid_by_the_real_clis_schema():
    definitions = json.loads(CLI_SCHEMA.read_text())["definitions"]
    valid = {event_type: jsonschema.Draft7Validator({"$ref": f"#/definitions/{name}",
                                                     "definitions": definitions})
             for event_type, name in (("session.shutdown", "ShutdownEvent"),
                                      ("session.usage_record", "UsageAccountingRecordEvent"))}
    writer = full_session()
    writer.ordinary("claude-sonnet-4.6", calls=2)
    writer.shutdown()
    checked = [valid[event["type"]].validate(event) or event["type"] for event in events(writer)
               if event["type"] in valid]
    assert checked.count("session.shutdown") == 3


def test_a_resumed_run_totals_the_whole_session_when_it_carries_the_totals():
    """As CLI 1.0.102 writes it after a resume; without carry_totals, the resumed run alone."""
    def shutdowns(carry_totals):
        writer = SessionWriter("resumed", START)
        writer.single("gpt-5.6-sol")
        writer.shutdown()
        writer.resume(carry_totals=carry_totals)
        writer.single("claude-sonnet-4.6")
        writer.shutdown()
        return [event["data"] for event in events(writer) if event["type"] == "session.shutdown"]

    first, carried = shutdowns(True)
    assert carried["modelMetrics"].keys() == {"gpt-5.6-sol", "claude-sonnet-4.6"}
    assert carried["modelMetrics"]["gpt-5.6-sol"] == first["modelMetrics"]["gpt-5.6-sol"]
    assert carried["sessionStartTime"] == first["sessionStartTime"]
    assert carried["totalPremiumRequests"] == 2
    _, alone = shutdowns(False)
    assert alone["modelMetrics"].keys() == {"claude-sonnet-4.6"}


def test_same_calls_give_the_same_bytes():
    first, second = full_session(), SessionWriter("0b7e5a4c-2f7d-4c1e-9a53-6f1d2e8b9c10", START)
    second.single("gpt-5.6-sol")
    second.lines()  # reading early must not change what follows
    second.cascade("mai-code-1.1-flash", "gpt-5.6-sol")
    assert second.lines() == first.lines()[:len(second.lines())]
    assert full_session().lines() == first.lines()
    assert full_session("another-session").lines() != first.lines()


def test_usage_overrides_reach_the_leg_and_unknown_ones_are_refused():
    writer = SessionWriter("overrides", START)
    turn = writer.single("gpt-5.6-sol", nano_aiu=1_234_567_891, request_count=1)
    assert (turn.legs[0].nano_aiu, turn.nano_aiu, turn.legs[0].request_count) == (1_234_567_891, 1_234_567_891, 1)
    with pytest.raises(TypeError):
        writer.single("gpt-5.6-sol", credits=3)
