"""The configs of Prometheus, the collector, Tempo and Grafana's provisioning.

Prometheus's files are checked by the real promtool at the version the stack runs
(tests/services.py; the collector's by the real collector, in tests/test_services.py).
Tempo and Grafana cannot be built here, so their files are checked by structure: Tempo's
keys against Tempo 3.0.3's configuration manifest, and every address against the
compose services.
"""

import fnmatch
import json
import re
from pathlib import Path

import pytest
import yaml

from compose_config import ENV_FILES, REPO, render
from prom import promtool

PROMETHEUS_DIR = REPO / "prometheus"
TEMPO_MANIFEST = REPO.parent / "shared" / "schemas" / "tempo-3.0.3-manifest.yaml"
# Tempo options whose content is free-form, not a fixed set of keys.
TEMPO_FREE_FORM = {("distributor", "receivers")}
# The OTLP/proto size of one turn's trace (root, routing and leg spans), measured on
# tests/sessiongen.py's every_pattern session: about 3 KB.
TRACE_BYTES = 3000


@pytest.fixture(scope="module")
def configs(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    return {env_file: render(env_file, home) for env_file in ENV_FILES}


def load_yaml(relative):
    return yaml.safe_load((REPO / relative).read_text())


# Prometheus

def test_prometheus_config_is_valid():
    result = promtool("check", "config", PROMETHEUS_DIR / "prometheus.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_prometheus_rules_are_valid():
    result = promtool("check", "rules", *sorted((PROMETHEUS_DIR / "rules").glob("*.yml")))
    assert result.returncode == 0, result.stdout + result.stderr


def budget_rule(config):
    return config["configs"]["credit-budget"]["content"]


@pytest.mark.parametrize("env_file", ENV_FILES)
def test_compose_writes_a_valid_budget_rule_from_the_env(configs, env_file, tmp_path):
    rule_file = tmp_path / "credit-budget.yml"
    rule_file.write_text(budget_rule(configs[env_file]))
    result = promtool("check", "rules", rule_file)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "vector(300)" in rule_file.read_text()


def test_prometheus_loads_the_budget_rule_compose_writes(configs):
    prometheus = configs[None]["services"]["prometheus"]
    target = next(c["target"] for c in prometheus["configs"] if c["source"] == "credit-budget")
    config_file = next(a.split("=", 1)[1] for a in prometheus["command"] if a.startswith("--config.file="))
    patterns = load_yaml("prometheus/prometheus.yml")["rule_files"]
    config_dir = str(Path(config_file).parent)
    assert any(fnmatch.fnmatch(target, f"{config_dir}/{pattern}") for pattern in patterns)


def test_prometheus_scrapes_the_tailer_directly(configs):
    jobs = {job["job_name"]: job for job in load_yaml("prometheus/prometheus.yml")["scrape_configs"]}
    targets = [t for config in jobs["hydrafusion-tailer"]["static_configs"] for t in config["targets"]]
    listen_port = configs[None]["services"]["tailer"]["environment"]["HYDRAFUSION_METRICS_ADDRESS"].split(":")[1]
    assert targets == [f"tailer:{listen_port}"]


# The collector

def collector_component_ids(config):
    return {kind: set(config.get(kind) or {}) for kind in ("receivers", "processors", "exporters")}


def test_collector_pipelines_use_only_defined_components_and_every_defined_one():
    config = load_yaml("collector/config.yaml")
    defined = collector_component_ids(config)
    used = {kind: set() for kind in defined}
    for pipeline in config["service"]["pipelines"].values():
        for kind in used:
            used[kind] |= set(pipeline.get(kind, []))
    assert used == defined
    assert set(config["service"]["pipelines"]) == {"traces", "metrics"}


def test_collector_answers_only_once_the_next_hop_has_the_data():
    """No batch processor, no sending queue, no retries of the collector's own: the next
    hop's answer is the client's answer (tests/test_collector_delivery.py shows it)."""
    config = load_yaml("collector/config.yaml")
    assert not config.get("processors")
    assert all(not pipeline.get("processors") for pipeline in config["service"]["pipelines"].values())
    for name, exporter in config["exporters"].items():
        assert exporter["sending_queue"] == {"enabled": False}, name
        assert exporter["retry_on_failure"] == {"enabled": False}, name


def test_collector_listens_on_every_interface_on_the_published_ports(configs):
    protocols = load_yaml("collector/config.yaml")["receivers"]["otlp"]["protocols"]
    endpoints = {protocol: settings["endpoint"] for protocol, settings in protocols.items()}
    assert endpoints == {"grpc": "0.0.0.0:4317", "http": "0.0.0.0:4318"}
    ports = yaml.safe_load((REPO / "docker-compose.ports.yml").read_text())
    published = {int(port.rsplit(":", 1)[1]) for port in ports["services"]["otel-collector"]["ports"]}
    assert published == {4317, 4318}


def test_collector_sends_traces_to_tempo_and_metrics_to_prometheus(configs):
    config = load_yaml("collector/config.yaml")
    pipelines = config["service"]["pipelines"]
    tempo_exporter = config["exporters"][pipelines["traces"]["exporters"][0]]
    assert tempo_exporter["endpoint"] == "tempo:4317"
    assert tempo_exporter["tls"]["insecure"] is True
    tempo_grpc = load_yaml("tempo/tempo.yaml")["distributor"]["receivers"]["otlp"]["protocols"]["grpc"]
    assert tempo_grpc["endpoint"].endswith(":4317")

    prometheus_exporter = config["exporters"][pipelines["metrics"]["exporters"][0]]
    assert prometheus_exporter["endpoint"] == "http://prometheus:9090/api/v1/otlp"
    assert "--web.enable-otlp-receiver" in configs[None]["services"]["prometheus"]["command"]


# Tempo

def unknown_keys(config, manifest, path=()):
    """Keys of config that the manifest does not have, as dotted paths."""
    unknown = []
    for key, value in config.items():
        here = path + (key,)
        if here in TEMPO_FREE_FORM:
            continue
        if not isinstance(manifest, dict) or key not in manifest:
            unknown.append(".".join(here))
        elif isinstance(value, dict):
            unknown.extend(unknown_keys(value, manifest[key], here))
    return unknown


def test_every_tempo_key_exists_in_tempo_3_0_3():
    """Tempo refuses to start on an unknown key; its binary cannot run here."""
    if not TEMPO_MANIFEST.is_file():
        pytest.skip(f"{TEMPO_MANIFEST} is absent (a clone without ../shared): cannot check Tempo's keys")
    manifest = yaml.safe_load(TEMPO_MANIFEST.read_text())
    assert unknown_keys(load_yaml("tempo/tempo.yaml"), manifest) == []


def test_the_tempo_key_check_catches_a_2x_key():
    manifest = {"server": {"http_listen_port": 3200}, "distributor": {"receivers": {}}}
    config = {"server": {"http_listen_port": 3200, "grpc_port": 1},
              "distributor": {"receivers": {"otlp": {}}}, "ingester": {}}
    assert unknown_keys(config, manifest) == ["server.grpc_port", "ingester"]


def test_tempo_keeps_a_backfill_live_without_dropping_spans():
    """Past max_traces_per_user live traces Tempo drops new traces' spans with only a debug
    log; past max_live_traces_bytes it makes pushes wait. The count limit must be the one
    never reached: it must allow more traces than the byte cap holds."""
    if not TEMPO_MANIFEST.is_file():
        pytest.skip(f"{TEMPO_MANIFEST} is absent (a clone without ../shared): cannot check Tempo's keys")
    manifest = yaml.safe_load(TEMPO_MANIFEST.read_text())
    tempo = load_yaml("tempo/tempo.yaml")
    limit = tempo["overrides"]["defaults"]["ingestion"]["max_traces_per_user"]
    live_bytes = tempo.get("live_store", {}).get("max_live_traces_bytes",
                                                 manifest["live_store"]["max_live_traces_bytes"])
    assert limit * TRACE_BYTES > live_bytes > 0


def test_tempo_receivers_listen_on_every_interface():
    protocols = load_yaml("tempo/tempo.yaml")["distributor"]["receivers"]["otlp"]["protocols"]
    assert {settings["endpoint"] for settings in protocols.values()} == {"0.0.0.0:4317", "0.0.0.0:4318"}


def go_duration_hours(text):
    units = {"h": 1, "m": 1 / 60, "s": 1 / 3600}
    parts = re.findall(r"(\d+(?:\.\d+)?)([hms])", text)
    assert "".join(number + unit for number, unit in parts) == text, f"not a duration Tempo reads: {text}"
    return sum(float(number) * units[unit] for number, unit in parts)


def test_tempo_finds_and_keeps_spans_as_old_as_the_backfill_horizon(configs):
    """Spans older than the ingestion slack are stored but never found by a time-range search."""
    horizon_hours = 24 * int(configs[None]["services"]["tailer"]["environment"]["HYDRAFUSION_BACKFILL_DAYS"])
    tempo = load_yaml("tempo/tempo.yaml")
    settings = {
        "live_store.wal.ingestion_time_range_slack": tempo["live_store"]["wal"]["ingestion_time_range_slack"],
        "storage.trace.wal.ingestion_time_range_slack": tempo["storage"]["trace"]["wal"]["ingestion_time_range_slack"],
        "backend_scheduler.provider.compaction.compaction.block_retention":
            tempo["backend_scheduler"]["provider"]["compaction"]["compaction"]["block_retention"],
        "backend_worker.compaction.block_retention": tempo["backend_worker"]["compaction"]["block_retention"],
        "query_frontend.search.max_duration": tempo["query_frontend"]["search"]["max_duration"],
        "query_frontend.metrics.max_duration": tempo["query_frontend"]["metrics"]["max_duration"],
    }
    for name, value in settings.items():
        assert go_duration_hours(value) > horizon_hours, f"{name}={value} is shorter than the backfill"


def test_prometheus_takes_history_as_old_as_the_backfill_horizon(configs):
    """The tailer pushes the counters of past turns at their times: the TSDB's out-of-order
    window and the retention must reach back as far as the backfill does."""
    days = int(configs[None]["services"]["tailer"]["environment"]["HYDRAFUSION_BACKFILL_DAYS"])
    window = load_yaml("prometheus/prometheus.yml")["storage"]["tsdb"]["out_of_order_time_window"]
    assert re.fullmatch(r"\d+d", window) and int(window[:-1]) > days
    command = configs[None]["services"]["prometheus"]["command"]
    assert "--web.enable-remote-write-receiver" in command
    retention = next(flag.split("=", 1)[1] for flag in command
                     if flag.startswith("--storage.tsdb.retention.time="))
    assert int(retention.rstrip("d")) > days


def test_history_is_pushed_under_the_labels_of_the_tailer_scrape(configs):
    environment = configs[None]["services"]["tailer"]["environment"]
    assert environment["HYDRAFUSION_HISTORY_URL"] == "http://prometheus:9090/api/v1/write"
    labels = dict(pair.split("=", 1) for pair in environment["HYDRAFUSION_HISTORY_LABELS"].split(","))
    [job] = [job for job in load_yaml("prometheus/prometheus.yml")["scrape_configs"]
             if job["job_name"] == labels["job"]]
    assert [labels["instance"]] == job["static_configs"][0]["targets"]


# Grafana provisioning

def test_grafana_datasources_have_fixed_uids_and_point_at_the_stack():
    tempo_port = load_yaml("tempo/tempo.yaml")["server"]["http_listen_port"]
    sources = {source["uid"]: source for source in load_yaml("grafana/provisioning/datasources/datasources.yaml")["datasources"]}
    assert {uid: source["type"] for uid, source in sources.items()} == {"prometheus": "prometheus", "tempo": "tempo"}
    assert sources["prometheus"]["url"] == "http://prometheus:9090"
    assert sources["tempo"]["url"] == f"http://tempo:{tempo_port}"


def test_tempo_spans_link_to_the_prometheus_series_of_their_model():
    tempo = next(s for s in load_yaml("grafana/provisioning/datasources/datasources.yaml")["datasources"]
                 if s["type"] == "tempo")
    links = tempo["jsonData"]["tracesToMetrics"]
    assert links["datasourceUid"] == "prometheus"
    assert links["tags"] == [{"key": "gen_ai.response.model", "value": "model"}]
    # "$$__tags": a single "$" would be taken for an environment variable by Grafana.
    assert all("{$$__tags}" in query["query"] for query in links["queries"])


def test_grafana_reads_the_dashboards_from_where_compose_mounts_them(configs):
    providers = load_yaml("grafana/provisioning/dashboards/dashboards.yaml")["providers"]
    assert [p["type"] for p in providers] == ["file"]
    mounts = {v["target"]: v["source"] for v in configs[None]["services"]["grafana"]["volumes"]}
    assert mounts[providers[0]["options"]["path"]] == str(REPO / "grafana" / "dashboards")
    assert mounts["/etc/grafana/provisioning"] == str(REPO / "grafana" / "provisioning")


def test_tempo_answers_traceql_over_the_dashboards_default_range():
    """Searches and TraceQL metrics (docs/TRACES.md) longer than Tempo's max_duration fail:
    both must cover the range the dashboard opens on (7 days; metrics default to 24h)."""
    dashboard = json.loads((REPO / "grafana" / "dashboards" / "hydrafusion.json").read_text())
    opens_on = dashboard["time"]["from"]
    assert re.fullmatch(r"now-\d+[dh]", opens_on) and dashboard["time"]["to"] == "now"
    hours = int(opens_on[4:-1]) * (24 if opens_on.endswith("d") else 1)
    frontend = load_yaml("tempo/tempo.yaml")["query_frontend"]
    for kind in ("search", "metrics"):
        assert go_duration_hours(frontend[kind]["max_duration"]) >= hours, kind


def test_prometheus_scrapes_the_collectors_and_tempos_own_metrics():
    """The health row and HydraFusionSpansDropped read the spans they lose."""
    jobs = {job["job_name"]: job["static_configs"][0]["targets"]
            for job in load_yaml("prometheus/prometheus.yml")["scrape_configs"]}
    tempo_port = load_yaml("tempo/tempo.yaml")["server"]["http_listen_port"]
    assert jobs["tempo"] == [f"tempo:{tempo_port}"]
    reader = load_yaml("collector/config.yaml")["service"]["telemetry"]["metrics"]["readers"][0]
    exporter = reader["pull"]["exporter"]["prometheus"]
    assert exporter["host"] == "0.0.0.0"
    assert jobs["otel-collector"] == [f"otel-collector:{exporter['port']}"]
