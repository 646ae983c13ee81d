"""Which fields each fusion event carries, needs and is read as.

The parser notes a field outside KNOWN_FIELDS as unknown and one of REQUIRED_FIELDS that
is absent as missing, for the drift counters; `doctor --cli` (tailer/copilot/schema_drift.py)
checks the CLI's own schema against all three tables before any log has a changed field.
"""

from __future__ import annotations

from .event_types import (
    COMMIT_STARTED, COMPLETED, HANDOFF, PHASE_COMPLETED, PHASE_FAILED, RESOLVED, ROUTE_FAILED,
    USAGE_RECORD,
)


# Every field each event may carry, metadata or content. A field outside these sets is
# reported as unknown so a CLI upgrade that changes the log shows up on the dashboard.
_CONTENT = {"content", "projectionMessage", "stagedTerminal", "message", "errorMessage"}
_LEG_FIELDS = {
    "fusionId", "phaseId", "phaseKind", "role", "conversationScope", "model",
    "reasoningEffort", "status", "verdict", "durationMs", "usage", "projectionMode",
    "reason", "degradedToPhaseId", "syntheticModel", "policy", "pattern", "turnId",
}
KNOWN_FIELDS = {
    RESOLVED: {
        "fusionId", "turnId", "contractVersion", "syntheticModel", "policy", "routeSource",
        "planVersion", "policyVersion", "modelUniverseVersion", "ruleId", "selectedRuleId",
        "ruleName", "hint", "pattern", "phasePlan", "primaryModel", "secondaryModel",
        "judgeModel", "repairModel", "critics", "fallbackModel", "followUpModel", "scores",
        "routingLatencyMs", "ruleIndex", "followUp",
    },
    PHASE_COMPLETED: _LEG_FIELDS | _CONTENT | {"endedWithBackgroundWork"},
    PHASE_FAILED: _LEG_FIELDS | _CONTENT,
    HANDOFF: {"fusionId", "sourcePhaseId", "targetPhaseId", "targetModel", "message"},
    COMMIT_STARTED: {
        "fusionId", "commitId", "sourcePhaseId", "sourceModel", "kind", "toolCallId",
    },
    COMPLETED: {
        "fusionId", "commitId", "turnId", "syntheticModel", "pattern", "outcome",
        "finalSourcePhaseId", "finalSourceModel", "followUpModel", "degradedReason",
        "phaseCount", "requestCount", "inputTokens", "outputTokens", "cachedTokens",
        "cacheWriteTokens", "totalNanoAiu", "durationMs", "policy", "awaitingBackgroundWork",
    },
    ROUTE_FAILED: {
        "attemptId", "syntheticModel", "policy", "fallbackModel", "reason",
        "routingLatencyMs", "errorMessage",
    },
}

# Fields without which a record still makes sense but is worse: reported as missing so a
# renamed field is noticed. The key fields (fusionId, attemptId, phaseId) are stricter: a
# record without one cannot be placed in a turn and the line is rejected.
REQUIRED_FIELDS = {
    RESOLVED: ("pattern", "routingLatencyMs"),
    PHASE_COMPLETED: ("phaseKind", "model", "status", "durationMs", "usage"),
    PHASE_FAILED: ("phaseKind", "model", "status", "durationMs"),
    HANDOFF: ("sourcePhaseId", "targetPhaseId"),
    COMMIT_STARTED: ("sourcePhaseId",),
    COMPLETED: ("pattern", "durationMs", "totalNanoAiu"),
    ROUTE_FAILED: ("reason",),
}

# What the parser reads each field it relies on as (a JSON Schema type; null always reads
# as absent). `doctor --cli` checks the CLI's own schema against it, so a field that is
# renamed or changes type is noticed before any log has it. Nested fields are dotted.
_READ_USAGE = dict.fromkeys(
    ("requestCount", "inputTokens", "outputTokens", "cachedTokens", "cacheWriteTokens",
     "totalNanoAiu"), "number")
_READ_LEG = {
    **dict.fromkeys(("fusionId", "phaseId", "phaseKind", "role", "conversationScope", "model",
                     "status"), "string"),
    "durationMs": "number", "usage": "object",
    **{f"usage.{name}": how for name, how in _READ_USAGE.items()},
}
_READ_CALL = {
    **{f"usage{name}": "object" for name in ("", ".copilotUsage", ".fusion", ".toolCounts")},
    **{f"usage.{name}": "string" for name in (
        "model", "finishReason", "initiator", "provider.id", "fusion.fusionId",
        "fusion.phaseId", "fusion.phaseKind", "aiCreditsStatus")},
    **{f"usage.{name}": "number" for name in (
        "inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens", "duration",
        "timeToFirstTokenMs", "copilotUsage.totalNanoAiu")},
}
READ_AS = {
    RESOLVED: {
        **dict.fromkeys(("fusionId", "pattern", "syntheticModel", "policy", "routeSource",
                         "policyVersion", "planVersion", "modelUniverseVersion", "ruleId",
                         "selectedRuleId", "repairModel"), "string"),
        "routingLatencyMs": "number",
    },
    PHASE_COMPLETED: {**_READ_LEG, "verdict": "string"},
    PHASE_FAILED: {**_READ_LEG, "reason": "string", "degradedToPhaseId": "string"},
    HANDOFF: dict.fromkeys(("fusionId", "sourcePhaseId", "targetPhaseId"), "string"),
    COMMIT_STARTED: dict.fromkeys(("fusionId", "sourcePhaseId", "sourceModel"), "string"),
    COMPLETED: {
        **dict.fromkeys(("fusionId", "pattern", "syntheticModel", "outcome",
                         "finalSourcePhaseId", "finalSourceModel", "degradedReason"), "string"),
        "durationMs": "number", **_READ_USAGE,
    },
    ROUTE_FAILED: {
        **dict.fromkeys(("attemptId", "syntheticModel", "policy", "fallbackModel", "reason"),
                        "string"),
        "routingLatencyMs": "number",
    },
    USAGE_RECORD: _READ_CALL,
}
