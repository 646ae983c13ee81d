"""The table of bench/reading.py: its figures kept as the best of rounds, and the one
Markdown table that shows them beside the naive reader and issue 43's targets.

Rendering is a pure function of the figures, so what the script prints is what
docs/PERFORMANCE.md embeds (update_doc writes it between the page's markers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

TARGET_COLD_VS_NAIVE = 1.1  # report --no-cache --jobs 1
TARGET_JOBS_SPEEDUP = 1.6  # --jobs 1 / --jobs 2
TARGET_BACKFILL_VS_NAIVE = 1.1
TARGET_TABLE_VS_JSON = 1.2  # warm: the default table / JSON
TARGET_WATCH_S = 1.0  # --watch's first drawing, warm cache
BEGIN = "<!-- bench/reading.py: the table begins -->"
END = "<!-- bench/reading.py: the table ends -->"


@dataclass
class Figures:
    """Seconds by figure's name, the least of the runs. A failure (its words, a str) is kept
    over any time, so a run that failed is never hidden by one that did not."""

    best: dict[str, float | str] = field(default_factory=dict)

    def keep(self, name: str, value: float | str) -> None:
        old = self.best.get(name)
        if isinstance(old, str):
            return
        if old is None or isinstance(value, str) or value < old:
            self.best[name] = value

    def seconds(self, name: str) -> float | None:
        value = self.best.get(name)
        return value if isinstance(value, float) else None

    def ratio(self, name: str, to: str) -> float | None:
        """`name`'s time over `to`'s, where both were measured."""
        mine, theirs = self.seconds(name), self.seconds(to)
        return None if mine is None or not theirs else mine / theirs

    def failures(self) -> dict[str, str]:
        return {name: value for name, value in self.best.items() if isinstance(value, str)}


@dataclass(frozen=True)
class Column:
    """One data set's column: its caption and its figures."""

    caption: str
    figures: Figures


def row_names(ccusage_version: str) -> tuple[tuple[str, str], ...]:
    return (
        ("naive", "naive reader: `json.loads` of every line, in Python (the floor)"),
        ("cat", "`cat` of the logs"),
        ("ccusage", f"ccusage {ccusage_version}: `copilot session --json --offline`"),
        ("jobs1", "cold `report --no-cache --jobs 1 --format json`"),
        ("jobs2", "cold `report --no-cache --jobs 2 --format json`"),
        ("backfill", "the daemon's first-start backfill: `run --once --from-start`, export off"),
        ("warm_json", "warm `report --format json`"),
        ("warm_table", "warm `report` (the default table)"),
    )


def target(name: str, columns: list[Column]) -> tuple[str, list[bool | None]]:
    """The target of a row, with the ratios it is judged on where they are not the naive
    reader's (shown in the row already), and whether each column meets it."""
    def met(ratios: list[float | None], ok) -> list[bool | None]:
        return [None if ratio is None else ok(ratio) for ratio in ratios]

    if name in ("jobs1", "backfill"):
        limit = TARGET_COLD_VS_NAIVE if name == "jobs1" else TARGET_BACKFILL_VS_NAIVE
        ratios = [column.figures.ratio(name, "naive") for column in columns]
        return f"≤ {limit} x naive", met(ratios, lambda ratio: ratio <= limit)
    if name == "jobs2":
        ratios = [column.figures.ratio("jobs1", "jobs2") for column in columns]
        return (f"`--jobs 1` / `--jobs 2` ≥ {TARGET_JOBS_SPEEDUP}: {shown_ratios(ratios)}",
                met(ratios, lambda ratio: ratio >= TARGET_JOBS_SPEEDUP))
    if name == "warm_table":
        ratios = [column.figures.ratio("warm_table", "warm_json") for column in columns]
        return (f"≤ {TARGET_TABLE_VS_JSON} x warm JSON: {shown_ratios(ratios)}",
                met(ratios, lambda ratio: ratio <= TARGET_TABLE_VS_JSON))
    return "", []


def shown_ratios(ratios: list[float | None]) -> str:
    return ", ".join("n/a" if ratio is None else f"**{ratio:.2f} x**" for ratio in ratios)


def met_cell(mets: list[bool | None], captions: list[str]) -> str:
    if not mets or None in mets:
        return "n/a" if mets else ""
    if all(mets):
        return "yes"
    if not any(mets):
        return "**no**"
    return f"{', '.join(caption.split(',')[0] for caption, ok in zip(captions, mets) if ok)} only"


def cell(figures: Figures, name: str) -> tuple[str, str]:
    """A figure's time and its ratio to the naive reader."""
    value = figures.best.get(name)
    if value is None:
        return "", ""
    if isinstance(value, str):
        return "failed", ""
    ratio = figures.ratio(name, "naive")
    return f"{value:.2f} s", "" if ratio is None else f"{ratio:.2f} x"


def table(columns: list[Column], watch: float | str, watch_sessions: int, ccusage_version: str) -> list[str]:
    """The one table: a row a figure, each data set's time and its ratio to the naive reader,
    the target and whether it is met; --watch's figure, which has no data set, last."""
    captions = [column.caption for column in columns]
    header = ["Figure"] + [part for caption in captions for part in (caption, "x naive")] + ["Target", "Met"]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for name, label in row_names(ccusage_version):
        cells = [part for column in columns for part in cell(column.figures, name)]
        goal, mets = target(name, columns)
        lines.append("| " + " | ".join([label, *cells, goal, met_cell(mets, captions)]) + " |")
    drawn = isinstance(watch, float)
    watch_cells = ["", ""] * len(columns)
    watch_cells[0] = f"{watch:.2f} s" if drawn else "failed"
    lines.append("| " + " | ".join([
        f"warm `report --watch`, its first drawing, {watch_sessions:,} sessions", *watch_cells,
        f"< {TARGET_WATCH_S:.0f} s", met_cell([watch < TARGET_WATCH_S if drawn else None], captions)]) + " |")
    return lines


def markdown(preamble: list[str], columns: list[Column], watch: float | str, watch_sessions: int,
             ccusage_version: str, notes: list[str]) -> str:
    """The block docs/PERFORMANCE.md embeds: how it was taken, the table, what went wrong."""
    failures = [f"{column.caption}: {name} failed: {words}" for column in columns
                for name, words in column.figures.failures().items()]
    if isinstance(watch, str):
        failures.append(f"report --watch: {watch}")
    lines = [*preamble, "", *table(columns, watch, watch_sessions, ccusage_version)]
    if notes or failures:
        lines += ["", *(f"- {note}" for note in [*notes, *failures])]
    return "\n".join(lines) + "\n"


def update_doc(page: Path, block: str) -> str | None:
    """Put `block` between the page's markers; why not, where it cannot."""
    text = page.read_text()
    pattern = re.compile(re.escape(BEGIN) + r"\n.*?" + re.escape(END), re.S)
    if len(pattern.findall(text)) != 1:
        return f"{page} has not one pair of the markers {BEGIN} ... {END}"
    page.write_text(pattern.sub(lambda _: f"{BEGIN}\n{block}{END}", text))
    return None
