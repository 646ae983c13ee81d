"""The wired pipeline (daemon.Tailer) in-process, with a fake clock: idle turns, damage, drift."""

import logging
import os
import re
import shutil
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from exposition_helpers import samples, saved_series
from sessiongen import SessionWriter
from tailer.turns.sessions import Tailer
from tailer.copilot.events import parse_line
from tailer.outputs.exposition import Registry
from tailer.log_limit import WarningLimiter
from tailer.outputs.logs import turn_line
from tailer.outputs.metrics import MAX_MODELS, Metrics
from sessiongen import START, every_pattern
from test_turns import feed_all


class Clock:
    def __init__(self, now):
        self.now = now

    def __call__(self):
        return self.now


class Counting:
    """A Tailer whose finished turns are kept in `finished` and counted, pass by pass."""

    def __init__(self, tailer: Tailer, metrics: Metrics | None, finished: list):
        self.tailer, self.metrics, self.finished = tailer, metrics, finished

    def poll(self, *args, **kwargs):
        done = self.tailer.poll(*args, **kwargs)
        self.finished += done.turns
        if self.metrics is not None:
            for turn in done.turns:
                self.metrics.count_turn(turn)
        return done

    def __getattr__(self, name):
        return getattr(self.tailer, name)


def make_tailer(state, clock, *, from_start=True, idle=1800.0, **options):
    metrics = Metrics(Registry(label_value_limits={"model": MAX_MODELS}, clock=clock))
    finished = []
    tailer = Tailer(state, metrics=metrics, from_start=from_start, idle_timeout_s=idle,
                    clock=clock, **options)
    _made.append(tailer)
    return Counting(tailer, metrics, finished), metrics, finished


# Each Tailer holds an inotify instance, and a user may have only 128 of them.
_made = []


@pytest.fixture(autouse=True)
def _close_tailers():
    yield
    while _made:
        _made.pop().close()


def open_turn_session(state):
    writer = SessionWriter("idle-session", START)
    writer.single("gpt-5.6-sol")
    writer.incomplete("mai-code-1.1-flash", "gpt-5.6-sol")
    return writer, writer.write(state)


def test_logs_that_cannot_be_read_are_a_gauge_that_goes_back_to_zero(tmp_path):
    """A log the daemon cannot read (a FIFO in its place, a folder that is a loop of links, a
    log that is a folder) was named in its log once, and nothing a dashboard reads said it
    lasted: hydrafusion_tailer_unreadable_logs counts them while they last."""
    _, path = open_turn_session(tmp_path)
    clock = Clock(path.stat().st_mtime + 60)
    (tmp_path / "fifo").mkdir()
    os.mkfifo(tmp_path / "fifo" / "events.jsonl")
    (tmp_path / "loop").symlink_to("loop")
    (tmp_path / "folder" / "events.jsonl").mkdir(parents=True)
    tailer, metrics, _ = make_tailer(tmp_path, clock)
    tailer.poll()
    assert "hydrafusion_tailer_unreadable_logs 3" in metrics.registry.render_final()
    for name in ("fifo", "loop", "folder"):
        shutil.rmtree(tmp_path / name) if name != "loop" else (tmp_path / name).unlink()
    tailer.poll()
    assert "hydrafusion_tailer_unreadable_logs 0" in metrics.registry.render_final()
    assert "hydrafusion_tailer_sessions 1" in metrics.registry.render_final()


def test_open_turn_finishes_when_the_log_goes_idle(tmp_path):
    writer, path = open_turn_session(tmp_path)
    modified = path.stat().st_mtime
    clock = Clock(modified + 60)
    tailer, metrics, finished = make_tailer(tmp_path, clock, idle=1800)
    tailer.poll()
    assert [t.outcome for t in finished] == ["completed"]
    assert 'hydrafusion_tailer_open_turns 1' in metrics.registry.render_final()
    clock.now = modified + 1799
    tailer.poll()
    assert len(finished) == 1
    clock.now = modified + 1801
    tailer.poll()
    assert [t.outcome for t in finished] == ["completed", "incomplete"]
    assert finished[1].key == writer.expected[1].fusion_id
    assert 'hydrafusion_tailer_open_turns 0' in metrics.registry.render_final()


def test_backfilled_old_log_finishes_its_open_turn_at_once(tmp_path):
    _, path = open_turn_session(tmp_path)
    old = path.stat().st_mtime - 3 * 86400
    os.utime(path, (old, old))
    tailer, _, finished = make_tailer(tmp_path, Clock(old + 3 * 86400))
    tailer.poll()
    assert [t.outcome for t in finished] == ["completed", "incomplete"]


def test_damage_is_counted_by_reason_and_warned_with_line_number_only(tmp_path, caplog):
    writer = every_pattern("damaged")
    path = writer.write(tmp_path)
    good = path.read_bytes().splitlines(keepends=True)
    damaged = good[:3] + [b'{"type":"session.fusion_resolved","data":{"secret\n',
                          b'\0\0\0\0\n'] + good[3:]
    path.write_bytes(b"".join(damaged))
    tailer, metrics, finished = make_tailer(tmp_path, Clock(path.stat().st_mtime))
    with caplog.at_level(logging.WARNING, logger="tailer"):
        tailer.poll()
    assert [t.key for t in finished] == [t.fusion_id for t in writer.expected]
    exposition = metrics.registry.render_final()
    assert samples(exposition, "hydrafusion_tailer_malformed_lines_total") == {
        (("reason", "invalid_json"),): 1}
    assert samples(exposition, "hydrafusion_tailer_lines_total")[(("outcome", "malformed"),)] == 1
    [warning] = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert warning == "session damaged: skipped line 4 of events.jsonl: invalid_json"


def test_unknown_event_type_and_fields_are_counted_and_warned_once(tmp_path, caplog):
    session = tmp_path / "drift"
    session.mkdir()
    lines = [
        '{"type":"session.fusion_rerouted","timestamp":"2026-11-04T10:00:00Z","data":{}}',
        '{"type":"session.fusion_rerouted","timestamp":"2026-11-04T10:00:01Z","data":{}}',
        '{"type":"session.fusion_resolved","timestamp":"2026-11-04T10:00:02Z","data":'
        '{"fusionId":"f1","pattern":"single","routingLatencyMs":200,"budgetHint":1}}',
        '{"type":"session.fusion_resolved","timestamp":"2026-11-04T10:00:03Z","data":'
        '{"fusionId":"f2","pattern":"single","budgetHint":1}}',
    ]
    (session / "events.jsonl").write_text("\n".join(lines) + "\n")
    tailer, metrics, _ = make_tailer(tmp_path, Clock(0))
    with caplog.at_level(logging.WARNING, logger="tailer"):
        tailer.poll()
    exposition = metrics.registry.render_final()
    assert samples(exposition, "hydrafusion_tailer_unknown_events_total") == {(): 2}
    assert samples(exposition, "hydrafusion_tailer_unknown_fields_total") == {
        (("event_type", "session.fusion_resolved"),): 2}
    assert samples(exposition, "hydrafusion_tailer_missing_fields_total") == {
        (("event_type", "session.fusion_resolved"),): 1}
    drift = [r.getMessage() for r in caplog.records if "drift" in r.getMessage()]
    assert len(drift) == 3  # the type, the field, the missing field: once each


def test_unreadable_log_is_one_warning_and_the_rest_goes_on(tmp_path, caplog, monkeypatch):
    every_pattern("readable").write(tmp_path)
    broken = every_pattern("unreadable").write(tmp_path)
    tailer, _, finished = make_tailer(tmp_path, Clock(0))
    real_open = os.open

    def refuse(path, *args, **kwargs):
        if str(path) == str(broken):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("os.open", refuse)
    with caplog.at_level(logging.WARNING, logger="tailer"):
        tailer.poll()
        tailer.poll()
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == ["session unreadable: cannot read its log: Permission denied"]
    assert len(finished) == 9


def test_a_vanished_session_finishes_its_open_turns_after_the_idle_timeout(tmp_path):
    _, path = open_turn_session(tmp_path)
    clock = Clock(path.stat().st_mtime)
    tailer, _, finished = make_tailer(tmp_path, clock, idle=600)
    tailer.poll()
    shutil.rmtree(path.parent)
    clock.now += 10
    tailer.poll()
    assert [t.outcome for t in finished] == ["completed"]
    assert tailer.sessions == {}
    clock.now += 600
    tailer.poll()
    assert [t.outcome for t in finished] == ["completed", "incomplete"]
    assert tailer.state()["sessions"]["idle-session"]["open"] == []


def test_a_state_folder_emptied_and_filled_again_counts_nothing_twice(tmp_path):
    """A folder moved away and back (or a volume mounted late) gives its sessions back
    where they were: each is kept as a tombstone while it is gone."""
    state = tmp_path / "state"
    state.mkdir()
    writers = [every_pattern(f"s{n}") for n in range(3)]
    for writer in writers:
        writer.write(state)
    clock = Clock(0)
    tailer, _, finished = make_tailer(state, clock)
    tailer.poll()
    expected = sorted(t.fusion_id for w in writers for t in w.expected)
    assert sorted(t.key for t in finished) == expected
    aside = tmp_path / "aside"
    state.rename(aside)
    state.mkdir()
    clock.now += 5
    tailer.poll()
    state.rmdir()
    aside.rename(state)
    clock.now += 5
    for _ in range(3):
        tailer.poll()
    assert sorted(t.key for t in finished) == expected


def test_a_restart_on_an_empty_state_folder_forgets_no_session(tmp_path):
    """The saved sessions stay in the checkpoint until their logs are back."""
    state = tmp_path / "state"
    state.mkdir()
    writer = every_pattern("kept")
    writer.write(state)
    first, _, finished = make_tailer(state, Clock(0))
    first.poll()
    saved = first.state()
    aside = tmp_path / "aside"
    state.rename(aside)
    state.mkdir()
    second, _, again = make_tailer(state, Clock(0), saved=saved)
    second.poll()
    saved = second.state()
    assert "kept" in saved["sessions"]
    state.rmdir()
    aside.rename(state)
    third, _, again = make_tailer(state, Clock(0), saved=saved)
    third.poll()
    assert again == [] and len(finished) == len(writer.expected)


def test_labels_are_bounded_and_hold_no_ids(tmp_path):
    writer = SessionWriter("many-models", START)
    for index in range(MAX_MODELS + 5):
        writer.single(f"model-{index}")
    writer.write(tmp_path)
    tailer, metrics, finished = make_tailer(tmp_path, Clock(0))
    tailer.poll()
    exposition = metrics.registry.render_final()
    models = {dict(labels)["model"] for labels in samples(exposition, "hydrafusion_legs_total")}
    # The model vocabulary is shared by every family: the prompt families' `hydrafusion`
    # (the synthetic model a fusion prompt asked for) takes one of its places.
    everywhere = {dict(labels)["model"] for line in exposition.splitlines() if "model=" in line
                  for labels in samples(line, line.split("{")[0])}
    assert len(everywhere) == MAX_MODELS + 1 and {"other", "hydrafusion"} <= everywhere
    assert models <= everywhere and "other" in models
    for turn in finished:
        assert turn.key not in exposition
    assert "many-models" not in exposition


# The per-turn line as the project's post documents it, a user's grep included:
# `INFO fusion <id> pattern=cascade phases=3 models=gpt-5.6-sol,mai-code-1.1-flash aiu=14.72`.
POSTED_LINE = (r"fusion fusion-[0-9a-f]{8}-[0-9a-f]{4} pattern=cascade phases=3 "
               r"models=gpt-5\.6-sol,mai-code-1\.1-flash aiu=\d+\.\d\d")


def test_turn_line_format():
    writer = SessionWriter("log-line", START)
    writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="reject",
                   repair_model="gpt-5.6-sol")
    _, [turn] = feed_all([r for r in (parse_line(t.encode()) for t in writer.lines()) if r])
    assert re.fullmatch(POSTED_LINE, turn_line(turn))
    assert turn_line(turn).endswith(f"aiu={writer.expected[0].nano_aiu / 1e9:.2f}")


def test_the_docs_quote_the_turn_line_the_tailer_writes():
    root = Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text()
    assert re.search(rf"^INFO {POSTED_LINE}$", readme, re.MULTILINE)
    tailer_md = (root / "docs" / "TAILER.md").read_text()
    quoted = re.findall(r"^fusion fusion-\S+ .*$", tailer_md, re.MULTILINE)
    assert quoted and all(re.match(r"fusion \S+ pattern=\w+ phases=\d+ models=\S+ aiu=", line)
                          for line in quoted)


def test_warning_limiter(caplog):
    clock = Clock(0)
    limiter = WarningLimiter(interval=60, clock=clock)
    with caplog.at_level(logging.WARNING, logger="tailer"):
        for _ in range(5):
            limiter.warn("a", "problem %s", "a")
        limiter.warn("b", "problem %s", "b")
        clock.now = 61
        limiter.warn("a", "problem %s", "a")
    assert [r.getMessage() for r in caplog.records] == [
        "problem a", "problem b", "problem a (and 4 more like it since the last warning)"]


def test_backfill_horizon_reads_only_recent_logs_from_their_start(tmp_path):
    recent = every_pattern("recent").write(tmp_path)
    old = every_pattern("ancient").write(tmp_path)
    now = recent.stat().st_mtime
    os.utime(old, (now - 40 * 86400, now - 40 * 86400))
    tailer, _, finished = make_tailer(tmp_path, Clock(now), backfill_days=30)
    tailer.poll()
    assert {t.session_id for t in finished} == {"recent"}
    with open(old, "a") as handle:  # the old session is resumed: its new turns count
        writer = SessionWriter("ancient-resumed", START)
        writer.single("gpt-5.6-sol")
        handle.write("".join(line + "\n" for line in writer.lines()[1:]))
    tailer.poll()
    assert [t.session_id for t in finished].count("ancient") == 1


DAMAGE = st.one_of(
    st.binary(max_size=200).map(lambda b: b.replace(b"\n", b"")),
    st.integers(1, 64).map(lambda n: b"\0" * n),
    st.sampled_from([b"[]", b'"session.fusion_resolved"', b"42", b"null", b"{}",
                     b'{"type":"session.fusion_completed","data":"\xff\xfe"}',
                     b'{"type":"assistant.fusion_phase_completed","data":{"fusionId":']),
)


@given(st.lists(st.tuples(st.integers(0, 10_000), DAMAGE), max_size=12))
def test_any_damage_between_lines_costs_no_turn(tmp_path_factory, damage):
    """Whatever junk the crashes leave between good lines, every turn comes out intact."""
    writer = every_pattern("fuzzed")
    good = [line.encode() for line in writer.lines()]
    lines = list(good)
    for position, junk in sorted(damage, reverse=True):
        lines.insert(position % (len(lines) + 1), junk)
    state = tmp_path_factory.mktemp("fuzz")
    (state / "fuzzed").mkdir()
    (state / "fuzzed" / "events.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    tailer, metrics, finished = make_tailer(state, Clock(0))
    tailer.poll()
    _made.pop().close()  # one per example, and hypothesis runs hundreds
    assert [(t.key, t.outcome, t.usage.nano_aiu) for t in finished] == [
        (t.fusion_id, t.outcome, t.nano_aiu) for t in writer.expected]
    exposition = metrics.registry.render_final()
    read = sum(samples(exposition, "hydrafusion_tailer_lines_total").values())
    assert read == len(lines)


def test_a_50_mb_line_is_passed_over_in_bounded_memory(tmp_path):
    writer = every_pattern("huge")
    lines = [line.encode() for line in writer.lines()]
    huge = b'{"type":"tool.execution_complete","data":{"result":"' + b"x" * (50 << 20) + b'"}}'
    path = tmp_path / "huge" / "events.jsonl"
    path.parent.mkdir()
    path.write_bytes(b"\n".join(lines[:5] + [huge] + lines[5:]) + b"\n")
    del huge
    tailer, metrics, finished = make_tailer(tmp_path, Clock(0))
    tracemalloc.start()
    try:
        tailer.poll()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(finished) == len(writer.expected)
    assert peak < 20 << 20


def test_the_newest_event_time_does_not_go_back_after_a_restart():
    from tailer.copilot.event_records import SessionEnded

    before = Metrics(Registry())
    before.count_event(SessionEnded(2_000 * 10**9))
    after = Metrics(Registry())
    after.restore(saved_series(before.registry))
    after.count_event(SessionEnded(1_000 * 10**9))  # an older log read after the restart
    assert samples(after.registry.render_final(),
                   "hydrafusion_tailer_last_event_timestamp_seconds") == {(): 2000}


def test_a_log_left_half_read_by_its_budget_is_not_idle_however_old(tmp_path):
    """An old log is idle by its age, but not while a pass cut short left part of it unread:
    finishing its open turn then would lose the legs still to come. Budgets of one turn cut
    every log between a turn's first line and the line that finishes the turn before it."""
    writers = [every_pattern(f"old-{n}") for n in range(2)]
    days_ago = START.timestamp()
    for writer in writers:
        log = writer.write(tmp_path)
        os.utime(log, (days_ago, days_ago))
    tailer, _, finished = make_tailer(tmp_path, Clock(days_ago + 3 * 86400))
    passes = 0
    while not (passes and tailer.caught_up):
        tailer.poll(turn_budget=1)
        passes += 1

    assert sorted((t.key, t.outcome, len(t.legs)) for t in finished) == sorted(
        (t.fusion_id, t.outcome, len(t.legs)) for w in writers for t in w.expected)


def test_a_turn_budget_reads_in_steps_and_loses_nothing(tmp_path):
    writers = [every_pattern(f"budget-{n}") for n in range(3)]
    for writer in writers:
        writer.write(tmp_path)
    tailer, _, finished = make_tailer(tmp_path, Clock(0))
    passes = 0
    while not (passes and tailer.caught_up):
        tailer.poll(turn_budget=4)
        passes += 1
        assert len(finished) <= 4 * passes + 4  # a pass may end a few turns past its budget
    assert passes >= 6
    assert sorted(t.key for t in finished) == sorted(
        t.fusion_id for w in writers for t in w.expected)


def test_a_read_that_failed_is_tried_again_without_waiting_for_a_write(tmp_path, monkeypatch):
    """Out of file descriptors (a flood of connections, say), a read fails; the log's last
    turn must not wait for the CLI's next write, which may never come."""
    writer = every_pattern("starved")
    log = writer.write(tmp_path)
    tailer, _, finished = make_tailer(tmp_path, Clock(0))
    real_open = os.open
    refusals = []

    def starved(path, *args, **kwargs):
        if str(path) == str(log) and len(refusals) < 2:
            refusals.append(path)
            raise OSError(24, "Too many open files")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("os.open", starved)
    tailer.poll()
    assert finished == []
    tailer.poll()
    tailer.poll()  # no write in between
    assert len(refusals) == 2
    assert sorted(t.key for t in finished) == sorted(t.fusion_id for t in writer.expected)


def test_a_line_the_tailer_fails_on_costs_that_line_only(tmp_path, monkeypatch, caplog):
    """A bug met on one line is logged by type, counted, and the rest goes on."""
    from tailer.copilot import events

    broken = every_pattern("broken")
    fine = every_pattern("fine")
    broken.write(tmp_path)
    fine.write(tmp_path)
    real_parse = events.parse_line
    calls = []

    def failing_once(data):
        record = real_parse(data)
        if not calls and getattr(record, "fusion_id", None) == broken.expected[1].fusion_id:
            calls.append(record)
            raise KeyError("a bug")
        return record

    monkeypatch.setattr(events, "parse_line", failing_once)
    tailer, metrics, finished = make_tailer(tmp_path, Clock(0))
    with caplog.at_level(logging.WARNING, logger="tailer"):
        tailer.poll()
    assert calls, "the failing line was reached"
    assert {t.key for t in finished} >= {t.fusion_id for t in fine.expected}
    assert samples(metrics.registry.render_final(), "hydrafusion_tailer_malformed_lines_total")[
        (("reason", "internal_error"),)] == 1
    assert "(KeyError)" in caplog.text and "a bug" not in caplog.text


@pytest.mark.parametrize("budget", [None, 3])
@pytest.mark.parametrize("future", [False, True])
def test_records_the_daemon_takes_quietly_count_as_those_it_is_handed(
        tmp_path_factory, monkeypatch, budget, future):
    """SessionLog does not hand the daemon the model calls and tools it reads the short way
    (read's quiet_until_ns): every metric is as when each record is handed out and counted,
    the lines read and the newest event time too; a record from past the believable future
    (a clock ahead) among them is handed out and left out of the newest time as before."""
    import json

    writers = [every_pattern(f"quiet-{n}") for n in range(2)]
    for number, writer in enumerate(writers):
        lines = writer.lines()
        if not number:  # a log that ends in a model call (its turn in flight): the newest time
            last_call = max(n for n, line in enumerate(lines) if '"session.usage_record"' in line)
            del lines[last_call + 1:]
        if future:  # a model call, and a tool, written in 2150
            for at, line in enumerate(lines):
                event = json.loads(line)
                if event["type"] in ("session.usage_record", "tool.execution_start"):
                    event["timestamp"] = "2150-01-01T00:00:00.000Z"
                    lines[at] = json.dumps(event, separators=(",", ":"))
                    if event["type"] == "tool.execution_start":
                        break
            writer.lines = lambda lines=lines: lines
    rendered = []
    for quietly in (True, False):
        state = tmp_path_factory.mktemp("quiet" if quietly else "loud")
        for writer in writers:
            writer.write(state)
        if not quietly:
            monkeypatch.setattr(Metrics, "believable_until_ns", lambda self: -1)
        tailer, metrics, finished = make_tailer(state, Clock(0))
        taken = []
        passes = 0
        while not (passes and tailer.caught_up):
            tailer.poll(turn_budget=budget)
            passes += 1
            taken.append(sum(log.quiet_records for log in tailer.sessions.values()))
        assert (sum(taken) > 0) == quietly
        rendered.append((metrics.registry.render_final(), sorted(t.key for t in finished)))
    assert rendered[0] == rendered[1]
    newest = samples(rendered[0][0], "hydrafusion_tailer_last_event_timestamp_seconds")[()]
    assert 0 < newest < 4_102_444_800  # before 2100: the call from 2150 is not believed
