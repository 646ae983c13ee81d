"""The daemon: `hydrafusion-tailer run`, its main loop, the checkpoint's rhythm, signals.

(The reading stage it drives is tailer/turns/sessions.py's Tailer, whatever that file's name
says.) `run` is `hydrafusion-tailer run` once its options are read into a Config
(tailer/daemon/config.py): it holds the checkpoint's lock, has the stages built (tailer/daemon/stages.py)
and drives them with `Run.step()` until a signal (or, with --once, for one pass). Each
pass's finished turns go to a TurnFanout.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

from .. import __version__
from ..atomic_file import remove_killed_saves
from ..copilot.files import is_session_folder
from ..copilot.problems import session_folder_given, state_dir_missing
from . import checkpoint
from .config import Config
from ..turns.sessions import POSITIONS, TURNS, UNCHANGED
from ..outputs.exposition import Registry, write_textfile
from ..outputs.otlp import SCOPE_NAME
from ..outputs.otlp_metrics import MetricsPusher, encode, metrics_request
from ..outputs.outbox import BACKPRESSURE_SPANS, Outbox, traces_to_state
from ..path_options import is_folder
from ..printable import printable
from ..wording import counted
from .stages import Saved, build, load_saved

log = logging.getLogger("tailer")

POLL_INTERVAL_S = 1.0
# A stop gives the exporters this long together to deliver what waits, and the metrics
# push this long for its last request: with the pass under way (at most a poll interval),
# a SIGTERM ends the run within 10 s whatever the endpoints do. What is not delivered by
# then stays in the checkpoint for the next run. A --once run that no signal ended waits
# its Config.once_timeout_s instead: time for a collector's Retry-After.
STOP_FLUSH_S = 5.0
STOP_PUSH_S = 2.0
# A long wait for the exporters is made of waits this long, each ended by a signal's stop.
FLUSH_STEP_S = 0.25
CHECKPOINT_TURNS_S = 1.0
CHECKPOINT_POSITIONS_S = 30.0
TEXTFILE_REFRESH_S = 10.0
# A pass finishes at most this many turns, and reading waits while more spans than
# outbox.BACKPRESSURE_SPANS wait for the collector: memory stays bounded however much
# there is to read.
TURNS_PER_PASS = 50
HISTORY_FIRST_BACKOFF_S = 5.0
HISTORY_MAX_BACKOFF_S = 60.0
EXIT_USAGE = 2


def run(config: Config) -> int:
    """The daemon (or one pass with --once)."""
    return holding_checkpoint(config, lambda heartbeat: run_holding(config, heartbeat))


def holding_checkpoint(config: Config, work) -> int:
    """work(heartbeat), holding the checkpoint's lock (checkpoint.claim) while it runs."""
    last_alive = checkpoint.last_alive(config.checkpoint)
    try:
        claimed = checkpoint.claim(config.checkpoint)
    except checkpoint.CheckpointInUse as error:
        print(printable(f"hydrafusion-tailer: {error}"), file=sys.stderr)
        return EXIT_USAGE
    with claimed or contextlib.nullcontext():
        return work(Heartbeat(claimed, last_alive))


class Heartbeat:
    """This run's heartbeat on the checkpoint's lock, and the last one's (checkpoint.beat).

    It beats only once this run's scrapes show the counters a history covers (`start`):
    until then Prometheus holds nothing of this run that a history could contradict, so a
    run killed before then must bound nothing. Taken for alive, it would make the next run
    place the turns it reads again after this run, rather than at their times."""

    def __init__(self, claimed, last_alive_s: float | None):
        self._claimed = claimed
        # The previous run may have been scraped until a heartbeat interval after its last.
        self.previous_ms = (0 if last_alive_s is None
                            else int((last_alive_s + checkpoint.HEARTBEAT_S) * 1000))
        self._next: float | None = None  # None: not beating yet

    def start(self) -> None:
        """Beat from now on: at once, then every HEARTBEAT_S."""
        if self._next is None:
            self._next = 0.0
            self.beat()

    def beat(self) -> None:
        now = time.monotonic()
        if self._claimed is not None and self._next is not None and now >= self._next:
            checkpoint.beat(self._claimed)
            self._next = now + checkpoint.HEARTBEAT_S


def _state_dir_found(path: Path) -> bool:
    """Whether the state folder is there; one that cannot be looked at (the command line
    refuses it at start) counts as not there yet, rather than ending the daemon."""
    try:
        return is_folder("--state-dir", path)
    except ValueError:
        return False


def run_holding(config: Config, heartbeat: Heartbeat, on_pass=None) -> int:
    """The main job of run and demo, the lock held; `on_pass` is called before every pass."""
    stop = threading.Event()
    _handle_signals(stop)
    if not _state_dir_found(config.state_dir):
        if not config.wait_for_state_dir or config.once:
            print(printable(f"hydrafusion-tailer: {state_dir_missing(config.state_dir)}"),
                  file=sys.stderr)
            return EXIT_USAGE
        log.info("waiting for the state directory %s to appear", config.state_dir)
        while not _state_dir_found(config.state_dir):
            if stop.wait(POLL_INTERVAL_S):
                return 0
        # Everything in a folder that appeared after we started is new: read it all.
        config = dataclasses.replace(config, from_start=True)
    try:
        saved = _load_checkpoint(config.checkpoint)
    except CheckpointUnusable as error:
        print(printable(f"hydrafusion-tailer: {error}"), file=sys.stderr)
        return EXIT_USAGE
    try:
        run = Run(config, heartbeat, saved, on_pass=on_pass)
    except OSError as error:
        print(f"hydrafusion-tailer: cannot serve metrics at {config.metrics_url}: "
              f"{error.strerror}", file=sys.stderr)
        return EXIT_USAGE
    log.info(
        "hydrafusion-tailer %s: state dir %s, %s, %s, OTLP %s, metrics %s, "
        "metrics push %s, watching by %s, CLI telemetry %s",
        __version__, config.state_dir, counted(run.sessions_found, "session"),
        f"resuming from {config.checkpoint}" if saved else f"new checkpoint {config.checkpoint}",
        config.traces_url or "off", config.metrics_url, config.metrics_push_url or "off",
        run.tailer.watcher.mode, config.cli_otel if run.cli is not None else "off",
    )
    if not run.sessions_found and is_session_folder(config.state_dir):
        log.warning("%s: no session is read there", session_folder_given(config.state_dir))
    try:
        while not stop.is_set() and not run.done:
            run.step()
    except Exception:
        # Not saved: the last save stands, and the lines after it are read again next time.
        log.exception("the tailer stopped on an unexpected error")
        run.abandon()
        return 1
    return run.stop(signalled=stop)


class Run:
    """One run of the daemon: its stages (stages.build), driven pass by pass.

    `step()` is one pass of the main loop; `stop()` ends the run cleanly (last export, last
    save); `abandon()` ends it as a crash would, saving nothing. Scrapes see the counters
    as of the last save (Registry.save_and_publish), so a crash never takes back a count a
    scrape has seen. Over twelve attributes: the stages a pass touches are kept by name
    (`tailer`, `outbox`, ...), so each line of `step()` says which it drives.
    """

    def __init__(self, config: Config, heartbeat: Heartbeat, saved: Saved | None, *,
                 on_pass=None, history_writer=None):
        """`history_writer` stands in for the remote writer in tests."""
        stages = build(config, saved, heartbeat.previous_ms, history_writer=history_writer)
        self.config = stages.config
        self.heartbeat = heartbeat
        self.on_pass = on_pass
        self.registry, self.metrics = stages.registry, stages.metrics
        self.server, self.tailer, self.fanout = stages.server, stages.tailer, stages.fanout
        self.outbox, self.cli = stages.outbox, stages.cli
        self.identity = stages.identity
        # A new identity is saved before anything is pushed under it: a crash before the
        # save would otherwise give the same counters a second instance.
        self.saves = SaveRhythm(self.config.checkpoint, first_save_due=self.identity.is_new)
        self.push = MetricsPush(stages.pusher, self.registry, self.config.resource,
                                self.identity.start_ns)
        self.history_push = HistoryPush(stages.history)
        if stages.history is None:
            heartbeat.start()  # nothing withheld: the scrapes show every counter at once
        self.history_waiting = 0  # series whose history waits, as last counted
        self.backpressure = Backpressure(
            self.outbox, give_up_after_s=self.config.once_timeout_s if self.config.once else None)
        self.textfile = Textfile(self.config.textfile, self.registry)
        self.sessions_found = self.tailer.start()
        # Turns finished before the tailer first caught up were read at start-up: they are
        # history, if they ended before this run began (History.takes).
        self.reading_history = True
        self.lost_spans = 0

    @property
    def done(self) -> bool:
        """Only a --once run ends by itself: once all is read, exported or left for later."""
        if not self.config.once:
            return False
        return self.backpressure.stalled_out or (
            self.tailer.caught_up and self.history_push.over_or_waiting
            and (self.cli is None or self.cli.caught_up))

    def step(self) -> None:
        self.heartbeat.beat()
        # Pushed right after the heartbeat: a push is never much later than the moment the
        # next run takes the previous one to have been last seen (History's not_before).
        self.push.offer_when_due(allowed=self.saves.identity_saved)
        if self.on_pass is not None:
            self.on_pass()
        self._read_cli_telemetry()
        if self.backpressure.holds(self._settle):
            if self.backpressure.stalled_out:
                return
        else:
            self._read_logs()
        self._hand_on_cli_telemetry()
        self.reading_history = self.reading_history and not self.tailer.caught_up
        self._settle()
        if self.registry.served_zeros:
            self.saves.note(TURNS)
        self._push_history()
        self._save_or_refresh_textfile()

    def stop(self, signalled: threading.Event | None = None) -> int:
        """End cleanly: the last spans out, the last save; the exit code of a --once run.
        `signalled`: set when a signal asked the run to stop, which ends any wait here."""
        if self.server is not None:
            self.server.close()  # no scrape after the last save: see History's not_before
        if self.cli is not None:
            self.cli.release(self.outbox)
        senders = [self.outbox] if self.cli is None else [self.outbox, self.cli]
        delivered = delivered_within(senders, stop_flush_s(self.config, self.backpressure, signalled),
                                     signalled)
        pushed_at_ns = time.time_ns()  # before the final save, for the same reason
        self.save(final=True)
        self.push.close(pushed_at_ns)
        # Saved: what is still in flight is the next run's to send, so nothing waits for it.
        self.outbox.close(0.0)
        if self.cli is not None:
            self.cli.close(0.0)
        self.tailer.close()
        if not delivered:
            log.warning(
                "%d spans are still waiting for the collector%s; they are kept for the next run",
                self.outbox.pending_units, why_still_waiting(self.config, signalled),
            )
        if self.config.once and self.saves.failed:
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

    def _read_cli_telemetry(self) -> None:
        if self.cli is not None and self.cli.read():
            self.saves.note(TURNS)

    def _read_logs(self) -> None:
        done = self.tailer.poll(
            timeout=0.0 if not self.tailer.caught_up else POLL_INTERVAL_S,
            turn_budget=TURNS_PER_PASS,
        )
        self.fanout.send(done.turns, reading_history=self.reading_history)
        self.saves.note(done.level)

    def _hand_on_cli_telemetry(self) -> None:
        if self.cli is not None and self.cli.send(self.outbox):
            self.saves.note(TURNS)

    def _push_history(self) -> None:
        """Push the start-up history once reading is over; then scrapes show its families
        (and, before them, the health gauge at 0).

        Pushed only once this run has saved (its history's bound and cutoff with it, and a
        new identity): a run killed during or after the push then leaves the next one this
        history to push again, the same samples, under the same instance. A pending history
        has a save noted on the pass that counts it (below), so the first comes soon."""
        allowed = self.saves.published and self.saves.identity_saved
        pushed = not self.reading_history and self.history_push.try_push(allowed=allowed)
        waiting = self.history_push.pending_series
        self.metrics.history_pending.set(None, waiting)
        if waiting != self.history_waiting:
            self.history_waiting = waiting
            # Scrapes show the values a save published: saved soon, or a run restored from a
            # checkpoint without the gauge would show none waiting all through an outage.
            self.saves.note(TURNS)
        if not pushed:
            return
        self.fanout.history = None
        # Saved without the history before scrapes show it: a run that starts from a save
        # still holding it would push it again, ending below what the scrapes showed.
        self.save()
        self.heartbeat.start()
        self.registry.show_all()

    def _save_or_refresh_textfile(self) -> None:
        if self.saves.due():
            self.save()
        elif self.textfile.due():
            self.textfile.write()  # a zero hold may have ended

    def save(self, final: bool = False) -> None:
        self._settle()
        cli_state, held = self.cli.to_state() if self.cli is not None else (None, [])
        state = {
            **self.tailer.state(),
            "pending": self.outbox.to_state() + traces_to_state(held),
            "cli": cli_state,
            "history": self.history_push.state(),
            "identity": self.identity.state(),
            "policy_versions": self.fanout.policies.state(),
            # The next run places no history sample at or before this moment, and after a
            # clean stop (no scrape after the final save) no later one either.
            "published_at_ms": time.time_ns() // 1_000_000,
            "stopped": final,
        }
        self.registry.save_and_publish(lambda metrics: self.saves.write({**state,
                                                                         "metrics": metrics}))
        self.textfile.write(final)

    def _settle(self, wait: float = 0.0) -> None:
        for outcome, spans in self.outbox.settle(wait):
            self.metrics.count_export(outcome, spans)
            if outcome in ("rejected", "dropped"):
                self.lost_spans += spans
            self.saves.note(TURNS)
        self.metrics.pending_spans.set(None, self.outbox.pending_units)
        if self.cli is not None:
            for outcome, units in self.cli.settle():
                if outcome in ("rejected", "dropped"):
                    self.lost_spans += units
                self.saves.note(TURNS)


def stop_flush_s(config: Config, backpressure: Backpressure, signalled: threading.Event | None) -> float:
    """How long the exporters have to deliver what waits at a stop: a --once run gives them
    its timeout (a cron job's run, whose collector may ask it to come back in a few
    seconds), unless a signal stopped it or the collector already took nothing for that
    long (Backpressure); any other stop, STOP_FLUSH_S."""
    if not config.once or (signalled is not None and signalled.is_set()):
        return STOP_FLUSH_S
    return 0.0 if backpressure.stalled_out else config.once_timeout_s


def delivered_within(senders: list, seconds: float, signalled: threading.Event | None) -> bool:
    """Whether every sender (an Outbox, the CLI's telemetry) delivered what waits within
    `seconds`, waited for a FLUSH_STEP_S at a time: a signal ends a long wait at once, and
    no timeout a user gave reaches a lock's wait (which refuses one of some 49 days or more)."""
    until = time.monotonic() + seconds
    while True:
        left = until - time.monotonic()
        if all(sender.flush(min(max(left, 0.0), FLUSH_STEP_S)) for sender in senders):
            return True
        if left <= 0 or (signalled is not None and signalled.is_set()):
            return False


def why_still_waiting(config: Config, signalled: threading.Event | None) -> str:
    """What ended the wait for the collector, as the stop's warning says it: a --once run
    stopped by a signal did not wait out its --once-timeout."""
    if signalled is not None and signalled.is_set():
        return " when a signal stopped the run"
    return " at the end of --once-timeout" if config.once else ""


class SaveRhythm:
    """When the checkpoint is saved, and whether its saves go through.

    A pass that finished turns (or changed anything else a restart must not redo) is saved
    within CHECKPOINT_TURNS_S; one that only moved past lines that do not matter, within
    CHECKPOINT_POSITIONS_S, which keeps the disk quiet while a session writes tool output.
    """

    def __init__(self, path: Path, *, first_save_due: bool, clock=time.monotonic):
        self.path = path
        self.clock = clock
        self.dirty = TURNS if first_save_due else UNCHANGED
        # Until a save went through, nothing is pushed under a new identity.
        self.identity_saved = not first_save_due
        self.published = False  # a save was made (or tried: scrapes show it all the same)
        self._saved_at = float("-inf")
        self.failed = False  # the last save did not go through

    def note(self, level: int) -> None:
        """Something changed: TURNS (saved soon) or POSITIONS (saved later)."""
        self.dirty = max(self.dirty, level)

    def due(self) -> bool:
        wait = {TURNS: CHECKPOINT_TURNS_S, POSITIONS: CHECKPOINT_POSITIONS_S}
        return bool(self.dirty) and self.clock() - self._saved_at >= wait[self.dirty]

    def write(self, state: dict) -> None:
        """Save `state`; a failure is logged once until a save goes through again (the
        tailer keeps counting, and the next save carries everything)."""
        try:
            checkpoint.save(self.path, state)
            self.failed = False
            self.identity_saved = True
        except OSError as error:
            if not self.failed:
                log.warning("cannot save the checkpoint %s: %s", self.path, error.strerror)
            self.failed = True
        self.published = True
        self._saved_at = self.clock()
        self.dirty = UNCHANGED


class MetricsPush:
    """The push of our own metrics (otlp_metrics.MetricsPusher), when one is configured:
    the registry's pushed view, under this tailer's resource and counters' start time."""

    def __init__(self, pusher: MetricsPusher | None, registry: Registry,
                 resource: dict[str, str], start_ns: int):
        self.pusher = pusher
        self.registry = registry
        self.resource = resource
        self.start_ns = start_ns

    def offer_when_due(self, *, allowed: bool) -> None:
        if self.pusher is not None and allowed and self.pusher.due(time.monotonic()):
            self.pusher.offer(self._body(self.registry.collect_pushed(), time.time_ns()))

    def close(self, time_ns: int) -> None:
        """The last push: every series at its true value, as of `time_ns`."""
        if self.pusher is None:
            return
        if not self.pusher.close(self._body(self.registry.collect_final(), time_ns),
                                 STOP_PUSH_S):
            log.warning("the last metrics push did not go through; the next run's "
                        "pushes carry the same counters on")

    def _body(self, families, time_ns: int) -> bytes:
        return encode(metrics_request(
            families, self.resource, scope_name=SCOPE_NAME, scope_version=__version__,
            start_ns=self.start_ns, time_ns=time_ns))


class HistoryPush:
    """The start-up history (tailer/outputs/history.py), pushed once reading is over and tried again
    after a backoff while Prometheus does not take it; `history` is None once pushed.

    A push runs on a thread of its own (a slow Prometheus must not hold up reading), which
    `try_push` polls on later passes and an exit does not wait for: history not yet pushed
    stays in the checkpoint."""

    def __init__(self, history, clock=time.monotonic):
        self.history = history
        self.clock = clock
        self.waits = False  # a push was tried and must wait: a --once run stops anyway
        self._next = 0.0
        self._backoff = HISTORY_FIRST_BACKOFF_S
        self._under_way: _InBackground | None = None

    @property
    def over_or_waiting(self) -> bool:
        return self.history is None or self.waits

    def try_push(self, *, allowed: bool = True) -> bool:
        """True when the history has just been pushed (or had nothing left to push). A push
        begins only when `allowed`."""
        now = self.clock()
        if self.history is None or now < self._next:
            return False
        if self._under_way is not None:
            if not self._under_way.done:
                return False
            pushed, self._under_way = self._under_way.result, None
            if not pushed:
                self.waits = True
                self._next = now + self._backoff
                self._backoff = min(self._backoff * 2, HISTORY_MAX_BACKOFF_S)
                return False
        elif self.history.pending:
            now_ms = time.time_ns() // 1_000_000
            if allowed and self.history.ready(now_ms):
                self._under_way = _InBackground(self.history.push, now_ms)
            return False
        self.history = None
        return True

    @property
    def pending_series(self) -> int:
        return self.history.pending_series if self.history is not None else 0

    def state(self) -> dict | None:
        return self.history.state() if self.history is not None else None


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


class Textfile:
    """The metrics written to a file (node_exporter's textfile collector), when configured:
    rewritten at each save, refreshed every TEXTFILE_REFRESH_S, written only when changed.
    Its first write removes what the writes of a killed run left beside it: in the
    collector's folder, each would stay there for good."""

    def __init__(self, path: Path | None, registry: Registry, clock=time.monotonic):
        self.path = path
        self.registry = registry
        self.clock = clock
        self._written_at = float("-inf")
        self._written: str | None = None
        self._tidied = False

    def due(self) -> bool:
        return self.path is not None and self.clock() - self._written_at >= TEXTFILE_REFRESH_S

    def write(self, final: bool = False) -> None:
        if self.path is None:
            return
        self._written_at = self.clock()
        text = self.registry.render_final() if final else self.registry.render_textfile()
        if text == self._written:
            return
        if not self._tidied:
            remove_killed_saves(self.path)
            self._tidied = True
        try:
            write_textfile(self.path, text)
            self._written = text
        except OSError as error:
            log.warning("cannot write the textfile %s: %s", self.path, error.strerror)


class Backpressure:
    """Reading waits while more than BACKPRESSURE_SPANS spans wait for the collector, so a
    slow or absent one makes the turns wait in the logs rather than be dropped; reading
    resumes as soon as it takes some, so reading and sending overlap. A run given
    `give_up_after_s` (a --once run: its timeout) whose collector takes nothing for that
    long stops (`stalled_out`)."""

    def __init__(self, outbox: Outbox, *, give_up_after_s: float | None,
                 clock=time.monotonic):
        self.outbox = outbox
        self.give_up_after_s = give_up_after_s
        self.clock = clock
        self.stalled_out = False
        self._stalled_since: float | None = None

    def holds(self, settle) -> bool:
        """True when reading waits this pass; meanwhile `settle(wait=)` waits up to a poll
        interval for the collector's reports."""
        waiting = self.outbox.pending_units
        if waiting <= BACKPRESSURE_SPANS:
            return False
        settle(wait=POLL_INTERVAL_S)
        now = self.clock()
        if self.outbox.pending_units < waiting:
            self._stalled_since = None
        elif self._stalled_since is None:
            self._stalled_since = now
        elif (self.give_up_after_s is not None
              and now - self._stalled_since >= self.give_up_after_s):
            log.warning("the collector takes no spans: this --once run stops here; "
                        "the next one reads on from where it stopped")
            self.stalled_out = True
        return True


class CheckpointUnusable(Exception):
    """A checkpoint that can neither be used nor moved aside: every save would fail."""


def _load_checkpoint(path: Path) -> Saved | None:
    try:
        return load_saved(path)
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


def _handle_signals(stop: threading.Event) -> None:
    """SIGTERM (docker stop), Ctrl-C and SIGHUP (the terminal of a `run` in front closed)
    end the loop cleanly so exports are flushed and the state saved. One ignored from the
    start stays so: SIGHUP under nohup, SIGINT in a shell's background job."""
    if threading.current_thread() is not threading.main_thread():
        return
    for name in ("SIGTERM", "SIGINT", "SIGHUP", "SIGBREAK"):
        number = getattr(signal, name, None)
        if number is not None and signal.getsignal(number) is not signal.SIG_IGN:
            signal.signal(number, lambda *_: stop.set())
