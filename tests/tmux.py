"""An interactive bash (or zsh) in a real terminal (tmux), for what only a terminal shows:
what Tab completes, what a closed terminal does to the command running in it."""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None or shutil.which("bash") is None,
                                reason="needs tmux and bash")


BASH = ("bash", "--norc", "--noprofile")
ZSH = ("zsh", "-f")  # no startup files: no compinit, no framework


class Terminal:
    """A tmux server of its own running `shell` (bash without its startup files by default)
    in `cwd` with `env` alone (and no inputrc: readline's default keys), in a terminal of
    `columns` by `rows`; `kill` ends the server, the terminal with it."""

    def __init__(self, cwd: Path, env: dict[str, str], columns: int = 200, rows: int = 50,
                 shell: tuple[str, ...] = BASH):
        self.server = ["tmux", "-L", f"hydrafusion-{uuid.uuid4().hex[:12]}"]
        env = {"TERM": "xterm", "INPUTRC": "/dev/null", "LANG": "C.UTF-8", **env}
        subprocess.run([*self.server, "new-session", "-d", "-x", str(columns), "-y", str(rows),
                        "-c", str(cwd),
                        "env", "-i", *(f"{name}={value}" for name, value in env.items()),
                        *shell], check=True, timeout=30)
        self.type("PS1='ready$ '")
        self.keys("Enter")
        self.wait_for(lambda: "ready$ " in self.screen())

    def type(self, text: str) -> None:
        subprocess.run([*self.server, "send-keys", "-l", text], check=True, timeout=30)

    def keys(self, *keys: str) -> None:
        """Each key in its turn, as a person types them (Escape then * is Alt-*)."""
        for key in keys:
            subprocess.run([*self.server, "send-keys", key], check=True, timeout=30)
            time.sleep(0.3)

    def screen(self) -> str:
        return subprocess.run([*self.server, "capture-pane", "-p"], capture_output=True, text=True,
                              timeout=30).stdout

    def lines(self) -> list[str]:
        """Every line printed since the terminal started, scrolled away or on screen, as
        printed: a line the terminal wrapped because it was wider is one line again."""
        return subprocess.run([*self.server, "capture-pane", "-p", "-J", "-S", "-"],
                              capture_output=True, text=True, timeout=30).stdout.splitlines()

    def shell_pid(self) -> int:
        shown = subprocess.run([*self.server, "display-message", "-p", "#{pane_pid}"],
                               capture_output=True, text=True, check=True, timeout=30)
        return int(shown.stdout)

    @staticmethod
    def wait_for(done, within_s: float = 60) -> None:
        deadline = time.monotonic() + within_s
        while not done():
            assert time.monotonic() < deadline, "the terminal did not show it in time"
            time.sleep(0.05)

    def kill(self) -> None:
        subprocess.run([*self.server, "kill-server"], capture_output=True, timeout=30)
