"""The scenarios the real CLI is driven through, and what the tailer must make of each.

A scenario is one CLI session: one prompt, or several (a resumed session), each with the
routing plan the fake backend answers with. What the tailer must find is written here
beside it, as the turn a reader of copilot-events.md expects: pattern, legs in log order
(phase kind, model, verdict), the committed leg's kind, the outcome. These expectations
were checked by hand against the events.jsonl the CLI wrote (see docs/COMPATIBILITY.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from .backend import NO_FUSION, Plan, Step

SOL, LUNA, OPUS, SONNET, FLASH = (
    "gpt-5.6-sol", "gpt-5.6-luna", "claude-opus-5", "claude-sonnet-5", "mai-code-1.1-flash")
TERRA = "gpt-5.6-terra"


@dataclass(frozen=True)
class Prompt:
    """One `copilot -p` run: the plan the fake answers with, and how the CLI is asked."""

    plan: Plan
    tier: str | None = "hydrafusion"  # the auto tier; None: an ordinary model (`--model`)
    model: str = SOL  # the model of an ordinary prompt


@dataclass(frozen=True)
class Leg:
    kind: str
    model: str
    verdict: str | None = None
    status: str = "succeeded"


@dataclass(frozen=True)
class Expected:
    """One fusion turn as the tailer must rebuild it."""

    pattern: str
    legs: tuple[Leg, ...]
    committed: str  # the phase kind of the leg whose answer the user got
    outcome: str = "completed"
    synthetic_model: str = "hydrafusion"
    policy: str = "standard"
    degraded_reason: str | None = None
    route_failure_reason: str | None = None


@dataclass(frozen=True)
class Scenario:
    name: str
    prompts: tuple[Prompt, ...]
    turns: tuple[Expected, ...]  # the fusion turns (and route failures), in order
    tools: int = 0  # bash calls the committed answers made (the log's tool.execution_start)
    ordinary: int = 0  # turns answered without fusion

    @property
    def unpriced(self) -> frozenset[str]:
        """The models the fake answers without `copilot_usage` in this scenario: the CLI
        marks their calls' credits unavailable."""
        return frozenset(model for prompt in self.prompts for model in prompt.plan.unpriced)


CASCADE = (Step("draft", FLASH), Step("escalation", SOL), Step("repair", SONNET))
CRITIQUE = (Step("draft", SOL), Step("critic", OPUS), Step("revision", SOL))


def _single(model: str) -> Expected:
    return Expected("single", (Leg("primary", model),), "primary")


SCENARIOS = (
    Scenario("plain", (Prompt(NO_FUSION, tier=None),), (), ordinary=1),
    Scenario("plain_tool", (Prompt(Plan(None, tool_model=SOL), tier=None),), (), tools=1,
             ordinary=1),
    Scenario("single", (Prompt(Plan("solo", (Step("generation", SOL),))),), (_single(SOL),)),
    Scenario(
        "resumed",
        (Prompt(Plan("solo", (Step("generation", SOL),))),
         Prompt(Plan("solo", (Step("generation", SONNET),)))),
        (_single(SOL), _single(SONNET)),
    ),
    Scenario(
        "max",
        (Prompt(Plan("cascade", (Step("draft", SOL), Step("escalation", OPUS),
                                 Step("repair", OPUS))), tier="hydrafusion-max"),),
        (Expected("cascade", (Leg("primary", SOL), Leg("judge", OPUS, "accept")), "primary",
                  synthetic_model="hydrafusion-max", policy="max"),),
    ),
    Scenario(
        "cascade_accept", (Prompt(Plan("cascade", CASCADE)),),
        (Expected("cascade", (Leg("primary", FLASH), Leg("judge", SOL, "accept")), "primary"),),
    ),
    Scenario(
        "cascade_repair_tool",
        (Prompt(Plan("cascade", CASCADE, judge_score=2, tool_model=SONNET)),),
        (Expected("cascade", (Leg("primary", FLASH), Leg("judge", SOL, "reject"),
                              Leg("repair", SONNET)), "repair"),),
        tools=1,
    ),
    Scenario(
        "cascade_judge_failed", (Prompt(Plan("cascade", CASCADE, judge_status=500)),),
        (Expected("cascade", (Leg("primary", FLASH), Leg("judge", SOL, status="failed"),
                              Leg("repair", SONNET)), "repair",
                  outcome="degraded", degraded_reason="judge_call_failed"),),
    ),
    Scenario(
        "critique_approve", (Prompt(Plan("critique", CRITIQUE)),),
        (Expected("critique", (Leg("draft", SOL), Leg("critic", OPUS)), "draft"),),
    ),
    Scenario(
        "critique_revise", (Prompt(Plan("critique", CRITIQUE, critic_assessment="revise")),),
        (Expected("critique", (Leg("draft", SOL), Leg("critic", OPUS), Leg("revision", SOL)),
                  "revision"),),
    ),
    Scenario(
        "route_failed", (Prompt(Plan("solo", (Step("generation", SOL),), route_status=503)),),
        (Expected("fallback", (Leg("primary", LUNA),), "primary", outcome="route_failed",
                  route_failure_reason="transport"),),
    ),
    # No credits for some models' calls (the API's answer carries no `copilot_usage`): a
    # cascade whose judge's credits are unknown, a single turn and an ordinary prompt whose
    # every call's are.
    Scenario(
        "unpriced",
        (Prompt(Plan("cascade", CASCADE, judge_score=2, unpriced=(SOL,))),
         Prompt(Plan("solo", (Step("generation", TERRA),), unpriced=(TERRA,))),
         Prompt(Plan(None, unpriced=(SOL,)), tier=None)),
        (Expected("cascade", (Leg("primary", FLASH), Leg("judge", SOL, "reject"),
                              Leg("repair", SONNET)), "repair"),
         _single(TERRA)),
        ordinary=1,
    ),
)

BY_NAME = {scenario.name: scenario for scenario in SCENARIOS}
