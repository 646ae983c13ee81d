"""The first start's history push, many times into a fresh Prometheus beside a CPU load.

Prometheus 3.14 twice panicked in a remote-write request at a first start (docs/HISTORY.md,
"Prometheus under the first start"). This counts, over many first starts of the month data
set (tests/test_month.py) into a fresh Prometheus with both cores busy beside it: the
panics in Prometheus's log, the pushes that did not finish, and the samples lost (pushed,
by the tailer's own count, but not stored). Long: behind HYDRAFUSION_LONG_TESTS=1.

    HYDRAFUSION_LONG_TESTS=1 python3 -m pytest -q -s tests/test_history_stress.py
    HYDRAFUSION_STRESS_STARTS=50 (how many first starts; 50 by default)
    HYDRAFUSION_PROMETHEUS=/path/to/prometheus (another release than the compose pin)
    HYDRAFUSION_STRESS_MONTH=/a/folder (keeps the month read there, for the next run)

The month is read once, by a tailer whose Prometheus is not there: it keeps the whole
history in its checkpoint, as a first start does until its push goes through. Each first
start then begins from a copy of that checkpoint, so it pushes the same history a first
start pushes, without reading the month again.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from prom import free_port, running_prometheus, single_value
from services import binary
from tailer.daemon import checkpoint
from tailerproc import running_tailer
from test_month import write_month

pytestmark = pytest.mark.skipif(os.environ.get("HYDRAFUSION_LONG_TESTS") != "1",
                                reason="long: HYDRAFUSION_LONG_TESTS=1")
STARTS = int(os.environ.get("HYDRAFUSION_STRESS_STARTS", "50"))
PUSH_TIMEOUT_S = 900
PUSHED = re.compile(r"history: pushed (\d+) samples of (\d+) series")
RETRY = "history: Prometheus did not take the history"
# The tailer serves no /metrics here: every hydrafusion sample Prometheus holds is history.
FAMILY = re.compile(r"hydrafusion_\w+")


@dataclass
class FirstStart:
    panicked: bool
    pushed: int | None  # None: the push never finished
    stored: int
    seconds: float

    @property
    def lost(self) -> int:
        return (self.pushed or 0) - self.stored


@contextmanager
def cpu_load(workers: int = 2):
    """Busy loops on every core, as a loaded laptop or CI machine has them."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(workers)]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def args(state, saved, url: str) -> tuple:
    return ("--state-dir", str(state), "--from-start", "--otlp-endpoint", "none",
            "--checkpoint", str(saved), "--history-url", f"{url}/api/v1/write",
            "--history-labels", "job=test,instance=tailer:9464")


@pytest.fixture(scope="module")
def month_read(tmp_path_factory):
    """The month's sessions, and a checkpoint holding their whole history, not pushed
    (read again unless HYDRAFUSION_STRESS_MONTH holds them from a run of the last hours:
    the month ends now, and its first day must stay inside the 31-day window)."""
    kept = os.environ.get("HYDRAFUSION_STRESS_MONTH")
    directory = Path(kept) if kept else tmp_path_factory.mktemp("month")
    state, saved = directory / "state", directory / "checkpoint.json"
    if saved.exists():
        return state, saved
    state.mkdir(parents=True)
    write_month(state)
    nowhere = f"http://127.0.0.1:{free_port()}"
    with running_tailer(directory, *args(state, saved, nowhere)) as tailer:
        tailer.wait_for_log(RETRY, timeout=900)
        assert tailer.stop() == 0
    assert checkpoint.load(saved)["history"]["changes"]
    return state, saved


def stored_samples(prom) -> int:
    """How many samples of the hydrafusion families Prometheus holds over the last 32 days
    (family by family: count_over_time drops the name, so series of two families can
    collide)."""
    with urllib.request.urlopen(f"{prom.url}/api/v1/label/__name__/values", timeout=30) as answer:
        names = [name for name in json.load(answer)["data"] if FAMILY.fullmatch(name)]
    return sum(int(single_value(prom.query(f"sum(count_over_time({name}[32d]))")) or 0)
               for name in names)


def first_start(tmp_path, state, saved) -> FirstStart:
    """One first start: a fresh Prometheus (nothing scraped: the history is the first thing
    its head sees, as at a central Prometheus), the month's history pushed into it."""
    began = time.monotonic()
    copy = tmp_path / "checkpoint.json"
    shutil.copy(saved, copy)
    with running_prometheus(tmp_path, [], extra_flags=["--web.enable-remote-write-receiver"],
                            extra_config={"storage": {"tsdb": {"out_of_order_time_window": "31d"}}},
                            ) as prom:
        with running_tailer(tmp_path, *args(state, copy, prom.url)) as tailer:
            try:
                [line] = tailer.wait_for_log(PUSHED.pattern, timeout=PUSH_TIMEOUT_S)
                pushed = int(PUSHED.search(line).group(1))
            except AssertionError:
                pushed = None
        seconds = time.monotonic() - began
        try:
            stored = stored_samples(prom)
        except (OSError, AssertionError):
            stored = 0  # Prometheus no longer answers
        return FirstStart("panic" in prom.log_path.read_text(errors="replace"), pushed, stored,
                          seconds)


def test_first_starts_under_load_neither_panic_nor_lose_a_sample(tmp_path_factory, month_read):
    state, saved = month_read
    starts = []
    with cpu_load():
        for number in range(STARTS):
            starts.append(first_start(tmp_path_factory.mktemp(f"start-{number}"), state, saved))
            print(f"start {number + 1}: {starts[-1]}", flush=True)
    print(f"{binary('prometheus')}: {len(starts)} first starts, "
          f"{sum(s.panicked for s in starts)} with a panic, "
          f"{sum(s.pushed is None for s in starts)} pushes unfinished, "
          f"{sum(s.lost for s in starts)} samples lost, "
          f"{min(s.seconds for s in starts):.0f}-{max(s.seconds for s in starts):.0f} s each")
    assert [s for s in starts if s.panicked or s.pushed is None or s.lost] == []
