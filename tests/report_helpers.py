"""Session data and runners shared by the report's tests."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from sessiongen import ExpectedTurn, SessionWriter
from tailerproc import ROOT, tailer_env

from tailer.report.figures import compact_json

from tailer.report.rows import TurnJson, TurnRow
from tailer.report.read import Selection, SessionReader

MODELS = ("gpt-5.6-sol", "claude-sonnet-4.6", "gemini-3.1-pro", "mai-code-1.1-flash",
          "claude-opus-5")
MONTH_START = datetime(2026, 10, 1, 8, tzinfo=timezone.utc)


def add_turn(writer: SessionWriter, rng: random.Random,
             models: tuple[str, ...] = MODELS) -> ExpectedTurn:
    """One turn of a realistic mix of patterns and endings, and of prompts answered
    without fusion, on three of `models`."""
    draft, judge, other = rng.sample(models, 3)
    roll = rng.random()
    if roll < 0.08:
        return writer.ordinary(draft, tools=rng.choice((("bash",), (), ("bash", "view"))))
    if roll < 0.35:
        return writer.single(draft)
    if roll < 0.55:
        return writer.cascade(draft, judge)
    if roll < 0.65:
        return writer.cascade(draft, judge, verdict=rng.choice(("reject", "revise")),
                              repair_model=other)
    if roll < 0.73:
        return writer.critique(draft, [judge, other])
    if roll < 0.80:
        return writer.critique(draft, [judge], revision_model=draft)
    if roll < 0.87:
        return writer.degraded(draft, judge)
    if roll < 0.93:
        return writer.incomplete(draft, judge)
    return writer.route_failed(draft)


def write_month(state_dir: Path, *, days: int = 30, seed: int = 11) -> list[ExpectedTurn]:
    """A month of use: one or two sessions a day of 1 to 9 turns, some resumed, most shut
    down, the last one left open (its last turn may never finish)."""
    rng = random.Random(seed)
    expected = []
    for day in range(days):
        for number in range(rng.randint(1, 2)):
            start = MONTH_START + timedelta(days=day, hours=number * 5, minutes=rng.randint(0, 50))
            writer = SessionWriter(f"month-{seed}-{day:02d}-{number}-{rng.getrandbits(32):08x}", start)
            for _ in range(rng.randint(1, 9)):
                add_turn(writer, rng)
                if rng.random() < 0.05:
                    writer.resume()
            if not (day == days - 1 and number == 0):
                writer.shutdown()
            writer.write(state_dir)
            expected += writer.expected
    return expected


def run_report(*args: str, env: dict[str, str] | None = None, timeout: float = 120,
               **options) -> subprocess.CompletedProcess:
    """`python -m tailer report ARGS` as a user runs it."""
    return subprocess.run([sys.executable, "-m", "tailer", "report", *args], cwd=ROOT,
                          env=env or tailer_env(), capture_output=True, text=True,
                          timeout=timeout, **options)


def report_json(*args: str) -> dict:
    done = run_report("--format", "json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def wanted_turns(logs: dict[str, Path], selection: Selection, reader: SessionReader):
    """Every wanted turn of `logs`, each log read to its end, in this process: what a
    report's reading gives, as Turns (the report itself keeps rows). Open turns end as
    SessionReader.finish_at_end ends them now."""
    now = time.time()
    for session_id, path in sorted(logs.items()):
        yield from filter(selection.wants, reader.read(session_id, path))
        yield from filter(selection.wants, reader.finish_at_end(session_id, now))


def turn_json(row: TurnRow, calls: list, tools: list) -> TurnJson:
    """The row's TurnJson, its model calls and tools (CallRow and ToolRow, or dicts of their
    fields) in the place of `printed`, written the general way: json.dumps of its fields,
    which tests/test_turn_text.py holds tailer/report/turn_text.py's text to."""
    fields = {}
    for name in TurnRow.__match_args__:
        if name == "worth":
            continue
        if name == "printed":
            fields["model_calls"], fields["tools"] = calls, tools
        else:
            fields[name] = getattr(row, name)
    names = list(fields)
    at = names.index("start")
    head = {name: fields[name] for name in names[:at]}
    tail = {name: fields[name] for name in names[at + 1:]}
    before = compact_json(head)[:-1] + ',"start":'
    after = "," + compact_json(tail)[1:]
    return TurnJson((before + after).encode("ascii"), len(before), len(tools))
