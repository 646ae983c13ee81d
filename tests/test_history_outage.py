"""A first start that survives Prometheus: killed (-9), restarted or gone during the push.

The month data set (tests/test_month.py) is read at start-up and its history pushed into
the real Prometheus; while the push is under way (Prometheus has stored some of its
requests), Prometheus is killed with -9 or stopped cleanly, and started again on its data.
The tailer tries the whole push again (Prometheus keeps one of two identical samples) and
every window's figures are the truth. A Prometheus that stays down leaves the tailer
running and retrying, the history kept in its checkpoint and out of its scrapes; stopped
and started again once Prometheus is back, it pushes the same history: the truth again.
"""

import re
import urllib.request

import pytest

from prom import free_port
from tailer.daemon import checkpoint
from tailerproc import running_tailer
from test_month import check_month, month, month_prometheus, tailer_args, wait_for_the_month  # noqa: F401

WRITES = re.compile(r'^prometheus_http_requests_total\{code="204",handler="/api/v1/write"\} (\d+)', re.M)
RETRY = "history: Prometheus did not take the history"


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


@pytest.mark.parametrize("kill", [True, False], ids=["kill -9", "clean restart"])
def test_prometheus_down_during_the_push_then_back_gets_the_whole_history(tmp_path, month, kill):
    state, turns = month
    port = free_port()
    with month_prometheus(tmp_path, port) as prom:
        args = tailer_args(state, tmp_path / "checkpoint.json", prom, port)
        with running_tailer(tmp_path, *args, metrics_port=port) as tailer:
            wait_for_the_push_under_way(prom, tailer)
            prom.restart(kill=kill)
            wait_for_the_month(tailer, prom, turns)
            assert RETRY in tailer.log()
            check_month(prom, turns)
            assert "panic" not in prom.log_path.read_text(errors="replace")


def test_a_prometheus_that_stays_down_leaves_the_tailer_running_and_nothing_lost(tmp_path, month):
    state, turns = month
    port = free_port()
    saved = tmp_path / "checkpoint.json"
    with month_prometheus(tmp_path, port) as prom:
        args = tailer_args(state, saved, prom, port)
        with running_tailer(tmp_path, *args, metrics_port=port) as tailer:
            wait_for_the_push_under_way(prom, tailer)
            prom.stop(kill=True)
            # Retried after 5 s, then 10 s: still running, the history still waiting in the
            # checkpoint, and no count of it in the scrapes.
            tailer.wait_for_log(RETRY, count=2, timeout=60)
            history = checkpoint.load(saved)["history"]
            assert history is not None and history["changes"]
            assert not re.search(r"^hydrafusion_turns_total\{", tailer.metrics(), re.M)
            assert tailer.stop() == 0
        assert checkpoint.load(saved)["history"]["changes"] == history["changes"]
        prom.restart(kill=False)
        with running_tailer(tmp_path, *args, metrics_port=port) as tailer:
            wait_for_the_month(tailer, prom, turns)
            check_month(prom, turns)
