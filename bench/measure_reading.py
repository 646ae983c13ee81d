"""Measuring the reading of a month of logs: the line readers in this process (the plain
read, the raw read, the naive reader, the tailer's own line reader), the daemon's backfill
and the report, each from outside as a process, the best of rounds.

A round runs every reader once, rather than one reader's runs back to back: a slow spell of
a shared machine then costs every reader a round, not one reader its figure.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

import runner
from common import MB, REPO, progress
from datagen import SEED, add_turn, ledger_rows
from runner import (LAUNCHER, POLL_S, Receiver, child_environment, descendants, peak_rss_mb, report_command,
                    tailer_command, warnings_in)
from tailerproc import children_of

from sessiongen import SessionWriter
from tailer.copilot.event_types import may_be_read
from tailer.copilot.lines import LineReader

READ_CHUNK = 1 << 20
TIMED_ROUNDS = 3
# A warm report takes some 0.4 s, and this machine's speed swings by a third within
# seconds: the best of 3 such runs was often one of a slow spell, where a first read of 7 s
# evens its spells out. Short runs are cheap, so they take the best of more.
SHORT_ROUNDS = 9
APPENDED_SESSIONS = 10  # the sessions that get a new turn between two reports


def plain_lines(paths: list[Path]) -> int:
    """The plain read: every line of every file, `for line in f` in binary mode."""
    count = 0
    for path in paths:
        with open(path, "rb") as lines:
            for _ in lines:
                count += 1
    return count


def raw_read(paths: list[Path]) -> int:
    """Every byte, read(1 MiB) at a time without buffering: the disk and page-cache bound."""
    total = 0
    for path in paths:
        with open(path, "rb", buffering=0) as raw:
            while chunk := raw.read(READ_CHUNK):
                total += len(chunk)
    return total


def naive_reader(paths: list[Path]) -> int:
    """JSON-parse every line and keep the fusion events: a reader without a byte prefilter."""
    found = 0
    for path in paths:
        with open(path, "rb") as lines:
            for line in lines:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict) and str(event.get("type")).startswith(
                        ("session.fusion_", "assistant.fusion_")):
                    found += 1
    return found


def line_reader(paths: list[Path]) -> int:
    """The tailer's own line reader with its markers, in this process: its reading stage alone."""
    handed_out = 0
    for path in paths:
        for _ in LineReader(path, wanted=may_be_read).read():
            handed_out += 1
    return handed_out


def timed(read, paths: list[Path]) -> float:
    started = time.perf_counter()
    read(paths)
    return time.perf_counter() - started


# Runs a command and prints its wall time, exit code and peak RSS (KiB). Linux carries a
# process's peak RSS over exec from the process it was forked from, so a tailer started
# straight from this script, which holds the data generator and the readers' leftovers, would


def run_backfill(state_dir: Path, work: Path, receiver: Receiver, label: str, *, export: bool = True) -> dict:
    """One `run --once --from-start` with a fresh checkpoint: wall time, peak RSS, spans.

    Without `export`, `--otlp-endpoint none`: what reading, parsing and assembling cost alone.
    """
    checkpoint = work / f"backfill-{label}.checkpoint.json"
    log_path = work / f"backfill-{label}.log"
    checkpoint.unlink(missing_ok=True)
    receiver.reset()
    options = ["--once", "--from-start", "--state-dir", str(state_dir), "--checkpoint", str(checkpoint),
               "--metrics-address", "none", "--otlp-endpoint", receiver.endpoint if export else "none"]
    with open(log_path, "wb") as log:
        launched = subprocess.run([sys.executable, "-c", LAUNCHER, *tailer_command(*options)], cwd=REPO,
                                  env=child_environment(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=log, check=True, text=True)
    wall, exit_code, peak_kib, cpu = launched.stdout.split()
    return {"wall_s": float(wall), "cpu_s": float(cpu), "peak_rss_mb": int(peak_kib) * 1024 / MB,
            "exit_code": int(exit_code),
            "spans": receiver.spans, "root_spans": receiver.root_spans, "turns": len(receiver.roots),
            "warnings": warnings_in(log_path), "command": tailer_command(*options)}



def run_report(state_dir: Path, cache_home: Path, *options: str) -> dict:
    """One `report --format json` over the data (its output thrown away): its wall time, the
    CPU time of its processes, and the peak RSS of the report's process and of the largest
    of its workers.

    The peaks are each process's VmHWM, read from /proc every POLL_S while it runs, so a
    worker's growth in its last moments may be missed; `tree_rss_mb`, from wait4, misses
    nothing but is the largest of them all (Linux gives a process's peak with its children's).
    """
    command = report_command(state_dir, *options)
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, *command], cwd=REPO,
                                env=child_environment(cache_home), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    parent_peak, worker_peaks = 0.0, {}
    while launcher.poll() is None:
        for report_pid in children_of(launcher.pid):
            parent_peak = max(parent_peak, peak_rss_mb(report_pid) or 0.0)
            for worker in descendants(report_pid):
                worker_peaks[worker] = max(worker_peaks.get(worker, 0.0), peak_rss_mb(worker) or 0.0)
        time.sleep(POLL_S)
    wall, exit_code, peak_kib, cpu = launcher.stdout.read().split()
    return {"wall_s": float(wall), "cpu_s": float(cpu), "exit_code": int(exit_code),
            "tree_rss_mb": int(peak_kib) * 1024 / MB,
            "parent_rss_mb": parent_peak, "worker_rss_mb": max(worker_peaks.values(), default=None),
            "workers": len(worker_peaks), "command": command}


def _better_report(best: dict | None, run: dict) -> dict:
    """The faster of two report runs' time, and the least CPU time, with the worse of their
    other figures."""
    if best is None:
        return run
    faster = dict(min(best, run, key=lambda r: r["wall_s"]))
    faster["exit_code"] = best["exit_code"] or run["exit_code"]
    faster["cpu_s"] = min(best["cpu_s"], run["cpu_s"])
    for peak in ("tree_rss_mb", "parent_rss_mb"):
        faster[peak] = max(best[peak], run[peak])
    workers = [r["worker_rss_mb"] for r in (best, run) if r["worker_rss_mb"] is not None]
    faster["worker_rss_mb"] = max(workers, default=None)
    faster["workers"] = max(best["workers"], run["workers"])
    return faster


def report_turns(state_dir: Path, cache_home: Path) -> int:
    """How many turns, fusion and ordinary, the report finds in the data (a run of its own,
    not timed)."""
    done = subprocess.run(report_command(state_dir), cwd=REPO, env=child_environment(cache_home),
                          stdin=subprocess.DEVNULL, capture_output=True, check=True, text=True)
    return len(json.loads(done.stdout)["turns"])


def report_takes(option: str) -> bool:
    """Whether this checkout's report has `option` (--jobs came with issue 21)."""
    done = subprocess.run([runner.PYTHON, "-m", "tailer", "report", "--help"], cwd=REPO,
                          env=child_environment(), capture_output=True, text=True)
    return option in done.stdout


def last_timestamp(log_path: Path) -> datetime:
    """The time of a log's last line (read from its end: a session's last line is short)."""
    with open(log_path, "rb") as log:
        log.seek(max(0, log_path.stat().st_size - 65536))
        last = log.read().rstrip(b"\n").rpartition(b"\n")[2]
    return datetime.fromisoformat(json.loads(last)["timestamp"].replace("Z", "+00:00"))


class Appender:
    """A new turn at the end of a session's log each time, as the CLI writes it when the
    session is resumed; `restore` cuts the log back to what it was."""

    def __init__(self, log_path: Path, rng: random.Random):
        self.log_path, self.rng = log_path, rng
        self.size = log_path.stat().st_size
        self.writer = SessionWriter(log_path.parent.name, last_timestamp(log_path) + timedelta(minutes=1),
                                    seed=" appended")
        self.written = len(self.writer.lines())  # its session.start: the log has its own

    def append_turn(self) -> None:
        self.writer.resume()
        add_turn(self.writer, self.rng, rolled_up=True)
        lines = self.writer.lines()
        with open(self.log_path, "ab") as log:
            log.write("".join(line + "\n" for line in lines[self.written:]).encode())
        self.written = len(lines)

    def restore(self) -> None:
        os.truncate(self.log_path, self.size)


def measure_report(state_dir: Path, work: Path, label: str) -> dict:
    """The report over one kind of data, as issue 21 measures it, the best of TIMED_ROUNDS
    (first reads) or SHORT_ROUNDS (the others):

    - first reads, each with a cache folder of its own that starts empty: the default
      --jobs (the CPU count; "the first read"), then --jobs 1 and --jobs 2;
    - warm: reports over the unchanged logs with the cache a report filled;
    - appended: before each, APPENDED_SESSIONS sessions get one new turn each; the cache
      is the warm one, so only those turns are new to it.

    The appended turns are cut off again at the end, so the data stays what its manifest
    says; the turns the report finds after the appends are counted (with the cache warm)
    against the turns of the data plus those appended.
    """
    variants = {"first": ()}
    if report_takes("--jobs"):
        variants.update(jobs_1=("--jobs", "1"), jobs_2=("--jobs", "2"))
    progress(f"report: a warm-up, then {TIMED_ROUNDS} rounds of first reads ({', '.join(variants)}), "
             f"{SHORT_ROUNDS} of warm reads and of reads after appends")

    def first_read(*options: str) -> dict:
        cache_home = Path(tempfile.mkdtemp(prefix="first-read-", dir=work))
        try:
            return run_report(state_dir, cache_home, *options)
        finally:
            shutil.rmtree(cache_home, ignore_errors=True)

    first_read()
    results = {}
    for round_number in range(1, TIMED_ROUNDS + 1):
        for name, options in variants.items():
            results[name] = _better_report(results.get(name), first_read(*options))
        progress(f"  round {round_number}: " + ", ".join(
            f"{name} {results[name]['wall_s']:.2f} s" for name in variants) + " (best so far)")
    warm_cache = work / f"report-cache-{label}"
    shutil.rmtree(warm_cache, ignore_errors=True)
    run_report(state_dir, warm_cache)  # fills the cache
    reads_ledger = report_takes("--ledger")
    for _ in range(SHORT_ROUNDS):
        results["warm"] = _better_report(results.get("warm"), run_report(state_dir, warm_cache))
        if reads_ledger:  # the same, without reading the CLI's ledger
            results["warm_no_ledger"] = _better_report(results.get("warm_no_ledger"), run_report(
                state_dir, warm_cache, "--ledger", "none"))
    results["ledger_rows"] = ledger_rows(state_dir.parent)
    logs = sorted(state_dir.glob("*/events.jsonl"))
    step = max(1, len(logs) // APPENDED_SESSIONS)
    appenders = [Appender(path, random.Random(f"{SEED} {path.parent.name}"))
                 for path in logs[::step][:APPENDED_SESSIONS]]
    try:
        for _ in range(SHORT_ROUNDS):
            for appender in appenders:
                appender.append_turn()
            results["appended"] = _better_report(results.get("appended"), run_report(state_dir, warm_cache))
        results["turns_after_appends"] = report_turns(state_dir, warm_cache)
        results["appended_turns"] = len(appenders) * SHORT_ROUNDS
    finally:
        for appender in appenders:
            appender.restore()
        shutil.rmtree(warm_cache, ignore_errors=True)
    cache_home = Path(tempfile.mkdtemp(prefix="count-", dir=work))
    results["turns"] = report_turns(state_dir, cache_home)
    shutil.rmtree(cache_home, ignore_errors=True)
    progress(f"  warm {results['warm']['wall_s']:.2f} s, after appends {results['appended']['wall_s']:.2f} s")
    return results


def measure_backfill(state_dir: Path, work: Path, receiver: Receiver) -> dict:
    """Every reader and the tailer, in TIMED_ROUNDS rounds after a warm-up; the best of each.

    Rounds rather than one reader's runs back to back: a slow spell of this shared machine
    then costs every reader a round, not one reader its figure.
    """
    paths = sorted(state_dir.glob("*/events.jsonl"))
    size = sum(path.stat().st_size for path in paths)
    progress(f"backfill: warming the page cache and each reader, then {TIMED_ROUNDS} timed rounds")
    readers = (("plain_lines", plain_lines), ("raw_read", raw_read), ("naive", naive_reader),
               ("line_reader", line_reader))
    for _, read in readers:
        read(paths)
    run_backfill(state_dir, work, receiver, "warm-up")
    results = {"bytes": size}
    for round_number in range(1, TIMED_ROUNDS + 1):
        for name, read in readers:
            seconds = timed(read, paths)
            results[f"{name}_s"] = min(seconds, results.get(f"{name}_s", seconds))
        for key, export in (("tailer", True), ("tailer_no_export", False)):
            run = run_backfill(state_dir, work, receiver, f"{key}-{round_number}", export=export)
            results[key] = _faster(results.get(key), run)
        progress(f"  round {round_number}: " + ", ".join(
            f"{name} {size / MB / results[f'{name}_s']:.0f}" for name, _ in readers
        ) + f", tailer {size / MB / results['tailer']['wall_s']:.0f}"
            f", export off {size / MB / results['tailer_no_export']['wall_s']:.0f} MB/s (best so far)")
    return results


def _faster(best: dict | None, run: dict) -> dict:
    """The faster of two tailer runs' time, with the worse of their other figures: the
    larger peak RSS, a failing exit code, the fewer turns and spans. What went wrong in one
    run is not hidden by the other."""
    if best is None:
        return run
    faster = dict(min(best, run, key=lambda r: r["wall_s"]))
    faster["peak_rss_mb"] = max(best["peak_rss_mb"], run["peak_rss_mb"])
    faster["exit_code"] = best["exit_code"] or run["exit_code"]
    faster["cpu_s"] = min(best["cpu_s"], run["cpu_s"])
    for count in ("spans", "root_spans", "turns"):
        faster[count] = min(best[count], run[count])
    faster["warnings"] = best["warnings"] + [w for w in run["warnings"] if w not in best["warnings"]]
    return faster

