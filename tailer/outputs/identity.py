"""Who this tailer is across restarts: an instance id made once and a start time for its
counters, both kept in the checkpoint.

The counters carry on from the checkpoint, so a restart must not tell a metrics backend
that a new instance began: the spans' and the pushed metrics' resource keep the same
`service.instance.id`, and the pushed counters the same start time.
"""

from __future__ import annotations

import os
import time

from .. import saved_state
from ..uuids import random_uuid

# The OpenTelemetry semantic conventions advise a UUID; a longer id is not one we made.
MAX_INSTANCE_ID = 200


class Identity:
    def __init__(self, saved: dict | None):
        """`saved`: `state()` of an earlier run, read back by `identity_from_state`."""
        saved = saved or {}
        self.is_new = not saved
        self.instance_id = saved.get("instance_id") or random_uuid(os.urandom(16))
        self.start_ns = int(saved.get("start_ns") or time.time_ns())

    def state(self) -> dict:
        return {"instance_id": self.instance_id, "start_ns": self.start_ns}

    def resource(self, resource: dict[str, str]) -> dict[str, str]:
        """resource with this id unless it names an instance itself."""
        return {"service.instance.id": self.instance_id, **resource}


def identity_from_state(data: object) -> dict | None:
    """What `Identity.state` gave, checked (the id is exported as it is); ValueError when
    damaged. None: a checkpoint from before identities were kept."""
    if data is None:
        return None
    identity = saved_state.mapping(data, "the identity")
    saved_state.text(identity["instance_id"], "the instance id", MAX_INSTANCE_ID)
    saved_state.whole(identity["start_ns"], "the counters' start time")
    return identity
