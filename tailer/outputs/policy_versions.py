"""The versions of the router's policy this tailer has seen: the first turn of each is logged.

The routing decision is served remotely and retuned without a CLI release, so a new
`policyVersion` on a resolved record is the only sign that the router changed (and with it
the pattern mix and the bill). The daemon logs one line the first time it sees a version
(logs.policy_line). "First" must hold across restarts, or every restart would announce
every version again: the versions seen are kept in the checkpoint (`state`, read back by
`policy_versions_from_state`). At most MAX_KEPT, the one seen longest ago forgotten first;
a forgotten version that comes back is logged again, which after that many retunes is news.
"""

from __future__ import annotations

import logging

from ..codes import VERSION
from ..saved_state import sequence, text
from ..turns.assembly import Turn
from .logs import policy_line

log = logging.getLogger("tailer")

MAX_KEPT = 256


class PolicyVersions:
    def __init__(self, saved: list[str] | None = None):
        """`saved`: `state()` of an earlier run, read back by `policy_versions_from_state`."""
        self._seen = dict.fromkeys(saved or ())  # in the order first seen

    def note(self, turn: Turn) -> str | None:
        """The turn's policy version if it is one not seen before (and logged), else None."""
        version = turn.resolved.policy_version if turn.resolved is not None else None
        if version is None or version in self._seen:
            return None
        self._seen[version] = None
        if len(self._seen) > MAX_KEPT:
            del self._seen[next(iter(self._seen))]
        log.info("%s", policy_line(turn))
        return version

    def state(self) -> list[str]:
        return list(self._seen)


def policy_versions_from_state(data: object) -> list[str] | None:
    """What `PolicyVersions.state` gave, checked (a version is logged as it is); ValueError
    when damaged. None: a checkpoint from before the versions were kept."""
    if data is None:
        return None
    versions = sequence(data, "the router's policy versions")
    if len(versions) > MAX_KEPT:
        raise ValueError(f"the router's policy versions are more than {MAX_KEPT}")
    for version in versions:
        if not VERSION.is_code(text(version, "a router's policy version", 64)):
            raise ValueError("a router's policy version is no version code")
    return versions
