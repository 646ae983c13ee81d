"""The daemon's main loop: wiring the stages, the checkpoint's rhythm, history, signals.

`run` is `hydrafusion-tailer run` once its options are parsed (tailer/cli.py): it builds
the pipeline (daemon.Tailer), the metrics, the exporter and its outbox, the history pusher,
and runs `_Loop` until a signal (or, with --once, for one pass).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import signal
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

from . import __version__, checkpoint, demo
from .daemon import POSITIONS, TURNS, UNCHANGED, Tailer
from .exposition import Registry, write_textfile
from .history import History
from .logs import log_turn
from .metrics import MAX_MODELS, TurnMetrics
from .metrics_server import MetricsServer
from .otlp import OtlpExporter, parse_headers, parse_resource_attributes
from .outbox import MAX_PENDING_SPANS, Outbox
from .remote_write import RemoteWriter
from .spans import turn_spans

log = logging.getLogger("tailer")

POLL_INTERVAL_S = 1.0
EXPORT_FLUSH_TIMEOUT_S = 10.0
# Short, so a span reaches the collector well within a second of its line being written.
EXPORT_BATCH_DELAY_S = 0.2
CHECKPOINT_TURNS_S = 1.0
CHECKPOINT_POSITIONS_S = 30.0
TEXTFILE_REFRESH_S = 10.0
# A pass finishes at most this many turns, and reading waits while more spans than this
# wait for the collector: memory stays bounded however much there is to read, and a slow
# or absent collector makes the turns wait in the logs rather than be dropped.
TURNS_PER_PASS = 200
BACKPRESSURE_SPANS = 2_000
HISTORY_FIRST_BACKOFF_S = 5.0
HISTORY_MAX_BACKOFF_S = 60.0
EXIT_USAGE = 2


def run_demo(args: argparse.Namespace, environ: dict[str, str]) -> int:
    """Run the tailer on a copy of the fixtures, restamped to end a few minutes ago.

    The copy is made once and kept beside the checkpoint (see demo_sessions), so a restarted
    demo carries on with the sessions its checkpoint counted instead of counting a fresh copy
    on top of them. Without the copy (a new volume, say) the demo starts over.
    """
    if not args.state_dir.is_dir():
        print(f"hydrafusion-tailer demo: no fixtures at {args.state_dir}", file=sys.stderr)
        return EXIT_USAGE
    return _holding_checkpoint(args, lambda: _run_demo(args, environ))


def demo_sessions(checkpoint_path: Path) -> Path:
    """Where the demo keeps its copy of the fixtures: a folder named after its checkpoint."""
    return checkpoint_path.with_name(checkpoint_path.name + ".sessions")


def run(args: argparse.Namespace, environ: dict[str, str]) -> int:
    """The daemon (or one pass with --once).

    `args` are run's options, plus `metrics_bind` ((host, port) or None) and `traces_url`
    (or None), which the command line worked out from them.
    """
    return _holding_checkpoint(args, lambda: _run(args, environ))


def _holding_checkpoint(args: argparse.Namespace, work) -> int:
    """work(), holding the checkpoint's lock (checkpoint.claim) for as long as it runs."""
    try:
        claimed = checkpoint.claim(args.checkpoint)
    except checkpoint.CheckpointInUse as error:
        print(f"hydrafusion-tailer: {error}", file=sys.stderr)
        return EXIT_USAGE
    with claimed or contextlib.nullcontext():
        return work()


def _run_demo(args: argparse.Namespace, environ: dict[str, str]) -> int:
    fixtures, work = args.state_dir, demo_sessions(args.checkpoint)
    try:
        if not work.is_dir():
            # Made aside and renamed into place: a copy cut short is never carried on with.
            partial = work.with_name(work.name + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            demo.prepare(fixtures, partial, datetime.now(timezone.utc))
            os.replace(partial, work)
        replayer = demo.Replayer(work, fixtures, args.replay_interval)
    except (ValueError, OSError) as error:
        print(f"hydrafusion-tailer demo: {error}", file=sys.stderr)
        return EXIT_USAGE
    args.state_dir, args.from_start = work, True
    return _run(args, environ, on_pass=replayer.tick)


def _run(args: argparse.Namespace, environ: dict[str, str], on_pass=None) -> int:
    """The main job of run and demo; `on_pass` is called before every pass."""
    stop = threading.Event()
    _handle_signals(stop)
    if not args.state_dir.is_dir():
        if not args.wait_for_state_dir or args.once:
            print(
                f"hydrafusion-tailer: state directory {args.state_dir} does not exist "
                "(set --state-dir or COPILOT_STATE_DIR)",
                file=sys.stderr,
            )
            return EXIT_USAGE
        log.info("waiting for the state directory %s to appear", args.state_dir)
        while not args.state_dir.is_dir():
            if stop.wait(POLL_INTERVAL_S):
                return 0
        # Everything in a folder that appeared after we started is new: read it all.
        args.from_start = True
    address, endpoint = args.metrics_bind, args.traces_url
    saved = _load_checkpoint(args.checkpoint)

    registry = Registry(label_value_limits={"model": MAX_MODELS})
    metrics = TurnMetrics(registry)
    if saved is not None:
        metrics.restore(saved.get("metrics", {}))
    server = None
    if address is not None:
        try:
            server = MetricsServer(address[0], address[1], registry)
        except OSError as error:
            print(
                f"hydrafusion-tailer: cannot serve metrics on {args.metrics_address}: "
                f"{error.strerror}",
                file=sys.stderr,
            )
            return EXIT_USAGE
        server.start()
    outbox = Outbox(
        _exporter_factory(endpoint, environ) if endpoint else None,
        (saved or {}).get("pending", []),
    )

    history = None
    if args.history_url != "none":
        history = History(
            RemoteWriter(args.history_url),
            args.history_labels,
            bases=registry.current(metrics.turn_series()),
            not_before_ms=(saved or {}).get("published_at_ms", 0),
            now_ms=time.time_ns() // 1_000_000,
            saved=(saved or {}).get("history"),
        )
    loop = _Loop(args, registry, metrics, outbox, history, on_pass)
    tailer = Tailer(
        args.state_dir,
        metrics=metrics,
        on_turn=loop.on_turn,
        from_start=args.from_start or args.once,
        idle_timeout_s=args.idle_timeout,
        backfill_days=args.backfill_days,
        saved=saved,
    )
    loop.tailer = tailer
    sessions = tailer.start()
    log.info(
        "hydrafusion-tailer %s: state dir %s, %d sessions, %s, OTLP %s, metrics %s, "
        "watching by %s",
        __version__, args.state_dir, sessions,
        f"resuming from {args.checkpoint}" if saved else f"new checkpoint {args.checkpoint}",
        endpoint or "off",
        f"http://{args.metrics_address}/metrics" if server else "not served",
        tailer.watcher.mode,
    )
    try:
        loop.run(stop)
    finally:
        delivered = outbox.flush(EXPORT_FLUSH_TIMEOUT_S)
        loop.save(final=True)
        outbox.close(1.0)
        tailer.close()
        if server is not None:
            server.close()
    if not delivered:
        log.warning(
            "%d spans are still waiting for the collector; they are kept for the next run",
            outbox.pending_spans,
        )
    if args.once and (loop.lost_spans or not delivered):
        return 1
    return 0


class _Loop:
    """The main loop, and when the checkpoint is saved.

    A pass that finished turns is saved within CHECKPOINT_TURNS_S; one that only moved past
    lines that do not matter, within CHECKPOINT_POSITIONS_S, which keeps the disk quiet
    while a session writes tool output. Scrapes see the counters as of the last save (see
    Registry.save_and_publish), so a crash never takes back a count a scrape has seen.
    """

    def __init__(self, args, registry: Registry, metrics: TurnMetrics, outbox: Outbox,
                 history: History | None, on_pass=None):
        self.args = args
        self.registry = registry
        self.metrics = metrics
        self.tailer: Tailer | None = None
        self.outbox = outbox
        self.history = history
        self.on_pass = on_pass
        # Turns finished before the tailer first caught up were read at start-up: they are
        # history, if they are old enough (History.takes).
        self._catching_up = True
        self._next_push = 0.0
        self._push_backoff = HISTORY_FIRST_BACKOFF_S
        self.lost_spans = 0
        self._dirty = UNCHANGED
        self._saved_at = float("-inf")
        self._textfile_at = float("-inf")
        self._written: str | None = None
        self._save_failed = False
        self._stalled_since: float | None = None

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            if self.on_pass is not None:
                self.on_pass()
            if self.outbox.pending_spans > BACKPRESSURE_SPANS:
                # The collector is slow or down: leave the turns in the logs for now. Reading
                # resumes as soon as it takes some, so reading and sending overlap.
                waiting = self.outbox.pending_spans
                self._settle(wait=POLL_INTERVAL_S)
                if self.outbox.pending_spans < waiting:
                    self._stalled_since = None
                elif self._stalled_since is None:
                    self._stalled_since = time.monotonic()
                elif self.args.once and time.monotonic() - self._stalled_since > EXPORT_FLUSH_TIMEOUT_S:
                    log.warning("the collector takes no spans: this --once run stops here; "
                                "the next one reads on from where it stopped")
                    return
            else:
                self._dirty = max(self._dirty, self.tailer.poll(
                    timeout=0.0 if not self.tailer.caught_up else POLL_INTERVAL_S,
                    turn_budget=TURNS_PER_PASS,
                ))
            self._catching_up = self._catching_up and not self.tailer.caught_up
            self._settle()
            if self.registry.served_zeros:
                self._dirty = TURNS
            now = time.monotonic()
            if self.history is not None and self.history.pending and now >= self._next_push:
                self._push_history(now)
            wait = {TURNS: CHECKPOINT_TURNS_S, POSITIONS: CHECKPOINT_POSITIONS_S}
            if self._dirty and now - self._saved_at >= wait[self._dirty]:
                self.save()
            elif self.args.textfile and now - self._textfile_at >= TEXTFILE_REFRESH_S:
                self._write_textfile()  # a zero hold may have ended
            if self.args.once and self.tailer.caught_up:
                return

    def on_turn(self, turn) -> None:
        if self.outbox.exporting:
            self.outbox.submit(turn_spans(turn))
        end_ms = turn.end_ns // 1_000_000
        if self.history is not None and self._catching_up and self.history.takes(end_ms):
            changes = self.metrics.turn_changes(turn)
            touched = list(dict.fromkeys((family, values) for family, values, _ in changes))
            before = self.registry.current(touched)
            self.registry.record(changes)
            self.history.record(end_ms, before, self.registry.current(touched))
            self.registry.promote(touched)
        else:
            self.metrics.count_turn(turn)
        log_turn(turn)

    def _push_history(self, now: float) -> None:
        if self.history.push(time.time_ns() // 1_000_000):
            self._dirty = TURNS
            self._push_backoff = HISTORY_FIRST_BACKOFF_S
        else:
            self._next_push = now + self._push_backoff
            self._push_backoff = min(self._push_backoff * 2, HISTORY_MAX_BACKOFF_S)

    def save(self, final: bool = False) -> None:
        self._settle()
        state = {
            **self.tailer.state(),
            "pending": self.outbox.pending,
            "history": self.history.state() if self.history is not None else None,
            # The next run places no history sample at or before this moment.
            "published_at_ms": time.time_ns() // 1_000_000,
        }

        def save_with(metrics: dict) -> None:
            try:
                checkpoint.save(self.args.checkpoint, {**state, "metrics": metrics})
                self._save_failed = False
            except OSError as error:
                if not self._save_failed:
                    log.warning("cannot save the checkpoint %s: %s", self.args.checkpoint,
                                error.strerror)
                self._save_failed = True

        # While history is being read, scrapes see nothing of it: a partial count shown now
        # would sit above the history's own samples for the same past (see tailer/history.py).
        publish = self.history is None or not self._catching_up
        self.registry.save_and_publish(save_with, publish=publish)
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

    def _write_textfile(self, final: bool = False) -> None:
        if not self.args.textfile:
            return
        self._textfile_at = time.monotonic()
        text = self.registry.render_final() if final else self.registry.render_textfile()
        if text == self._written:
            return
        try:
            write_textfile(self.args.textfile, text)
            self._written = text
        except OSError as error:
            log.warning("cannot write the textfile %s: %s", self.args.textfile, error.strerror)


def _load_checkpoint(path: Path) -> dict | None:
    try:
        return checkpoint.load(path)
    except checkpoint.CheckpointError as error:
        aside = path.with_name(path.name + ".unreadable")
        with contextlib.suppress(OSError):
            os.replace(path, aside)
        log.error("%s; it was moved to %s and the tailer starts afresh", error, aside)
        return None


def _exporter_factory(endpoint: str, environ: dict[str, str]):
    """Builds the exporter once the outbox gives it somewhere to report to."""
    resource = parse_resource_attributes(environ.get("OTEL_RESOURCE_ATTRIBUTES", ""))
    resource["service.name"] = environ.get("OTEL_SERVICE_NAME") or resource.get(
        "service.name", "hydrafusion"
    )
    resource.setdefault("service.version", __version__)

    def connect(on_result) -> OtlpExporter:
        return OtlpExporter(
            endpoint,
            headers=parse_headers(environ.get("OTEL_EXPORTER_OTLP_HEADERS", "")),
            resource=resource,
            scope_version=__version__,
            on_result=on_result,
            flush_interval=EXPORT_BATCH_DELAY_S,
            max_queued_spans=MAX_PENDING_SPANS,
        )

    return connect


def _handle_signals(stop: threading.Event) -> None:
    """SIGTERM (docker stop) and Ctrl-C end the loop cleanly so exports are flushed."""
    if threading.current_thread() is not threading.main_thread():
        return
    for name in ("SIGTERM", "SIGINT", "SIGBREAK"):
        number = getattr(signal, name, None)
        if number is not None:
            signal.signal(number, lambda *_: stop.set())
