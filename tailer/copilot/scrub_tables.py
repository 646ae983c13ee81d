"""What `python -m tailer scrub` keeps of each event (tailer/commands/scrub.py explains why).

An allowlist: a field not named here is dropped, and a string is kept only as a code of
the kind named. Beside the fields the parser reads, so a new field is allowed in one place.
"""

from __future__ import annotations

from ..codes import ENUM, MODEL, TOOL, VERSION, WORDS, CodeKind
from .event_types import (
    COMMIT_STARTED, COMPLETED, HANDOFF, PHASE_COMPLETED, PHASE_FAILED, RESOLVED, ROUTE_FAILED,
    SESSION_RESUME, SESSION_START, SHUTDOWN, TOOL_COMPLETED, TOOL_STARTED, USAGE_CHECKPOINT,
    USAGE_RECORD,
)


class Kept:
    """How the scrubber keeps a field it is allowed to keep; every other field is dropped.

    A CodeKind (tailer/codes.py) in place of one of these keeps a number or a boolean as
    written and a string only when it is a code of that kind: any other string becomes
    `other`, so free text in a field that should hold an enum or a name is never shared.
    """

    VALUE = "value"  # a number or a boolean as written (a count, a flag); never a string
    TIMESTAMP = "timestamp"  # as written; the demo moves these to recent times
    EPOCH_MS = "epoch_ms"  # a time as a number of unix milliseconds; moved as a TIMESTAMP is
    EVENT_ID = "event_id"  # a fresh uuid, the same one for every mention of the old id
    SESSION_ID = "session_id"  # likewise; the session folder is renamed to match
    FUSION_ID = "fusion_id"  # `fusion-<uuid>`; an id written `<fusionId>:<suffix>` keeps its suffix
    TOOL_CALL_ID = "tool_call_id"
    # As a field name: every entry of a map keyed by model names, or by tool names. An entry
    # whose name is no code of that kind is dropped.
    ANY_MODEL = "*model"
    ANY_TOOL = "*tool"
    # As a field name: every entry of a map keyed by session ids, each name replaced as a
    # SESSION_ID is.
    ANY_SESSION = "*session"


# The kind of name each map marker stands for.
NAMES_OF = {Kept.ANY_MODEL: MODEL, Kept.ANY_TOOL: TOOL}


def _values(*names: str) -> dict[str, str]:
    return dict.fromkeys(names, Kept.VALUE)


def _codes(kind: CodeKind, *names: str) -> dict[str, CodeKind]:
    return dict.fromkeys(names, kind)


# A dict lists the fields kept of a nested object; a list holding one dict, those of each
# object in a list. Event types not named keep only the envelope and `data: {}`.
SCRUB_ENVELOPE = {
    "type": ENUM, "id": Kept.EVENT_ID, "timestamp": Kept.TIMESTAMP,
    "parentId": Kept.EVENT_ID,
}
_SCRUB_USAGE = _values(
    "requestCount", "inputTokens", "outputTokens", "cachedTokens", "cacheWriteTokens",
    "totalNanoAiu",
)
_SCRUB_LEG = {
    **_codes(ENUM, "phaseKind", "role", "conversationScope", "reasoningEffort", "status",
             "verdict", "projectionMode", "reason", "policy", "pattern"),
    **_codes(MODEL, "model", "syntheticModel"),
    **_values("durationMs"),
    "fusionId": Kept.FUSION_ID, "phaseId": Kept.FUSION_ID, "turnId": Kept.FUSION_ID,
    "degradedToPhaseId": Kept.FUSION_ID, "usage": _SCRUB_USAGE,
}
_SCRUB_CALL_FUSION = {
    **_codes(ENUM, "policy", "pattern", "phaseKind", "role", "conversationScope"),
    **_codes(MODEL, "syntheticModel", "sourceModel"),
    "fusionId": Kept.FUSION_ID, "phaseId": Kept.FUSION_ID, "commitId": Kept.FUSION_ID,
}
_SCRUB_TOKEN_DETAILS = {kind: {"tokenCount": Kept.VALUE} for kind in ("input", "output")}
_SCRUB_MODEL_METRIC = {
    "requests": _values("count", "cost"),
    "usage": _values("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens",
                     "reasoningTokens"),
    "totalNanoAiu": Kept.VALUE, "aiCreditsStatus": ENUM, "cacheExpiresAt": Kept.TIMESTAMP,
    "tokenDetails": _SCRUB_TOKEN_DETAILS,
}
# What a shutdown and its accounting snapshot both total: numbers, model names and codes.
# Of the code changes only the counts: `filesModified` keeps no entry, since [{}] keeps the
# objects of a list and its entries are paths.
_SCRUB_SESSION_TOTALS = {
    **_values("totalPremiumRequests", "totalPremiumRequestCost", "totalUserRequests",
              "totalNanoAiu", "totalApiDurationMs", "lastCallInputTokens", "lastCallOutputTokens"),
    "aiCreditsStatus": ENUM, "currentModel": MODEL, "tokenDetails": _SCRUB_TOKEN_DETAILS,
    "codeChanges": {**_values("linesAdded", "linesRemoved", "filesModifiedCount"),
                    "filesModified": [{}]},
    "modelMetrics": {Kept.ANY_MODEL: _SCRUB_MODEL_METRIC},
    # The main conversation's; a sub-agent's key may be a name someone chose.
    "agentMetrics": {"main": {**_values("totalApiDurationMs", "totalNanoAiu"),
                              "modelMetrics": {Kept.ANY_MODEL: _SCRUB_MODEL_METRIC}}},
    "providerModelMetrics": [{"provider": {"id": TOOL, "label": WORDS, "kind": ENUM},
                              "modelId": MODEL, "modelDisplayName": MODEL,
                              "metrics": _SCRUB_MODEL_METRIC}],
}
SCRUB_DATA = {
    RESOLVED: {
        **_codes(VERSION, "contractVersion", "planVersion", "policyVersion",
                 "modelUniverseVersion", "ruleId", "selectedRuleId"),
        **_codes(ENUM, "policy", "routeSource", "pattern"),
        **_codes(MODEL, "syntheticModel", "primaryModel", "secondaryModel", "judgeModel",
                 "repairModel", "fallbackModel", "followUpModel"),
        **_values("routingLatencyMs"),
        "fusionId": Kept.FUSION_ID, "turnId": Kept.FUSION_ID,
        "phasePlan": [{**_codes(ENUM, "kind", "role", "scope"), **_values("conditional")}],
        "critics": [{"phaseId": Kept.FUSION_ID, "model": MODEL, "reasoningEffort": ENUM}],
    },
    PHASE_COMPLETED: _SCRUB_LEG,
    PHASE_FAILED: _SCRUB_LEG,
    HANDOFF: {
        "fusionId": Kept.FUSION_ID, "sourcePhaseId": Kept.FUSION_ID,
        "targetPhaseId": Kept.FUSION_ID, "targetModel": MODEL,
    },
    COMMIT_STARTED: {
        "sourceModel": MODEL, "kind": ENUM,
        "fusionId": Kept.FUSION_ID, "commitId": Kept.FUSION_ID,
        "sourcePhaseId": Kept.FUSION_ID, "toolCallId": Kept.TOOL_CALL_ID,
    },
    COMPLETED: {
        **_codes(ENUM, "pattern", "outcome", "degradedReason", "policy"),
        **_codes(MODEL, "syntheticModel", "finalSourceModel", "followUpModel"),
        **_values(
            "phaseCount", "requestCount", "inputTokens", "outputTokens", "cachedTokens",
            "cacheWriteTokens", "totalNanoAiu", "durationMs",
        ),
        "fusionId": Kept.FUSION_ID, "commitId": Kept.FUSION_ID, "turnId": Kept.FUSION_ID,
        "finalSourcePhaseId": Kept.FUSION_ID,
    },
    ROUTE_FAILED: {
        **_codes(ENUM, "policy", "reason"),
        **_codes(MODEL, "syntheticModel", "fallbackModel"),
        **_values("routingLatencyMs"),
        "attemptId": Kept.FUSION_ID,
    },
    "session.fusion_change_checkpoint": {
        "fusionId": Kept.FUSION_ID, "codeChanges": _values("linesAdded", "linesRemoved"),
    },
    SESSION_START: {
        **_codes(VERSION, "version", "copilotVersion"),
        "producer": ENUM, "selectedModel": MODEL,
        "sessionId": Kept.SESSION_ID, "startTime": Kept.TIMESTAMP,
    },
    SESSION_RESUME: {"resumeTime": Kept.TIMESTAMP, "eventCount": Kept.VALUE},
    SHUTDOWN: {
        **_SCRUB_SESSION_TOTALS,
        "shutdownType": ENUM,
        **_values("eventsFileSizeBytes", "currentTokens", "systemTokens", "conversationTokens",
                  "toolDefinitionsTokens"),
        "sessionStartTime": Kept.EPOCH_MS,
        "usageAccountingWatermarks": {Kept.ANY_SESSION: Kept.VALUE},
        "accountingSnapshot": {**_SCRUB_SESSION_TOTALS, "sessionStartTime": Kept.TIMESTAMP},
    },
    USAGE_CHECKPOINT: _values("totalNanoAiu"),
    "session.model_change": _codes(MODEL, "newModel", "previousModel"),
    TOOL_STARTED: {
        **_codes(TOOL, "toolName", "mcpServerName", "mcpToolName"),
        "model": MODEL,
        "toolCallId": Kept.TOOL_CALL_ID, "fusion": _SCRUB_CALL_FUSION,
    },
    TOOL_COMPLETED: {
        "success": Kept.VALUE, "model": MODEL,
        "toolCallId": Kept.TOOL_CALL_ID, "fusion": _SCRUB_CALL_FUSION,
    },
    USAGE_RECORD: {"usage": {
        **_values(
            "inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens",
            "cost", "duration", "timeToFirstTokenMs", "isAuto", "isByok",
        ),
        **_codes(ENUM, "initiator", "finishReason", "reasoningEffort", "aiCreditsStatus"),
        "model": MODEL,
        "provider": {"id": TOOL, "kind": ENUM, "label": WORDS},
        "copilotUsage": _values("totalNanoAiu"),
        "toolCounts": {Kept.ANY_TOOL: Kept.VALUE},
        "fusion": _SCRUB_CALL_FUSION,
    }},
    "abort": {"reason": ENUM},
}
