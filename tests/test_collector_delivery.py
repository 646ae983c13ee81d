"""The real collector, with the stack's delivery settings, between the tailer and a stand-in Tempo.

The collector answers the tailer only once the next hop has the spans, and passes the next
hop's refusal back (collector/config.yaml: no batch processor, no sending queue, no retries
of its own). So every span the tailer was told "accepted" is at the next hop, and every
other one stays with the tailer, which retries it and keeps it in its checkpoint. Shown
here with the collector built at the compose file's version (tests/services.py):

- while the stand-in refuses, the tailer sees every refusal: its retry count is exactly the
  spans of the refused requests, and no span is counted as exported before it arrived;
- the collector killed (-9) while it holds a refused request, and restarted, loses no turn.

The stand-in is tests/otlp_sink.py, an OTLP/HTTP receiver, so the test copy of the config
sends traces with an `otlp_http` exporter (JSON encoding, which the sink decodes). It takes
the production exporter's delivery settings as they are; the production exporter itself
(`otlp_grpc` to Tempo) is checked by `otelcol validate` in tests/test_services.py.
"""

import json
import signal
import socket
import subprocess
import time
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from exposition_helpers import samples
from otlp_sink import OtlpSink, decode_body, span_dicts
from prom import free_port
from services import binary
from sessiongen import START, every_pattern
from tailer.outputs.spans import trace_id
from tailerproc import running_tailer

REPO = Path(__file__).resolve().parent.parent
DELIVERY_SETTINGS = ("sending_queue", "retry_on_failure", "timeout")


def config_for_test(stand_in: str, port: int) -> dict:
    """collector/config.yaml with its OTLP/HTTP receiver on port and its traces sent to
    stand_in with the production traces exporter's delivery settings."""
    config = yaml.safe_load((REPO / "collector" / "config.yaml").read_text())
    traces = config["service"]["pipelines"]["traces"]
    [production_exporter] = traces["exporters"]
    delivery = {key: value for key, value in config["exporters"][production_exporter].items()
                if key in DELIVERY_SETTINGS}
    config["receivers"]["otlp"]["protocols"] = {"http": {"endpoint": f"127.0.0.1:{port}"}}
    config["exporters"] = {"otlp_http/stand-in": {"endpoint": stand_in, "encoding": "json", **delivery}}
    traces["exporters"] = ["otlp_http/stand-in"]
    del config["service"]["pipelines"]["metrics"]
    # No metrics server of its own on :8888, which a second collector could not bind.
    config["service"]["telemetry"] = {"metrics": {"level": "none"}}
    return config


class Collector:
    """The built collector on a config file, and on more_configs merged over it in order
    (as several --config files are), receiving on port; start() again after kill() reuses it.

    start() returns once the receiver listens: a tailer started before would meet refused
    connections, and its backoff, doubled by each, could outlast a test's wait (on a loaded
    machine the collector takes seconds to start).
    """

    def __init__(self, config_path: Path, log_path: Path, port: int, more_configs: tuple[Path, ...] = ()):
        self.config_paths = (config_path, *more_configs)
        self.log_path = log_path
        self.port = port
        self.process = None

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen([binary("otelcol"), *(f"--config={path}" for path in self.config_paths)],
                                            stdout=log, stderr=subprocess.STDOUT)
        wait_until(self._listening, "the collector to listen", timeout=60)

    def _listening(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"the collector exited: {self.log_path.read_text()[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError:
            return False
        return True

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


@contextmanager
def collector_between(tmp_path: Path, sink: OtlpSink):
    """A running collector from the tailer's side to sink; yields (collector, its endpoint)."""
    port = free_port()
    config_path = tmp_path / "collector.yaml"
    config_path.write_text(json.dumps(config_for_test(sink.endpoint, port)))  # JSON is YAML
    collector = Collector(config_path, tmp_path / "collector.log", port)
    collector.start()
    try:
        yield collector, f"http://127.0.0.1:{port}"
    finally:
        collector.stop()


def backfill(state: Path, sessions: int) -> set[str]:
    """Sessions of every kind of turn, a day apart; the trace ids the files hold."""
    writers = [every_pattern(f"delivery-{n}", START + timedelta(days=n)) for n in range(sessions)]
    for writer in writers:
        writer.write(state)
    return {trace_id(turn.session_id, turn.fusion_id) for writer in writers for turn in writer.expected}


def wait_until(condition, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.05)


def arrived(sink: OtlpSink) -> set[str]:
    return {span["traceId"] for span in sink.spans()}


def counter(exposition: str, name: str, **labels: str) -> float:
    return sum(value for key, value in samples(exposition, name).items() if labels.items() <= dict(key).items())


def exported(exposition: str) -> float:
    return counter(exposition, "hydrafusion_tailer_spans_exported_total")


def pending(exposition: str) -> float:
    return counter(exposition, "hydrafusion_tailer_pending_spans")


def published(tailer, condition) -> str:
    """The tailer's /metrics once condition(text) holds: values are published a moment
    after they change (when the checkpoint is saved)."""
    wait_until(lambda: condition(tailer.metrics()), "the tailer's /metrics to settle", timeout=30)
    return tailer.metrics()


@pytest.fixture
def state(tmp_path):
    directory = tmp_path / "state"
    directory.mkdir()
    return directory


def test_the_next_hops_refusals_reach_the_tailer_and_every_turn_arrives(tmp_path, state):
    expected = backfill(state, sessions=4)
    with OtlpSink() as sink, collector_between(tmp_path, sink) as (_, endpoint):
        sink.script(503, 503, 503)
        with running_tailer(tmp_path, "--state-dir", str(state), "--from-start",
                            "--otlp-endpoint", endpoint, metrics_port=free_port()) as tailer:
            wait_until(lambda: expected <= arrived(sink), "every trace at the stand-in")
            # What the tailer was told "accepted" is what the stand-in accepted...
            exposition = published(tailer, lambda text: exported(text) == len(sink.spans()))
        # ...and each refusal went back to it (it sends one request at a time, so the
        # refused ones came first): it counts their spans as waiting for a retry.
        refused = [len(span_dicts(decode_body(body))) for body in sink.raw_bodies[:3]]
    assert counter(exposition, "hydrafusion_tailer_export_failures_total", outcome="retry") == sum(refused)
    assert arrived(sink) == expected


def test_a_collector_killed_while_holding_spans_loses_no_turn(tmp_path, state):
    expected = backfill(state, sessions=20)
    with OtlpSink() as sink, collector_between(tmp_path, sink) as (collector, endpoint):
        sink.script(503, 503)
        with running_tailer(tmp_path, "--state-dir", str(state), "--from-start",
                            "--otlp-endpoint", endpoint, metrics_port=free_port()) as tailer:
            wait_until(lambda: sink.raw_bodies, "a first request at the stand-in")
            collector.kill()  # with a refused batch in hand, or one on its way
            time.sleep(1)
            collector.start()
            wait_until(lambda: expected <= arrived(sink), "every trace at the stand-in")
            exposition = published(tailer, lambda text: exported(text) > 0 and pending(text) == 0)
    assert counter(exposition, "hydrafusion_tailer_export_failures_total", outcome="retry") > 0
    assert counter(exposition, "hydrafusion_tailer_export_failures_total", outcome="rejected") == 0
    assert arrived(sink) == expected

