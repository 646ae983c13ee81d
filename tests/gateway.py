"""A team's central parts on loopback: the gateway collector (collector/gateway.yaml) and
the central Prometheus (prometheus/central.yml), the real builds (tests/services.py).

    with central_prometheus(tmp_path, scraped=[...]) as prom, OtlpSink() as tempo, \\
            running_gateway(tmp_path, tempo, prom) as endpoint:
        ...  # tailers send traces and push metrics to endpoint

The gateway's traces go to a stand-in Tempo (tests/otlp_sink.py) by an `otlp_http`
exporter with the production exporter's delivery settings, as tests/test_collector_delivery.py
does; its metrics go to the real Prometheus's OTLP receiver as in production.
"""

import json
import subprocess
from contextlib import contextmanager
from pathlib import Path

import yaml

from prom import free_port, running_prometheus
from test_collector_delivery import DELIVERY_SETTINGS, Collector

REPO = Path(__file__).resolve().parent.parent


def gateway_config(port: int, tempo: str, prometheus: str, tls: tuple[Path, Path] | None) -> dict:
    """collector/gateway.yaml with its environment filled in, on 127.0.0.1:port."""
    config = yaml.safe_load((REPO / "collector" / "gateway.yaml").read_text())
    http = config["receivers"]["otlp"]["protocols"]["http"]
    http["endpoint"] = f"127.0.0.1:{port}"
    if tls is None:
        del http["tls"]
    else:
        http["tls"] = {"cert_file": str(tls[0]), "key_file": str(tls[1])}
    tempo_exporter = config["exporters"].pop("otlp_grpc/tempo")
    config["exporters"]["otlp_http/tempo"] = {
        "endpoint": tempo, "encoding": "json",
        **{key: value for key, value in tempo_exporter.items() if key in DELIVERY_SETTINGS}}
    config["service"]["pipelines"]["traces"]["exporters"] = ["otlp_http/tempo"]
    config["exporters"]["otlp_http/prometheus"]["endpoint"] = f"{prometheus}/api/v1/otlp"
    config["service"]["telemetry"] = {"metrics": {"level": "none"}}
    return config


@contextmanager
def running_gateway(tmp_path: Path, tempo, prom, tls: tuple[Path, Path] | None = None):
    """The gateway collector between tailers and (tempo, prom); yields its endpoint."""
    port = free_port()
    config_path = tmp_path / f"gateway-{port}.yaml"
    config_path.write_text(json.dumps(gateway_config(port, tempo.endpoint, prom.url, tls)))
    collector = Collector(config_path, tmp_path / "gateway.log", port)
    collector.start()
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    finally:
        collector.stop()


def central_settings() -> dict:
    """The settings of prometheus/central.yml that decide what pushed series look like."""
    central = yaml.safe_load((REPO / "prometheus" / "central.yml").read_text())
    return {"storage": central["storage"], "otlp": central["otlp"]}


@contextmanager
def central_prometheus(tmp_path: Path, scraped=()):
    """The real Prometheus with central.yml's OTLP and storage settings and both
    receivers; it scrapes `scraped` too (job "test"), to compare a scrape with a push."""
    with running_prometheus(
        tmp_path, list(scraped), scrape_interval="1s", extra_config=central_settings(),
        extra_flags=["--web.enable-otlp-receiver", "--web.enable-remote-write-receiver"],
    ) as prom:
        yield prom


def last_values(prom, selector: str, dropped=("job", "instance")) -> dict[tuple, float]:
    """{(name, sorted labels without `dropped`): last value} of the series a selector picks
    over the last ten minutes (a range query keeps names, and skips staleness markers)."""
    found = {}
    for series in prom.query(f"{selector}[10m]"):
        labels = tuple(sorted((k, v) for k, v in series["metric"].items()
                              if k not in dropped and k != "__name__"))
        found[series["metric"]["__name__"], labels] = float(series["values"][-1][1])
    return found


def make_certificate(directory: Path, name: str = "localhost") -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost, and its key, made by the
    openssl command (Debian's openssl package, which .ci/run's machine has)."""
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", f"/CN={name}", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60)
    return cert, key
