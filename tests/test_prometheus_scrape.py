"""The stack's Prometheus (tests/prom.py) scrapes the tailer while turns arrive.

The point: the dashboard's `increase(...[window] anchored)` equals the true totals,
including the first turn of a model or pattern that appears while the tailer runs. That
only holds because every new label set is exposed at 0 before its first increment: a
window that starts before a series exists counts from the series' first sample.
"""

from datetime import timedelta

import pytest

from prom import free_port, running_prometheus, single_value
from sessiongen import SessionWriter
from tailerproc import running_tailer
from sessiongen import START, every_pattern


def scraped_after(prom, instant_expr, previous):
    """Wait until Prometheus holds a sample newer than `previous` (a unix time)."""
    result = prom.wait_for(
        f"max(timestamp({instant_expr}))",
        lambda r: r and float(r[0]["value"][1]) > previous, timeout=60)
    return float(result[0]["value"][1])


def test_increase_counts_turns_that_arrive_while_running(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    port = free_port()
    with running_tailer(tmp_path, "--state-dir", str(state), "--otlp-endpoint", "none",
                        metrics_port=port) as tailer, \
            running_prometheus(tmp_path, [f"127.0.0.1:{port}"], scrape_interval="1s") as prom:
        prom.wait_for("up", lambda r: r and r[0]["value"][1] == "1", timeout=60)
        first = every_pattern("scrape-first")
        first.write(state)
        tailer.wait_for_log(r" fusion fusion-", count=len(first.expected))
        seen = scraped_after(prom, "hydrafusion_aiu_total", 0)
        seen = scraped_after(prom, "hydrafusion_aiu_total", seen)
        # A second session brings a model no earlier turn used, mid-run.
        second = SessionWriter("scrape-second", START + timedelta(hours=5))
        second.single("claude-opus-5")
        second.cascade("o5-mini", "claude-opus-5", verdict="reject", repair_model="claude-opus-5")
        second.write(state)
        tailer.wait_for_log(r" fusion fusion-", count=len(first.expected) + 2)
        for _ in range(3):
            seen = scraped_after(prom, "hydrafusion_aiu_total", seen)

        expected = first.expected + second.expected
        window = "[10m] anchored"

        def at_last_scrape(expr):
            return prom.query(expr, time=seen)

        by_model = {
            r["metric"]["model"]: float(r["value"][1])
            for r in at_last_scrape(f"sum by (model) (increase(hydrafusion_aiu_total{window}))")
        }
        truth = {}
        for turn in expected:
            for leg in turn.legs:
                truth[leg.model] = truth.get(leg.model, 0) + leg.nano_aiu / 1e9
        assert by_model.keys() == truth.keys()
        for model, credits in truth.items():
            assert by_model[model] == pytest.approx(credits, rel=1e-9), model

        turns = single_value(at_last_scrape(f"sum(increase(hydrafusion_turns_total{window}))"))
        assert turns == pytest.approx(len(expected))
        new_model_legs = single_value(at_last_scrape(
            f'sum(increase(hydrafusion_legs_total{{model="claude-opus-5"}}{window}))'))
        assert new_model_legs == 3
        rejected = single_value(at_last_scrape(
            f'sum(increase(hydrafusion_legs_total{{phase_kind="judge",verdict="reject"}}{window}))'))
        assert rejected == pytest.approx(2)
