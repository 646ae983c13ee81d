"""Realistic Copilot CLI ``events.jsonl`` files, together with the truth they hold.

Tests (and later the demo fixtures) need session logs shaped like the ones Copilot CLI
1.0.102 really writes: its event order, its explicit nulls, the committed leg's messages
replayed at commit time. They also need to know exactly which turns, legs and credits a
correct reader must find there. That truth (``SessionWriter.expected``) comes from the
numbers this module chose, never from reading the file back, so it can judge a reader.
Every free-text field holds CANARY, so a privacy test can prove none of it leaks.

Shapes follow /work/shared/reference/copilot-events.md. Output is deterministic: all
randomness, ids included, comes from a ``random.Random`` seeded with the session id.
"""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

CANARY = "CANARY-7f3a-do-not-export"

_USAGE_FIELDS = ("request_count", "input_tokens", "output_tokens",
                 "cache_read_tokens", "cache_write_tokens", "nano_aiu")
# A usage record's `cost`: the model's premium-request multiplier, not what the call cost.
PREMIUM_MULTIPLIER = 1.0


@dataclass
class ExpectedLeg:
    phase_id: str
    phase_kind: str
    role: str
    scope: str
    model: str
    status: str
    verdict: str | None
    committed: bool
    duration_ms: int
    request_count: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    nano_aiu: int  # as the leg's record gives them: its calls' but those of unknown credits
    failure_reason: str | None
    unknown_calls: int = 0  # calls whose credits the CLI marked unavailable


@dataclass
class ExpectedTurn:
    """One turn as a correct reader must rebuild it.

    For a route failure, fusion_id is the attemptId without ``:route`` (the id its fallback
    leg carries), and the fallback leg counts as committed: its answer is the one the user
    got, though the log has no commit or rollup to say so.
    end_timestamp is the timestamp of the turn's last fusion event, as written.
    """

    session_id: str
    fusion_id: str
    pattern: str
    outcome: str
    models: list[str]
    legs: list[ExpectedLeg]
    nano_aiu: int
    committed_phase_id: str | None
    degraded_reason: str | None
    route_failure_reason: str | None
    end_timestamp: str
    kind: str = "fusion"  # or "ordinary" (no fusion: key prompt-{user.message id}), "fallback"
    calls: int = 0  # usage records the tailer can read (damaged ones left out)
    tools: int = 0  # tool calls (start and complete pairs)
    damaged_calls: int = 0
    # The router's ids its resolved record carries (none without one: a route failure, an
    # ordinary prompt).
    policy_version: str | None = None
    plan_version: str | None = None
    rule_id: str | None = None
    unknown_calls: int = 0  # model calls whose credits the CLI marked unavailable

    @property
    def end_ms(self) -> int:
        """end_timestamp in Unix milliseconds: the windows the metrics tests sum over."""
        moment = datetime.fromisoformat(self.end_timestamp.replace("Z", "+00:00"))
        return round(moment.timestamp() * 1000)


@dataclass
class _Turn:
    """The turn being written: its ids, and each leg with the time its event was written."""

    fusion_id: str
    pattern: str | None  # None: the route failed, so the turn has no fusion context
    started_ms: int
    interaction_id: str
    legs: list[tuple[int, ExpectedLeg]] = field(default_factory=list)
    calls: int = 0
    tools: int = 0
    damaged_calls: int = 0
    router: dict = field(default_factory=dict)  # the router's ids of its resolved record

    def phase_id(self, suffix: str) -> str:
        return f"{self.fusion_id}:{suffix}"

    def fusion_block(self, leg: ExpectedLeg, **extra) -> dict | None:
        if self.pattern is None:
            return None
        return {"fusionId": self.fusion_id, "syntheticModel": "hydrafusion", "policy": "standard",
                "pattern": self.pattern, "phaseId": leg.phase_id, "phaseKind": leg.phase_kind,
                "role": leg.role, "sourceModel": leg.model, "conversationScope": leg.scope, **extra}


def _plan(kind: str, role: str, scope: str, conditional: bool = False) -> dict:
    return {"kind": kind, "role": role, "scope": scope, "conditional": conditional}


def _write_room(figures: dict) -> int:
    """The most cache-write tokens a leg of these figures may have: the CLI's input tokens
    hold its cache reads and writes (uncached input, as ccusage counts it, is what is left),
    so the reads and writes of each of its calls (_record_calls splits the leg's figures by
    weights of 1 to 9) must leave some of the call's input: _split's rounding takes up to 2
    tokens per call from the last call's room, weighed by up to 9 * calls."""
    calls = figures["request_count"]
    rounding = 2 * (calls - 1) * (9 * (calls - 1) + 1)
    return max(figures["input_tokens"] - figures["cache_read_tokens"] - rounding, 0)


def priced_nano(prices: tuple[int, int, int, int], input_tokens: int, cache_read_tokens: int,
                cache_write_tokens: int, output_tokens: int) -> int:
    """A call's credits at ``prices`` (nano-credits per uncached input, cache-read, cache-write
    and output token; input counts the cache reads and writes, as the CLI's does)."""
    uncached = input_tokens - cache_read_tokens - cache_write_tokens
    assert uncached >= 0, "a call's cache reads and writes are more than its input"
    return (prices[0] * uncached + prices[1] * cache_read_tokens + prices[2] * cache_write_tokens
            + prices[3] * output_tokens)


def _split(total: int, weights: list[int]) -> list[int]:
    """Shares of ``total`` in proportion to ``weights`` that add up to it exactly."""
    shares = [total * w // sum(weights) for w in weights[:-1]]
    return shares + [total - sum(shares)]


class SessionWriter:
    """Writes one session's events in the order the real CLI does; see the module docstring.

    Each pattern method appends one user prompt's events and returns (and records in
    ``expected``) the turn a reader should report for it.
    """

    def __init__(self, session_id: str, start: datetime, *, canary: str = CANARY,
                 copilot_version: str = "1.0.102", unpriced: float = 0.0, seed: str = "",
                 prices: dict[str, tuple[int, int, int, int]] | None = None):
        """``unpriced``: the share of model calls (drawn at random, 1: all) whose credits the
        CLI does not know, as 1.0.102 writes them when the API's answer carries no
        `copilot_usage`: the usage record says `aiCreditsStatus: unavailable` and has no
        `copilotUsage`, and the leg's, the rollup's and the run's `totalNanoAiu` leave the
        call out (0 for a leg whose every call is unpriced). A damaged record is never one.
        ``seed``: a writer that continues a log another writer of the same session wrote
        needs one of its own, or its ids repeat that writer's (and its turns are duplicates).
        ``prices``: per model, nano-credits per uncached input, cache-read, cache-write and
        output token; a call on such a model costs exactly its tokens at those prices (its
        leg's credits their sum), where other calls' credits are drawn at random."""
        self.session_id = session_id
        self.unpriced = unpriced
        self.prices = prices or {}
        self.canary = canary
        self.expected: list[ExpectedTurn] = []
        self._rng = random.Random(session_id + seed)
        self._clock = round(start.timestamp() * 1000)  # ms since the epoch: the latest event
        self._pending: list[tuple[int, int, str, dict, str]] = []
        self._lines: list[str] = []
        self._last_id: str | None = None
        self._assistant_turns = 0
        self._prompted = False
        self._models: dict[str, dict[str, int]] = {}  # the current run's calls, per model
        self._usage_records = 0  # the session's, as the shutdown's accounting watermark counts
        self._last_call: dict | None = None  # the last usage record's `usage`
        self._model = "auto"
        self._router = {"policyVersion": "2026-09-01", "planVersion": "2", "ruleId": None}
        self.cwd = f"/home/dev/src/{canary}/webapp"
        self._emit(self._clock, "session.start", {
            "sessionId": session_id, "version": 1, "producer": "copilot-agent",
            "copilotVersion": copilot_version, "startTime": self._timestamp(self._clock),
            "selectedModel": "auto", "autoTierIdCompat": "hydrafusion", "reasoningEffort": None,
            "context": {"cwd": self.cwd, "gitRoot": self.cwd, "repository": f"acme/{canary}",
                        "branch": f"fix/{canary}"}})

    def retune(self, policy_version: str | None, *, plan_version: str | None = "2",
               rule_id: str | None = None) -> None:
        """The router's ids the next turns' resolved records carry, as after the remote
        router was retuned midway (None: written null); `rule_id` None: `rule-<pattern>`."""
        self._router = {"policyVersion": policy_version, "planVersion": plan_version,
                        "ruleId": rule_id}

    # -- the patterns ---------------------------------------------------------------

    def single(self, model: str, *, damaged_call: bool = False, tool_counts: bool = True,
               **usage_overrides) -> ExpectedTurn:
        """``tool_counts=False``: the usage records do not name the tools their calls asked for."""
        turn = self._begin("single", [_plan("primary", "solver", "root")], primaryModel=model)
        leg = self._leg(turn, "phase:0", "primary", "solver", "root", model, usage=usage_overrides,
                        damaged_call=damaged_call, tool_counts=tool_counts)
        return self._commit(turn, leg)

    def cascade(self, draft_model: str, judge_model: str, *, verdict: str = "accept",
                repair_model: str | None = None) -> ExpectedTurn:
        """Any verdict but ``accept`` hands the answer over to a repair leg."""
        repair_model = repair_model or draft_model
        turn = self._begin_cascade(draft_model, judge_model, repair_model)
        primary = self._leg(turn, "phase:0", "primary", "solver", "root", draft_model)
        judge = self._leg(turn, "judge", "judge", "judge", "review", judge_model, verdict=verdict)
        if verdict == "accept":
            return self._commit(turn, primary)
        self._handoff(turn, judge, turn.phase_id("repair"), repair_model)
        return self._commit(turn, self._leg(turn, "repair", "repair", "solver", "root", repair_model))

    def critique(self, draft_model: str, critic_models: list[str], *,
                 revision_model: str | None = None) -> ExpectedTurn:
        """Critics review the draft in parallel; a revision model makes the first one ask for it."""
        plan = ([_plan("draft", "solver", "root")] + [_plan("critic", "critic", "review")] * len(critic_models)
                + [_plan("revision", "solver", "root", conditional=True)])
        turn = self._begin("critique", plan, primaryModel=draft_model, critics=critic_models)
        draft = self._leg(turn, "phase:0", "draft", "solver", "root", draft_model)
        together = self._clock
        critics = [self._leg(turn, f"critic:{i}", "critic", "critic", "review", model, start=together)
                   for i, model in enumerate(critic_models)]
        if revision_model is None:
            return self._commit(turn, draft)
        self._handoff(turn, critics[0], turn.phase_id("revision"), revision_model)
        return self._commit(turn, self._leg(turn, "revision", "revision", "solver", "root", revision_model))

    def degraded(self, draft_model: str, judge_model: str, *, reason: str = "timeout") -> ExpectedTurn:
        """A cascade whose judge fails: the turn degrades to the unjudged primary answer."""
        turn = self._begin_cascade(draft_model, judge_model, draft_model)
        primary = self._leg(turn, "phase:0", "primary", "solver", "root", draft_model)
        self._leg(turn, "judge", "judge", "judge", "review", judge_model, status="failed",
                  failure=reason, degraded_to=primary.phase_id)
        return self._commit(turn, primary, degraded_reason="judge_failed")

    def incomplete(self, draft_model: str, judge_model: str) -> ExpectedTurn:
        """A cascade the user aborts during the judge's review: no commit, no rollup ever."""
        turn = self._begin_cascade(draft_model, judge_model, draft_model)
        self._leg(turn, "phase:0", "primary", "solver", "root", draft_model)
        self._leg(turn, "judge", "judge", "judge", "review", judge_model, status="cancelled",
                  failure="user_abort")
        end_ms, _ = turn.legs[-1]
        self._emit(end_ms - 3, "abort", {"reason": "user_initiated"})
        return self._expect(turn, "cascade", "incomplete", end_ms)

    def route_failed(self, fallback_model: str, *, reason: str = "transport") -> ExpectedTurn:
        """The router fails; the prompt runs as an ordinary turn, its leg logged afterwards."""
        attempt_id = f"fusion-{self._uuid()}:route"
        failed_at, latency = self._routing()
        self._emit(failed_at, "session.fusion_route_failed", {
            "attemptId": attempt_id, "syntheticModel": "hydrafusion", "policy": "standard",
            "fallbackModel": fallback_model, "reason": reason, "routingLatencyMs": latency,
            "errorMessage": self._text("plan service unreachable: connect ECONNREFUSED")})
        turn = _Turn(attempt_id.removesuffix(":route"), None, failed_at - latency, str(self._uuid()))
        self._prompt(failed_at, turn)
        self._leg(turn, "phase:0", "primary", "solver", "root", fallback_model, live=True)
        fallback = turn.legs[-1][1]
        fallback.committed = True
        expected = self._expect(turn, "fallback", "route_failed", turn.legs[-1][0])
        expected.route_failure_reason = reason
        expected.committed_phase_id = fallback.phase_id
        return expected

    def ordinary(self, model: str, *, tools: tuple[str, ...] = ("bash",), calls: int | None = None) -> ExpectedTurn:
        """A prompt answered without fusion (the user picked ``model``): its calls and tools
        are written live, each as it ends. Every call but the last runs the next of ``tools``
        (``server/tool`` names an MCP tool); with ``tools=()`` no call asks for one."""
        prompt_at = self._after(self._clock, 4_000, 90_000)
        turn = _Turn("", None, prompt_at, str(self._uuid()))
        turn.fusion_id = "prompt-" + self._prompt(prompt_at, turn)
        figures = self._usage("root", None, {} if calls is None else {"request_count": calls})
        leg = ExpectedLeg(f"{turn.fusion_id}:answer", "answer", "solver", "root", model, "succeeded", None,
                          committed=True, duration_ms=0, failure_reason=None, **figures)
        windows = self._calls(prompt_at + 40, leg.request_count, asks_for_tools=bool(tools))
        self._record_calls(turn, leg, windows, tools=tools)
        self._answer(turn, leg, _live(windows), None, tools=tools)
        self._account(leg, windows)
        expected = ExpectedTurn(self.session_id, turn.fusion_id, "unknown", "completed", [model], [],
                                leg.nano_aiu, None, None, None, self._timestamp(windows[-1][1]), kind="ordinary",
                                calls=turn.calls, tools=turn.tools, unknown_calls=leg.unknown_calls)
        self.expected.append(expected)
        return expected

    def model_change(self, model: str) -> None:
        """``/model``: later prompts run on ``model`` (``auto`` brings fusion back)."""
        self._emit(self._after(self._clock, 2_000, 20_000), "session.model_change",
                   {"newModel": model, "previousModel": self._model})
        self._model = model

    def usage_checkpoint(self) -> None:
        """The run's credits so far, beside the tool names and request ids the CLI keeps there."""
        self._flush()
        self._emit(self._after(self._clock, 5, 50), "session.usage_checkpoint", {
            "totalNanoAiu": sum(m["nano_aiu"] for m in self._models.values()),
            "toolNames": ["bash"], "requestIds": [str(self._uuid())]})
        self._flush()

    # -- session lifecycle and output -------------------------------------------------

    def shutdown(self, *, nano_aiu_off_by: int = 0) -> None:
        """session.shutdown, keys and all, as CLI 1.0.102 writes it: the totals of this CLI
        run (since the start or the last resume; of the whole session after a
        ``resume(carry_totals=True)``), per model, per provider and per agent, and again in
        its accounting snapshot; ``nano_aiu_off_by`` makes the first model's credits
        disagree with the calls."""
        self._flush()
        models = dict(sorted(self._models.items()))
        nano = {model: m["nano_aiu"] for model, m in models.items()}
        if nano and nano_aiu_off_by:
            nano[min(nano)] += nano_aiu_off_by
        status = "complete" if not self.unpriced else "unavailable"
        snapshot = {model: _model_metric(m, nano[model], float, aiCreditsStatus=status)
                    for model, m in models.items()}
        premium = sum(m["user_requests"] for m in models.values()) * PREMIUM_MULTIPLIER
        tokens = _token_details(sum(m["input_tokens"] for m in models.values()),
                                sum(m["output_tokens"] for m in models.values()))
        api_ms = sum(m["api_ms"] for m in models.values())
        started = json.loads(self._lines[0])["data"]["startTime"]
        changes = {"linesAdded": 42, "linesRemoved": 7, "filesModified": [f"{self.cwd}/src/app.py"]}
        agents = {"main": {"totalApiDurationMs": api_ms, "totalNanoAiu": float(sum(nano.values())),
                           "modelMetrics": {model: _model_metric(m, nano[model], float)
                                            for model, m in models.items()}}}
        providers = [{"provider": {"id": "copilot", "label": "GitHub Copilot", "kind": "copilot"},
                      "modelId": model, "metrics": metric, "modelDisplayName": model}
                     for model, metric in snapshot.items()]
        last = self._last_call or {}
        self._emit(self._after(self._clock, 800, 4_000), "session.shutdown", {
            "accountingSnapshot": {
                "totalPremiumRequestCost": premium, "totalUserRequests": round(premium),
                "totalNanoAiu": float(sum(nano.values())), "aiCreditsStatus": status,
                "tokenDetails": tokens, "totalApiDurationMs": api_ms, "sessionStartTime": started,
                "codeChanges": changes | {"filesModifiedCount": len(changes["filesModified"])},
                "modelMetrics": snapshot, "agentMetrics": agents, "providerModelMetrics": providers,
                "currentModel": last.get("model", self._model),
                "lastCallInputTokens": last.get("inputTokens", 0),
                "lastCallOutputTokens": last.get("outputTokens", 0)},
            "providerModelMetrics": providers,
            "usageAccountingWatermarks": {self.session_id: self._usage_records},
            "shutdownType": "routine", "totalPremiumRequests": round(premium),
            "totalNanoAiu": sum(nano.values()), "tokenDetails": tokens, "totalApiDurationMs": api_ms,
            "sessionStartTime": self._ms(started),
            "eventsFileSizeBytes": sum(len(line.encode()) + 1 for line in self._lines),
            "codeChanges": changes,
            "modelMetrics": {model: _model_metric(m, nano[model], int) for model, m in models.items()},
            "agentMetrics": agents, "currentModel": last.get("model", self._model),
            "currentTokens": 48_113, "systemTokens": 9_870, "conversationTokens": 31_202,
            "toolDefinitionsTokens": 7_041})
        self._flush()

    def resume(self, *, carry_totals: bool = False) -> None:
        """The user comes back hours later; assistant turn ids restart at "0".

        ``carry_totals``: the resumed run's shutdown totals the whole session, as CLI 1.0.102
        writes it; without, it totals the resumed run alone. The tailer checks the CLI's
        totals either way (tailer/turns/reconciliation.py)."""
        self._flush()
        resumed = self._after(self._clock, 3_600_000, 6 * 3_600_000)
        self._emit(resumed, "session.resume", {"resumeTime": self._timestamp(resumed),
                                               "eventCount": len(self._lines)})
        self._assistant_turns = 0
        if not carry_totals:
            self._models = {}
        self._flush()

    def lines(self) -> list[str]:
        self._flush()
        return list(self._lines)

    def write(self, state_dir: Path) -> Path:
        folder = Path(state_dir) / self.session_id
        folder.mkdir(parents=True, exist_ok=True)
        events = folder / "events.jsonl"
        events.write_bytes("".join(line + "\n" for line in self.lines()).encode())
        created = json.loads(self._lines[0])["timestamp"]
        (folder / "workspace.yaml").write_bytes((
            f"id: {self.session_id}\ncwd: {json.dumps(self.cwd)}\nname: {json.dumps(self._text('fix the parser'))}\n"
            f"created_at: {created}\nupdated_at: {json.loads(self._lines[-1])['timestamp']}\n").encode())
        return events

    # -- building blocks ----------------------------------------------------------------

    def _begin_cascade(self, draft_model: str, judge_model: str, repair_model: str) -> _Turn:
        plan = [_plan("primary", "solver", "root"), _plan("judge", "judge", "review"),
                _plan("repair", "solver", "root", conditional=True)]
        return self._begin("cascade", plan, primaryModel=draft_model, judgeModel=judge_model,
                           repairModel=repair_model)

    def _begin(self, pattern: str, phase_plan: list[dict], *, critics: list[str] | None = None,
               **models) -> _Turn:
        """The routing decision, then the prompt (the CLI writes them in that order)."""
        routed, latency = self._routing()
        rule = self._router["ruleId"] or f"rule-{pattern}"
        router = {**self._router, "ruleId": rule}
        turn = _Turn(f"fusion-{self._uuid()}", pattern, routed - latency, str(self._uuid()),
                     router=router)
        self._emit(routed, "session.fusion_resolved", {
            "fusionId": turn.fusion_id, "turnId": turn.phase_id("turn"), "contractVersion": 1,
            "syntheticModel": "hydrafusion", "policy": "standard", "routeSource": "capi_plan",
            "planVersion": router["planVersion"], "policyVersion": router["policyVersion"],
            "modelUniverseVersion": "mu-118", "ruleId": rule, "selectedRuleId": rule,
            "ruleName": self._text(f"{pattern} for multi-file edits"),
            "hint": self._text("the prompt asks for a refactor with tests"), "pattern": pattern,
            "phasePlan": phase_plan, "primaryModel": None, "secondaryModel": None, "judgeModel": None,
            "repairModel": None, **models,
            "critics": [{"phaseId": turn.phase_id(f"critic:{i}"), "model": model, "reasoningEffort": "medium"}
                        for i, model in enumerate(critics or [])],
            "fallbackModel": "gpt-5.6-mini", "followUpModel": None,
            "scores": {"reasoning": 0.72, "codeGen": 0.81, "debugging": 0.44, "toolUse": 0.63},
            "routingLatencyMs": latency})
        self._prompt(routed, turn)
        return turn

    def _routing(self) -> tuple[int, int]:
        """When routing ends (after the user typed the next prompt), and how long it took."""
        return self._after(self._clock, 4_000, 90_000), self._rng.randint(172, 371)

    def _prompt(self, at: int, turn: _Turn) -> str:
        """The prompt (and the system message on the session's first one); returns its event id."""
        text = self._text("refactor parse_config and add tests for the empty file case")
        event_id = self._emit(at + 2, "user.message", {
            "content": text, "transformedContent": f"<context>{text}</context>", "attachments": [],
            "source": None, "interactionId": turn.interaction_id})
        if not self._prompted:
            self._emit(at + 3, "system.message",
                       {"role": "system", "content": self._text("You are GitHub Copilot CLI.")})
            self._prompted = True
        return event_id

    def _leg(self, turn: _Turn, suffix: str, kind: str, role: str, scope: str, model: str, *,
             start: int | None = None, verdict: str | None = None, status: str = "succeeded",
             failure: str | None = None, degraded_to: str | None = None, usage: dict | None = None,
             live: bool = False, damaged_call: bool = False, tool_counts: bool = True) -> ExpectedLeg:
        """A leg's model calls (one usage_record each), then its phase event at its end.

        Only root-scope legs run tools, between their calls. ``live``: the leg is an ordinary
        turn (a route failure's fallback), so its messages and tools are written as they
        happen rather than replayed at a commit. ``damaged_call``: its first usage record
        holds a negative token count, as a damaged log might.
        """
        figures = self._usage(scope, failure, usage or {})
        start = self._clock if start is None else start
        leg = ExpectedLeg(turn.phase_id(suffix), kind, role, scope, model, status, verdict, committed=False,
                          duration_ms=0, failure_reason=failure, **figures)
        calls = self._calls(start, leg.request_count, asks_for_tools=scope == "root")
        end = self._after(calls[-1][1], 20, 200)
        leg.duration_ms = end - start
        self._record_calls(turn, leg, calls, damaged=damaged_call, tool_counts=tool_counts,
                           tools=("bash",) if scope == "root" else ())
        if live:
            self._answer(turn, leg, _live(calls), None)
        effort = self._rng.choice(("low", "medium", "high"))
        data = {"fusionId": turn.fusion_id, "phaseId": leg.phase_id, "phaseKind": kind, "role": role,
                "conversationScope": scope, "model": model, "reasoningEffort": effort, "status": status}
        usage_json = {"requestCount": leg.request_count, "inputTokens": leg.input_tokens,
                      "outputTokens": leg.output_tokens, "cachedTokens": leg.cache_read_tokens,
                      "cacheWriteTokens": leg.cache_write_tokens, "totalNanoAiu": leg.nano_aiu}
        if failure:
            self._emit(end, "assistant.fusion_phase_failed", data | {
                "reason": failure, "durationMs": leg.duration_ms, "usage": usage_json,
                "degradedToPhaseId": degraded_to, "errorMessage": self._text(f"{kind} stopped")})
        else:
            if role == "judge":
                content = json.dumps({"verdict": verdict, "rationale": self._text("the edge case is handled")})
            else:
                content = self._text(f"{kind} answer: parse_config now returns {{}} for an empty file")
            self._emit(end, "assistant.fusion_phase_completed", data | {
                "verdict": verdict, "durationMs": leg.duration_ms, "usage": usage_json, "content": content,
                "projectionMode": "append" if scope == "root" else "none",
                "projectionMessage": None if kind in ("primary", "draft") else self._text(f"{kind} notes"),
                "stagedTerminal": self._text("pytest: 14 passed") if scope == "root" else None})
        turn.legs.append((end, leg))
        self._account(leg, calls)
        return leg

    def _calls(self, start: int, count: int, *, asks_for_tools: bool) -> list[tuple[int, int]]:
        """When each of ``count`` calls began and ended; a call that asked for a tool is
        followed by the tool's run before the next call begins."""
        calls, moment = [], start
        for index in range(count):
            began, moment = moment, self._after(moment, 1_500, 9_000)
            calls.append((began, moment))
            if asks_for_tools and index < count - 1:
                moment = self._after(moment, 200, 6_000)
        return calls

    def _account(self, leg: ExpectedLeg, calls: list[tuple[int, int]]) -> None:
        """What the CLI adds to the run's totals for this leg's calls (the first of which the
        user's prompt began: _record_calls)."""
        totals = self._models.setdefault(
            leg.model, dict.fromkeys(_USAGE_FIELDS + ("api_ms", "user_requests"), 0))
        for name in _USAGE_FIELDS:
            totals[name] += getattr(leg, name)
        totals["api_ms"] += sum(done - began for began, done in calls)
        totals["user_requests"] += 1

    def _usage(self, scope: str, failure: str | None, overrides: dict) -> dict:
        unknown = overrides.keys() - set(_USAGE_FIELDS)
        if unknown:
            raise TypeError(f"unknown usage fields: {sorted(unknown)}")
        rng = self._rng
        inputs = rng.randint(9_000, 64_000) if scope == "root" else rng.randint(5_000, 30_000)
        figures = {"request_count": rng.randint(2, 4) if scope == "root" and not failure else 1,
                   "input_tokens": inputs, "cache_read_tokens": int(inputs * rng.uniform(0.3, 0.9)),
                   "output_tokens": rng.randint(0, 90) if failure else rng.randint(150, 4_000),
                   "cache_write_tokens": rng.choice((0, 0, rng.randint(400, 4_000))),
                   "nano_aiu": rng.randint(300_000_000, 7_500_000_000)} | overrides
        if "cache_write_tokens" not in overrides:
            figures["cache_write_tokens"] = min(figures["cache_write_tokens"], _write_room(figures))
        return figures

    def _record_calls(self, turn: _Turn, leg: ExpectedLeg, calls: list[tuple[int, int]], *,
                      damaged: bool = False, tool_counts: bool = True,
                      tools: tuple[str, ...] = ("bash",)) -> None:
        """One durable session.usage_record per model call; their figures add up to the leg's.
        Every call but the last asks for the next of ``tools``. A call of unknown credits
        (``unpriced``) takes its share of credits off the leg's, as the CLI leaves it out."""
        weights = [self._rng.randint(1, 9) for _ in calls]
        shares = {name: _split(getattr(leg, name), weights) for name in _USAGE_FIELDS[1:]}
        if leg.model in self.prices:  # each call costs its tokens, the leg its calls
            shares["nano_aiu"] = [priced_nano(self.prices[leg.model], *tokens) for tokens in zip(
                shares["input_tokens"], shares["cache_read_tokens"], shares["cache_write_tokens"],
                shares["output_tokens"])]
            leg.nano_aiu = sum(shares["nano_aiu"])
        turn.calls += len(calls) - damaged
        turn.damaged_calls += damaged
        for i, (began, done) in enumerate(calls):
            priced = (damaged and i == 0) or not self._unpriced_call()
            last = i == len(calls) - 1
            asked = {} if last or not tools or not tool_counts else {_tool_name(tools[i % len(tools)]): 1}
            usage = {
                "model": leg.model, "provider": {"id": "copilot", "kind": "copilot", "label": "GitHub Copilot"},
                "inputTokens": -1 if damaged and i == 0 else shares["input_tokens"][i],
                "outputTokens": shares["output_tokens"][i],
                "cacheReadTokens": shares["cache_read_tokens"][i],
                "cacheWriteTokens": shares["cache_write_tokens"][i], "cost": PREMIUM_MULTIPLIER,
                "duration": done - began, "timeToFirstTokenMs": min(done - began, self._rng.randint(300, 1_400)),
                "initiator": "user" if i == 0 else "agent", "apiCallId": str(self._uuid()),
                "finishReason": "stop" if last else "tool_calls", "reasoningEffort": "medium", "isAuto": True,
                "isByok": False, "toolCounts": asked, "aiCreditsStatus": "complete"}
            fusion = turn.fusion_block(leg)
            if fusion is not None:  # an ordinary turn's calls have no fusion block at all
                usage["fusion"] = fusion
            if priced:
                usage["copilotUsage"] = {"model": leg.model, "totalNanoAiu": shares["nano_aiu"][i], "tokenDetails": [
                    {"batchSize": 1, "costPerBatch": 1, "tokenCount": usage[f"{kind}Tokens"], "tokenType": kind}
                    for kind in ("input", "output")]}
            else:
                usage["aiCreditsStatus"] = "unavailable"
                leg.nano_aiu -= shares["nano_aiu"][i]
                leg.unknown_calls += 1
            self._emit(done, "session.usage_record", {"usage": usage})
            self._last_call = usage
        self._usage_records += len(calls)

    def _unpriced_call(self) -> bool:
        """Whether the next call is one of unknown credits; draws nothing when none is."""
        return self.unpriced >= 1 or (self.unpriced > 0 and self._rng.random() < self.unpriced)

    def _handoff(self, turn: _Turn, source: ExpectedLeg, target_phase_id: str, target_model: str) -> None:
        self._emit(self._clock + 4, "session.fusion_handoff", {
            "fusionId": turn.fusion_id, "sourcePhaseId": source.phase_id, "targetPhaseId": target_phase_id,
            "targetModel": target_model, "message": self._text("handle the empty file without raising")})

    def _commit(self, turn: _Turn, leg: ExpectedLeg, degraded_reason: str | None = None) -> ExpectedTurn:
        """Commit ``leg``: replay its messages and tool calls at the commit's time, then the rollup."""
        leg.committed = True
        at = self._after(self._clock, 15, 120)
        commit_id = turn.phase_id("commit:0")
        self._emit(at, "session.fusion_commit_started", {
            "fusionId": turn.fusion_id, "commitId": commit_id, "sourcePhaseId": leg.phase_id,
            "sourceModel": leg.model, "kind": "text", "toolCallId": None})
        self._answer(turn, leg, [(at, at)] * leg.request_count, commit_id)
        if leg.request_count > 1:
            self._emit(at, "session.fusion_change_checkpoint", {"fusionId": turn.fusion_id, "codeChanges": {
                "linesAdded": 12, "linesRemoved": 3, "filesModified": [f"{self.cwd}/src/config.py"]}})
        done = self._after(at, 5, 60)
        legs = [leg for _, leg in turn.legs]
        self._emit(done, "session.fusion_completed", {
            "fusionId": turn.fusion_id, "commitId": commit_id, "turnId": turn.phase_id("turn"),
            "syntheticModel": "hydrafusion", "pattern": turn.pattern, "outcome": "completed",
            "finalSourcePhaseId": leg.phase_id, "finalSourceModel": leg.model, "followUpModel": None,
            "degradedReason": degraded_reason, "phaseCount": len(legs),
            "requestCount": sum(x.request_count for x in legs), "inputTokens": sum(x.input_tokens for x in legs),
            "outputTokens": sum(x.output_tokens for x in legs), "cachedTokens": sum(x.cache_read_tokens for x in legs),
            "cacheWriteTokens": sum(x.cache_write_tokens for x in legs),
            "totalNanoAiu": sum(x.nano_aiu for x in legs), "durationMs": done - turn.started_ms})
        expected = self._expect(turn, turn.pattern, "completed", done)
        expected.committed_phase_id, expected.degraded_reason = leg.phase_id, degraded_reason
        return expected

    def _answer(self, turn: _Turn, leg: ExpectedLeg, moments: list[tuple[int, int]], commit_id: str | None,
                *, tools: tuple[str, ...] = ("bash",)) -> None:
        """One assistant turn per model call, at (its message's time, its tool's end); every call
        but the last ran the next of ``tools`` (every second run fails)."""
        fusion = turn.fusion_block(leg, commitId=commit_id)
        for i, (at, tool_done) in enumerate(moments):
            turn_id = str(self._assistant_turns)
            self._assistant_turns += 1
            self._emit(at, "assistant.turn_start", {"turnId": turn_id, "interactionId": turn.interaction_id})
            call_id = f"call_{self._uuid().hex[:24]}"
            arguments = {"command": f"cd {self.cwd} && python -m pytest -q", "description": self._text("run tests")}
            name = tools[i % len(tools)] if tools else None
            tool_requests = [] if i == len(moments) - 1 or name is None else [
                {"toolCallId": call_id, "name": _tool_name(name), "arguments": arguments, "type": "function"}]
            message = {"messageId": str(self._uuid()), "content": self._text("The parser now accepts empty files."),
                       "toolRequests": tool_requests, "reasoningText": self._text("check the empty case first"),
                       "reasoningOpaque": None, "encryptedContent": None, "parentToolCallId": None,
                       "interactionId": turn.interaction_id}
            tool = {"toolCallId": call_id, "model": leg.model}
            if fusion:
                message["fusion"] = tool["fusion"] = fusion
            self._emit(at, "assistant.message", message)
            if tool_requests:
                server, _, mcp_tool = name.rpartition("/")
                self._emit(at, "tool.execution_start", tool | {
                    "toolName": _tool_name(name), "mcpServerName": server or None,
                    "mcpToolName": mcp_tool if server else None, "arguments": arguments})
                outcome = ({"success": False, "error": {"message": self._text("exit code 1"), "code": "failure"}}
                           if i % 2 else {"success": True, "result": {"content": self._text("14 passed in 0.8s")}})
                self._emit(tool_done, "tool.execution_complete", tool | outcome)
                turn.tools += 1
            self._emit(tool_done, "assistant.turn_end", {"turnId": turn_id})

    def _expect(self, turn: _Turn, pattern: str, outcome: str, end_ms: int) -> ExpectedTurn:
        legs = [leg for _, leg in sorted(turn.legs, key=lambda pair: pair[0])]  # file order
        expected = ExpectedTurn(self.session_id, turn.fusion_id, pattern, outcome,
                                sorted({leg.model for leg in legs}), legs, sum(leg.nano_aiu for leg in legs),
                                None, None, None, self._timestamp(end_ms),
                                kind="fallback" if turn.pattern is None else "fusion", calls=turn.calls,
                                tools=turn.tools, damaged_calls=turn.damaged_calls,
                                unknown_calls=sum(leg.unknown_calls for leg in legs),
                                policy_version=turn.router.get("policyVersion"),
                                plan_version=turn.router.get("planVersion"),
                                rule_id=turn.router.get("ruleId"))
        self.expected.append(expected)
        return expected

    # -- time, ids, text, output ----------------------------------------------------------

    def _after(self, moment: int, low: int, high: int) -> int:
        """A time ``low``..``high`` ms after ``moment``, often rounded up to a tenth or a
        hundredth of a second, so written timestamps end in zeros (``27.960Z``) too."""
        later = moment + self._rng.randint(low, high)
        step = self._rng.choice((100, 10, 1, 1))
        return later + (-later) % step

    def _timestamp(self, ms: int) -> str:
        """As CLI 1.0.102 writes every timestamp: UTC, always three fraction digits."""
        seconds, millis = divmod(ms, 1000)
        return (datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.")
                + f"{millis:03d}Z")

    @staticmethod
    def _ms(timestamp: str) -> int:
        """Unix milliseconds of a timestamp _timestamp wrote."""
        moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
        return round(moment.timestamp() * 1000)

    def _uuid(self) -> uuid.UUID:
        return uuid.UUID(int=self._rng.getrandbits(128), version=4)

    def _text(self, words: str) -> str:
        return f"{words} ({self.canary})"

    def _emit(self, at: int, event_type: str, data: dict) -> str:
        """Queue one event; returns its id."""
        # the id is drawn now, so when lines() is called cannot change later bytes
        event_id = str(self._uuid())
        self._pending.append((at, len(self._pending), event_type, data, event_id))
        self._clock = max(self._clock, at)
        return event_id

    def _flush(self) -> None:
        """Write pending events in time order: parallel legs interleave as they would live."""
        for at, _, event_type, data, event_id in sorted(self._pending, key=lambda event: event[:2]):
            self._lines.append(json.dumps({"type": event_type, "data": data, "id": event_id,
                                           "timestamp": self._timestamp(at), "parentId": self._last_id},
                                          separators=(",", ":"), ensure_ascii=False))
            self._last_id = event_id
        self._pending.clear()


def _token_details(input_tokens: int, output_tokens: int) -> dict:
    return {"input": {"tokenCount": input_tokens}, "output": {"tokenCount": output_tokens}}


def _model_metric(totals: dict[str, int], nano_aiu: int, number: type, **extra) -> dict:
    """One model's entry of a shutdown's metrics: the top level writes its cost and credits
    as integers, the accounting snapshot and the agents' metrics as floats (`number`)."""
    return {"requests": {"count": totals["request_count"],
                         "cost": number(totals["user_requests"] * PREMIUM_MULTIPLIER)},
            "usage": {"inputTokens": totals["input_tokens"], "outputTokens": totals["output_tokens"],
                      "cacheReadTokens": totals["cache_read_tokens"],
                      "cacheWriteTokens": totals["cache_write_tokens"]},
            "totalNanoAiu": number(nano_aiu), **extra,
            "tokenDetails": _token_details(totals["input_tokens"], totals["output_tokens"])}


def _tool_name(name: str) -> str:
    """The CLI names an MCP tool ``server-tool``; a built-in one by itself."""
    return name.replace("/", "-")


def _live(calls: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Each call's message when it ends; its tool runs until the next call begins."""
    return [(done, calls[i + 1][0] if i + 1 < len(calls) else done) for i, (_, done) in enumerate(calls)]


START = datetime(2026, 11, 4, 10, tzinfo=timezone.utc)


def every_pattern(session_id: str, start: datetime = START, *, unpriced: float = 0.0) -> SessionWriter:
    """One session with a turn of every kind the tailer must rebuild, in the CLI's order:
    single, cascade accepted and rejected, critique without and with a revision, a failed
    leg, a route failure, a turn that never completes, and one more after a resume;
    ``unpriced`` as SessionWriter's."""
    writer = SessionWriter(session_id, start, unpriced=unpriced)
    writer.single("gpt-5.6-sol")
    writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol")
    writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="reject",
                   repair_model="gpt-5.6-sol")
    writer.critique("gpt-5.6-sol", ["claude-sonnet-4.6"])
    writer.critique("gpt-5.6-sol", ["claude-sonnet-4.6", "gemini-3.1-pro"],
                    revision_model="gpt-5.6-sol")
    writer.degraded("mai-code-1.1-flash", "gpt-5.6-sol")
    writer.route_failed("gpt-5.6-mini")
    writer.incomplete("mai-code-1.1-flash", "gpt-5.6-sol")
    writer.resume()
    writer.single("claude-sonnet-4.6")
    writer.shutdown()
    return writer


def whole_session(session_id: str, start: datetime = START, *, totals_off_by: int = 0,
                  unpriced: float = 0.0) -> SessionWriter:
    """Fusion and ordinary turns in one session, as a user mixes them: every pattern, a
    `/model` switch to a fixed model and back, ordinary turns with built-in and MCP tools and
    one without tools, a usage checkpoint, a route failure, a shutdown, a resume, a turn whose
    usage records do not name their tools, and a second shutdown whose credits are
    ``totals_off_by`` nano-AIU off the calls'; ``unpriced`` as SessionWriter's."""
    writer = SessionWriter(session_id, start, unpriced=unpriced)
    writer.single("gpt-5.6-sol")
    writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol")
    writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="reject", repair_model="gpt-5.6-sol")
    writer.model_change("claude-sonnet-4.6")
    writer.ordinary("claude-sonnet-4.6", tools=("bash", "github-mcp-server/get_pull_request"), calls=3)
    writer.ordinary("claude-sonnet-4.6", tools=())
    writer.model_change("auto")
    writer.critique("gpt-5.6-sol", ["claude-sonnet-4.6"])
    writer.usage_checkpoint()
    writer.critique("gpt-5.6-sol", ["claude-sonnet-4.6", "gemini-3.1-pro"], revision_model="gpt-5.6-sol")
    writer.route_failed("gpt-5.6-mini")
    writer.shutdown()
    writer.resume()
    writer.ordinary("gpt-5.6-mini", calls=3)
    writer.single("claude-sonnet-4.6")
    writer.single("gpt-5.6-sol", tool_counts=False, request_count=3)
    writer.shutdown(nano_aiu_off_by=totals_off_by)
    return writer


def retuned(session_id: str, start: datetime = START) -> SessionWriter:
    """A session in which the remote router is retuned twice midway: three turns under
    policy 2026-09-01, a new policy 2026-11-05 (plan 3, one rule for every pattern) for four
    prompts (a route failure and an ordinary one among them), then 2026-11-05.1 for two."""
    writer = SessionWriter(session_id, start)
    writer.single("gpt-5.6-sol")
    writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol")
    writer.critique("gpt-5.6-sol", ["claude-sonnet-4.6"])
    writer.retune("2026-11-05", plan_version="3", rule_id="rule-2026-11-05")
    writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="reject", repair_model="gpt-5.6-sol")
    writer.route_failed("gpt-5.6-mini")
    writer.ordinary("claude-sonnet-4.6")
    writer.single("mai-code-1.1-flash")
    writer.retune("2026-11-05.1", plan_version="3")
    writer.cascade("mai-code-1.1-flash", "claude-sonnet-4.6")
    writer.single("gpt-5.6-sol")
    writer.shutdown()
    return writer


WHOLE_SESSION_KINDS = ("single", "accept", "reject", "ordinary", "ordinary_no_tools", "critique",
                       "revision", "route_failed", "resumed_ordinary", "resumed", "unplaced_tools")


EVERY_PATTERN_KINDS = ("single", "accept", "reject", "critique", "revision", "degraded",
                       "route_failed", "incomplete", "resumed")
