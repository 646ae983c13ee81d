"""The spans of finished turns until the collector has them.

The exporter sends from its own thread; this outbox keeps every trace it was given until
the exporter says what became of it, so the checkpoint can hold what is still unsettled and
a restart sends it again. Traces are sent again under the same ids (they are derived from
the log), so a trace delivered just before a crash and sent again after it is the same trace.

The exporter reports from its thread; `settle()` takes those reports on the main thread,
where the checkpoint and the metrics are updated, so both stay one consistent cut.

What an outbox sends is a list of units (`otlp.Unit`: a key and the OTLP/JSON text of one
item) under one key. For our traces a unit is a span and the key its trace id; the outboxes
of the CLI's own telemetry (tailer/daemon/copilot_telemetry.py) send its spans and its metric points
as units, so their `pending_units` counts those.
"""

from __future__ import annotations

import json
import logging
import queue
from collections import OrderedDict
from typing import Callable

from .. import saved_state
from .otlp import OtlpExporter, Unit

log = logging.getLogger("tailer")

# Past this many spans waiting (about two thousand turns), the exporter drops the oldest
# traces and reports them: the bound keeps the checkpoint, which holds them, a few MB.
MAX_PENDING_SPANS = 10_000
# Reading waits while more units than this wait for the collector (service.Backpressure,
# cli_telemetry.CliTelemetry.read): memory stays bounded however much there is to read, and
# a slow or absent collector makes the turns wait in the logs rather than be dropped.
BACKPRESSURE_SPANS = 2_000


class Outbox:
    """One exporter's traces, from submit until the exporter settles them."""

    def __init__(
        self,
        connect: Callable[[Callable[[str, list[Unit]], None]], OtlpExporter] | None,
        pending: list[list[Unit]] = (),
    ):
        """`connect` builds the exporter around the outbox's report callback (None: no
        export). `pending` are the traces a checkpoint held (`to_state`, read back by
        `traces_from_state`); they are sent first."""
        self._reports: queue.SimpleQueue[tuple[str, list[Unit]]] = queue.SimpleQueue()
        self._exporter = connect(self._report) if connect else None
        self._pending: OrderedDict[str, list[Unit]] = OrderedDict()
        self.pending_units = 0
        if self._exporter is None and pending:
            log.warning("%d traces kept for the collector are dropped: no OTLP endpoint",
                        len(pending))
        for trace in pending:
            self.submit(trace)

    @property
    def exporting(self) -> bool:
        return self._exporter is not None

    def _report(self, outcome: str, spans: list[Unit]) -> None:
        """The exporter's on_result, called from its thread: handled later, in settle()."""
        self._reports.put((outcome, spans))

    def submit(self, spans: list[Unit]) -> None:
        """Send one trace (the spans of one turn)."""
        if self._exporter is None or not spans:
            return
        self._forget(spans[0].key)
        self._pending[spans[0].key] = spans
        self.pending_units += len(spans)
        self._exporter.submit(spans)

    def settle(self, wait: float = 0.0) -> list[tuple[str, int]]:
        """Apply the exporter's reports; returns (outcome, span count) for the metrics.

        With no report yet, waits up to `wait` seconds for the first one.
        """
        results = []
        while True:
            try:
                outcome, spans = self._reports.get(timeout=wait) if wait else self._reports.get_nowait()
            except queue.Empty:
                break
            wait = 0.0
            if outcome != "retry":
                self._settled(spans)
            results.append((outcome, len(spans)))
        return results

    def _settled(self, spans: list[Unit]) -> None:
        """Spans the exporter is done with. A trace is kept until every span of it is: a
        batch the collector refused as too large is sent in halves, which may cut a trace."""
        done: dict[str, set[str]] = {}
        for span in spans:
            done.setdefault(span.key, set()).add(span.json)
        for trace_id, texts in done.items():
            waiting = self._pending.get(trace_id)
            if waiting is None:
                continue
            left = [span for span in waiting if span.json not in texts]
            self.pending_units -= len(waiting) - len(left)
            if left:
                self._pending[trace_id] = left
            else:
                del self._pending[trace_id]

    def _forget(self, trace_id: str) -> None:
        spans = self._pending.pop(trace_id, None)
        if spans:
            self.pending_units -= len(spans)

    def to_state(self) -> list[dict]:
        """The traces not settled yet, oldest first, as the checkpoint keeps them."""
        return traces_to_state(self._pending.values())

    def flush(self, timeout: float) -> bool:
        return self._exporter is None or self._exporter.flush(timeout)

    def close(self, timeout: float) -> None:
        if self._exporter is not None:
            self._exporter.close(timeout)


def traces_to_state(traces) -> list[dict]:
    """Traces (lists of units under one key) as a checkpoint keeps them, for an outbox to
    take back at the next start: [{"trace_id": key, "spans": [each unit's text]}]."""
    return [{"trace_id": spans[0].key, "spans": [span.json for span in spans]}
            for spans in traces if spans]


def traces_from_state(data: object) -> list[list[Unit]]:
    """Our traces back from `traces_to_state`; ValueError when damaged.

    Each span's text is sent as it is, so one that is not a JSON object of its trace would
    make the collector refuse a whole batch.
    """
    traces = []
    for trace in saved_state.sequence(data, "the pending spans"):
        trace_id = saved_state.text(saved_state.mapping(trace, "a pending trace")["trace_id"],
                                    "a pending trace's id")
        if len(trace_id) != 32 or trace_id.strip("0123456789abcdef"):
            raise ValueError("a pending trace's id is not 32 hex digits")
        texts = saved_state.sequence(trace["spans"], "a pending trace's spans")
        for text in texts:
            span = json.loads(saved_state.text(text, "a pending span", None))
            if type(span) is not dict or span.get("traceId") != trace_id:
                raise ValueError("a pending span is not a span of its trace")
        traces.append([Unit(trace_id, text) for text in texts])
    return traces
