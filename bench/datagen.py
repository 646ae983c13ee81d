"""The data the benchmarks read: Copilot CLI session logs generated as the CLI writes them.

`prepare_backfill_data` makes (or reuses, by its manifest) a state folder of sessions of
lognormal sizes, one about a third of the whole, padded at each commit with the model calls
and tool runs a real log holds (most of its bytes, none of them fusion events), with the
CLI's ledger of their calls beside it. Two kinds differ only in their tool output:
escape-heavy text (quotes, backslashes, tabs, U+2028, as code and test logs are) and plain
text that needs little unescaping. `make_old_sessions` makes the many small sessions of the
idle measures, `statusline_log` one long session. Nothing here measures anything.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from common import MB, progress

from ledgergen import rows_of_state, store_schema_sql, write_ledger
from sessiongen import SessionWriter

SEED = 20261103
DATA_VERSION = 4  # bump when the generated data changes, so kept data is made again
DATA_KINDS = ("escape-heavy", "plain")
MODELS = ("gpt-5.6-sol", "claude-sonnet-4.6", "gemini-3.1-pro", "mai-code-1.1-flash")
ROLLUP_PREFIX = '{"type":"session.fusion_completed"'
# A padding call's usage record becomes a `chat` span; each tool run an `execute_tool` span.
PADDING_SPAN_PREFIXES = ('{"type":"session.usage_record"', '{"type":"tool.execution_start"')
FUSION_PREFIXES = ('{"type":"session.fusion_', '{"type":"assistant.fusion_')
BIG_FILE_SHARE = 0.32  # of the data set: 320 MB of 1 GB
OLD_S = 3 * 24 * 3600  # how long ago the idle sessions were last written
LEDGER = "session-store.db"


@dataclass(frozen=True)
class DataShape:
    """What a data set is made of; its manifest records it, so kept data is reused only
    when it is this very set."""

    size_mb: int
    sessions: int
    huge_line_mb: int  # above the reader's 8 MB cap in both modes; 0: no line of several MB


WORDS = (
    "config parse value result error handler request session token cache client server "
    "module test assert build deploy import export render schema record buffer stream "
    "offset length index table column query update delete insert commit branch merge "
    "review patch diff status output input format encode decode retry timeout worker "
    "queue event metric span trace label widget layout router store action reducer"
).split()


def text_pool(rng: random.Random, chars: int = 4_000_000, *, plain: bool = False) -> str:
    """Text shaped like tool output (code, test logs, JSON, listings) to cut excerpts from.

    Quotes, backslashes, tabs and non-ASCII characters (U+2028 included, which the real logs
    carry) make the JSON encoder and every reader do what they do on real output. `plain`:
    prose-like lines of words instead, a newline every few hundred characters being the only
    thing JSON escapes.
    """
    def word() -> str:
        return rng.choice(WORDS)

    lines, size = [], 0
    while plain and size < chars:
        line = " ".join(word() for _ in range(rng.randint(20, 60)))
        lines.append(line)
        size += len(line) + 1
    while size < chars:
        kind = rng.randrange(8)
        if kind == 0:
            line = f"src/{word()}/{word()}_{word()}.py:{rng.randint(1, 900)}: {word()} = {word()}({word()}, \"{word()}\")"
        elif kind == 1:
            line = f"    def {word()}_{word()}(self, {word()}: str, {word()}: int = {rng.randint(0, 99)}) -> dict:"
        elif kind == 2:
            line = f"tests/test_{word()}.py::test_{word()}_{word()} {rng.choice(('PASSED', 'PASSED', 'FAILED'))}"
        elif kind == 3:
            line = f'  "{word()}": {{"{word()}": "{word()} {word()}", "count": {rng.randint(0, 10**6)}}},'
        elif kind == 4:
            line = f"-rw-r--r--  1 dev dev {rng.randint(0, 99999):>6} Nov  3 10:{rng.randint(0, 59):02d} {word()}.{rng.choice(('py', 'ts', 'md'))}"
        elif kind == 5:
            line = f"C:\\Users\\dev\\{word()}\\{word()}.cs\t{rng.randint(1, 500)}\tcaf\u00e9 \u2192 {word()}"
        elif kind == 6:
            line = f"\t{word()} {word()} {word()}\u2028{word()} {word()}"
        else:
            line = f"// {word()} the {word()} before {word()}ing the {word()} ({rng.randint(1, 9999)})"
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)


def new_id(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def event_line(event_type: str, data: dict, event_id: str, timestamp: str, parent_id: str | None) -> str:
    """One compact line, keys in the CLI's order."""
    return json.dumps(
        {"type": event_type, "data": data, "id": event_id, "timestamp": timestamp, "parentId": parent_id},
        separators=(",", ":"), ensure_ascii=False,
    )


class Padding:
    """The bulk of a real log: the committed leg's model calls and tool runs, none of them
    fusion events. Written before each rollup, where the CLI replays them at commit time.
    """

    def __init__(self, rng: random.Random, plain: bool = False):
        self.rng = rng
        self.pool = text_pool(rng, plain=plain)

    def excerpt(self, chars: int) -> str:
        start = self.rng.randrange(len(self.pool) - chars)
        return self.pool[start:start + chars]

    def huge(self, chars: int) -> str:
        return (self.pool * (chars // len(self.pool) + 1))[:chars]

    def commit(self, rollup: dict, big_output_chars: int = 0) -> list[str]:
        """2 to 24 model calls, each with its message and a tool run of a few KB of output;
        one run outputs `big_output_chars` when that is set."""
        rng, data, stamp = self.rng, rollup["data"], rollup["timestamp"]
        fusion = {
            "fusionId": data["fusionId"], "syntheticModel": "hydrafusion", "policy": "standard",
            "pattern": data["pattern"], "phaseId": data["finalSourcePhaseId"],
            "sourceModel": data["finalSourceModel"], "conversationScope": "root", "commitId": data["commitId"],
        }
        model = data["finalSourceModel"]
        lines, parent = [], rollup["parentId"]
        calls = rng.randint(2, 24)
        big_call = rng.randrange(calls) if big_output_chars else -1
        for call in range(calls):
            call_id = f"call_{rng.getrandbits(96):024x}"
            arguments = {"command": f"cd /home/dev/src/webapp && {self.excerpt(rng.randint(20, 160))}",
                         "description": self.excerpt(rng.randint(10, 60))}
            output_chars = big_output_chars if call == big_call else int(
                min(200_000, max(80, rng.lognormvariate(math.log(2500), 1.0))))
            output = self.huge(output_chars) if call == big_call else self.excerpt(output_chars)
            for event_type, payload in (
                ("session.usage_record", {"usage": {
                    "model": model, "provider": {"id": "github", "kind": "capi", "label": "GitHub Copilot"},
                    "inputTokens": rng.randint(9_000, 60_000), "outputTokens": rng.randint(50, 3_000),
                    "cacheReadTokens": rng.randint(0, 9_000), "cacheWriteTokens": 0,
                    "cost": 1.0, "duration": rng.randint(800, 9_000),
                    "timeToFirstTokenMs": rng.randint(300, 1_400), "initiator": "agent",
                    "apiCallId": new_id(rng), "finishReason": "tool_calls", "reasoningEffort": "medium",
                    "isAuto": True, "isByok": False, "toolCounts": {"bash": 1},
                    "aiCreditsStatus": "complete", "copilotUsage": {
                        "model": model, "totalNanoAiu": rng.randint(10**8, 5 * 10**9),
                        "tokenDetails": [{"batchSize": 1, "costPerBatch": 1, "tokenCount": 1,
                                          "tokenType": "input"}]},
                    "fusion": fusion}}),
                ("assistant.turn_start", {"turnId": str(call), "interactionId": new_id(rng)}),
                ("assistant.message", {
                    "messageId": new_id(rng), "content": self.excerpt(rng.randint(100, 1500)),
                    "toolRequests": [{"toolCallId": call_id, "name": "bash", "arguments": arguments,
                                      "type": "function"}],
                    "reasoningText": self.excerpt(rng.randint(0, 800)), "reasoningOpaque": None,
                    "encryptedContent": None, "parentToolCallId": None, "fusion": fusion}),
                ("tool.execution_start", {
                    "toolCallId": call_id, "toolName": "bash", "mcpServerName": None, "mcpToolName": None,
                    "arguments": arguments, "model": model, "fusion": fusion}),
                ("tool.execution_complete", {
                    "toolCallId": call_id, "model": model, "success": True,
                    "result": {"content": output}, "fusion": fusion}),
                ("assistant.turn_end", {"turnId": str(call)}),
            ):
                event_id = new_id(rng)
                lines.append(event_line(event_type, payload, event_id, stamp, parent))
                parent = event_id
        return lines


def add_turn(writer: SessionWriter, rng: random.Random, *, rolled_up: bool = False) -> str:
    """One prompt's events in a realistic mix of patterns; returns the turn's fusion id.

    `rolled_up`: only turns that end with a rollup line (no aborts, no route failures).
    """
    draft, judge, other = rng.sample(MODELS, 3)
    roll = rng.random() * (0.88 if rolled_up else 1.0)
    if roll < 0.40:
        turn = writer.single(draft)
    elif roll < 0.62:
        turn = writer.cascade(draft, judge)
    elif roll < 0.70:
        turn = writer.cascade(draft, judge, verdict="reject", repair_model=other)
    elif roll < 0.78:
        turn = writer.critique(draft, [judge, other])
    elif roll < 0.84:
        turn = writer.critique(draft, [judge, other], revision_model=draft)
    elif roll < 0.88:
        turn = writer.degraded(draft, judge)
    elif roll < 0.94:
        turn = writer.incomplete(draft, judge)
    else:
        turn = writer.route_failed(draft)
    return turn.fusion_id


@dataclass
class DataSummary:
    files: int = 0
    bytes: int = 0
    lines: int = 0
    fusion_lines: int = 0
    lines_over_1mb: int = 0
    largest_line: int = 0
    largest_file: int = 0
    turns: int = 0
    spans: int = 0
    padding_calls: int = 0  # usage records and tool runs the padding adds (a span each)


class LogFile:
    """One events.jsonl being written, padded at each commit, counted into a summary."""

    def __init__(self, path: Path, padding: Padding, summary: DataSummary):
        self.out = open(path, "wb")
        self.padding = padding
        self.summary = summary
        self.size = 0
        self._consumed = 0  # lines of the writer already written

    def take(self, writer: SessionWriter, big_output_chars: int = 0) -> None:
        """Write the writer's new lines; the first commit among them gets the big output."""
        lines = writer.lines()
        for line in lines[self._consumed:]:
            if line.startswith(ROLLUP_PREFIX):
                for extra in self.padding.commit(json.loads(line), big_output_chars):
                    self._write(extra)
                    self.summary.padding_calls += extra.startswith(PADDING_SPAN_PREFIXES)
                big_output_chars = 0
            self._write(line)
        self._consumed = len(lines)

    def _write(self, line: str) -> None:
        data = line.encode() + b"\n"
        self.out.write(data)
        self.size += len(data)
        summary = self.summary
        summary.bytes += len(data)
        summary.lines += 1
        summary.fusion_lines += line.startswith(FUSION_PREFIXES)
        summary.lines_over_1mb += len(data) > MB
        summary.largest_line = max(summary.largest_line, len(data))

    def close(self) -> None:
        self.out.close()
        self.summary.files += 1
        self.summary.largest_file = max(self.summary.largest_file, self.size)


def make_backfill_data(state_dir: Path, shape: DataShape, kind: str) -> DataSummary:
    """Sessions of lognormal sizes adding up to `size_mb`, one of them about a third of it.

    The big session holds the huge line and two lines of several MB; the next largest ones
    one such line each (one per 100 MB of data); without a huge line, no line of several MB
    either (data of a few MB). `kind` is one of DATA_KINDS: the kind of tool output.
    """
    rng = random.Random(SEED)
    padding = Padding(rng, plain=kind == "plain")
    total = shape.size_mb * MB
    big = int(total * BIG_FILE_SHARE)
    weights = [rng.lognormvariate(0, 1) for _ in range(shape.sessions - 1)]
    budgets = [big] + [int((total - big) * weight / sum(weights)) for weight in weights]

    def several_mb() -> int:
        return rng.randint(2, 8) * MB

    big_outputs = {}
    if shape.huge_line_mb:
        big_outputs[0] = [(0.2, several_mb()), (0.5, shape.huge_line_mb * MB), (0.8, several_mb())]
        by_size = sorted(range(1, len(budgets)), key=budgets.__getitem__, reverse=True)
        for index in by_size[:max(1, shape.size_mb // 100)]:
            big_outputs[index] = [(0.5, several_mb())]
    summary = DataSummary()
    base = datetime(2026, 10, 1, tzinfo=timezone.utc)
    for index, budget in enumerate(budgets):
        session_id = new_id(rng)
        (state_dir / session_id).mkdir(parents=True)
        writer = SessionWriter(session_id, base + timedelta(hours=index * 5))
        log = LogFile(state_dir / session_id / "events.jsonl", padding, summary)
        pending = list(big_outputs.get(index, []))
        while log.size < budget or not writer.expected:
            add_turn(writer, rng)
            due = pending and log.size >= pending[0][0] * budget
            log.take(writer, pending.pop(0)[1] if due else 0)
        writer.shutdown()
        log.take(writer)
        log.close()
        summary.turns += len(writer.expected)
        # A root, a route span (every generated turn has a routing latency), one per leg,
        # model call and tool call.
        summary.spans += sum(2 + len(turn.legs) + turn.calls + turn.tools for turn in writer.expected)
    summary.spans += summary.padding_calls
    return summary


def prepare_backfill_data(data_dir: Path, shape: DataShape, kind: str) -> DataSummary:
    """Reuse `data_dir` when it holds this very data set, otherwise (re)make it."""
    manifest_path = data_dir / "manifest.json"
    wanted = {"version": DATA_VERSION, "seed": SEED, "size_mb": shape.size_mb,
              "sessions": shape.sessions, "huge_line_mb": shape.huge_line_mb, "kind": kind}
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError):
        manifest = None
    if manifest and manifest.get("made_with") == wanted:
        progress(f"reusing the data in {data_dir}")
        make_ledger(data_dir)
        return DataSummary(**manifest["summary"])
    if manifest is None and data_dir.exists() and any(data_dir.iterdir()):
        sys.exit(f"bench: {data_dir} holds something else; give an empty or new folder to --data")
    shutil.rmtree(data_dir / "session-state", ignore_errors=True)
    progress(f"generating {shape.size_mb} MB of {kind} data in {shape.sessions} sessions under {data_dir}")
    summary = make_backfill_data(data_dir / "session-state", shape, kind)
    (data_dir / LEDGER).unlink(missing_ok=True)
    make_ledger(data_dir)
    manifest_path.write_text(json.dumps({"made_with": wanted, "summary": asdict(summary)}, indent=1))
    return summary


def make_ledger(data_dir: Path) -> None:
    """The CLI's ledger beside the data's state folder, where a report finds it, unless it
    is there: a row per usage record of the logs, in the pinned CLI's layout (tests/realcli)."""
    if (data_dir / LEDGER).is_file():
        return
    rows = rows_of_state(data_dir / "session-state")
    progress(f"writing the CLI's ledger of their {len(rows):,} calls")
    write_ledger(data_dir / LEDGER, rows, schema=store_schema_sql())


def ledger_rows(data_dir: Path) -> int:
    import sqlite3

    connection = sqlite3.connect(f"file:{data_dir / LEDGER}?mode=ro", uri=True)
    try:
        return connection.execute("SELECT count(*) FROM assistant_usage_events").fetchone()[0]
    finally:
        connection.close()


def idle_writer(index: int) -> SessionWriter:
    """The session an idle folder holds: made again identically to append to it later."""
    session_id = str(uuid.UUID(int=random.Random(f"idle {index}").getrandbits(128), version=4))
    writer = SessionWriter(session_id, datetime(2026, 10, 1, tzinfo=timezone.utc) + timedelta(minutes=index))
    writer.single(MODELS[index % len(MODELS)])
    writer.shutdown()
    return writer


def make_old_sessions(state_dir: Path, count: int) -> None:
    """`count` sessions with one turn each, every file and folder last written days ago."""
    state_dir.mkdir(parents=True, exist_ok=True)
    old = time.time() - OLD_S
    for index in range(count):
        writer = idle_writer(index)
        folder = writer.write(state_dir).parent
        for path in (*folder.iterdir(), folder):
            os.utime(path, (old, old))
    os.utime(state_dir, (old, old))


def split_at_rollup(lines: list[str]) -> tuple[bytes, bytes]:
    """A turn's lines as (everything before its rollup line, the rollup line and after)."""
    cut = next(i for i, line in enumerate(lines) if line.startswith(ROLLUP_PREFIX))
    return "".join(line + "\n" for line in lines[:cut]).encode(), "".join(line + "\n" for line in lines[cut:]).encode()



def statusline_log(path: Path, size_mb: int) -> tuple[SessionWriter, LogFile]:
    """One session's log of `size_mb`: turns padded with model calls and tool output, as a
    long day's session is; the writer and the file, left open for the turns to come."""
    rng = random.Random(SEED + 41)
    writer = SessionWriter("statusline-bench", datetime(2026, 10, 1, tzinfo=timezone.utc))
    path.parent.mkdir(parents=True)
    log = LogFile(path, Padding(rng), DataSummary())
    while log.size < size_mb * MB:
        add_turn(writer, rng, rolled_up=True)
        log.take(writer)
    log.out.flush()
    return writer, log

