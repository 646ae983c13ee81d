"""The daemon's stages, built from its frozen Config and what the checkpoint kept.

`build` is the one place that decides which stages a run has: the metrics always, the
server, the trace exporter, the metrics push, the history and the CLI's telemetry when
the Config asks for them. The loop (service.Run) only drives what it was given.

`Saved` is a checkpoint read back part by part, each part checked by the component that
wrote it (its `*_from_state`); tailer/daemon/checkpoint.py keeps the file itself.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from .. import __version__, saved_state
from . import checkpoint
from ..outputs.copilot_otel import ExportFollower, encode_metrics, encode_spans
from .copilot_telemetry import CliTelemetry, cli_telemetry_from_state
from .config import Config
from ..turns.sessions import Tailer
from ..outputs.exposition import Registry, series_from_state
from .fanout import TurnFanout
from ..outputs.history import History, history_from_state
from ..outputs.identity import Identity, identity_from_state
from ..outputs.metrics import LABEL_VALUE_LIMITS, Metrics
from ..outputs.otlp import OtlpExporter, Unit, tls_context
from ..outputs.otlp_metrics import MetricsPusher, prometheus_labels
from ..outputs.outbox import MAX_PENDING_SPANS, Outbox, traces_from_state
from ..outputs.policy_versions import PolicyVersions, policy_versions_from_state
from ..outputs.prompt_links import PromptLinks
from ..outputs.remote_write import RemoteWriter
from ..records import record

TYPE_CHECKING = False  # a type checker takes it as True; the annotations are never evaluated
if TYPE_CHECKING:
    from ..outputs.metrics_server import MetricsServer

# Short, so a span reaches the collector well within a second of its line being written.
EXPORT_BATCH_DELAY_S = 0.2


@record(frozen=True)  # not @dataclass, as Config is: each one made costs every start-up
class Saved:
    """A checkpoint's parts, each checked by the component that saved it."""

    reading: dict  # the whole state: the reading stage (daemon.Tailer) takes its sessions
    metrics: dict
    pending: list[list[Unit]]
    cli: dict | None
    history: dict | None
    identity: dict | None
    policy_versions: dict | None
    published_at_ms: int
    stopped: bool

    @classmethod
    def from_state(cls, state: dict) -> Saved:
        """ValueError, KeyError or TypeError when a part is damaged (checkpoint.load says
        so as a CheckpointError)."""
        return cls(
            reading=state,
            metrics=series_from_state(state["metrics"]),
            pending=traces_from_state(state["pending"]),
            cli=cli_telemetry_from_state(state.get("cli")),
            history=history_from_state(state.get("history")),
            identity=identity_from_state(state.get("identity")),
            policy_versions=policy_versions_from_state(state.get("policy_versions")),
            published_at_ms=saved_state.whole(state.get("published_at_ms", 0),
                                              "the time of the save"),
            stopped=saved_state.flag(state.get("stopped", False), "whether the run stopped"),
        )


def load_saved(path: Path) -> Saved | None:
    """The checkpoint at `path`, checked; None when there is none; CheckpointError."""
    return checkpoint.load(path, Saved.from_state)


@record
class Stages:
    """What one run of the daemon is made of; None where the Config asks for no such stage."""

    config: Config  # with the resource of this tailer's identity
    identity: Identity
    registry: Registry
    metrics: Metrics
    server: MetricsServer | None
    outbox: Outbox
    pusher: MetricsPusher | None
    history: History | None
    tailer: Tailer
    cli: CliTelemetry | None
    fanout: TurnFanout


def build(config: Config, saved: Saved | None, previous_run_ms: int, *,
          history_writer=None) -> Stages:
    """The stages of a run. `previous_run_ms`: until when Prometheus may hold scrapes of
    the previous run (Unix ms, service.Heartbeat). `history_writer` stands in for the
    remote writer in tests. OSError when the metrics cannot be served."""
    identity = Identity(saved and saved.identity)
    config = dataclasses.replace(config, resource=identity.resource(config.resource))
    started_ms = time.time_ns() // 1_000_000
    registry = Registry(label_value_limits=LABEL_VALUE_LIMITS)
    metrics = Metrics(registry)
    if saved is not None:
        metrics.restore(saved.metrics)
    server = None
    if config.metrics_bind is not None:
        # Here: http.server (and through it http.client and ssl) costs a run serving none.
        from ..outputs.metrics_server import MetricsServer

        server = MetricsServer(*config.metrics_bind, registry)
        server.start()
    outbox = Outbox(_traces_exporter(config) if config.traces_url else None,
                    saved.pending if saved is not None else [])
    pusher = _pusher(config)
    history = None
    if config.history_url is not None:
        history = _history(config, saved, registry, metrics, history_writer,
                           not_before_ms=_previous_run_seen_until(saved, previous_run_ms),
                           cutoff_ms=started_ms, le_as_pushed=pusher is not None)
    tailer = Tailer(config.state_dir, metrics=metrics,
                    from_start=config.from_start or config.once,
                    idle_timeout_s=config.idle_timeout_s, backfill_days=config.backfill_days,
                    saved=saved and saved.reading)
    cli = _cli_telemetry(config, saved, tailer, metrics) if config.cli_otel and config.traces_url else None
    fanout = TurnFanout(metrics, outbox, history, cli.links if cli is not None else None,
                        PolicyVersions(saved and saved.policy_versions))
    return Stages(config, identity, registry, metrics, server, outbox, pusher, history,
                  tailer, cli, fanout)


def _pusher(config: Config) -> MetricsPusher | None:
    if config.metrics_push_url is None:
        return None
    return MetricsPusher(
        config.metrics_push_url, headers=config.metrics_push_headers,
        interval_s=config.metrics_push_interval_s,
        ssl_context=tls_context(config.metrics_push_certificate),
        user_agent=f"hydrafusion-tailer/{__version__}")


def _history(config: Config, saved: Saved | None, registry: Registry, metrics: Metrics,
             writer, *, not_before_ms: int, cutoff_ms: int, le_as_pushed: bool) -> History:
    """The history of this run's start-up reading; scrapes leave its families out until it
    is pushed (Registry.withhold)."""
    history = History(
        writer or RemoteWriter(config.history_url, headers=config.history_headers,
                               ssl_context=tls_context(config.history_certificate)),
        config.history_labels or prometheus_labels(config.resource),
        bases=registry.exact_samples(metrics.turn_families),
        not_before_ms=not_before_ms,
        cutoff_ms=cutoff_ms,
        saved=saved and saved.history,
        le_as_pushed=le_as_pushed and not config.history_labels,
    )
    registry.withhold(metrics.turn_families)
    return history


def _previous_run_seen_until(saved: Saved | None, previous_heartbeat_ms: int) -> int:
    """Until when Prometheus may hold scrapes of the previous run (Unix ms): its final save
    if it stopped cleanly, else its last heartbeat's bound."""
    if saved is None:
        return previous_heartbeat_ms
    if saved.stopped:
        return saved.published_at_ms
    return max(saved.published_at_ms, previous_heartbeat_ms)


def _cli_telemetry(config: Config, saved: Saved | None, tailer: Tailer,
                   metrics: Metrics) -> CliTelemetry:
    cli_saved = (saved and saved.cli) or {}
    follower = ExportFollower(
        config.cli_otel, metrics, from_start=config.from_start or config.once,
        # With a checkpoint that has never seen the export, its files are new.
        saved=cli_saved.get("files", {}) if saved is not None else None)
    spans = Outbox(_traces_exporter(config, encode_spans), cli_saved.get("spans", []))
    # The CLI's metrics go to the metrics signal's endpoint, with its headers and CA file.
    cli_metrics = Outbox(
        _exporter(config.otlp_metrics_url, config.metrics_push_headers,
                  config.metrics_push_certificate, config.resource, encode_metrics)
        if config.otlp_metrics_url else None,
        cli_saved.get("metrics", []))
    return CliTelemetry(follower, spans, cli_metrics, PromptLinks(tailer.open_turns))


def _traces_exporter(config: Config, encode=None):
    """Of our spans, or with `encode` of the CLI's (cli_otel's units): the traces signal."""
    return _exporter(config.traces_url, config.otlp_headers, config.traces_certificate,
                     config.resource, encode)


def _exporter(url: str, headers: dict[str, str], certificate: str | None,
              resource: dict[str, str], encode=None):
    """Builds the exporter once the outbox gives it somewhere to report to."""

    def connect(on_result) -> OtlpExporter:
        return OtlpExporter(
            url,
            headers=headers,
            resource=resource,
            scope_version=__version__,
            ssl_context=tls_context(certificate),
            on_result=on_result,
            flush_interval=EXPORT_BATCH_DELAY_S,
            max_queued_spans=MAX_PENDING_SPANS,
            encode=encode,
        )

    return connect
