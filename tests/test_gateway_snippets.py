"""The settings docs/TEAM.md offers to merge over collector/gateway.yaml, on the real collector
(tests/build-services builds it with the components they name).

Each snippet is given to the collector as a user would give it: gateway.yaml, then the
snippet word for word from TEAM.md, as two --config files (the collector merges them map
key by map key, a later file winning), then a third with what differs on this machine: the
snippet's paths under tmp_path and, to run it, loopback ports and a stand-in Tempo
(tests/otlp_sink.py, reached over OTLP/HTTP with the snippet's delivery settings, as
tests/gateway.py does). Shown:

- every snippet, so merged, passes `otelcol validate`, the disk queue also when given to
  the metrics exporter too, as TEAM.md says to;
- with the authenticator, a request without the token, or with another one, is refused
  (401), and one with it is accepted and reaches Tempo;
- with the disk queue, a span accepted while Tempo is down outlives the gateway killed (-9)
  and restarted, and reaches Tempo once Tempo is up.
"""

import json
import subprocess
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from gateway import make_certificate
from otlp_sink import OtlpSink
from prom import free_port
from services import binary
from tailer.outputs.otlp import encode_request, parse_headers, tls_context
from test_collector_delivery import DELIVERY_SETTINGS, Collector, wait_until
from test_docs import code_blocks
from test_otlp import span

REPO = Path(__file__).resolve().parent.parent
GATEWAY = REPO / "collector" / "gateway.yaml"
TOKEN = "laptop-token-for-tests"


def team_snippets() -> dict[str, dict]:
    """{extension type: snippet} for TEAM.md's YAML blocks that add an extension to the gateway."""
    blocks = [yaml.safe_load(block) for block in code_blocks("TEAM.md", "yaml")]
    return {name.split("/", 1)[0]: block for block in blocks for name in block.get("extensions") or {}}


def this_machine(snippet: dict, tmp_path: Path) -> dict:
    """The snippet's paths moved under tmp_path: the queue's directory (which must exist,
    as a volume's mount point does) and the file holding the laptops' token."""
    extensions = {}
    for name in snippet["extensions"]:
        if name.startswith("file_storage"):
            (tmp_path / "queue").mkdir(exist_ok=True)
            extensions[name] = {"directory": str(tmp_path / "queue")}
        elif name.startswith("bearertokenauth"):
            (tmp_path / "laptop-token").write_text(TOKEN)
            extensions[name] = {"filename": str(tmp_path / "laptop-token")}
    return {"extensions": extensions}


def tempo_delivery(snippet: dict) -> dict:
    """The delivery settings the snippet gives the Tempo exporter, if any."""
    exporter = (snippet.get("exporters") or {}).get("otlp_grpc/tempo", {})
    return {key: value for key, value in exporter.items() if key in DELIVERY_SETTINGS}


def on_loopback(snippet: dict, port: int, tempo: str) -> dict:
    """The gateway on 127.0.0.1:port, its traces to the stand-in Tempo at `tempo` with the
    snippet's delivery settings, and no metrics server."""
    return {
        "receivers": {"otlp": {"protocols": {"http": {"endpoint": f"127.0.0.1:{port}"}}}},
        "exporters": {"otlp_http/tempo": {"endpoint": tempo, "encoding": "json", **tempo_delivery(snippet)}},
        "service": {"pipelines": {"traces": {"exporters": ["otlp_http/tempo"]}},
                    "telemetry": {"metrics": {"level": "none", "readers": []}}},
    }


def write_configs(tmp_path: Path, *configs: dict) -> tuple[Path, ...]:
    paths = []
    for number, config in enumerate(configs):
        paths.append(tmp_path / f"merged-{number}.yaml")
        paths[-1].write_text(json.dumps(config))  # JSON is YAML
    return tuple(paths)


@pytest.fixture
def gateway_environment(tmp_path, monkeypatch):
    """gateway.yaml's settings from the environment, as in production; returns its certificate."""
    cert, key = make_certificate(tmp_path)
    monkeypatch.setenv("GATEWAY_TLS_CERT_FILE", str(cert))
    monkeypatch.setenv("GATEWAY_TLS_KEY_FILE", str(key))
    monkeypatch.setenv("TEMPO_OTLP_ENDPOINT", f"127.0.0.1:{free_port()}")
    monkeypatch.setenv("PROMETHEUS_OTLP_ENDPOINT", f"http://127.0.0.1:{free_port()}/api/v1/otlp")
    return cert


def test_team_md_offers_a_disk_queue_and_an_authenticator():
    assert team_snippets().keys() == {"file_storage", "bearertokenauth"}


def validate_merged(tmp_path: Path, *configs: dict) -> None:
    """`otelcol validate` on gateway.yaml with configs merged over it, expecting success."""
    paths = write_configs(tmp_path, *configs)
    command = [binary("otelcol"), "validate", f"--config={GATEWAY}", *(f"--config={path}" for path in paths)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("extension", sorted(team_snippets()))
def test_each_snippet_merged_over_the_gateway_is_valid(extension, tmp_path, gateway_environment):
    snippet = team_snippets()[extension]
    validate_merged(tmp_path, snippet, this_machine(snippet, tmp_path))


def test_the_disk_queue_on_the_metrics_exporter_too_is_valid(tmp_path, gateway_environment):
    """TEAM.md: "and the same sending_queue and retry_on_failure on otlp_http/prometheus"."""
    snippet = team_snippets()["file_storage"]
    delivery = tempo_delivery(snippet)
    assert delivery.keys() == {"sending_queue", "retry_on_failure"}
    metrics = {"exporters": {"otlp_http/prometheus": delivery}}
    validate_merged(tmp_path, snippet, metrics, this_machine(snippet, tmp_path))


@contextmanager
def gateway_with(tmp_path: Path, extension: str, tempo: str):
    """The gateway running with TEAM.md's snippet for extension; yields (it, its traces URL)."""
    snippet = team_snippets()[extension]
    port = free_port()
    configs = write_configs(tmp_path, snippet, this_machine(snippet, tmp_path), on_loopback(snippet, port, tempo))
    collector = Collector(GATEWAY, tmp_path / "gateway.log", port, more_configs=configs)
    collector.start()
    try:
        yield collector, f"https://127.0.0.1:{port}/v1/traces"
    finally:
        collector.stop()


def post_span(url: str, cert: Path, number: int, headers: dict[str, str]) -> int:
    """The status of one request carrying span `number`, as a tailer sends it; waits for
    the gateway to listen (a refused connection is retried)."""
    body = encode_request([span(7, number)], {"service.name": "hydrafusion"}, "hydrafusion-traces", "test")
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip", **headers}
    request = urllib.request.Request(url, body, headers)
    statuses = []

    def answered() -> bool:
        try:
            with urllib.request.urlopen(request, timeout=10, context=tls_context(str(cert))) as response:
                statuses.append(response.status)
        except urllib.error.HTTPError as error:
            statuses.append(error.code)
        except urllib.error.URLError:
            return False
        return True

    wait_until(answered, "the gateway to answer", timeout=20)
    return statuses[-1]


def test_the_authenticator_refuses_a_request_without_the_token(tmp_path, gateway_environment):
    with OtlpSink() as tempo, gateway_with(tmp_path, "bearertokenauth", tempo.endpoint) as (_, url):
        assert post_span(url, gateway_environment, 1, {}) == 401
        assert post_span(url, gateway_environment, 2, {"Authorization": "Bearer another-token"}) == 401
        # OTEL_EXPORTER_OTLP_HEADERS as TEAM.md tells the laptops to set it.
        laptop_headers = parse_headers(f"Authorization=Bearer%20{TOKEN}")
        assert post_span(url, gateway_environment, 3, laptop_headers) == 200
        spans = tempo.wait_for_spans(1)
    assert [arrived["spanId"] for arrived in spans] == [f"{3:016x}"]


def test_the_disk_queue_keeps_a_span_through_a_restart_until_tempo_is_up(tmp_path, gateway_environment):
    tempo_port = free_port()
    with gateway_with(tmp_path, "file_storage", f"http://127.0.0.1:{tempo_port}") as (collector, url):
        assert post_span(url, gateway_environment, 1, {}) == 200  # on the gateway's disk, Tempo down
        collector.kill()
        collector.start()
        assert post_span(url, gateway_environment, 2, {}) == 200  # once the restarted gateway listens
        log = tmp_path / "gateway.log"
        wait_until(lambda: "Exporting failed. Will retry" in log.read_text(), "a failed try while Tempo is down")
        with OtlpSink(port=tempo_port) as tempo:
            # The next try comes after retry_on_failure's backoff (5 s, then longer).
            wait_until(lambda: len(tempo.spans()) >= 2, "the queued spans at Tempo", timeout=60)
            spans = tempo.spans()
    assert sorted(arrived["spanId"] for arrived in spans) == [f"{1:016x}", f"{2:016x}"]
