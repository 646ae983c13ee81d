"""Running the tailer as a user runs it, and watching its processes from outside.

Every child runs this checkout's tailer with its bytecode cached, as an installed tailer
does (child_environment), from a virtual environment of this Python with no package in it
(use_bare_python), and a report with a cache folder of the benchmark's own, never the
user's. A process's CPU time and memory are read from /proc; exports go to a minimal
OTLP/HTTP receiver in the measuring process (Receiver).
"""

from __future__ import annotations

import fcntl
import gzip
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from common import MB, REPO
from tailerproc import children_of

POLL_S = 0.05  # how often a report's processes are looked at for their peak RSS
# The tailer's bytecode, kept between runs outside the checkout (see child_environment).
PYCACHE = Path(tempfile.gettempdir(), "hydrafusion-bench-pycache")
# The Python every child runs: this one, until a script's main() switches to a bare one
# (use_bare_python), so start-up is what a user's Python pays, not what this machine
# installed beside it (a sandbox's .pth that imports certifi at every start: 20 ms here).
# Read it as runner.PYTHON, at the time of the call.
PYTHON = sys.executable


class Receiver:
    """A minimal OTLP/HTTP JSON traces receiver: answers 200, counts spans, and notes when the
    root span of each turn (the span without a parent) first arrived."""

    def __init__(self):
        self._changed = threading.Condition()
        self.spans = 0
        self.root_spans = 0
        self.roots: dict[str, float] = {}  # fusion id -> time.monotonic() of arrival
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _ReceiverHandler)
        self._server.daemon_threads = True
        self._server.receiver = self
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def receive(self, body: bytes, arrived: float) -> None:
        request = json.loads(body)
        with self._changed:
            for resource_spans in request.get("resourceSpans", []):
                for scope_spans in resource_spans.get("scopeSpans", []):
                    for span in scope_spans.get("spans", []):
                        self.spans += 1
                        if span.get("parentSpanId"):
                            continue
                        self.root_spans += 1
                        fusion_id = next((a["value"].get("stringValue") for a in span.get("attributes", [])
                                          if a["key"] == "hydrafusion.fusion_id"), None)
                        self.roots.setdefault(fusion_id, arrived)
            self._changed.notify_all()

    def wait_for_roots(self, fusion_ids: set[str], timeout: float) -> None:
        with self._changed:
            self._changed.wait_for(lambda: fusion_ids <= self.roots.keys(), timeout)

    def reset(self) -> None:
        with self._changed:
            self.spans = self.root_spans = 0
            self.roots = {}

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class _ReceiverHandler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        arrived = time.monotonic()
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        self.server.receiver.receive(body, arrived)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format, *args) -> None:
        pass


def use_bare_python(folder: Path) -> str:
    """Make every child run this Python from a new virtual environment at `folder`, with no
    package of its own: the tailer needs none (standard library only), and its start-up
    should not carry the .pth files of whatever site-packages this machine has. Returns it."""
    global PYTHON
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    PYTHON = str(folder / ("Scripts" if os.name == "nt" else "bin") / Path(sys.executable).name)
    return PYTHON


def tailer_command(*options: str) -> list[str]:
    return [PYTHON, "-m", "tailer", "run", *options]


def report_command(state_dir: Path, *options: str) -> list[str]:
    return [PYTHON, "-m", "tailer", "report", "--format", "json", "--state-dir", str(state_dir), *options]


def report_watch_command(state_dir: Path) -> list[str]:
    return [PYTHON, "-m", "tailer", "report", "--watch", "--state-dir", str(state_dir)]


def child_environment(cache_home: Path | None = None) -> dict[str, str]:
    """This checkout's tailer, configured by its command line alone.

    Its bytecode is cached (in PYCACHE, not in the checkout), as an installed package has
    its .pyc files: without them every run would compile the tailer again, a cost no user
    pays. `cache_home` is its XDG_CACHE_HOME, so the report's cache is the benchmark's own
    (a fresh folder: a first read; one a report has filled: a warm one).
    """
    environ = {key: value for key, value in os.environ.items()
               if not key.startswith(("OTEL_", "HYDRAFUSION_", "COPILOT_"))}
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), environ.get("PYTHONPATH")]))
    environ.pop("PYTHONDONTWRITEBYTECODE", None)
    environ["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    if cache_home is not None:
        environ["XDG_CACHE_HOME"] = str(cache_home)
    return environ


def start_daemon(options: list[str], log_path: Path) -> subprocess.Popen:
    with open(log_path, "wb") as log:
        return subprocess.Popen(tailer_command(*options), cwd=REPO, env=child_environment(),
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)


def stop_daemon(child: subprocess.Popen) -> None:
    child.send_signal(signal.SIGTERM)
    try:
        child.wait(30)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def wait_for_log(log_path: Path, pattern: str, child: subprocess.Popen, timeout: float) -> re.Match | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and child.poll() is None:
        match = re.search(pattern, log_path.read_text(errors="replace"))
        if match:
            return match
        time.sleep(0.05)
    return None


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, all its threads, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory_mb(pid: int, field: str) -> float:
    """VmRSS (now) or VmHWM (peak) of a process, from /proc/<pid>/status."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024 / MB
    return float("nan")


def wait_until_quiet(pid: int, timeout: float = 120.0) -> float:
    """Wait until the process uses under 1% of a core over 2 s: its start-up work is over."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        before = cpu_seconds(pid)
        time.sleep(2.0)
        if cpu_seconds(pid) - before <= 0.02:
            break
    return time.monotonic() - started


def warnings_in(log_path: Path) -> list[str]:
    """The daemon's warnings, but for its per-turn lines (a route failure is logged as one)
    and its checks of the CLI's totals: the padding's model calls are not in the totals the
    generated sessions end with, so every backfill session disagrees, as the data is made."""
    return [line for line in log_path.read_text(errors="replace").splitlines()
            if " WARNING " in line and " WARNING fusion " not in line
            and "our sums differ from the CLI's" not in line]




LAUNCHER = """
import os, subprocess, sys, time
started = time.perf_counter()
child = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(child.pid, 0)
print(time.perf_counter() - started, os.waitstatus_to_exitcode(status), usage.ru_maxrss,
      usage.ru_utime + usage.ru_stime)
"""



def descendants(pid: int) -> list[int]:
    found, pending = [], children_of(pid)
    while pending:
        child = pending.pop()
        found.append(child)
        pending += children_of(child)
    return found


def peak_rss_mb(pid: int) -> float | None:
    try:
        return memory_mb(pid, "VmHWM")
    except OSError:  # it has ended
        return None



def start_on_a_terminal(command: list[str], environ: dict[str, str], output: Path) -> subprocess.Popen:
    """`command` with a new pseudo-terminal (100 x 40) as its stdout and stderr; a thread
    copies what it writes to `output` until it closes the terminal."""
    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
    child = subprocess.Popen(command, cwd=REPO, env=environ, stdin=subprocess.DEVNULL,
                             stdout=follower, stderr=follower)
    os.close(follower)
    out = open(output, "wb")

    def copy() -> None:
        with out:
            while True:
                try:
                    written = os.read(leader, 65536)
                except OSError:  # EIO: the child has closed the terminal
                    break
                if not written:
                    break
                out.write(written)
                out.flush()
        os.close(leader)

    threading.Thread(target=copy, daemon=True).start()
    return child



def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on, for the daemon's /metrics."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]

