"""Loading a checkpoint: what the tailer saves loads back; anything else is refused at once.

A refused checkpoint is a CheckpointError, which the daemon answers by moving the file
aside and starting afresh (service._load_checkpoint); it must never be a crash later, a hang
or gigabytes read. Each damaged case below was reproduced in issue 10.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import threading
import tracemalloc
import uuid
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from exposition_helpers import saved_series
from sessiongen import START, SessionWriter
from tailer import records
from tailer.copilot import event_records
from tailer.daemon import checkpoint
from tailer.daemon import service
from tailer.turns import session_state
from tailer.daemon import stages
from tailer.daemon.checkpoint import CheckpointError, load, save
from tailer.turns.sessions import Tailer
from tailer.outputs.exposition import Registry
from tailer.outputs.history import History
from tailer.outputs.identity import Identity
from tailer.uuids import random_uuid
from tailer.outputs.metrics import Metrics
from tailer.outputs.outbox import traces_to_state
from tailer.outputs.spans import turn_spans

CANARY = "CANARY-checkpoint-value"
HISTORY_KEY = '["hydrafusion_turns_total",[["compound","false"],["pattern","single"]]]'


@pytest.fixture(scope="module")
def state(tmp_path_factory) -> dict:
    """A checkpoint as the tailer writes it: a session folder named by bytes that are not
    UTF-8, an open turn, counters and histograms, unsent spans, history not pushed yet."""
    folder = tmp_path_factory.mktemp("state")
    writer = SessionWriter("plain", START)
    writer.single("gpt-5.6-sol")
    writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="reject")
    writer.incomplete("mai-code-1.1-flash", "gpt-5.6-sol")
    writer.write(folder)
    os.rename(folder / "plain", os.fsencode(folder) + b"/sess-\xff\xfe")
    metrics = Metrics(Registry())
    tailer = Tailer(folder, metrics=metrics, from_start=True, idle_timeout_s=1e9)
    try:
        turns = tailer.poll().turns
        for turn in turns:
            metrics.count_turn(turn)
        reading = tailer.state()
    finally:
        tailer.close()
    assert len(turns) == 2 and any(saved["open"] for saved in reading["sessions"].values())
    pending = [{"trace_id": spans[0].key, "spans": [span.json for span in spans]}
               for spans in map(turn_spans, turns)]
    history = {"not_before_ms": 1, "cutoff_ms": 60_000, "bases": {HISTORY_KEY: 2 * 10**9},
               "divisors": {HISTORY_KEY: 10**9}, "changes": {HISTORY_KEY: [[30_000, 10**9]]}}
    return {**reading, "metrics": saved_series(metrics.registry), "pending": pending,
            "history": history, "policy_versions": ["2026-09-01"],
            "published_at_ms": 1_700_000_000_000}


def test_what_the_tailer_saves_loads_back(tmp_path, state):
    path = tmp_path / "cp.json"
    save(path, state)
    assert load(path) == json.loads(json.dumps({"version": checkpoint.VERSION, **state}))


def test_spans_waiting_for_the_collector_are_saved_without_a_copy_of_them(tmp_path, state):
    """While a backfill outruns the collector, megabytes of spans wait in the checkpoint;
    saving it must not hold them again as one string (that was the exporting backfill's
    peak memory)."""
    spans = state["pending"][0]["spans"]
    big = dict(state, pending=[{"trace_id": f"{number:032x}", "spans": spans * 10}
                               for number in range(1, 80)])
    size = len(json.dumps(big["pending"]))
    assert size > 4_000_000
    path = tmp_path / "cp.json"
    tracemalloc.start()
    try:
        save(path, big)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < size / 4
    assert json.loads(path.read_text()) == json.loads(json.dumps({"version": checkpoint.VERSION, **big}))


def session(state: dict) -> dict:
    return next(iter(state["sessions"].values()))


def open_record(state: dict, kind: str) -> dict:
    return next(record for saved in state["sessions"].values() for turn in saved["open"]
                for record in turn["records"] if record["kind"] == kind)


def first_series(state: dict, name: str) -> list:
    return state["metrics"][name][0]


DAMAGE = {
    "offset as text": lambda s: session(s)["position"].__setitem__(0, "10"),
    "offset of another kind": lambda s: session(s)["position"].__setitem__(0, {CANARY: CANARY}),
    "offset fractional": lambda s: session(s)["position"].__setitem__(0, 10.5),
    "offset negative": lambda s: session(s)["position"].__setitem__(0, -1),
    "offset true": lambda s: session(s)["position"].__setitem__(0, True),
    "line missing": lambda s: session(s)["position"].pop(1),
    "position a text": lambda s: session(s).update(position="x"),
    "position digest of more than the offset": lambda s: session(s)["position"].__setitem__(
        2, 10**9),
    "position digest not a text": lambda s: session(s)["position"].__setitem__(3, 5),
    "tombstone time as text": lambda s: session(s).update(gone_at="yesterday"),
    "finished nested": lambda s: session(s).update(finished=[[1]]),
    "finished id far too long": lambda s: session(s).update(finished=[CANARY * 100]),
    "finished not a list": lambda s: session(s).update(finished="fusion-1"),
    "context not an object": lambda s: session(s).update(context=[CANARY]),
    "context ledger usage negative": lambda s: session(s).update(context={
        "current": None, "awaiting_prompt": None, "log": None, "run_unpriced": [],
        "log_unpriced": [],
        "run": {"m": {"request_count": -1, "input_tokens": 0, "output_tokens": 0,
                      "cache_read_tokens": 0, "cache_write_tokens": 0, "nano_aiu": 0}}}),
    "context unpriced models not texts": lambda s: session(s)["context"].update(
        run_unpriced=[[CANARY]]),
    "context unpriced models missing": lambda s: session(s)["context"].pop("log_unpriced"),
    "record credits known as text": lambda s: open_record(s, "ModelCall").update(
        credits_known="yes"),
    "open turn not an object": lambda s: session(s).update(open=[1]),
    "record of an unknown kind": lambda s: open_record(s, "Resolved").update(kind=CANARY),
    "record with an unknown field": lambda s: open_record(s, "Resolved").update({CANARY: 1}),
    "record time as text": lambda s: open_record(s, "Resolved").update(time_ns="1"),
    "record time past 2262": lambda s: open_record(s, "Resolved").update(time_ns=2**64),
    "record id with a lone surrogate": lambda s: open_record(s, "LegEnded").update(
        phase_id=CANARY + "\ud800"),
    "record duration absurd": lambda s: open_record(s, "LegEnded").update(duration_ms=1e300),
    "record usage a number": lambda s: open_record(s, "LegEnded").update(usage=5),
    "record usage negative": lambda s: open_record(s, "LegEnded")["usage"].update(
        input_tokens=-1),
    "record usage missing a field": lambda s: open_record(s, "LegEnded")["usage"].pop(
        "nano_aiu"),
    "metric row short": lambda s: first_series(s, "hydrafusion_turns_total").pop(),
    "metric row long": lambda s: first_series(s, "hydrafusion_turns_total").append(0),
    "metric value as text": lambda s: first_series(s, "hydrafusion_turns_total").__setitem__(
        1, "1"),
    "metric value NaN": lambda s: first_series(s, "hydrafusion_turns_total").__setitem__(
        1, float("nan")),
    "metric value beyond int64": lambda s: first_series(
        s, "hydrafusion_tailer_last_event_timestamp_seconds").__setitem__(1, 1e300),
    "metric zero hold of years": lambda s: first_series(
        s, "hydrafusion_turns_total").__setitem__(3, 1e9),
    "histogram buckets as text": lambda s: first_series(
        s, "hydrafusion_turn_duration_seconds")[1].update(buckets="1,2"),
    "labels not a list": lambda s: first_series(s, "hydrafusion_turns_total").__setitem__(
        0, "single"),
    "pending span not JSON": lambda s: s["pending"][0]["spans"].__setitem__(0, '{"traceId'),
    "pending span of another trace": lambda s: s["pending"][0]["spans"].__setitem__(
        0, s["pending"][1]["spans"][0]),
    "pending trace id not hex": lambda s: s["pending"][0].update(trace_id="x" * 32),
    "history key not JSON": lambda s: s["history"]["changes"].update({"[": [[1, 1]]}),
    "history amount fractional": lambda s: s["history"]["changes"][HISTORY_KEY][0].__setitem__(
        1, 0.5),
    "history without its divisors": lambda s: s["history"].pop("divisors"),
    "history change short": lambda s: s["history"]["changes"][HISTORY_KEY].append([1]),
    "sessions a list": lambda s: s.update(sessions=[]),
    "metrics missing": lambda s: s.pop("metrics"),
    "published_at_ms as text": lambda s: s.update(published_at_ms="now"),
    "policy versions not a list": lambda s: s.update(policy_versions={CANARY: 1}),
    "policy version no version code": lambda s: s.update(policy_versions=[CANARY + " /x"]),
    "policy version a number": lambda s: s.update(policy_versions=[1]),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_field_is_refused_not_crashed_on_later(tmp_path, state, damage):
    damaged = copy.deepcopy({"version": checkpoint.VERSION, **state})
    DAMAGE[damage](damaged)
    path = tmp_path / "cp.json"
    path.write_text(json.dumps(damaged))
    with pytest.raises(CheckpointError) as refused:
        stages.load_saved(path)
    assert CANARY not in str(refused.value)  # the message names fields, never values


def test_a_series_whose_value_does_not_fit_its_family_costs_nothing_at_start(tmp_path, state):
    """A histogram's series holding a number, or a counter's holding buckets, has the shape
    of some series, so load cannot tell; restoring it must not crash every start."""
    path = tmp_path / "cp.json"
    for name, value in (("hydrafusion_turn_duration_seconds", 5),
                        ("hydrafusion_turns_total", {"buckets": [1], "sum": 1.0})):
        damaged = copy.deepcopy({"version": checkpoint.VERSION, **state})
        first_series(damaged, name)[1] = value
        path.write_text(json.dumps(damaged))
        with contextlib.suppress(CheckpointError):
            Metrics(Registry()).restore(stages.load_saved(path).metrics)


MAIN_CHECKPOINT = Path(__file__).parent / "data" / "checkpoint-v4-main.json"


def test_a_checkpoint_written_by_main_loads_with_nothing_lost_or_doubled(tmp_path):
    """tests/data/checkpoint-v4-main.json was written by main before each component read
    back its own part: every part loads and saves again as it was."""
    original = json.loads(MAIN_CHECKPOINT.read_text())
    path = tmp_path / "cp.json"
    path.write_bytes(MAIN_CHECKPOINT.read_bytes())
    saved = stages.load_saved(path)
    assert saved.reading == original and saved.stopped is False
    assert saved.published_at_ms == original["published_at_ms"]
    assert Identity(saved.identity).state() == original["identity"]
    assert traces_to_state(saved.pending) == original["pending"] != []
    assert {"files": saved.cli["files"], "spans": traces_to_state(saved.cli["spans"]),
            "metrics": traces_to_state(saved.cli["metrics"])} == original["cli"]
    history = History(None, {}, bases=[], not_before_ms=0, cutoff_ms=0, saved=saved.history)
    assert json.loads(json.dumps(history.state())) == original["history"]
    metrics = Metrics(Registry())
    metrics.restore(saved.metrics)
    again = saved_series(metrics.registry)
    for name, rows in original["metrics"].items():
        assert [row[:3] for row in again[name]] == [row[:3] for row in rows], name


MAIN_DAMAGE = {
    "identity id not a text": lambda s: s["identity"].update(instance_id=[CANARY]),
    "identity id far too long": lambda s: s["identity"].update(instance_id=CANARY * 100),
    "identity start as text": lambda s: s["identity"].update(start_ns="1"),
    "stopped as text": lambda s: s.update(stopped="yes"),
    "cli files not an object": lambda s: s["cli"].update(files=[CANARY]),
    "cli position negative": lambda s: s["cli"]["files"]["traces-1.jsonl"].__setitem__(0, -1),
    "cli unit not JSON": lambda s: s["cli"]["spans"][0]["spans"].__setitem__(0, CANARY),
    "cli metric unit a list": lambda s: s["cli"]["metrics"][0]["spans"].__setitem__(0, "[1]"),
    "cli units missing": lambda s: s["cli"].pop("metrics"),
}


@pytest.mark.parametrize("damage", sorted(MAIN_DAMAGE))
def test_a_damaged_part_of_the_daemon_is_refused(tmp_path, damage):
    damaged = json.loads(MAIN_CHECKPOINT.read_text())
    MAIN_DAMAGE[damage](damaged)
    path = tmp_path / "cp.json"
    path.write_text(json.dumps(damaged))
    with pytest.raises(CheckpointError) as refused:
        stages.load_saved(path)
    assert CANARY not in str(refused.value)


def test_deeply_nested_json_is_refused_without_a_recursion_error(tmp_path):
    path = tmp_path / "cp.json"
    path.write_text("[" * 1_000_000 + "]" * 1_000_000)
    with pytest.raises(CheckpointError):
        load(path)
    path.write_text('{"version":2,"sessions":{},"metrics":{},"pending":[{"trace_id":"%s",'
                    '"spans":["%s"]}]}' % ("0" * 32, "[" * 100_000))
    with pytest.raises(CheckpointError):
        stages.load_saved(path)


def load_within(path, seconds: float = 5.0):
    """load(path) in a thread: a blocking open must fail the test, not hang it."""
    outcome = []
    thread = threading.Thread(target=lambda: outcome.append(_outcome(path)), daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"load({path}) blocked"
    return outcome[0]


def _outcome(path):
    try:
        return load(path)
    except Exception as error:  # returned for the test to look at
        return error


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_at_once(tmp_path):
    path = tmp_path / "cp.json"
    os.mkfifo(path)
    assert isinstance(load_within(path), CheckpointError)


@pytest.mark.parametrize("target", ["/dev/zero", "/dev/null", "directory"])
def test_a_device_or_a_directory_is_refused_at_once(tmp_path, target):
    if target == "directory":
        target = tmp_path / "directory"
        target.mkdir()
    elif not os.path.exists(target):
        pytest.skip(f"no {target} here")
    path = tmp_path / "cp.json"
    path.symlink_to(target)
    assert isinstance(load_within(path), CheckpointError)


def test_a_file_too_large_to_be_ours_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "cp.json"
    with open(path, "wb") as handle:  # sparse: costs no disk
        handle.write(b'{"version":2,"sessions":{},"metrics":{},"pending":[],"x":"')
        handle.truncate(checkpoint.MAX_BYTES + 1)
    tracemalloc.start()
    try:
        with pytest.raises(CheckpointError, match="larger than 256 MiB"):
            load(path)
        assert tracemalloc.get_traced_memory()[1] < 1 << 20
    finally:
        tracemalloc.stop()


def test_the_daemon_moves_a_refused_checkpoint_aside(tmp_path):
    path = tmp_path / "cp.json"
    os.mkfifo(path)
    assert service._load_checkpoint(path) is None
    assert not path.exists() and (tmp_path / "cp.json.unreadable").is_fifo()


def test_every_field_of_every_record_has_its_check():
    """A record field the checker does not know would refuse every checkpoint."""
    for cls in session_state._RECORD_CHECKS:
        assert set(session_state._RECORD_CHECKS[cls]) == {f.name for f in records.fields(cls)}


def test_a_number_field_is_checked_by_what_it_measures_not_by_its_type():
    """An int that is no timestamp must not pass as one: it needs a check of its own."""
    @records.record
    class Counted:
        time_ns: int
        attempts: int

    assert session_state._field_check(Counted, records.fields(Counted)[0]) is \
        session_state._time_ns
    with pytest.raises(TypeError, match="attempts"):
        session_state._field_check(Counted, records.fields(Counted)[1])
    with pytest.raises(ValueError):
        session_state._RECORD_CHECKS[event_records.ModelCall]["duration_ms"](-1.0, "a duration")


def test_a_version_3_checkpoint_loads_with_its_calls_credits_unknown(tmp_path, state):
    """Version 3 read a call's premium-request multiplier (`cost`) as its credits."""
    old = copy.deepcopy({**state, "version": 3})
    calls = 0
    for saved in old["sessions"].values():
        for ledger in ("run_unpriced", "log_unpriced"):
            del saved["context"][ledger]
        for turn in saved["open"]:
            for record in turn["records"]:
                if record["kind"] == "ModelCall":
                    del record["credits_known"]
                    record["usage"]["nano_aiu"] = 10**9  # a multiplier of 1.0
                    calls += 1
    assert calls
    path = tmp_path / "cp.json"
    path.write_text(json.dumps(old))
    loaded = load(path)
    assert loaded["version"] == checkpoint.VERSION
    for saved in loaded["sessions"].values():
        for turn in map(session_state.turn_from_data, saved["open"]):
            assert all(not c.credits_known and c.usage.nano_aiu == 0 for c in turn.calls)
        context = session_state.context_from_data(saved["context"])
        assert context.run_unpriced == set(context.run or ())
        assert context.log_unpriced == set(context.log or ())
        assert context.log


@given(st.binary(min_size=16, max_size=16))
def test_the_instance_id_is_written_as_uuid_writes_a_random_one(random):
    assert random_uuid(random) == str(uuid.UUID(bytes=random, version=4))


def test_taking_the_checkpoint_removes_what_its_killed_saves_left_and_nothing_else(tmp_path):
    """A save killed before its rename leaves a temporary file as large as a checkpoint;
    the next tailer to take the lock removes those of its own checkpoint, and no file of
    another (a second checkpoint, the lock, the metrics textfile, a folder of that name),
    and never while another tailer holds the lock."""
    path = tmp_path / "cp.json"
    save(path, {"sessions": {}})
    killed = [tmp_path / ".cp.json.0123456789ab.tmp", tmp_path / ".cp.json.tmp_x8k2.tmp"]
    for leftover in killed:
        leftover.write_bytes(b"{half a checkpoint")
    (tmp_path / ".cp.json.dangling.tmp").symlink_to(tmp_path / "nowhere")
    killed.append(tmp_path / ".cp.json.dangling.tmp")
    others = [tmp_path / ".other.json.0123456789ab.tmp", tmp_path / ".cp.json.lock.abc.tmp",
              tmp_path / ".m.prom.abc.tmp", tmp_path / "cp.json.abc.tmp", tmp_path / ".cp.json.abc.tmp.1"]
    for other in others:
        other.write_bytes(b"not ours")
    (tmp_path / ".cp.json.folder.tmp").mkdir()
    others.append(tmp_path / ".cp.json.folder.tmp")
    held = checkpoint.claim(path)
    try:
        assert not any(os.path.lexists(leftover) for leftover in killed)
        assert all(other.exists() for other in others) and path.exists()
        late = tmp_path / ".cp.json.feedfacecafe.tmp"
        late.write_bytes(b"a running save's")
        with pytest.raises(checkpoint.CheckpointInUse):
            checkpoint.claim(path)
        assert late.exists()  # a second tailer, refused, removes nothing
    finally:
        held.close()
    assert load(path) == {"version": checkpoint.VERSION, "sessions": {}}
