"""The dashboard's queries against the stack's Prometheus, fed by the real tailer.

First the demo: prepared as `python -m tailer demo` does (timestamps moved to the last two
days), the tailer runs as a daemon reading it from the start, and Prometheus (the version
and features docker-compose.yml pins, tests/prom.py) scrapes it each second under the
tailer's job from prometheus/prometheus.yml. Then every PromQL expression of the dashboard,
with $__range covering the whole run and every variable set to All as Grafana would, is
run at the last scrape's timestamp. The headline figures must equal the truth read from
the fixture files with plain `json` (tests/fixture_truth.py), never through the tailer's
parser.

Then windows of history, of live data and of both: past days pushed as history at their
own times, a turn counted live, and the dashboard's counts over each kind of window, which
`increase(...[$__range] anchored)` makes exact on Prometheus 3 (docs/METRICS.md). And the
ratios' edges: 0 while the numerator has no series, no value while the denominator is 0.

Grafana and Tempo cannot run here. tests/dashboard.py does Grafana's substitution; the
TraceQL queries are not run, but every span attribute they (and the Tempo datasource's
links) name must appear in the OTLP payloads an OtlpSink, standing in for the collector,
received from the same run.
"""

import math
import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from time import sleep, time

import pytest
import yaml

import dashboard as dash
from dashboard_truth import (assert_series_equal, headline_truth, headlines, same_figures,
                             series_by_day, series_truth, turn_end)
from fixture_truth import FIXTURES, REPO, fixture_turns, model_calls, ordinary_turns, tool_calls
from otlp_sink import OtlpSink, plain_attributes
from prom import free_port, running_prometheus
from sessiongen import SessionWriter, every_pattern
from tailer.commands import demo
from tailer.outputs.remote_write import RemoteWriter
from tailerproc import running_tailer

TURNS = fixture_turns()
# What the windows fixture takes at the most, on a loaded machine.
SAME_DAY_S = 600


@dataclass
class Run:
    results: dict[str, list[list[dict]]]  # panel title -> each target's result, in order
    exposition: str
    spans: list[dict]


def tailer_job(port):
    """The tailer's scrape job from prometheus/prometheus.yml, aimed at the test's tailer."""
    config = yaml.safe_load((REPO / "prometheus" / "prometheus.yml").read_text())
    job = next(job for job in config["scrape_configs"]
               if job["static_configs"][0]["targets"] == ["tailer:9464"])
    return {**job, "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}


def last_scrape_after(prom, previous):
    """Wait for a scrape later than `previous` (unix seconds); return its timestamp."""
    result = prom.wait_for('max(timestamp(up{job="hydrafusion-tailer"}))',
                           lambda r: r and float(r[0]["value"][1]) > previous, timeout=60)
    return float(result[0]["value"][1])


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dashboard")
    started = time()
    demo.prepare(FIXTURES, tmp / "work", datetime.now(timezone.utc))
    port = free_port()
    # root, routing, one per leg; a root per ordinary turn; one per model call and tool call
    spans_expected = (sum(2 + len(turn.legs) for turn in TURNS) + len(ordinary_turns())
                      + model_calls() + tool_calls())
    with OtlpSink() as sink, \
            running_tailer(tmp, "--state-dir", str(tmp / "work"), "--from-start",
                           "--otlp-endpoint", sink.endpoint, metrics_port=port) as tailer, \
            running_prometheus(tmp, [], extra_config={"scrape_configs": [tailer_job(port)]}) as prom:
        tailer.wait_for_log(r" fusion fusion-", count=len(TURNS))
        prom.wait_for("sum(hydrafusion_turns_total)",
                      lambda r: r and float(r[0]["value"][1]) == len(TURNS), timeout=60)
        seen = last_scrape_after(prom, 0)
        for _ in range(2):
            seen = last_scrape_after(prom, seen)
        window = math.ceil(seen - started) + 60
        results = defaultdict(list)
        for title, expr in dash.prometheus_exprs(window):
            results[title].append(prom.query(expr, time=seen))
        exposition = tailer.metrics()  # only now: the first fetch takes each series' zero
        spans = sink.wait_for_spans(spans_expected, timeout=30)
    return Run(dict(results), exposition, spans)


def only_value(result):
    (sample,) = result
    return float(sample["value"][1])


def by_label(result, label):
    return {sample["metric"][label]: float(sample["value"][1]) for sample in result}


def test_every_expression_returns_numbers(run):
    assert run.results.keys() == {title for title, _ in dash.prometheus_exprs(3600)}
    for title, results in run.results.items():
        for index, result in enumerate(results):
            assert result, f"{title} (target {index}) returned no data"
            for sample in result:
                assert math.isfinite(float(sample["value"][1])), f"{title}: {sample}"


def values(result):
    """Each target's only value, or None where it has none."""
    return [float(r[0]["value"][1]) if r else None for r in result]


def test_headline_figures_equal_the_fixtures(run):
    routed = [turn for turn in TURNS if turn.outcome != "route_failed"]
    compound = sum(len(turn.models) > 1 for turn in routed) / len(routed)
    judged = [[leg.verdict for leg in turn.legs if leg.verdict] for turn in TURNS]
    judged = [verdicts for verdicts in judged if verdicts]
    rejection = sum(bool({"reject", "revise"} & set(verdicts)) for verdicts in judged) / len(judged)
    legs = [leg for turn in TURNS for leg in turn.legs]
    credits = sum(leg.nano_aiu for leg in legs) / 1e9
    multi = sum(leg.nano_aiu for turn in TURNS if len(turn.models) > 1 for leg in turn.legs) / 1e9
    review_legs = sum(leg.nano_aiu for leg in legs if not leg.committed and leg.kind in ("judge", "critic")) / 1e9
    superseded = sum(leg.nano_aiu for leg in legs if not leg.committed and leg.kind not in ("judge", "critic")) / 1e9
    by_model, by_kind = defaultdict(float), defaultdict(float)
    for leg in legs:
        by_model[leg.model] += leg.nano_aiu / 1e9
        by_kind[leg.kind] += leg.nano_aiu / 1e9
    cache_share = sum(leg.cached_tokens for leg in legs) / sum(leg.input_tokens for leg in legs)

    results = run.results
    assert 0 < compound < 1 and 0 < rejection < 1 and 0 < review_legs and 0 < superseded
    assert only_value(results["Compound rate"][0]) == pytest.approx(compound, rel=1e-9)
    assert only_value(results["Rejection rate"][0]) == pytest.approx(rejection, rel=1e-9)
    assert values(results["Review share of credits"]) == pytest.approx(
        [review_legs / credits, superseded / credits], rel=1e-9)
    assert only_value(results["Credits"][0]) == pytest.approx(credits, rel=1e-9)
    assert values(results["Credits on multi-model turns"]) == pytest.approx([multi, multi / credits], rel=1e-9)
    assert by_label(results["Credits by model"][0], "model") == pytest.approx(dict(by_model), rel=1e-9)
    assert by_label(results["Credits by leg kind"][0], "phase_kind") == pytest.approx(dict(by_kind), rel=1e-9)
    assert only_value(results["Cache share of input tokens"][0]) == pytest.approx(cache_share, rel=1e-9)


def test_fusion_and_ordinary_turns_side_by_side(run):
    """Turns, credits per turn and model calls per turn of each kind, from the files; the
    median latency lies within the turns' own durations' bucket range."""
    fusion = [turn for turn in TURNS if turn.outcome != "route_failed"]
    ordinary = ordinary_turns()
    assert fusion and ordinary
    truth = {
        "fusion": [len(fusion),
                   sum(leg.nano_aiu for turn in fusion for leg in turn.legs) / 1e9 / len(fusion),
                   sum(leg.request_count for turn in fusion for leg in turn.legs) / len(fusion)],
        "ordinary": [len(ordinary), sum(turn.nano_aiu for turn in ordinary) / 1e9 / len(ordinary),
                     sum(turn.calls for turn in ordinary) / len(ordinary)],
    }
    table = run.results["Fusion vs ordinary turns"]
    for kind, want in truth.items():
        assert [by_label(result, "kind")[kind] for result in table[:3]] == pytest.approx(want, rel=1e-9), kind
    medians = by_label(table[3], "kind")
    assert medians.keys() == truth.keys()
    assert all(0 < median < 1310.72 for median in medians.values())


def test_was_fusion_worth_it_answer_review_and_the_gate(run):
    """The "Was fusion worth it" row, from the files: per pattern the turns, the credits of
    the legs kept and not kept, and review's share; per gate outcome of the cascade turns
    (accepted: a verdict accept and none sending the draft back; rejected: one did;
    unjudged: none), their turns, credits kept and not kept, and credits per turn."""
    turns, kept, review = defaultdict(int), defaultdict(float), defaultdict(float)
    gates = defaultdict(lambda: [0, 0.0, 0.0])
    for turn in TURNS:
        turns[turn.pattern] += 1
        for leg in turn.legs:
            (kept if leg.committed else review)[turn.pattern] += leg.nano_aiu / 1e9
        if turn.pattern == "cascade":
            verdicts = {leg.verdict for leg in turn.legs if leg.verdict}
            gate = gates["rejected" if verdicts & {"reject", "revise"} else "accepted" if verdicts else "unjudged"]
            gate[0] += 1
            gate[1] += sum(leg.nano_aiu for leg in turn.legs if leg.committed) / 1e9
            gate[2] += sum(leg.nano_aiu for leg in turn.legs if not leg.committed) / 1e9
    paid = {pattern for pattern in turns if kept[pattern] + review[pattern]}
    assert {"accepted", "rejected"} <= gates.keys() and any(review.values())
    answer = run.results["Answer and review credits by pattern"]
    assert by_label(answer[0], "pattern") == turns
    assert by_label(answer[1], "pattern") == pytest.approx({p: kept[p] for p in paid}, rel=1e-9)
    assert by_label(answer[2], "pattern") == pytest.approx({p: review[p] for p in paid}, rel=1e-9)
    assert by_label(answer[3], "pattern") == pytest.approx(
        {p: review[p] / (kept[p] + review[p]) for p in paid}, rel=1e-9)
    gate = run.results["The gate: cascade turns by what the judge did"]
    assert [by_label(result, "gate") for result in gate] == [
        {name: pytest.approx(figures[0]) for name, figures in gates.items()},
        {name: pytest.approx(figures[1], rel=1e-9) for name, figures in gates.items()},
        {name: pytest.approx(figures[2], rel=1e-9) for name, figures in gates.items()},
        {name: pytest.approx((figures[1] + figures[2]) / figures[0], rel=1e-9)
         for name, figures in gates.items()}]


def test_the_ledger_counts_every_leg(run):
    legs, credits = defaultdict(float), defaultdict(float)
    for turn in TURNS:
        for leg in turn.legs:
            legs[leg.model, leg.kind] += 1
            credits[leg.model, leg.kind] += leg.nano_aiu / 1e9
    ledger = run.results["Leg ledger"]

    def rows(result):
        return {(s["metric"]["model"], s["metric"]["phase_kind"]): float(s["value"][1]) for s in result}

    assert rows(ledger[0]) == pytest.approx(dict(legs))
    assert rows(ledger[4]) == pytest.approx(dict(credits), rel=1e-9)


def test_the_health_row_is_green_on_a_healthy_run(run):
    for title in ("Tailer", "Damaged lines", "Unreadable logs", "Spans waiting", "History waiting",
                  "Spans refused or dropped", "Log format drift", "Collector and Tempo drops"):
        want = 1 if title == "Tailer" else 0
        assert values(run.results[title]) == [want], title


def test_every_metric_the_dashboard_names_is_in_the_tailers_exposition(run):
    exposed = set(re.findall(r"^# TYPE (\S+) ", run.exposition, flags=re.MULTILINE))
    assert dash.metric_families_used() - dash.PROMETHEUS_OWN_METRICS <= exposed


def test_every_span_attribute_the_stack_queries_is_emitted(run):
    roots = [span for span in run.spans if re.fullmatch(r"hydrafusion .*", span["name"])]
    # The Turns table selects spans by that name: one row per turn.
    assert len(roots) == len(TURNS) == len({span["traceId"] for span in roots})
    on_any = set().union(*(plain_attributes(span["attributes"]) for span in run.spans))
    assert dash.traceql_span_attributes() <= on_any
    assert dash.span_attributes_used() <= on_any
    # The waterfall shows a turn's model calls and tools under its legs.
    names = {span["name"].split(" ")[0] for span in run.spans}
    assert {"chat", "execute_tool"} <= names


# Windows of history, of live data, and of both

@pytest.fixture(scope="module")
def windows(tmp_path_factory):
    """{window name: (the dashboard's headline figures over it, the truth)}: three past days
    arrive as history, then one more session is counted live."""
    tmp = tmp_path_factory.mktemp("windows")
    state = tmp / "state"
    state.mkdir()
    # The live turns are counted on the day they are scraped: one day from the first
    # history push to the last scrape, or today's point is tomorrow's (a run at 23:59 UTC).
    to_midnight = 86400 - time() % 86400
    if to_midnight < SAME_DAY_S:
        sleep(to_midnight + 1)
    today = datetime.now(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    first = today - timedelta(days=4)
    # Day 1 and the live session have calls of unknown credits (aiCreditsStatus unavailable).
    days = [every_pattern(f"dashboard-day-{n}", first + timedelta(days=n, hours=9 + n),
                          unpriced=0.5 if n == 1 else 0.0) for n in range(3)]
    for writer in days:
        writer.write(state)
    port = free_port()
    with running_prometheus(
        tmp, [], extra_config={"scrape_configs": [tailer_job(port)],
                               "storage": {"tsdb": {"out_of_order_time_window": "31d"}}},
        extra_flags=["--web.enable-remote-write-receiver"],
    ) as prom, running_tailer(
        tmp, "--state-dir", str(state), "--from-start", "--otlp-endpoint", "none",
        "--history-url", f"{prom.url}/api/v1/write",
        "--history-labels", f"job=hydrafusion-tailer,instance=127.0.0.1:{port}", metrics_port=port,
    ) as tailer:
        tailer.wait_for_log("history: pushed")
        history = sum(len(writer.expected) for writer in days)
        prom.wait_for("sum(hydrafusion_turns_total)", lambda r: r and float(r[0]["value"][1]) == history)
        scrapes_took_over = last_scrape_after(prom, 0)
        live = SessionWriter("dashboard-live", datetime.now(timezone.utc) - timedelta(minutes=1),
                             unpriced=0.5)
        live.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="reject", repair_model="gpt-5.6-sol")
        live.single("gpt-5.6-sol")
        live.write(state)
        assert all(sum(turn.unknown_calls for turn in writer.expected) for writer in (days[1], live))
        tailer.wait_for_log(live.expected[-1].fusion_id[:20])
        prom.wait_for("sum(hydrafusion_turns_total)",
                      lambda r: r and float(r[0]["value"][1]) == history + len(live.expected))
        at = last_scrape_after(prom, time())
        spans = {f"past day {n}": ((first + timedelta(days=n)).timestamp(),
                                   (first + timedelta(days=n + 1)).timestamp(), days[n].expected)
                 for n in range(3)}
        ends = [turn_end(turn) for turn in days[1].expected]
        inside = (ends[1] + ends[2]) / 2  # between two turns, off any grid
        spans["90 minutes from inside a session"] = (
            inside, inside + 5400, [turn for turn in days[1].expected if inside < turn_end(turn) <= inside + 5400])
        spans["live"] = (scrapes_took_over, at, live.expected)
        spans["last past day and live"] = ((first + timedelta(days=2)).timestamp(), at,
                                           days[2].expected + live.expected)
        found = {name: (headlines(prom, end - start, end), headline_truth(turns))
                 for name, (start, end, turns) in spans.items()}
        # The past days, the day before them (nothing) and today (live): history, scrapes
        # and the seam between them, one day a point.
        day_starts = [(first + timedelta(days=n)).timestamp() for n in range(-1, 5)]
        everything = [turn for writer in days for turn in writer.expected] + live.expected
        found["series by day"] = (series_by_day(prom, day_starts), series_truth(everything, day_starts))
        return found


@pytest.mark.parametrize("name", ["past day 0", "past day 1", "past day 2",
                                  "90 minutes from inside a session", "live",
                                  "last past day and live"])
def test_counts_are_exact_over_windows_of_history_of_live_data_and_of_both(windows, name):
    figures, truth = windows[name]
    assert same_figures(figures, truth), (figures, truth)


def test_time_series_read_each_day_exactly_across_history_and_live_data(windows):
    """Credits by model, compound rate and rejection rate per day: a day without turns has
    no ratio point (and credits 0 only for models that already had a series); today's point
    holds the live turns so far."""
    points, truth = windows["series by day"]
    # the three past days and today have turns; the day before them and yesterday none
    assert [point is not None for point in truth["Compound rate over time"]["compound rate"]] == \
        [False, True, True, True, False, True]
    assert_series_equal(points, truth)


def test_ratios_are_0_without_a_numerator_and_empty_without_a_denominator(tmp_path):
    """Only single turns: no compound turn, no judge and no review credit has a series."""
    state = tmp_path / "state"
    state.mkdir()
    writer = SessionWriter("dashboard-singles", datetime.now(timezone.utc) - timedelta(minutes=1))
    writer.single("gpt-5.6-sol")
    writer.single("claude-sonnet-4.6")
    writer.write(state)
    port = free_port()
    with running_tailer(tmp_path, "--state-dir", str(state), "--from-start", "--otlp-endpoint", "none",
                        metrics_port=port) as tailer, \
            running_prometheus(tmp_path, [], extra_config={"scrape_configs": [tailer_job(port)]}) as prom:
        tailer.wait_for_log(r" fusion fusion-", count=2)
        prom.wait_for("sum(hydrafusion_turns_total)", lambda r: r and float(r[0]["value"][1]) == 2, timeout=60)
        at = last_scrape_after(prom, time() + 4)
        whole_run = headlines(prom, 600, at)
        quiet = headlines(prom, 3, at)  # three scrapes, no turn between them
    credits = sum(leg.nano_aiu for turn in writer.expected for leg in turn.legs) / 1e9
    assert whole_run == {"Credits": [pytest.approx(credits), 0], "Credits on multi-model turns": [0, 0],
                         "Compound rate": [0], "Rejection rate": [None], "Review share of credits": [0, 0]}
    assert quiet == {"Credits": [0, 0], "Credits on multi-model turns": [0, None], "Compound rate": [None],
                     "Rejection rate": [None], "Review share of credits": [None, None]}


def test_collector_and_tempo_drops_count_series_born_in_the_window(tmp_path):
    """Their counters appear at their first loss, already at its count: a series born in
    the window counts whole, an older one by its increase, and the stat is 0 without any."""
    hour = 3600
    start = (int(time()) // hour - 6) * hour
    series = {
        # 5 before the window, 12 inside it
        (("__name__", "otelcol_exporter_send_failed_spans"), ("exporter", "otlp_grpc/tempo")):
            [(start, 5.0), (start + hour, 5.0), (start + 2 * hour, 17.0)],
        # born inside the window at 40, then 45
        (("__name__", "tempo_discarded_spans_total"), ("reason", "trace_too_large")):
            [(start + hour + 60, 40.0), (start + 2 * hour, 45.0)],
        # refused before the window only
        (("__name__", "otelcol_receiver_refused_spans"), ("receiver", "otlp"), ("transport", "http")):
            [(start - 60, 3.0), (start + 2 * hour, 3.0)],
    }
    with running_prometheus(tmp_path, [], extra_config={"storage": {"tsdb": {"out_of_order_time_window": "31d"}}},
                            extra_flags=["--web.enable-remote-write-receiver"]) as prom:
        RemoteWriter(f"{prom.url}/api/v1/write").push(
            [(list(labels), [(at * 1000, value) for at, value in samples]) for labels, samples in series.items()])
        (expr,) = [expr for title, expr in dash.prometheus_exprs(2 * hour) if title == "Collector and Tempo drops"]
        assert only_value(prom.query(expr, time=start + 2 * hour)) == 12 + 45
        (quiet,) = [expr for title, expr in dash.prometheus_exprs(600) if title == "Collector and Tempo drops"]
        assert only_value(prom.query(quiet, time=start - 120)) == 0


def threshold_color(panel, value):
    """The colour Grafana gives `value` under the panel's absolute thresholds: the last
    step at or below it (the first step, with no value, is the base)."""
    steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
    return [step["color"] for step in steps if step["value"] is None or value >= step["value"]][-1]


def test_history_waiting_is_red_while_a_tailers_history_waits_for_prometheus(tmp_path):
    """A tailer whose remote-write URL answers nothing keeps its start-up history and says
    so on /metrics; scraped by the real Prometheus, the health row's History waiting shows
    that count, red, and 0, green, for an instance with nothing waiting."""
    state = tmp_path / "state"
    state.mkdir()
    every_pattern("history-waits", datetime.now(timezone.utc) - timedelta(hours=2)).write(state)
    port = free_port()
    nowhere = f"http://127.0.0.1:{free_port()}/api/v1/write"
    (panel,) = [p for p in dash.all_panels(dash.load_dashboard()) if p.get("title") == "History waiting"]

    def history_waiting(variables=None):
        (expr,) = [expr for title, expr in dash.prometheus_exprs(600, variables) if title == "History waiting"]
        return expr

    with running_tailer(tmp_path, "--state-dir", str(state), "--from-start", "--otlp-endpoint", "none",
                        "--history-url", nowhere,
                        "--history-labels", f"job=hydrafusion-tailer,instance=127.0.0.1:{port}",
                        metrics_port=port) as tailer, \
            running_prometheus(tmp_path, [], extra_config={"scrape_configs": [tailer_job(port)]}) as prom:
        tailer.wait_for_log("history: Prometheus did not take the history")
        own = re.search(r"^hydrafusion_tailer_history_pending_series (\S+)$", tailer.metrics(), re.M)
        assert float(own.group(1)) > 0
        result = prom.wait_for(history_waiting(), lambda r: r and float(r[0]["value"][1]) > 0, timeout=60)
        assert only_value(result) == float(own.group(1))
        assert threshold_color(panel, only_value(result)) == "red"
        elsewhere = prom.query(history_waiting({"instance": dash.chosen("127.0.0.1:1")}))
        assert only_value(elsewhere) == 0 and threshold_color(panel, 0) == "green"
