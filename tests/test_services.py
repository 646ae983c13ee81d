"""The collector, Prometheus and promtool the tests run are the ones docker-compose.yml pins.

tests/build-services builds them from source (tests/services.py finds them); here each
binary's own `--version` is compared with the compose file's image tag, the collector's
components with what collector/config.yaml and docs/TEAM.md's collector configs use, and
the collector's own `validate` is run on collector/config.yaml.
"""

import importlib.machinery
import importlib.util
import json
import os
import re
import subprocess
import time
import urllib.request

import pytest
import yaml

from prom import REPO, running_prometheus, stack_features
from services import BUILD_SERVICES, binary, parse_build_output
from tailer.outputs.remote_write import RemoteWriter
from test_docs import code_blocks

COMPONENT_KINDS = ("receivers", "processors", "exporters", "extensions", "connectors")


def image_tag(image: str) -> str:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    [tag] = [service["image"].rsplit(":", 1)[1] for service in compose["services"].values()
             if service.get("image", "").startswith(image + ":")]
    return tag


def version_output(name: str) -> str:
    result = subprocess.run([binary(name), "--version"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    return result.stdout + result.stderr


def otelcol(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([binary("otelcol"), *args], capture_output=True, text=True, timeout=60)


def test_the_collector_is_the_composed_version():
    assert version_output("otelcol").split() == ["otelcol", "version",
                                                 image_tag("otel/opentelemetry-collector-contrib")]


@pytest.mark.parametrize("name", ["prometheus", "promtool"])
def test_prometheus_and_promtool_are_the_composed_version(name):
    match = re.match(rf"{name}, version (\S+) ", version_output(name))
    assert match, version_output(name)
    assert "v" + match.group(1) == image_tag("prom/prometheus")


def test_the_collector_has_exactly_the_components_its_configs_use_at_its_version():
    """Those of collector/config.yaml, and of the gateway and the settings TEAM.md offers
    to merge over it (tests/test_gateway_snippets.py runs them)."""
    components = yaml.safe_load(otelcol("components").stdout)
    configs = [yaml.safe_load((REPO / "collector" / "config.yaml").read_text()),
               *map(yaml.safe_load, code_blocks("TEAM.md", "yaml"))]
    version = image_tag("otel/opentelemetry-collector-contrib")
    for kind in COMPONENT_KINDS:
        built = {component["name"] for component in components[kind]}
        used = {name.split("/", 1)[0] for config in configs for name in config.get(kind) or {}}
        assert built == used, kind
        for component in components[kind]:
            assert component["module"].endswith(f" v{version}"), component


def test_a_component_type_without_a_known_module_stops_the_build_with_its_name():
    loader = importlib.machinery.SourceFileLoader("build_services", str(BUILD_SERVICES))
    build_services = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(build_services)
    with pytest.raises(SystemExit, match=r"no module known for extensions\.health_check"):
        build_services.builder_manifest("0.165.0", {"receivers": ["otlp"], "extensions": ["health_check"]})


def test_the_collector_validates_the_stack_config():
    """`validate` builds every component without starting it: tempo and prometheus are not
    looked up, so the stack's hostnames pass here."""
    result = otelcol("validate", f"--config={REPO / 'collector' / 'config.yaml'}")
    assert result.returncode == 0, result.stdout + result.stderr


def test_validate_refuses_a_misspelt_delivery_setting(tmp_path):
    config = (REPO / "collector" / "config.yaml").read_text()
    misspelt = tmp_path / "config.yaml"
    misspelt.write_text(config.replace("sending_queue:", "sending_queu:", 1))
    result = otelcol("validate", f"--config={misspelt}")
    assert result.returncode != 0 and "sending_queu" in result.stdout + result.stderr


def test_build_services_prints_one_absolute_path_per_binary_and_nothing_else():
    result = subprocess.run([str(BUILD_SERVICES)], capture_output=True, text=True, timeout=30 * 60)
    assert result.returncode == 0, result.stderr[-4000:]
    paths = parse_build_output(result.stdout)
    assert all(os.path.isabs(path) and os.access(path, os.X_OK) for path in paths.values())


def test_the_built_prometheus_runs_the_stack_config_and_answers_its_api(tmp_path):
    """Built without the UI assets and the cloud service discoveries: the stack's own
    prometheus.yml and rules load, and the HTTP API,
    which is all the stack's clients use, answers."""
    config = yaml.safe_load((REPO / "prometheus" / "prometheus.yml").read_text())
    config["rule_files"] = [str(REPO / "prometheus" / pattern) for pattern in config["rule_files"]]
    groups = [group for path in sorted((REPO / "prometheus" / "rules").glob("*.yml"))
              for group in yaml.safe_load(path.read_text())["groups"]]
    with running_prometheus(tmp_path, [], extra_config=config) as prom:
        with urllib.request.urlopen(f"{prom.url}/api/v1/rules", timeout=10) as response:
            loaded = json.load(response)["data"]["groups"]
        assert prom.query("vector(1)")[0]["value"][1] == "1"
    assert {group["name"]: len(group["rules"]) for group in loaded} == {
        group["name"]: len(group["rules"]) for group in groups}


def test_the_pinned_prometheus_counts_with_anchored_and_no_feature_flag(tmp_path):
    """`anchored` is stable and always on from 3.16 (3.14 refused it without
    --enable-feature=promql-extended-range-selectors), so the stack's command has no
    feature flag and a counter's exact change over a window comes back."""
    assert stack_features() == []
    with running_prometheus(tmp_path, [], extra_flags=["--web.enable-remote-write-receiver"]) as prom:
        now_ms = int(time.time() * 1000)
        RemoteWriter(f"{prom.url}/api/v1/write").push(
            [([("__name__", "x_total")], [(now_ms - 400_000, 1.0), (now_ms - 200_000, 4.0)])])
        assert prom.query("increase(x_total[5m] anchored)", time=now_ms / 1000)[0]["value"][1] == "3"
