"""`hydrafusion-tailer demo`: the daemon on a copy of the fixtures, replayed turn by turn.

The command layer (tailer/commands/cli.py) wires the demo to the daemon here; the daemon's loop
(tailer/daemon/service.py) knows nothing of it but a call before every pass (`on_pass`).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
from datetime import datetime, timezone
from pathlib import Path

from . import demo
from ..daemon import service
from ..daemon.config import Config
from ..printable import printable


def run_demo(config: Config, replay_interval_s: float) -> int:
    """Run the tailer on a copy of the fixtures, restamped to end a few minutes ago, and
    write one fixture turn into it every `replay_interval_s`.

    The copy is made once and kept beside the checkpoint (see demo_sessions), so a restarted
    demo carries on with the sessions its checkpoint counted instead of counting a fresh copy
    on top of them. Without the copy (a new volume, say) the demo starts over.
    """
    if not config.state_dir.is_dir():
        print(printable(f"hydrafusion-tailer demo: no fixtures at {config.state_dir}"), file=sys.stderr)
        return service.EXIT_USAGE
    return service.holding_checkpoint(
        config, lambda heartbeat: _run_demo(config, heartbeat, replay_interval_s))


def demo_sessions(checkpoint_path: Path) -> Path:
    """Where the demo keeps its copy of the fixtures: a folder named after its checkpoint."""
    return checkpoint_path.with_name(checkpoint_path.name + ".sessions")


def _run_demo(config: Config, heartbeat: service.Heartbeat, replay_interval_s: float) -> int:
    fixtures, work = config.state_dir, demo_sessions(config.checkpoint)
    try:
        if not work.is_dir():
            if os.path.lexists(work):  # the copy would be made, then fail to take its place
                raise ValueError(f"{work} is not a folder: move it away, or give another "
                                 "--checkpoint")
            # Made aside and renamed into place: a copy cut short is never carried on with.
            partial = work.with_name(work.name + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            demo.prepare(fixtures, partial, datetime.now(timezone.utc))
            os.replace(partial, work)
        replayer = demo.Replayer(work, fixtures, replay_interval_s)
    except (ValueError, OSError) as error:
        print(printable(f"hydrafusion-tailer demo: {error}"), file=sys.stderr)
        return service.EXIT_USAGE
    # The first turn is written before the logs are first listed: a polling watcher (no
    # inotify) would find its new session folder only at its next listing, after --once.
    replayer.tick()
    config = dataclasses.replace(config, state_dir=work, from_start=True)
    return service.run_holding(config, heartbeat, on_pass=replayer.tick)
