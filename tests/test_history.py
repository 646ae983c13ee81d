"""History at its real time: turns read at start-up are counted in Prometheus when they happened."""

import re
import time
import tracemalloc
import urllib.request
from collections import defaultdict
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, strategies as st

from prom import free_port, running_prometheus, single_value
from sessiongen import SessionWriter
from tailer.daemon import checkpoint, service, stages
from tailer.outputs.history import GRID_MS, History
from tailer.outputs.remote_write import RemoteWriteError, RemoteWriter, split_requests
from tailerproc import running_tailer
from sessiongen import every_pattern

MINUTE = 60_000


class FakeWriter:
    def __init__(self, errors=()):
        self.pushed = []
        self.errors = list(errors)

    def push(self, series):
        if self.errors:
            raise self.errors.pop(0)
        self.pushed.append({dict(labels)["__name__"]: points for labels, points in series})
        return 0


def gain(amount, name="x_total", **labels):
    return (name, sorted(labels.items()), amount, 1)


def make(writer, *, cutoff=10**13, not_before=0, bases=(), saved=None):
    return History(writer, {"job": "j", "instance": "i"}, bases=list(bases),
                   not_before_ms=not_before, cutoff_ms=cutoff, saved=saved)


def test_a_new_series_starts_at_zero_with_a_sample_at_each_change_and_the_grid_between():
    writer = FakeWriter()
    now = 20 * GRID_MS + 2 * MINUTE
    history = make(writer)
    history.record(10 * GRID_MS + MINUTE, [gain(2)])
    history.record(12 * GRID_MS, [gain(3)])  # on a grid point
    history.record(10 * GRID_MS + MINUTE, [gain(1)])  # another turn ending the same moment
    assert history.push(now)
    points = writer.pushed[-1]["x_total"]
    assert points[:5] == [(10 * GRID_MS + MINUTE - 1, 0.0), (10 * GRID_MS + MINUTE, 3),
                          (11 * GRID_MS, 3), (12 * GRID_MS, 6), (13 * GRID_MS, 6)]
    assert points[-2:] == [(20 * GRID_MS, 6), (now, 6)]
    assert not history.pending


def test_a_series_that_existed_starts_from_its_value_and_labels_match_the_scrape():
    writer = FakeWriter()
    history = make(writer, bases=[gain(7, kind="a")])
    history.record(20 * GRID_MS + 1, [gain(2, kind="a")])
    history.push(22 * GRID_MS)
    assert writer.pushed[-1]["x_total"][:3] == [(20 * GRID_MS, 7), (20 * GRID_MS + 1, 9),
                                               (21 * GRID_MS, 9)]


def test_nothing_is_placed_at_or_before_the_previous_run_was_last_seen():
    """Prometheus may hold its scrapes up to then; an older, larger sample reads as a reset."""
    writer = FakeWriter()
    not_before = 30 * GRID_MS + 2 * MINUTE
    history = make(writer, not_before=not_before)
    history.record(5 * GRID_MS, [gain(6)])  # read again after a crash
    history.push(60 * GRID_MS)
    points = writer.pushed[-1]["x_total"]
    assert points[:2] == [(not_before + 1, 0.0), (not_before + 2, 6)]
    assert all(at > not_before for at, _ in points)


def test_every_series_newest_sample_goes_first_alone_then_the_whole_series():
    writer = FakeWriter()
    history = make(writer, bases=[gain(7, name="y_total")])
    history.record(5 * GRID_MS, [gain(2), gain(1, name="y_total")])
    history.record(6 * GRID_MS, [gain(3)])
    now = 9 * GRID_MS
    assert history.push(now)
    newest, whole = writer.pushed
    assert newest == {"x_total": [(now, 5)], "y_total": [(now, 8)]}
    assert [points[-1] for points in whole.values()] == [(now, 5), (now, 8)]


def test_a_fresh_prometheus_takes_the_history_out_of_order_and_compacts_nothing(tmp_path):
    """Into a Prometheus that holds nothing yet, history sent oldest first would make its
    in-order head span the days pushed, and Prometheus would cut blocks out of it during
    the push (the path of the first start's panic, docs/HISTORY.md). The newest samples
    first start its head at the push: nothing before it is in-order, nothing compacted."""
    now = int(time.time() * 1000)
    with running_prometheus(
        tmp_path, [], extra_config={"storage": {"tsdb": {"out_of_order_time_window": "31d"}}},
        extra_flags=["--web.enable-remote-write-receiver"],
    ) as prom:
        history = History(RemoteWriter(f"{prom.url}/api/v1/write"), {"job": "j", "instance": "i"},
                          bases=[], not_before_ms=0, cutoff_ms=now)
        for day in range(1, 4):
            history.record(now - day * 86_400_000, [gain(day, case=str(case)) for case in range(20)])
        assert history.push(now)
        own = own_metrics(prom)
        assert own["prometheus_tsdb_head_min_time"] >= now - 3_600_000
        assert own["prometheus_tsdb_compactions_total"] == 0
        assert single_value(prom.query("sum(x_total)", time=now / 1000)) == 20 * 6


def own_metrics(prom) -> dict[str, float]:
    """Prometheus's own unlabelled metrics, from its /metrics."""
    with urllib.request.urlopen(f"{prom.url}/metrics", timeout=10) as response:
        lines = response.read().decode().splitlines()
    return {name: float(value) for name, value in
            (line.split(" ", 1) for line in lines if line and not line.startswith("#"))
            if "{" not in name}


def test_history_takes_the_turns_that_ended_before_this_run_began():
    history = make(FakeWriter(), cutoff=40 * GRID_MS)
    assert history.takes(40 * GRID_MS - 1)
    assert not history.takes(40 * GRID_MS)


def test_a_push_waits_until_it_can_place_its_last_sample_after_the_previous_run():
    history = make(FakeWriter(), not_before=1000)
    assert not history.ready(1002) and history.ready(1003)


def test_retryable_failures_keep_history_and_refusals_drop_it(caplog):
    writer = FakeWriter([RemoteWriteError("connection refused", retryable=True),
                         RemoteWriteError("out of bounds", retryable=False)])
    history = make(writer)
    history.record(3 * GRID_MS, [gain(1)])
    assert not history.push(9 * GRID_MS) and history.pending
    saved = history.state()
    again = make(writer, cutoff=1, not_before=10**12, saved=saved)  # a restart in between
    assert again.pending and again.takes(3 * GRID_MS)
    assert again.push(9 * GRID_MS) and not again.pending
    assert "refused" in caplog.text and writer.pushed == []


def test_the_series_waiting_are_on_metrics_until_the_push_and_0_before_the_turns_show(tmp_path):
    """hydrafusion_tailer_history_pending_series, on what a scrape shows: the count of the
    series whose history waits while Prometheus does not take it (after a restart too, from
    a checkpoint an older tailer saved without the gauge), and 0 in every scrape that shows
    the turns (the health row is never green with the history still out, nor the figures
    in with it red)."""
    state = tmp_path / "state"
    state.mkdir()
    writer = SessionWriter("waits", datetime.now(timezone.utc) - timedelta(hours=3))
    writer.single("gpt-5.6-sol")
    writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="reject", repair_model="gpt-5.6-sol")
    writer.write(state)
    refused = RemoteWriteError("connection refused", retryable=True)
    prometheus = FakeWriter([refused, refused])
    config = service.Config(state_dir=state, checkpoint=tmp_path / "checkpoint.json",
                            from_start=True, history_url="http://127.0.0.1:9/api/v1/write",
                            history_labels={"job": "j", "instance": "i"})
    now = [0.0]

    def start():
        run = service.Run(config, service.Heartbeat(None, None),
                          stages.load_saved(config.checkpoint), history_writer=prometheus)
        run.history_push.clock = lambda: now[0]  # the retry's backoff, without waiting for it
        return run

    def scrape_until(run, done):
        deadline = time.monotonic() + 30
        while True:
            run.step()
            scrape = run.registry.render()
            (waiting,) = re.findall(r"^hydrafusion_tailer_history_pending_series (\S+)$", scrape, re.M)
            turns_shown = re.search(r"^hydrafusion_turns_total\{", scrape, re.M) is not None
            assert not (turns_shown and float(waiting)), scrape
            if done(run, float(waiting), turns_shown):
                return float(waiting)
            assert time.monotonic() < deadline, scrape
            time.sleep(0.01)

    def refused_and_shown(run, waiting, _):
        return run.history_push.waits and waiting == len(run.history_push.state()["changes"])

    run = start()
    assert scrape_until(run, refused_and_shown) > 0 and len(prometheus.errors) == 1
    assert run.stop() == 0
    saved = checkpoint.load(config.checkpoint)
    del saved["metrics"]["hydrafusion_tailer_history_pending_series"]
    checkpoint.save(config.checkpoint, saved)
    run = start()
    try:
        assert scrape_until(run, refused_and_shown) > 0 and prometheus.errors == []
        assert prometheus.pushed == []
        now[0] += service.HISTORY_FIRST_BACKOFF_S
        assert scrape_until(run, lambda _, __, turns_shown: turns_shown) == 0
        assert prometheus.pushed
    finally:
        run.stop()


def test_a_months_history_is_made_as_it_is_sent_not_held_at_once():
    """A month of the 5-minute grid is 8,928 samples a series; hundreds of series made at
    once took 900 MB at a first start on a month of logs. The writer takes them series by
    series in requests of 20,000 samples (remote_write.split_requests)."""
    month_ms, series = 31 * 24 * 60 * MINUTE, 100

    class CountingWriter:
        samples = 0

        def push(self, all_series):
            for request in split_requests(all_series, 20_000):
                self.samples += sum(len(points) for _, points in request)
            return 0

    writer = CountingWriter()
    history = make(writer, cutoff=month_ms + 1)
    for index in range(series):
        history.record(2, [gain(1, case=str(index))])
    tracemalloc.start()
    try:
        assert history.push(month_ms)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert writer.samples > series * month_ms // GRID_MS
    assert peak < 8_000_000, f"{peak / 1e6:.0f} MB held to push {writer.samples:,} samples"


def read_at(points, at, lookback=GRID_MS):
    """What Prometheus 3 reads at an instant: the last sample in (at - lookback, at]."""
    seen = [value for time, value in points if at - lookback < time <= at]
    return seen[-1] if seen else None


@given(st.lists(st.tuples(st.integers(1, 3 * 24 * 60), st.integers(0, 5)), min_size=1,
                max_size=40),
       st.integers(0, 1000), st.data())
def test_the_counter_read_at_any_instant_is_the_count_of_turns_ended_by_then(changes, base, data):
    """Any order of recording, any instant from the first turn to the push: exact, within
    Prometheus's lookback, with samples strictly in time order."""
    writer = FakeWriter()
    history = make(writer, bases=[gain(base)] if base else ())
    for minute, amount in changes:
        history.record(minute * MINUTE, [gain(amount)])
    now = 4 * 24 * 60 * MINUTE
    history.push(now)
    points = writer.pushed[-1]["x_total"]
    assert [a for a, _ in points] == sorted({a for a, _ in points})
    first = min(minute for minute, _ in changes) * MINUTE
    for at in data.draw(st.lists(st.integers(first - 1, now), min_size=1, max_size=20)):
        truth = base + sum(amount for minute, amount in changes if minute * MINUTE <= at)
        assert read_at(points, at) == truth


# Against the stack's Prometheus: three past days, then live turns.

DAYS = 3


def three_past_days():
    """One session a day on the three UTC days before yesterday, each with every pattern."""
    today = datetime.now(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    first = today - timedelta(days=DAYS + 1)
    writers = [every_pattern(f"day-{n}", first + timedelta(days=n, hours=9 + n))
               for n in range(DAYS)]
    return first, writers


def truth_by_day(turns, first):
    days = defaultdict(lambda: defaultdict(float))
    for turn in turns:
        end = datetime.fromisoformat(turn.end_timestamp.replace("Z", "+00:00"))
        day = days[(end - first).days]
        day["turns"] += 1
        day["compound"] += len(set(turn.models)) > 1
        for leg in turn.legs:
            day["aiu"] += leg.nano_aiu / 1e9
            day["review"] += 0 if leg.committed else leg.nano_aiu / 1e9
            if leg.phase_kind == "judge":
                day["judged"] += 1
                day["rejected"] += leg.verdict == "reject"
    return days


def value_at(prom, expr, at):
    return single_value(prom.query(expr, time=at))


def test_history_lands_on_its_days_and_live_counting_goes_on(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    first, writers = three_past_days()
    for writer in writers:
        writer.write(state)
    expected = [turn for writer in writers for turn in writer.expected]
    port = free_port()
    with running_prometheus(
        tmp_path, [f"127.0.0.1:{port}"], scrape_interval="1s",
        extra_config={"storage": {"tsdb": {"out_of_order_time_window": "31d"}}},
        extra_flags=["--web.enable-remote-write-receiver"],
    ) as prom:
        args = ("--state-dir", str(state), "--from-start", "--otlp-endpoint", "none",
                "--checkpoint", str(tmp_path / "cp.json"),
                "--history-url", f"{prom.url}/api/v1/write",
                "--history-labels", f"job=test,instance=127.0.0.1:{port}")
        with running_tailer(tmp_path, *args, metrics_port=port) as tailer:
            # Three days of history, encoded in Python: more than 30 s beside a CPU load.
            tailer.wait_for_log("history: pushed", timeout=300)
            days = truth_by_day(expected, first)
            for day in range(DAYS):
                end = (first + timedelta(days=day + 1)).timestamp()
                truth = days[day]
                assert value_at(prom, "sum(increase(hydrafusion_aiu_total[1d] anchored))", end) == \
                    pytest.approx(truth["aiu"], rel=1e-9)
                assert value_at(
                    prom, 'sum(increase(hydrafusion_turns_total{compound="true"}[1d] anchored))'
                    " / sum(increase(hydrafusion_turns_total[1d] anchored))", end
                ) == pytest.approx(truth["compound"] / truth["turns"], rel=1e-9)
                assert value_at(
                    prom, 'sum(increase(hydrafusion_legs_total{phase_kind="judge",'
                    'verdict="reject"}[1d] anchored)) / sum(increase(hydrafusion_legs_total'
                    '{phase_kind="judge"}[1d] anchored))', end
                ) == pytest.approx(truth["rejected"] / truth["judged"], rel=1e-9)
                assert value_at(
                    prom, 'sum(increase(hydrafusion_aiu_total{committed="false"}[1d] anchored))'
                    " / sum(increase(hydrafusion_aiu_total[1d] anchored))", end
                ) == pytest.approx(truth["review"] / truth["aiu"], rel=1e-9)
            # The day before the first: nothing, and no spike at start-up either.
            start_up = time.time()
            assert (value_at(prom, "sum(increase(hydrafusion_aiu_total[1d] anchored))",
                             first.timestamp()) or 0) == 0

            live = SessionWriter("live-now", datetime.now(timezone.utc) - timedelta(minutes=1))
            live.single("gpt-5.6-sol")
            live.write(state)
            tailer.wait_for_log(live.expected[0].fusion_id[:20])
            settled = time.time()
            last = prom.wait_for(
                "max(timestamp(hydrafusion_tailer_build_info))",
                lambda r: r and float(r[0]["value"][1]) > settled + 2)
            at = float(last[0]["value"][1])
            window = f"[{int(at - first.timestamp()) + 3600}s]"
            assert value_at(prom, f"sum(resets(hydrafusion_aiu_total{window}))", at) == 0
            assert value_at(prom, f"sum(increase(hydrafusion_aiu_total{window} anchored))", at) == \
                pytest.approx(sum(t.nano_aiu for t in expected + live.expected) / 1e9,
                              rel=1e-9)
            # The live turn lands now and the history does not: the last 10 minutes hold
            # one turn.
            assert value_at(prom, "sum(increase(hydrafusion_turns_total[10m] anchored))", at) == 1
            assert at > start_up
        # A restart pushes nothing again and changes no figure.
        with running_tailer(tmp_path, *args, metrics_port=port) as tailer:
            # Its scrapes show the counters once it is past the push it had nothing for.
            tailer.wait_for_metrics("hydrafusion_aiu_total{")
            assert "history: pushed" not in tailer.log()
        for day in range(DAYS):
            end = (first + timedelta(days=day + 1)).timestamp()
            assert value_at(prom, "sum(increase(hydrafusion_aiu_total[1d] anchored))", end) == \
                pytest.approx(days[day]["aiu"], rel=1e-9)
