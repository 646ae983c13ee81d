"""Every turn exactly once: across restarts, kill -9, collector outages and rewritten logs."""

import json
import os
import random
import re
import signal
import stat
import threading
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest

from exposition_helpers import samples
from otlp_sink import OtlpSink, plain_attributes
from prom import free_port, running_prometheus
from sessiongen import SessionWriter
from tailer.daemon.checkpoint import VERSION, CheckpointInUse, claim
from tailer.outputs.spans import trace_id
from tailerproc import run_once, running_tailer
from sessiongen import START, every_pattern


def truth_of(expected):
    """The counters a correct tailer must show for these turns."""
    aiu, legs, turns = Counter(), Counter(), Counter()
    for turn in expected:
        turns[turn.outcome] += 1
        for leg in turn.legs:
            aiu[leg.model] += leg.nano_aiu
            legs[leg.phase_kind] += 1
    return {"aiu": aiu, "legs": legs, "turns": turns}


def counted(exposition):
    """The same figures, read from an exposition."""
    def by(name, label):
        totals = Counter()
        for labels, value in samples(exposition, name).items():
            totals[dict(labels)[label]] += value
        return totals

    return {
        "aiu": Counter({m: round(v * 1e9) for m, v in by("hydrafusion_aiu_total", "model").items()}),
        "legs": Counter({k: int(v) for k, v in by("hydrafusion_legs_total", "phase_kind").items()}),
        "turns": Counter({k: int(v) for k, v in by("hydrafusion_turns_total", "outcome").items()}),
    }


def roots_by_trace(spans):
    return {s["traceId"]: plain_attributes(s["attributes"])["hydrafusion.fusion_id"]
            for s in spans if "parentSpanId" not in s}


def assert_same_span_every_time(spans):
    """A span sent twice (after a restart) must be the same span, ids and all."""
    seen = {}
    for span in spans:
        key = (span["traceId"], span["spanId"])
        shape = (span["name"], span.get("parentSpanId"), span["startTimeUnixNano"],
                 span["endTimeUnixNano"], str(span["attributes"]))
        assert seen.setdefault(key, shape) == shape


def test_restart_resumes_where_it_stopped(tmp_path):
    state, checkpoint, textfile = tmp_path / "state", tmp_path / "cp.json", tmp_path / "m.prom"
    state.mkdir()
    first = every_pattern("resume-session")
    path = first.write(state)
    args = ("--state-dir", str(state), "--checkpoint", str(checkpoint), "--textfile", str(textfile))
    with OtlpSink() as sink:
        assert run_once(*args, "--otlp-endpoint", sink.endpoint).returncode == 0
        later = SessionWriter("resume-later", START + timedelta(days=1))
        later.single("gpt-5.6-sol")
        later.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="reject",
                      repair_model="gpt-5.6-sol")
        with open(path, "a") as handle:
            handle.write("".join(line + "\n" for line in later.lines()[1:]))
        second = run_once(*args, "--otlp-endpoint", sink.endpoint)
        assert second.returncode == 0
        spans = sink.spans()
    assert second.stderr.count(" fusion fusion-") == 2
    assert "resuming from" in second.stderr
    expected = first.expected + later.expected
    assert sorted(roots_by_trace(spans).values()) == sorted(t.fusion_id for t in expected)
    assert len(spans) == len({(s["traceId"], s["spanId"]) for s in spans})
    assert counted(textfile.read_text()) == truth_of(expected)


def test_kill_9_at_any_moment_loses_nothing_and_counts_nothing_twice(tmp_path):
    """The CLI keeps writing (half lines included) while the tailer is killed again and again."""
    rng = random.Random(7)
    state, checkpoint = tmp_path / "state", tmp_path / "cp.json"
    state.mkdir()
    writers = [every_pattern(f"kill-{n}", START + timedelta(hours=n)) for n in range(3)]
    expected = [turn for writer in writers for turn in writer.expected]
    queues = {}  # each log's pieces, in order; the logs are interleaved as they are written
    for writer in writers:
        text = "".join(line + "\n" for line in writer.lines()).encode()
        cuts = sorted(rng.sample(range(1, len(text)), 60))
        path = state / writer.expected[0].session_id / "events.jsonl"
        queues[path] = [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]
    done = threading.Event()

    def write_like_the_cli():
        while any(queues.values()):
            path = rng.choice([p for p, q in queues.items() if q])
            path.parent.mkdir(exist_ok=True)
            with open(path, "ab") as handle:
                handle.write(queues[path].pop(0))
            time.sleep(rng.uniform(0.0, 0.06))
        done.set()

    port = free_port()
    args = ("--state-dir", str(state), "--checkpoint", str(checkpoint), "--from-start")
    with OtlpSink() as sink, running_prometheus(
        tmp_path, [f"127.0.0.1:{port}"], scrape_interval="1s"
    ) as prom:
        writer_thread = threading.Thread(target=write_like_the_cli)
        writer_thread.start()
        kills = 0
        while not done.is_set() or kills < 4:
            with running_tailer(tmp_path, *args, "--otlp-endpoint", sink.endpoint,
                                metrics_port=port) as tailer:
                time.sleep(rng.uniform(0.2, 1.5))
                tailer.process.send_signal(signal.SIGKILL)
                tailer.process.wait()
                kills += 1
        writer_thread.join()
        with running_tailer(tmp_path, *args, "--otlp-endpoint", sink.endpoint,
                            metrics_port=port) as tailer:
            body = tailer.wait_for_metrics("hydrafusion_tailer_open_turns 0", timeout=60)
            deadline = time.monotonic() + 60
            while counted(body) != truth_of(expected) and time.monotonic() < deadline:
                time.sleep(0.3)
                body = tailer.metrics()
            spans = sink.wait_for_roots({t.fusion_id for t in expected}, timeout=60)
            # Prometheus scraped through every kill: no count went backwards (which it
            # would read as a reset and count again), none was missed.
            settled_at = time.time()
            last = prom.wait_for(
                "max(timestamp(hydrafusion_tailer_build_info))",
                lambda r: r and float(r[0]["value"][1]) > settled_at + 1)
            scraped = float(last[0]["value"][1])
            increase = {
                r["metric"]["model"]: round(float(r["value"][1]) * 1e9)
                for r in prom.query("sum by (model) (increase(hydrafusion_aiu_total[10m]))",
                                    time=scraped)
            }
            resets = prom.query("sum(resets(hydrafusion_aiu_total[10m]))", time=scraped)
    assert kills >= 4
    assert not list(tmp_path.glob(".cp.json.*.tmp"))  # a save killed mid-way left nothing behind
    assert counted(body) == truth_of(expected)
    assert float(resets[0]["value"][1]) == 0
    assert Counter(increase) == truth_of(expected)["aiu"]
    got = roots_by_trace(spans)
    assert sorted(set(got.values())) == sorted(t.fusion_id for t in expected)
    for turn in expected:
        assert trace_id(turn.session_id, turn.fusion_id) in got
    assert_same_span_every_time(spans)


def test_collector_down_for_a_while_and_a_restart_in_between_loses_nothing(tmp_path):
    state, checkpoint = tmp_path / "state", tmp_path / "cp.json"
    state.mkdir()
    writer = every_pattern("outage")
    writer.write(state)
    with OtlpSink() as sink:
        down = f"http://127.0.0.1:{free_port()}"  # nothing listens there yet
        args = ("--state-dir", str(state), "--checkpoint", str(checkpoint), "--from-start")
        with running_tailer(tmp_path, *args, "--otlp-endpoint", down,
                            metrics_port=free_port()) as tailer:
            tailer.wait_for_log(" fusion fusion-", count=len(writer.expected))
            tailer.wait_for_metrics('export_failures_total{outcome="retry"}')
            pending = tailer.wait_for_metrics("hydrafusion_tailer_pending_spans ")
            assert tailer.stop() == 0  # the unsent spans go into the checkpoint
        assert re.search(r"hydrafusion_tailer_pending_spans [1-9]", pending)
        with running_tailer(tmp_path, *args, "--otlp-endpoint", sink.endpoint,
                            metrics_port=free_port()) as tailer:
            spans = sink.wait_for_spans(sum(len(t.legs) + 2 for t in writer.expected))
            assert " fusion fusion-" not in tailer.log()  # sent again, not counted again
    assert sorted(roots_by_trace(spans).values()) == sorted(t.fusion_id for t in writer.expected)


@pytest.mark.parametrize("how", ["truncated", "replaced"])
def test_rewritten_log_is_read_again_without_counting_twice(tmp_path, how):
    state, checkpoint, textfile = tmp_path / "state", tmp_path / "cp.json", tmp_path / "m.prom"
    state.mkdir()
    writer = every_pattern("rewind")
    path = writer.write(state)
    args = ("--state-dir", str(state), "--checkpoint", str(checkpoint), "--textfile",
            str(textfile), "--otlp-endpoint", "none")
    assert run_once(*args).returncode == 0
    lines = path.read_bytes().splitlines(keepends=True)
    kept = b"".join(lines[: len(lines) // 2])  # the CLI rewound the session halfway
    more = SessionWriter("rewind-more", START + timedelta(days=3))
    more.single("claude-sonnet-4.6")
    if how == "truncated":
        path.write_bytes(kept)
    else:
        replacement = path.with_name("events.new")
        replacement.write_bytes(kept)
        replacement.replace(path)
    with open(path, "a") as handle:
        handle.write("".join(line + "\n" for line in more.lines()[1:]))
    result = run_once(*args)
    assert result.returncode == 0
    assert result.stderr.count(" fusion fusion-") == 1  # only the new turn
    assert counted(textfile.read_text()) == truth_of(writer.expected + more.expected)


def test_a_scrape_never_sees_a_count_the_checkpoint_does_not_hold(tmp_path):
    """What /metrics shows was saved first: a crash cannot take back a count once scraped."""
    state, checkpoint = tmp_path / "state", tmp_path / "cp.json"
    state.mkdir()
    writer = SessionWriter("scrape-vs-checkpoint", START)
    for _ in range(15):
        writer.single("gpt-5.6-sol")
    lines = [line + "\n" for line in writer.lines()]
    path = state / "scrape-vs-checkpoint" / "events.jsonl"
    path.parent.mkdir()
    with running_tailer(tmp_path, "--state-dir", str(state), "--checkpoint", str(checkpoint),
                        "--otlp-endpoint", "none", metrics_port=free_port()) as tailer:
        comparisons = 0
        for start in range(0, len(lines), 6):
            with open(path, "a") as handle:
                handle.writelines(lines[start:start + 6])
            for _ in range(3):
                scraped = sum(samples(tailer.metrics(), "hydrafusion_turns_total").values())
                saved = json.loads(checkpoint.read_text()) if checkpoint.exists() else {}
                held = sum(row[1] for row in saved.get("metrics", {}).get(
                    "hydrafusion_turns_total", []))
                assert scraped <= held
                comparisons += scraped > 0
                time.sleep(0.05)
    assert comparisons > 10


def test_a_damaged_checkpoint_is_moved_aside_and_the_tailer_starts_afresh(tmp_path):
    state, checkpoint = tmp_path / "state", tmp_path / "cp.json"
    state.mkdir()
    every_pattern("damaged-checkpoint").write(state)
    checkpoint.write_text(json.dumps({"version": VERSION, "sessions": {"x": {"offset": "soon"}}}))
    result = run_once("--state-dir", str(state), "--checkpoint", str(checkpoint),
                      "--otlp-endpoint", "none")
    assert result.returncode == 0, result.stderr
    assert "damaged" in result.stderr
    assert (tmp_path / "cp.json.unreadable").exists()
    assert json.loads(checkpoint.read_text())["version"] == VERSION


def test_a_collector_that_takes_nothing_pauses_reading_instead_of_dropping(tmp_path):
    """Past 2,000 waiting spans the tailer stops reading; a --once run gives up for now and
    the next run carries on, so every turn arrives and none is dropped."""
    state, checkpoint = tmp_path / "state", tmp_path / "cp.json"
    state.mkdir()
    writers = [every_pattern(f"flood-{n}") for n in range(70)]
    for writer in writers:
        writer.write(state)
    expected = [turn for writer in writers for turn in writer.expected]
    args = ("--state-dir", str(state), "--checkpoint", str(checkpoint))
    down = run_once(*args, "--otlp-endpoint", f"http://127.0.0.1:{free_port()}", timeout=300)
    assert down.returncode == 1
    assert "stops here" in down.stderr and "queue full" not in down.stderr
    assert 0 < down.stderr.count(" fusion fusion-") < len(expected)
    with OtlpSink() as sink:
        # A --once run waits a bounded time for its sends; on a loaded machine one run may
        # stop short again, and like the first it leaves the rest to the next run.
        for _ in range(5):
            up = run_once(*args, "--otlp-endpoint", sink.endpoint, timeout=300)
            if up.returncode != 1 or "stops here" not in up.stderr:
                break
        spans = sink.spans()
    assert up.returncode == 0, up.stderr
    assert sorted(set(roots_by_trace(spans).values())) == sorted(t.fusion_id for t in expected)


def test_a_second_tailer_on_the_same_checkpoint_is_refused(tmp_path):
    """Two tailers resuming from each other's saves would count turns twice or miss them.
    The lock goes with its process: after kill -9 the checkpoint is free again."""
    state, checkpoint = tmp_path / "state", tmp_path / "cp.json"
    state.mkdir()
    every_pattern("one-checkpoint").write(state)
    args = ("--state-dir", str(state), "--checkpoint", str(checkpoint), "--otlp-endpoint", "none")
    with running_tailer(tmp_path, *args) as first:
        second = run_once(*args)
        assert second.returncode == 2
        assert f"another tailer is using the checkpoint {checkpoint}" in second.stderr
        assert first.process.poll() is None
        first.process.send_signal(signal.SIGKILL)
        first.process.wait()
    after = run_once(*args)
    assert after.returncode == 0, after.stderr


def test_a_claim_is_exclusive_until_its_file_is_closed(tmp_path):
    path = tmp_path / "state" / "cp.json"
    with claim(path):
        with pytest.raises(CheckpointInUse):
            claim(path)
    claim(path).close()


@pytest.mark.skipif(os.name == "nt", reason="flock's own errors")
def test_a_file_system_without_locks_is_named_not_taken_for_another_tailer(tmp_path, monkeypatch):
    """A checkpoint on NFS without its lock daemon: flock fails with ENOLCK, and the tailer
    said another one was using the checkpoint, sending the user to look for it."""
    import errno

    from tailer.daemon import checkpoint

    def no_locks(fd, how):
        raise OSError(errno.ENOLCK, "No locks available")
    monkeypatch.setattr(checkpoint.fcntl, "flock", no_locks)
    with pytest.raises(CheckpointInUse, match="cannot lock the checkpoint .*: No locks available"):
        claim(tmp_path / "cp.json")


def test_a_symlink_at_the_lock_files_path_is_never_followed(tmp_path):
    """A link planted there, dangling or to a file, makes no file and touches none."""
    path = tmp_path / "state" / "cp.json"
    path.parent.mkdir()
    lock = path.with_name("cp.json.lock")
    kept = tmp_path / "kept"
    kept.write_text("someone else's")
    for target in (tmp_path / "nowhere", kept):
        lock.unlink(missing_ok=True)
        lock.symlink_to(target)
        with pytest.raises(CheckpointInUse, match="cp.json.lock is a symbolic link, never followed"):
            claim(path)
    assert not (tmp_path / "nowhere").exists()
    assert kept.read_text() == "someone else's"
    lock.unlink()
    claim(path).close()
    assert stat.S_IMODE(os.stat(lock).st_mode) == 0o600


@pytest.mark.parametrize("what", ["a folder", "a FIFO"])
def test_what_is_in_the_lock_files_way_is_refused_not_run_without_the_lock(tmp_path, what):
    """A folder at FILE.lock was taken for a lock file that could not be made, and the
    tailer ran without the lock, saying nothing: two of them could share the checkpoint and
    count its turns twice. A FIFO there opens, and flock takes it, but is no lock file of
    ours. Either is refused at start, in one line naming it."""
    state, path = tmp_path / "state", tmp_path / "cp.json"
    state.mkdir()
    every_pattern("in-the-way").write(state)
    lock = path.with_name("cp.json.lock")
    if what == "a folder":
        lock.mkdir()
    else:
        os.mkfifo(lock)
    done = run_once("--state-dir", str(state), "--checkpoint", str(path), "--otlp-endpoint", "none")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"cannot lock the checkpoint {path}: {lock} is {what};" in done.stderr
    assert not path.exists()


@pytest.mark.skipif(os.name == "nt" or os.geteuid() != 0, reason="another user's file needs root")
def test_another_users_lock_file_is_refused_not_run_without_the_lock(tmp_path):
    """Another user's tailer on a checkpoint in a folder both may write: its lock file
    (0600) cannot be opened by this user, and this tailer ran without the lock beside it."""
    folder = tmp_path / "shared"
    folder.mkdir(mode=0o777)
    os.chmod(folder, 0o777)
    (folder / "cp.json.lock").touch(mode=0o600)  # root's
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.close(read)
            os.chdir(folder)  # above it, tmp_path is closed to nobody
            os.setgid(65534)
            os.setuid(65534)
            try:
                claim(Path("cp.json"))
                os.write(write, b"claimed")
            except CheckpointInUse as error:
                os.write(write, str(error).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as said:
        message = said.read()
    os.waitpid(child, 0)
    assert message.startswith("cannot lock the checkpoint cp.json: cp.json.lock belongs to "
                              "another user (uid 0);"), message
