"""The Copilot CLI's own telemetry, relayed: its export followed, its spans paired with
our turns, its spans and metric points sent through outboxes of their own.

The export is followed by cli_otel.ExportFollower and the pairing is
prompt_links.PromptLinks'; this module holds them together for the daemon's loop
(tailer/daemon/service.py), and says what of them a checkpoint keeps.

Positions, the units not delivered yet and those waiting for their pair are one cut of the
checkpoint (`to_state()`), as the session logs' positions and our spans are: a restart
neither loses nor reads again a line of the export.
"""

from __future__ import annotations

import json
import time

from .. import saved_state
from ..outputs.copilot_otel import ExportFollower, Record, metric_unit
from ..copilot.lines import Position
from ..outputs.otlp import Unit
from ..outputs.outbox import BACKPRESSURE_SPANS, Outbox, traces_to_state
from ..outputs.prompt_links import PromptLinks

# A pass hands on at most this many of the export's records, as it does turns
# (service.TURNS_PER_PASS): memory stays bounded however much there is to read.
CLI_RECORDS_PER_PASS = 1_000


class CliTelemetry:
    def __init__(self, follower: ExportFollower, spans: Outbox, metrics: Outbox,
                 links: PromptLinks):
        """`spans` and `metrics` send the CLI's units (cli_otel's); our turns' spans, once
        paired, go to the outbox of ours that `send` is given."""
        self.follower = follower
        self.spans = spans
        self.metrics = metrics
        self.links = links
        self.caught_up = False

    def read(self) -> bool:
        """Read what is new, unless the collector lags; True if anything was. A pass reads
        the export before the session logs, so a turn knows the CLI writes telemetry."""
        waiting = self.spans.pending_units + self.metrics.pending_units
        read = 0 if waiting > BACKPRESSURE_SPANS else \
            self.follower.poll(CLI_RECORDS_PER_PASS, self._take)
        self.caught_up = waiting <= BACKPRESSURE_SPANS and read < CLI_RECORDS_PER_PASS
        return bool(read)

    def _take(self, record: Record) -> None:
        """One record read (under the follower's guard: a failure costs this record)."""
        if record.is_span:
            self.links.add_cli(record)
        else:
            self.metrics.submit([metric_unit(record)])

    def send(self, outbox: Outbox) -> bool:
        """At the end of a pass: hand on what is ready, and what waited long enough."""
        self.links.expire()
        return self._send(outbox)

    def release(self, outbox: Outbox) -> None:
        """The run ends: what waits for its pair goes now, unlinked."""
        self.links.expire(everything=True)
        self._send(outbox)

    def _send(self, outbox: Outbox) -> bool:
        traces, units = self.links.take()
        for spans in traces:
            outbox.submit(spans)
        for unit in units:
            self.spans.submit([unit])
        return bool(traces or units)

    def settle(self) -> list[tuple[str, int]]:
        return self.spans.settle() + self.metrics.settle()

    def flush(self, timeout: float) -> bool:
        until = time.monotonic() + timeout
        return self.spans.flush(timeout) and self.metrics.flush(max(0.0, until - time.monotonic()))

    def close(self, timeout: float) -> None:
        self.spans.close(timeout)
        self.metrics.close(timeout)

    def to_state(self) -> tuple[dict, list[list[Unit]]]:
        """What the checkpoint keeps of the CLI's telemetry (read back by
        `cli_telemetry_from_state`), and the spans of our turns waiting for their pair
        (kept as our pending spans: they go out unlinked next run)."""
        turns, units = self.links.held()
        return {"files": self.follower.state(),
                "spans": self.spans.to_state() + traces_to_state([[unit] for unit in units]),
                "metrics": self.metrics.to_state()}, turns


def cli_telemetry_from_state(data: object) -> dict | None:
    """What `CliTelemetry.to_state` gave, checked; ValueError when damaged. The files'
    positions stay as saved, for ExportFollower; the units are read back for the outboxes.
    None: a checkpoint that has never seen the export."""
    if data is None:
        return None
    cli = saved_state.mapping(data, "the CLI telemetry")
    files = saved_state.mapping(cli["files"], "the CLI export files")
    for name, position in files.items():
        saved_state.text(name, "a CLI export file", None)
        Position.from_data(position)
    return {"files": files, "spans": _units(cli["spans"]), "metrics": _units(cli["metrics"])}


def _units(data: object) -> list[list[Unit]]:
    """A CLI outbox's units: any key (a digest, a trace id), each entry a JSON object."""
    units = []
    for unit in saved_state.sequence(data, "the CLI's pending units"):
        key = saved_state.text(saved_state.mapping(unit, "a CLI unit")["trace_id"],
                               "a CLI unit's key")
        texts = saved_state.sequence(unit["spans"], "a CLI unit's entries")
        for text in texts:
            if type(json.loads(saved_state.text(text, "a CLI unit's entry", None))) is not dict:
                raise ValueError("a CLI unit is not a JSON object")
        units.append([Unit(key, text) for text in texts])
    return units
