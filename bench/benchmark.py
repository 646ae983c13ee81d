"""Measure the tailer against the targets of issues 4 and 11, in one run, on generated data.

    python bench/benchmark.py             # the full run: about 1 GB, 60 s idle, several minutes
    python bench/benchmark.py --quick     # a smoke run: small data, 10 s idle, about a minute

Every figure comes from the real tailer started as a user starts it (`python -m tailer run
...`), against a generated Copilot state directory and a minimal OTLP/HTTP receiver that
runs in this process. The script prints the figures next to the targets and never fails on
a missed one: timings belong to the machine, and docs/PERFORMANCE.md says how to read them.

1. Backfill: `run --once --from-start` over many sessions (one log over 300 MB, a 50 MB
   line, a few lines of several MB, most lines not fusion events), next to a plain
   line-by-line read, a raw read and a naive reader that JSON-parses every line, on the same
   files with a warm page cache; and the peak RSS of the tailer process. Twice, on two kinds
   of data that differ only in their tool output: escape-heavy text (quotes, backslashes,
   tabs, U+2028, as code and test logs are), and plain text that needs little unescaping
   (where a full JSON decode is cheapest, so the naive reader is at its best). Beside it,
   `report --format json` over the same files: the report must take no longer.
2. Idle: the daemon following 10,000 sessions last written days ago; its CPU time (all
   threads, from /proc) over a window once its start-up work is done.
   Then `report --watch` on the same sessions, measured the same way after its first drawing.
3. Latency: complete turns appended to an active session; time from writing each turn's
   rollup line to its root span reaching the receiver.
4. Resume: one of the 10,000 old sessions gets a new turn; time until that turn is exported.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import platform
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# SessionWriter writes turns exactly as the CLI does; it has no test dependencies.
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from sessiongen import SessionWriter  # noqa: E402
from tailer.copilot.events import may_be_read  # noqa: E402
from tailer.copilot.lines import LineReader  # noqa: E402

MB = 1_000_000  # every size and rate here is in decimal megabytes
SEED = 20261103
DATA_VERSION = 4  # bump when the generated data changes, so kept data is made again
DATA_KINDS = ("escape-heavy", "plain")
MODELS = ("gpt-5.6-sol", "claude-sonnet-4.6", "gemini-3.1-pro", "mai-code-1.1-flash")
ROLLUP_PREFIX = '{"type":"session.fusion_completed"'
# A padding call's usage record becomes a `chat` span; each tool run an `execute_tool` span.
PADDING_SPAN_PREFIXES = ('{"type":"session.usage_record"', '{"type":"tool.execution_start"')
FUSION_PREFIXES = ('{"type":"session.fusion_', '{"type":"assistant.fusion_')

BIG_FILE_SHARE = 0.32  # of the data set: 320 MB of the default 1 GB
IDLE_SESSIONS = 10_000
IDLE_RESUMED = 4_321  # the old session that gets a new turn
OLD_S = 3 * 24 * 3600  # how long ago the idle sessions were last written
READ_CHUNK = 1 << 20
TIMED_ROUNDS = 3

TARGET_VS_PLAIN = 0.4
TARGET_VS_NAIVE = 1.5
TARGET_RSS_MB = 60.0
TARGET_IDLE_PERCENT = 0.5
TARGET_P99_S = 1.0
TARGET_RESUME_S = 60.0
TARGET_REPORT_VS_BACKFILL = 1.0


@dataclass(frozen=True)
class Settings:
    size_mb: int
    sessions: int
    huge_line_mb: int  # above the reader's 8 MB cap in both modes
    idle_seconds: float
    latency_turns: int


FULL = Settings(size_mb=1000, sessions=200, huge_line_mb=50, idle_seconds=60, latency_turns=50)
QUICK = Settings(size_mb=60, sessions=30, huge_line_mb=10, idle_seconds=10, latency_turns=10)


# -- The data -----------------------------------------------------------------------------

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


def make_backfill_data(state_dir: Path, settings: Settings, kind: str) -> DataSummary:
    """Sessions of lognormal sizes adding up to `size_mb`, one of them about a third of it.

    The big session holds the huge line and two lines of several MB; the next largest ones
    one such line each (one per 100 MB of data). `kind` is one of DATA_KINDS: the kind of
    tool output.
    """
    rng = random.Random(SEED)
    padding = Padding(rng, plain=kind == "plain")
    total = settings.size_mb * MB
    big = int(total * BIG_FILE_SHARE)
    weights = [rng.lognormvariate(0, 1) for _ in range(settings.sessions - 1)]
    budgets = [big] + [int((total - big) * weight / sum(weights)) for weight in weights]

    def several_mb() -> int:
        return rng.randint(2, 8) * MB

    big_outputs = {0: [(0.2, several_mb()), (0.5, settings.huge_line_mb * MB), (0.8, several_mb())]}
    by_size = sorted(range(1, len(budgets)), key=budgets.__getitem__, reverse=True)
    for index in by_size[:max(1, settings.size_mb // 100)]:
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


def prepare_backfill_data(data_dir: Path, settings: Settings, kind: str) -> DataSummary:
    """Reuse `data_dir` when it holds this very data set, otherwise (re)make it."""
    manifest_path = data_dir / "manifest.json"
    wanted = {"version": DATA_VERSION, "seed": SEED, "size_mb": settings.size_mb,
              "sessions": settings.sessions, "huge_line_mb": settings.huge_line_mb, "kind": kind}
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError):
        manifest = None
    if manifest and manifest.get("made_with") == wanted:
        progress(f"reusing the data in {data_dir}")
        return DataSummary(**manifest["summary"])
    if manifest is None and data_dir.exists() and any(data_dir.iterdir()):
        sys.exit(f"benchmark: {data_dir} holds something else; give an empty or new folder to --data")
    shutil.rmtree(data_dir / "session-state", ignore_errors=True)
    progress(f"generating {settings.size_mb} MB of {kind} data in {settings.sessions} sessions under {data_dir}")
    summary = make_backfill_data(data_dir / "session-state", settings, kind)
    manifest_path.write_text(json.dumps({"made_with": wanted, "summary": asdict(summary)}, indent=1))
    return summary


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


# -- The OTLP receiver --------------------------------------------------------------------


class Receiver:
    """A minimal OTLP/HTTP JSON traces receiver: answers 200, counts spans, and notes when the
    root span of each turn (the span without a parent) first arrived."""

    def __init__(self):
        self._changed = threading.Condition()
        self.spans = 0
        self.root_spans = 0
        self.roots: dict[str, float] = {}  # fusion id -> time.monotonic() of arrival
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _ReceiverHandler)
        self._server.daemon_threads = True
        self._server.receiver = self
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def receive(self, body: bytes, arrived: float) -> None:
        request = json.loads(body)
        with self._changed:
            for resource_spans in request.get("resourceSpans", []):
                for scope_spans in resource_spans.get("scopeSpans", []):
                    for span in scope_spans.get("spans", []):
                        self.spans += 1
                        if span.get("parentSpanId"):
                            continue
                        self.root_spans += 1
                        fusion_id = next((a["value"].get("stringValue") for a in span.get("attributes", [])
                                          if a["key"] == "hydrafusion.fusion_id"), None)
                        self.roots.setdefault(fusion_id, arrived)
            self._changed.notify_all()

    def wait_for_roots(self, fusion_ids: set[str], timeout: float) -> None:
        with self._changed:
            self._changed.wait_for(lambda: fusion_ids <= self.roots.keys(), timeout)

    def reset(self) -> None:
        with self._changed:
            self.spans = self.root_spans = 0
            self.roots = {}

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class _ReceiverHandler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        arrived = time.monotonic()
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        self.server.receiver.receive(body, arrived)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format, *args) -> None:
        pass


# -- Running the tailer -------------------------------------------------------------------


def tailer_command(*options: str) -> list[str]:
    return [sys.executable, "-m", "tailer", "run", *options]


def report_command(state_dir: Path) -> list[str]:
    return [sys.executable, "-m", "tailer", "report", "--format", "json", "--state-dir", str(state_dir)]


def report_watch_command(state_dir: Path) -> list[str]:
    return [sys.executable, "-m", "tailer", "report", "--watch", "--state-dir", str(state_dir)]


def child_environment() -> dict[str, str]:
    """This checkout's tailer, configured by its command line alone."""
    environ = {key: value for key, value in os.environ.items()
               if not key.startswith(("OTEL_", "HYDRAFUSION_", "COPILOT_"))}
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), environ.get("PYTHONPATH")]))
    return environ


def start_daemon(options: list[str], log_path: Path) -> subprocess.Popen:
    with open(log_path, "wb") as log:
        return subprocess.Popen(tailer_command(*options), cwd=REPO, env=child_environment(),
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)


def stop_daemon(child: subprocess.Popen) -> None:
    child.send_signal(signal.SIGTERM)
    try:
        child.wait(30)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def wait_for_log(log_path: Path, pattern: str, child: subprocess.Popen, timeout: float) -> re.Match | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and child.poll() is None:
        match = re.search(pattern, log_path.read_text(errors="replace"))
        if match:
            return match
        time.sleep(0.05)
    return None


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, all its threads, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory_mb(pid: int, field: str) -> float:
    """VmRSS (now) or VmHWM (peak) of a process, from /proc/<pid>/status."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024 / MB
    return float("nan")


def wait_until_quiet(pid: int, timeout: float = 120.0) -> float:
    """Wait until the process uses under 1% of a core over 2 s: its start-up work is over."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        before = cpu_seconds(pid)
        time.sleep(2.0)
        if cpu_seconds(pid) - before <= 0.02:
            break
    return time.monotonic() - started


def warnings_in(log_path: Path) -> list[str]:
    """The daemon's warnings, but for its per-turn lines (a route failure is logged as one)
    and its checks of the CLI's totals: the padding's model calls are not in the totals the
    generated sessions end with, so every backfill session disagrees, as the data is made."""
    return [line for line in log_path.read_text(errors="replace").splitlines()
            if " WARNING " in line and " WARNING fusion " not in line
            and "our sums differ from the CLI's" not in line]


# -- The measurements ---------------------------------------------------------------------


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
# report this script's memory; started from this small process, it reports its own.
LAUNCHER = """
import os, subprocess, sys, time
started = time.perf_counter()
child = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(child.pid, 0)
print(time.perf_counter() - started, os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


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
    wall, exit_code, peak_kib = launched.stdout.split()
    return {"wall_s": float(wall), "peak_rss_mb": int(peak_kib) * 1024 / MB, "exit_code": int(exit_code),
            "spans": receiver.spans, "root_spans": receiver.root_spans, "turns": len(receiver.roots),
            "warnings": warnings_in(log_path), "command": tailer_command(*options)}


def run_report(state_dir: Path) -> dict:
    """One `report --format json` over the data (its output thrown away): wall time, peak RSS."""
    launched = subprocess.run([sys.executable, "-c", LAUNCHER, *report_command(state_dir)], cwd=REPO,
                              env=child_environment(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, check=True, text=True)
    wall, exit_code, peak_kib = launched.stdout.split()
    return {"wall_s": float(wall), "peak_rss_mb": int(peak_kib) * 1024 / MB, "exit_code": int(exit_code)}


def report_turns(state_dir: Path) -> int:
    """How many turns, fusion and ordinary, the report finds in the data (a run of its own,
    not timed)."""
    done = subprocess.run(report_command(state_dir), cwd=REPO, env=child_environment(),
                          stdin=subprocess.DEVNULL, capture_output=True, check=True, text=True)
    return len(json.loads(done.stdout)["turns"])


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
    run_report(state_dir)
    results = {"bytes": size}
    for round_number in range(1, TIMED_ROUNDS + 1):
        for name, read in readers:
            seconds = timed(read, paths)
            results[f"{name}_s"] = min(seconds, results.get(f"{name}_s", seconds))
        for key, export in (("tailer", True), ("tailer_no_export", False)):
            run = run_backfill(state_dir, work, receiver, f"{key}-{round_number}", export=export)
            results[key] = _faster(results.get(key), run)
        report = run_report(state_dir)
        best = results.get("report", report)
        results["report"] = dict(min(best, report, key=lambda r: r["wall_s"]),
                                 peak_rss_mb=max(best["peak_rss_mb"], report["peak_rss_mb"]),
                                 exit_code=best["exit_code"] or report["exit_code"])
        progress(f"  round {round_number}: " + ", ".join(
            f"{name} {size / MB / results[f'{name}_s']:.0f}" for name, _ in readers
        ) + f", tailer {size / MB / results['tailer']['wall_s']:.0f}"
            f", export off {size / MB / results['tailer_no_export']['wall_s']:.0f}"
            f", report {size / MB / results['report']['wall_s']:.0f} MB/s (best so far)")
    results["report"]["turns"] = report_turns(state_dir)
    results["report"]["command"] = report_command(state_dir)
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
    for count in ("spans", "root_spans", "turns"):
        faster[count] = min(best[count], run[count])
    faster["warnings"] = best["warnings"] + [w for w in run["warnings"] if w not in best["warnings"]]
    return faster


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
        receiver.wait_for_roots({fusion_id}, 2 * TARGET_RESUME_S)
        arrived = receiver.roots.get(fusion_id)
    finally:
        stop_daemon(child)
    return {"mode": match.group(1), "startup_s": startup_s, "settle_s": settle_s, "cpu_s": cpu, "wall_s": wall,
            "rss_mb": rss, "resume_s": None if arrived is None else arrived - written,
            "warnings": warnings_in(log_path), "command": tailer_command(*options)}


def measure_watch_idle(state_dir: Path, work: Path, seconds: float) -> dict:
    """`report --watch` over the idle daemon's 10,000 old sessions, measured as the daemon is:
    its CPU over the window once its first drawing is done and it has gone quiet.

    Its output goes to a file: the table is drawn as on a terminal of COLUMNS x LINES, without
    colour. The window holds one change of minute, so one redraw of the live lines.
    """
    output = work / "watch.out"
    command = report_watch_command(state_dir)
    environ = dict(child_environment(), COLUMNS="100", LINES="40")
    with open(output, "wb") as out:
        child = subprocess.Popen(command, cwd=REPO, env=environ, stdin=subprocess.DEVNULL,
                                 stdout=out, stderr=subprocess.STDOUT)
    started = time.monotonic()
    try:
        if wait_for_log(output, r"HydraFusion: \d+ turns", child,
                        300) is None:
            return {"error": f"report --watch drew nothing (see {output})", "command": command}
        first_frame_s = time.monotonic() - started
        settle_s = wait_until_quiet(child.pid)
        progress(f"watch: first drawing after {first_frame_s:.1f}s, quiet after {settle_s:.1f}s more; "
                 f"measuring {seconds:.0f}s")
        cpu_before, wall_before = cpu_seconds(child.pid), time.monotonic()
        time.sleep(seconds)
        cpu, wall = cpu_seconds(child.pid) - cpu_before, time.monotonic() - wall_before
        rss = memory_mb(child.pid, "VmRSS")
    finally:
        stop_daemon(child)
    return {"first_frame_s": first_frame_s, "cpu_s": cpu, "wall_s": wall, "rss_mb": rss,
            "command": command}


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


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on, for the daemon's /metrics."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


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


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest rank: with 50 values the 99th percentile is the largest."""
    return sorted_values[max(0, math.ceil(fraction * len(sorted_values)) - 1)]


# -- The report ---------------------------------------------------------------------------


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def machine() -> str:
    model = ""
    try:
        model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                      if line.startswith("model name")), "")
    except OSError:
        pass
    return (f"{os.cpu_count()} cores ({model or platform.processor() or 'unknown CPU'}), "
            f"Python {platform.python_version()}, {platform.system()} {platform.release()}")


def verdict(met: bool | None) -> str:
    return {True: "met", False: "MISSED", None: "n/a"}[met]


def backfill_rows(kind: str, backfill: dict) -> list[tuple]:
    """The backfill figures of one kind of data, each row (name, measured, target, met)."""
    tailer = backfill["tailer"]
    report_run = backfill["report"]
    size_mb = backfill["bytes"] / MB
    rate = {name: size_mb / backfill[f"{name}_s"] for name in ("plain_lines", "raw_read", "naive", "line_reader")}
    tailer_rate = size_mb / tailer["wall_s"]
    no_export = backfill["tailer_no_export"]
    no_export_rate = size_mb / no_export["wall_s"]
    return [
        (f"{kind} tool output: backfill, tailer (wall time of the process)", f"{tailer_rate:.0f} MB/s", "", None),
        ("  backfill, tailer turns", f"{tailer['turns'] / tailer['wall_s']:.0f} turns/s", "", None),
        ("  same, with --otlp-endpoint none", f"{no_export_rate:.0f} MB/s", "", None),
        ("  plain read: every line, `for line in f`", f"{rate['plain_lines']:.0f} MB/s", "", None),
        ("  raw read(1 MiB), for reference", f"{rate['raw_read']:.0f} MB/s", "", None),
        ("  naive reader: json.loads of every line", f"{rate['naive']:.0f} MB/s", "", None),
        ("  tailer's line reader alone, in this process", f"{rate['line_reader']:.0f} MB/s", "", None),
        ("  line reader / plain read", f"{rate['line_reader'] / rate['plain_lines']:.2f} x", "", None),
        ("  tailer, export off / plain read", f"{no_export_rate / rate['plain_lines']:.2f} x",
         f">= {TARGET_VS_PLAIN}", no_export_rate / rate["plain_lines"] >= TARGET_VS_PLAIN),
        ("  tailer, export off / naive reader", f"{no_export_rate / rate['naive']:.2f} x",
         f">= {TARGET_VS_NAIVE if kind == 'escape-heavy' else 1.0}",
         no_export_rate / rate["naive"] >= (TARGET_VS_NAIVE if kind == "escape-heavy" else 1.0)),
        ("  tailer, export on / plain read", f"{tailer_rate / rate['plain_lines']:.2f} x", "", None),
        ("  tailer, export on / naive reader", f"{tailer_rate / rate['naive']:.2f} x", "", None),
        ("  peak RSS of the tailer (backfill)", f"{tailer['peak_rss_mb']:.1f} MB", f"< {TARGET_RSS_MB:.0f} MB",
         tailer["peak_rss_mb"] < TARGET_RSS_MB),
        ("  same, with --otlp-endpoint none", f"{no_export['peak_rss_mb']:.1f} MB", f"< {TARGET_RSS_MB:.0f} MB",
         no_export["peak_rss_mb"] < TARGET_RSS_MB),
        ("report --format json (wall time of the process)", f"{size_mb / report_run['wall_s']:.0f} MB/s", "", None),
        ("report time / tailer backfill time", f"{report_run['wall_s'] / tailer['wall_s']:.2f} x",
         f"<= {TARGET_REPORT_VS_BACKFILL}", report_run["wall_s"] / tailer["wall_s"] <= TARGET_REPORT_VS_BACKFILL),
        ("  report time / backfill with --otlp-endpoint none", f"{report_run['wall_s'] / no_export['wall_s']:.2f} x",
         "", None),
        ("  peak RSS of the report", f"{report_run['peak_rss_mb']:.1f} MB", "", None),
    ]


def watch_rows(watch: dict) -> list[tuple]:
    """`report --watch` beside the idle daemon, each row (name, measured, target, met)."""
    if "error" in watch:
        return [("report --watch idle CPU", watch["error"], f"< {TARGET_IDLE_PERCENT}%", None)]
    percent = 100 * watch["cpu_s"] / watch["wall_s"]
    return [
        (f"report --watch idle CPU, same sessions ({watch['wall_s']:.0f} s)", f"{percent:.3f}% of a core",
         f"< {TARGET_IDLE_PERCENT}%", percent < TARGET_IDLE_PERCENT),
        ("  report --watch: its first drawing", f"{watch['first_frame_s']:.1f} s", "", None),
        ("  RSS of the idle report --watch", f"{watch['rss_mb']:.1f} MB", "", None),
    ]


def report(backfills: list[tuple[str, DataSummary, dict]], idle: dict, watch: dict, latency: dict) -> None:
    rows = [row for kind, _, backfill in backfills for row in backfill_rows(kind, backfill)]
    if "error" in idle:
        rows.append(("idle CPU", idle["error"], f"< {TARGET_IDLE_PERCENT}%", None))
    else:
        idle_percent = 100 * idle["cpu_s"] / idle["wall_s"]
        resumed = idle["resume_s"]
        rows += [
            (f"idle CPU, {IDLE_SESSIONS:,} old sessions ({idle['mode']}, {idle['wall_s']:.0f} s)",
             f"{idle_percent:.3f}% of a core", f"< {TARGET_IDLE_PERCENT}%", idle_percent < TARGET_IDLE_PERCENT),
            (f"  start-up with {IDLE_SESSIONS:,} sessions (to the start-up line)", f"{idle['startup_s']:.1f} s", "", None),
            ("  RSS of the idle daemon", f"{idle['rss_mb']:.1f} MB", "", None),
            *watch_rows(watch),
            ("old session resumed: append to export",
             "not exported" if resumed is None else f"{resumed:.2f} s", f"< {TARGET_RESUME_S:.0f} s",
             resumed is not None and resumed < TARGET_RESUME_S),
        ]
    if "error" in latency or not latency["latencies_s"]:
        rows.append(("append-to-export latency", latency.get("error", "nothing exported"), f"p99 < {TARGET_P99_S} s", None))
    else:
        values = latency["latencies_s"]
        p50, p99 = percentile(values, 0.50), percentile(values, 0.99)
        rows += [
            (f"append-to-export latency, p50 ({len(values)} turns)", f"{p50:.3f} s", "", None),
            (f"append-to-export latency, p99 ({len(values)} turns)", f"{p99:.3f} s", f"< {TARGET_P99_S} s",
             p99 < TARGET_P99_S),
        ]

    print()
    print(f"command: python {' '.join(sys.argv)}")
    print(f"machine: {machine()}")
    for kind, data, backfill in backfills:
        print(f"data ({kind}): {data.files} sessions, {data.bytes / MB:.0f} MB, {data.lines:,} lines "
              f"({100 * data.fusion_lines / data.lines:.1f}% fusion events), {data.turns:,} turns; "
              f"largest file {data.largest_file / MB:.0f} MB, largest line {data.largest_line / MB:.1f} MB, "
              f"{data.lines_over_1mb} lines over 1 MB")
        print(f"backfill command: {' '.join(backfill['tailer']['command'])}")
    print()
    width = max(len(row[0]) for row in rows)
    measured_width = max(len(row[1]) for row in rows)
    print(f"{'figure':{width}}  {'measured':>{measured_width}}  {'target':>10}")
    for name, measured, target, met in rows:
        print(f"{name:{width}}  {measured:>{measured_width}}  {target:>10}  {verdict(met) if target else ''}".rstrip())
    print()
    notes = []
    for kind, data, backfill in backfills:
        tailer, no_export = backfill["tailer"], backfill["tailer_no_export"]
        notes.append(
            f"{kind}: backfill exit code {tailer['exit_code']}; turns exported {tailer['turns']:,} of "
            f"{data.turns:,}, {tailer['root_spans']:,} root spans, {tailer['spans']:,} of {data.spans:,} "
            f"spans in all; with --otlp-endpoint none, exit code {no_export['exit_code']}")
        report_run = backfill["report"]
        notes.append(f"{kind}: report exit code {report_run['exit_code']}; turns found "
                     f"{report_run['turns']:,} of {data.turns:,}; command: {' '.join(report_run['command'])}")
        if report_run["turns"] != data.turns:
            notes.append(f"{kind}: the report did NOT find every turn of the data: that is a bug, "
                         "not a matter of speed")
        if (tailer["turns"], tailer["spans"]) != (data.turns, data.spans):
            notes.append(f"{kind}: the backfill did NOT export every turn and span of the data: that is "
                         "a bug in the tailer, not a matter of speed")
    if "error" not in latency:
        notes.append(f"latency: {latency['exported']} of {latency['appended']} appended turns exported; "
                     f"max {max(latency['latencies_s'], default=float('nan')):.3f} s")
    results = [(f"{kind} backfill", backfill["tailer"]) for kind, _, backfill in backfills]
    for label, result in (*results, ("idle", idle), ("latency", latency)):
        for warning in result.get("warnings", [])[:5]:
            notes.append(f"{label} daemon warned: {warning}")
    for note in notes:
        print(f"note: {note}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: 60 MB of data, 10 s idle, 10 turns")
    parser.add_argument("--data", type=Path, metavar="DIR",
                        help="make (or reuse) the backfill data in DIR and keep it; default: a temporary folder")
    parser.add_argument("--size-mb", type=int, metavar="MB", help="size of the backfill data (default 1000, quick 60)")
    parser.add_argument("--idle-seconds", type=float, metavar="S", help="idle window (default 60, quick 10)")
    options = parser.parse_args()
    settings = QUICK if options.quick else FULL
    if options.size_mb is not None:
        if options.size_mb < 20:
            parser.error("--size-mb: at least 20")
        settings = Settings(options.size_mb, settings.sessions, settings.huge_line_mb, settings.idle_seconds,
                            settings.latency_turns)
    if options.idle_seconds is not None:
        if options.idle_seconds <= 0:
            parser.error("--idle-seconds: more than 0")
        settings = Settings(settings.size_mb, settings.sessions, settings.huge_line_mb, options.idle_seconds,
                            settings.latency_turns)

    with tempfile.TemporaryDirectory(prefix="tailer-bench-") as temp:
        work = Path(temp)
        data_root = options.data.resolve() if options.data else work / "data"
        receiver = Receiver()
        backfills = []
        try:
            for kind in DATA_KINDS:
                data_dir = data_root / kind
                data = prepare_backfill_data(data_dir, settings, kind)
                backfills.append((kind, data, measure_backfill(data_dir / "session-state", work, receiver)))
            idle = measure_idle_and_resume(work, receiver, settings.idle_seconds)
            watch = measure_watch_idle(work / "idle-state", work, settings.idle_seconds)
            measure_watch_record(work)
            latency = measure_latency(work, receiver, settings.latency_turns)
        finally:
            receiver.close()
        report(backfills, idle, watch, latency)
    return 0


if __name__ == "__main__":
    sys.exit(main())
