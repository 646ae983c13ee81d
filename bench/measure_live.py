"""Measuring the tailer when it is not reading a month: the daemon idle over many old
sessions and an old one resumed, `report --watch` over them and following a turn in flight,
the latency from a turn's last line to its export, and what start-up imports cost.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import runner
from common import REPO, progress, verdict
from datagen import SEED, add_turn, idle_writer, make_old_sessions, new_id, split_at_rollup
from runner import (Receiver, child_environment, cpu_seconds, free_port, memory_mb, report_watch_command,
                    start_daemon, start_on_a_terminal, stop_daemon, tailer_command, wait_for_log,
                    wait_until_quiet, warnings_in)

from sessiongen import SessionWriter

IDLE_SESSIONS = 10_000
IDLE_RESUMED = 4_321  # the old session that gets a new turn
RESUME_WAIT_S = 120.0  # twice the target: a turn not exported by then is not exported
WATCH_WARM_ROUNDS = 3  # of `report --watch`'s warm first drawing: each is a start of its own
IMPORT_RUNS = 9


def measure_idle_and_resume(work: Path, receiver: Receiver, seconds: float) -> dict:
    """The daemon over 10,000 old sessions: idle CPU, then a turn appended to one of them.

    The daemon exports to the receiver, which only matters for the resume: while nothing is
    queued the exporter thread blocks without a timeout, so it adds nothing to the idle figure.
    """
    state_dir = work / "idle-state"
    progress(f"idle: making {IDLE_SESSIONS} sessions last written days ago")
    make_old_sessions(state_dir, IDLE_SESSIONS)
    port = free_port()
    log_path = work / "idle.log"
    options = ["--state-dir", str(state_dir), "--checkpoint", str(work / "idle.checkpoint.json"),
               "--otlp-endpoint", receiver.endpoint, "--metrics-address", f"127.0.0.1:{port}"]
    started = time.monotonic()
    child = start_daemon(options, log_path)
    try:
        match = wait_for_log(log_path, r"watching by (\w+)", child, 300)
        if match is None:
            return {"error": f"the daemon did not start (see {log_path})", "command": tailer_command(*options)}
        startup_s = time.monotonic() - started
        settle_s = wait_until_quiet(child.pid)
        progress(f"idle: started in {startup_s:.1f}s, quiet after {settle_s:.1f}s more; measuring {seconds:.0f}s")
        cpu_before, wall_before = cpu_seconds(child.pid), time.monotonic()
        time.sleep(seconds)
        cpu, wall = cpu_seconds(child.pid) - cpu_before, time.monotonic() - wall_before
        rss = memory_mb(child.pid, "VmRSS")
        progress("resume: appending a turn to a session last written days ago")
        receiver.reset()
        writer = idle_writer(IDLE_RESUMED)
        done = len(writer.lines())
        writer.resume()
        fusion_id = add_turn(writer, random.Random(SEED), rolled_up=True)
        before, rollup = split_at_rollup(writer.lines()[done:])
        with open(state_dir / writer.session_id / "events.jsonl", "ab", buffering=0) as log:
            log.write(before)
            log.write(rollup)
            written = time.monotonic()
        receiver.wait_for_roots({fusion_id}, RESUME_WAIT_S)
        arrived = receiver.roots.get(fusion_id)
    finally:
        stop_daemon(child)
    return {"mode": match.group(1), "startup_s": startup_s, "settle_s": settle_s, "cpu_s": cpu, "wall_s": wall,
            "rss_mb": rss, "resume_s": None if arrived is None else arrived - written,
            "warnings": warnings_in(log_path), "command": tailer_command(*options)}


def measure_watch_idle(state_dir: Path, work: Path, seconds: float) -> dict:
    """`report --watch` over the idle daemon's 10,000 old sessions: its first drawing with an
    empty cache, then, the cache filled by that run, its first drawing again (the best of
    WATCH_WARM_ROUNDS runs, for the reason SHORT_ROUNDS gives), and the last run's CPU over
    a window once that is done and it has gone quiet, measured as the daemon is.

    It draws on a pseudo-terminal of COLUMNS x LINES (it refuses a pipe), without colour,
    whose output is copied to a file. The window holds one change of minute, so one redraw
    of the live lines.
    """
    command = report_watch_command(state_dir)
    environ = dict(child_environment(work / "watch-cache"), COLUMNS="100", LINES="40", NO_COLOR="1")
    results = {"command": command}
    runs = ["cold"] + ["warm"] * WATCH_WARM_ROUNDS
    for number, run in enumerate(runs):
        output = work / f"watch-{number}.out"
        child = start_on_a_terminal(command, environ, output)
        started = time.monotonic()
        try:
            if wait_for_log(output, r"HydraFusion: [\d,]+ turns", child, 300) is None:
                return {"error": f"report --watch drew nothing (see {output})", "command": command}
            took = time.monotonic() - started
            results[f"{run}_first_frame_s"] = min(took, results.get(f"{run}_first_frame_s", took))
            settle_s = wait_until_quiet(child.pid)  # its cache is written by now
            progress(f"watch ({run} cache): first drawing after {took:.2f}s, "
                     f"quiet after {settle_s:.1f}s more")
            if number == len(runs) - 1:
                progress(f"watch: measuring {seconds:.0f}s")
                cpu_before, wall_before = cpu_seconds(child.pid), time.monotonic()
                time.sleep(seconds)
                results["cpu_s"] = cpu_seconds(child.pid) - cpu_before
                results["wall_s"] = time.monotonic() - wall_before
                results["rss_mb"] = memory_mb(child.pid, "VmRSS")
        finally:
            stop_daemon(child)
    return results



def imported_modules(command: list[str], environ: dict[str, str]) -> dict[str, int]:
    """The modules a command imports, each with its own import time in microseconds (the
    `self` column of `python -X importtime`)."""
    done = subprocess.run([runner.PYTHON, "-X", "importtime", *command], cwd=REPO, env=environ,
                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    return {name: int(self_us) for self_us, name in
            re.findall(r"^import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)$", done.stderr, re.M)}


def measure_imports(work: Path) -> dict:
    """What start-up costs a report: the milliseconds of imports beyond a bare interpreter.

    The figure of one command is the sum of `python -X importtime`'s `self` column over
    the modules it imports (the tailer's and the standard library's) that `python -c pass`
    does not, with the bytecode cached (child_environment); the best of IMPORT_RUNS runs
    after one not counted. The warm report is one over the example sessions, its cache
    filled by the run not counted. Beside it, `--version` and `python -c pass` from start to
    exit, the best of IMPORT_RUNS.
    """
    environ = child_environment(work / "imports-cache")
    bare = imported_modules(["-c", "pass"], environ)
    commands = {
        "report --demo": ["-m", "tailer", "report", "--demo", "--format", "json"],
        "warm report": ["-m", "tailer", "report", "--format", "json", "--state-dir",
                        str(REPO / "fixtures")],
    }
    results = {}
    for name, command in commands.items():
        imported_modules(command, environ)
        runs = []
        for _ in range(IMPORT_RUNS):
            modules = imported_modules(command, environ)
            runs.append(sum(us for module, us in modules.items() if module not in bare) / 1000)
        results[name] = {"ms": min(runs), "modules": len(set(modules) - set(bare))}
    for name, python, command in (("--version", runner.PYTHON, ["-m", "tailer", "--version"]),
                                  ("bare", runner.PYTHON, ["-c", "pass"]),
                                  ("bare, machine site", sys.executable, ["-c", "pass"])):
        runs = []
        for _ in range(IMPORT_RUNS):
            started = time.perf_counter()
            subprocess.run([python, *command], cwd=REPO, env=environ, stdout=subprocess.DEVNULL, check=True)
            runs.append(time.perf_counter() - started)
        results[name] = {"s": min(runs)}
    return results


def measure_watch_record(work: Path, records: int = 10) -> dict:
    """`report --watch` in a pseudo-terminal, a turn in flight: the time from appending each
    of its usage records to the "now" lines showing that call (target: under 1 s)."""
    import pty
    import select
    import statistics
    writer = SessionWriter("watched-live", datetime.now(timezone.utc) - timedelta(minutes=5))
    writer.single("gpt-5.6-sol", request_count=records)
    lines = writer.lines()
    first_call = next(i for i, line in enumerate(lines) if '"session.usage_record"' in line)
    calls = lines[first_call:first_call + records]
    log = work / "watch-live-state" / "watched-live" / "events.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text("".join(line + "\n" for line in lines[:first_call]))  # routed, prompted
    leader, follower = pty.openpty()
    child = subprocess.Popen(report_watch_command(log.parent.parent), cwd=REPO,
                             env=dict(child_environment(), COLUMNS="100", LINES="40"),
                             stdin=follower, stdout=follower, stderr=subprocess.DEVNULL)
    os.close(follower)
    seconds, shown = [], b""

    def wait_for(text: bytes, timeout: float) -> bool:
        nonlocal shown
        deadline = time.monotonic() + timeout
        while text not in shown and time.monotonic() < deadline:
            if select.select([leader], [], [], 0.05)[0]:
                shown = (shown + os.read(leader, 65536))[-65536:]
        return text in shown

    try:
        wait_for(b"now: 1 running", 60)
        for count, call in enumerate(calls[:records], 1):
            shown = b""
            written = time.monotonic()
            with open(log, "a") as file:
                file.write(call + "\n")
            if wait_for(f" {count} calls ".encode(), 10):
                seconds.append(time.monotonic() - written)
    finally:
        child.kill()
        child.wait()
        os.close(leader)
    worst = max(seconds, default=float("nan"))
    progress(f"watch: appended usage record on screen: {len(seconds)} of {records} shown, worst "
             f"{worst:.3f} s, median {statistics.median(seconds) if seconds else float('nan'):.3f} s "
             f"(target < 1 s: {verdict(len(seconds) == records and worst < 1.0)})")
    return {"shown": len(seconds), "records": records, "seconds": seconds}



def measure_latency(work: Path, receiver: Receiver, turns: int) -> dict:
    """Turns appended to an active session, each rollup line written 20 to 100 ms after the
    rest of its turn, turns 0.2 to 0.4 s apart; twenty old sessions sit alongside."""
    state_dir = work / "latency-state"
    make_old_sessions(state_dir, 20)
    writer = SessionWriter("active-" + new_id(random.Random(SEED)), datetime.now(timezone.utc) - timedelta(hours=1))
    rng = random.Random(SEED + 1)
    add_turn(writer, rng, rolled_up=True)
    log_path = writer.write(state_dir)
    daemon_log = work / "latency.log"
    options = ["--state-dir", str(state_dir), "--checkpoint", str(work / "latency.checkpoint.json"),
               "--otlp-endpoint", receiver.endpoint, "--metrics-address", "none"]
    child = start_daemon(options, daemon_log)
    written: dict[str, float] = {}
    try:
        if wait_for_log(daemon_log, r"watching by", child, 60) is None:
            return {"error": f"the daemon did not start (see {daemon_log})", "command": tailer_command(*options)}
        wait_until_quiet(child.pid)
        progress(f"latency: appending {turns} turns to an active session")
        receiver.reset()
        with open(log_path, "ab", buffering=0) as log:
            for _ in range(turns):
                done = len(writer.lines())
                fusion_id = add_turn(writer, rng, rolled_up=True)
                before, rollup = split_at_rollup(writer.lines()[done:])
                log.write(before)
                time.sleep(rng.uniform(0.02, 0.1))
                log.write(rollup)
                written[fusion_id] = time.monotonic()
                time.sleep(rng.uniform(0.2, 0.4))
        receiver.wait_for_roots(set(written), 10)
    finally:
        stop_daemon(child)
    latencies = sorted(receiver.roots[f] - t for f, t in written.items() if f in receiver.roots)
    return {"appended": len(written), "exported": len(latencies), "latencies_s": latencies,
            "warnings": warnings_in(daemon_log), "command": tailer_command(*options)}

