"""The reading path beside the stdlib floor (issue 43): one run, one table.

    python bench/reading.py                  # the full run: 1,000 MB escape-heavy, 500 MB plain
    python bench/reading.py --size-mb 40     # a quick run: 40 MB escape-heavy, 20 MB plain
    python bench/reading.py --update-doc     # and write the table into docs/PERFORMANCE.md
    python bench/reading.py --prepare-only   # only generate the data, to measure later

On the two kinds of generated data (datagen.py; the plain set half the size of the
escape-heavy one), each figure the best of --rounds rounds, every reader once a round:

- the naive reader: `json.loads` of every line, in this process (the stdlib floor every
  ratio is taken against); `cat` of the logs; ccusage as its users run it;
- the report's first read, `report --no-cache`, with `--jobs 1` and `--jobs 2`;
- the daemon's first-start backfill, `run --once --from-start`, export off;
- the warm report (its cache filled by a run before the rounds), as JSON and as the table;
- then `report --watch`'s first drawing with its cache warm, over --watch-sessions old
  sessions (10,000).

The data is generated once and kept (--data; generating it is never timed), so a second run
starts measuring at once. The table is printed as Markdown, the form docs/PERFORMANCE.md
embeds: --markdown FILE writes it to FILE, --update-doc between the markers of that page.
The script never fails on a missed target: timings belong to the machine they were taken on.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import runner
from common import MB, REPO, data_folder, machine, progress
from datagen import DATA_KINDS, DATA_VERSION, DataShape, DataSummary, make_old_sessions, prepare_backfill_data
from measure_reading import naive_reader
from reading_table import Column, Figures, markdown, update_doc
from runner import (LAUNCHER, child_environment, report_watch_command, start_on_a_terminal,
                    stop_daemon, tailer_command, wait_for_log, wait_until_quiet)

from ccusage import CACHE as CCUSAGE_CACHE, VERSION as CCUSAGE_VERSION
from realcli.driver import Unavailable, npm_install

DEFAULT_DATA = Path(tempfile.gettempdir(), "hydrafusion-bench-data")
WARM_RUNS = 3  # warm reports a round: each takes a fraction of a first read
DRAWN = r"HydraFusion: [\d,]+ turns"  # what --watch's table starts with


@dataclass
class DataSet:
    """One kind of data: where it is, what it holds, and its figures (kept by name, the best
    of the rounds: seconds or, for a run that failed, the failure's words)."""

    kind: str
    folder: Path
    summary: DataSummary
    figures: Figures = field(default_factory=Figures)
    notes: list[str] = field(default_factory=list)

    @property
    def state_dir(self) -> Path:
        return self.folder / "session-state"

    @property
    def logs(self) -> list[Path]:
        return sorted(self.state_dir.glob("*/events.jsonl"))


def shape_of(size_mb: int) -> DataShape:
    """The data of `size_mb`: a session for every 5 MB (10 to 200), so the 1 GB set is the
    very one benchmark.py measures (200 sessions, a 50 MB line); a 50 MB line from 500 MB
    up, a 10 MB one from 100 MB, and under that no line of several MB (it would be most of
    the data)."""
    sessions = max(10, min(200, size_mb // 5))
    huge_line_mb = 50 if size_mb >= 500 else 10 if size_mb >= 100 else 0
    return DataShape(size_mb, sessions, huge_line_mb)


def timed_command(command: list[str], environ: dict[str, str], cwd: Path = REPO) -> float | str:
    """Seconds from start to exit of `command`, its output thrown away, measured by a small
    launcher process (runner.LAUNCHER); the failure's words where it exits other than 0."""
    done = subprocess.run([sys.executable, "-c", LAUNCHER, *command], cwd=cwd, env=environ,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if done.returncode != 0:
        return f"the launcher failed: {done.stderr.strip()[-200:]}"
    wall, exit_code, _, _ = done.stdout.split()
    if exit_code != "0":
        return f"exit code {exit_code}: {done.stderr.strip()[-200:]}"
    return float(wall)


def report(state_dir: Path, *options: str) -> list[str]:
    return [runner.PYTHON, "-m", "tailer", "report", "--state-dir", str(state_dir), *options]


def ccusage_launcher() -> Path | str:
    """ccusage, pinned and installed as tests/ccusage.py installs it (npm, into .cache/);
    why not, where it cannot be."""
    if shutil.which("npm") is None and not (CCUSAGE_CACHE / CCUSAGE_VERSION).is_dir():
        return "npm is not installed"
    try:
        return npm_install("ccusage", CCUSAGE_VERSION, CCUSAGE_CACHE / CCUSAGE_VERSION, "ccusage")
    except (Unavailable, RuntimeError) as error:
        return f"not installed: {error}"


def ccusage_command(launcher: Path) -> list[str]:
    return [str(launcher), "copilot", "session", "--json", "--offline"]


def ccusage_environment(data: DataSet, work: Path) -> dict[str, str]:
    """As tests/ccusage.py runs it, under a HOME of its own (work/ccusage-home, also its
    working folder), with the data set's folder as COPILOT_HOME (its session-state/ is the
    data; nothing is copied)."""
    home = work / "ccusage-home"
    home.mkdir(parents=True, exist_ok=True)
    return {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "NO_COLOR": "1",
            "COPILOT_HOME": str(data.folder)}


def one_round(data: DataSet, work: Path, ccusage: Path | str) -> None:
    """Every figure of one data set once (the warm ones WARM_RUNS times), each kept if it is
    the best so far."""
    figures, logs = data.figures, data.logs
    started = time.perf_counter()
    naive_reader(logs)
    figures.keep("naive", time.perf_counter() - started)
    figures.keep("cat", timed_command(["cat", *map(str, logs)], os.environ.copy()))
    if isinstance(ccusage, Path):
        figures.keep("ccusage", timed_command(ccusage_command(ccusage), ccusage_environment(data, work),
                                              cwd=work / "ccusage-home"))
    else:
        figures.keep("ccusage", ccusage)
    cold = child_environment(work / "cold-cache")
    for jobs in ("1", "2"):
        figures.keep(f"jobs{jobs}", timed_command(
            report(data.state_dir, "--no-cache", "--jobs", jobs, "--format", "json"), cold))
    figures.keep("backfill", backfill(data, work))
    warm = child_environment(work / f"cache-{data.kind}")
    for _ in range(WARM_RUNS):
        figures.keep("warm_json", timed_command(report(data.state_dir, "--format", "json"), warm))
        figures.keep("warm_table", timed_command(report(data.state_dir), warm))


def backfill(data: DataSet, work: Path) -> float | str:
    """`run --once --from-start` with no checkpoint, export off: a daemon's first start over
    the logs, reading them from their beginning, and nothing else."""
    checkpoint = work / f"backfill-{data.kind}.checkpoint.json"
    checkpoint.unlink(missing_ok=True)
    return timed_command(tailer_command("--once", "--from-start", "--state-dir", str(data.state_dir),
                                        "--checkpoint", str(checkpoint), "--metrics-address", "none",
                                        "--otlp-endpoint", "none"), child_environment())


def warm_up(data: DataSet, work: Path, ccusage: Path | str) -> None:
    """A report that fills the warm cache and a run of ccusage, not timed, which also warm the
    page cache. What each found is checked against the data: the figure of a reader that
    misses turns or sessions would not be one."""
    if isinstance(ccusage, Path):
        done = subprocess.run(ccusage_command(ccusage), cwd=work / "ccusage-home",
                              env=ccusage_environment(data, work), capture_output=True, text=True)
        found = len(json.loads(done.stdout)["sessions"]) if done.returncode == 0 else None
        if found != data.summary.files:
            data.notes.append(f"{data.kind}: ccusage found {found} sessions of the data's "
                              f"{data.summary.files} (exit code {done.returncode})")
    done = subprocess.run(report(data.state_dir, "--format", "json"), cwd=REPO,
                          env=child_environment(work / f"cache-{data.kind}"), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"reading: the report failed on the {data.kind} data: {done.stderr.strip()[-500:]}")
    turns = len(json.loads(done.stdout)["turns"])
    if turns != data.summary.turns:
        data.notes.append(f"{data.kind}: the report found {turns:,} turns of the data's "
                          f"{data.summary.turns:,}: that is a bug, not a matter of speed")


def old_sessions(root: Path, count: int) -> Path:
    """`count` one-turn sessions last written days ago, kept in `root` between runs."""
    folder = root / f"old-sessions-{count}"
    manifest = folder / "manifest.json"
    wanted = {"version": DATA_VERSION, "sessions": count}
    try:
        if json.loads(manifest.read_text()) == wanted:
            return folder / "session-state"
    except (OSError, ValueError):
        pass
    shutil.rmtree(folder, ignore_errors=True)
    progress(f"making {count:,} sessions last written days ago under {folder}")
    make_old_sessions(folder / "session-state", count)
    manifest.write_text(json.dumps(wanted))
    return folder / "session-state"


def watch_first_drawing(state_dir: Path, work: Path, rounds: int) -> float | str:
    """`report --watch` on a pseudo-terminal: once to fill its cache (not timed), then the
    best of `rounds` first drawings with that cache warm."""
    command = report_watch_command(state_dir)
    environ = dict(child_environment(work / "watch-cache"), COLUMNS="100", LINES="40", NO_COLOR="1")
    best: float | str = "no drawing"
    for number in range(rounds + 1):
        output = work / f"watch-{number}.out"
        child = start_on_a_terminal(command, environ, output)
        started = time.monotonic()
        try:
            if wait_for_log(output, DRAWN, child, 300) is None:
                return f"report --watch drew nothing (see {output})"
            took = time.monotonic() - started
            wait_until_quiet(child.pid)  # its cache is written by now
        finally:
            stop_daemon(child)
        if number:
            best = took if isinstance(best, str) else min(best, took)
            progress(f"watch: first drawing, warm cache, {took:.2f} s")
    return best


def prepare(root: Path, kind: str, size_mb: int) -> DataSet:
    folder = root / f"{kind}-{size_mb}mb"
    return DataSet(kind, folder, prepare_backfill_data(folder, shape_of(size_mb), kind))


def commit() -> str:
    """This checkout's commit, marked where its tracked files differ from it."""
    def git(*words: str) -> str:
        return subprocess.run(["git", *words], cwd=REPO, capture_output=True, text=True).stdout.strip()
    return (git("rev-parse", "--short", "HEAD") or "unknown") + (" (changed)" if git("status", "--porcelain",
                                                                                     "-uno") else "")


def preamble(sets: list[DataSet], rounds: int, watch_sessions: int) -> list[str]:
    """How the table was taken: the command, the checkout, the machine, the data."""
    described = "; ".join(
        f"{data.kind} {data.summary.bytes / MB:,.0f} MB ({data.summary.files} sessions, "
        f"{data.summary.lines:,} lines, {data.summary.turns:,} turns, the largest line "
        f"{data.summary.largest_line / MB:.1f} MB)" for data in sets)
    command = " ".join(["python", "bench/reading.py", *sys.argv[1:]])
    return [f"`{command}` at `{commit()}` on {time.strftime('%Y-%m-%d')}, {machine()}; each figure "
            f"the best of {rounds} round(s) (the warm reports, of {rounds * WARM_RUNS} runs), the page cache warm.",
            f"Data: {described}; for `--watch`, {watch_sessions:,} one-turn sessions last written days ago."]


def parse_options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1000, metavar="MB",
                        help="the escape-heavy data's size; the plain data is half of it (default 1000)")
    parser.add_argument("--watch-sessions", type=int, default=10_000, metavar="N",
                        help="the sessions --watch draws (default 10000)")
    parser.add_argument("--rounds", type=int, default=3, metavar="N", help="rounds of every figure (default 3)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, metavar="DIR",
                        help=f"where the generated data is kept between runs (default {DEFAULT_DATA})")
    parser.add_argument("--markdown", type=Path, metavar="FILE", help="also write the table to FILE")
    parser.add_argument("--update-doc", action="store_true",
                        help="also write the table into docs/PERFORMANCE.md, between its markers")
    parser.add_argument("--prepare-only", action="store_true",
                        help="generate the data (or find it kept) and stop: measure later, on a quiet machine")
    options = parser.parse_args()
    for name in ("size_mb", "watch_sessions", "rounds"):
        if getattr(options, name) < 1:
            parser.error(f"--{name.replace('_', '-')}: at least 1")
    options.data = data_folder(options.data)
    return options


def measure(sets: list[DataSet], watch_state: Path, work: Path, rounds: int, ccusage: Path | str) -> float | str:
    """Every figure of every data set, the best of `rounds` rounds, after a warm-up; then
    --watch's first drawing, which it returns."""
    for data in sets:
        warm_up(data, work, ccusage)
    for number in range(1, rounds + 1):
        for data in sets:
            one_round(data, work, ccusage)
            progress(f"round {number}, {data.kind}: " + ", ".join(
                f"{name} {value:.2f}" if isinstance(value, float) else f"{name} failed"
                for name, value in data.figures.best.items()) + " s (best so far)")
    return watch_first_drawing(watch_state, work, rounds)


def main() -> int:
    options = parse_options()
    ccusage = ccusage_launcher()
    sizes = {"escape-heavy": options.size_mb, "plain": max(1, options.size_mb // 2)}
    with tempfile.TemporaryDirectory(prefix="tailer-reading-") as temp:
        work = Path(temp)
        runner.use_bare_python(work / "python")
        sets = [prepare(options.data, kind, sizes[kind]) for kind in DATA_KINDS]
        watch_state = old_sessions(options.data, options.watch_sessions)
        if options.prepare_only:
            progress(f"the data is in {options.data}")
            return 0
        watch = measure(sets, watch_state, work, options.rounds, ccusage)
    columns = [Column(f"{data.kind}, {data.summary.bytes / MB:,.0f} MB", data.figures) for data in sets]
    block = markdown(preamble(sets, options.rounds, options.watch_sessions), columns, watch,
                     options.watch_sessions, CCUSAGE_VERSION, [note for data in sets for note in data.notes])
    print(block)
    if options.markdown:
        options.markdown.write_text(block)
    if options.update_doc and (problem := update_doc(REPO / "docs" / "PERFORMANCE.md", block)):
        sys.exit(f"reading: {problem}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
