"""Warnings that cannot flood the tailer's log: any stage or output may use it."""

from __future__ import annotations

import logging
import time

log = logging.getLogger("tailer")


class WarningLimiter:
    """Logs the first warning of each kind, then at most one per kind per interval.

    The kind is chosen by the caller (e.g. file + reason), so one corrupt file cannot hide
    the first warning about another. Suppressed warnings are counted into the next one.
    """

    def __init__(self, interval: float = 60.0, clock=time.monotonic):
        self.interval = interval
        self.clock = clock
        self._last: dict[object, float] = {}
        self._suppressed: dict[object, int] = {}

    def warn(self, kind: object, message: str, *args: object) -> None:
        now = self.clock()
        last = self._last.get(kind)
        if last is not None and now - last < self.interval:
            self._suppressed[kind] = self._suppressed.get(kind, 0) + 1
            return
        self._last[kind] = now
        suppressed = self._suppressed.pop(kind, 0)
        if suppressed:
            message += f" (and {suppressed} more like it since the last warning)"
        log.warning(message, *args)
