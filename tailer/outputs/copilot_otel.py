"""Follow the Copilot CLI's own OpenTelemetry file export and turn it into OTLP/JSON.

The CLI refuses to export OTLP to plain-http endpoints, so its only local path is its file
exporter (`COPILOT_OTEL_EXPORTER_TYPE=file`, `COPILOT_OTEL_FILE_EXPORTER_PATH`): one JSON
object per line, spans and metrics in a shape of its own (times as `[seconds, nanos]`,
the JavaScript SDK's span kinds, attributes as a plain object), not OTLP. This module reads
those lines as they are appended and builds OTLP/JSON requests a collector takes.

Users may have enabled content capture (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT),
which puts prompts, answers and tool arguments into span attributes. Only the attributes
named below are kept, on spans, span events, metric points and resources; span status
messages (error text) and metric descriptions are dropped. Everything else, known or new,
is left behind. The names and the string values kept are machine codes, passed on only
when they look like one (tailer/codes.py), `other` otherwise.

Anyone who can write to the export can write anything there, so each line is converted
once, as it is read (`convert`): a value OTLP cannot carry (not finite, out of range, of
the wrong type, a list too long) is left out or cut and counted by reason; a line that
cannot be a span or a metric is skipped, counted and warned about. What comes out is
plain, checked data that always encodes as valid JSON, so nothing later can fail on it.

Each span and metric goes out as an OTLP unit of its own (its resource and scope with it),
keyed for the outbox that keeps it until the collector has it (`span_unit`,
`metric_unit`); tailer/outputs/prompt_links.py links the CLI's root span of each prompt to our
turn.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
import re
import stat
import time
from collections import Counter
from pathlib import Path
from typing import Callable, NamedTuple

from ..codes import ENUM, IDENTIFIER, MODEL, NAME, TOOL, VERSION, WORDS, CodeKind
from ..copilot.lines import LineReader, Position
from ..log_limit import WarningLimiter
from .otlp import Unit
from ..printable import printable


# Metadata a span or metric point of the CLI may carry: names, ids, counts, durations;
# each with the kind of code its string values must be (None: numbers and booleans only).
ATTRIBUTES: dict[str, CodeKind | None] = {
    "gen_ai.operation.name": ENUM, "gen_ai.provider.name": ENUM,
    "gen_ai.request.model": MODEL, "gen_ai.response.model": MODEL,
    "gen_ai.response.id": IDENTIFIER, "gen_ai.response.finish_reasons": ENUM,
    "gen_ai.request.stream": None, "gen_ai.conversation.id": IDENTIFIER,
    "gen_ai.usage.input_tokens": None, "gen_ai.usage.output_tokens": None,
    "gen_ai.usage.cache_read.input_tokens": None, "gen_ai.usage.cache_write.input_tokens": None,
    "gen_ai.usage.reasoning.output_tokens": None, "gen_ai.token.type": ENUM,
    "gen_ai.tool.name": TOOL, "gen_ai.tool.call.id": IDENTIFIER, "gen_ai.tool.type": ENUM,
    "gen_ai.agent.name": WORDS, "github.copilot.cost": None, "github.copilot.nano_aiu": None,
    "github.copilot.initiator": ENUM, "github.copilot.interaction_id": IDENTIFIER,
    "github.copilot.turn_id": IDENTIFIER, "github.copilot.turn_count": None,
    "github.copilot.agent.type": ENUM, "github.copilot.server_duration": None,
    "process.exit.code": None, "success": None, "error.type": TOOL,
    "gen_ai.token.modality": ENUM, "gen_ai.request.reasoning.level": ENUM,
    "gen_ai.response.time_to_first_chunk": None, "outcome": ENUM,
}
RESOURCE_ATTRIBUTES: dict[str, CodeKind | None] = {"service.name": NAME,
                                                   "service.version": VERSION}
# The value of `hydrafusion.link` on the link from the CLI's root span to our turn.
LINK_TO_TURN = "hydrafusion_turn"
_UNIT = re.compile(r"\{[a-z_.]{1,20}\}|[A-Za-z]{1,5}|1|%")

# Parsing a line costs memory in proportion to its values, not its bytes: a 4 MB prompt
# captured in one string costs 4 MB, a list of a million short strings ten times its size.
# So a long line is parsed only when what lies outside its strings is this small (a real
# span's metadata is a few KB, whatever content it captured).
MAX_STRUCTURE_BYTES = 256 << 10
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
# What one record may hold; longer lists are cut (counted). A real span has a few events,
# a metric a few points of at most 16 bucket bounds, an attribute list one or two values.
MAX_EVENTS = 128
MAX_POINTS = 256
MAX_BOUNDS = 256
MAX_ARRAY = 32
INT64_MAX = 2**63 - 1

# How the follower watches an export folder that may hold thousands of old files: a file
# written in the last HOT_S is checked (one stat) at every poll; the others in turn, each
# about every COLD_CHECK_S. The folder is listed again when it changed, and every RELIST_S.
HOT_S = 600.0
COLD_CHECK_S = 30.0
RELIST_S = 60.0

# Why a line is skipped, and how a value was changed: the counters' reasons
# (metrics.Metrics.cli_skipped, .cli_changed), and what the warning says of each change.
SKIP_REASONS = ("oversized", "not_json", "not_a_record", "bad_ids", "bad_name", "no_points",
                "internal_error")
_CHANGES = {
    "not_a_code": "were not codes and are sent as `other`",
    "not_finite": "were not finite numbers and are left out",
    "out_of_range": "were out of range and are left out",
    "wrong_type": "had the wrong type and are left out",
    "cut": "were lists too long and are cut",
}
CHANGE_REASONS = tuple(_CHANGES)


class Unusable(Exception):
    """A line that cannot be a span or a metric; `reason` is its counter's label."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Root(NamedTuple):
    """The root span of one prompt's trace, ours or the CLI's: what a link points at and
    what pairs the two (tailer/outputs/prompt_links.py)."""

    session_id: str
    trace_id: str
    span_id: str
    start_ns: int
    end_ns: int


class Record(NamedTuple):
    """One span or metric of the export, converted: its outbox key (a span's trace and span
    ids, a metric line's digest), its OTLP ResourceSpans or ResourceMetrics entry as data
    and as JSON, and for the CLI's root span of a prompt, that root."""

    key: str
    is_span: bool
    entry: dict
    json: str
    root: Root | None = None


def convert(line: bytes, changes: Counter[str]) -> Record:
    """A line of the export as a Record, counting into `changes` each value left out, cut
    or sent as `other`, by reason; Unusable if it is not a span or metric we can send."""
    record = _parse(line)
    if record.get("type") == "span":
        return _span_record(record, changes)
    if record.get("type") == "metric":
        return _metric_record(hashlib.sha256(line).hexdigest()[:32], record, changes)
    raise Unusable("not_a_record")


def span_unit(record: Record, link: Root | None = None) -> Unit:
    """A span record as one OTLP/JSON unit keyed by its ids. `link`: a link to our turn's
    root span, put on the CLI's root span of the same prompt."""
    if link is None:
        return Unit(record.key, record.json)
    (scope,) = record.entry["scopeSpans"]
    (span,) = scope["spans"]
    span = {**span, "links": [{"traceId": link.trace_id, "spanId": link.span_id,
                               "attributes": [{"key": "hydrafusion.link",
                                               "value": {"stringValue": LINK_TO_TURN}}]}]}
    entry = {**record.entry, "scopeSpans": [{**scope, "spans": [span]}]}
    return Unit(record.key, _dumps(entry))


def metric_unit(record: Record) -> Unit:
    return Unit(record.key, record.json)


def encode_spans(units: list[Unit]) -> bytes:
    """A gzipped ExportTraceServiceRequest of span units (otlp.OtlpExporter's `encode`)."""
    return _encode("resourceSpans", units)


def encode_metrics(units: list[Unit]) -> bytes:
    """A gzipped ExportMetricsServiceRequest of metric units."""
    return _encode("resourceMetrics", units)


def _encode(key: str, units: list[Unit]) -> bytes:
    text = f'{{"{key}":[{",".join(unit.json for unit in units)}]}}'
    return gzip.compress(text.encode("utf-8", "replace"), compresslevel=1)


def _dumps(entry: dict) -> str:
    # allow_nan=False: a non-finite number that slipped through fails here, at conversion,
    # costing its record; never a literal NaN in a request.
    return json.dumps(entry, separators=(",", ":"), allow_nan=False)


def _parse(line: bytes) -> dict:
    if len(line) > MAX_STRUCTURE_BYTES and not _small_structure(line):
        raise Unusable("oversized")
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):  # also integers past Python's 4,300 digits
        raise Unusable("not_json") from None
    if not isinstance(record, dict):
        raise Unusable("not_a_record")
    return record


def _small_structure(line: bytes) -> bool:
    """Whether what lies outside the line's strings (each string counting as its two
    quotes) is at most MAX_STRUCTURE_BYTES; looked at one string at a time, and only until
    it is known to be more."""
    outside, at = 0, 0
    for string in _STRING.finditer(line):
        outside += string.start() - at + 2
        at = string.end()
        if outside > MAX_STRUCTURE_BYTES:
            return False
    return outside + len(line) - at <= MAX_STRUCTURE_BYTES


def _span_record(record: dict, changes: Counter[str]) -> Record:
    trace_id, span_id = record.get("traceId"), record.get("spanId")
    if not (_is_hex(trace_id, 32) and _is_hex(span_id, 16)):
        raise Unusable("bad_ids")
    attributes = _attributes(record.get("attributes"), ATTRIBUTES, changes)
    start = _time(record.get("startTime"), changes)
    end = _time(record.get("endTime"), changes)
    kind = record.get("kind")
    span = {
        "traceId": trace_id, "spanId": span_id,
        "name": _code(record.get("name"), WORDS, changes) or "unknown",
        # The JavaScript SDK counts kinds from INTERNAL = 0; OTLP from INTERNAL = 1.
        "kind": kind + 1 if _whole(kind) and 0 <= kind <= 4 else _absent(kind, changes, 0),
        "startTimeUnixNano": str(start), "endTimeUnixNano": str(end),
        "attributes": _otlp_attributes(attributes),
    }
    parent = record.get("parentSpanId")
    if _is_hex(parent, 16):
        span["parentSpanId"] = parent
    elif parent:
        changes["wrong_type"] += 1
    status = record.get("status")
    code = status.get("code") if isinstance(status, dict) else _absent(status, changes, None)
    if _whole(code) and code in (1, 2):
        span["status"] = {"code": code}  # the message is error text: dropped
    elif not (code is None or _whole(code) and code == 0):
        changes["wrong_type"] += 1
    events = _list(record.get("events"), MAX_EVENTS, changes)
    if events:
        span["events"] = [_event(event, changes) for event in events
                          if isinstance(event, dict) or _absent(event, changes, False)]
    root = None
    session_id = attributes.get("gen_ai.conversation.id")
    if "parentSpanId" not in span and attributes.get("gen_ai.operation.name") == "invoke_agent" \
            and isinstance(session_id, str) and session_id != "other":
        root = Root(session_id, trace_id, span_id, start, max(start, end))
    entry = {"resource": _resource(record, changes),
             "scopeSpans": [{"scope": _scope(record, changes), "spans": [span]}]}
    return Record(trace_id + span_id, True, entry, _dumps(entry), root)


def _event(event: dict, changes: Counter[str]) -> dict:
    return {"name": _code(event.get("name"), NAME, changes) or "event",
            "timeUnixNano": str(_time(event.get("time"), changes)),
            "attributes": _otlp_attributes(_attributes(event.get("attributes"), ATTRIBUTES,
                                                       changes))}


def _metric_record(key: str, record: dict, changes: Counter[str]) -> Record:
    """A histogram where points hold buckets; otherwise a cumulative sum for counts
    (names ending in `count` or `calls`) and a gauge for the rest. The export does not say
    which instrument made a metric, so its values decide.

    A metric whose name is not a code is skipped rather than sent as `other`: its name is
    what it is, and one `other` made of unlike metrics would be neither."""
    name = record.get("name")
    if not (isinstance(name, str) and NAME.is_code(name)):
        raise Unusable("bad_name")
    points = [point for point in _list(record.get("dataPoints"), MAX_POINTS, changes)
              if isinstance(point, dict) or _absent(point, changes, False)]
    # The description is text: left behind. The unit is kept when it looks like one.
    unit = record.get("unit")
    metric = {"name": name, "unit": unit if isinstance(unit, str) and _UNIT.fullmatch(unit)
              else _absent(unit, changes, "", "not_a_code")}
    if points and all(isinstance(point.get("value"), dict) for point in points):
        metric["histogram"] = {"aggregationTemporality": 2, "dataPoints": [
            _histogram_point(point, changes) for point in points]}
    else:
        converted = [done for point in points
                     if (done := _number_point(point, changes)) is not None]
        if not converted:
            raise Unusable("no_points")
        if name.endswith(("count", "calls")):
            metric["sum"] = {"aggregationTemporality": 2, "isMonotonic": True,
                             "dataPoints": converted}
        else:
            metric["gauge"] = {"dataPoints": converted}
    entry = {"resource": _resource(record, changes),
             "scopeMetrics": [{"scope": _scope(record, changes), "metrics": [metric]}]}
    return Record(key, False, entry, _dumps(entry))


def _point(point: dict, changes: Counter[str]) -> dict:
    return {"attributes": _otlp_attributes(_attributes(point.get("attributes"), ATTRIBUTES,
                                                       changes)),
            "startTimeUnixNano": str(_time(point.get("startTime"), changes)),
            "timeUnixNano": str(_time(point.get("endTime"), changes))}


def _number_point(point: dict, changes: Counter[str]) -> dict | None:
    value = _number(point.get("value"), changes)
    if value is None:
        return None
    if isinstance(value, int):
        return {**_point(point, changes), "asInt": str(value)}
    return {**_point(point, changes), "asDouble": value}


def _histogram_point(point: dict, changes: Counter[str]) -> dict:
    """A histogram point. Its buckets are kept only whole: bounds finite and increasing,
    one count more than bounds, every count a whole number; else the point goes without."""
    value = point["value"]
    out = _point(point, changes)
    buckets = value.get("buckets")
    counts = None
    if isinstance(buckets, dict):
        bounds = _list(buckets.get("boundaries"), MAX_BOUNDS, changes)
        counts = _list(buckets.get("counts"), MAX_BOUNDS + 1, changes)
        bounds = [number for bound in bounds if (number := _finite(bound, changes)) is not None]
        counts = [number for count in counts if (number := _count(count, changes)) is not None]
        if len(counts) == len(bounds) + 1 and sum(counts) <= INT64_MAX \
                and all(a < b for a, b in zip(bounds, bounds[1:])):
            out["bucketCounts"] = [str(count) for count in counts]
            out["explicitBounds"] = bounds
        else:
            counts = None
    elif buckets is not None:
        changes["wrong_type"] += 1
    count = _count(value.get("count"), changes)
    out["count"] = str(count if count is not None else sum(counts or ()))
    for key in ("sum", "min", "max"):
        number = _finite(value.get(key), changes)
        if number is not None:
            out[key] = number
    return out


def _resource(record: dict, changes: Counter[str]) -> dict:
    resource = record.get("resource")
    resource = resource if isinstance(resource, dict) else _absent(resource, changes, {})
    return {"attributes": _otlp_attributes(_attributes(resource.get("attributes"),
                                                       RESOURCE_ATTRIBUTES, changes))}


def _scope(record: dict, changes: Counter[str]) -> dict:
    scope = record.get("instrumentationScope")
    scope = scope if isinstance(scope, dict) else _absent(scope, changes, {})
    kept = {"name": _code(scope.get("name"), NAME, changes),
            "version": _code(scope.get("version"), VERSION, changes)}
    return {key: value for key, value in kept.items() if value is not None}


def _attributes(attributes: object, allowed: dict[str, CodeKind | None],
                changes: Counter[str]) -> dict[str, object]:
    """The allowed attributes whose values are usable, as plain values. Only the allowed
    names are looked up, so an object of a million keys costs as little as one of three."""
    if not isinstance(attributes, dict):
        return _absent(attributes, changes, {})
    kept = {}
    for key, kind in allowed.items():
        value = _attribute(attributes.get(key), kind, changes, in_list=False)
        if value is not None:
            kept[key] = value
    return kept


def _attribute(value: object, kind: CodeKind | None, changes: Counter[str], *,
               in_list: bool) -> object:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return _number(value, changes)
    if isinstance(value, str) and kind is not None:
        return _code(value, kind, changes)
    if isinstance(value, list) and not in_list:
        items = [_attribute(item, kind, changes, in_list=True)
                 for item in _list(value, MAX_ARRAY, changes)]
        return [item for item in items if item is not None]
    changes["wrong_type"] += 1  # text where a number belongs, a list in a list, an object
    return None


def _otlp_attributes(attributes: dict[str, object]) -> list[dict]:
    return [{"key": key, "value": _otlp_value(value)} for key, value in attributes.items()]


def _otlp_value(value: object) -> dict:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [_otlp_value(item) for item in value]}}
    return {"stringValue": value}


def _code(value: object, kind: CodeKind, changes: Counter[str]) -> str | None:
    """A string of `kind` as itself, another string as `other` (counted), None when absent."""
    if not isinstance(value, str):
        return _absent(value, changes, None)
    code = kind.accept(value)
    if code is not None and not kind.is_code(value):
        changes["not_a_code"] += 1
    return code


def _number(value: object, changes: Counter[str]) -> int | float | None:
    """A whole number within int64, or a finite float (OTLP's intValue, doubleValue)."""
    if _whole(value):
        if -INT64_MAX - 1 <= value <= INT64_MAX:
            return value
        changes["out_of_range"] += 1
        return None
    return _finite(value, changes)


def _finite(value: object, changes: Counter[str]) -> float | None:
    if _whole(value):
        if abs(value) <= 2**1000:  # well inside what a float holds
            return float(value)
        changes["out_of_range"] += 1
        return None
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        changes["not_finite"] += 1
        return None
    return _absent(value, changes, None)


def _count(value: object, changes: Counter[str]) -> int | None:
    if _whole(value):
        if 0 <= value <= INT64_MAX:
            return value
        changes["out_of_range"] += 1
        return None
    if isinstance(value, float):
        changes["not_finite" if not math.isfinite(value) else "wrong_type"] += 1
        return None
    return _absent(value, changes, None)


def _time(value: object, changes: Counter[str]) -> int:
    """`[seconds, nanoseconds]`, as the export writes times, in nanoseconds; 0 when absent
    or unusable (OTLP's unset time)."""
    if value is None:
        return 0
    if isinstance(value, list) and len(value) == 2 and all(
            _whole(part) and part >= 0 for part in value):
        total = value[0] * 1_000_000_000 + value[1]
        if total <= INT64_MAX:
            return total
        changes["out_of_range"] += 1
        return 0
    changes["wrong_type"] += 1
    return 0


def _list(value: object, limit: int, changes: Counter[str]) -> list:
    if not isinstance(value, list):
        return _absent(value, changes, [])
    if len(value) > limit:
        changes["cut"] += 1
        return value[:limit]
    return value


def _absent(value: object, changes: Counter[str], default, reason: str = "wrong_type"):
    """`default`, counting `value` under `reason` unless it was absent (missing or null)."""
    if value is not None:
        changes[reason] += 1
    return default


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_hex(value: object, size: int) -> bool:
    return isinstance(value, str) and len(value) == size and value != "0" * size and all(
        c in "0123456789abcdef" for c in value)


class _Followed:
    """One export file: its reader, and what a stat said when it was last read to its end
    (None: read it at the next check)."""

    __slots__ = ("reader", "seen", "mtime")

    def __init__(self, reader: LineReader):
        self.reader = reader
        self.seen: tuple | None = None
        self.mtime = math.inf  # not stat'ed yet: hot


class ExportFollower:
    """The new records of a CLI export file, or of every file in an export folder.

    Each file is read by a lines.LineReader, as session logs are: only complete lines, from
    a position that a checkpoint keeps (`state()`, `saved`), and a file that was truncated
    or rewritten is read again from its start. Without saved positions, files found at the
    first poll are read from their end unless `from_start`; files that appear later are
    new and read from their start. A file is opened only when a stat shows it changed, and
    only recent files are stat'ed at every poll (HOT_S), so a folder of thousands of old
    files costs little.

    Each line is converted and handed on under one guard: a line that is not usable, or
    one our own code fails on, costs that line only, counted in `metrics` and warned about.
    Longer than most classes: the files' positions, their hot/cold schedule and the one guard
    around each line are one state that the checkpoint saves whole, so they stay together.
    """

    def __init__(self, path: Path, metrics, *, from_start: bool,
                 saved: dict | None = None, clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time):
        self.path = path
        self._metrics = metrics
        self._files = {name: _Followed(LineReader(Path(name), Position.from_data(position)))
                       for name, position in (saved or {}).items()}
        self._skip_existing = saved is None and not from_start
        self._warnings = WarningLimiter()
        self._clock = clock
        self._wall_clock = wall_clock
        self._listing: list[Path] = []
        self._listed: tuple[float, int] | None = None  # when, and the folder's mtime then
        self._cold_next = 0
        self._polled_at: float | None = None
        self._unusable_path = False

    def poll(self, budget: int, take: Callable[[Record], None]) -> int:
        """Read up to `budget` lines written since the last poll, handing their records to
        `take`; the number of lines read (skipped ones too: a flood of them is read a
        budget at a time, as good ones are)."""
        read = 0
        for path in self._due():
            followed = self._files.get(str(path))
            if followed is None:
                followed = self._files[str(path)] = _Followed(LineReader(path))
                if self._skip_existing:
                    try:
                        followed.reader.skip_to_end()
                    except OSError:
                        pass  # read at the next poll, from where it stands
            try:
                status = os.stat(path)
            except OSError:
                continue  # gone since the listing
            signature = (status.st_size, status.st_mtime_ns, status.st_ino)
            followed.mtime = status.st_mtime
            if signature == followed.seen:
                continue
            followed.seen = None
            read, finished = self._read(path, followed.reader, budget, read, take)
            if finished:
                followed.seen = signature
            if read >= budget:
                return read
        self._skip_existing = False
        return read

    def state(self) -> dict[str, list]:
        """Each file's position, as a checkpoint keeps it."""
        return {name: followed.reader.position.to_data()
                for name, followed in self._files.items()}

    def _read(self, path: Path, reader: LineReader, budget: int, read: int,
              take: Callable[[Record], None]) -> tuple[int, bool]:
        """Read one file on: the lines read so far, and whether it was read to its end."""
        name = printable(path.name)
        try:
            for line in reader.read():
                read += 1
                changes: Counter[str] = Counter()
                try:
                    if line.oversized:
                        raise Unusable("oversized")
                    take(convert(line.data, changes))
                except Unusable as skipped:
                    self._skipped(name, line.number, skipped.reason)
                except Exception as error:  # a bug must cost one record, not the process
                    self._skipped(name, line.number, "internal_error", type(error).__name__)
                else:
                    for reason, amount in changes.items():
                        self._metrics.count_cli_change(reason, amount)
                        self._warnings.warn((name, reason), "CLI telemetry %s: line %d: %d "
                                            "values %s", name, line.number, amount,
                                            _CHANGES[reason])
                if read >= budget:
                    return read, False
        except OSError as error:
            self._warnings.warn((name, "unreadable"), "CLI telemetry %s: cannot read it: %s",
                                name, error.strerror or type(error).__name__)
            return read, False
        return read, True

    def _skipped(self, name: str, number: int, reason: str, detail: str = "") -> None:
        self._metrics.count_cli_skip(reason)
        self._warnings.warn((name, reason), "CLI telemetry %s: line %d skipped: %s%s", name,
                            number, reason, f" ({detail})" if detail else "")

    def _due(self) -> list[Path]:
        """The files to check now: the hot ones, and the next share of the cold ones."""
        now = self._clock()
        paths = self._paths(now)
        wall = self._wall_clock()
        hot, cold = [], []
        for path in paths:
            followed = self._files.get(str(path))
            if followed is None or followed.seen is None or wall - followed.mtime < HOT_S:
                hot.append(path)
            else:
                cold.append(path)
        elapsed = COLD_CHECK_S if self._polled_at is None else now - self._polled_at
        self._polled_at = now
        share = min(len(cold), math.ceil(len(cold) * elapsed / COLD_CHECK_S))
        start = self._cold_next % len(cold) if cold else 0
        self._cold_next = start + share
        return hot + (cold[start:] + cold[:start])[:share]

    def _paths(self, now: float) -> list[Path]:
        """The export file, or the files of the export folder, listed again when the
        folder changed (its mtime moved, or is too recent to tell) or every RELIST_S."""
        try:
            status = os.stat(self.path)
        except FileNotFoundError:
            return []  # the CLI has not written it yet
        except OSError as error:
            self._warnings.warn("path", "CLI telemetry %s: cannot read it: %s",
                                printable(str(self.path)), error.strerror)
            return []
        if stat.S_ISREG(status.st_mode):
            self._unusable_path = False
            return [self.path]
        if not stat.S_ISDIR(status.st_mode):
            if not self._unusable_path:
                self._unusable_path = True
                self._warnings.warn("path", "CLI telemetry %s is neither a file nor a folder "
                                    "(a FIFO or a device?); it is not followed",
                                    printable(str(self.path)))
            return []
        self._unusable_path = False
        fresh = self._wall_clock() - status.st_mtime < 2.0
        if self._listed is None or fresh or self._listed[1] != status.st_mtime_ns \
                or now - self._listed[0] >= RELIST_S:
            try:
                with os.scandir(self.path) as entries:
                    self._listing = sorted(Path(entry.path) for entry in entries
                                           if entry.is_file())
            except OSError as error:
                self._warnings.warn("listing", "CLI telemetry %s: cannot list it: %s",
                                    printable(str(self.path)), error.strerror)
                return self._listing
            self._listed = (now, status.st_mtime_ns)
        return self._listing
