"""https endpoints with a self-signed certificate, for traces, the metrics push and the
history's remote write, on loopback servers (the certificate made by the openssl command,
tests/gateway.py): with the certificate given, everything arrives, with the headers and
basic auth asked for; with another one, the tailer says which endpoint it does not trust and
what to set, and loses nothing: started again with the right one, it delivers it all."""

import base64
import os
from datetime import datetime, timedelta, timezone

from gateway import make_certificate
from otlp_sink import OtlpSink
from sessiongen import every_pattern
from tailer.outputs.spans import trace_id
from tailerproc import run_once, running_tailer, tailer_env
from test_privacy import RemoteWriteCapture


def environment(sink, history, cert, **extra) -> dict:
    return tailer_env(
        OTEL_EXPORTER_OTLP_ENDPOINT=sink.endpoint, OTEL_EXPORTER_OTLP_CERTIFICATE=str(cert),
        OTEL_METRICS_EXPORTER="otlp", OTEL_METRIC_EXPORT_INTERVAL="500",
        OTEL_EXPORTER_OTLP_METRICS_HEADERS="Authorization=Bearer%20metrics-token",
        HYDRAFUSION_HISTORY_URL=history.url.replace("https://", "https://ada:pa%40ss@"),
        HYDRAFUSION_HISTORY_HEADERS="X-Scope-OrgID=team-a",
        HYDRAFUSION_HISTORY_CERTIFICATE=str(cert), **extra)


def sessions(tmp_path) -> tuple:
    state = tmp_path / "state"
    state.mkdir()
    writer = every_pattern("tls-0", datetime.now(timezone.utc) - timedelta(hours=2))
    writer.write(state)
    return state, {trace_id(turn.session_id, turn.fusion_id) for turn in writer.expected}


def test_https_with_the_certificate_given(tmp_path):
    cert, key = make_certificate(tmp_path)
    state, traces = sessions(tmp_path)
    with OtlpSink(tls=(cert, key)) as sink, RemoteWriteCapture(tls=(cert, key)) as history:
        env = environment(sink, history, cert)
        with running_tailer(tmp_path, "--state-dir", str(state), "--from-start", env=env) as tailer:
            tailer.wait_for_log("history: pushed")
            sink.wait_for_spans(len(traces), timeout=30)
            sink.wait_for_metrics(1)
            assert tailer.stop() == 0
        assert {span["traceId"] for span in sink.spans()} == traces
    assert sink.metric_headers[0]["authorization"] == "Bearer metrics-token"
    assert history.headers[0]["authorization"] == "Basic " + base64.b64encode(b"ada:pa@ss").decode()
    assert history.headers[0]["x-scope-orgid"] == "team-a"
    assert "pa@ss" not in tailer.log() and "pa%40ss" not in tailer.log()


def test_another_certificate_is_refused_clearly_and_loses_nothing(tmp_path):
    cert, key = make_certificate(tmp_path)
    other, _ = make_certificate(tmp_path, "other")
    state, traces = sessions(tmp_path)
    checkpoint = str(tmp_path / "checkpoint.json")
    with OtlpSink(tls=(cert, key)) as sink, RemoteWriteCapture(tls=(cert, key)) as history:
        wrong = environment(sink, history, other, HYDRAFUSION_CHECKPOINT=checkpoint)
        with running_tailer(tmp_path, "--state-dir", str(state), "--from-start", env=wrong) as tailer:
            for what, setting in (
                    ("OTLP export failed", "OTEL_EXPORTER_OTLP_CERTIFICATE"),
                    ("OTLP metrics push failed", "OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE"),
                    ("history: Prometheus did not take", "HYDRAFUSION_HISTORY_CERTIFICATE")):
                [line] = tailer.wait_for_log(what)
                assert "is not trusted" in line and setting in line
            assert tailer.stop() == 0
        assert not sink.spans() and not sink.metric_requests and not history.bodies
        right = environment(sink, history, cert, HYDRAFUSION_CHECKPOINT=checkpoint)
        with running_tailer(tmp_path, "--state-dir", str(state), env=right) as tailer:
            tailer.wait_for_log("history: pushed")
            sink.wait_for_spans(len(traces), timeout=30)
            sink.wait_for_metrics(1)
        assert {span["traceId"] for span in sink.spans()} == traces


def test_a_certificate_file_that_cannot_be_read_is_a_usage_error(tmp_path):
    done = run_once("--state-dir", str(tmp_path), env=tailer_env(
        OTEL_EXPORTER_OTLP_CERTIFICATE=str(tmp_path / "missing.crt")))
    assert done.returncode == 2
    assert "cannot read the CA certificate" in done.stderr and "missing.crt" in done.stderr


def test_a_certificate_that_is_a_fifo_is_a_usage_error_not_a_hang(tmp_path):
    """Opened to be read, a FIFO waited for a writer: the tailer hung at start, saying
    nothing, whatever the endpoint (the file is checked before anything is sent)."""
    os.mkfifo(tmp_path / "ca.crt")
    done = run_once("--state-dir", str(tmp_path), timeout=30, env=tailer_env(
        HYDRAFUSION_HISTORY_CERTIFICATE=str(tmp_path / "ca.crt")))
    assert done.returncode == 2
    assert "cannot read the CA certificate" in done.stderr and "not a regular file" in done.stderr
