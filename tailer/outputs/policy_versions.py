"""The versions of the router's policy this tailer has seen: the first turn of each is logged.

The routing decision is served remotely and retuned without a CLI release, so a new
`policyVersion` on a resolved record is the only sign that the router changed (and with it
the pattern mix and the bill). The daemon logs one line the first time it sees a version
(logs.policy_line). "First" must hold across restarts, or every restart would announce
every version again: the versions seen are kept in the checkpoint (`state`, read back by
`policy_versions_from_state`). At most MAX_KEPT, the one seen longest ago forgotten first;
a forgotten version that comes back is new again, which after that many retunes is news.

The lines are bounded as the metric's label is (metrics.MAX_POLICY_VERSIONS): the first
MAX_LOGGED new versions each have their line; past them, a router retuned at every turn
(a fault, or a hostile log) would write a line per turn, so the new versions are counted
instead, into one line a day at most (logs.held_policies_line), written at the first turn
handed on a day or more after the last. What is counted and when the last such line was
written are kept in the checkpoint too, so a restart neither starts the N over nor writes
the day's line again.
"""

from __future__ import annotations

import logging
import time

from ..codes import VERSION
from ..saved_state import mapping, sequence, text, whole
from ..turns.assembly import Turn
from .logs import held_policies_line, policy_line
from .metrics import MAX_POLICY_VERSIONS

log = logging.getLogger("tailer")

MAX_KEPT = 256
MAX_LOGGED = MAX_POLICY_VERSIONS
HELD_LINE_EVERY_S = 86_400
LAST_SECOND = 253_402_300_799  # 9999-12-31T23:59:59Z: the last time a line can name


class PolicyVersions:
    def __init__(self, saved: dict | None = None, clock=time.time):
        """`saved`: `state()` of an earlier run, read back by `policy_versions_from_state`;
        `clock`: the wall clock (the day between counted lines spans restarts)."""
        saved = saved or {}
        self._seen = dict.fromkeys(saved.get("seen", ()))  # in the order first seen
        self._logged = saved.get("logged", 0)  # versions logged one by one, up to MAX_LOGGED
        self._held = saved.get("held", 0)  # new versions past those, not in a line yet
        self._newest_held: str | None = saved.get("newest")
        self._held_line_s = saved.get("held_line_s", 0)  # the last counted line; 0: none
        self._clock = clock

    def note(self, turn: Turn) -> str | None:
        """The turn's policy version if it is one not seen before, else None. Logged: its
        own line, or counted into the day's line (which any turn may be the one to write)."""
        version = turn.resolved.policy_version if turn.resolved is not None else None
        new = version is not None and version not in self._seen
        if new:
            self._seen[version] = None
            if len(self._seen) > MAX_KEPT:
                del self._seen[next(iter(self._seen))]
            if self._logged < MAX_LOGGED:
                self._logged += 1
                log.info("%s", policy_line(turn))
            else:
                self._held += 1
                self._newest_held = version
        if self._held:
            self._log_held()
        return version if new else None

    def _log_held(self) -> None:
        now = self._clock()
        if 0 <= now - self._held_line_s < HELD_LINE_EVERY_S:
            return  # a last line ahead of the clock (set back, or a damaged save) holds none
        log.info("%s", held_policies_line(self._held, self._newest_held, MAX_LOGGED,
                                          since_s=self._held_line_s or None))
        self._held, self._newest_held, self._held_line_s = 0, None, int(now)

    def state(self) -> dict:
        return {"seen": list(self._seen), "logged": self._logged, "held": self._held,
                "newest": self._newest_held, "held_line_s": self._held_line_s}


def policy_versions_from_state(data: object) -> dict | None:
    """What `PolicyVersions.state` gave, checked (a version is logged as it is); ValueError
    when damaged. None: a checkpoint from before the versions were kept. A list: one from
    before the lines were bounded, its versions all logged."""
    if data is None:
        return None
    if type(data) is list:
        seen = _versions(data)
        return {"seen": seen, "logged": min(len(seen), MAX_LOGGED)}
    data = mapping(data, "the router's policy versions")
    held = whole(data.get("held"), "the router's policy versions not logged")
    newest = data.get("newest")
    if (newest is None) != (held == 0):
        raise ValueError("the newest policy version not logged does not match their count")
    return {"seen": _versions(data.get("seen")),
            "logged": whole(data.get("logged"), "the router's policy versions logged", MAX_LOGGED),
            "held": held, "newest": None if newest is None else _version(newest),
            "held_line_s": whole(data.get("held_line_s"), "the time of the last policy line",
                                 LAST_SECOND)}


def _versions(data: object) -> list[str]:
    versions = sequence(data, "the router's policy versions")
    if len(versions) > MAX_KEPT:
        raise ValueError(f"the router's policy versions are more than {MAX_KEPT}")
    return [_version(version) for version in versions]


def _version(value: object) -> str:
    if not VERSION.is_code(text(value, "a router's policy version", 64)):
        raise ValueError("a router's policy version is no version code")
    return value
