"""The whole turn: model calls and tool calls on the real timeline, ordinary turns beside
fusion ones, and the tailer's sums checked against the CLI's own totals.

Sessions come from tests/sessiongen.py in Copilot CLI 1.0.102's order and shapes; every
span is decoded with the official OTLP definitions.
"""

import gzip
import json

import pytest
from hypothesis import given, settings, strategies as st

from assembly import assemble
from exposition_helpers import samples
from otlp_sink import decode_body, plain_attributes, span_dicts
from sessiongen import WHOLE_SESSION_KINDS, SessionWriter, START, whole_session
from tailer.turns import session_state
from tailer.copilot.event_records import Malformed, ModelCall, Usage
from tailer.copilot.events import parse_line
from tailer.outputs.exposition import Registry
from tailer.outputs.logs import turn_line
from tailer.outputs.metrics import MAX_MODELS, Metrics
from tailer.outputs.otlp import encode_request
from tailer.outputs.spans import turn_spans
from tailer.turns.assembly import AT_COMMIT, BETWEEN_CALLS, LIVE, SessionTurns

SESSION = "4c2b9e77-whole"


def records(writer: SessionWriter) -> list:
    return [r for r in (parse_line(line.encode()) for line in writer.lines())
            if r is not None and not isinstance(r, Malformed)]


def run(writer: SessionWriter, session=SESSION):
    """The finished turns and the checks of the CLI's totals, as the assembler makes them."""
    assembler = SessionTurns(session)
    finished = []
    for record in records(writer):
        finished += assembler.feed(record)
    return finished, assembler.take_reconciliations()


@pytest.fixture(scope="module")
def whole():
    writer = whole_session(SESSION)
    finished, checks = run(writer)
    return dict(zip(WHOLE_SESSION_KINDS, finished, strict=True)), writer, checks


def decoded(turn):
    body = gzip.decompress(encode_request(turn_spans(turn), {"service.name": "hydrafusion"}, "t", "0"))
    return span_dicts(decode_body(body))


def attrs(span):
    return plain_attributes(span.get("attributes", []))


def times(span):
    return int(span["startTimeUnixNano"]), int(span["endTimeUnixNano"])


def test_each_model_call_is_a_chat_span_under_the_leg_it_served(whole):
    turns, writer, _ = whole
    for kind in ("single", "accept", "reject", "critique", "revision", "resumed"):
        turn = turns[kind]
        spans = decoded(turn)
        legs = {attrs(s)["hydrafusion.phase.id"]: s for s in spans if "hydrafusion.phase.kind" in attrs(s)}
        calls = [s for s in spans if s["name"].startswith("chat ")]
        assert len(calls) == len(turn.calls) == sum(leg.usage.request_count for leg in turn.legs)
        for span, call in zip(calls, turn.calls):
            leg = legs[call.phase_id]
            assert span["parentSpanId"] == leg["spanId"] and span["kind"] == 3
            assert span["name"] == f"chat {call.model}" == f"chat {attrs(leg)['gen_ai.response.model']}"
            assert times(span) == (call.time_ns - round(call.duration_ms * 1e6), call.time_ns)
            assert times(leg)[0] <= times(span)[0] <= times(span)[1] <= times(leg)[1]
            a = attrs(span)
            assert a["gen_ai.request.model"] == a["gen_ai.response.model"] == call.model
            assert a["gen_ai.usage.input_tokens"] == call.usage.input_tokens
            assert a["gen_ai.usage.cache_read.input_tokens"] == call.usage.cache_read_tokens
            assert a["gen_ai.usage.cache_write.input_tokens"] == call.usage.cache_write_tokens
            assert a["gen_ai.usage.output_tokens"] == call.usage.output_tokens
            assert a["gen_ai.response.finish_reasons"] == {"values": [{"stringValue": call.finish_reason}]}
            assert a["gen_ai.response.time_to_first_chunk"] == pytest.approx(call.time_to_first_token_ms / 1000)
            assert a["hydrafusion.aiu"] == pytest.approx(call.usage.aiu)
            assert a["hydrafusion.call.initiator"] in ("user", "agent")
        for leg in legs.values():
            a = attrs(leg)
            assert a["hydrafusion.phase.call_count"] == a["hydrafusion.request_count"]
            assert not any(key.startswith("hydrafusion.phase.calls_difference") for key in a)


def test_replayed_tools_are_placed_between_the_calls_that_asked_for_them(whole):
    turn = whole[0]["reject"]
    repair = turn.legs[-1]
    calls = sorted(turn.leg_calls(repair), key=lambda call: call.time_ns)
    tools = turn.tools
    assert len(tools) == len(calls) - 1 and {tool.timing for tool in tools} == {BETWEEN_CALLS}
    spans = {s["name"] + attrs(s).get("gen_ai.tool.call.id", ""): s for s in decoded(turn)}
    for tool, asking, following in zip(tools, calls, calls[1:]):
        span = spans[f"execute_tool bash{tool.tool_call_id}"]
        assert times(span) == (asking.time_ns, following.time_ns - round(following.duration_ms * 1e6))
        assert times(span)[1] > times(span)[0]  # the tool's run, between the two calls
        assert span["parentSpanId"] == next(s["spanId"] for s in spans.values()
                                            if attrs(s).get("hydrafusion.phase.id") == repair.phase_id
                                            and s["name"].startswith("repair"))
        a = attrs(span)
        assert (a["gen_ai.tool.name"], a["gen_ai.operation.name"]) == ("bash", "execute_tool")
        assert a["hydrafusion.tool.timing"] == "between_calls" and "hydrafusion.tool.replayed" not in a
    # every second tool run fails: an error status with no text of the tool's
    failed = [s for t in whole[0].values() for s in decoded(t)
              if s["name"].startswith("execute_tool") and s.get("status")]
    assert failed and all(s["status"] == {"code": 2, "message": "tool_failed"} for s in failed)
    assert all(attrs(s)["hydrafusion.tool.success"] is False for s in failed)


@pytest.mark.parametrize("tool_counts", ['{"view":1}', "{}"])
def test_replayed_tools_the_calls_do_not_account_for_stay_at_the_commit(tool_counts):
    writer = SessionWriter(SESSION, START)
    writer.single("gpt-5.6-sol", request_count=3)
    lines = [line.replace('"toolCounts":{"bash":1}', f'"toolCounts":{tool_counts}') for line in writer.lines()]
    [turn] = assemble(lines, SESSION)
    assert turn.tools and {tool.timing for tool in turn.tools} == {AT_COMMIT}
    for span in (s for s in decoded(turn) if s["name"].startswith("execute_tool")):
        assert attrs(span)["hydrafusion.tool.replayed"] is True
        assert times(span) == (turn.commit.time_ns, turn.commit.time_ns)


def test_an_ordinary_turn_is_a_trace_of_its_own(whole):
    turns, writer, _ = whole
    turn = turns["ordinary"]
    truth = writer.expected[3]
    assert (turn.kind, turn.key, turn.outcome) == ("ordinary", truth.fusion_id, "completed")
    spans = decoded(turn)
    root = spans[0]
    assert root["name"] == "ordinary claude-sonnet-4.6" and "parentSpanId" not in root
    assert {s["parentSpanId"] for s in spans[1:]} == {root["spanId"]}
    a = attrs(root)
    assert (a["hydrafusion.turn.kind"], a["gen_ai.request.model"]) == ("ordinary", "claude-sonnet-4.6")
    assert a["hydrafusion.aiu"] == pytest.approx(truth.nano_aiu / 1e9)
    assert (a["hydrafusion.request_count"], a["hydrafusion.tool_count"]) == (truth.calls, truth.tools)
    assert "hydrafusion.fusion_id" not in a and "hydrafusion.pattern" not in a
    tools = [s for s in spans if s["name"].startswith("execute_tool")]
    assert [s["name"] for s in tools] == ["execute_tool bash", "execute_tool github-mcp-server-get_pull_request"]
    mcp = attrs(tools[1])
    assert (mcp["hydrafusion.tool.mcp_server"], mcp["hydrafusion.tool.mcp_tool"]) == (
        "github-mcp-server", "get_pull_request")
    for tool, span in zip(turn.tools, tools):
        assert tool.timing == LIVE and times(span) == (tool.start_ns, tool.end_ns)
        assert tool.end_ns > tool.start_ns
    assert times(root)[0] == turn.prompt.time_ns and times(root)[1] == turn.calls[-1].time_ns
    assert not turns["ordinary_no_tools"].tools
    assert len(turns["ordinary_no_tools"].calls) == writer.expected[4].calls > 0


def test_the_route_failures_fallback_answer_stays_with_the_failed_route(whole):
    turn = whole[0]["route_failed"]
    assert (turn.kind, turn.outcome, len(turn.legs)) == ("fallback", "route_failed", 1)
    spans = decoded(turn)
    fallback = next(s for s in spans if s["name"] == "primary gpt-5.6-mini")
    under = [s for s in spans if s.get("parentSpanId") == fallback["spanId"]]
    assert len(under) == len(turn.calls) + len(turn.tools) > 0
    assert all(tool.timing == LIVE for tool in turn.tools)
    assert turn.calls_difference(turn.legs[0]) is None


def shown(metrics: Metrics, family: str, *labels: str) -> dict:
    """A family's samples as a scrape shows them, summed by the values of `labels`."""
    totals = {}
    for key, value in samples(metrics.registry.render_final(), family).items():
        by = tuple(dict(key)[label] for label in labels)
        totals[by] = totals.get(by, 0) + value
    return totals


def test_prompts_of_every_kind_are_counted_on_one_footing(whole):
    turns, writer, _ = whole
    metrics = Metrics(Registry(label_value_limits={"model": MAX_MODELS}))
    for turn in turns.values():
        metrics.count_turn(turn)
    prompts = shown(metrics, "hydrafusion_prompts_total", "kind", "model")
    assert prompts == {("fusion", "hydrafusion"): 7, ("ordinary", "claude-sonnet-4.6"): 2,
                       ("ordinary", "gpt-5.6-mini"): 1, ("fallback", "gpt-5.6-mini"): 1}
    credits = shown(metrics, "hydrafusion_prompt_aiu_total", "kind", "model")
    for kind in ("fusion", "ordinary", "fallback"):
        truth = sum(t.nano_aiu for t in writer.expected if t.kind == kind) / 1e9
        assert sum(v for (k, _), v in credits.items() if k == kind) == pytest.approx(truth)
    calls = shown(metrics, "hydrafusion_prompt_model_calls_total", "kind", "model")
    assert calls[("ordinary", "claude-sonnet-4.6")] == writer.expected[3].calls + writer.expected[4].calls
    assert sum(shown(metrics, "hydrafusion_model_calls_total").values()) == sum(
        t.calls for t in writer.expected)
    assert sum(shown(metrics, "hydrafusion_tool_calls_total").values()) == sum(
        t.tools for t in writer.expected)
    assert shown(metrics, "hydrafusion_leg_call_mismatches_total") == {}
    # fusion turns stay out of nothing and ordinary ones out of the fusion families
    assert sum(shown(metrics, "hydrafusion_turns_total").values()) == 8


def test_shutdown_and_checkpoint_totals_that_match_agree_per_run(whole):
    checks = whole[2]
    assert [(c.source, c.scope, c.agrees) for c in checks] == [
        ("usage_checkpoint", "run", True), ("shutdown", "run", True), ("shutdown", "run", True)]
    assert set(checks[1].ours) == {"claude-sonnet-4.6", "gemini-3.1-pro", "gpt-5.6-mini",
                                   "gpt-5.6-sol", "mai-code-1.1-flash"}


def test_totals_that_do_not_match_are_reported_with_both_figures():
    writer = whole_session(SESSION, totals_off_by=1_500_000_000)
    _, checks = run(writer)
    last = checks[-1]
    assert (last.source, last.agrees) == ("shutdown", False)
    model = min(last.theirs)
    ours, theirs = last.ours[model], last.theirs[model]
    assert theirs.nano_aiu - ours.nano_aiu == 1_500_000_000
    line = last.describe()
    assert SESSION in line and model in line
    assert f"ours aiu={ours.aiu:.9g}" in line and f"CLI aiu={theirs.aiu:.9g}" in line
    metrics = Metrics(Registry())
    for check in checks:
        metrics.count_reconciliation(check)
    checks = shown(metrics, "hydrafusion_reconciliations_total", "source", "result")
    assert checks[("shutdown", "disagree")] == checks[("shutdown", "agree")] == 1


def test_a_session_read_from_its_middle_is_not_checked():
    writer = whole_session(SESSION)
    later = [r for r in records(writer)][40:]
    assembler = SessionTurns(SESSION)
    for record in later:
        assembler.feed(record)
    # only the run that began after reading began (the resumed one) is checked
    assert [(c.source, c.agrees) for c in assembler.take_reconciliations()] == [("shutdown", True)]


def test_a_damaged_usage_record_is_counted_and_the_turn_still_completes():
    writer = SessionWriter(SESSION, START)
    truth = writer.single("gpt-5.6-sol", damaged_call=True, request_count=3)
    writer.shutdown()
    parsed = [parse_line(line.encode()) for line in writer.lines()]
    assert parsed.count(Malformed("damaged_usage_record")) == 1
    [turn], [check] = run(writer)
    assert (turn.outcome, len(turn.calls)) == ("completed", truth.calls) == ("completed", 2)
    leg = turn.legs[0]
    difference = turn.calls_difference(leg)
    assert difference.request_count == 1 and difference.nano_aiu > 0
    a = attrs(next(s for s in decoded(turn) if s["name"] == "primary gpt-5.6-sol"))
    assert a["hydrafusion.phase.calls_difference.request_count"] == 1
    assert a["hydrafusion.phase.calls_difference.aiu"] == pytest.approx(difference.aiu)
    assert a["hydrafusion.phase.call_count"] == 2
    metrics = Metrics(Registry())
    metrics.count_turn(turn)
    assert shown(metrics, "hydrafusion_leg_call_mismatches_total", "phase_kind") == {("primary",): 1}
    assert not check.agrees  # the CLI counted the call the log's record lost


def unpriced_session() -> SessionWriter:
    """Usage records marked `unavailable`, without `copilotUsage`, as CLI 1.0.102 writes
    them when the API reports no credits: the legs, the rollups, the usage checkpoint and the
    shutdown give 0 for them (tests/data/realcli's `unpriced` scenario)."""
    writer = SessionWriter(SESSION, START, unpriced=1)
    writer.single("gpt-5.6-sol")
    writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="reject", repair_model="gpt-5.6-sol")
    writer.ordinary("claude-sonnet-4.6", calls=2)
    writer.usage_checkpoint()
    writer.single("gpt-5.6-sol", damaged_call=True, request_count=3)
    writer.shutdown()
    return writer


def test_calls_of_unknown_credits_are_no_mismatch_and_no_price():
    turns, checks = run(unpriced_session())
    assert all(not call.credits_known and call.usage.nano_aiu == 0
               for turn in turns for call in turn.calls)
    single, reject, ordinary, damaged = turns
    for turn in (single, reject):
        assert all(turn.calls_difference(leg) is None for leg in turn.legs)
        assert turn.usage.nano_aiu == 0 and not turn.credits_known  # a 0 that is no price
        assert (turn.known_nano_aiu, turn.unknown_credit_calls) == (0, len(turn.calls))
    # a lost call still shows, in its request and tokens; its credits are not guessed at
    difference = damaged.calls_difference(damaged.legs[0])
    assert difference.request_count == 1 and difference.nano_aiu == 0
    metrics = Metrics(Registry())
    for turn in turns:
        metrics.count_turn(turn)
    assert shown(metrics, "hydrafusion_leg_call_mismatches_total", "phase_kind") == {("primary",): 1}
    # the CLI's credits-only checkpoint cannot be checked; its shutdown is, on all but credits
    [check] = checks
    assert (check.source, check.unpriced) == ("shutdown", frozenset(check.ours))
    assert not check.agrees  # the damaged record's lost call
    assert "ours aiu>=0 " in check.describe() and "calls=" in check.describe()
    spans = decoded(ordinary)
    assert not any("hydrafusion.aiu" in attrs(span) for span in spans)
    assert " aiu=unknown" in turn_line(ordinary)
    spans = {span["name"].split(" ")[0]: span for span in decoded(single)}
    priced = {name: "hydrafusion.aiu" in attrs(span) for name, span in spans.items()}
    assert (priced["hydrafusion"], priced["primary"], priced["chat"]) == (False, False, False)
    assert attrs(spans["hydrafusion"])["hydrafusion.unknown_credit_calls"] == len(single.calls)
    assert " aiu=unknown" in turn_line(single)


def test_totals_agree_with_a_ledger_of_unknown_credits():
    writer = SessionWriter(SESSION, START, unpriced=1)
    writer.single("gpt-5.6-sol")
    writer.ordinary("claude-sonnet-4.6", calls=2)
    writer.resume()
    writer.single("gpt-5.6-sol")
    writer.shutdown()
    writer.shutdown(nano_aiu_off_by=5)  # credits are not compared: still agrees
    assembler, checks = SessionTurns(SESSION), []
    for record in records(writer):
        assembler.feed(record)
        checks += assembler.take_reconciliations()
        context = assembler.context
        saved = json.loads(json.dumps(session_state.context_to_data(context)))
        assert session_state.context_from_data(saved) == context
    assert [(c.scope, c.agrees) for c in checks] == [("run", True), ("run", True)]
    assert assembler.context.log_unpriced == {"gpt-5.6-sol", "claude-sonnet-4.6"}
    assert assembler.context.run_unpriced == {"gpt-5.6-sol"}


def test_calls_and_tools_need_no_fusion_block_to_join_a_routed_turn():
    """A call written while a fusion turn is current, without a fusion block, joins it at its root."""
    writer = SessionWriter(SESSION, START)
    writer.single("gpt-5.6-sol")
    lines = writer.lines()
    stray = json.loads(next(line for line in lines if '"session.usage_record"' in line))
    del stray["data"]["usage"]["fusion"]
    at = next(i for i, line in enumerate(lines) if '"session.fusion_commit_started"' in line)
    lines.insert(at, json.dumps(stray))
    [turn] = assemble(lines, SESSION)
    spans = decoded(turn)
    strays = [s for s in spans if s["name"].startswith("chat ") and s["parentSpanId"] == spans[0]["spanId"]]
    assert len(strays) == 1


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 400), max_size=4))
def test_restarts_anywhere_change_nothing(cuts):
    """The assembler saved to a checkpoint (as JSON) and restored at any points gives the
    same turns, spans and checks as one that never stopped."""
    writer = whole_session(SESSION, totals_off_by=7)
    stream = records(writer)
    expected_turns, expected_checks = run(writer)
    assembler, finished, checks = SessionTurns(SESSION), [], []
    for index, record in enumerate(stream):
        if index in cuts:
            saved = json.loads(json.dumps({
                "open": [session_state.turn_to_data(t) for t in assembler.open_turns],
                "finished": assembler.finished,
                "context": session_state.context_to_data(assembler.context)}))
            assembler = SessionTurns(SESSION, [session_state.turn_from_data(t) for t in saved["open"]],
                                     saved["finished"], session_state.context_from_data(saved["context"]))
        finished += assembler.feed(record)
        checks += assembler.take_reconciliations()
    assert [turn_spans(t) for t in finished] == [turn_spans(t) for t in expected_turns]
    assert checks == expected_checks


def test_the_checkpoint_keeps_every_new_record_kind():
    writer = whole_session(SESSION)
    stream = records(writer)
    assembler = SessionTurns(SESSION)
    kinds = set()
    for record in stream:
        assembler.feed(record)
        for turn in assembler.open_turns:
            data = session_state.turn_to_data(turn)
            kinds |= {r["kind"] for r in data["records"]}
            assert session_state.turn_from_data(json.loads(json.dumps(data))) == turn
    assert {"ModelCall", "ToolStarted", "ToolCompleted", "Prompt"} <= kinds
    # a checkpoint written before contexts were kept still loads
    assert session_state.context_from_data(None) == SessionTurns(SESSION).context


def test_a_call_record_never_carries_text():
    call = next(r for r in records(whole_session(SESSION)) if isinstance(r, ModelCall))
    assert call.usage.request_count == 1 and isinstance(call.usage, Usage)
    assert all(len(name) < 80 for name in call.tool_requests)
