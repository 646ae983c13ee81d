"""Run the real tailer as a separate process, the way users and the container run it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def tailer_env(**overrides: str) -> dict[str, str]:
    """The parent environment without anything that would point the tailer elsewhere."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "COPILOT_", "HYDRAFUSION_"))}
    env["PYTHONPATH"] = str(ROOT)
    # Each process gets its own checkpoint unless a test passes --checkpoint.
    env["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="tailer-state-")
    # And its own report cache, never the user's.
    env["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="tailer-cache-")
    env.update(overrides)
    return env


def run_once(*args: str, env: dict[str, str] | None = None, timeout: float = 120):
    """`python -m tailer run --once ...`; returns the CompletedProcess (text output)."""
    return subprocess.run(
        [sys.executable, "-m", "tailer", "run", "--once", *args],
        cwd=ROOT, env=env or tailer_env(), capture_output=True, text=True, timeout=timeout,
    )


def ctrl_c_quits() -> None:
    """For a child that a test stops with SIGINT or SIGHUP: a shell starts a background job
    with SIGINT ignored, and nohup with SIGHUP ignored; Python then installs no
    KeyboardInterrupt, the tailer leaves both ignored (commands/stops.py), and the test
    would hang only when the suite runs in the background (`nohup bash .ci/run &`)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def start_on_a_terminal(*args: str, rows: int, columns: int,
                        env: dict[str, str] | None = None) -> tuple[subprocess.Popen, int]:
    """`python -m tailer ARGS` with a pseudo-terminal of rows x columns for its stdin and
    stdout (stderr piped); returns the process and the terminal's side to read it from."""
    import fcntl
    import pty
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    process = subprocess.Popen(
        [sys.executable, "-m", "tailer", *args], cwd=ROOT, env=env or tailer_env(),
        stdin=follower, stdout=follower, stderr=subprocess.PIPE, start_new_session=True,
        preexec_fn=ctrl_c_quits)
    os.close(follower)
    return process, leader


class TailerProcess:
    def __init__(self, process: subprocess.Popen, log_path: Path, metrics_port: int | None):
        self.process = process
        self.log_path = log_path
        self.metrics_port = metrics_port

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_log(self, pattern: str, count: int = 1, timeout: float = 30) -> list[str]:
        """Block until `pattern` (a regex) matched `count` log lines; fail on timeout or exit."""
        deadline = time.monotonic() + timeout
        while True:
            found = [line for line in self.log().splitlines() if re.search(pattern, line)]
            if len(found) >= count:
                return found
            if self.process.poll() is not None:
                raise AssertionError(f"tailer exited ({self.process.returncode}):\n{self.log()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{count} x {pattern!r} not logged in {timeout}s:\n{self.log()}")
            time.sleep(0.1)

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.read().decode()

    def wait_for_metrics(self, text: str, timeout: float = 30) -> str:
        """Scrape /metrics until it contains `text`: values are published a moment after
        the turn is logged, once the checkpoint holds them."""
        deadline = time.monotonic() + timeout
        while True:
            body = self.metrics()
            if text in body:
                return body
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} not in /metrics after {timeout}s:\n{body}")
            time.sleep(0.2)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def children_of(pid: int) -> list[int]:
    """The processes `pid` started (of any of its threads), from /proc; [] once it is gone."""
    found = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as children:
                found += map(int, children.read().split())
        except OSError:
            pass
    return found


@contextmanager
def running_tailer(tmp_path: Path, *args: str, metrics_port: int | None = None,
                   env: dict[str, str] | None = None, command: str = "run"):
    """Start `python -m tailer COMMAND ARGS`, wait for its startup line, stop it afterwards."""
    log_path = tmp_path / f"tailer-{time.monotonic_ns()}.log"
    address = f"127.0.0.1:{metrics_port}" if metrics_port else "none"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "tailer", command, "--metrics-address", address, *args],
            cwd=ROOT, env=env or tailer_env(), stdout=log, stderr=subprocess.STDOUT,
        )
    tailer = TailerProcess(process, log_path, metrics_port)
    try:
        tailer.wait_for_log(r"hydrafusion-tailer .*state dir|waiting for the state directory")
        yield tailer
    finally:
        tailer.stop()
