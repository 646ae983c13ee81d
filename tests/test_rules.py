"""The rules of prometheus/rules, evaluated by the stack's Prometheus on known counters.

The rules count with `increase(x[1d] anchored)`, which `promtool test rules` could not
evaluate before 3.16 (its unit-test engine was built without the parser's feature flags),
so the cases run on the real server, as the stack does. One Prometheus holds
every case's counters, pushed by remote write, each case in a slot of its own in the past
days, far enough apart that no window or lookback reaches another. Each rule's expression
is evaluated by the query API at the case's evaluation time, which is what the rule manager
records at that moment; a recording rule that an expression names is replaced by its own
expression, the way it would have been recorded.
"""

import re
import time
from dataclasses import dataclass

import pytest
import yaml

from compose_config import render
from prom import REPO, push_history, running_prometheus
from tailer.outputs.remote_write import RemoteWriter

HOUR = 3600
SLOT = 3 * 24 * HOUR  # a case's counters span at most 2 days: a day apart from the next
RULE_FILE = REPO / "prometheus" / "rules" / "hydrafusion.yml"
ALERT = "HydraFusionCreditBudgetExceeded"
NO_BUDGET_RULE = f"{ALERT} without the budget rule"


def ramp(start: float, step: float, steps: int) -> list[float]:
    """start, start + step, ... (steps + 1 values): promtool's `start+stepxsteps`."""
    return [start + step * index for index in range(steps + 1)]


def turns(pattern, outcome, compound):
    return f'hydrafusion_turns_total{{pattern="{pattern}", outcome="{outcome}", compound="{compound}"}}'


def judged_turns(rejected):
    return f'hydrafusion_judged_turns_total{{pattern="cascade", rejected="{rejected}"}}'


def credits(phase_kind, committed, model="m"):
    return f'hydrafusion_aiu_total{{pattern="cascade", phase_kind="{phase_kind}", model="{model}", committed="{committed}"}}'


@dataclass
class Case:
    """Counters sampled every `interval` seconds from the slot's start, and what each
    expression must give `at` seconds after it (None: no value at all)."""
    name: str
    series: dict[str, list[float]]
    expected: dict[str, float | None]
    interval: int = HOUR
    at: int = 36 * HOUR


# The headline case: 72 single and 24 cascade turns a day, and 24 route failures the
# compound rate leaves out (24 / 96); 72 judged turns whose draft was kept, 48 whose draft a
# judge sent back (48 / 120); 96 credits a day on answering legs, 24 on the rest (24 / 120).
CASES = [
    Case("headline ratios", {
        turns("single", "completed", "false"): ramp(0, 3, 48),
        turns("cascade", "completed", "true"): ramp(0, 1, 48),
        turns("unknown", "route_failed", "false"): ramp(0, 1, 48),
        judged_turns("false"): ramp(0, 3, 48),
        judged_turns("true"): ramp(0, 2, 48),
        credits("primary", "true"): ramp(0, 4, 48),
        credits("judge", "false"): ramp(0, 1, 48),
    }, {
        "hydrafusion:compound_rate:ratio1d": 0.25,
        "hydrafusion:rejection_rate:ratio1d": 0.4,
        "hydrafusion:review_share:ratio1d": 0.2,
    }),
    # Review credits change only in the window's first hour: left-open ranges put the
    # sample at the window's start outside, so increase() without `anchored` sees 0 there.
    Case("a change in the window's first step is counted", {
        credits("primary", "true"): ramp(0, 4, 48),
        credits("judge", "false"): [0.0] * 13 + [24.0] * 36,
    }, {"hydrafusion:review_share:ratio1d": 0.2}),
    Case("ratios are 0 while their numerator has no series", {
        turns("single", "completed", "false"): ramp(0, 3, 48),
        judged_turns("false"): ramp(0, 1, 48),
        credits("primary", "true"): ramp(0, 4, 48),
    }, {
        "hydrafusion:compound_rate:ratio1d": 0.0,
        "hydrafusion:rejection_rate:ratio1d": 0.0,
        "hydrafusion:review_share:ratio1d": 0.0,
    }),
    Case("ratios have no value when nothing was divided", {
        turns("unknown", "route_failed", "false"): ramp(0, 1, 48),
        credits("primary", "true"): [0.0] * 49,
    }, {
        "hydrafusion:compound_rate:ratio1d": None,
        "hydrafusion:rejection_rate:ratio1d": None,
        "hydrafusion:review_share:ratio1d": None,
    }),
    # The budget alert, against the budget rule compose writes (300 by default): one credit
    # every 2 minutes is 720 a day, 0.4 is 288.
    Case("the budget alert fires above the budget", {credits("primary", "true"): ramp(0, 1, 780)},
         {ALERT: 720.0}, interval=120, at=25 * HOUR),
    Case("the budget alert stays quiet below the budget", {credits("primary", "true"): ramp(0, 0.4, 780)},
         {ALERT: None}, interval=120, at=25 * HOUR),
    Case("the budget alert stays quiet without a budget rule", {credits("primary", "true"): ramp(0, 1, 780)},
         {NO_BUDGET_RULE: None}, interval=120, at=25 * HOUR),
]


def expressions(tmp_path) -> dict[str, str]:
    """{record or alert name: expression as recorded at one instant} for our rules with
    the budget rule compose writes, and the alert as it is without that budget rule."""
    budget = render(None, tmp_path)["configs"]["credit-budget"]["content"]
    groups = yaml.safe_load(RULE_FILE.read_text())["groups"] + yaml.safe_load(budget)["groups"]
    rules = {rule.get("record") or rule["alert"]: rule["expr"].strip()
             for group in groups for rule in group["rules"]}
    recorded = {name: expr for name, expr in rules.items() if ":" in name}
    return {**{name: inlined(expr, recorded) for name, expr in rules.items()}, NO_BUDGET_RULE: rules[ALERT]}


def inlined(expr: str, recorded: dict[str, str]) -> str:
    """expr with every recording rule it names replaced by that rule's expression."""
    for name, rule_expr in recorded.items():
        expr = re.sub(rf"(?<![\w:]){re.escape(name)}(?![\w:])", f"({rule_expr})", expr)
    return expr


def parse_series(text: str) -> list[tuple[str, str]]:
    name, labels = re.fullmatch(r"(\w+)\{(.*)\}", text).groups()
    return [("__name__", name), *sorted(re.findall(r'(\w+)="([^"]*)"', labels))]


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    """{case name: {expression name: its value, or None}}."""
    tmp = tmp_path_factory.mktemp("rules")
    exprs = expressions(tmp)
    today = int(time.time()) // 86400 * 86400
    starts = {case.name: today - (index + 1) * SLOT for index, case in enumerate(CASES)}
    with running_prometheus(
        tmp, [], extra_config={"storage": {"tsdb": {"out_of_order_time_window": "31d"}}},
        extra_flags=["--web.enable-remote-write-receiver", "--storage.tsdb.retention.time=90d"],
    ) as prom:
        push_history(RemoteWriter(f"{prom.url}/api/v1/write"), [
            (parse_series(series), [((starts[case.name] + index * case.interval) * 1000, value)
                                    for index, value in enumerate(values)])
            for case in CASES for series, values in case.series.items()])
        results = {}
        for case in CASES:
            results[case.name] = {}
            for name in case.expected:
                answer = prom.query(exprs[name], time=starts[case.name] + case.at)
                results[case.name][name] = float(answer[0]["value"][1]) if answer else None
    return results


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_rule(evaluated, case):
    assert evaluated[case.name] == pytest.approx(case.expected)
