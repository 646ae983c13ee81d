"""Exactly once, as a property: random sequences of what can happen to a tailer, checked
against what the files say after every step.

A Hypothesis state machine drives one in-process daemon run (service.Run) through appends
(whole and cut-off lines), new sessions, clean restarts, kill -9 (a run abandoned with
nothing saved), a collector that refuses, the state folder vanishing and coming back, logs
rewritten in place (shorter, then growing), a label vocabulary overflowing, scrapes and the
history push. After each step, once the tailer has caught up: its counters, the samples
"Prometheus" holds (history pushes and scrapes, in a stand-in that refuses what the real
TSDB refuses and notes any counter that goes down) and the traces the collector received
all equal the turns written to the files, each counted once.

Seeded and bounded for CI; HYDRAFUSION_LONG_TESTS=1 runs hundreds of sequences.
"""

import os
import re
import shutil
import tempfile
import threading
import time
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from otlp_sink import OtlpSink
from sessiongen import SessionWriter
from tailer.daemon import checkpoint
from tailer.daemon import service
from tailer.daemon import stages
from tailer.outputs.spans import trace_id

LONG = os.environ.get("HYDRAFUSION_LONG_TESTS") == "1"
# Recent, so the history's 5-minute grid up to now stays short.
START = datetime.now(timezone.utc) - timedelta(hours=6)
MODELS = ("gpt-5.6-sol", "mai-code-1.1-flash", "claude-sonnet-5")
LABELS = {"job": "test", "instance": "tailer"}
_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def landed() -> None:
    """Wait for a history push under way (its thread) to reach the fake Prometheus, as a
    real one that takes a push at once would have taken it before the stop or the kill."""
    deadline = time.monotonic() + 10
    while any(thread.name == "history-push" for thread in threading.enumerate()):
        assert time.monotonic() < deadline, "a history push never ended"
        time.sleep(0.001)


class FakePrometheus:
    """Samples by series, as a TSDB keeps them: a second, different value at a timestamp a
    series already has is refused (and noted here), an identical one is kept once."""

    def __init__(self):
        self.series: dict[tuple, dict[int, float]] = defaultdict(dict)
        self.conflicts: list[str] = []
        self._lock = threading.Lock()  # the history is pushed from a thread of the run's

    def push(self, series) -> int:
        """The remote writer's interface, for the history: nothing is refused as too large."""
        with self._lock:
            for labels, points in series:
                for at, value in points:
                    self._add(tuple(sorted(labels)), at, value)
        return 0

    def scrape(self, text: str, at_ms: int) -> None:
        with self._lock:
            self._scrape(text, at_ms)

    def _scrape(self, text: str, at_ms: int) -> None:
        for line in text.splitlines():
            match = _SAMPLE.match(line)
            if match:
                name, labels, value = match.groups()
                pairs = _LABEL.findall(labels or "")
                key = tuple(sorted([("__name__", name), *pairs, *LABELS.items()]))
                self._add(key, at_ms, float(value))

    def _add(self, key: tuple, at: int, value: float) -> None:
        known = self.series[key].get(at)
        if known is not None and known != value:
            self.conflicts.append(f"{dict(key)['__name__']} at {at}: {known} then {value}")
        else:
            self.series[key][at] = value

    def decreases(self) -> list[str]:
        """Counter series whose value goes down over time (Prometheus reads: a reset)."""
        landed()
        found = []
        for key, points in self.series.items():
            name = dict(key)["__name__"]
            if not name.endswith(("_total", "_count", "_bucket", "_sum")):
                continue
            values = [points[at] for at in sorted(points)]
            if any(later < earlier for earlier, later in zip(values, values[1:])):
                found.append(name)
        return found

    def latest_sum(self, name: str) -> float:
        landed()
        return sum(points[max(points)] for key, points in self.series.items()
                   if dict(key)["__name__"] == name and points)


def totals(exposition: str) -> dict[str, float]:
    """Turns, legs and credits as an exposition shows them, whatever the labels."""
    sums = defaultdict(float)
    for line in exposition.splitlines():
        match = _SAMPLE.match(line)
        if match and match.group(1) in ("hydrafusion_turns_total", "hydrafusion_legs_total",
                                        "hydrafusion_aiu_total"):
            sums[match.group(1)] += float(match.group(3))
    return sums


class ExactlyOnce(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="exactly-once-"))
        self.state = self.root / "state"
        self.state.mkdir()
        self.checkpoint = self.root / "checkpoint.json"
        self.sink = OtlpSink().__enter__()
        self.prometheus = FakePrometheus()
        self.writers: dict[str, SessionWriter] = {}
        self.written: dict[str, int] = {}  # lines of each writer already in its log
        self.cut: dict[str, bytes] = {}  # the rest of a line left half written
        self.truth: dict[tuple[str, str], object] = {}  # (session, fusion id) -> expected turn
        self.sessions_made = 0
        self.run = None
        self.last_alive_s = None

    # -- the daemon ---------------------------------------------------------------------

    def start(self) -> None:
        config = service.Config(
            state_dir=self.state, checkpoint=self.checkpoint, from_start=True,
            idle_timeout_s=10**6, traces_url=self.sink.url,
            history_url="http://127.0.0.1:9/api/v1/write", history_labels=LABELS,
        )
        heartbeat = service.Heartbeat(None, self.last_alive_s)
        self.run = service.Run(config, heartbeat, stages.load_saved(self.checkpoint),
                               history_writer=self.prometheus)

    def steps(self, count: int) -> None:
        for _ in range(count):
            self.run.step()
            self.last_alive_s = time.time()

    def drain(self) -> None:
        """Step until everything written is read, sent, saved and its history pushed."""
        deadline = time.monotonic() + 30
        settled = 0
        while settled < 3:  # three quiet passes in a row: nothing was left to notice
            assert time.monotonic() < deadline, "the tailer did not settle"
            self.steps(1)
            quiet = (self.run.tailer.caught_up and self.run.outbox.pending_units == 0
                     and self.run.history_push.history is None and not self.run.saves.dirty)
            settled = settled + 1 if quiet else 0
            time.sleep(0.002)

    def scrape(self) -> None:
        time.sleep(0.002)  # a scrape's "now" after any sample the history placed
        self.prometheus.scrape(self.run.registry.render(), time.time_ns() // 1_000_000)
        # A live tailer answered it, and a live tailer beats within HEARTBEAT_S: the next
        # run's history must place nothing before this scrape.
        self.last_alive_s = time.time()

    # -- what happens to the logs ---------------------------------------------------------

    def append(self, session_id: str, cut_last: bool) -> None:
        writer = self.writers[session_id]
        lines = writer.lines()
        text = self.cut.pop(session_id, b"") + "".join(
            line + "\n" for line in lines[self.written[session_id]:]).encode()
        self.written[session_id] = len(lines)
        if cut_last and len(text) > 2:
            text, self.cut[session_id] = text[:-len(text) // 3], text[-len(text) // 3:]
        log = self.state / session_id / "events.jsonl"
        log.parent.mkdir(exist_ok=True)
        with open(log, "ab") as handle:
            handle.write(text)
        self.note_truth(session_id)

    def note_truth(self, session_id: str) -> None:
        """The turns whose every line is whole in the log are the ones to count."""
        writer = self.writers[session_id]
        # While its last lines are not whole, the turns whose last fusion event is.
        data = (self.state / session_id / "events.jsonl").read_bytes()
        whole = data[:data.rfind(b"\n") + 1].decode().splitlines()
        for turn in writer.expected:
            if any(turn.fusion_id in line and turn.end_timestamp in line for line in whole):
                self.truth[(session_id, turn.fusion_id)] = turn

    def add_turns(self, writer: SessionWriter, kinds: list[int], models: tuple[str, ...]) -> None:
        for kind in kinds:
            first, second = models[kind % len(models)], models[(kind + 1) % len(models)]
            if kind % 3 == 0:
                writer.single(first)
            elif kind % 3 == 1:
                writer.cascade(first, second, verdict="reject" if kind % 2 else "accept",
                               repair_model=second)
            else:
                writer.critique(first, [second])

    @initialize()
    def begin(self):
        self.start()

    @rule(turns=st.lists(st.integers(0, 5), min_size=1, max_size=3), cut=st.booleans())
    def new_session(self, turns, cut):
        self.sessions_made += 1
        session_id = f"s{self.sessions_made}"
        writer = self.writers[session_id] = SessionWriter(session_id, START)
        self.written[session_id] = 0
        self.add_turns(writer, turns, MODELS)
        self.append(session_id, cut)

    @rule(data=st.data(), turns=st.lists(st.integers(0, 5), max_size=3), cut=st.booleans())
    def append_turns(self, data, turns, cut):
        if not self.writers:
            return
        session_id = data.draw(st.sampled_from(sorted(self.writers)))
        self.add_turns(self.writers[session_id], turns, MODELS)
        self.append(session_id, cut)

    @rule()
    def many_models(self):
        """A session whose models overflow the label vocabulary (folded into "other")."""
        self.sessions_made += 1
        session_id = f"s{self.sessions_made}"
        writer = self.writers[session_id] = SessionWriter(session_id, START)
        self.written[session_id] = 0
        for index in range(55):
            writer.single(f"model-{self.sessions_made}-{index}")
        self.append(session_id, False)

    @rule(data=st.data(), turns=st.lists(st.integers(0, 5), min_size=1, max_size=2))
    def rewrite_log(self, data, turns):
        """The CLI rewinds a session: its log is rewritten shorter, in place, then grows."""
        if not self.writers:
            return
        session_id = data.draw(st.sampled_from(sorted(self.writers)))
        # The turns the log held are counted only if they were read before the rewrite:
        # one overwritten before any pass saw it is gone, and the truth cannot hold it.
        self.drain()
        self.sessions_made += 1
        writer = SessionWriter(f"{session_id}-rewound-{self.sessions_made}", START)
        self.add_turns(writer, turns, MODELS[1:])
        log = self.state / session_id / "events.jsonl"
        lines = writer.lines()
        with open(log, "r+b") as handle:  # the same file, shorter
            handle.truncate(0)
            handle.write("".join(line + "\n" for line in lines[:2]).encode())
        self.steps(2)
        self.writers[session_id], self.written[session_id] = writer, 2
        self.cut.pop(session_id, None)
        self.append(session_id, False)

    @rule(count=st.integers(1, 4))
    def step(self, count):
        self.steps(count)

    @rule()
    def scrape_now(self):
        self.scrape()

    @rule()
    def restart(self):
        self.steps(1)
        landed()
        self.run.stop()
        self.start()

    @rule(count=st.integers(0, 3))
    def kill(self, count):
        """kill -9 after a few steps: nothing is saved past the last save."""
        self.steps(count)
        landed()
        self.run.abandon()
        self.start()

    @rule(refusals=st.integers(1, 3))
    def collector_refuses(self, refusals):
        self.sink.script(*[503] * refusals)

    @rule()
    def state_folder_vanishes_and_returns(self):
        aside = self.root / "aside"
        self.state.rename(aside)
        self.state.mkdir()
        self.steps(2)
        self.state.rmdir()
        aside.rename(self.state)
        self.steps(1)

    @rule()
    def complete_cut_lines(self):
        for session_id in list(self.cut):
            self.append(session_id, False)

    # -- what must hold ------------------------------------------------------------------

    @invariant()
    def prometheus_never_sees_a_reset_or_a_conflict(self):
        assert self.prometheus.conflicts == []
        assert self.prometheus.decreases() == []

    @rule()
    def everything_is_counted_once(self):
        self.drain()
        self.scrape()
        self.drain()  # a scrape that was shown a zero first makes the tailer save
        self.scrape()
        truth = list(self.truth.values())
        expected = {
            "hydrafusion_turns_total": len(truth),
            "hydrafusion_legs_total": sum(len(turn.legs) for turn in truth),
            "hydrafusion_aiu_total": sum(turn.nano_aiu for turn in truth) / 1e9,
        }
        counted = totals(self.run.registry.render_final())
        for name, value in expected.items():
            assert counted[name] == pytest.approx(value, rel=1e-9, abs=1e-9), name
            assert self.prometheus.latest_sum(name) == pytest.approx(value, rel=1e-9, abs=1e-9), name
        roots = {span["traceId"] for span in self.sink.spans() if "parentSpanId" not in span}
        assert roots == {trace_id(session, fusion) for session, fusion in self.truth}

    def teardown(self):
        if self.run is not None:
            self.run.abandon()
        self.sink.__exit__(None, None, None)
        shutil.rmtree(self.root, ignore_errors=True)


def test_every_turn_is_counted_and_exported_exactly_once_whatever_happens(monkeypatch):
    monkeypatch.setattr(service, "POLL_INTERVAL_S", 0.01)
    monkeypatch.setattr(service, "CHECKPOINT_TURNS_S", 0.0)
    monkeypatch.setattr(stages, "EXPORT_BATCH_DELAY_S", 0.01)
    monkeypatch.setattr(service, "HISTORY_FIRST_BACKOFF_S", 0.01)
    monkeypatch.setattr(checkpoint, "HEARTBEAT_S", 0.01)
    ExactlyOnce.TestCase.settings = settings(
        max_examples=300 if LONG else 12, stateful_step_count=40 if LONG else 14,
        deadline=None, derandomize=not LONG, suppress_health_check=list(HealthCheck),
        # Shrinking a failure costs minutes here; the failing steps are printed as found.
        phases=list(Phase) if LONG else [Phase.explicit, Phase.generate],
    )
    run_state_machine_as_test(ExactlyOnce, settings=ExactlyOnce.TestCase.settings)
