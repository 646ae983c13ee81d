"""The cold report's first read taken apart (issue 43, point 1): where its time goes.

    python bench/reading_stages.py                 # 1,000 MB escape-heavy, 500 MB plain
    python bench/reading_stages.py --size-mb 40    # a quick run

bench/reading.py says how far the cold `report --no-cache --jobs 1` is from the naive
reader; this says which stage the distance is in, so that work on it starts from a number.
Each stage is run in this process over the same data (reading.py's, kept in --data), and
each adds one step to the stage before it, as the report chains them:

- lines: every log's lines through the prefilter (copilot/lines.py, event_types.may_be_read);
- records: each line kept made its record (call_lines.call_record, else events.parse_line);
- turns: the records fed to their turns (turns/session_log.py's SessionLog, as the
  report reads it: a model call or a tool taken by its turn is not handed out);
- rows: each log read as the report reads it (report/gather.read_log: the turns' rows,
  their JSON text, the state a cache would keep);
- the whole report, a process: its start-up, merging the logs' rows, writing its JSON.

Beside them, the naive reader (json.loads of every line, the floor every ratio is taken
against) and json.loads of the kept lines alone (what decoding them whole would cost). The
last line says what is left, within the target, for the stages after `records`. Each
figure is the best of --rounds rounds; nothing is asserted: timings are the machine's.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import runner
from common import MB, data_folder, machine, progress
from datagen import DATA_KINDS
from measure_reading import naive_reader, run_report
from reading import DEFAULT_DATA, DataSet, prepare
from reading_table import TARGET_COLD_VS_NAIVE

from tailer.copilot import events
from tailer.copilot.call_lines import call_record
from tailer.copilot.event_types import may_be_read
from tailer.copilot.event_values import LATEST_NS
from tailer.copilot.lines import LineReader
from tailer.report.gather import Job, read_log
from tailer.turns.session_log import SessionLog


def lines(paths: list[Path]) -> None:
    for path in paths:
        for _ in LineReader(path, wanted=may_be_read).read():
            pass


def kept_lines_decoded(paths: list[Path]) -> None:
    for path in paths:
        for line in LineReader(path, wanted=may_be_read).read():
            if not line.oversized:
                try:
                    json.loads(line.data)
                except ValueError:
                    pass


def records(paths: list[Path]) -> None:
    for path in paths:
        for line in LineReader(path, wanted=may_be_read).read():
            if not line.oversized and call_record(line.data) is None:
                events.parse_line(line.data)


def turns(paths: list[Path]) -> None:
    for path in paths:
        log = SessionLog(path.parent.name, path)
        for _ in log.read(quiet_until_ns=LATEST_NS):  # as the report reads (report/read.py)
            pass
        log.finish_open()


def rows(paths: list[Path]) -> None:
    for path in paths:
        read_log(Job(path.parent.name, path, None, 0))


STAGES = (
    ("naive", "naive reader: `json.loads` of every line (the floor)", naive_reader),
    ("decoded", "for reference: the kept lines, each `json.loads` whole", kept_lines_decoded),
    ("lines", "lines: read and prefiltered", lines),
    ("records", "records: + each kept line made its record", records),
    ("turns", "turns: + the records fed to their turns", turns),
    ("rows", "rows: + each log read as the report reads it", rows),
)
REPORT = ("report", "the whole `report --no-cache --jobs 1 --format json`, a process")


def measure(data: DataSet, work: Path, rounds: int) -> dict[str, float]:
    """The best of `rounds` of every stage over `data`, a round running each stage once."""
    best: dict[str, float] = {}
    paths = data.logs
    for number in range(1, rounds + 1):
        for name, _, stage in STAGES:
            started = time.perf_counter()
            stage(paths)
            best[name] = min(best.get(name, float("inf")), time.perf_counter() - started)
        run = run_report(data.state_dir, work / "cache", "--no-cache", "--jobs", "1")
        best[REPORT[0]] = min(best.get(REPORT[0], float("inf")), run["wall_s"])
        progress(f"round {number}, {data.kind}: " + ", ".join(f"{k} {v:.2f}" for k, v in best.items()))
    return best


def table(sets: list[DataSet], figures: list[dict[str, float]], rounds: int) -> str:
    """The stages as a Markdown table, each beside the naive reader and the stage before it."""
    header = ["Stage"]
    for data in sets:
        header += [f"{data.kind}, {data.summary.bytes / MB:,.0f} MB", "x naive", "added"]
    out = [f"`python bench/reading_stages.py {' '.join(sys.argv[1:])}`, {machine()}; the best of "
           f"{rounds} round(s), in one process but the last row.", "",
           "| " + " | ".join(header) + " |",
           "| " + " | ".join(["---"] * len(header)) + " |"]
    chained = [name for name, _, _ in STAGES[2:]] + [REPORT[0]]
    for name, label in [(n, l) for n, l, _ in STAGES] + [REPORT]:
        cells = [label]
        for best in figures:
            seconds = best[name]
            before = chained[chained.index(name) - 1] if name in chained[1:] else None
            added = f"{seconds - best[before]:+.2f} s" if before else ""
            cells += [f"{seconds:.2f} s", f"{seconds / best['naive']:.2f} x", added]
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    for data, best in zip(sets, figures):
        left = TARGET_COLD_VS_NAIVE * best["naive"] - best["records"] - (best["report"] - best["rows"])
        out.append(f"{data.kind}: within {TARGET_COLD_VS_NAIVE} x the naive reader, the turns and rows "
                   f"have {left:.2f} s left (they take {best['rows'] - best['records']:.2f} s), "
                   f"with the records and the report's own part as they are.")
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1000, metavar="MB",
                        help="the escape-heavy data's size; the plain data is half of it (default 1000)")
    parser.add_argument("--rounds", type=int, default=3, metavar="N", help="rounds of every stage (default 3)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, metavar="DIR",
                        help=f"where the generated data is kept between runs (default {DEFAULT_DATA})")
    options = parser.parse_args()
    if options.size_mb < 1 or options.rounds < 1:
        parser.error("--size-mb and --rounds: at least 1")
    data = data_folder(options.data)
    sizes = {"escape-heavy": options.size_mb, "plain": max(1, options.size_mb // 2)}
    sets = [prepare(data, kind, sizes[kind]) for kind in DATA_KINDS]
    with tempfile.TemporaryDirectory(prefix="tailer-stages-") as temp:
        runner.use_bare_python(Path(temp, "python"))
        figures = [measure(data, Path(temp), options.rounds) for data in sets]
    print(table(sets, figures, options.rounds), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
