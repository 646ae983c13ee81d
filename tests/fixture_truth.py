"""What the demo fixtures hold, read with plain `json` and none of the tailer's code.

Tests compare the tailer, Prometheus and the dashboard against these figures, so they are
computed here from the files alone, following /work/shared/reference/copilot-events.md:
a turn is every fusion event of one fusionId (a route failure's attemptId without
`:route`); its answer is the leg the rollup (or the commit) names, or a route failure's
fallback leg; a turn without a rollup or a route failure never completed.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"


@dataclass
class Leg:
    phase_id: str
    kind: str
    model: str
    status: str
    verdict: str | None
    nano_aiu: int
    input_tokens: int
    cached_tokens: int
    request_count: int = 0
    committed: bool = False


@dataclass
class Turn:
    session_id: str
    fusion_id: str
    pattern: str = "unknown"
    outcome: str = "incomplete"
    degraded_reason: str | None = None
    end_timestamp: str = ""
    legs: list[Leg] = field(default_factory=list)
    handoff_targets: list[str] = field(default_factory=list)

    @property
    def models(self) -> set[str]:
        return {leg.model for leg in self.legs}

    def kinds(self) -> list[str]:
        return [leg.kind for leg in self.legs]


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def fixture_turns(fixtures: Path = FIXTURES) -> list[Turn]:
    """Every turn of every session under `fixtures`, in file order per session."""
    turns = []
    for folder in sorted(fixtures.iterdir()):
        turns += session_turns(folder.name, read_lines(folder / "events.jsonl"))
    return turns


def session_turns(session_id: str, lines: list[dict]) -> list[Turn]:
    turns: dict[str, Turn] = {}
    commits: dict[str, str] = {}
    for line in lines:
        kind, data = line["type"], line["data"]
        if kind == "session.fusion_route_failed":
            fusion_id = data["attemptId"].removesuffix(":route")
        elif kind.startswith(("session.fusion_", "assistant.fusion_")):
            fusion_id = data["fusionId"]
        else:
            continue
        turn = turns.setdefault(fusion_id, Turn(session_id, fusion_id))
        turn.end_timestamp = line["timestamp"]
        if kind == "session.fusion_resolved":
            turn.pattern = data["pattern"]
        elif kind == "session.fusion_route_failed":
            turn.outcome, turn.pattern = "route_failed", "fallback"  # the log names no pattern
        elif kind in ("assistant.fusion_phase_completed", "assistant.fusion_phase_failed"):
            usage = data["usage"]
            turn.legs.append(Leg(data["phaseId"], data["phaseKind"], data["model"], data["status"],
                                 data.get("verdict"), usage["totalNanoAiu"], usage["inputTokens"],
                                 usage["cachedTokens"], usage["requestCount"]))
        elif kind == "session.fusion_handoff":
            turn.handoff_targets.append(data["targetPhaseId"])
        elif kind == "session.fusion_commit_started":
            commits[fusion_id] = data["sourcePhaseId"]
        elif kind == "session.fusion_completed":
            turn.outcome = data["outcome"]
            turn.degraded_reason = data["degradedReason"]
            commits[fusion_id] = data["finalSourcePhaseId"]
    for turn in turns.values():
        answer = turn.legs[-1].phase_id if turn.outcome == "route_failed" else commits.get(turn.fusion_id)
        for leg in turn.legs:
            leg.committed = leg.phase_id == answer
    return list(turns.values())


def case_of(turn: Turn) -> str:
    """The dashboard-relevant kind of turn this is."""
    if turn.outcome == "route_failed":
        return "route failure"
    if turn.outcome == "incomplete":
        return "never completes"
    if turn.degraded_reason and any(leg.status == "failed" for leg in turn.legs):
        return "failed leg, degraded"
    verdicts = [leg.verdict for leg in turn.legs if leg.kind == "judge"]
    committed = next(leg.kind for leg in turn.legs if leg.committed)
    if turn.pattern == "cascade" and verdicts == ["accept"] and committed == "primary":
        return "cascade accepted"
    if turn.pattern == "cascade" and verdicts == ["reject"] and committed == "repair":
        return "cascade rejected, repaired"
    if turn.pattern == "critique" and committed == "draft" and "revision" not in turn.kinds():
        return "critique"
    if turn.pattern == "critique" and committed == "revision" and turn.handoff_targets:
        return "critique with revision"
    if turn.pattern == "single" and turn.kinds() == ["primary"]:
        return "single"
    return "other"


CASES = ("single", "cascade accepted", "cascade rejected, repaired", "critique",
         "critique with revision", "failed leg, degraded", "route failure", "never completes")


@dataclass
class OrdinaryTurn:
    """A prompt answered without fusion: its model calls and tool calls."""
    session_id: str
    prompt_id: str
    calls: int = 0
    tools: int = 0
    tool_names: list[str] = field(default_factory=list)
    nano_aiu: int = 0


def ordinary_turns(fixtures: Path = FIXTURES) -> list[OrdinaryTurn]:
    """Every prompt of the fixtures that no routing decision came before: a fusion turn's own
    user.message is written right after its resolved (or route_failed)."""
    turns = []
    for folder in sorted(fixtures.iterdir()):
        routed, current = False, None
        for line in read_lines(folder / "events.jsonl"):
            kind, data = line["type"], line["data"]
            if kind in ("session.fusion_resolved", "session.fusion_route_failed"):
                routed, current = True, None
            elif kind == "user.message":
                current = None if routed else OrdinaryTurn(folder.name, line["id"])
                turns += [current] if current else []
                routed = False
            elif current and kind == "session.usage_record" and not data["usage"].get("fusion"):
                current.calls += 1
                current.nano_aiu += data["usage"]["copilotUsage"]["totalNanoAiu"]
            elif current and kind == "tool.execution_start" and not data.get("fusion"):
                current.tools += 1
                current.tool_names.append(data["toolName"])
    return turns


def tool_calls(fixtures: Path = FIXTURES) -> int:
    return sum(len([line for line in read_lines(folder / "events.jsonl")
                    if line["type"] == "tool.execution_start"]) for folder in sorted(fixtures.iterdir()))


TOKEN_KINDS = ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens")


def call_tokens(fixtures: Path = FIXTURES) -> dict[str, dict[str, dict[str, int]]]:
    """Session id -> model -> the sum of each token kind over its calls' usage records (the
    CLI's kinds: its input tokens include the cache reads and writes)."""
    sessions = {}
    for folder in sorted(fixtures.iterdir()):
        models = sessions[folder.name] = {}
        for line in read_lines(folder / "events.jsonl"):
            if line["type"] == "session.usage_record":
                usage = line["data"]["usage"]
                sums = models.setdefault(usage["model"], dict.fromkeys(TOKEN_KINDS, 0))
                for kind in TOKEN_KINDS:
                    sums[kind] += usage[kind]
    return sessions


def model_calls(fixtures: Path = FIXTURES) -> int:
    return sum(len([line for line in read_lines(folder / "events.jsonl")
                    if line["type"] == "session.usage_record"]) for folder in sorted(fixtures.iterdir()))
