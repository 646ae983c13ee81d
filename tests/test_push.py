"""Pushed metrics are the scraped ones, through the real gateway collector into the real
Prometheus build (tests/gateway.py): every series a scrape of the tailer makes, with the
same name, the same metric labels and the same value, comes in by push too, under the job
and instance of the tailer's resource.

One difference is Prometheus's own: its OTLP translation writes a whole-number bucket
bound as `le="1"` (Go's shortest form, storage/remote/otlptranslator/prometheusremotewrite/
helper.go), while a scrape is stored as `le="1.0"`. Only hydrafusion_routing_latency_seconds
has such bounds (1, 2, 5). The test pins exactly that difference; the history, when the
metrics are pushed, writes `le` the push's way (tailer.outputs.otlp_metrics.pushed_le).
"""

import os
import subprocess
from pathlib import Path

import yaml

from otlp_sink import OtlpSink
from tailer.outputs.otlp_metrics import PROMOTED_ATTRIBUTES, pushed_le
from prom import free_port, promtool
from gateway import central_prometheus, last_values, make_certificate, running_gateway
from services import binary
from sessiongen import every_pattern, whole_session
from tailerproc import running_tailer, tailer_env

FAMILIES = '__name__=~"hydrafusion_.*"'


def test_a_push_makes_exactly_the_series_a_scrape_makes(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    writers = [every_pattern("push-0"), whole_session("push-1")]
    for writer in writers:
        writer.write(state)
    fusion_turns = sum(turn.kind != "ordinary" for writer in writers for turn in writer.expected)
    port = free_port()
    with central_prometheus(tmp_path, scraped=[f"127.0.0.1:{port}"]) as prom, \
            OtlpSink() as tempo, running_gateway(tmp_path, tempo, prom) as gateway:
        env = tailer_env(OTEL_EXPORTER_OTLP_ENDPOINT=gateway, OTEL_METRICS_EXPORTER="otlp",
                         OTEL_METRIC_EXPORT_INTERVAL="1000",
                         OTEL_RESOURCE_ATTRIBUTES="service.instance.id=laptop-1")
        with running_tailer(tmp_path, "--state-dir", str(state), "--from-start",
                            metrics_port=port, env=env) as tailer:
            tailer.wait_for_log(r" fusion fusion-", count=fusion_turns)
            tempo.wait_for_spans(sum(len(w.expected) for w in writers), timeout=60)
            # The scrape has seen every count (spans exported included) before the stop.
            prom.wait_for('sum(hydrafusion_tailer_pending_spans{job="test"})',
                          lambda r: r and float(r[0]["value"][1]) == 0, timeout=60)
            prom.wait_for(
                'sum(hydrafusion_tailer_spans_exported_total{job="test"})',
                lambda r: r and float(r[0]["value"][1]) == len(tempo.spans()), timeout=60)
            assert tailer.stop() == 0  # the last push, at exit, has every true value
        scraped = last_values(prom, f'{{job="test",{FAMILIES}}}')
        pushed = last_values(prom, f'{{job="hydrafusion",{FAMILIES}}}')
        instances = prom.query('count by (instance) ({job="hydrafusion"})')
    assert len(scraped) > 300  # every family, histograms with their buckets
    as_pushed = {(name, tuple((k, pushed_le(v) if k == "le" else v) for k, v in labels)): value
                 for (name, labels), value in scraped.items()}
    assert pushed == as_pushed
    changed = {labels for (_, labels) in scraped} - {labels for (_, labels) in as_pushed}
    assert {dict(labels)["le"] for labels in changed} == {"1.0", "2.0", "5.0"}
    assert [series["metric"]["instance"] for series in instances] == ["laptop-1"]
    assert any(dict(labels).get("le") == "0.05" for name, labels in scraped
               if name == "hydrafusion_routing_latency_seconds_bucket")


REPO = Path(__file__).resolve().parent.parent


def test_the_gateway_config_is_valid_and_keeps_delivery_safe(tmp_path):
    cert, key = make_certificate(tmp_path)
    env = {**os.environ, "GATEWAY_TLS_CERT_FILE": str(cert), "GATEWAY_TLS_KEY_FILE": str(key),
           "TEMPO_OTLP_ENDPOINT": "tempo:4317",
           "PROMETHEUS_OTLP_ENDPOINT": "https://prometheus:9090/api/v1/otlp"}
    result = subprocess.run([binary("otelcol"), "validate", f"--config={REPO / 'collector' / 'gateway.yaml'}"],
                            capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    # Answered only once the next hop has the data, as collector/config.yaml.
    gateway = yaml.safe_load((REPO / "collector" / "gateway.yaml").read_text())
    assert not gateway.get("processors")
    for exporter in gateway["exporters"].values():
        assert exporter["sending_queue"] == {"enabled": False}
        assert exporter["retry_on_failure"] == {"enabled": False}


def test_the_central_prometheus_config_loads_and_promotes_exactly_the_opt_in_attributes():
    result = promtool("check", "config", REPO / "prometheus" / "central.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    central = yaml.safe_load((REPO / "prometheus" / "central.yml").read_text())
    assert central["otlp"]["promote_resource_attributes"] == list(PROMOTED_ATTRIBUTES)
