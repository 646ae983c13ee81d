"""Measuring the footer's command (issue 41): `statusline` as Copilot CLI runs it on each
refresh, on one long session log, from start to exit beside `python -c pass`, with the log
unchanged and with a turn in flight appended between refreshes; its first look at the log;
and what can go wrong (stdin empty, binary, of 100 MB; a missing log; a damaged state).
"""

from __future__ import annotations

import json
import os
import random
import resource
import subprocess
import time
from pathlib import Path

import runner
from common import MB, REPO, progress
from datagen import SEED, add_turn, statusline_log
from runner import child_environment

from tailer.statusline.settings import command_words

FAULT_RUNS = 9  # runs of each fault case, the slowest counted


def run_statusline(stdin: bytes, environ: dict[str, str], *options: str) -> tuple[float, bytes]:
    """One run as the CLI's refresh runs it (the command --install sets): its JSON on stdin,
    stdout piped; seconds from start to exit, and what it printed."""
    started = time.perf_counter()
    done = subprocess.run(statusline_command(*options), cwd=REPO, env=environ, input=stdin, capture_output=True)
    return time.perf_counter() - started, done.stdout


def statusline_command(*options: str) -> list[str]:
    """As `statusline --install` sets it (tailer/statusline/settings.py, our_command)."""
    return [runner.PYTHON, *command_words(list(options))[1:]]


def timed_runs(rounds: int, run) -> list[float]:
    return sorted(run() for _ in range(rounds))


def with_cpu(cpu: list[float], run):
    """`run` (a call that runs one child), the CPU time (user + system) of that child added to
    `cpu`: on a machine shared with other work, a refresh's CPU time moves far less than its
    wall time, so two versions compare by it."""
    def measured():
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        value = run()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        return value
    return measured


def measure_statusline(work: Path, size_mb: int, rounds: int) -> dict:
    """The footer's command on a log of `size_mb` (see the module docstring, 6.)."""
    progress(f"statusline: a session log of {size_mb} MB")
    log_path = work / "statusline" / "state" / "statusline-bench" / "events.jsonl"
    writer, log = statusline_log(log_path, size_mb)
    environ = child_environment(work / "statusline" / "cache")
    environ["NO_COLOR"] = "1"
    stdin = json.dumps({"session_id": "statusline-bench", "transcript_path": str(log_path.parent),
                        "cwd": str(work), "model": {"id": "auto"}}).encode()
    results: dict = {"log_mb": log.size / MB}
    first = []
    while not first or first[-1][1].startswith(b"HydraFusion: reading the log"):
        first.append(run_statusline(stdin, environ))
    results["first_refreshes"], results["first_max_s"] = len(first), max(seconds for seconds, _ in first)
    results["first_total_s"] = sum(seconds for seconds, _ in first)

    def unchanged() -> float:
        return run_statusline(stdin, environ)[0]

    old = time.time_ns() - 60 * 10**9
    os.utime(log_path, ns=(old, old))
    unchanged()  # the refresh that notes the log's identity, now trusted
    cpu: dict[str, list[float]] = {"unchanged": [], "appended": [], "bare": []}
    results["unchanged_s"] = timed_runs(rounds, with_cpu(cpu["unchanged"], unchanged))
    # A turn in flight: each refresh follows a few more of its lines.
    rng = random.Random(SEED + 42)
    pending: list[str] = []

    def appended() -> float:
        while not pending:
            before = len(writer.lines())
            add_turn(writer, rng, rolled_up=True)
            pending.extend(writer.lines()[before:])
        with open(log_path, "ab") as handle:
            for _ in range(min(len(pending), rng.randint(1, 4))):
                handle.write(pending.pop(0).encode() + b"\n")
        return run_statusline(stdin, environ)[0]

    results["appended_s"] = timed_runs(rounds, with_cpu(cpu["appended"], appended))
    results["bare_s"] = timed_runs(rounds, with_cpu(cpu["bare"], lambda: run_bare(environ)))
    results["cpu_s"] = {name: sorted(seconds) for name, seconds in cpu.items()}
    results["faults"] = statusline_faults(work, environ, stdin, log_path)
    return results


def run_bare(environ: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run([runner.PYTHON, "-c", "pass"], cwd=REPO, env=environ, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def statusline_faults(work: Path, environ: dict[str, str], stdin: bytes, log_path: Path) -> dict[str, float]:
    """The slowest of FAULT_RUNS runs of each case that must cost the footer nothing."""
    big = work / "statusline" / "stdin-100mb"
    with open(big, "wb") as handle:
        handle.truncate(100 * MB)
    state = next((work / "statusline" / "cache" / "hydrafusion" / "statusline").glob("*.json"))

    def damaged() -> float:
        state.write_bytes(os.urandom(4096))
        return run_statusline(stdin, environ)[0]

    def from_file() -> float:
        with open(big, "rb") as handle:
            started = time.perf_counter()
            subprocess.run(statusline_command(), cwd=REPO, env=environ, stdin=handle, capture_output=True)
            return time.perf_counter() - started

    missing = json.dumps({"transcript_path": str(work / "statusline" / "no-such-session")}).encode()
    cases = {"empty stdin": lambda: run_statusline(b"", environ)[0],
             "binary stdin": lambda: run_statusline(bytes(range(256)) * 64, environ)[0],
             "100 MB of stdin": from_file,
             "a missing log": lambda: run_statusline(missing, environ)[0],
             "a damaged state (the log then read again, within its budget)": damaged}
    return {name: max(case() for _ in range(FAULT_RUNS)) for name, case in cases.items()}

