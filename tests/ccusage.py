"""ccusage, the usage report many Copilot CLI users already run, as they run it.

npm installs the pinned version into .cache/ccusage/<version>/ at the top of the repository
(git-ignored), the way tests/realcli/driver.py installs the CLI, so only the first run pays
for the download. `copilot` runs `ccusage copilot daily|monthly|session --json` on a copy of a
state folder, under a HOME of its own, offline (no price list fetched).

How ccusage 20.0.24 reads a Copilot session (its Copilot guide, and what it does with the
real CLI's logs, checked on copies changed by hand): of `session-state/<id>/events.jsonl`
only the `session.shutdown` events, their `modelMetrics`. A shutdown's per-model totals are
the session's so far (CLI 1.0.102 writes them so: a resumed session's last shutdown totals
all of it), so ccusage counts the first as it is and each later one as the difference from
the one before, dated by that shutdown's timestamp (`daily` puts a resumed run on its own
day; `session` has the session's totals, its first and last shutdown as `firstActivity`
and `lastActivity`). `messageCount` is the models' `requests.count`; `inputTokens` is
max(inputTokens - cacheReadTokens - cacheWriteTokens, 0): the CLI's input holds both cache
kinds. Besides the session logs it reads the CLI's OpenTelemetry file export
(`~/.copilot/otel/*.jsonl`). A session with no shutdown yet, or whose shutdown's timestamp
has fewer than the three fraction digits the CLI writes, gives it nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from realcli.driver import REPO, Unavailable, npm_install

VERSION = "20.0.24"
CACHE = REPO / ".cache" / "ccusage"
RUN_TIMEOUT_S = 120


def installed() -> Path:
    """The `ccusage` launcher, installed on first use; the calling test is skipped, with
    the reason, where npm cannot install it."""
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed (.ci/run installs it), so ccusage cannot be")
    try:
        return npm_install("ccusage", VERSION, CACHE / VERSION, "ccusage")
    except Unavailable as error:
        pytest.skip(f"ccusage {VERSION} cannot be installed: {error}")


def copilot(report: str, state_dir: Path, scratch: Path, *options: str) -> dict:
    """`ccusage copilot REPORT --json --offline OPTIONS` (REPORT: daily, monthly, session) on
    a copy of `state_dir`: its document, an array (`daily`, `monthly`, `sessions`) and
    `totals`; the calling test is skipped where ccusage has no build for this platform."""
    launcher = installed()
    home = scratch / "home"
    shutil.copytree(state_dir, home / ".copilot" / "session-state")
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "NO_COLOR": "1",
           "COPILOT_HOME": str(home / ".copilot")}
    done = subprocess.run([str(launcher), "copilot", report, "--json", "--offline", *options],
                          cwd=home, env=env, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)
    if "native binary is not available" in done.stderr:
        pytest.skip(f"ccusage {VERSION} has no build here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def copilot_sessions(state_dir: Path, scratch: Path) -> dict:
    """`ccusage copilot session --json --offline` on a copy of `state_dir`: its document,
    {"sessions": [...], "totals": {...}}."""
    return copilot("session", state_dir, scratch)
