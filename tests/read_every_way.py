"""Read a state folder the way `report --watch`'s first pass and the demo do, in this process,
and print what each found as one JSON object: tests/test_reading_parity.py runs it as a user
who is not root, so that modes deny what they say.

    python3 tests/read_every_way.py STATE_DIR WORK_DIR
"""

import json
import logging
import sys
from datetime import datetime, timezone
from pathlib import Path

from tailer.commands import demo
from tailer.copilot.files import session_logs
from tailer.report.live import LiveTurns
from tailer.report.read import Selection, SessionReader
from report_helpers import wanted_turns


class Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def watch_first_pass(state_dir: Path, warnings: Warnings) -> dict:
    warnings.messages = []
    live = LiveTurns(state_dir, Selection())
    try:
        live.poll(0.0)
    finally:
        live.close()
    return {"turns": sorted(row.fusion_id for row in live.turns if row.kind == "fusion"),
            "damaged": live.skipped()["damaged_lines"],
            "unreadable": live.skipped()["unreadable_logs"],
            "problems": sorted(set(warnings.messages) | set(live.reader.problems.values()))}


def demo_reading(state_dir: Path, work: Path, warnings: Warnings) -> dict:
    """What the demo reads of `state_dir` as its fixtures: the turns of the copy it makes."""
    warnings.messages = []
    demo.prepare(state_dir, work, datetime.now(timezone.utc))
    reader = SessionReader()
    turns = list(wanted_turns(session_logs(work), Selection(), reader))
    return {"turns": len([turn for turn in turns if not turn.ordinary]),
            "problems": sorted(warnings.messages)}


def main() -> None:
    state_dir, work = Path(sys.argv[1]), Path(sys.argv[2])
    warnings = Warnings()
    logging.getLogger("tailer").addHandler(warnings)
    print(json.dumps({"watch": watch_first_pass(state_dir, warnings),
                      "demo": demo_reading(state_dir, work, warnings)}))


if __name__ == "__main__":
    main()
