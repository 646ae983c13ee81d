"""Write checkpoint.json the way main wrote it on 2026-12-01 (commit 5ef4d2c), for
tests/test_session_state.py: a checkpoint from before the reading stage owned its saved state.

Run once with main's code, from a checkout of that commit:

    PYTHONPATH=. python3 tests/data/checkpoint-main/make.py

It leaves, beside itself: `alive/events.jsonl`, a session's whole log, of which the
checkpoint has read the first CUT lines (the cut falls inside a critique turn, so that turn
is open in the checkpoint); and `checkpoint.json`, which also holds a tombstone: a session
whose folder vanished with a turn still open.
"""

import json
import shutil
import tempfile
from pathlib import Path

from tailer.daemon import checkpoint
from tailer.turns.sessions import Tailer
from tailer.outputs.exposition import Registry
from tailer.outputs.metrics import Metrics
from tests.sessiongen import START, SessionWriter

HERE = Path(__file__).resolve().parent
GONE_AT = 1_800_000_000.0


def main() -> None:
    alive = SessionWriter("alive", START)
    alive.single("gpt-5.6-sol")
    alive.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="reject")
    cut = len(alive.lines()) + 6  # the critique's routing, prompt and first events
    alive.critique("mai-code-1.1-flash", ["gpt-5.6-sol", "claude-opus-5"])
    alive.ordinary("gpt-5.6-sol")
    gone = SessionWriter("gone", START)
    gone.single("gpt-5.6-sol")
    gone.incomplete("mai-code-1.1-flash", "gpt-5.6-sol")
    (HERE / "alive").mkdir(exist_ok=True)
    (HERE / "alive" / "events.jsonl").write_text("".join(f"{line}\n" for line in alive.lines()))
    with tempfile.TemporaryDirectory() as temp:
        state_dir = Path(temp)
        (state_dir / "alive").mkdir()
        (state_dir / "alive" / "events.jsonl").write_text(
            "".join(f"{line}\n" for line in alive.lines()[:cut]))
        gone.write(state_dir)
        metrics = Metrics(Registry())
        tailer = Tailer(state_dir, metrics=metrics, from_start=True, idle_timeout_s=1e9,
                        clock=lambda: GONE_AT)
        try:
            for turn in tailer.poll().turns:
                metrics.count_turn(turn)
            shutil.rmtree(state_dir / "gone")
            tailer.poll()
            reading = tailer.state()
        finally:
            tailer.close()
    assert reading["sessions"]["gone"]["gone_at"] == GONE_AT
    assert reading["sessions"]["alive"]["open"] and reading["sessions"]["gone"]["open"]
    checkpoint.save(HERE / "checkpoint.json", {**reading, "metrics": metrics.registry.snapshot(),
                                               "pending": [], "published_at_ms": 1_700_000_000_000})
    print(json.dumps({sid: len(s["finished"]) for sid, s in reading["sessions"].items()}), cut)


if __name__ == "__main__":
    main()
