"""A first start that survives Prometheus: killed (-9), restarted or gone during the push.

The month data set (tests/test_month.py) is read once for the module, by a first start
whose Prometheus is not there yet: it keeps the whole history in its checkpoint, as every
first start does until its push goes through. Each case starts the tailer again from a copy
of that checkpoint, aimed at the real Prometheus, so it pushes the same history without
reading the month again. While the push is under way (Prometheus has stored some of its
requests), Prometheus is killed with -9 or stopped cleanly, and started again on its data
once the push has failed. The tailer tries the whole push again (Prometheus keeps one of two identical samples) and
every window's figures are the truth. A Prometheus that stays down leaves the tailer
running and retrying, the history kept in its checkpoint and out of its scrapes, and its
health gauge hydrafusion_tailer_history_pending_series above 0; stopped and started again
once Prometheus is back, it pushes the same history: the truth again, and the gauge at 0.
"""

import re
import shutil
import time
import urllib.request

import pytest

from prom import free_port
from tailer.daemon import checkpoint
from tailerproc import running_tailer
from test_month import check_month, month_prometheus, tailer_args, wait_for_the_month

WRITES = re.compile(r'^prometheus_http_requests_total\{code="204",handler="/api/v1/write"\} (\d+)', re.M)
RETRY = "history: Prometheus did not take the history"
WAITING = re.compile(r"^hydrafusion_tailer_history_pending_series (\S+)$", re.M)


@pytest.fixture(scope="module")
def month_read(tmp_path_factory, month):
    """The month's sessions, their turns, and a checkpoint holding their whole history not
    yet pushed: what a first start whose Prometheus is not there keeps."""
    state, turns = month
    directory = tmp_path_factory.mktemp("month-read")
    saved = directory / "checkpoint.json"
    nowhere = free_port()  # nothing listens there
    args = ("--state-dir", str(state), "--from-start", "--otlp-endpoint", "none",
            "--checkpoint", str(saved), "--history-url", f"http://127.0.0.1:{nowhere}/api/v1/write",
            "--history-labels", f"job=test,instance=127.0.0.1:{nowhere}")
    with running_tailer(directory, *args) as tailer:
        tailer.wait_for_log(RETRY, timeout=900)
        assert tailer.stop() == 0
    assert checkpoint.load(saved)["history"]["changes"]
    return state, turns, saved


def first_start_checkpoint(tmp_path, month_read):
    """A copy of the month's unpushed checkpoint, this case's own to change."""
    *_, saved = month_read
    copy = tmp_path / "checkpoint.json"
    shutil.copy(saved, copy)
    return copy


def stored_writes(prom) -> int:
    """How many remote-write requests Prometheus has stored so far (its own /metrics)."""
    with urllib.request.urlopen(f"{prom.url}/metrics", timeout=10) as response:
        found = WRITES.search(response.read().decode())
    return int(found.group(1)) if found else 0


def wait_for_the_push_under_way(prom, tailer, requests: int = 5) -> None:
    """Until Prometheus has stored `requests` of the push's requests, the push not over."""
    while stored_writes(prom) < requests:
        assert "history: pushed" not in tailer.log(), "the push ended before Prometheus went down"
        assert tailer.process.poll() is None, tailer.log()
        time.sleep(0.05)


def series_waiting(tailer) -> float:
    """The tailer's own count of series whose history Prometheus has not taken yet."""
    (value,) = WAITING.findall(tailer.metrics())
    return float(value)


@pytest.mark.parametrize("kill", [True, False], ids=["kill -9", "clean restart"])
def test_prometheus_down_during_the_push_then_back_gets_the_whole_history(tmp_path, month_read, kill):
    state, turns, _ = month_read
    port = free_port()
    with month_prometheus(tmp_path, port) as prom:
        args = tailer_args(state, first_start_checkpoint(tmp_path, month_read), prom, port)
        with running_tailer(tmp_path, *args, metrics_port=port) as tailer:
            wait_for_the_push_under_way(prom, tailer)
            prom.stop(kill=kill)
            # Down until the push failed: back within a second, Prometheus could slip in
            # between two of the push's requests unseen, as it did beside a CPU load.
            tailer.wait_for_log(RETRY, timeout=60)
            prom.start()
            wait_for_the_month(tailer, prom, turns)
            check_month(prom, turns)
            assert "panic" not in prom.log_path.read_text(errors="replace")


def test_a_prometheus_that_stays_down_leaves_the_tailer_running_and_nothing_lost(tmp_path, month_read):
    state, turns, _ = month_read
    port = free_port()
    saved = first_start_checkpoint(tmp_path, month_read)
    with month_prometheus(tmp_path, port) as prom:
        args = tailer_args(state, saved, prom, port)
        with running_tailer(tmp_path, *args, metrics_port=port) as tailer:
            wait_for_the_push_under_way(prom, tailer)
            prom.stop(kill=True)
            # Retried after 5 s, then 10 s: still running, the history still waiting in the
            # checkpoint, said so on /metrics, and no count of it in the scrapes.
            tailer.wait_for_log(RETRY, count=2, timeout=60)
            history = checkpoint.load(saved)["history"]
            assert history is not None and history["changes"]
            assert series_waiting(tailer) == len(history["changes"])
            assert not re.search(r"^hydrafusion_turns_total\{", tailer.metrics(), re.M)
            assert tailer.stop() == 0
        assert checkpoint.load(saved)["history"]["changes"] == history["changes"]
        prom.start()
        with running_tailer(tmp_path, *args, metrics_port=port) as tailer:
            wait_for_the_month(tailer, prom, turns)  # the pushed history alone may show it
            tailer.wait_for_metrics("\nhydrafusion_tailer_history_pending_series 0", timeout=60)
            check_month(prom, turns)
