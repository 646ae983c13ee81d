"""A month of heavy use, read at start-up into a real Prometheus: every figure exact.

5,000+ turns in 220 sessions over 30 days (every pattern and failure, ordinary prompts,
turns a few seconds apart) are read by the tailer at start-up and pushed as history. For
every day, for the last 6 hours and for a 90-minute window that starts inside a burst,
turns, credits, compound rate, judge rejection rate and review share read from Prometheus
equal the truth computed from the files; so do the dashboard's own headline panels over
each day, and its time series, a day a point. A window's figure is the difference of the
counters' values at its two ends (how the dashboard reads it, docs/METRICS.md), so the
history must be exact at any instant, not only on a grid. Then the same month again, with
the tailer killed (-9) twice during its start-up reading: the same figures.
"""

import random
import time
from datetime import datetime, timedelta, timezone

import pytest

from dashboard_truth import (DAY, assert_series_equal, headline_truth, headlines, same_figures,
                             series_by_day, series_truth, turn_end)
from prom import free_port, running_prometheus, single_value
from sessiongen import SessionWriter
from tailerproc import running_tailer

DAYS = 30
SESSIONS = 220
MODELS = ("gpt-5.6-sol", "mai-code-1.1-flash", "claude-sonnet-5", "gpt-5.6-luna")
NOW = datetime.now(timezone.utc)
FIRST_DAY = (NOW - timedelta(days=DAYS)).replace(hour=0, minute=0, second=0, microsecond=0)


def write_month(state) -> list:
    """The month's sessions in `state`; returns every expected turn."""
    rng = random.Random(2026_11)
    expected = []
    for number in range(SESSIONS):
        start = FIRST_DAY + timedelta(seconds=rng.uniform(3600, (DAYS - 1) * 86400))
        writer = SessionWriter(f"month-{number:03d}", start)
        for _ in range(rng.randint(20, 26)):
            a, b, c = rng.sample(MODELS, 3)
            roll = rng.random()
            if roll < 0.25:
                writer.single(a)
            elif roll < 0.45:
                writer.cascade(a, b, verdict="reject" if rng.random() < 0.4 else "accept",
                               repair_model=c)
            elif roll < 0.65:
                writer.critique(a, [b, c][:rng.randint(1, 2)],
                                revision_model=a if rng.random() < 0.5 else None)
            elif roll < 0.72:
                writer.degraded(a, b)
            elif roll < 0.77:
                writer.route_failed(c)
            elif roll < 0.80:
                writer.incomplete(a, b)  # finished as incomplete by the next turn
                writer.single(b)
            else:
                writer.ordinary(a, tools=("bash",) if rng.random() < 0.5 else ())
        writer.single(a)  # no session ends on a turn left open
        writer.write(state)
        expected += writer.expected
    return expected


def truth(turns, start_ms: int, end: int) -> dict:
    """The window's figures from the files: turns that ended in (start, end]."""
    inside = [t for t in turns if t.kind != "ordinary" and start_ms < t.end_ms <= end]
    legs = [leg for t in inside for leg in t.legs]
    judges = [leg for leg in legs if leg.phase_kind == "judge"]
    credits = sum(leg.nano_aiu for leg in legs) / 1e9
    return {
        "turns": len(inside),
        "credits": credits,
        "compound": sum(len(set(t.models)) > 1 for t in inside),
        "judged": len(judges),
        "rejected": sum(leg.verdict == "reject" for leg in judges),
        "review": sum(leg.nano_aiu for leg in legs if not leg.committed) / 1e9,
    }


COUNTERS = {
    "turns": "hydrafusion_turns_total",
    "credits": "hydrafusion_aiu_total",
    "compound": 'hydrafusion_turns_total{compound="true"}',
    "judged": 'hydrafusion_legs_total{phase_kind="judge"}',
    "rejected": 'hydrafusion_legs_total{phase_kind="judge",verdict="reject"}',
    "review": 'hydrafusion_aiu_total{committed="false"}',
}


def counted(prom, start_ms: int, end: int) -> dict:
    """The same figures from Prometheus: each counter at the window's end minus at its start."""
    def at(expr, ms):
        return single_value(prom.query(f"sum({expr})", time=ms / 1000)) or 0.0

    return {name: at(expr, end) - at(expr, start_ms) for name, expr in COUNTERS.items()}


def windows(turns) -> list[tuple[str, int, int]]:
    day_ms = 86_400_000
    first = round(FIRST_DAY.timestamp() * 1000)
    now = round(time.time() * 1000)
    found = [(f"day {day}", first + day * day_ms, min(first + (day + 1) * day_ms, now))
             for day in range(DAYS + 1)]
    ends = sorted(t.end_ms for t in turns)
    found.append(("last 6 hours", now - 6 * 3_600_000, now))
    # A burst: the densest minute of the month; the window starts inside it.
    busiest = max(range(len(ends) - 5), key=lambda i: -(ends[i + 5] - ends[i]))
    inside = (ends[busiest + 2] + ends[busiest + 3]) // 2
    found.append(("90 minutes from inside a burst", inside, inside + 90 * 60_000))
    found.append(("any instant: a turn's own end", ends[len(ends) // 2] - 1, ends[len(ends) // 2]))
    return found


def check_month(prom, turns) -> None:
    for name, start, end in windows(turns):
        want, got = truth(turns, start, end), counted(prom, start, end)
        for figure in ("turns", "compound", "judged", "rejected"):
            assert got[figure] == want[figure], (name, figure)
        for figure in ("credits", "review"):
            assert got[figure] == pytest.approx(want[figure], rel=1e-9, abs=1e-9), (name, figure)


def check_dashboard(prom, turns) -> None:
    """The dashboard's own queries: its headline panels over each day, and its time series
    a day a point over the whole month, equal the truth from the files."""
    day_starts = [FIRST_DAY.timestamp() + day * DAY for day in range(DAYS + 1)]
    now = time.time()
    for start in day_starts:
        end = min(start + DAY, now)
        inside = [turn for turn in turns if start < turn_end(turn) <= end]
        assert same_figures(headlines(prom, end - start, end), headline_truth(inside)), start
    assert_series_equal(series_by_day(prom, day_starts), series_truth(turns, day_starts))


def tailer_args(state, checkpoint, prom, port) -> tuple:
    return ("--state-dir", str(state), "--from-start", "--otlp-endpoint", "none",
            "--checkpoint", str(checkpoint), "--history-url", f"{prom.url}/api/v1/write",
            "--history-labels", f"job=test,instance=127.0.0.1:{port}")


def month_prometheus(tmp_path, port):
    return running_prometheus(
        tmp_path, [f"127.0.0.1:{port}"], scrape_interval="1s",
        extra_config={"storage": {"tsdb": {"out_of_order_time_window": "31d"}}},
        extra_flags=["--web.enable-remote-write-receiver"],
    )


def wait_for_the_month(tailer, prom, turns) -> None:
    """Until the history is pushed and the scrapes show every turn."""
    tailer.wait_for_log("history: pushed", timeout=600)
    total = sum(1 for t in turns if t.kind != "ordinary")
    prom.wait_for("sum(hydrafusion_turns_total)",
                  lambda result: single_value(result) == total, timeout=60)


def test_a_month_read_at_start_up_is_exact_for_any_window(tmp_path, month):
    state, turns = month
    assert len(turns) >= 5000 and len({t.session_id for t in turns}) >= 200
    port = free_port()
    with month_prometheus(tmp_path, port) as prom:
        args = tailer_args(state, tmp_path / "checkpoint.json", prom, port)
        with running_tailer(tmp_path, *args, metrics_port=port) as tailer:
            wait_for_the_month(tailer, prom, turns)
            check_month(prom, turns)
            check_dashboard(prom, turns)
            # History and scrapes of a histogram are one series: the bucket bound is written
            # as Prometheus 3 stores a scraped one (1.0, not 1).
            assert prom.query('count(hydrafusion_routing_latency_seconds_bucket{le="1"})') == []
            assert single_value(prom.query(
                'count(hydrafusion_routing_latency_seconds_bucket{le="1.0"})')) >= 1


def test_the_same_month_with_two_kill_9_during_the_start_up_reading(tmp_path, month):
    state, turns = month
    port = free_port()
    checkpoint = tmp_path / "checkpoint.json"
    with month_prometheus(tmp_path, port) as prom:
        args = tailer_args(state, checkpoint, prom, port)
        for delay in (1.5, 3.0):
            with running_tailer(tmp_path, *args, metrics_port=port) as tailer:
                time.sleep(delay)
                assert "history: pushed" not in tailer.log(), "the reading ended before the kill"
                tailer.process.kill()
                tailer.process.wait()
        with running_tailer(tmp_path, *args, metrics_port=port) as tailer:
            wait_for_the_month(tailer, prom, turns)
            check_month(prom, turns)
