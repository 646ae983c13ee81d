"""A first start killed (-9) at any moment, then started again: every past day exact.

A first start (no checkpoint yet) takes the checkpoint's lock, reads the logs, saves, pushes
the history and saves again. Killed at any of those moments and started again, every past
turn must land in Prometheus at its own time. A run killed before its first save had shown
Prometheus nothing, so it bounds nothing: before issue 39 the restart took it to have been
scraped up to its lock's time + 10 s, and put every past turn there (each past day 0, one
spike at the restart).

Each round is a first start of its own (its checkpoint, its port, so its own series in one
Prometheus that scrapes every round's port), killed at a random moment from 0 to 3 s after
it was started, then started again normally until its scrapes show the counters. Then each
past day, and the day of the restart, read from Prometheus as the dashboard reads a window
(a counter's value at the window's end minus at its start), equals the truth from the
files, and no counter went down. Two busy loops run beside it, as a loaded machine has them.

    HYDRAFUSION_FIRST_START_KILLS=100 (rounds; 30 by default)
"""

import os
import random
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timezone

import pytest

from prom import free_port, running_prometheus, single_value
from sessiongen import SessionWriter
from tailer.daemon import checkpoint, service, stages
from tailer.outputs.remote_write import RemoteWriteError
from tailerproc import ROOT, TailerProcess, tailer_env
from test_exactly_once_model import LABELS, FakePrometheus, landed
from test_history import read_at
from test_history_stress import cpu_load

ROUNDS = int(os.environ.get("HYDRAFUSION_FIRST_START_KILLS", "30"))
LATEST_KILL_S = 3.0
DAY_MS = 86_400_000
DAYS = 3
MODELS = ("gpt-5.6-sol", "mai-code-1.1-flash", "claude-sonnet-4.6")
NOW_MS = int(time.time() * 1000)
COUNTERS = {
    "turns": "hydrafusion_turns_total",
    "credits": "hydrafusion_aiu_total",
    "rejected": 'hydrafusion_legs_total{phase_kind="judge",verdict="reject"}',
}


def write_days(state) -> list:
    """A session on each of the DAYS days before the last one (days counted back from the
    test's start): a few turns of each kind, so a day has credits, turns and rejections."""
    expected = []
    for day in range(1, DAYS + 1):
        start = datetime.fromtimestamp((NOW_MS - (day + 1) * DAY_MS) / 1000 + 6 * 3600,
                                       timezone.utc)
        writer = SessionWriter(f"day-{day}", start)
        for turn in range(day + 2):
            a, b, c = MODELS[turn % 3], MODELS[(turn + 1) % 3], MODELS[(turn + 2) % 3]
            writer.single(a)
            writer.cascade(a, b, verdict="reject" if turn % 2 else "accept", repair_model=c)
            writer.critique(b, [c])
        writer.write(state)
        expected += writer.expected
    return expected


def truth(turns, start_ms: int, end: int) -> dict:
    """A window's figures from the files: the turns that ended in (start, end]."""
    inside = [turn for turn in turns if start_ms < turn.end_ms <= end]
    legs = [leg for turn in inside for leg in turn.legs]
    return {"turns": len(inside), "credits": sum(leg.nano_aiu for leg in legs) / 1e9,
            "rejected": sum(leg.phase_kind == "judge" and leg.verdict == "reject" for leg in legs)}


def counted(prom, instance: str, start_ms: int, end: int) -> dict:
    """The same figures from Prometheus: each counter of this round's series at the
    window's end minus at its start."""
    def at(expr, ms):
        selector = f'instance="{instance}"'
        expr = expr.replace("}", f",{selector}}}") if "}" in expr else f"{expr}{{{selector}}}"
        return single_value(prom.query(f"sum({expr})", time=ms / 1000)) or 0.0

    return {name: at(expr, end) - at(expr, start_ms) for name, expr in COUNTERS.items()}


def tailer_args(state, round_dir, prom, port) -> list[str]:
    return ["--state-dir", str(state), "--from-start", "--otlp-endpoint", "none",
            "--checkpoint", str(round_dir / "checkpoint.json"),
            "--metrics-address", f"127.0.0.1:{port}",
            "--history-url", f"{prom.url}/api/v1/write",
            "--history-labels", f"job=test,instance=127.0.0.1:{port}"]


def start(args, log_path) -> TailerProcess:
    with open(log_path, "wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "tailer", "run", *args], cwd=ROOT,
                                   env=tailer_env(), stdout=log, stderr=subprocess.STDOUT)
    return TailerProcess(process, log_path, None)


def killed_first_start(args, round_dir, prom, instance: str, moment: float) -> str:
    """A first start killed -9 `moment` seconds after it was started; where it was then."""
    first = start(args, round_dir / "first.log")
    time.sleep(moment)
    first.process.send_signal(signal.SIGKILL)
    first.process.wait()
    log = first.log()
    if "history: pushed" in log:
        return "after the push"
    if prom.query(f'hydrafusion_aiu_total{{instance="{instance}"}}[31d]'):
        return "during the push"
    if (round_dir / "checkpoint.json").exists():
        return "after its first save"
    if "new checkpoint" in log:
        return "holding the lock, before its first save"
    return "starting (the lock taken or not)"


@contextmanager
def restarted(args, round_dir, prom, port):
    """A normal start on the killed one's checkpoint, running until Prometheus scraped it
    showing the counters (its history pushed and saved); yields that scrape's time (ms).
    Stopped afterwards: Prometheus then marks its series stale, so windows are read while
    it runs."""
    again = start(args, round_dir / "again.log")
    again.metrics_port = port
    try:
        again.wait_for_log("hydrafusion-tailer .*state dir", timeout=60)
        again.wait_for_metrics("hydrafusion_aiu_total{", timeout=300)
        shown = time.time()
        scraped = prom.wait_for(
            f'max(timestamp(hydrafusion_aiu_total{{instance="127.0.0.1:{port}"}}))',
            lambda result: result and float(result[0]["value"][1]) > shown + 1, timeout=60)
        yield round(float(scraped[0]["value"][1]) * 1000)
    finally:
        stopped = again.stop()
    assert stopped == 0, again.log()


def check_round(prom, turns, instance: str, now: int, where: str) -> None:
    """Each past day and the day of the restart (up to `now`, ms) against the files; no
    counter of this round's series went down."""
    windows = [(f"day -{day}", NOW_MS - (day + 1) * DAY_MS, NOW_MS - day * DAY_MS)
               for day in range(1, DAYS + 1)]
    for name, start_ms, end in [*windows, ("the day of the restart", now - DAY_MS, now)]:
        want, got = truth(turns, start_ms, end), counted(prom, instance, start_ms, end)
        assert got["turns"] == want["turns"], (where, name, got, want)
        assert got["rejected"] == want["rejected"], (where, name, got, want)
        assert got["credits"] == pytest.approx(want["credits"], rel=1e-9, abs=1e-9), \
            (where, name, got, want)
    resets = prom.query(f'sum(resets(hydrafusion_aiu_total{{instance="{instance}"}}'
                        f"[{DAYS + 2}d]))", time=now / 1000)
    assert single_value(resets) == 0, where


def test_a_first_start_killed_at_any_moment_leaves_every_past_day_exact(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    turns = write_days(state)
    rng = random.Random()
    # Random moments spread over the whole span: one in each of ROUNDS equal slices.
    moments = [LATEST_KILL_S * (n + rng.random()) / ROUNDS for n in range(ROUNDS)]
    rng.shuffle(moments)
    ports = [free_port() for _ in moments]
    where = {}
    with running_prometheus(
        tmp_path, [f"127.0.0.1:{port}" for port in ports], scrape_interval="1s",
        extra_config={"storage": {"tsdb": {"out_of_order_time_window": "31d"}}},
        extra_flags=["--web.enable-remote-write-receiver"],
    ) as prom, cpu_load():
        for number, (moment, port) in enumerate(zip(moments, ports)):
            round_dir = tmp_path / f"round-{number}"
            round_dir.mkdir()
            args, instance = tailer_args(state, round_dir, prom, port), f"127.0.0.1:{port}"
            killed = killed_first_start(args, round_dir, prom, instance, moment)
            where[number] = f"{moment:.2f} s: {killed}"
            with restarted(args, round_dir, prom, port) as now:
                check_round(prom, turns, instance, now, where[number])
    print("\n".join(f"round {number}: killed at {text}" for number, text in sorted(where.items())))


# The same, in one process, at each moment in turn: under load the real first start above
# is rarely killed during its push, so these kill it there on purpose.

MOMENTS = ("holding the lock", "after a first save made before it read a turn",
           "after its first save", "during the push",
           "after the push, before the save after it", "after its last save")


class DyingWriter:
    """Prometheus's remote-write receiver for a run that may be killed during its push:
    `dies_after` requests reach `prometheus`, then the next one waits for the kill and
    nothing more gets through."""

    def __init__(self, prometheus, dies_after: int | None = None):
        self.prometheus = prometheus
        self.dies_after = dies_after
        self.taken = 0
        self.waiting = threading.Event()
        self.killed = threading.Event()

    def push(self, series) -> int:
        if self.dies_after is not None and self.taken >= self.dies_after:
            self.waiting.set()
            self.killed.wait()
            raise RemoteWriteError("the tailer was killed", retryable=True)
        self.taken += 1
        return self.prometheus.push(series)


class InProcessRun:
    """A run as `run` makes one: the previous run's heartbeat read, the lock taken, the
    checkpoint loaded; `kill` ends it as -9 does (nothing saved, the lock let go)."""

    def __init__(self, config, writer):
        last_alive = checkpoint.last_alive(config.checkpoint)
        self.claimed = checkpoint.claim(config.checkpoint)
        self.run = service.Run(config, service.Heartbeat(self.claimed, last_alive),
                               stages.load_saved(config.checkpoint), history_writer=writer)

    def step_until(self, done) -> None:
        deadline = time.monotonic() + 60
        while not done(self.run):
            assert time.monotonic() < deadline, "the run did not get there"
            self.run.step()

    def kill(self) -> None:
        self.run.abandon()
        self.claimed.close()


def kill_at(moment: str, config, prometheus, monkeypatch) -> None:
    """A first start, killed at `moment`."""
    writer = DyingWriter(prometheus, dies_after=1 if moment == "during the push" else None)
    first = InProcessRun(config, writer)
    if moment == "after a first save made before it read a turn":
        with monkeypatch.context() as patch:
            patch.setattr(service, "TURNS_PER_PASS", 0)  # a pass that finishes no turn
            first.step_until(lambda run: config.checkpoint.exists())
    elif moment == "after its first save":
        first.step_until(lambda run: config.checkpoint.exists())
    elif moment == "during the push":
        # Its newest samples taken, the rest under way.
        first.step_until(lambda run: writer.waiting.is_set())
    elif moment == "after the push, before the save after it":
        first.step_until(lambda run: writer.taken == 2)
        landed()
    elif moment == "after its last save":
        first.step_until(lambda run: run.history_push.history is None)
        prometheus.scrape(first.run.registry.render(), time.time_ns() // 1_000_000)
    first.kill()
    writer.killed.set()
    landed()


@pytest.mark.parametrize("moment", MOMENTS)
def test_a_first_start_killed_at_each_moment_leaves_every_turn_at_its_time(
        tmp_path, monkeypatch, moment):
    monkeypatch.setattr(service, "POLL_INTERVAL_S", 0.01)
    state = tmp_path / "state"
    state.mkdir()
    turns = write_days(state)
    config = service.Config(state_dir=state, checkpoint=tmp_path / "checkpoint.json",
                            from_start=True, history_url="http://127.0.0.1:9/api/v1/write",
                            history_labels=LABELS)
    prometheus = FakePrometheus()
    kill_at(moment, config, prometheus, monkeypatch)
    again = InProcessRun(config, DyingWriter(prometheus))
    try:
        again.step_until(lambda run: run.history_push.history is None)
        time.sleep(0.002)  # a scrape's "now" after the push's
        prometheus.scrape(again.run.registry.render(), time.time_ns() // 1_000_000)
    finally:
        again.kill()
    assert prometheus.conflicts == [] and prometheus.decreases() == []
    ends = sorted(turn.end_ms for turn in turns)
    for at in [*ends, *(NOW_MS - day * DAY_MS for day in range(1, DAYS + 2))]:
        want = truth(turns, 0, at)
        got = {name: sum(read_at(sorted(points.items()), at) or 0
                         for key, points in prometheus.series.items()
                         if dict(key)["__name__"] == COUNTERS[name])
               for name in ("turns", "credits")}
        assert got["turns"] == want["turns"], (at, got, want)
        assert got["credits"] == pytest.approx(want["credits"], rel=1e-9, abs=1e-9), (at, got)


# The rules that make it so.

def first_start_config(tmp_path):
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    return service.Config(state_dir=state, checkpoint=tmp_path / "checkpoint.json",
                          from_start=True, history_url="http://127.0.0.1:9/api/v1/write",
                          history_labels=LABELS)


def test_a_lock_with_no_checkpoint_beside_it_bounds_nothing(tmp_path):
    """What a first start killed before its first save leaves: it showed Prometheus nothing."""
    path = tmp_path / "checkpoint.json"
    checkpoint.claim(path).close()
    assert checkpoint.last_alive(path) is None
    checkpoint.save(path, {})
    assert checkpoint.last_alive(path) == path.with_name("checkpoint.json.lock").stat().st_mtime


def test_nothing_is_pushed_before_the_run_saved_the_history_it_pushes(tmp_path, monkeypatch):
    """Killed during its push, a run must leave the next one the history it was pushing
    (its bound, its cutoff, its identity), so that the next push is the same samples. A
    save that takes its time shows the order."""
    monkeypatch.setattr(service, "POLL_INTERVAL_S", 0.01)
    save = checkpoint.save
    monkeypatch.setattr(checkpoint, "save", lambda *args: (time.sleep(0.3), save(*args)))
    config = first_start_config(tmp_path)
    write_days(config.state_dir)

    class Writer:
        saved_when_pushed = []

        def push(self, series):
            saved = checkpoint.load(config.checkpoint)
            self.saved_when_pushed.append(saved is not None and bool(saved["history"]["changes"]))
            return FakePrometheus().push(series)

    writer = Writer()
    first = InProcessRun(config, writer)
    try:
        first.step_until(lambda run: run.history_push.history is None)
        landed()
    finally:
        first.kill()
    assert writer.saved_when_pushed == [True, True]


def test_the_lock_is_touched_only_once_the_counters_are_shown(tmp_path, monkeypatch):
    """Until its history is pushed the run's scrapes leave the counters out: a kill before
    then must leave the bound where the previous run set it."""
    monkeypatch.setattr(service, "POLL_INTERVAL_S", 0.01)
    config = first_start_config(tmp_path)
    write_days(config.state_dir)
    lock = config.checkpoint.with_name("checkpoint.json.lock")
    first = InProcessRun(config, DyingWriter(FakePrometheus()))
    try:
        os.utime(lock, (1, 1))
        first.step_until(lambda run: config.checkpoint.exists())
        assert first.run.history_push.history is not None and lock.stat().st_mtime == 1
        first.step_until(lambda run: run.history_push.history is None)
        assert lock.stat().st_mtime > time.time() - 60
    finally:
        first.kill()


def test_a_restart_killed_while_reading_hands_the_next_one_its_whole_history(
        tmp_path, monkeypatch):
    """A restart that finds past turns it had not read (a session the CLI wrote while the
    tailer was stopped), killed after a save made partway through reading them: the next
    one carries that history on from the same counters, every series' included, and no
    counter Prometheus holds goes down."""
    monkeypatch.setattr(service, "POLL_INTERVAL_S", 0.01)
    config = first_start_config(tmp_path)
    turns = write_days(config.state_dir)
    prometheus = FakePrometheus()
    first = InProcessRun(config, DyingWriter(prometheus))
    first.step_until(lambda run: run.history_push.history is None)
    prometheus.scrape(first.run.registry.render(), time.time_ns() // 1_000_000)
    first.run.stop()
    first.claimed.close()
    later = SessionWriter("written-while-stopped", datetime.fromtimestamp(
        (NOW_MS - DAY_MS) / 1000 + 3600, timezone.utc))
    for model in MODELS:
        later.single(model)
        later.critique(model, [m for m in MODELS if m != model])
    later.write(config.state_dir)
    monkeypatch.setattr(service, "TURNS_PER_PASS", 1)
    killed = InProcessRun(config, DyingWriter(prometheus))
    killed.run.step()  # one turn read, and saved
    killed.kill()
    again = InProcessRun(config, DyingWriter(prometheus))
    try:
        again.step_until(lambda run: run.history_push.history is None)
        time.sleep(0.002)
        prometheus.scrape(again.run.registry.render(), time.time_ns() // 1_000_000)
    finally:
        again.kill()
    assert prometheus.conflicts == [] and prometheus.decreases() == []
    every = turns + later.expected
    assert prometheus.latest_sum(COUNTERS["turns"]) == len(every)
    assert prometheus.latest_sum(COUNTERS["credits"]) == pytest.approx(
        sum(turn.nano_aiu for turn in every) / 1e9, rel=1e-9)
