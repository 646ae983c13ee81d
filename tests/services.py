"""Where tests find the real collector, Prometheus and promtool.

    from services import binary
    subprocess.run([binary("promtool"), "check", "config", path])

The stack pins its images in docker-compose.yml; tests run the same versions, built from
source by tests/build-services. A binary's path comes from its environment variable
(HYDRAFUSION_OTELCOL, HYDRAFUSION_PROMETHEUS, HYDRAFUSION_PROMTOOL: .ci/run sets them);
when that is unset, build-services is run once per test session (it reuses its cache, so
a plain `python3 -m pytest -q` in a clone gets the right versions too). Never a binary
found on PATH: a distribution's Prometheus is some other version.
"""

import functools
import os
import subprocess
from pathlib import Path

import pytest

BUILD_SERVICES = Path(__file__).resolve().parent / "build-services"
ENVIRONMENT = {
    "otelcol": "HYDRAFUSION_OTELCOL",
    "prometheus": "HYDRAFUSION_PROMETHEUS",
    "promtool": "HYDRAFUSION_PROMTOOL",
}
# A fresh machine compiles for several minutes; a cached run takes about a second.
BUILD_TIMEOUT = 30 * 60


def binary(name: str) -> str:
    """The absolute path of otelcol, prometheus or promtool; fails the test if there is none."""
    path = os.environ.get(ENVIRONMENT[name]) or _built()[name]
    if not Path(path).is_file():
        pytest.fail(f"{name}: {path} does not exist ({ENVIRONMENT[name]}, or tests/build-services)")
    return path


@functools.cache
def _built() -> dict[str, str]:
    """build-services' `name=path` lines, as a dict."""
    result = subprocess.run([str(BUILD_SERVICES)], capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    if result.returncode != 0:
        pytest.fail(f"tests/build-services failed ({result.returncode}):\n{result.stderr[-4000:]}")
    return parse_build_output(result.stdout)


def parse_build_output(stdout: str) -> dict[str, str]:
    """{name: path} from build-services' stdout, which must be exactly one line per binary."""
    pairs = dict(line.split("=", 1) for line in stdout.splitlines())
    assert pairs.keys() == ENVIRONMENT.keys() and len(stdout.splitlines()) == len(ENVIRONMENT), stdout
    return pairs
