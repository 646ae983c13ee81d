"""One pin per service: docker-compose.yml's image tag, and every mention agrees with it.

docs/STACK.md ("Versions") says which release each service is pinned at, why, and how to
move it: change the tag in docker-compose.yml, then let this test name every line that
still speaks of the old release (docs, config comments, .env.example, tests, the Tempo
manifest the config is checked against). Figures measured on an earlier release may name
it; they are listed below, file by file, with the reason.
"""

import re
import subprocess

import yaml

from compose_config import COMPOSE_FILE, REPO

VERSION = r"v?(\d+\.\d+(?:\.\d+)?)(?![\d.]*%)"
# Service: (its image, the ways the repo names one of its releases).
MENTIONS = {
    "prometheus": ("prom/prometheus", [rf"\bPrometheus {VERSION}\b", rf"\bpromtool {VERSION}\b",
                                       rf"prom/prometheus:{VERSION}"]),
    "otel-collector": ("otel/opentelemetry-collector-contrib",
                       [rf"\bcontrib {VERSION}\b", rf"opentelemetry-collector-contrib:{VERSION}"]),
    "tempo": ("grafana/tempo", [rf"\bTempo {VERSION}\b", rf"grafana/tempo:{VERSION}",
                                rf"tempo-{VERSION}-manifest"]),
    "grafana": ("grafana/grafana", [rf"\bGrafana {VERSION}\b", rf"grafana/grafana:{VERSION}"]),
}
# (file, the mention as written): why it may name another release than the pin.
EARLIER_RELEASES = {
    ("docs/PERFORMANCE.md", "Prometheus 3.14"): "the team-load figures were measured on it",
    ("docs/TEAM.md", "Prometheus 3.14"): "the sizing figures come from that measurement",
    ("docs/HISTORY.md", "Prometheus 3.14.0"): "the panic's figures on the previous pin",
    ("docs/HISTORY.md", "prom/prometheus:v3.14.0"): "how to run the stress test on the previous pin",
    ("docs/METRICS.md", "Prometheus 3.14"): "the release that measured the extrapolation error",
    ("tailer/outputs/history.py", "Prometheus 3.14"): "the release whose panic the write order avoids",
    ("tests/test_history_stress.py", "Prometheus 3.14"): "the release that panicked at first starts",
}
# The places that hold releases of their own (recorded sessions, generated fixtures).
NOT_SCANNED = ("fixtures/", "tests/data/", "tests/test_pins.py")


def composed_versions() -> dict[str, str]:
    services = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
    return {name: services[name]["image"].rsplit(":", 1)[1].removeprefix("v") for name in MENTIONS}


def agrees(mentioned: str, pinned: str) -> bool:
    """`Tempo 3.0` agrees with the pin 3.0.3 (the release line), `Tempo 3.1` does not."""
    return pinned == mentioned or pinned.startswith(mentioned + ".")


def repo_texts():
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.splitlines()
    for name in files:
        path = REPO / name
        if name.startswith(NOT_SCANNED) or not path.is_file():
            continue
        try:
            yield name, path.read_text()
        except UnicodeDecodeError:
            continue  # an image


def disagreements(texts, pinned: dict[str, str]) -> list[str]:
    found = []
    for name, text in texts:
        for number, line in enumerate(text.splitlines(), 1):
            for service, (_, patterns) in MENTIONS.items():
                for pattern in patterns:
                    for match in re.finditer(pattern, line):
                        if not agrees(match.group(1), pinned[service]) and \
                                (name, match.group(0)) not in EARLIER_RELEASES:
                            found.append(f"{name}:{number}: {match.group(0)} (pinned: {pinned[service]})")
    return found


def test_every_mention_of_a_service_release_is_the_composed_one():
    assert disagreements(repo_texts(), composed_versions()) == []


def test_a_mention_left_behind_by_a_bump_is_named_with_its_line():
    texts = [("docs/X.md", "Runs on Prometheus 3.16.\nThe collector contrib 0.159 and Tempo 3.0.\n")]
    pinned = {"prometheus": "3.16.0", "otel-collector": "0.165.0", "tempo": "3.0.3", "grafana": "13.2.1"}
    assert disagreements(texts, pinned) == ["docs/X.md:2: contrib 0.159 (pinned: 0.165.0)"]


def test_every_earlier_release_allowed_is_still_named_where_it_is_allowed():
    texts = dict(repo_texts())
    for name, mention in EARLIER_RELEASES:
        assert mention in texts.get(name, ""), f"{name} no longer names {mention}: drop it here"


def test_the_compose_images_are_the_ones_the_mentions_speak_of():
    services = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
    for service, (image, _) in MENTIONS.items():
        assert services[service]["image"].rsplit(":", 1)[0] == image
