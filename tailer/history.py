"""Turns read at start-up, counted in Prometheus at the times they happened.

Prometheus takes a scrape's values as "now", so turns the tailer reads when it starts (weeks
of past sessions, or what happened while it was stopped) would all land in one spike at
start-up, and every ratio over a past window would be wrong. Instead, the counters those
turns touch are pushed to Prometheus's remote-write receiver as they stood over time: one
sample per series every GRID_MS from just before the series' first historical turn up to
now, where the scrapes take over from the same totals, so there is no jump and no reset.
Prometheus must accept samples that old: its TSDB out-of-order window has to cover the
backfill horizon (prometheus/prometheus.yml).

Why a grid and not one sample per turn: increase() and rate() look only at the samples
inside their window and extrapolate to its edges, so a sparse series reads wrong over most
windows. A regular grid reads like a scrape every GRID_MS: a window whose edges fall on the
grid (a day, an hour, five minutes) is exact; any other window is off by at most one grid
step at each edge, as it would be for live data with that scrape interval.

Samples are never placed at or before the moment the previous run last published values
(`not_before_ms`): Prometheus may hold scrapes from then, and a later sample with a smaller
value would read as a counter reset. Turns from before that moment that were read again
(they were counted but not yet saved when the tailer stopped) are placed just after it.

Pushing the same history twice is harmless: Prometheus keeps one of two identical samples.
"""

from __future__ import annotations

import json
import logging

from .remote_write import RemoteWriteError, RemoteWriter

log = logging.getLogger("tailer")

GRID_MS = 300_000

Sample = tuple[str, list, float]  # (sample name, [(label, value), ...], value), as exposition gives


def _key(name: str, labels: list) -> str:
    return json.dumps([name, sorted(map(list, labels))], separators=(",", ":"))


class History:
    """Historical change points waiting to be pushed, and the pushing."""

    def __init__(
        self,
        writer: RemoteWriter,
        labels: dict[str, str],
        *,
        bases: list[Sample],
        not_before_ms: int,
        now_ms: int,
        saved: dict | None = None,
    ):
        """`labels` are the ones Prometheus adds when it scrapes the tailer (job, instance):
        history and scrapes must be one series. `bases` are the series' values before
        history began (a restored checkpoint's); a series without one starts at zero."""
        self._writer = writer
        self._labels = sorted(labels.items())
        saved = saved or {}
        self._not_before_ms = saved.get("not_before_ms", not_before_ms)
        # Turns after the last grid point before start-up are left to the scrapes.
        self._cutoff_ms = saved.get("cutoff_ms", now_ms // GRID_MS * GRID_MS)
        self._bases: dict[str, float] = saved.get(
            "bases", {_key(name, lbls): value for name, lbls, value in bases}
        )
        self._changes: dict[str, list[list]] = saved.get("changes", {})

    @property
    def pending(self) -> bool:
        return bool(self._changes)

    def takes(self, time_ms: int) -> bool:
        """Whether a turn that ended at `time_ms` belongs to history (else: count it live)."""
        return max(time_ms, self._not_before_ms + 1) <= self._cutoff_ms

    def record(self, time_ms: int, before: list[Sample], after: list[Sample]) -> None:
        """What a turn that ended at `time_ms` (one history `takes`) added to these series.

        Kept as differences: turns are read session by session, not in time order, so a
        series' value at a time is its base plus what the turns up to then added.
        """
        time_ms = max(time_ms, self._not_before_ms + 1)
        for (name, labels, old), (_, _, new) in zip(before, after):
            if new != old:
                self._changes.setdefault(_key(name, labels), []).append([time_ms, new - old])

    def state(self) -> dict | None:
        """What a checkpoint keeps until the push succeeded."""
        if not self._changes:
            return None
        return {
            "not_before_ms": self._not_before_ms,
            "cutoff_ms": self._cutoff_ms,
            "bases": {key: self._bases[key] for key in self._changes if key in self._bases},
            "changes": self._changes,
        }

    def push(self, now_ms: int) -> bool:
        """Push everything pending; False when it should be tried again later."""
        series = [self._series(key, changes, now_ms) for key, changes in self._changes.items()]
        samples = sum(len(points) for _, points in series)
        try:
            self._writer.push(series)
        except RemoteWriteError as error:
            if error.retryable:
                log.warning("history: Prometheus did not take %d samples yet: %s", samples, error)
                return False
            log.error("history: Prometheus refused %d samples, they are dropped: %s", samples, error)
        else:
            log.info("history: pushed %d samples of %d series to Prometheus", samples, len(series))
        self._changes = {}
        return True

    def _series(self, key: str, changes: list[list], now_ms: int) -> tuple[list, list]:
        name, labels = json.loads(key)
        changes = sorted(changes, key=lambda change: change[0])
        base = self._bases.get(key, 0.0)
        # The last grid point before the first change carries the value from before it,
        # unless that point is not after the previous run's last publish.
        start = (changes[0][0] - 1) // GRID_MS * GRID_MS
        if start <= self._not_before_ms:
            start = (self._not_before_ms // GRID_MS + 1) * GRID_MS
        end = now_ms // GRID_MS * GRID_MS
        points, value, index = [], base, 0
        if key not in self._bases and start > changes[0][0]:
            # A new series must still be seen at zero first (see metrics' "zero first").
            points.append((self._not_before_ms + 1, 0.0))
        for at in range(start, end + 1, GRID_MS):
            while index < len(changes) and changes[index][0] <= at:
                value += changes[index][1]
                index += 1
            points.append((at, value))
        return [("__name__", name), *map(tuple, labels), *self._labels], points
