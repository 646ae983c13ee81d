"""A real tailer process against endpoints that misbehave: SIGTERM ends it within 10 s,
the checkpoint saved first, and a slow remote write does not hold up reading.

Every sender points at the same broken endpoint (spans, the CLI's relay with --cli-otel
on, the metrics push, remote write), and SIGTERM comes once each of them has a request
under way.
"""

import signal
import subprocess
import time
from datetime import datetime, timedelta, timezone

import pytest

from bad_endpoint import BadEndpoint, answer, hang, reset, trickle
from sessiongen import SessionWriter, every_pattern
from tailer.daemon import checkpoint
from tailerproc import running_tailer
from test_cli_otel_delivery import export_lines

STOP_BOUND_S = 10.0

BEHAVIOURS = {
    "no answer": hang,
    "one byte every 0.5 s": trickle(0.5),
    "429 with Retry-After 30": answer(429, headers=(("Retry-After", "30"),)),
    "reset": reset,
}


def sessions_and_export(tmp_path):
    state, export = tmp_path / "state", tmp_path / "otel" / "copilot-otel.jsonl"
    state.mkdir()
    export.parent.mkdir()
    every_pattern("s").write(state)
    export.write_text("".join(line + "\n" for line in export_lines(20)))
    return state, export.parent


def stop_and_time(tailer) -> tuple[float, int]:
    signalled = time.monotonic()
    tailer.process.send_signal(signal.SIGTERM)
    try:
        code = tailer.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        tailer.process.kill()
        raise AssertionError(f"still running 30 s after SIGTERM:\n{tailer.log()}")
    return time.monotonic() - signalled, code


@pytest.mark.parametrize("behaviour", BEHAVIOURS.values(), ids=BEHAVIOURS.keys())
def test_sigterm_stops_the_tailer_within_10_s_whatever_the_endpoints_do(tmp_path, behaviour):
    state, export = sessions_and_export(tmp_path)
    cp = tmp_path / "cp.json"
    with BadEndpoint(behaviour) as endpoint:
        args = ("--state-dir", str(state), "--checkpoint", str(cp), "--from-start",
                "--cli-otel", str(export), "--otlp-endpoint", endpoint.url,
                "--otlp-metrics-endpoint", endpoint.url, "--otlp-metrics-interval", "1",
                "--history-url", endpoint.url + "/api/v1/write",
                "--history-labels", "job=t,instance=i")
        with running_tailer(tmp_path, *args) as tailer:
            deadline = time.monotonic() + 30
            while {"/v1/traces", "/v1/metrics", "/api/v1/write"} - {r.path for r in endpoint.requests}:
                assert time.monotonic() < deadline, f"not every sender posted: {endpoint.requests}"
                time.sleep(0.1)
            signalled_ms = time.time_ns() // 1_000_000
            took, code = stop_and_time(tailer)
            log = tailer.log()
    assert took < STOP_BOUND_S, f"{took:.1f} s after SIGTERM:\n{log}"
    assert code == 0, log
    saved = checkpoint.load(cp)
    assert saved["stopped"] is True and saved["published_at_ms"] >= signalled_ms
    assert saved["pending"], "the spans not delivered are kept for the next run"


def test_a_trickling_remote_write_does_not_stop_new_turns_from_being_read(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    every_pattern("old", datetime.now(timezone.utc) - timedelta(days=2)).write(state)
    with BadEndpoint(trickle(0.5)) as prometheus:
        args = ("--state-dir", str(state), "--checkpoint", str(tmp_path / "cp.json"),
                "--from-start", "--otlp-endpoint", "none",
                "--history-url", prometheus.url + "/api/v1/write",
                "--history-labels", "job=t,instance=i")
        with running_tailer(tmp_path, *args) as tailer:
            prometheus.wait_for_requests(1)  # the history push, answered a byte at a time
            live = SessionWriter("live", datetime.now(timezone.utc) - timedelta(minutes=1))
            live.single("gpt-5.6-sol")
            live.write(state)
            # Read while the push still trickles: its deadline is 30 s away.
            tailer.wait_for_log(live.expected[0].fusion_id[:20], timeout=10)
            assert "history: pushed" not in tailer.log()
            took, code = stop_and_time(tailer)
    assert took < STOP_BOUND_S and code == 0
