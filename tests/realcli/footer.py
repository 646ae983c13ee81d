"""The real CLI run interactively in tmux, offline, with `statusline` installed as its footer.

The CLI starts as a user starts it (no -p: its full-screen interface, in a tmux window of
its own server), against the fake backend of backend.py, with the environment and the
isolated folders of driver.py. `statusline --install` sets the footer's command in its
COPILOT_HOME; the test's cache folder and a one-second refresh are added to the setting,
and a `--then` command keeps the JSON the CLI pipes to it. The folder trust question is
answered, one prompt is typed, and the screen is read until the footer shows the turn.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from .backend import FakeCopilot, Plan
from .driver import Copilot, install

REPO = Path(__file__).resolve().parents[2]
COLUMNS, ROWS = 160, 40
TRUST_QUESTION = "Do you trust the files in this folder?"
STARTUP_TIMEOUT_S = 120
TURN_TIMEOUT_S = 180


class NoTmux(Exception):
    """tmux is not installed: the interactive CLI cannot be run."""


@dataclass
class Footer:
    """What one interactive run left: the screens read after the prompt (last first), the
    JSON the CLI piped to the footer's command, the footer's setting."""

    screens: list[str]
    piped: dict | None
    setting: dict


def run_footer(version: str, workdir: Path, plan: Plan, prompt: str, seen: str) -> Footer:
    """Type `prompt` (answered by `plan`) into the interactive CLI and read its screen until
    a row holds `seen` (or TURN_TIMEOUT_S pass)."""
    tmux = shutil.which("tmux")
    if tmux is None:
        raise NoTmux("tmux is not installed (.ci/run installs it)")
    launcher = install(version)
    server = f"hydrafusion-realcli-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    with FakeCopilot() as fake:
        copilot = Copilot(launcher, version, workdir, fake.url)
        session_id = str(uuid.uuid4())
        fake.use(session_id, plan)
        setting = _install(copilot, workdir)
        args = [str(launcher), "--session-id", session_id, "--allow-all-tools", "--no-auto-update",
                "--model", "auto", "--auto-tier", "hydrafusion"]
        shell = (f"cd {shlex.quote(str(copilot.workspace))} && exec env -i "
                 + " ".join(f"{name}={shlex.quote(value)}" for name, value in
                            {**copilot.environ, "TERM": "xterm-256color"}.items())
                 + " " + " ".join(map(shlex.quote, args)))
        screen = _Screen(tmux, server)
        try:
            subprocess.run([tmux, "-L", server, "-f", "/dev/null", "new-session", "-d", "-x",
                            str(COLUMNS), "-y", str(ROWS), shell], check=True, timeout=30)
            if screen.wait_for(TRUST_QUESTION, STARTUP_TIMEOUT_S):
                screen.keys("Enter")
            screen.wait_for(" cr, review ", STARTUP_TIMEOUT_S)  # our footer runs: ready
            time.sleep(1)
            screen.keys("-l", prompt)
            for _ in range(5):  # typed text may still be taken as a paste: Enter until it is sent
                time.sleep(1)
                screen.keys("Enter")
                if screen.wait_until(lambda text: prompt not in _input_box(text), 3):
                    break
            screen.wait_for(seen, TURN_TIMEOUT_S)
        finally:
            screens = screen.seen
            subprocess.run([tmux, "-L", server, "kill-server"], capture_output=True, timeout=30)
    piped = workdir / "piped.json"
    return Footer(screens[::-1], json.loads(piped.read_text()) if piped.exists() else None, setting)


def _install(copilot: Copilot, workdir: Path) -> dict:
    """`statusline --install` into the CLI's COPILOT_HOME, as a user runs it; then the tests'
    own cache folder for its state and a refresh every second."""
    home = Path(copilot.environ["COPILOT_HOME"])
    piped = workdir / "piped.json"
    done = subprocess.run([sys.executable, "-m", "tailer", "statusline", "--install", "--then",
                           f"cat > {shlex.quote(str(piped))}"], cwd=REPO,
                          env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "COPILOT_HOME": str(home),
                               "HOME": str(workdir / "home")},
                          capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"statusline --install failed: {done.stderr}")
    path = home / "settings.json"
    settings = json.loads(path.read_text())
    cache = shlex.quote(str(workdir / "statusline-cache"))
    settings["statusLine"]["command"] = f"XDG_CACHE_HOME={cache} {settings['statusLine']['command']}"
    settings["statusLine"]["refreshInterval"] = 1
    path.write_text(json.dumps(settings, indent=2))
    return settings["statusLine"]


class _Screen:
    """The tmux window the CLI draws on."""

    def __init__(self, tmux: str, server: str):
        self.tmux, self.server = tmux, server
        self.seen: list[str] = []

    def text(self) -> str:
        done = subprocess.run([self.tmux, "-L", self.server, "capture-pane", "-p"],
                              capture_output=True, text=True, timeout=30)
        return done.stdout

    def keys(self, *keys: str) -> None:
        subprocess.run([self.tmux, "-L", self.server, "send-keys", *keys], check=True, timeout=30)

    def wait_for(self, text: str, timeout: float) -> bool:
        """Whether the screen shows `text` within `timeout` seconds."""
        return self.wait_until(lambda screen: text in screen, timeout)

    def wait_until(self, shows, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.text()
            self.seen.append(screen)
            if shows(screen):
                return True
            time.sleep(0.5)
        return False


def _input_box(screen: str) -> str:
    """The rows between the last two horizontal rules: where the CLI takes the prompt."""
    rows = screen.splitlines()
    rules = [index for index, row in enumerate(rows) if row.startswith("──")]
    return "\n".join(rows[rules[-2] + 1:rules[-1]]) if len(rules) >= 2 else ""
