"""Follow the Copilot CLI's own OpenTelemetry file export and turn it into OTLP/JSON.

The CLI refuses to export OTLP to plain-http endpoints, so its only local path is its file
exporter (`COPILOT_OTEL_EXPORTER_TYPE=file`, `COPILOT_OTEL_FILE_EXPORTER_PATH`): one JSON
object per line, spans and metrics in a shape of its own (times as `[seconds, nanos]`,
the JavaScript SDK's span kinds, attributes as a plain object), not OTLP. This module reads
those lines as they are appended and builds OTLP/JSON requests a collector takes.

Users may have enabled content capture (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT),
which puts prompts, answers and tool arguments into span attributes. Only the attributes
named below are kept, on spans, span events, metric points and resources; span status
messages (error text) are dropped. Everything else, known or new, is left behind.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

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
})
RESOURCE_ATTRIBUTES = frozenset({"service.name", "service.version"})
_MAX_TEXT = 200


class ExportFollower:
    """The complete new lines of a CLI export file, or of every file in an export folder.

    Positions are kept per file; a file that shrank was replaced and is read again.
    """

    def __init__(self, path: Path):
        self.path = path
        self._offsets: dict[Path, int] = {}

    def files(self) -> list[Path]:
        if self.path.is_dir():
            return sorted(p for p in self.path.iterdir() if p.is_file())
        return [self.path] if self.path.is_file() else []

    def poll(self) -> list[dict]:
        """The records written since the last poll; damaged lines are passed over."""
        records = []
        for path in self.files():
            offset = self._offsets.get(path, 0)
            try:
                if os.stat(path).st_size < offset:
                    offset = 0
                with open(path, "rb") as export:
                    export.seek(offset)
                    data = export.read()
            except OSError:
                continue
            complete = data[: data.rfind(b"\n") + 1]
            self._offsets[path] = offset + len(complete)
            records += [r for r in map(_record, complete.split(b"\n")) if r is not None]
        return records


def _record(line: bytes) -> dict | None:
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return record if isinstance(record, dict) and record.get("type") in ("span", "metric") \
        else None


def traces_request(records: list[dict]) -> dict:
    """An OTLP/JSON ExportTraceServiceRequest for the span records."""
    groups: dict[str, dict] = {}
    for record in records:
        if record.get("type") == "span" and _is_hex(record.get("traceId"), 32) \
                and _is_hex(record.get("spanId"), 16):
            _scope(groups, record, "resourceSpans", "scopeSpans")["spans"].append(_span(record))
    return {"resourceSpans": list(groups.values())}


def metrics_request(records: list[dict]) -> dict:
    """An OTLP/JSON ExportMetricsServiceRequest for the metric records."""
    groups: dict[str, dict] = {}
    for record in records:
        if record.get("type") == "metric" and isinstance(record.get("name"), str):
            metric = _metric(record)
            if metric is not None:
                _scope(groups, record, "resourceMetrics", "scopeMetrics")["metrics"].append(metric)
    return {"resourceMetrics": list(groups.values())}


def _scope(groups: dict, record: dict, resource_key: str, scope_key: str) -> dict:
    """The scope entry of the record's resource and instrumentation scope, made if new."""
    resource = record.get("resource") if isinstance(record.get("resource"), dict) else {}
    scope = record.get("instrumentationScope")
    scope = scope if isinstance(scope, dict) else {}
    key = json.dumps([resource.get("attributes"), scope.get("name"), scope.get("version")],
                     sort_keys=True, default=str)
    if key not in groups:
        groups[key] = {"resource": {"attributes": _attributes(resource.get("attributes"),
                                                                RESOURCE_ATTRIBUTES)},
                       scope_key: []}
    entries = groups[key][scope_key]
    if not entries:
        named = {k: scope[k] for k in ("name", "version") if isinstance(scope.get(k), str)}
        entries.append({"scope": named, "spans" if scope_key == "scopeSpans" else "metrics": []})
    return entries[0]


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
    metric = {"name": name[:_MAX_TEXT], "unit": _text(record.get("unit")) or "",
              "description": _text(record.get("description")) or ""}
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
