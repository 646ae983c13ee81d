"""The daemon's main loop: wiring the stages, the checkpoint's rhythm, history, signals.

`run` is `hydrafusion-tailer run` once its options are read into a `Config`
(tailer/cli.py): it builds the reading stage (daemon.Tailer), the metrics, the exporter
and its outbox, the history, and runs `_Loop` until a signal (or, with --once, for one
pass). The loop takes each pass's finished turns and hands them to a TurnFanout.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import signal
import sys
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from . import __version__, checkpoint, demo
from .cli_otel import ExportFollower, encode_metrics, encode_spans, metric_unit
from .daemon import POSITIONS, TURNS, UNCHANGED, Tailer
from .exposition import Registry, write_textfile
from .fanout import TurnFanout
from .history import History
from .metrics import MAX_MODELS, TurnMetrics
from .metrics_server import MetricsServer
from .otlp import SCOPE_NAME, OtlpExporter, Span, parse_resource_attributes, tls_context
from .otlp_metrics import Identity, MetricsPusher, encode, metrics_request, prometheus_labels
from .outbox import MAX_PENDING_SPANS, Outbox, pending_entries
from .prompt_links import PromptLinks
from .remote_write import RemoteWriter

log = logging.getLogger("tailer")

POLL_INTERVAL_S = 1.0
EXPORT_FLUSH_TIMEOUT_S = 10.0
# A stop gives the exporters this long together to deliver what waits, and the metrics
# push this long for its last request: with the pass under way (at most a poll interval),
# a SIGTERM ends the run within 10 s whatever the endpoints do. What is not delivered by
# then stays in the checkpoint for the next run.
STOP_FLUSH_S = 5.0
STOP_PUSH_S = 2.0
# Short, so a span reaches the collector well within a second of its line being written.
EXPORT_BATCH_DELAY_S = 0.2
CHECKPOINT_TURNS_S = 1.0
CHECKPOINT_POSITIONS_S = 30.0
TEXTFILE_REFRESH_S = 10.0
# A pass finishes at most this many turns, and reading waits while more spans than this
# wait for the collector: memory stays bounded however much there is to read, and a slow
# or absent collector makes the turns wait in the logs rather than be dropped.
TURNS_PER_PASS = 50
CLI_RECORDS_PER_PASS = 1_000
BACKPRESSURE_SPANS = 2_000
HISTORY_FIRST_BACKOFF_S = 5.0
HISTORY_MAX_BACKOFF_S = 60.0
EXIT_USAGE = 2


@dataclass(frozen=True)
class Config:
    """Everything `run` and `demo` need, worked out once from options and environment."""

    state_dir: Path
    checkpoint: Path
    idle_timeout_s: float = 1800.0
    from_start: bool = False
    once: bool = False
    wait_for_state_dir: bool = False
    backfill_days: float | None = None
    metrics_bind: tuple[str, int] | None = None  # (host, port); None: not served
    traces_url: str | None = None  # None: no export
    otlp_metrics_url: str | None = None
    cli_otel: Path | None = None  # the CLI's own telemetry export; None: not followed
    otlp_headers: dict[str, str] = dataclasses.field(default_factory=dict)
    traces_certificate: str | None = None  # a CA file for an https endpoint
    metrics_push_url: str | None = None  # None: no metrics push
    metrics_push_headers: dict[str, str] = dataclasses.field(default_factory=dict)
    metrics_push_certificate: str | None = None
    metrics_push_interval_s: float = 60.0
    resource: dict[str, str] = dataclasses.field(default_factory=dict)
    textfile: Path | None = None
    history_url: str | None = None
    history_labels: dict[str, str] = dataclasses.field(default_factory=dict)  # {}: the push's
    history_headers: dict[str, str] = dataclasses.field(default_factory=dict)
    history_certificate: str | None = None
    replay_interval_s: float = 30.0  # demo only

    @property
    def metrics_url(self) -> str:
        if self.metrics_bind is None:
            return "not served"
        host, port = self.metrics_bind
        return f"http://{f'[{host}]' if ':' in host else host}:{port}/metrics"


def resource_attributes(environ: dict[str, str]) -> dict[str, str]:
    """The OTLP resource, from the standard variables, with our service name and version."""
    resource = parse_resource_attributes(environ.get("OTEL_RESOURCE_ATTRIBUTES", ""))
    resource["service.name"] = environ.get("OTEL_SERVICE_NAME") or resource.get(
        "service.name", "hydrafusion"
    )
    resource.setdefault("service.version", __version__)
    return resource


def run_demo(config: Config) -> int:
    """Run the tailer on a copy of the fixtures, restamped to end a few minutes ago.

    The copy is made once and kept beside the checkpoint (see demo_sessions), so a restarted
    demo carries on with the sessions its checkpoint counted instead of counting a fresh copy
    on top of them. Without the copy (a new volume, say) the demo starts over.
    """
    if not config.state_dir.is_dir():
        print(f"hydrafusion-tailer demo: no fixtures at {config.state_dir}", file=sys.stderr)
        return EXIT_USAGE
    return _holding_checkpoint(config, lambda alive: _run_demo(config, alive))


def demo_sessions(checkpoint_path: Path) -> Path:
    """Where the demo keeps its copy of the fixtures: a folder named after its checkpoint."""
    return checkpoint_path.with_name(checkpoint_path.name + ".sessions")


def run(config: Config) -> int:
    """The daemon (or one pass with --once)."""
    return _holding_checkpoint(config, lambda alive: _run(config, alive))


def _holding_checkpoint(config: Config, work) -> int:
    """work(heartbeat), holding the checkpoint's lock (checkpoint.claim) while it runs."""
    last_alive = checkpoint.last_alive(config.checkpoint)
    try:
        claimed = checkpoint.claim(config.checkpoint)
    except checkpoint.CheckpointInUse as error:
        print(f"hydrafusion-tailer: {error}", file=sys.stderr)
        return EXIT_USAGE
    with claimed or contextlib.nullcontext():
        return work(Heartbeat(claimed, last_alive))


class Heartbeat:
    """This run's heartbeat on the checkpoint's lock, and the last one's (checkpoint.beat)."""

    def __init__(self, claimed, last_alive_s: float | None):
        self._claimed = claimed
        # The previous run may have been scraped until a heartbeat interval after its last.
        self.previous_ms = (0 if last_alive_s is None
                            else int((last_alive_s + checkpoint.HEARTBEAT_S) * 1000))
        self._next = 0.0

    def beat(self) -> None:
        now = time.monotonic()
        if self._claimed is not None and now >= self._next:
            checkpoint.beat(self._claimed)
            self._next = now + checkpoint.HEARTBEAT_S


def _run_demo(config: Config, heartbeat: Heartbeat) -> int:
    fixtures, work = config.state_dir, demo_sessions(config.checkpoint)
    try:
        if not work.is_dir():
            # Made aside and renamed into place: a copy cut short is never carried on with.
            partial = work.with_name(work.name + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            demo.prepare(fixtures, partial, datetime.now(timezone.utc))
            os.replace(partial, work)
        replayer = demo.Replayer(work, fixtures, config.replay_interval_s)
    except (ValueError, OSError) as error:
        print(f"hydrafusion-tailer demo: {error}", file=sys.stderr)
        return EXIT_USAGE
    # The first turn is written before the logs are first listed: a polling watcher (no
    # inotify) would find its new session folder only at its next listing, after --once.
    replayer.tick()
    config = dataclasses.replace(config, state_dir=work, from_start=True)
    return _run(config, heartbeat, on_pass=replayer.tick)


def _run(config: Config, heartbeat: Heartbeat, on_pass=None) -> int:
    """The main job of run and demo; `on_pass` is called before every pass."""
    stop = threading.Event()
    _handle_signals(stop)
    if not config.state_dir.is_dir():
        if not config.wait_for_state_dir or config.once:
            print(
                f"hydrafusion-tailer: state directory {config.state_dir} does not exist "
                "(set --state-dir or COPILOT_STATE_DIR)",
                file=sys.stderr,
            )
            return EXIT_USAGE
        log.info("waiting for the state directory %s to appear", config.state_dir)
        while not config.state_dir.is_dir():
            heartbeat.beat()
            if stop.wait(POLL_INTERVAL_S):
                return 0
        # Everything in a folder that appeared after we started is new: read it all.
        config = dataclasses.replace(config, from_start=True)
    try:
        saved = _load_checkpoint(config.checkpoint)
    except CheckpointUnusable as error:
        print(f"hydrafusion-tailer: {error}", file=sys.stderr)
        return EXIT_USAGE
    try:
        run = Run(config, heartbeat, saved, on_pass=on_pass)
    except OSError as error:
        print(f"hydrafusion-tailer: cannot serve metrics at {config.metrics_url}: "
              f"{error.strerror}", file=sys.stderr)
        return EXIT_USAGE
    log.info(
        "hydrafusion-tailer %s: state dir %s, %d sessions, %s, OTLP %s, metrics %s, "
        "metrics push %s, watching by %s, CLI telemetry %s",
        __version__, config.state_dir, run.sessions_found,
        f"resuming from {config.checkpoint}" if saved else f"new checkpoint {config.checkpoint}",
        config.traces_url or "off", config.metrics_url, config.metrics_push_url or "off",
        run.tailer.watcher.mode, config.cli_otel if run.cli is not None else "off",
    )
    try:
        while not stop.is_set() and not run.done:
            run.step()
    except Exception:
        # Not saved: the last save stands, and the lines after it are read again next time.
        log.exception("the tailer stopped on an unexpected error")
        run.abandon()
        return 1
    return run.stop()


class Run:
    """One run of the daemon: its stages, wired, and when the checkpoint is saved.

    `step()` is one pass of the main loop; `stop()` ends the run cleanly (last export, last
    save); `abandon()` ends it as a crash would, saving nothing. A pass that finished turns
    is saved within CHECKPOINT_TURNS_S; one that only moved past lines that do not matter,
    within CHECKPOINT_POSITIONS_S, which keeps the disk quiet while a session writes tool
    output. Scrapes see the counters as of the last save (Registry.save_and_publish), so a
    crash never takes back a count a scrape has seen.
    """

    def __init__(self, config: Config, heartbeat: Heartbeat, saved: dict | None, *,
                 on_pass=None, history_writer=None):
        """`history_writer` stands in for the remote writer in tests."""
        # Who this tailer is, kept in the checkpoint: the resource of its spans and pushed
        # metrics, and the labels of its history when they are not given.
        self.identity = Identity((saved or {}).get("identity"))
        config = dataclasses.replace(config, resource=self.identity.resource(config.resource))
        self.config = config
        self.heartbeat = heartbeat
        self.on_pass = on_pass
        started_ms = time.time_ns() // 1_000_000
        self.registry = Registry(label_value_limits={"model": MAX_MODELS})
        self.metrics = TurnMetrics(self.registry)
        if saved is not None:
            self.metrics.restore(saved.get("metrics", {}))
        self.server = None
        if config.metrics_bind is not None:
            self.server = MetricsServer(*config.metrics_bind, self.registry)
            self.server.start()
        self.outbox = Outbox(
            _exporter_factory(config) if config.traces_url else None,
            (saved or {}).get("pending", []),
        )
        self.pusher = None
        if config.metrics_push_url is not None:
            self.pusher = MetricsPusher(
                config.metrics_push_url, headers=config.metrics_push_headers,
                interval_s=config.metrics_push_interval_s,
                ssl_context=tls_context(config.metrics_push_certificate),
                user_agent=f"hydrafusion-tailer/{__version__}")
        self.history = None
        if config.history_url is not None:
            self.history = History(
                history_writer or RemoteWriter(
                    config.history_url, headers=config.history_headers,
                    ssl_context=tls_context(config.history_certificate)),
                config.history_labels or prometheus_labels(config.resource),
                bases=self.registry.exact_samples(self.metrics.turn_families),
                not_before_ms=_previous_run_seen_until(saved, heartbeat),
                cutoff_ms=started_ms,
                saved=(saved or {}).get("history"),
                le_as_pushed=self.pusher is not None and not config.history_labels,
            )
            self.registry.withhold(self.metrics.turn_families)
        self.tailer = Tailer(
            config.state_dir,
            metrics=self.metrics,
            from_start=config.from_start or config.once,
            idle_timeout_s=config.idle_timeout_s,
            backfill_days=config.backfill_days,
            saved=saved,
        )
        self.cli = None
        if config.cli_otel is not None and config.traces_url:
            self.cli = CliTelemetry(config, saved, self.tailer.open_turns)
        self.fanout = TurnFanout(self.metrics, self.outbox, self.history,
                                 self.cli.links if self.cli is not None else None)
        self.sessions_found = self.tailer.start()
        # Turns finished before the tailer first caught up were read at start-up: they are
        # history, if they ended before this run began (History.takes).
        self._reading_history = True
        self._next_push = 0.0
        self._push_backoff = HISTORY_FIRST_BACKOFF_S
        self.lost_spans = 0
        self.history_waits = False
        # A new identity is saved before anything is pushed under it: a crash before the
        # save would otherwise give the same counters a second instance.
        self._dirty = TURNS if self.identity.is_new else UNCHANGED
        self._identity_saved = not self.identity.is_new
        self._saved_at = float("-inf")
        self._textfile_at = float("-inf")
        self._written: str | None = None
        self._save_failed = False
        self._stalled_since: float | None = None
        self._stalled_out = False
        self._history_push: _InBackground | None = None

    @property
    def unsaved(self) -> bool:
        """Whether something changed since the last save (it is saved within a second)."""
        return bool(self._dirty)

    @property
    def done(self) -> bool:
        """Only a --once run ends by itself: once all is read, exported or left for later."""
        if not self.config.once:
            return False
        return self._stalled_out or (self.tailer.caught_up and (
            self.history is None or self.history_waits) and (
            self.cli is None or self.cli.caught_up))

    def step(self) -> None:
        self.heartbeat.beat()
        # Pushed right after the heartbeat: a push is never much later than the moment the
        # next run takes the previous one to have been last seen (History's not_before).
        if self.pusher is not None and self._identity_saved and self.pusher.due(time.monotonic()):
            self.pusher.offer(self._metrics_body(self.registry.collect_pushed(), time.time_ns()))
        if self.on_pass is not None:
            self.on_pass()
        if self.cli is not None and self.cli.read():
            self._dirty = TURNS
        if self.outbox.pending_spans > BACKPRESSURE_SPANS:
            # The collector is slow or down: leave the turns in the logs for now. Reading
            # resumes as soon as it takes some, so reading and sending overlap.
            waiting = self.outbox.pending_spans
            self._settle(wait=POLL_INTERVAL_S)
            if self.outbox.pending_spans < waiting:
                self._stalled_since = None
            elif self._stalled_since is None:
                self._stalled_since = time.monotonic()
            elif self.config.once and time.monotonic() - self._stalled_since > EXPORT_FLUSH_TIMEOUT_S:
                log.warning("the collector takes no spans: this --once run stops here; "
                            "the next one reads on from where it stopped")
                self._stalled_out = True
                return
        else:
            done = self.tailer.poll(
                timeout=0.0 if not self.tailer.caught_up else POLL_INTERVAL_S,
                turn_budget=TURNS_PER_PASS,
            )
            self.fanout.send(done.turns, reading_history=self._reading_history)
            self._dirty = max(self._dirty, done.level)
        if self.cli is not None and self.cli.send(self.outbox):
            self._dirty = TURNS
        self._reading_history = self._reading_history and not self.tailer.caught_up
        self._settle()
        if self.registry.served_zeros:
            self._dirty = TURNS
        now = time.monotonic()
        if self.history is not None and not self._reading_history and now >= self._next_push:
            self._push_history(now)
        wait = {TURNS: CHECKPOINT_TURNS_S, POSITIONS: CHECKPOINT_POSITIONS_S}
        if self._dirty and now - self._saved_at >= wait[self._dirty]:
            self.save()
        elif self.config.textfile and now - self._textfile_at >= TEXTFILE_REFRESH_S:
            self._write_textfile()  # a zero hold may have ended

    def stop(self) -> int:
        """End cleanly: the last spans out, the last save; the exit code of a --once run."""
        if self.server is not None:
            self.server.close()  # no scrape after the last save: see History's not_before
        if self.cli is not None:
            self.cli.release(self.outbox)
        flush_until = time.monotonic() + STOP_FLUSH_S
        delivered = self.outbox.flush(STOP_FLUSH_S)
        if self.cli is not None:
            delivered = self.cli.flush(max(0.0, flush_until - time.monotonic())) and delivered
        pushed_at_ns = time.time_ns()  # before the final save, for the same reason
        self.save(final=True)
        if self.pusher is not None:
            body = self._metrics_body(self.registry.collect_final(), pushed_at_ns)
            if not self.pusher.close(body, STOP_PUSH_S):
                log.warning("the last metrics push did not go through; the next run's "
                            "pushes carry the same counters on")
        # Saved: what is still in flight is the next run's to send, so nothing waits for it.
        self.outbox.close(0.0)
        if self.cli is not None:
            self.cli.close(0.0)
        self.tailer.close()
        if not delivered:
            log.warning(
                "%d spans are still waiting for the collector; they are kept for the next run",
                self.outbox.pending_spans,
            )
        if self.config.once and self._save_failed:
            log.error("this --once run could not save the checkpoint %s: the next run reads "
                      "again from the last one saved", self.config.checkpoint)
            return 1
        if self.config.once and (self.lost_spans or not delivered):
            return 1
        return 0

    def abandon(self) -> None:
        """End as a crash would: nothing saved, threads and sockets closed."""
        self.outbox.close(0.0)
        if self.cli is not None:
            self.cli.close(0.0)
        self.tailer.close()
        if self.server is not None:
            self.server.close()

    def _metrics_body(self, families, time_ns: int) -> bytes:
        return encode(metrics_request(
            families, self.config.resource, scope_name=SCOPE_NAME, scope_version=__version__,
            start_ns=self.identity.start_ns, time_ns=time_ns))

    def _push_history(self, now: float) -> None:
        """Push the start-up history once reading is over, from a thread of its own (the
        main loop goes on reading meanwhile); then scrapes show its families."""
        if self._history_push is not None:
            if not self._history_push.done:
                return
            pushed, self._history_push = self._history_push.result, None
            if not pushed:
                self.history_waits = True
                self._next_push = now + self._push_backoff
                self._push_backoff = min(self._push_backoff * 2, HISTORY_MAX_BACKOFF_S)
                return
        elif self.history.pending:
            now_ms = time.time_ns() // 1_000_000
            if self.history.ready(now_ms):
                self._history_push = _InBackground(self.history.push, now_ms)
            return
        self.history = self.fanout.history = None
        # Saved without the history before scrapes show it: a run that starts from a save
        # still holding it would push it again, ending below what the scrapes showed.
        self.save()
        self.registry.show_all()

    def save(self, final: bool = False) -> None:
        self._settle()
        cli_state, held = self.cli.state() if self.cli is not None else (None, [])
        state = {
            **self.tailer.state(),
            "pending": self.outbox.pending + pending_entries(held),
            "cli": cli_state,
            "history": self.history.state() if self.history is not None else None,
            "identity": self.identity.state(),
            # The next run places no history sample at or before this moment, and after a
            # clean stop (no scrape after the final save) no later one either.
            "published_at_ms": time.time_ns() // 1_000_000,
            "stopped": final,
        }

        def save_with(metrics: dict) -> None:
            try:
                checkpoint.save(self.config.checkpoint, {**state, "metrics": metrics})
                self._save_failed = False
                self._identity_saved = True
            except OSError as error:
                if not self._save_failed:
                    log.warning("cannot save the checkpoint %s: %s", self.config.checkpoint,
                                error.strerror)
                self._save_failed = True

        self.registry.save_and_publish(save_with)
        self._saved_at = time.monotonic()
        self._dirty = UNCHANGED
        self._write_textfile(final)

    def _settle(self, wait: float = 0.0) -> None:
        for outcome, spans in self.outbox.settle(wait):
            self.metrics.count_export(outcome, spans)
            if outcome in ("rejected", "dropped"):
                self.lost_spans += spans
            self._dirty = TURNS
        self.metrics.pending_spans.set(None, self.outbox.pending_spans)
        if self.cli is not None:
            for outcome, units in self.cli.settle():
                if outcome in ("rejected", "dropped"):
                    self.lost_spans += units
                self._dirty = TURNS

    def _write_textfile(self, final: bool = False) -> None:
        if not self.config.textfile:
            return
        self._textfile_at = time.monotonic()
        text = self.registry.render_final() if final else self.registry.render_textfile()
        if text == self._written:
            return
        try:
            write_textfile(self.config.textfile, text)
            self._written = text
        except OSError as error:
            log.warning("cannot write the textfile %s: %s", self.config.textfile, error.strerror)


def _previous_run_seen_until(saved: dict | None, heartbeat: Heartbeat) -> int:
    """Until when Prometheus may hold scrapes of the previous run (Unix ms): its final save
    if it stopped cleanly, else its last heartbeat's bound."""
    saved = saved or {}
    published = saved.get("published_at_ms", 0)
    return published if saved.get("stopped") else max(published, heartbeat.previous_ms)


class CheckpointUnusable(Exception):
    """A checkpoint that can neither be used nor moved aside: every save would fail."""


def _load_checkpoint(path: Path) -> dict | None:
    try:
        return checkpoint.load(path)
    except checkpoint.CheckpointError as error:
        aside = path.with_name(path.name + ".unreadable")
        try:
            os.replace(path, aside)
        except OSError as move_error:
            raise CheckpointUnusable(
                f"{error}, and it cannot be moved aside to {aside}: {move_error.strerror}; "
                "move or delete it") from None
        log.error("%s; it was moved to %s and the tailer starts afresh", error, aside)
        return None


def _exporter_factory(config: Config, url: str | None = None, encode=None):
    """Builds the exporter once the outbox gives it somewhere to report to: of our spans,
    or, with `url` and `encode`, of the CLI's spans or metrics (cli_otel's units)."""

    def connect(on_result) -> OtlpExporter:
        return OtlpExporter(
            url or config.traces_url,
            headers=config.otlp_headers,
            resource=config.resource,
            scope_version=__version__,
            ssl_context=tls_context(config.traces_certificate),
            on_result=on_result,
            flush_interval=EXPORT_BATCH_DELAY_S,
            max_queued_spans=MAX_PENDING_SPANS,
            encode=encode,
        )

    return connect


class CliTelemetry:
    """The CLI's own telemetry, sent on: its export followed (cli_otel.ExportFollower), its
    spans paired with our turns (prompt_links.PromptLinks), its spans and metrics sent
    through outboxes of their own.

    Positions, the units not delivered yet and those waiting for their pair are one cut
    of the checkpoint (`state()`), as the session logs' positions and our spans are: a
    restart neither loses nor reads again a line of the export.
    """

    def __init__(self, config: Config, saved: dict | None, open_turns):
        cli_saved = (saved or {}).get("cli") or {}
        self.follower = ExportFollower(
            config.cli_otel, from_start=config.from_start or config.once,
            # With a checkpoint that has never seen the export, its files are new.
            saved=cli_saved.get("files", {}) if saved is not None else None)
        self.spans = Outbox(_exporter_factory(config, encode=encode_spans),
                            cli_saved.get("spans", []))
        metrics_url = config.otlp_metrics_url
        self.metrics = Outbox(
            _exporter_factory(config, metrics_url, encode_metrics) if metrics_url else None,
            cli_saved.get("metrics", []))
        self.links = PromptLinks(open_turns)
        self.caught_up = False

    def read(self) -> bool:
        """Read what is new, unless the collector lags; True if anything was. A pass reads
        the export before the session logs, so a turn knows the CLI writes telemetry."""
        waiting = self.spans.pending_spans + self.metrics.pending_spans
        records = [] if waiting > BACKPRESSURE_SPANS else self.follower.poll(CLI_RECORDS_PER_PASS)
        self.caught_up = waiting <= BACKPRESSURE_SPANS and len(records) < CLI_RECORDS_PER_PASS
        for key, record in records:
            if record["type"] == "span":
                self.links.add_cli(record)
            elif (unit := metric_unit(key, record)) is not None:
                self.metrics.submit([unit])
        return bool(records)

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

    def state(self) -> tuple[dict, list[list[Span]]]:
        """What the checkpoint keeps of the CLI's telemetry, and the spans of our turns
        waiting for their pair (kept as our pending spans: they go out unlinked next run)."""
        turns, units = self.links.held()
        return {"files": self.follower.state(),
                "spans": self.spans.pending + pending_entries([[unit] for unit in units]),
                "metrics": self.metrics.pending}, turns


class _InBackground:
    """function(*args) called on a thread of its own, which the main loop polls and an exit
    does not wait for. `result` is False if it raised."""

    def __init__(self, function, *args):
        self.result = False
        self._thread = threading.Thread(target=self._call, args=(function, args),
                                        name="history-push", daemon=True)
        self._thread.start()

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def _call(self, function, args) -> None:
        try:
            self.result = function(*args)
        except Exception as error:  # noqa: BLE001 - the push is tried again, the run goes on
            log.error("history: the push failed unexpectedly (%s)", type(error).__name__)


def _handle_signals(stop: threading.Event) -> None:
    """SIGTERM (docker stop) and Ctrl-C end the loop cleanly so exports are flushed."""
    if threading.current_thread() is not threading.main_thread():
        return
    for name in ("SIGTERM", "SIGINT", "SIGBREAK"):
        number = getattr(signal, name, None)
        if number is not None:
            signal.signal(number, lambda *_: stop.set())
