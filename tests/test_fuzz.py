"""Fuzzing the whole reading pipeline with damaged session logs and checkpoints (issue 10).

Real-shaped sessions (tests/sessiongen.py, which knows the turns they hold) are damaged the
ways a crash, a disk, a future CLI or a hostile user could: bytes flipped, lines cut short,
joined, padded with NULs, reordered, duplicated and deleted, values replaced by lone
surrogates, huge, negative and fractional numbers and wrong types, the file cut mid-line, a
session folder named by bytes that are not UTF-8, the log swapped for a directory, a device,
a FIFO or an empty file. The pipeline reads them in two runs with a checkpoint in between,
as the daemon does across a restart: daemon.Tailer over a temporary state dir, then for
every turn its spans, the OTLP request and the metrics.

What must hold, whatever the damage:
- no exception escapes;
- every turn the damage left intact is reported exactly once, as it was written;
- no turn is reported twice;
- every OTLP request decodes with the official opentelemetry-proto definitions, and every
  metric sample is a finite number;
- the checkpoint the tailer leaves loads back; a damaged one loads or is refused, and the
  tailer starts from either without an exception.

CI runs a bounded, derandomised number of examples (seconds). A long run, with fresh random
examples each time:

    HYDRAFUSION_FUZZ_EXAMPLES=20000 python3 -m pytest -q tests/test_fuzz.py

A long run that finds a failure prints the smallest example it could shrink it to.
"""

from __future__ import annotations

import copy
import gzip
import json
import logging
import math
import os
import tempfile
import time
from dataclasses import dataclass
from datetime import timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from otlp_sink import decode_body
from sessiongen import START, SessionWriter, every_pattern
from test_events import json_slots
from exposition_helpers import saved_series
from tailer.daemon import checkpoint
from tailer.daemon import service
from tailer.daemon import stages
from tailer.turns.sessions import Tailer
from tailer.outputs.exposition import Registry
from tailer.outputs.metrics import MAX_MODELS, Metrics
from tailer.outputs.otlp import encode_request
from tailer.outputs.spans import turn_spans
from tailer.report import rows as report_rows
from tailer.report.now import in_flight_row, render_now
from tailer.turns.assembly import Turn

EXAMPLES = int(os.environ.get("HYDRAFUSION_FUZZ_EXAMPLES", "40"))
FUZZ = settings(
    max_examples=EXAMPLES, derandomize="HYDRAFUSION_FUZZ_EXAMPLES" not in os.environ,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.function_scoped_fixture],
    deadline=None,
)
IDLE_S = 1800.0


def _short_session(session_id: str) -> SessionWriter:
    writer = SessionWriter(session_id, START)
    writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="reject", repair_model="gpt-5.6-sol")
    writer.incomplete("mai-code-1.1-flash", "gpt-5.6-sol")
    return writer


# Built once: the sessions every example damages, with the turns they hold.
BASES = [every_pattern("fuzz-every-pattern"), _short_session("fuzz-short")]
BASE_LINES = [[line.encode() for line in writer.lines()] for writer in BASES]
# The damaged-sessions test draws up to MAX_SESSIONS sessions, each of one of BASES: a base
# drawn twice is written with ids of its own each time, two sessions, not a copy of one
# (whose turns are counted once: tests/test_session_copies.py).
MAX_SESSIONS = 3
SESSION_BASES = [[every_pattern(f"fuzz-every-pattern-{number}"), _short_session(f"fuzz-short-{number}")]
                 for number in range(MAX_SESSIONS)]
SESSION_BASE_LINES = [[[line.encode() for line in writer.lines()] for writer in bases]
                      for bases in SESSION_BASES]


class _OneLineLog(logging.Handler):
    """Formats every record as the daemon does and keeps only those that are not one line."""

    def __init__(self):
        super().__init__()
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        self.broken: list[str] = []

    def emit(self, record):
        line = self.format(record)
        if "\n" in line and len(self.broken) < 10:
            self.broken.append(line)


@pytest.fixture(autouse=True)
def one_line_log():
    """The tailer's log lines must stay one line each whatever the damage. Kept out of
    pytest's capture, which would hold every record of thousands of examples."""
    handler, logger = _OneLineLog(), logging.getLogger("tailer")
    logger.addHandler(handler)
    logger.propagate = False
    yield
    logger.removeHandler(handler)
    logger.propagate = True
    assert handler.broken == []


# -- Damage ----------------------------------------------------------------------------


@dataclass
class Entry:
    """One line of a damaged log: the index of the line it came from (None: made up), its
    bytes, and whether the damage touched it."""

    origin: int | None
    data: bytes
    touched: bool = False


ABSURD = st.one_of(
    st.sampled_from([
        "\ud800", "fusion-\udfff", "\udcff", "x" * 5000, "", 2**63, 2**64, 10**400, -1, -(2**70),
        0.5, 1e300, float("nan"), float("inf"), float("-inf"), True, None, [], {}, [[[]]],
        "2554-07-22T00:00:00Z", "1969-12-31T23:59:59Z", "10", {"inputTokens": 2**80},
    ]),
    st.integers(), st.floats(), st.text(max_size=6),
)
DAMAGE_KINDS = ("flip", "cut", "join", "nul", "value", "duplicate", "move", "delete", "truncate")
DAMAGE = st.tuples(st.sampled_from(DAMAGE_KINDS), st.integers(0, 2**20), st.integers(0, 2**20),
                   ABSURD)


def damage(lines: list[bytes], changes: list[tuple]) -> tuple[list[Entry], bool]:
    """The damaged log as entries, and whether its last line is left without its newline."""
    entries = [Entry(index, line) for index, line in enumerate(lines)]
    partial = False
    for kind, a, b, value in changes:
        if not entries:
            break
        i = a % len(entries)
        entry = entries[i]
        place = b % (len(entry.data) + 1)
        if kind == "flip" and entry.data:
            at = place % len(entry.data)
            flipped = entry.data[at] ^ (1 + (b >> 8) % 255)
            entry.data = entry.data[:at] + bytes([flipped]) + entry.data[at + 1:]
        elif kind == "cut":
            entry.data = entry.data[:place]
        elif kind == "join" and i + 1 < len(entries):
            entry.data += entries.pop(i + 1).data
        elif kind == "nul":
            entry.data = entry.data[:place] + b"\0" * (1 + b % 9) + entry.data[place:]
        elif kind == "value":
            entry.data = _replace_value(entry.data, b, value)
        elif kind == "duplicate":
            entries.insert(b % (len(entries) + 1), Entry(None, entry.data, True))
        elif kind == "move":
            entries.insert(b % len(entries), entries.pop(i))
        elif kind == "delete":
            del entries[i]
            continue
        elif kind == "truncate":  # the file ends in the middle of this line
            del entries[i + 1:]
            entry.data = entry.data[:place]
            partial = True
        entry.touched = True
    return entries, partial


def _replace_value(line: bytes, choice: int, value: object) -> bytes:
    """The line with one of its JSON values (any depth) replaced by `value`."""
    event = _json(line)
    slots = json_slots(event)
    if not slots:
        return line
    node, key = slots[choice % len(slots)]
    node[key] = copy.deepcopy(value)
    return json.dumps(event).encode()  # lone surrogates written as \ud800, as JS would


def _json(text: bytes | str) -> object:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def intact(entries: list[Entry], lines: list[bytes], fusion_id: str) -> bool:
    """Whether every line of the turn is there, untouched and in order, with nothing else
    between them and no copy of any elsewhere."""
    key = fusion_id.encode()
    originals = [index for index, line in enumerate(lines) if key in line]
    positions = [index for index, entry in enumerate(entries) if key in entry.data]
    if not positions:
        return False
    window = entries[positions[0]:positions[0] + originals[-1] - originals[0] + 1]
    return (all(not entry.touched for entry in window)
            and [entry.origin for entry in window] == list(range(originals[0], originals[-1] + 1))
            and positions[-1] < positions[0] + len(window))


# -- The pipeline --------------------------------------------------------------------------


class Clock:
    def __init__(self):
        self.now = time.time()

    def __call__(self):
        return self.now


def read_run(state_dir: Path, saved: stages.Saved | None, clock: Clock) -> tuple[list[Turn], dict]:
    """One run of the reading pipeline, as the daemon starts and runs it: returns the turns
    it reported and the checkpoint it would save. The one place that knows Tailer's API."""
    metrics = Metrics(Registry(label_value_limits={"model": MAX_MODELS}, clock=clock))
    if saved is not None:
        metrics.restore(saved.metrics)
    tailer = Tailer(state_dir, metrics=metrics, from_start=True, idle_timeout_s=IDLE_S,
                    saved=saved and saved.reading, clock=clock)
    try:
        turns = tailer.poll().turns
        state = tailer.state()
        for session_id in tailer.sessions:  # what is open shows in flight, damaged or not
            for turn in tailer.open_turns(session_id):
                render_now([in_flight_row(turn, int(clock() * 1e9), timezone.utc)], 100)
    finally:
        tailer.close()
    for turn in turns:
        metrics.count_turn(turn)
        export(turn)
        # The report's cache refuses a row it could not have made (its check as it loads
        # one): every row a log can give must pass it, or such a log's cache is never used.
        report_rows.check_turn_rows([report_rows.turn_data(turn)])
    for line in metrics.registry.render_final().splitlines():
        assert line.startswith("#") or math.isfinite(float(line.rsplit(" ", 1)[1])), line
    return turns, {**state, "metrics": saved_series(metrics.registry), "pending": []}


def export(turn: Turn) -> None:
    """The turn's spans as a collector would receive them: decoded by the official proto."""
    body = encode_request(turn_spans(turn), {"service.name": "hydrafusion"}, "fuzz", "0")
    request = decode_body(gzip.decompress(body))
    assert len(request.resource_spans[0].scope_spans[0].spans) >= 1


def save_and_load(folder: Path, state: dict) -> stages.Saved | None:
    path = folder / "checkpoint.json"
    checkpoint.save(path, state)
    return stages.load_saved(path)


# -- Damaged sessions ----------------------------------------------------------------------

SESSION = st.fixed_dictionaries({
    "base": st.integers(0, len(BASES) - 1),
    "damage": st.lists(DAMAGE, max_size=6),
    "first_run_reads": st.floats(0, 1),  # the share of the log written before the restart
    "folder": st.sampled_from(["plain"] * 6 + ["not_utf8"]),
    "log_becomes": st.sampled_from([None] * 12 + ["directory", "device", "fifo", "empty"]),
})


def _log_bytes(entries: list[Entry], partial: bool) -> bytes:
    data = b"\n".join(entry.data for entry in entries)
    return data if partial or not entries else data + b"\n"


@FUZZ
@given(st.lists(SESSION, min_size=1, max_size=MAX_SESSIONS))
def test_damaged_logs_cost_only_the_turns_they_damage(sessions):
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        state_dir = folder / "state"
        state_dir.mkdir()
        expected, logs = {}, []
        for number, session in enumerate(sessions):
            lines = SESSION_BASE_LINES[number][session["base"]]
            entries, partial = damage(lines, session["damage"])
            name = f"s{number}".encode() + (b"-\xff\xfe" if session["folder"] == "not_utf8" else b"")
            log = os.path.join(os.fsencode(state_dir), name, b"events.jsonl")
            os.mkdir(os.path.dirname(log))
            data = _log_bytes(entries, partial)
            first = data[:int(len(data) * session["first_run_reads"])]
            logs.append((log, data, first, session["log_becomes"]))
            for turn in SESSION_BASES[number][session["base"]].expected:
                if session["log_becomes"] is None and intact(entries, lines, turn.fusion_id):
                    expected[(os.fsdecode(name), turn.fusion_id)] = turn
        for log, _, first, _ in logs:
            Path(os.fsdecode(log)).write_bytes(first)
        clock = Clock()
        turns, state = read_run(state_dir, None, clock)
        for log, data, first, becomes in logs:
            _finish_log(Path(os.fsdecode(log)), data, first, becomes)
        clock.now += 2 * IDLE_S  # what is still open now is finished as incomplete
        more, state = read_run(state_dir, save_and_load(folder, state), clock)
        turns += more
        assert save_and_load(folder, state) is not None

    reported = {}
    for turn in turns:
        reported.setdefault((turn.session_id, turn.key), []).append(turn)
    assert [key for key, same in reported.items() if len(same) > 1] == []
    for key, truth in expected.items():
        [turn] = reported.get(key, [None])
        assert turn is not None, f"the intact turn {key} was not reported"
        assert (turn.outcome, turn.pattern, len(turn.legs), turn.legs_usage.nano_aiu,
                turn.committed_phase_id) == (truth.outcome, truth.pattern, len(truth.legs),
                                             truth.nano_aiu, truth.committed_phase_id)


def _finish_log(log: Path, data: bytes, first: bytes, becomes: str | None) -> None:
    """Between the runs the CLI writes the rest of the log, or the log is swapped."""
    if becomes is None:
        with open(log, "ab") as handle:
            handle.write(data[len(first):])
        return
    log.unlink()
    if becomes == "directory":
        log.mkdir()
    elif becomes == "device":
        log.symlink_to(os.devnull)
    elif becomes == "fifo":
        os.mkfifo(log)
    else:
        log.write_bytes(b"")


# -- Damaged checkpoints -------------------------------------------------------------------

CHECKPOINT_DAMAGE = st.lists(st.tuples(
    st.sampled_from(["flip", "value", "truncate", "nest", "drop"]),
    st.integers(0, 2**24), st.integers(0, 2**24), ABSURD), min_size=1, max_size=3)


def damage_checkpoint(text: str, changes: list[tuple]) -> str:
    for kind, a, b, value in changes:
        if kind == "flip" and text:
            at = a % len(text)
            text = text[:at] + chr(ord(text[at]) ^ (1 + b % 127)) + text[at + 1:]
        elif kind == "truncate":
            text = text[:a % (len(text) + 1)]
        elif kind == "drop":
            text = _drop_key(text, a)
        else:
            nested = "[" * 100_000 + "]" * 100_000
            replacement = "NESTED" if kind == "nest" else value
            text = _replace_value(text.encode(), a, replacement).decode()
            text = text.replace('"NESTED"', nested)
    return text


def _drop_key(text: str, choice: int) -> str:
    """The JSON text without one of its object keys (any depth)."""
    state = _json(text)
    keys = [(node, key) for node, key in json_slots(state) if isinstance(node, dict)]
    if not keys:
        return text
    node, key = keys[choice % len(keys)]
    del node[key]
    return json.dumps(state)


def _first_run_checkpoint() -> str:
    """The checkpoint a run leaves mid-way through both sessions: open turns, counters."""
    with tempfile.TemporaryDirectory() as temp:
        state_dir = Path(temp)
        for writer, lines in zip(BASES, BASE_LINES):
            folder = state_dir / writer.session_id
            folder.mkdir()
            (folder / "events.jsonl").write_bytes(b"".join(line + b"\n" for line in lines[:150]))
        _, state = read_run(state_dir, None, Clock())
    return json.dumps({"version": checkpoint.VERSION, **state})


FIRST_RUN_CHECKPOINT = _first_run_checkpoint()


@FUZZ
@given(CHECKPOINT_DAMAGE)
def test_a_damaged_checkpoint_loads_or_is_moved_aside_and_never_crashes_the_start(changes):
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        state_dir = folder / "state"
        for writer in BASES:
            writer.write(state_dir)
        path = folder / "checkpoint.json"
        path.write_text(damage_checkpoint(FIRST_RUN_CHECKPOINT, changes))
        saved = service._load_checkpoint(path)
        clock = Clock()
        clock.now += 2 * IDLE_S
        read_run(state_dir, saved, clock)
