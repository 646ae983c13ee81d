"""Idle CPU of the session watcher: many session folders, last written days ago, no writes.

    python bench/idle_cpu.py [--sessions 10000] [--seconds 60]

Builds the state directory in a temporary folder, then for each mode (inotify, polling)
calls `SessionWatcher.changes(1.0)` in a loop, as the daemon does, and prints the process
CPU time spent as a percentage of one core over the wall time. Start-up (the first call,
which stats every log once) is timed apart, with the memory the watcher keeps
(tracemalloc: Python objects only, not the kernel's inotify watches).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

# Run from a checkout without installing the package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tailer.copilot.files import LOG_NAME  # noqa: E402
from tailer.copilot.watch import SessionWatcher  # noqa: E402

DAYS_AGO_S = 3 * 24 * 3600
LOG_TEXT = (
    '{"type":"session.start","data":{},"id":"1","timestamp":"2026-11-01T10:00:00.000Z"}\n'
    '{"type":"user.message","data":{},"id":"2","timestamp":"2026-11-01T10:00:01.000Z"}\n'
)


def make_state_dir(root: Path, sessions: int) -> None:
    old = time.time() - DAYS_AGO_S
    for index in range(sessions):
        folder = root / f"{index:08d}-0000-4000-8000-000000000000"
        folder.mkdir()
        log = folder / LOG_NAME
        log.write_text(LOG_TEXT)
        os.utime(log, (old, old))
        os.utime(folder, (old, old))
    os.utime(root, (old, old))


def measure(state_dir: Path, use_inotify: bool, seconds: float) -> None:
    tracemalloc.start()
    started = time.perf_counter()
    watcher = SessionWatcher(state_dir, use_inotify=use_inotify)
    sessions = len(watcher.changes(1.0).appeared)
    startup_s = time.perf_counter() - started
    kept_bytes = tracemalloc.get_traced_memory()[0]  # the report itself is freed by now
    tracemalloc.stop()
    reports = 0
    cpu_start, wall_start = time.process_time(), time.monotonic()
    while time.monotonic() - wall_start < seconds:
        if watcher.changes(1.0):
            reports += 1
    cpu = time.process_time() - cpu_start
    wall = time.monotonic() - wall_start
    watcher.close()
    print(
        f"{watcher.mode:8} sessions={sessions} start-up={startup_s:.2f}s"
        f" memory={kept_bytes / 1e6:.1f}MB idle: cpu={cpu:.3f}s wall={wall:.1f}s"
        f" -> {100 * cpu / wall:.3f}% of one core (non-empty reports: {reports})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=60.0)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        state_dir = Path(temp, "session-state")
        state_dir.mkdir()
        make_state_dir(state_dir, options.sessions)
        for use_inotify in (True, False):
            measure(state_dir, use_inotify, options.seconds)


if __name__ == "__main__":
    main()
