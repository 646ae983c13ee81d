"""A team's load on one central stack: many tailers through one real collector, on loopback.

    python bench/team_load.py                             # 200 tailers, 120 s of live turns
    python bench/team_load.py --tailers 3 --seconds 10    # a smoke run

Each simulated developer is the real tailer, a process started as a user starts it
(`python -m tailer run`), on a session log of its own (tests/sessiongen.py): a few turns
are there when it starts, then the script appends one whole turn to it every --turn-every
seconds, as the CLI writes them. Processes rather than threads: the tailer is a process
per laptop, and its own threads, locks and start-up are part of what a laptop runs; 200
of them take about 6 GB of memory, which the machines this runs on have.

Every tailer sends its traces and pushes its counters by OTLP (the standard OTEL_*
variables, each with its own service.instance.id and user.name) to ONE collector: the
stack's collector build (tests/services.py) on the gateway configuration. The collector
sends traces to a counting OTLP receiver in this process (standing in for Tempo: it counts
spans, it stores none) and metrics to Prometheus 3's OTLP receiver (the stack's build).
Prometheus also scrapes the collector's own metrics.

When the time is up the script stops appending, waits for the spans to arrive, stops the
tailers (each pushes its counters once more at exit), and reports: spans/s and samples/s,
the collector's and Prometheus's CPU and peak memory (from /proc), per-tailer figures, and
whether anything was dropped: spans written to the logs against spans received (each
counted once by its ids), turns and credits in Prometheus against the logs, the series per
tailer, and the collector's own counts of what it refused or failed to send. It never
fails on a figure; it exits 1 when something was lost, so a smoke test can run it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: E402

from prom import free_port, running_prometheus  # noqa: E402
from services import binary  # noqa: E402
from sessiongen import SessionWriter  # noqa: E402

MODELS = ("gpt-5.6-sol", "claude-sonnet-4.6", "gemini-3.1-pro", "mai-code-1.1-flash")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# Tailers started, and stopped, a second: laptops come and go at different times, and 200
# at once on the 2 cores this runs on is a storm no team's stack sees.
TAILERS_A_SECOND = 20
DRAIN_SECONDS = 120


@dataclass(frozen=True)
class Settings:
    tailers: int
    seconds: float
    turn_every: float
    first_turns: int
    metric_interval: float
    seed: int


# -- The developers' logs -----------------------------------------------------------------

class DeveloperLog:
    """One developer's session: every turn generated up front, the file written a turn at
    a time. spans() is how many spans the turns written so far must give (a root, a route
    span, one per leg, one per model call and per tool call)."""

    def __init__(self, state_dir: Path, session_id: str, turns: int, rng: random.Random):
        self.state_dir = state_dir
        self.writer = SessionWriter(session_id, datetime.now(timezone.utc) - timedelta(hours=2))
        self.ends = []  # lines written once each turn is
        for _ in range(turns):
            random_turn(self.writer, rng)
            self.ends.append(len(self.writer.lines()))
        self.written = 0  # turns

    def write_first(self, turns: int) -> None:
        self.writer.write(self.state_dir)  # the folder and workspace.yaml, as the CLI makes them
        events = self.state_dir / self.writer.session_id / "events.jsonl"
        events.write_text("".join(line + "\n" for line in self.writer.lines()[:self.ends[turns - 1]]))
        self.written = turns

    def append_turn(self) -> bool:
        """Appends the next turn; False when every generated turn is written."""
        if self.written == len(self.ends):
            return False
        lines = self.writer.lines()[self.ends[self.written - 1]:self.ends[self.written]]
        with open(self.state_dir / self.writer.session_id / "events.jsonl", "a") as events:
            events.write("".join(line + "\n" for line in lines))
        self.written += 1
        return True

    def turns(self):
        return self.writer.expected[:self.written]

    def spans(self) -> int:
        return sum(2 + len(turn.legs) + turn.calls + turn.tools for turn in self.turns())

    def credits(self) -> float:
        return sum(leg.nano_aiu for turn in self.turns() for leg in turn.legs) / 1e9


def random_turn(writer: SessionWriter, rng: random.Random) -> None:
    """A fusion turn of a realistic mix: mostly single, then cascades, some critiques."""
    a, b, c = rng.sample(MODELS, 3)
    kind = rng.random()
    if kind < 0.5:
        writer.single(a)
    elif kind < 0.8:
        writer.cascade(a, b, verdict=rng.choice(("accept", "accept", "reject")), repair_model=b)
    else:
        writer.critique(a, [b, c] if rng.random() < 0.3 else [b], revision_model=a if rng.random() < 0.5 else None)


# -- The stand-in for Tempo -----------------------------------------------------------------

class SpanCounter:
    """An OTLP/HTTP trace receiver on 127.0.0.1 that counts spans and keeps only their ids:
    a span sent twice (a retry) counts once in `unique`, every time in `received`."""

    def __init__(self):
        self.received = 0
        self.requests = 0
        self.body_bytes = 0  # as sent (the collector gzips)
        self.proto_bytes = 0  # decompressed
        self.by_instance: dict[str, set[bytes]] = {}
        self.errors = 0
        self._lock = threading.Lock()
        self._server = _QuietServer(("127.0.0.1", 0), _SpanHandler)
        self._server.counter = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def unique(self) -> int:
        with self._lock:
            return sum(len(ids) for ids in self.by_instance.values())

    def take(self, body: bytes, encoding: str | None) -> None:
        proto = gzip.decompress(body) if encoding == "gzip" else body
        request = ExportTraceServiceRequest.FromString(proto)
        with self._lock:
            self.requests += 1
            self.body_bytes += len(body)
            self.proto_bytes += len(proto)
            for resource_spans in request.resource_spans:
                instance = next((a.value.string_value for a in resource_spans.resource.attributes
                                 if a.key == "service.instance.id"), "")
                ids = self.by_instance.setdefault(instance, set())
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        ids.add(span.trace_id + span.span_id)
                        self.received += 1

    def __enter__(self) -> "SpanCounter":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        pass  # a request the collector gave up on (its client's timeout): it is sent again


class _SpanHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # the collector keeps its connections open

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        status = 200
        try:
            self.server.counter.take(body, self.headers.get("Content-Encoding"))
        except Exception:  # not OTLP protobuf: say so, count it
            self.server.counter.errors += 1
            status = 400
        self.send_response(status)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format, *args) -> None:
        pass


# -- What the processes use ---------------------------------------------------------------

@dataclass
class ProcessUse:
    """CPU seconds (user + system, all threads) and memory of a process, from /proc."""
    pid: int
    cpu_at_start: float = 0.0

    def cpu(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS

    def memory_mb(self) -> dict[str, float]:
        """VmHWM (peak resident) and VmRSS (now), in MB."""
        status = dict(line.split(":", 1) for line in Path(f"/proc/{self.pid}/status").read_text().splitlines())
        return {key: int(status[key].split()[0]) * 1024 / 1e6 for key in ("VmHWM", "VmRSS")}

    def start(self) -> None:
        self.cpu_at_start = self.cpu()

    def cpu_since_start(self) -> float:
        return self.cpu() - self.cpu_at_start


# -- The central stack --------------------------------------------------------------------

# The team's configurations (docs/TEAM.md).
GATEWAY_CONFIG = REPO / "collector" / "gateway.yaml"
CENTRAL_PROMETHEUS = REPO / "prometheus" / "central.yml"
DELIVERY_SETTINGS = ("sending_queue", "retry_on_failure", "timeout", "compression")


def collector_config(otlp_port: int, telemetry_port: int, sink: str, prometheus: str) -> dict:
    """The gateway configuration on loopback: its receiver on otlp_port (HTTP: no
    certificate here), its traces to sink and metrics to prometheus's OTLP receiver, each
    exporter keeping its delivery settings; its own metrics on telemetry_port."""
    config = yaml.safe_load(GATEWAY_CONFIG.read_text())
    config["receivers"]["otlp"]["protocols"] = {"http": {"endpoint": f"127.0.0.1:{otlp_port}"}}
    pipelines = config["service"]["pipelines"]
    targets = {"traces": sink, "metrics": f"{prometheus}/api/v1/otlp"}
    for signal_name, endpoint in targets.items():
        (production,) = pipelines[signal_name]["exporters"]
        delivery = {key: value for key, value in config["exporters"][production].items()
                    if key in DELIVERY_SETTINGS}
        pipelines[signal_name]["exporters"] = [f"otlp_http/{signal_name}"]
        config["exporters"][f"otlp_http/{signal_name}"] = {"endpoint": endpoint, **delivery}
    config["exporters"] = {name: exporter for name, exporter in config["exporters"].items()
                           if name in ("otlp_http/traces", "otlp_http/metrics")}
    config["service"]["telemetry"] = {"metrics": {"readers": [{"pull": {"exporter": {"prometheus": {
        "host": "127.0.0.1", "port": telemetry_port}}}}]}}
    return config


def prometheus_config(collector_telemetry: str) -> dict:
    """The central Prometheus's configuration (its OTLP translation: the promoted resource
    attributes), scraping the collector's own metrics instead of its own."""
    config = yaml.safe_load(CENTRAL_PROMETHEUS.read_text())
    return {"otlp": config["otlp"], "storage": config["storage"],
            "scrape_configs": [{"job_name": "otel-collector", "scrape_interval": "2s",
                                "static_configs": [{"targets": [collector_telemetry]}]}]}


def wait_listening(port: int, process: subprocess.Popen, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{what} exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"{what} not listening on {port} after {timeout} s")


# -- The tailers --------------------------------------------------------------------------

def tailer_environment(collector: str, instance: str, interval_s: float) -> dict[str, str]:
    """What each laptop sets (docs/TEAM.md): the collector's address, who it is, how often
    it pushes its counters."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("OTEL_", "COPILOT_", "HYDRAFUSION_"))}
    env.update({
        "PYTHONPATH": str(REPO),
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector,
        "OTEL_METRICS_EXPORTER": "otlp",
        "OTEL_METRIC_EXPORT_INTERVAL": str(int(interval_s * 1000)),
        "OTEL_RESOURCE_ATTRIBUTES": f"service.instance.id={instance},user.name={instance}",
    })
    return env


@dataclass
class Tailer:
    instance: str
    log: DeveloperLog
    process: subprocess.Popen
    use: ProcessUse = field(init=False)
    peak_mb: float = 0.0

    def __post_init__(self):
        self.use = ProcessUse(self.process.pid)

    @property
    def output(self) -> str:
        """What the tailer logged (stdout and stderr)."""
        return (self.log.state_dir.parent / "tailer.log").read_text(errors="replace")


def developer_logs(work: Path, settings: Settings, rng: random.Random) -> list[DeveloperLog]:
    """Each developer's folder (work/dev-NNN) with its session log's first turns written."""
    turns = settings.first_turns + int(settings.seconds / settings.turn_every) + 1
    logs = []
    for index in range(settings.tailers):
        state = work / f"dev-{index:03d}" / "session-state"
        state.mkdir(parents=True)
        logs.append(DeveloperLog(state, f"load-dev-{index:03d}", turns, rng))
        logs[-1].write_first(settings.first_turns)
    return logs


def start_tailer(log: DeveloperLog, settings: Settings, collector: str) -> Tailer:
    home = log.state_dir.parent
    with open(home / "tailer.log", "wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "tailer", "run", "--state-dir", str(log.state_dir), "--from-start",
             "--checkpoint", str(home / "checkpoint.json"), "--metrics-address", "none"],
            cwd=REPO, env=tailer_environment(collector, home.name, settings.metric_interval),
            stdout=output, stderr=subprocess.STDOUT)
    return Tailer(home.name, log, process)


def stop_tailers(tailers: list[Tailer]) -> list[int]:
    """SIGTERM to each in turn, then wait: each pushes its counters once more as it exits."""
    for tailer in tailers:
        tailer.peak_mb = tailer.use.memory_mb()["VmHWM"]
        tailer.process.send_signal(signal.SIGTERM)
        time.sleep(1 / TAILERS_A_SECOND)
    codes = []
    for tailer in tailers:
        try:
            codes.append(tailer.process.wait(timeout=60))
        except subprocess.TimeoutExpired:
            tailer.process.kill()
            codes.append(tailer.process.wait())
    return codes


def wait_until(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


# -- The run ------------------------------------------------------------------------------

def measure(settings: Settings, work: Path) -> dict:
    """Runs the whole load and returns its figures (see report())."""
    rng = random.Random(settings.seed)
    otlp_port, telemetry_port = free_port(), free_port()
    with SpanCounter() as sink, running_prometheus(
            work, [], scrape_interval="2s", extra_config=prometheus_config(f"127.0.0.1:{telemetry_port}"),
            extra_flags=["--web.enable-otlp-receiver"]) as prom:
        config_path = work / "collector.yaml"
        config_path.write_text(json.dumps(collector_config(otlp_port, telemetry_port, sink.endpoint, prom.url)))
        with open(work / "collector.log", "wb") as collector_log:
            collector = subprocess.Popen([binary("otelcol"), f"--config={config_path}"],
                                         stdout=collector_log, stderr=subprocess.STDOUT)
        try:
            wait_listening(otlp_port, collector, "the collector")
            return load(settings, work, rng, sink, prom, collector, f"http://127.0.0.1:{otlp_port}")
        finally:
            collector.terminate()
            collector.wait(timeout=30)


def load(settings, work, rng, sink, prom, collector, collector_url) -> dict:
    figures = {"settings": settings.__dict__}
    services = {"collector": ProcessUse(collector.pid), "prometheus": ProcessUse(prom.process.pid)}
    logs = developer_logs(work, settings, rng)
    tailers = []
    began = time.monotonic()
    for log in logs:
        tailers.append(start_tailer(log, settings, collector_url))
        time.sleep(1 / TAILERS_A_SECOND)

    def expected() -> int:
        return sum(tailer.log.spans() for tailer in tailers)

    figures["first_turns_in_s"] = (wait_until(lambda: sink.unique() >= expected(), DRAIN_SECONDS)
                                   and round(time.monotonic() - began, 1))
    # The live window: every tailer gets a turn every turn_every seconds, their turns spread.
    for use in [*services.values(), *(tailer.use for tailer in tailers)]:
        use.start()
    received_before, wall_start = sink.unique(), time.time()
    figures["turns_appended"], window = append_turns(tailers, settings)
    figures["window_s"] = round(window, 1)
    figures["spans_received_in_window"] = sink.unique() - received_before
    figures["cpu_s"] = {name: round(use.cpu_since_start(), 2) for name, use in services.items()}
    figures["tailers_cpu_s"] = round(sum(tailer.use.cpu_since_start() for tailer in tailers), 2)
    # The last turns' spans, then the tailers' last push, at exit.
    window_end = time.monotonic()
    drained = wait_until(lambda: sink.unique() >= expected(), DRAIN_SECONDS)
    figures["drain_s"] = round(time.monotonic() - window_end, 1)
    exit_codes = stop_tailers(tailers)
    stopped = time.time()  # the collector's counts from a scrape after the last push
    prom.wait_for('timestamp(up{job="otel-collector"})', lambda r: r and float(r[0]["value"][1]) > stopped + 1)
    figures["memory_mb"] = {name: use.memory_mb() for name, use in services.items()}
    figures["tailer_exit_codes"] = sorted(set(exit_codes))
    figures["tailer_peak_mb"] = {"mean": round(sum(t.peak_mb for t in tailers) / len(tailers), 1),
                                 "max": round(max(t.peak_mb for t in tailers), 1)}
    figures["spans"] = {"written": expected(), "received_unique": sink.unique(), "received": sink.received,
                        "drained": drained, "requests": sink.requests, "gzip_bytes": sink.body_bytes,
                        "proto_bytes": sink.proto_bytes, "invalid_requests": sink.errors,
                        "turns": sum(len(tailer.log.turns()) for tailer in tailers)}
    figures["spans"]["missing_by_instance"] = {
        tailer.instance: tailer.log.spans() - len(sink.by_instance.get(tailer.instance, ()))
        for tailer in tailers if tailer.log.spans() != len(sink.by_instance.get(tailer.instance, ()))}
    figures["tailer_warnings"] = tailer_warnings(tailers)
    figures["prometheus"] = prometheus_figures(prom, tailers, window, wall_start)
    figures["collector"] = collector_figures(prom)
    return figures


def append_turns(tailers: list[Tailer], settings: Settings) -> tuple[int, float]:
    """A turn to each tailer's log every turn_every seconds, the tailers' turns spread
    evenly over that time, for settings.seconds; (turns appended, the window's length)."""
    start, appended = time.monotonic(), 0
    for step in range(int(settings.seconds / settings.turn_every * len(tailers))):
        time.sleep(max(0.0, start + step * settings.turn_every / len(tailers) - time.monotonic()))
        appended += tailers[step % len(tailers)].log.append_turn()
    time.sleep(max(0.0, start + settings.seconds - time.monotonic()))
    return appended, time.monotonic() - start


# What a tailer logs when its push at exit did not go through: its counters in Prometheus
# stay behind until its next run pushes them.
LAST_PUSH_FAILED = "the last metrics push did not go through"


def tailer_warnings(tailers: list[Tailer]) -> dict[str, int]:
    """The tailers' WARNING and ERROR lines, counted by what they say (numbers, addresses
    and ids blanked), so a run that lost something says where it went wrong."""
    counts: dict[str, int] = {}
    for tailer in tailers:
        for line in tailer.output.splitlines():
            level, _, message = line[24:].partition(" ")
            if level in ("WARNING", "ERROR"):
                key = level + " " + re.sub(r"[0-9a-f-]{36}|\d+(\.\d+)?", "N", message)[:200]
                counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: -item[1]))


def by_instance(prom, expr: str) -> dict[str, float]:
    return {sample["metric"].get("instance", ""): float(sample["value"][1]) for sample in prom.query(expr)}


def prometheus_figures(prom, tailers: list[Tailer], window: float, wall_start: float) -> dict:
    """The tailers' series in Prometheus against the logs' truth, and what the window stored."""
    turns = by_instance(prom, "sum by (instance) (hydrafusion_turns_total)")
    credits = by_instance(prom, "sum by (instance) (hydrafusion_aiu_total)")
    exported = by_instance(prom, "sum by (instance) (hydrafusion_tailer_spans_exported_total)")
    series = by_instance(prom, 'count by (instance) ({__name__=~"hydrafusion_.+"})')
    wrong = {}
    for tailer in tailers:
        truth = (len(tailer.log.turns()), tailer.log.credits(), tailer.log.spans())
        got = (turns.get(tailer.instance), credits.get(tailer.instance), exported.get(tailer.instance))
        if got[0] != truth[0] or got[2] != truth[2] or got[1] is None or abs(got[1] - truth[1]) > 1e-6 * truth[1]:
            said = LAST_PUSH_FAILED in tailer.output
            wrong[tailer.instance] = {"prometheus": got, "logs": truth, "said_its_last_push_failed": said}
    end = wall_start + window
    # count_over_time drops the name, so the families are counted one by one.
    names = {sample["metric"]["__name__"] for sample in prom.query('count by (__name__) ({__name__=~"hydrafusion_.+"})')}
    samples = sum(float(result[0]["value"][1]) for result in (
        prom.query(f"sum(count_over_time({name}[{int(window)}s]))", time=end) for name in names) if result)
    families = {sample["metric"]["__name__"]: float(sample["value"][1]) / max(len(series), 1)
                for sample in prom.query('topk(5, count by (__name__) ({__name__=~"hydrafusion_.+"}))')}
    return {
        "largest_families_per_tailer": families,
        "instances": len(series),
        "series": sum(series.values()),
        "series_per_tailer": {"min": min(series.values(), default=0), "max": max(series.values(), default=0)},
        "samples_in_window": samples,
        "wrong_by_instance": wrong,
        "users": len(prom.query('count by (user_name) (hydrafusion_tailer_lines_total)')),
    }


COLLECTOR_COUNTS = {
    "spans_accepted": "otelcol_receiver_accepted_spans",
    "spans_refused": "otelcol_receiver_refused_spans",
    "spans_sent": "otelcol_exporter_sent_spans",
    "spans_send_failed": "otelcol_exporter_send_failed_spans",
    "points_accepted": "otelcol_receiver_accepted_metric_points",
    "points_refused": "otelcol_receiver_refused_metric_points",
    "points_sent": "otelcol_exporter_sent_metric_points",
    "points_send_failed": "otelcol_exporter_send_failed_metric_points",
    "enqueue_failed_spans": "otelcol_exporter_enqueue_failed_spans",
    "enqueue_failed_points": "otelcol_exporter_enqueue_failed_metric_points",
}


def collector_figures(prom) -> dict:
    """The collector's own counts (their last scrape), 0 for a series it never made."""
    figures = {}
    for name, metric in COLLECTOR_COUNTS.items():
        result = prom.query(f'sum({{__name__=~"{metric}(_total)?"}})')
        figures[name] = float(result[0]["value"][1]) if result else 0.0
    return figures


# -- The report ---------------------------------------------------------------------------

def lost(figures: dict) -> list[str]:
    """What went missing, in words; empty when nothing did."""
    spans, prom, collector = figures["spans"], figures["prometheus"], figures["collector"]
    problems = []
    if spans["received_unique"] != spans["written"]:
        problems.append(f"spans: {spans['written']} written to the logs, {spans['received_unique']} received "
                        f"(by tailer: {spans['missing_by_instance']})")
    if spans["invalid_requests"]:
        problems.append(f"{spans['invalid_requests']} trace requests the stand-in could not decode")
    if prom["instances"] != figures["settings"]["tailers"]:
        problems.append(f"{prom['instances']} tailers' series in Prometheus, not {figures['settings']['tailers']}")
    if prom["wrong_by_instance"]:
        said = sum(wrong["said_its_last_push_failed"] for wrong in prom["wrong_by_instance"].values())
        problems.append(f"Prometheus differs from the logs for {len(prom['wrong_by_instance'])} tailers "
                        f"({said} of them logged that their last push did not go through): "
                        f"{dict(list(prom['wrong_by_instance'].items())[:3])}")
    # The gateway holds nothing: what its exporter fails to send goes back to the tailer as
    # an error (counted as refused too), and the tailer sends it again, so that is not a
    # loss; only data the collector dropped itself, or that never arrived, is.
    dropped = {name: value for name, value in collector.items() if value and name.startswith("enqueue_failed")}
    if dropped:
        problems.append(f"the collector dropped: {dropped}")
    if figures["tailer_exit_codes"] != [0]:
        problems.append(f"tailer exit codes {figures['tailer_exit_codes']}")
    return problems


def per_tailer(figures: dict) -> dict[str, float]:
    """The figures a team's sizing scales from, per developer."""
    n, window = figures["settings"]["tailers"], figures["window_s"]
    spans, prom = figures["spans"], figures["prometheus"]
    return {
        "spans_per_s": figures["spans_received_in_window"] / window / n,
        "samples_per_s": prom["samples_in_window"] / window / n,
        "series": prom["series"] / max(prom["instances"], 1),
        "spans_per_turn": spans["written"] / spans["turns"],
        "gzip_bytes_per_span": spans["gzip_bytes"] / max(spans["received"], 1),
        "proto_bytes_per_span": spans["proto_bytes"] / max(spans["received"], 1),
        "cpu_percent_of_a_core": 100 * figures["tailers_cpu_s"] / window / n,
        "peak_rss_mb": figures["tailer_peak_mb"]["mean"],
    }


# What a developer's month is taken to be for the team arithmetic (docs/TEAM.md): the
# tailer runs while they work and they ask HydraFusion something every 8 minutes. Every
# figure below is linear in these, so another team scales them by its own.
HOURS_A_DAY = 8
DAYS_A_MONTH = 21
TURNS_A_DAY = 60
PUSH_INTERVAL_S = 60  # OTEL_METRIC_EXPORT_INTERVAL's default
BYTES_PER_SAMPLE = 1.5  # Prometheus's compressed TSDB takes 1 to 2 bytes a sample
TEAMS = (40, 5000)


def sizing(figures: dict, developers: int) -> dict[str, float]:
    """A team's load on the central stack from the measured per-tailer figures: series and
    samples/s while everyone works (each push carries every series), spans/s on average over
    the working day, a month's storage, and the collector cores this run's collector would
    need at most (its CPU here, scaled by the larger of the two rates' ratios, summed)."""
    one = figures["per_tailer"]
    series = developers * one["series"]
    samples_per_s = series / PUSH_INTERVAL_S
    spans_per_s = developers * TURNS_A_DAY * one["spans_per_turn"] / (HOURS_A_DAY * 3600)
    hours = HOURS_A_DAY * DAYS_A_MONTH
    measured_spans = figures["spans_received_in_window"] / figures["window_s"]
    measured_samples = figures["prometheus"]["samples_in_window"] / figures["window_s"]
    collector_share = figures["cpu_s"]["collector"] / figures["window_s"]
    return {
        "developers": developers,
        "series": series,
        "samples_per_s": samples_per_s,
        "spans_per_s": spans_per_s,
        "metrics_gb_a_month": series * hours * 3600 / PUSH_INTERVAL_S * BYTES_PER_SAMPLE / 1e9,
        "traces_gb_a_month": developers * TURNS_A_DAY * DAYS_A_MONTH * one["spans_per_turn"]
        * one["gzip_bytes_per_span"] / 1e9,
        "collector_cores_at_most": collector_share * (spans_per_s / (measured_spans or math.nan)
                                                      + samples_per_s / (measured_samples or math.nan)),
    }


def report(figures: dict) -> str:
    settings, window = figures["settings"], figures["window_s"]
    spans, prom, collector = figures["spans"], figures["prometheus"], figures["collector"]
    one = per_tailer(figures)
    problems = lost(figures)
    lines = [
        f"{settings['tailers']} tailers (processes), a turn each every {settings['turn_every']:g} s for "
        f"{window:g} s, counters pushed every {settings['metric_interval']:g} s; "
        f"first turns in after {figures['first_turns_in_s']} s, the rest {figures['drain_s']} s after the window",
        "",
        f"spans/s      {figures['spans_received_in_window'] / window:10.1f}   "
        f"({figures['spans_received_in_window']} in the window, {figures['turns_appended']} turns appended)",
        f"samples/s    {prom['samples_in_window'] / window:10.1f}   "
        f"({prom['samples_in_window']:.0f} samples of the tailers' series stored in the window)",
        f"series       {prom['series']:10.0f}   ({prom['instances']} instances, {prom['users']} users, "
        f"{prom['series_per_tailer']['min']:.0f} to {prom['series_per_tailer']['max']:.0f} a tailer)",
        "",
        f"{'':12} {'CPU, % of a core':>17} {'peak RSS MB':>12}",
    ]
    for name in ("collector", "prometheus"):
        lines.append(f"{name:12} {100 * figures['cpu_s'][name] / window:17.1f} "
                     f"{figures['memory_mb'][name]['VmHWM']:12.1f}")
    lines.append(f"{'each tailer':12} {one['cpu_percent_of_a_core']:17.2f} {one['peak_rss_mb']:12.1f}"
                 f"   (largest {figures['tailer_peak_mb']['max']} MB)")
    lines += [
        "",
        f"per tailer: {one['spans_per_s']:.3f} spans/s, {one['samples_per_s']:.3f} samples/s, "
        f"{one['series']:.0f} series; {one['spans_per_turn']:.1f} spans a turn, "
        f"{one['gzip_bytes_per_span']:.0f} B a span gzipped ({one['proto_bytes_per_span']:.0f} B protobuf)",
        "",
        f"spans: {spans['written']} written, {spans['received_unique']} received once "
        f"({spans['received']} with retries), {spans['requests']} requests",
        "largest families, series a tailer: " + ", ".join(
            f"{name} {count:.0f}" for name, count in prom["largest_families_per_tailer"].items()),
        "collector: " + ", ".join(f"{name} {value:.0f}" for name, value in collector.items()),
        f"  (refused = failed to send: each went back to its tailer as an error and was sent again; "
        f"{spans['received'] - spans['received_unique']} spans arrived twice)",
        "tailers' warnings: " + ("none" if not figures["tailer_warnings"] else "; ".join(
            f"{count} x {message}" for message, count in list(figures["tailer_warnings"].items())[:5])),
        "",
        f"a team ({TURNS_A_DAY} turns a day each, {HOURS_A_DAY} h a day, {DAYS_A_MONTH} days a month, "
        f"pushes every {PUSH_INTERVAL_S} s):",
        f"{'developers':>10} {'series':>10} {'samples/s':>10} {'spans/s':>8} {'metrics GB/month':>17} "
        f"{'traces GB/month':>16} {'collector cores':>16}",
    ]
    for team in figures["teams"]:
        lines.append(f"{team['developers']:>10} {team['series']:>10.0f} {team['samples_per_s']:>10.0f} "
                     f"{team['spans_per_s']:>8.1f} {team['metrics_gb_a_month']:>17.1f} "
                     f"{team['traces_gb_a_month']:>16.1f} {team['collector_cores_at_most']:>16.2f}")
    lines += ["", "NOTHING LOST" if not problems else "LOST:\n  " + "\n  ".join(problems)]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tailers", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=120, help="the live window (default 120)")
    parser.add_argument("--turn-every", type=float, default=10,
                        help="seconds between two turns of one tailer in the window (default 10)")
    parser.add_argument("--first-turns", type=int, default=5, help="turns in each log at start (default 5)")
    parser.add_argument("--metric-interval", type=float, default=15,
                        help="OTEL_METRIC_EXPORT_INTERVAL in seconds (default 15)")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, configs)")
    args = parser.parse_args(argv)
    settings = Settings(args.tailers, args.seconds, args.turn_every, args.first_turns, args.metric_interval, args.seed)
    work = Path(tempfile.mkdtemp(prefix="team-load-"))
    try:
        figures = measure(settings, work)
    finally:
        if args.keep:
            print(f"work directory: {work}", file=sys.stderr)
        else:
            subprocess.run(["rm", "-rf", str(work)], check=False)
    figures["per_tailer"] = per_tailer(figures)
    figures["teams"] = [sizing(figures, developers) for developers in TEAMS]
    figures["lost"] = lost(figures)
    print(report(figures))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 1 if figures["lost"] else 0


if __name__ == "__main__":
    sys.exit(main())
