"""Install the real Copilot CLI from npm and run it, offline, against the fake backend.

The version comes from tests/realcli/VERSION (the one place it is pinned) unless
REALCLI_VERSION names another. npm installs it into .cache/copilot/<version>/ at the top
of the repository (git-ignored); the CLI unpacks its platform package there too, so only
the first run of a version pays for the download and the unpacking.

Every run gets its own HOME, COPILOT_HOME and XDG folders, a dummy token, the fake
backend as its API, and every proxy variable pointed at the fake: nothing reaches the
network. What is left of a run is the session logs in `state_dir` and the CLI's own
OpenTelemetry file export in `otel_dir`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from .backend import FakeCopilot, Request
from .scenarios import SCENARIOS, Prompt, Scenario

REPO = Path(__file__).resolve().parents[2]
VERSION_FILE = Path(__file__).with_name("VERSION")
CACHE = REPO / ".cache" / "copilot"
PACKAGE = "@github/copilot"
# Enough for the slowest prompt (a judge that fails is retried with waits) on a busy machine.
PROMPT_TIMEOUT_S = 120
INSTALL_TIMEOUT_S = 300
# npm's words for a registry it cannot reach: the only failure that skips the suite.
_OFFLINE_MARKERS = ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "ENETUNREACH",
                    "ECONNRESET", "network", "proxy")
_FEATURE_FLAGS = "HYDRAFUSION,DYNAMIC_AUTO_TIERS,HYDRAFUSION_PLAN_V2"


class Unavailable(Exception):
    """A package cannot be installed because the npm registry cannot be reached."""


def pinned_version() -> str:
    return os.environ.get("REALCLI_VERSION") or VERSION_FILE.read_text().strip()


def install(version: str, cache: Path = CACHE) -> Path:
    """The `copilot` launcher of this version, installed by npm on first use."""
    return npm_install(PACKAGE, version, cache / version, "copilot")


def npm_install(package: str, version: str, prefix: Path, command: str) -> Path:
    """The launcher `command` of npm's `package` at `version`, installed into `prefix` on
    first use (tests/ccusage.py installs ccusage so too). Unavailable when npm's registry
    cannot be reached; RuntimeError when npm is missing or the install fails otherwise."""
    launcher = prefix / "node_modules" / ".bin" / command
    if launcher.exists():
        return launcher
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not installed (.ci/run installs it)")
    prefix.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(
            [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
             "--no-package-lock", "--loglevel=error", f"{package}@{version}"],
            capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as error:
        raise Unavailable(f"npm install {package}@{version} timed out") from error
    if done.returncode != 0:
        tail = done.stderr.strip()[-600:]
        if any(marker in tail for marker in _OFFLINE_MARKERS):
            raise Unavailable(f"npm cannot reach its registry: {tail}")
        raise RuntimeError(f"npm install {package}@{version} failed: {tail}")
    return launcher


def xdg_cache(version: str, cache: Path = CACHE) -> Path:
    """Where the CLI unpacks its platform package (and its event schema) for this version."""
    return cache / version / "xdg-cache"


def schema_path(version: str, cache: Path = CACHE) -> Path | None:
    """The installed version's session-events.schema.json, once a run has unpacked it."""
    found = sorted(xdg_cache(version, cache).glob(
        f"copilot/pkg/*/{version}/schemas/session-events.schema.json"))
    return found[0] if found else None


@dataclass
class Run:
    """One `copilot -p` run."""

    scenario: str
    session_id: str
    returncode: int
    seconds: float
    stderr_tail: str


@dataclass
class Outcome:
    """Everything a suite run leaves for the checks."""

    version: str
    state_dir: Path
    otel_dir: Path
    sessions: dict[str, str] = field(default_factory=dict)  # scenario -> session id
    runs: list[Run] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    schema: Path | None = None


class Copilot:
    """Runs one installed version with an isolated home under `workdir`."""

    def __init__(self, launcher: Path, version: str, workdir: Path, backend_url: str,
                 cache: Path = CACHE, timeout: float = PROMPT_TIMEOUT_S):
        self.launcher = launcher
        self.timeout = timeout
        self.workdir = workdir
        self.state_dir = workdir / "copilot-home" / "session-state"
        self.otel_dir = workdir / "otel"
        self.workspace = workdir / "workspace"
        for folder in (self.otel_dir, self.workspace, workdir / "home", workdir / "logs"):
            folder.mkdir(parents=True, exist_ok=True)
        self.environ = self._environ(backend_url, xdg_cache(version, cache))
        self.options = self._options()

    def _environ(self, url: str, cache_home: Path) -> dict[str, str]:
        home = self.workdir / "home"
        environ = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8",
            "HOME": str(home), "COPILOT_HOME": str(self.workdir / "copilot-home"),
            "XDG_CONFIG_HOME": str(home / ".config"), "XDG_STATE_HOME": str(home / ".state"),
            "XDG_DATA_HOME": str(home / ".local"), "XDG_CACHE_HOME": str(cache_home),
            "GH_CONFIG_DIR": str(home / "gh"), "GH_TOKEN": "gho_realcliDummyTokenNotARealOne0000",
            "COPILOT_API_URL": url, "COPILOT_DEBUG_GITHUB_API_URL": url,
            "COPILOT_AUTO_UPDATE": "false", "NO_COLOR": "1",
            "COPILOT_CLI_ENABLED_FEATURE_FLAGS": _FEATURE_FLAGS,
            "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
            "COPILOT_OTEL_ENABLED": "true", "COPILOT_OTEL_EXPORTER_TYPE": "file",
            # Content in the CLI's own spans, so the tests see it dropped by tailer/outputs/copilot_otel.py.
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
        }
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
            environ[name] = environ[name.lower()] = url
        return environ

    def _options(self) -> set[str]:
        """The long options this version's `--help` lists: older versions lack some.

        `--auto-tier` counts only where its values are not a fixed list without the fusion
        tiers (1.0.85 to 1.0.89 had it for efficiency, balance and intelligence only).
        """
        try:
            done = subprocess.run([str(self.launcher), "--help"], env=self.environ,
                                  cwd=self.workspace, capture_output=True, text=True,
                                  timeout=self.timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return set()
        options = set(re.findall(r"(--[a-z][a-z-]+)", done.stdout))
        fixed = re.search(r"routing profile \[possible values: ([^]]*)\]", done.stdout)
        if fixed and "hydrafusion" not in fixed.group(1):
            options.discard("--auto-tier")
        return options

    def prompt(self, scenario: str, session_id: str, prompt: Prompt, text: str) -> Run:
        args = [str(self.launcher), "-p", text, "--session-id", session_id,
                "--allow-all-tools", "--no-auto-update", "--output-format", "json",
                "--log-level", "debug", "--log-dir", str(self.workdir / "logs" / session_id)]
        if "--disable-client-telemetry" in self.options:
            args.append("--disable-client-telemetry")
        if prompt.tier is None:
            args += ["--model", prompt.model]
        elif "--auto-tier" in self.options:
            args += ["--model", "auto", "--auto-tier", prompt.tier]
        else:
            args += ["--model", prompt.tier]  # before fusion became an auto tier
        environ = dict(self.environ,
                       COPILOT_OTEL_FILE_EXPORTER_PATH=str(self.otel_dir / f"{scenario}.jsonl"))
        started = time.monotonic()
        try:
            done = subprocess.run(args, env=environ, cwd=self.workspace, capture_output=True,
                                  text=True, timeout=self.timeout, stdin=subprocess.DEVNULL)
            code, stderr = done.returncode, done.stderr
        except subprocess.TimeoutExpired as error:
            code, stderr = -1, f"timed out after {self.timeout} s: {error.stderr or ''}"
        return Run(scenario, session_id, code, round(time.monotonic() - started, 1),
                   str(stderr).strip()[-600:])


def run_scenarios(version: str, workdir: Path, scenarios: tuple[Scenario, ...] = SCENARIOS,
                  cache: Path = CACHE, timeout: float = PROMPT_TIMEOUT_S) -> Outcome:
    """Install `version` if need be and drive it through every scenario, one after another."""
    launcher = install(version, cache)
    with FakeCopilot() as fake:
        copilot = Copilot(launcher, version, workdir, fake.url, cache, timeout)
        outcome = Outcome(version, copilot.state_dir, copilot.otel_dir)
        for scenario in scenarios:
            session_id = str(uuid.uuid4())
            outcome.sessions[scenario.name] = session_id
            for number, prompt in enumerate(scenario.prompts, 1):
                fake.use(session_id, prompt.plan)
                text = f"Scenario {scenario.name}, prompt {number}: say hello"
                outcome.runs.append(copilot.prompt(scenario.name, session_id, prompt, text))
        outcome.requests = fake.requests()
    outcome.schema = schema_path(version, cache)
    return outcome
