"""The tailer as users run it: a real process, a temporary state dir, a local OTLP receiver."""

import json
import os
import re
import signal
import time
from collections import Counter
from datetime import timedelta

import pytest

from otlp_sink import OtlpSink, Reply, plain_attributes
from prom import free_port
from sessiongen import START, SessionWriter, every_pattern
from tailerproc import run_once, running_tailer, tailer_env
from tailer.daemon.service import Textfile
from tailer.outputs.exposition import Registry

TURN_LINE = re.compile(
    r"INFO fusion (\S{1,20}) pattern=(\S+) phases=(\d+) models=(\S+) aiu=(\d+\.\d\d)$")


def write_sessions(state_dir, count=3):
    expected = []
    for index in range(count):
        writer = every_pattern(f"session-{index}", START + timedelta(hours=index))
        writer.write(state_dir)
        expected += writer.expected
    return expected


def metric_samples(text, name):
    """{frozenset(labels): value} for one family in an exposition."""
    samples = {}
    for line in text.splitlines():
        match = re.fullmatch(rf"{name}(?:\{{(.*)\}})? (\S+)", line)
        if match:
            labels = frozenset(re.findall(r'(\w+)="([^"]*)"', match.group(1) or ""))
            samples[labels] = float(match.group(2))
    return samples


def test_once_exports_every_turn_counts_it_and_logs_it(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    expected = write_sessions(state)
    textfile = tmp_path / "hydrafusion.prom"
    with OtlpSink() as sink:
        result = run_once("--state-dir", str(state), "--otlp-endpoint", sink.endpoint,
                          "--textfile", str(textfile), "--metrics-address", "none")
        assert result.returncode == 0, result.stderr
        spans = sink.spans()

    roots = [s for s in spans if "parentSpanId" not in s]
    assert sorted(plain_attributes(r["attributes"])["hydrafusion.fusion_id"] for r in roots) == \
        sorted(t.fusion_id for t in expected)
    legs = [s for s in spans if "hydrafusion.phase.id" in plain_attributes(s["attributes"])
            and not s["name"].startswith(("chat ", "execute_tool "))]
    assert len(legs) == sum(len(t.legs) for t in expected)
    assert {s["resource"]["service.name"] for s in spans} == {"hydrafusion"}

    logged = [TURN_LINE.search(line) for line in result.stderr.splitlines()
              if " fusion fusion-" in line]
    assert len(logged) == len(expected)
    for truth in expected:
        line = next(line for line in result.stderr.splitlines()
                    if f"fusion {truth.fusion_id[:20]} " in line)
        assert f"pattern={truth.pattern} phases={len(truth.legs)} " in line
        assert f"models={','.join(truth.models)} aiu={truth.nano_aiu / 1e9:.2f}" in line
    completed = [t for t in expected if t.outcome == "completed"]
    assert sum(bool(match) for match in logged) == len(completed)
    assert re.search(r"INFO hydrafusion-tailer \S+: state dir .*, 3 sessions, .*OTLP http://",
                     result.stderr)

    exposition = textfile.read_text()
    turns = metric_samples(exposition, "hydrafusion_turns_total")
    by_outcome = Counter(t.outcome for t in expected)
    for outcome, count in by_outcome.items():
        assert sum(v for k, v in turns.items() if ("outcome", outcome) in k) == count
    aiu = metric_samples(exposition, "hydrafusion_aiu_total")
    for model in {leg.model for t in expected for leg in t.legs}:
        truth = sum(leg.nano_aiu for t in expected for leg in t.legs if leg.model == model)
        got = sum(v for k, v in aiu.items() if ("model", model) in k)
        assert got == pytest.approx(truth / 1e9, rel=1e-12)
    assert sum(aiu.values()) == pytest.approx(sum(t.nano_aiu for t in expected) / 1e9)
    failures = metric_samples(exposition, "hydrafusion_route_failures_total")
    assert failures == {frozenset({("reason", "transport")}): 3}


def roots(spans) -> list[str]:
    return sorted(plain_attributes(span["attributes"])["hydrafusion.fusion_id"]
                  for span in spans if "parentSpanId" not in span)


def test_once_waits_out_a_collectors_retry_after_and_delivers_every_turn(tmp_path):
    """Three 503s asking to come back in a second: a cron job's --once run waits them out
    (1 + 2 + 4 s: a Retry-After is never below the backoff's step) and delivers."""
    state = tmp_path / "state"
    state.mkdir()
    expected = write_sessions(state, count=1)
    with OtlpSink() as sink:
        sink.script(*[Reply(503, retry_after="1")] * 3)
        result = run_once("--state-dir", str(state), "--otlp-endpoint", sink.endpoint,
                          "--checkpoint", str(tmp_path / "cp.json"))
        spans = sink.spans()
    assert result.returncode == 0, result.stderr
    assert roots(spans) == sorted(turn.fusion_id for turn in expected)
    assert len(sink.raw_bodies) == 4


def test_once_stops_waiting_at_its_timeout_and_keeps_what_is_left(tmp_path):
    """A collector that asks for an hour: the run waits --once-timeout, not the hour (nor
    the 60 s the exporter waits at most), exits 1 and keeps the spans for the next run."""
    state = tmp_path / "state"
    state.mkdir()
    expected = write_sessions(state, count=1)
    args = ("--state-dir", str(state), "--checkpoint", str(tmp_path / "cp.json"))
    with OtlpSink() as sink:
        sink.script(*[Reply(503, retry_after="3600")] * 100)
        refused = run_once(*args, "--otlp-endpoint", sink.endpoint, "--once-timeout", "2",
                           timeout=40)
        assert refused.returncode == 1, refused.stderr
        assert "kept for the next run" in refused.stderr and sink.spans() == []
    with OtlpSink() as sink:
        again = run_once(*args, "--otlp-endpoint", sink.endpoint)
        spans = sink.spans()
    assert again.returncode == 0, again.stderr
    assert roots(spans) == sorted(turn.fusion_id for turn in expected)


def test_a_signal_ends_a_once_runs_wait_for_its_collector(tmp_path):
    """Ctrl-C or SIGTERM to a --once run that waits out its collector: it stops waiting,
    saves and exits (1: the spans are kept), as the daemon does within its 10 s."""
    state = tmp_path / "state"
    state.mkdir()
    write_sessions(state, count=1)
    with OtlpSink() as sink:
        sink.script(*[Reply(503, retry_after="3600")] * 100)
        with running_tailer(tmp_path, "--once", "--once-timeout", "600", "--state-dir",
                            str(state), "--checkpoint", str(tmp_path / "cp.json"),
                            "--otlp-endpoint", sink.endpoint) as tailer:
            tailer.wait_for_log("OTLP export failed")
            tailer.process.send_signal(signal.SIGTERM)
            assert tailer.process.wait(timeout=30) == 1, tailer.log()
    assert "still waiting for the collector when a signal stopped the run; they are kept " \
        "for the next run" in tailer.log()
    assert "--once-timeout" not in tailer.log()
    assert json.loads((tmp_path / "cp.json").read_text())["pending"]


def test_sighup_ends_a_run_as_sigterm_does_unless_it_was_ignored_from_the_start(tmp_path):
    """The terminal of a `run` in front closed: it ended by SIGHUP's default action, nothing
    flushed and no state saved. Under nohup (SIGHUP ignored from the start) it runs on."""
    import subprocess
    import sys

    from tailerproc import ROOT, ctrl_c_quits

    state = tmp_path / "state"
    state.mkdir()
    write_sessions(state, count=1)
    for nohup in (False, True):
        checkpoint = tmp_path / f"cp-{nohup}.json"
        log = tmp_path / f"log-{nohup}"
        with open(log, "wb") as output:
            process = subprocess.Popen(
                [sys.executable, "-m", "tailer", "run", "--metrics-address", "none",
                 "--otlp-endpoint", "none", "--state-dir", str(state), "--checkpoint", str(checkpoint)],
                cwd=ROOT, env=tailer_env(), stdout=output, stderr=subprocess.STDOUT,
                preexec_fn=(lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN)) if nohup else ctrl_c_quits)
        try:
            deadline = time.monotonic() + 30
            while b"state dir" not in log.read_bytes():
                assert time.monotonic() < deadline and process.poll() is None, log.read_text()
                time.sleep(0.05)
            process.send_signal(signal.SIGHUP)
            if nohup:
                time.sleep(1)
                assert process.poll() is None, log.read_text()
                process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=30) == 0, log.read_text()
        finally:
            if process.poll() is None:
                process.kill()
        assert json.loads(checkpoint.read_text())["stopped"] is True


def test_once_timeout_from_the_environment_and_0_waits_for_nothing(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    write_sessions(state, count=1)
    args = ("--state-dir", str(state), "--checkpoint", str(tmp_path / "cp.json"))
    with OtlpSink() as sink:
        sink.script(Reply(503, retry_after="1"))
        result = run_once(*args, "--otlp-endpoint", sink.endpoint,
                          env=tailer_env(HYDRAFUSION_ONCE_TIMEOUT="0"))
    assert result.returncode == 1, result.stderr
    assert "kept for the next run" in result.stderr


def test_missing_state_dir_is_one_clear_line_and_exit_2(tmp_path):
    result = run_once("--state-dir", str(tmp_path / "nowhere"), "--otlp-endpoint", "none",
                      "--metrics-address", "none")
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert "does not exist" in line and "nowhere" in line


def test_a_state_dir_that_is_a_file_is_named_so(tmp_path):
    """A session's log given for the folder: "does not exist", of a file that does."""
    (tmp_path / "events.jsonl").write_text("")
    result = run_once("--state-dir", str(tmp_path / "events.jsonl"), "--otlp-endpoint", "none",
                      "--metrics-address", "none")
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert "events.jsonl is not a folder" in line


def test_state_dir_from_environment(tmp_path):
    home = tmp_path / "home"
    (home / "session-state").mkdir(parents=True)
    every_pattern("env-session").write(home / "session-state")
    env = tailer_env(COPILOT_HOME=str(home), HYDRAFUSION_METRICS_ADDRESS="none")
    result = run_once("--otlp-endpoint", "none", env=env)
    assert result.returncode == 0, result.stderr
    assert ", 1 session, " in result.stderr
    assert result.stderr.count("pattern=cascade") == 4


def test_daemon_starts_at_the_end_then_follows_appends_and_new_sessions(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    old = every_pattern("old-session")
    path = old.write(state)
    port = free_port()
    with OtlpSink() as sink, running_tailer(
        tmp_path, "--state-dir", str(state), "--otlp-endpoint", sink.endpoint,
        metrics_port=port,
    ) as tailer:
        time.sleep(1.5)  # a poll or two: the old turns must stay unread
        assert " fusion fusion-" not in tailer.log()
        later = SessionWriter("appended-later", START + timedelta(days=1))
        later.single("gpt-5.6-sol")
        with open(path, "a") as handle:
            handle.write("".join(line + "\n" for line in later.lines()[1:]))
        tailer.wait_for_log(rf"fusion {later.expected[0].fusion_id[:20]} pattern=single")
        fresh = every_pattern("new-session", START + timedelta(days=2))
        fresh.write(state)
        tailer.wait_for_log(r"pattern=", count=1 + len(fresh.expected), timeout=30)
        sink.wait_for_spans(1, timeout=10)
        tailer.wait_for_metrics("hydrafusion_tailer_sessions 2")
        assert tailer.stop() == 0
    logged = [line for line in tailer.log().splitlines() if " fusion fusion-" in line]
    assert len(logged) == 1 + len(fresh.expected)
    assert not any(t.fusion_id[:20] in tailer.log() for t in old.expected)


def test_wait_for_state_dir(tmp_path):
    state = tmp_path / "later"
    with running_tailer(tmp_path, "--state-dir", str(state), "--wait-for-state-dir",
                        "--otlp-endpoint", "none") as tailer:
        tailer.wait_for_log("waiting for the state directory")
        state.mkdir()
        every_pattern("late-session").write(state)
        tailer.wait_for_log(r"pattern=single", count=2, timeout=30)


def test_collector_down_is_counted_and_nothing_else_breaks(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    expected = write_sessions(state, count=1)
    closed = f"http://127.0.0.1:{free_port()}"
    port = free_port()
    with running_tailer(tmp_path, "--state-dir", str(state), "--from-start",
                        "--otlp-endpoint", closed, metrics_port=port) as tailer:
        tailer.wait_for_log(r" fusion fusion-", count=len(expected))
        deadline = time.monotonic() + 30
        while 'export_failures_total{outcome="retry"} 0' in tailer.metrics():
            assert time.monotonic() < deadline, "export failure never counted"
            time.sleep(0.2)
        turns = metric_samples(tailer.metrics(), "hydrafusion_turns_total")
    assert sum(turns.values()) == len(expected)


def _leftovers_and_others(folder):
    """What killed writes of `hydrafusion.prom` leave in its folder (a link among them),
    and files and a folder that only look alike."""
    killed = [folder / ".hydrafusion.prom.0123456789ab.tmp", folder / ".hydrafusion.prom.tmp_x8k2.tmp"]
    for leftover in killed:
        leftover.write_text("# half a textfile\n")
    (folder / ".hydrafusion.prom.dangling.tmp").symlink_to(folder / "nowhere")
    killed.append(folder / ".hydrafusion.prom.dangling.tmp")
    others = [folder / ".other.prom.0123456789ab.tmp", folder / "hydrafusion.prom.abc.tmp",
              folder / ".hydrafusion.prom.abc.tmp.1", folder / ".cp.json.abc.tmp"]
    for other in others:
        other.write_text("not ours")
    (folder / ".hydrafusion.prom.folder.tmp").mkdir()
    return killed, others + [folder / ".hydrafusion.prom.folder.tmp"]


def test_a_run_removes_what_killed_writes_of_its_textfile_left_and_nothing_else(tmp_path):
    """A tailer killed while writing its textfile leaves `.hydrafusion.prom.RANDOM.tmp` in
    the collector's folder, where nothing else would ever remove it: the next run removes
    those of its own textfile before it writes it, and no other file."""
    state = tmp_path / "state"
    state.mkdir()
    write_sessions(state)
    metrics = tmp_path / "textfiles"
    metrics.mkdir()
    killed, others = _leftovers_and_others(metrics)
    result = run_once("--state-dir", str(state), "--otlp-endpoint", "none",
                      "--textfile", str(metrics / "hydrafusion.prom"), "--metrics-address", "none")
    assert result.returncode == 0, result.stderr
    assert not any(os.path.lexists(leftover) for leftover in killed)
    assert all(other.exists() for other in others)
    assert "hydrafusion_turns_total" in (metrics / "hydrafusion.prom").read_text()


def test_only_the_first_write_of_a_run_removes_leftovers(tmp_path):
    """Later writes remove nothing: a file that appears meanwhile may be a save under way
    (of a second tailer given the same textfile), not a killed one's."""
    registry = Registry()
    turns = registry.counter("t_turns_total", "Turns.", ["pattern"])
    textfile = Textfile(tmp_path / "hydrafusion.prom", registry)
    killed, others = _leftovers_and_others(tmp_path)
    textfile.write()
    assert not any(os.path.lexists(leftover) for leftover in killed)
    running = tmp_path / ".hydrafusion.prom.feedfacecafe.tmp"
    running.write_text("a save under way")
    turns.inc({"pattern": "single"})
    textfile.write(final=True)
    assert running.exists() and all(other.exists() for other in others)
    assert 't_turns_total{pattern="single"} 1' in (tmp_path / "hydrafusion.prom").read_text()
