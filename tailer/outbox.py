"""The spans of finished turns until the collector has them.

The exporter sends from its own thread; this outbox keeps every trace it was given until
the exporter says what became of it, so the checkpoint can hold what is still unsettled and
a restart sends it again. Traces are sent again under the same ids (they are derived from
the log), so a trace delivered just before a crash and sent again after it is the same trace.

The exporter reports from its thread; `settle()` takes those reports on the main thread,
where the checkpoint and the metrics are updated, so both stay one consistent cut.
"""

from __future__ import annotations

import logging
import queue
from collections import OrderedDict
from typing import Callable

from .otlp import OtlpExporter, Span

log = logging.getLogger("tailer")

# Past this many spans waiting (about two thousand turns), the exporter drops the oldest
# traces and reports them: the bound keeps the checkpoint, which holds them, a few MB.
MAX_PENDING_SPANS = 10_000


class Outbox:
    def __init__(
        self,
        connect: Callable[[Callable[[str, list[Span]], None]], OtlpExporter] | None,
        pending: list[dict] = (),
    ):
        """`connect` builds the exporter around the outbox's report callback (None: no
        export). `pending` are the traces a checkpoint held (see `pending`); they are sent
        first."""
        self._reports: queue.SimpleQueue[tuple[str, list[Span]]] = queue.SimpleQueue()
        self._exporter = connect(self._report) if connect else None
        self._pending: OrderedDict[str, list[Span]] = OrderedDict()
        self.pending_spans = 0
        if self._exporter is None and pending:
            log.warning("%d traces kept for the collector are dropped: no OTLP endpoint",
                        len(pending))
        for trace in pending:
            self.submit([Span(trace["trace_id"], text) for text in trace["spans"]])

    @property
    def exporting(self) -> bool:
        return self._exporter is not None

    def _report(self, outcome: str, spans: list[Span]) -> None:
        """The exporter's on_result, called from its thread: handled later, in settle()."""
        self._reports.put((outcome, spans))

    def submit(self, spans: list[Span]) -> None:
        """Send one trace (the spans of one turn)."""
        if self._exporter is None or not spans:
            return
        self._forget(spans[0].trace_id)
        self._pending[spans[0].trace_id] = spans
        self.pending_spans += len(spans)
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

    def _settled(self, spans: list[Span]) -> None:
        """Spans the exporter is done with. A trace is kept until every span of it is: a
        batch the collector refused as too large is sent in halves, which may cut a trace."""
        done: dict[str, set[str]] = {}
        for span in spans:
            done.setdefault(span.trace_id, set()).add(span.json)
        for trace_id, texts in done.items():
            waiting = self._pending.get(trace_id)
            if waiting is None:
                continue
            left = [span for span in waiting if span.json not in texts]
            self.pending_spans -= len(waiting) - len(left)
            if left:
                self._pending[trace_id] = left
            else:
                del self._pending[trace_id]

    def _forget(self, trace_id: str) -> None:
        spans = self._pending.pop(trace_id, None)
        if spans:
            self.pending_spans -= len(spans)

    @property
    def pending(self) -> list[dict]:
        """The traces not settled yet, oldest first, as the checkpoint keeps them."""
        return pending_entries(self._pending.values())

    def flush(self, timeout: float) -> bool:
        return self._exporter is None or self._exporter.flush(timeout)

    def close(self, timeout: float) -> None:
        if self._exporter is not None:
            self._exporter.close(timeout)


def pending_entries(traces) -> list[dict]:
    """Traces (lists of spans, or of a CLI unit each) as the checkpoint's `pending` keeps
    them, for an outbox to take back at the next start."""
    return [{"trace_id": spans[0].trace_id, "spans": [span.json for span in spans]}
            for spans in traces if spans]
