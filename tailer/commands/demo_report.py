"""`hydrafusion-tailer report --demo`: the report on a fresh copy of the example sessions.

Apart from the daemon's demo (demo_run.py), so that the report's demo loads no daemon.
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from . import demo, stops
from ..report import command as report


def report_demo(args, environ: dict[str, str]) -> int:
    """`report --demo`: the report on a fresh copy of the fixtures, moved to end now; with
    --watch a fixture turn is replayed now and then, as the daemon's demo does. The
    options are checked first, so a wrong one is refused before anything is copied."""
    try:
        report.checked(args, datetime.now(timezone.utc))
    except ValueError as error:
        return report.refused(error)
    if args.jobs is None:
        # The example sessions are a few hundred KB: reading them here is quicker than
        # starting worker processes (and importing what they need).
        args = argparse.Namespace(**{**vars(args), "jobs": 1})
    # Made and removed with the stops held (commands/stops.py): one that came between making
    # the folder and keeping its name would leave it, as would one in shutil.rmtree.
    work = None
    try:
        with stops.held():
            work = tempfile.mkdtemp(prefix="hydrafusion-demo-")
        state_dir = Path(work, "session-state")
        demo.prepare(demo.FIXTURES, state_dir, datetime.now(timezone.utc), keep_session_ids=True)
        replay = None
        if args.watch:
            replay = demo.Replayer(state_dir, demo.FIXTURES, rng=random.Random(demo.REPORT_SEED)).tick
            replay()  # before the first listing, as the daemon's demo does (demo_run.run_demo)
        return report.main(args, environ, state_dir=state_dir, on_pass=replay)
    finally:
        if work is not None:
            try:
                with stops.held():
                    shutil.rmtree(work, ignore_errors=True)
            except KeyboardInterrupt:  # the first stop alone raises: the second try is whole
                shutil.rmtree(work, ignore_errors=True)
                raise
