"""The daemon's builder (tailer/daemon/stages.py) and its seams: each sender gets its own signal's
endpoint, headers and CA file; the daemon's loop imports no demo, and outputs import no
daemon."""

import subprocess
import sys

import pytest

from tailer.daemon import stages
from tailer.daemon.config import Config


class FakeExporter:
    """Stands in for otlp.OtlpExporter: notes what it was built with."""

    built = []

    def __init__(self, url, *, headers, ssl_context, **_):
        self.built.append((url, headers, ssl_context))

    def submit(self, spans):
        pass

    def flush(self, timeout):
        return True

    def close(self, timeout):
        pass


def test_the_cli_metrics_go_out_with_the_metrics_signals_headers_and_certificate(
        tmp_path, monkeypatch):
    """The CLI's metrics outbox was given the traces' CA file: with
    OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE and OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE
    different, it trusted the wrong one."""
    FakeExporter.built = []
    monkeypatch.setattr(stages, "OtlpExporter", FakeExporter)
    monkeypatch.setattr(stages, "tls_context", lambda path: f"context of {path}")
    (tmp_path / "state").mkdir()
    config = Config(
        state_dir=tmp_path / "state", checkpoint=tmp_path / "cp.json",
        traces_url="https://traces.example/v1/traces",
        otlp_metrics_url="https://metrics.example/v1/metrics",
        cli_otel=tmp_path / "cli-otel.jsonl",
        otlp_headers={"authorization": "traces"}, traces_certificate="traces.pem",
        metrics_push_headers={"authorization": "metrics"},
        metrics_push_certificate="metrics.pem")
    built = stages.build(config, None, 0)
    built.tailer.close()
    assert sorted(FakeExporter.built) == [
        ("https://metrics.example/v1/metrics", {"authorization": "metrics"},
         "context of metrics.pem"),
        ("https://traces.example/v1/traces", {"authorization": "traces"}, "context of traces.pem"),
        ("https://traces.example/v1/traces", {"authorization": "traces"}, "context of traces.pem"),
    ]


def imported_by(module: str) -> set[str]:
    code = f"import sys, {module}; print(' '.join(sorted(sys.modules)))"
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout
    return {name for name in output.split() if name.startswith("tailer.")}


def test_the_daemon_loop_imports_no_demo():
    assert not {"tailer.commands.demo", "tailer.commands.demo_run"} & imported_by("tailer.daemon.service")


@pytest.mark.parametrize("output", ["tailer.daemon.fanout", "tailer.outputs.metrics_server", "tailer.outputs.copilot_otel",
                                    "tailer.daemon.copilot_telemetry"])
def test_an_output_imports_nothing_of_the_daemon(output):
    daemon = {"tailer.daemon.service", "tailer.daemon.stages", "tailer.daemon.config", "tailer.commands.demo_run",
              "tailer.turns.sessions"}
    assert not daemon & imported_by(output)
