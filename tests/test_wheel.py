"""Installed as a user installs it: the wheel in a fresh venv, and with pipx.

The demos read the example sessions from the package (the clone's fixtures/, which
pyproject.toml packages as tailer/fixtures), so `report --demo` and `demo` must work from an
install run outside the clone, with no PYTHONPATH pointing back into it. The wheel is built
from a copy of what the Dockerfile copies, so nothing else of the clone can slip in (and the
image's build has all it needs), and the clone is left without build/.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest

from exposition_helpers import samples
from fixture_truth import FIXTURES, fixture_turns, ordinary_turns
from tailerproc import ROOT


def run(command, cwd, env=None, timeout=300):
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, (command, result.stdout, result.stderr)
    return result.stdout


def clean_env(**extra):
    """The environment of a user's shell: nothing that leads back into the clone."""
    env = {name: value for name, value in os.environ.items()
           if name not in ("PYTHONPATH", "COPILOT_STATE_DIR", "COPILOT_HOME", "VIRTUAL_ENV")}
    return env | extra


def dockerfile_copies() -> list[str]:
    """What tailer/Dockerfile copies into the image's build (tests/test_stack_compose.py
    holds .dockerignore to the same list)."""
    dockerfile = (ROOT / "tailer" / "Dockerfile").read_text()
    return [name for sources in re.findall(r"^COPY\s+(.+?)\s+\S+$", dockerfile, re.MULTILINE)
            for name in sources.split()]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    source = tmp_path_factory.mktemp("source")
    for name in dockerfile_copies():
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy(ROOT / name, source / name)
    out = tmp_path_factory.mktemp("wheel")
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", "-w", str(out), str(source)], cwd=source)
    (built,) = out.glob("*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory):
    """The `hydrafusion-tailer` script of the wheel installed in a fresh venv."""
    home = tmp_path_factory.mktemp("venv")
    venv.create(home / "env", with_pip=True)
    run([str(home / "env" / "bin" / "python"), "-m", "pip", "install", "--no-index",
         "--no-deps", "--quiet", str(wheel)], cwd=home, env=clean_env())
    return home / "env" / "bin" / "hydrafusion-tailer"


def demo_report(script: Path, cwd: Path) -> dict:
    return json.loads(run([str(script), "report", "--demo", "--format", "json"], cwd=cwd,
                          env=clean_env()))


def assert_is_the_fixtures(document: dict) -> None:
    """The fixtures' turns, under the fixtures' own session ids."""
    assert document["headline"]["turns"] == len(fixture_turns())
    assert len(document["turns"]) == len(fixture_turns()) + len(ordinary_turns())
    assert {turn["session_id"] for turn in document["turns"]} == {
        folder.name for folder in FIXTURES.iterdir()}


def test_the_wheel_holds_the_example_sessions(wheel):
    assert FIXTURES == ROOT / "fixtures"
    listing = run([sys.executable, "-m", "zipfile", "-l", str(wheel)], cwd=wheel.parent)
    for folder in FIXTURES.iterdir():
        assert f"tailer/fixtures/{folder.name}/events.jsonl" in listing


def test_the_wheel_lists_every_package_of_the_tailer():
    """pyproject.toml names the packages one by one (it maps fixtures/ into the package, which
    a search of the folders cannot): a new one left out would be missing from every install."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = {".".join(path.parent.relative_to(ROOT).parts)
             for path in (ROOT / "tailer").rglob("__init__.py")}
    assert set(setuptools["packages"]) == found | {"tailer.fixtures"}
    assert setuptools["package-dir"] == {"tailer.fixtures": "fixtures"}


def test_report_demo_works_from_the_installed_wheel_with_the_same_ids_every_run(
        installed, tmp_path):
    first = demo_report(installed, tmp_path)
    assert_is_the_fixtures(first)
    second = demo_report(installed, tmp_path)
    assert [turn["session_id"] for turn in second["turns"]] == [
        turn["session_id"] for turn in first["turns"]]


def test_the_demo_command_replays_the_bundled_sessions_from_the_installed_wheel(
        installed, tmp_path):
    textfile = tmp_path / "demo.prom"
    run([str(installed), "demo", "--once", "--checkpoint", str(tmp_path / "demo.json"),
         "--otlp-endpoint", "none", "--metrics-address", "none", "--textfile", str(textfile)],
        cwd=tmp_path, env=clean_env(HOME=str(tmp_path)))
    # Every fixture turn, and the one whose replay begins at once, in flight.
    exposition = textfile.read_text()
    assert sum(samples(exposition, "hydrafusion_turns_total").values()) == len(fixture_turns())
    assert sum(samples(exposition, "hydrafusion_turns_in_flight").values()) == 1


@pytest.mark.skipif(shutil.which("pipx") is None, reason="pipx is not installed (.ci/run installs it)")
def test_report_demo_works_when_installed_with_pipx(wheel, tmp_path):
    env = clean_env(PIPX_HOME=str(tmp_path / "pipx"), PIPX_BIN_DIR=str(tmp_path / "bin"),
                    PIPX_DEFAULT_PYTHON=sys.executable)
    run(["pipx", "install", "--pip-args=--no-index --no-deps", str(wheel)], cwd=tmp_path,
        env=env)
    assert_is_the_fixtures(demo_report(tmp_path / "bin" / "hydrafusion-tailer", tmp_path))


def test_the_installed_commands_hints_name_it_as_installed(installed, tmp_path):
    """A hint names the command the user ran: `hydrafusion-tailer`, not `python3 -m tailer`,
    which fails where only the script is on PATH."""
    (tmp_path / "empty").mkdir()
    done = subprocess.run([str(installed), "report", "--state-dir", str(tmp_path / "empty")],
                          cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "`hydrafusion-tailer report --demo`" in done.stderr, done.stderr
    assert "-m tailer" not in done.stderr
    bare = subprocess.run([str(installed)], cwd=tmp_path, env=clean_env(), capture_output=True,
                          text=True, timeout=60)
    assert bare.returncode == 2 and bare.stderr.startswith("usage: hydrafusion-tailer COMMAND")
