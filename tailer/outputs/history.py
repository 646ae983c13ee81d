"""Turns read at start-up, counted in Prometheus at the times they happened.

Prometheus takes a scrape's values as "now", so turns the tailer reads when it starts (weeks
of past sessions, or what happened while it was stopped) would all land in one spike at
start-up, and every figure over a past window would be wrong. Instead, the counters those
turns touch are pushed to Prometheus's remote-write receiver as they stood over time.
Prometheus must accept samples that old: its TSDB out-of-order window has to cover the
backfill horizon (prometheus/prometheus.yml).

What is pushed, per series: its value just before its first historical turn, its value at
the end time of every historical turn (to the millisecond), and its value every GRID_MS in
between and up to the push, so an instant query finds a sample within Prometheus's
lookback. A counter read at any instant then equals the count of turns ended by then, and
the difference of its values at two instants is exact for any window (docs/METRICS.md).

Three rules keep history and scrapes one consistent series:
- History is pushed once, when the start-up reading is over: turns are read session by
  session, not in time order, and Prometheus cannot change a sample it has. Until then the
  changes wait here (and in the checkpoint), and scrapes leave these families out
  (Registry.withhold), so no scrape writes a "now" that the history would contradict.
- No sample is placed at or before `not_before_ms`: the moment the previous run was last
  known alive (its last publish, or its heartbeat: checkpoint.beat), up to which Prometheus
  may hold its scrapes. A turn that ended earlier but was read only now is placed just after.
  A run that never showed these families (killed before its push) bounds nothing: an
  unfinished history is saved with its bound (`state`) and carried on by the next run.
- The deltas are the registry's own (Registry.record_history), by series as stored, so
  history and scrapes agree on what a series is.

Pushing the same history twice is harmless: Prometheus keeps one of two identical samples.
"""

from __future__ import annotations

import json
import logging

from .. import saved_state
from .exposition import ExactSample
from .otlp_metrics import pushed_le
from .remote_write import RemoteWriteError, RemoteWriter

log = logging.getLogger("tailer")

GRID_MS = 300_000


def _key(name: str, labels: list) -> str:
    return json.dumps([name, sorted(map(list, labels))], separators=(",", ":"))


def history_from_state(data: object) -> dict | None:
    """An unfinished history as `History.state` gave it, checked; ValueError when damaged.

    Times are Unix ms; bases and amounts are exact whole numbers (exposition._exact) of
    their series' divisor.
    """
    if data is None:
        return None
    history = saved_state.mapping(data, "the history")
    saved_state.whole(history["not_before_ms"], "the history's first time")
    saved_state.whole(history["cutoff_ms"], "the history's last time")
    for key, base in saved_state.mapping(history["bases"], "the history's bases").items():
        _check_key(key)
        saved_state.whole(base, "a history base", saved_state.EXACT_BOUND)
    divisors = saved_state.mapping(history["divisors"], "the history's divisors")
    for key, changes in saved_state.mapping(history["changes"], "the history's changes").items():
        _check_key(key)
        saved_state.whole(divisors[key], "a history series' divisor", saved_state.EXACT_BOUND, 1)
        for change in saved_state.sequence(changes, "a series' history"):
            if type(change) is not list or len(change) != 2:
                raise ValueError("a history change is not [time, amount]")
            saved_state.whole(change[0], "a history change's time")
            saved_state.whole(change[1], "a history change's amount", saved_state.EXACT_BOUND)
    return history


def _check_key(key: str) -> None:
    """A series as `_key` names it: [metric name, [[label, value], ...]] as JSON text."""
    name, labels = json.loads(key)
    saved_state.text(name, "a history series' name")
    for pair in saved_state.sequence(labels, "a history series' labels"):
        if type(pair) is not list or len(pair) != 2:
            raise ValueError("a history series' label is not [name, value]")
        saved_state.text(pair[0], "a history label")
        saved_state.text(pair[1], "a history label value")


class History:
    """Historical change points waiting to be pushed, and the pushing."""

    def __init__(
        self,
        writer: RemoteWriter,
        labels: dict[str, str],
        *,
        bases: list[ExactSample],
        not_before_ms: int,
        cutoff_ms: int,
        saved: dict | None = None,
        le_as_pushed: bool = False,
    ):
        """`labels` are the ones Prometheus adds when it scrapes the tailer (job, instance):
        history and scrapes must be one series. `bases` are the series' values before
        history began (a restored checkpoint's); a series without one starts at zero. Turns
        that ended before `cutoff_ms` (this run's start) are history; later ones are live.
        `saved` is an unfinished history from a checkpoint (`state()`, read back by
        `history_from_state`), which carries on as it was.
        `le_as_pushed`: the series are the ones the metrics push makes (Prometheus's OTLP
        translation writes a whole-number bucket bound `1`, where a scrape stores `1.0`)."""
        self._writer = writer
        self._le_as_pushed = le_as_pushed
        self._labels = sorted(labels.items())
        saved = saved or {}
        self._not_before_ms = saved.get("not_before_ms", not_before_ms)
        self._cutoff_ms = saved.get("cutoff_ms", cutoff_ms)
        # Values are kept exact, as the registry keeps them (exposition._exact): a series'
        # last sample then equals its next scrape to the bit, whatever the reading order.
        self._bases: dict[str, int] = saved.get(
            "bases", {_key(name, lbls): value for name, lbls, value, _ in bases}
        )
        self._divisors: dict[str, int] = saved.get("divisors", {})
        # Per series: change time (ms) -> what the turns ending then added.
        self._changes: dict[str, dict[int, int]] = {
            key: {int(at): delta for at, delta in points}
            for key, points in saved.get("changes", {}).items()
        }

    @property
    def pending(self) -> bool:
        return bool(self._changes)

    @property
    def pending_series(self) -> int:
        """How many series have history waiting: the health gauge a dashboard turns red on
        while Prometheus has not taken it."""
        return len(self._changes)

    def takes(self, time_ms: int) -> bool:
        """Whether a turn that ended at `time_ms` belongs to history (else: count it live)."""
        return time_ms < self._cutoff_ms

    def record(self, time_ms: int, gained: list[ExactSample]) -> None:
        """What a turn that ended at `time_ms` (one history `takes`) added, sample by sample
        (Registry.record_history)."""
        time_ms = max(time_ms, self._not_before_ms + 2)  # room for a zero just before it
        for name, labels, delta, divisor in gained:
            key = _key(name, labels)
            points = self._changes.setdefault(key, {})
            points[time_ms] = points.get(time_ms, 0) + delta
            self._divisors[key] = divisor

    def state(self) -> dict:
        """What a checkpoint keeps until the push succeeded: the whole history as it began
        (its bound, cutoff and every series' base), even before it holds a change. A run
        killed before its push then leaves the next one this history to carry on, rather
        than one bounded by this run, of which Prometheus holds no count (scrapes leave the
        families out until the push), and based on counters that already hold its changes."""
        return {
            "not_before_ms": self._not_before_ms,
            "cutoff_ms": self._cutoff_ms,
            "bases": dict(self._bases),
            "divisors": {key: self._divisors[key] for key in self._changes},
            "changes": {key: sorted(points.items()) for key, points in self._changes.items()},
        }

    def ready(self, now_ms: int) -> bool:
        """Whether a push now could place its last sample after `not_before_ms`."""
        return now_ms > self._not_before_ms + 2

    def push(self, now_ms: int) -> bool:
        """Push everything pending; False when it should be tried again later.

        Every series' newest sample goes first, alone: Prometheus's head then starts at the
        push's moment and all the weeks before go to its out-of-order head. Sent oldest
        first into a Prometheus that holds nothing yet (a fresh central one), the history
        would make its in-order head span the whole month, and Prometheus would cut it into
        hundreds of blocks while the rest of the push arrives: that compaction beside
        out-of-order writes is where Prometheus 3.14 and 3.16 panic (docs/HISTORY.md,
        "Prometheus under the first start"). The newest samples come again with their
        series; Prometheus keeps one of two identical samples."""
        made: list[int] = []
        try:
            self._writer.push(self._newest(now_ms))  # a sample dropped here comes again below
            dropped = self._writer.push(self._all_series(now_ms, made))
        except RemoteWriteError as error:
            if error.retryable:
                log.warning("history: Prometheus did not take the history of %d series yet: %s",
                            len(self._changes), error)
                return False
            log.error("history: Prometheus refused the history of %d series, it is dropped: %s",
                      len(self._changes), error)
        else:
            log.info("history: pushed %d samples of %d series to Prometheus%s", sum(made) - dropped,
                     len(made), f" ({dropped} refused as too large)" if dropped else "")
        self._changes = {}
        return True

    def _all_series(self, now_ms: int, made: list[int]):
        """Each series' samples, made as the writer takes them: a month of a 5-minute grid
        over hundreds of series is millions of samples, too many to hold at once. `made`
        gets each series' sample count."""
        for key, points in self._changes.items():
            labels, samples = self._series(key, points, now_ms)
            made.append(len(samples))
            yield labels, samples

    def _newest(self, now_ms: int):
        """Each series' sample at the push's moment: its value once every change is in."""
        for key, points in self._changes.items():
            value = self._bases.get(key, 0) + sum(points.values())
            yield self._stored_labels(key), [(now_ms, value / self._divisors[key])]

    def _stored_labels(self, key: str) -> list:
        """The series' labels as Prometheus stores them: the scrape's job and instance added."""
        name, labels = json.loads(key)
        if self._le_as_pushed:
            labels = [(label, pushed_le(value) if label == "le" else value)
                      for label, value in labels]
        return [("__name__", name), *map(tuple, labels), *self._labels]

    def _series(self, key: str, points: dict[int, float], now_ms: int) -> tuple[list, list]:
        """The samples of one series: see the module docstring for which and why."""
        changes = sorted(points.items())
        divisor = self._divisors[key]
        value = self._bases.get(key, 0)
        samples = [(changes[0][0] - 1, value / divisor)]
        grid_at = (changes[0][0] // GRID_MS + 1) * GRID_MS
        for index, (at, delta) in enumerate(changes):
            next_at = changes[index + 1][0] if index + 1 < len(changes) else now_ms + 1
            value += delta
            samples.append((at, value / divisor))
            while grid_at < next_at and grid_at <= now_ms:
                if grid_at > at:
                    samples.append((grid_at, value / divisor))
                grid_at += GRID_MS
        if samples[-1][0] < now_ms:
            samples.append((now_ms, value / divisor))
        return self._stored_labels(key), samples
