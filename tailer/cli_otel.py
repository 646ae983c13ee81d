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
is left behind.

Each span and metric goes out as an OTLP unit of its own (its resource and scope with it),
keyed for the outbox that keeps it until the collector has it (`span_unit`,
`metric_unit`); tailer/prompt_links.py links the CLI's root span of each prompt to our
turn.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import re
from pathlib import Path
from typing import NamedTuple

from .lines import LineReader, Position
from .log_limit import WarningLimiter
from .otlp import Span

# Metadata a span or metric point of the CLI may carry: names, ids, counts, durations.
ATTRIBUTES = frozenset({
    "gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model",
    "gen_ai.response.model", "gen_ai.response.id", "gen_ai.response.finish_reasons",
    "gen_ai.request.stream", "gen_ai.conversation.id", "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens", "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_write.input_tokens", "gen_ai.usage.reasoning.output_tokens",
    "gen_ai.token.type", "gen_ai.tool.name", "gen_ai.tool.call.id", "gen_ai.tool.type",
    "gen_ai.agent.name", "github.copilot.cost", "github.copilot.nano_aiu",
    "github.copilot.initiator", "github.copilot.interaction_id", "github.copilot.turn_id",
    "github.copilot.turn_count", "github.copilot.agent.type",
    "github.copilot.server_duration", "process.exit.code", "success", "error.type",
    "gen_ai.token.modality", "gen_ai.request.reasoning.level",
    "gen_ai.response.time_to_first_chunk", "outcome",
})
RESOURCE_ATTRIBUTES = frozenset({"service.name", "service.version"})
# The value of `hydrafusion.link` on the link from the CLI's root span to our turn.
LINK_TO_TURN = "hydrafusion_turn"
_MAX_TEXT = 200
_UNIT = re.compile(r"\{[a-z_.]{1,20}\}|[A-Za-z]{1,5}|1|%")


class ExportFollower:
    """The new records of a CLI export file, or of every file in an export folder.

    Each file is read by a lines.LineReader, as session logs are: only complete lines, from
    a position that a checkpoint keeps (`state()`, `saved`), and a file that was truncated
    or rewritten is read again from its start. Without saved positions, files found at the
    first poll are read from their end unless `from_start`; files that appear later are
    new and read from their start.
    """

    def __init__(self, path: Path, *, from_start: bool, saved: dict | None = None):
        self.path = path
        self._readers = {name: LineReader(Path(name), Position.from_data(position))
                         for name, position in (saved or {}).items()}
        self._skip_existing = saved is None and not from_start
        self._warnings = WarningLimiter()

    def files(self) -> list[Path]:
        try:
            if self.path.is_dir():
                return sorted(p for p in self.path.iterdir() if p.is_file())
        except OSError:
            return []
        return [self.path] if self.path.is_file() else []

    def poll(self, budget: int) -> list[tuple[str, dict]]:
        """Up to `budget` records written since the last poll, each with the digest of its
        line (a key that names it in the outbox); damaged lines are passed over."""
        records: list[tuple[str, dict]] = []
        for path in self.files():
            reader = self._readers.get(str(path))
            if reader is None:
                reader = self._readers[str(path)] = LineReader(path)
                if self._skip_existing:
                    with contextlib.suppress(OSError):
                        reader.skip_to_end()
            try:
                for line in reader.read():
                    record = None if line.oversized else _record(line.data)
                    if record is None:
                        self._warnings.warn(str(path), "CLI telemetry %s: line %d is not a "
                                            "span or metric; skipped", path.name, line.number)
                        continue
                    records.append((hashlib.sha256(line.data).hexdigest()[:32], record))
                    if len(records) >= budget:
                        return records
            except OSError as error:
                self._warnings.warn(str(path), "CLI telemetry %s: cannot read it: %s",
                                    path.name, error.strerror)
        self._skip_existing = False
        return records

    def state(self) -> dict[str, list]:
        """Each file's position, as a checkpoint keeps it."""
        return {name: reader.position.to_data() for name, reader in self._readers.items()}


def _record(line: bytes) -> dict | None:
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return record if isinstance(record, dict) and record.get("type") in ("span", "metric") \
        else None


class Root(NamedTuple):
    """The root span of one prompt's trace, ours or the CLI's: what a link points at and
    what pairs the two (tailer/prompt_links.py)."""

    session_id: str
    trace_id: str
    span_id: str
    start_ns: int
    end_ns: int


def prompt_root(record: dict) -> Root | None:
    """The CLI's root span of a prompt (`invoke_agent`, no parent), as a Root."""
    attributes = record.get("attributes")
    if record.get("type") != "span" or _is_hex(record.get("parentSpanId"), 16) \
            or not isinstance(attributes, dict) \
            or attributes.get("gen_ai.operation.name") != "invoke_agent" \
            or not isinstance(attributes.get("gen_ai.conversation.id"), str) \
            or not (_is_hex(record.get("traceId"), 32) and _is_hex(record.get("spanId"), 16)):
        return None
    start = int(_time(record.get("startTime")))
    return Root(attributes["gen_ai.conversation.id"], record["traceId"], record["spanId"],
                start, max(start, int(_time(record.get("endTime")))))


def span_unit(record: dict, link: Root | None = None) -> Span | None:
    """A span record as one OTLP/JSON ResourceSpans entry (with its own resource and scope),
    keyed by its trace and span ids; None when its ids are not valid. `link`: a link to our
    turn's root span, put on the CLI's root span of the same prompt."""
    if record.get("type") != "span" or not (_is_hex(record.get("traceId"), 32)
                                            and _is_hex(record.get("spanId"), 16)):
        return None
    span = _span(record)
    if link is not None:
        span["links"] = [{"traceId": link.trace_id, "spanId": link.span_id,
                          "attributes": [{"key": "hydrafusion.link",
                                          "value": {"stringValue": LINK_TO_TURN}}]}]
    entry = {"resource": _resource(record),
             "scopeSpans": [{"scope": _scope(record), "spans": [span]}]}
    return Span(record["traceId"] + record["spanId"], json.dumps(entry, separators=(",", ":")))


def metric_unit(key: str, record: dict) -> Span | None:
    """A metric record as one OTLP/JSON ResourceMetrics entry under `key`; None when it
    holds no usable point."""
    if record.get("type") != "metric" or not isinstance(record.get("name"), str):
        return None
    metric = _metric(record)
    if metric is None:
        return None
    entry = {"resource": _resource(record),
             "scopeMetrics": [{"scope": _scope(record), "metrics": [metric]}]}
    return Span(key, json.dumps(entry, separators=(",", ":")))


def encode_spans(units: list[Span]) -> bytes:
    """A gzipped ExportTraceServiceRequest of span units (otlp.OtlpExporter's `encode`)."""
    return _encode("resourceSpans", units)


def encode_metrics(units: list[Span]) -> bytes:
    """A gzipped ExportMetricsServiceRequest of metric units."""
    return _encode("resourceMetrics", units)


def _encode(key: str, units: list[Span]) -> bytes:
    text = f'{{"{key}":[{",".join(unit.json for unit in units)}]}}'
    return gzip.compress(text.encode("utf-8", "replace"), compresslevel=1)


def _resource(record: dict) -> dict:
    resource = record.get("resource") if isinstance(record.get("resource"), dict) else {}
    return {"attributes": _attributes(resource.get("attributes"), RESOURCE_ATTRIBUTES)}


def _scope(record: dict) -> dict:
    scope = record.get("instrumentationScope")
    scope = scope if isinstance(scope, dict) else {}
    return {k: scope[k][:_MAX_TEXT] for k in ("name", "version") if isinstance(scope.get(k), str)}


def _span(record: dict) -> dict:
    span = {
        "traceId": record["traceId"], "spanId": record["spanId"],
        "name": _text(record.get("name")) or "unknown",
        # The JavaScript SDK counts kinds from INTERNAL = 0; OTLP from INTERNAL = 1.
        "kind": record["kind"] + 1 if record.get("kind") in (0, 1, 2, 3, 4) else 0,
        "startTimeUnixNano": _time(record.get("startTime")),
        "endTimeUnixNano": _time(record.get("endTime")),
        "attributes": _attributes(record.get("attributes"), ATTRIBUTES),
    }
    if _is_hex(record.get("parentSpanId"), 16):
        span["parentSpanId"] = record["parentSpanId"]
    status = record.get("status")
    if isinstance(status, dict) and status.get("code") in (1, 2):
        span["status"] = {"code": status["code"]}  # the message is error text: dropped
    events = record.get("events")
    if isinstance(events, list):
        span["events"] = [
            {"name": _text(event.get("name")) or "event", "timeUnixNano": _time(event.get("time")),
             "attributes": _attributes(event.get("attributes"), ATTRIBUTES)}
            for event in events if isinstance(event, dict)
        ]
    return span


def _metric(record: dict) -> dict | None:
    """A histogram where points hold buckets; otherwise a cumulative sum for counts
    (names ending in `count` or `calls`) and a gauge for the rest. The export does not say
    which instrument made a metric, so its values decide."""
    name = record["name"]
    points = [p for p in record.get("dataPoints") or [] if isinstance(p, dict)]
    if not points:
        return None
    # The description is text: left behind. The unit is kept when it looks like one.
    unit = record.get("unit")
    metric = {"name": name[:_MAX_TEXT],
              "unit": unit if isinstance(unit, str) and _UNIT.fullmatch(unit) else ""}
    if all(isinstance(p.get("value"), dict) for p in points):
        metric["histogram"] = {"aggregationTemporality": 2,
                               "dataPoints": [_histogram_point(p) for p in points]}
        return metric
    numbers = [p for p in points if _number(p.get("value")) is not None]
    if not numbers:
        return None
    converted = [_number_point(p) for p in numbers]
    if name.endswith(("count", "calls")):
        metric["sum"] = {"aggregationTemporality": 2, "isMonotonic": True,
                         "dataPoints": converted}
    else:
        metric["gauge"] = {"dataPoints": converted}
    return metric


def _point(point: dict) -> dict:
    return {"attributes": _attributes(point.get("attributes"), ATTRIBUTES),
            "startTimeUnixNano": _time(point.get("startTime")),
            "timeUnixNano": _time(point.get("endTime"))}


def _number_point(point: dict) -> dict:
    value = point["value"]
    if isinstance(value, int) and not isinstance(value, bool):
        return {**_point(point), "asInt": str(value)}
    return {**_point(point), "asDouble": float(value)}


def _histogram_point(point: dict) -> dict:
    value = point["value"]
    buckets = value.get("buckets") if isinstance(value.get("buckets"), dict) else {}
    bounds = [b for b in buckets.get("boundaries") or [] if _number(b) is not None]
    counts = [int(c) for c in buckets.get("counts") or [] if _number(c) is not None]
    out = {**_point(point), "count": str(int(_number(value.get("count")) or sum(counts)))}
    if len(counts) == len(bounds) + 1:
        out["bucketCounts"] = [str(c) for c in counts]
        out["explicitBounds"] = bounds
    for key in ("sum", "min", "max"):
        if _number(value.get(key)) is not None:
            out[key] = float(value[key])
    return out


def _attributes(attributes: object, allowed: frozenset[str]) -> list[dict]:
    if not isinstance(attributes, dict):
        return []
    kept = []
    for key, value in attributes.items():
        if key in allowed:
            converted = _value(value)
            if converted is not None:
                kept.append({"key": key, "value": converted})
    return kept


def _value(value: object) -> dict | None:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value} if value == value and abs(value) != float("inf") else None
    if isinstance(value, str):
        return {"stringValue": value} if len(value) <= _MAX_TEXT else None
    if isinstance(value, list):
        values = [converted for item in value if (converted := _value(item)) is not None]
        return {"arrayValue": {"values": values}}
    return None


def _time(value: object) -> str:
    """`[seconds, nanoseconds]`, as the export writes times, to OTLP's decimal string."""
    if isinstance(value, list) and len(value) == 2 and all(
            isinstance(part, int) and not isinstance(part, bool) and part >= 0 for part in value):
        return str(value[0] * 1_000_000_000 + value[1])
    return "0"


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _text(value: object) -> str | None:
    return value[:_MAX_TEXT] if isinstance(value, str) and value else None


def _is_hex(value: object, size: int) -> bool:
    return isinstance(value, str) and len(value) == size and value != "0" * size and all(
        c in "0123456789abcdef" for c in value)
