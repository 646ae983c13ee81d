"""The health alerts of prometheus/rules/health.yml, tested by the stack's own promtool.

prometheus/tests/health_test.yml gives each alert counters that must make it fire, and
counters that must leave it quiet; `promtool test rules` evaluates the rules on them the
way Prometheus would. Unlike the credit rules (tests/test_rules.py), these use no
`anchored` window, so promtool can evaluate them.
"""

import yaml

from prom import REPO, promtool

RULES = REPO / "prometheus" / "rules" / "health.yml"
TESTS = REPO / "prometheus" / "tests" / "health_test.yml"


def test_promtool_passes_every_health_alert_case():
    result = promtool("test", "rules", TESTS, cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_health_alert_is_tested_firing_and_quiet():
    alerts = {rule["alert"] for group in yaml.safe_load(RULES.read_text())["groups"]
              for rule in group["rules"]}
    assert alerts == {"HydraFusionTailerDown", "HydraFusionSpanBacklogGrowing", "HydraFusionSpansDropped"}
    cases = [check for test in yaml.safe_load(TESTS.read_text())["tests"]
             for check in test["alert_rule_test"]]
    for alert in alerts:
        outcomes = {bool(check["exp_alerts"]) for check in cases if check["alertname"] == alert}
        assert outcomes == {True, False}, f"{alert}: tested only {'firing' if True in outcomes else 'quiet'}"


def test_the_tests_read_the_rule_file_prometheus_loads():
    config = yaml.safe_load((REPO / "prometheus" / "prometheus.yml").read_text())
    assert "rules/*.yml" in config["rule_files"]
    assert [(TESTS.parent / path).resolve() for path in yaml.safe_load(TESTS.read_text())["rule_files"]] == [RULES]
