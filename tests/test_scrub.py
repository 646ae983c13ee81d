"""`python -m tailer scrub`: a shared copy keeps what the tailer needs and nothing else."""

import argparse
import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from sessiongen import CANARY, every_pattern
from tailer.copilot import event_records, event_types, event_values, events, scrub_tables
from tailer.commands import scrub
from tailer.turns.assembly import SessionTurns


@pytest.fixture
def raw(tmp_path):
    state = tmp_path / "raw"
    for name in ("session-a", "session-b"):
        every_pattern(name).write(state)
    return state


def scrubbed_logs(dst):
    return {folder.name: [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
            for folder in sorted(dst.iterdir())}


def tailer_turns(lines):
    """The turns the tailer's own parser and assembler find in these lines."""
    session = SessionTurns("s")
    found = []
    for line in lines:
        record = events.parse_line(line.encode())
        if isinstance(record, event_records.Event):
            assert record.missing_fields == () and record.unknown_fields == (), line
            found += session.feed(record)
    return found + session.finish_open()


def shape(turn):
    """Everything the tailer found about a turn but its ids: phase ids become their suffix."""
    def local(phase_id):
        if phase_id is None:
            return None
        assert phase_id.startswith(turn.key + ":")
        return phase_id.removeprefix(turn.key)

    legs = [(local(leg.phase_id), leg.phase_kind, leg.role, leg.scope, leg.model, leg.status,
             leg.verdict, leg.duration_ms, leg.usage, leg.failure_reason, local(leg.degraded_to_phase_id))
            for leg in turn.legs]
    calls = [(call.model, local(call.phase_id), call.usage, call.credits_known) for call in turn.calls]
    return (turn.pattern, turn.outcome, turn.degraded_reason, local(turn.committed_phase_id), legs,
            turn.start_ns, turn.end_ns, turn.routing_latency_ms, turn.usage, calls)


def test_scrubbed_sessions_give_the_tailer_the_same_turns(raw, tmp_path):
    summary = scrub.scrub_tree(raw, tmp_path / "out", seed="s")
    assert (summary.sessions, summary.dropped, summary.damaged) == (2, 0, 0)
    originals = {name: (raw / name / "events.jsonl").read_text().splitlines() for name in ("session-a", "session-b")}
    scrubbed = list(scrubbed_logs(tmp_path / "out").values())
    assert sorted(len(lines) for lines in scrubbed) == sorted(len(lines) for lines in originals.values())
    before = sorted(repr(shape(turn))
                    for lines in originals.values() for turn in tailer_turns(lines))
    after = sorted(repr(shape(turn))
                   for lines in scrubbed for turn in tailer_turns([json.dumps(line) for line in lines]))
    assert after == before
    assert len(before) == 18  # two sessions of every_pattern


def test_no_text_or_path_survives_and_tools_keep_their_names_only(raw, tmp_path):
    scrub.scrub_tree(raw, tmp_path / "out")
    text = "".join(path.read_text() for path in (tmp_path / "out").rglob("*.jsonl"))
    for secret in (CANARY, "/home/", "apiCallId", "context", "hint", "scores",
                   "ruleName", "content", "arguments", "result", "error", "command"):
        assert secret not in text
    # A shutdown keeps the list of files its code changes touched, with no entry in it.
    assert set(re.findall(r'"filesModified":([^,}]*)', text)) == {"[]"}
    tools = [line["data"] for lines in scrubbed_logs(tmp_path / "out").values() for line in lines
             if line["type"].startswith("tool.execution_")]
    assert tools and {tool.get("toolName") for tool in tools} == {"bash", None}
    assert all(set(tool) <= {"toolCallId", "toolName", "mcpServerName", "mcpToolName", "model",
                             "success", "fusion"} for tool in tools)
    assert [path.name for path in (tmp_path / "out").rglob("*") if path.is_file()] == ["events.jsonl"] * 2


def test_only_allowlisted_events_keep_data(raw, tmp_path):
    scrub.scrub_tree(raw, tmp_path / "out")
    for lines in scrubbed_logs(tmp_path / "out").values():
        for line in lines:
            assert list(line) == ["type", "data", "id", "timestamp", "parentId"]
            if line["type"] not in scrub_tables.SCRUB_DATA:
                assert line["data"] == {}, line["type"]
            assert set(line["data"]) <= set(scrub_tables.SCRUB_DATA.get(line["type"], {}))
        start = lines[0]["data"]
        assert sorted(start) == ["copilotVersion", "producer", "selectedModel", "sessionId", "startTime", "version"]
        shutdown = lines[-1]["data"]
        assert shutdown["shutdownType"] == "routine" and shutdown["currentModel"]
        totals = ("shutdownType", "currentModel", "modelMetrics", "tokenDetails", "codeChanges",
                  "agentMetrics", "providerModelMetrics", "accountingSnapshot",
                  "usageAccountingWatermarks")
        assert all(isinstance(value, int) for name, value in shutdown.items() if name not in totals)
        assert shutdown["sessionStartTime"] == event_values.parse_timestamp(start["startTime"]) // 10**6
        assert shutdown["accountingSnapshot"]["sessionStartTime"] == start["startTime"]
        assert list(shutdown["usageAccountingWatermarks"]) == [start["sessionId"]]
        for figures in shutdown["modelMetrics"].values():
            assert sorted(figures) == ["requests", "tokenDetails", "totalNanoAiu", "usage"]
        calls = [line["data"]["usage"] for line in lines if line["type"] == "session.usage_record"]
        assert calls
        for call in calls:  # a call's credits stay; the CLI's itemized billing does not
            assert list(call["copilotUsage"]) == ["totalNanoAiu"]
            assert type(call["copilotUsage"]["totalNanoAiu"]) is int


def test_ids_are_replaced_consistently_within_a_session(raw, tmp_path):
    scrub.scrub_tree(raw, tmp_path / "out")
    original = "".join((raw / name / "events.jsonl").read_text() for name in ("session-a", "session-b"))
    original_ids = {line["id"] for line in map(json.loads, original.splitlines())}
    original_fusion_ids = set(re.findall(r"fusion-[0-9a-f-]{36}", original))
    for folder, lines in scrubbed_logs(tmp_path / "out").items():
        assert lines[0]["data"]["sessionId"] == folder and folder not in ("session-a", "session-b")
        previous = None
        for line in lines:
            assert line["id"] not in original_ids
            assert line["parentId"] == previous
            previous = line["id"]
        text = json.dumps(lines)
        assert not any(fusion_id in text for fusion_id in original_fusion_ids)
        route_failed = next(line["data"] for line in lines if line["type"] == event_types.ROUTE_FAILED)
        fallback = next(line["data"] for line in lines if line["type"] == event_types.PHASE_COMPLETED
                        and line["data"]["fusionId"] + ":route" == route_failed["attemptId"])
        assert fallback["model"] == "gpt-5.6-mini"
    first, second = scrubbed_logs(tmp_path / "out").values()
    assert {line["id"] for line in first}.isdisjoint(line["id"] for line in second)


def test_output_is_deterministic_for_a_seed_and_the_default_seed_follows_the_input(raw, tmp_path):
    def run(name, seed):
        scrub.scrub_tree(raw, tmp_path / name, seed)
        return {path.relative_to(tmp_path / name): path.read_bytes() for path in (tmp_path / name).rglob("*.jsonl")}

    seeded = run("one", "seed")
    assert run("two", "seed") == seeded
    assert run("three", "other seed").keys().isdisjoint(seeded.keys())
    default = run("default", None)
    assert run("default again", None) == default
    with open(raw / "session-a" / "events.jsonl", "a") as log:
        log.write('{"type":"session.info","data":{},"id":"x","timestamp":"2026-11-04T12:00:00Z","parentId":null}\n')
    assert run("changed", None).keys().isdisjoint(default.keys())


def test_a_session_folder_whose_name_is_not_utf_8_is_scrubbed_as_any_other(raw, tmp_path, capsys):
    """A folder named in another encoding (`caf\\xe9`, Latin-1) ended the whole scrub:
    "'utf-8' codec can't encode character '\\udce9' in position 3", as its name seeded its
    ids. The other sessions' ids are what they were."""
    import os

    before = scrub.scrub_tree(raw, tmp_path / "before", "seed")
    os.rename(raw / "session-b", os.fsencode(raw) + b"/caf\xe9")
    args = argparse.Namespace(src=raw, dst=tmp_path / "out", seed="seed")
    assert scrub.main(args) == 0
    assert capsys.readouterr().err == ""
    logs = scrubbed_logs(tmp_path / "out")
    assert len(logs) == 2 and before.sessions == 2
    assert scrubbed_logs(tmp_path / "before").keys() & logs.keys()  # session-a's new id: as before


def test_unknown_types_keep_the_envelope_and_odd_values_are_dropped(tmp_path):
    session = tmp_path / "raw" / "only"
    session.mkdir(parents=True)
    lines = [
        {"type": "future.event", "data": {"secret": CANARY}, "id": "e1", "timestamp": "2026-11-04T10:00:00Z",
         "parentId": None, "agentId": "sub-agent", "ephemeral": True},
        {"type": event_types.PHASE_COMPLETED, "id": "e2", "timestamp": "2026-11-04T10:00:01.5Z", "parentId": "e1",
         "data": {"fusionId": "fusion-1", "phaseId": f"fusion-1:/home/{CANARY}/x", "model": {"name": CANARY},
                  "reason": CANARY * 20, "status": "succeeded", "usage": {"totalNanoAiu": 5, "extra": CANARY},
                  "durationMs": 12.5, "verdict": None}},
    ]
    (session / "events.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    scrub.scrub_tree(session, tmp_path / "out", seed="s")
    (unknown, leg), = scrubbed_logs(tmp_path / "out").values()
    assert unknown == {"type": "future.event", "data": {}, "id": unknown["id"],
                       "timestamp": "2026-11-04T10:00:00Z", "parentId": None}
    assert sorted(leg["data"]) == ["durationMs", "fusionId", "phaseId", "reason", "status", "usage",
                                   "verdict"]
    assert leg["data"]["usage"] == {"totalNanoAiu": 5} and leg["data"]["verdict"] is None
    assert leg["data"]["reason"] == "other"  # no code: never as written
    fusion_id, _, suffix = leg["data"]["phaseId"].partition(":")
    assert fusion_id == leg["data"]["fusionId"] and CANARY not in suffix and "/" not in suffix
    assert leg["parentId"] == unknown["id"]


def test_malformed_lines_are_dropped_and_only_counted(tmp_path, capsys):
    session = tmp_path / "raw" / "broken"
    session.mkdir(parents=True)
    good = '{"type":"user.message","data":{},"id":"a","timestamp":"2026-11-04T10:00:00Z","parentId":null}'
    (session / "events.jsonl").write_bytes("\n".join([
        good, f'{{"type": "user.message", "data": "{CANARY}', f'["{CANARY}"]',
        f'{{"data": "{CANARY}", "timestamp": "2026-11-04T10:00:00Z"}}',
        f'{{"type": "x", "timestamp": "{CANARY}"}}', "", "\0\0", good,
        f'{{"type": "half-written", "data": "{CANARY}',
    ]).encode())
    args = argparse.Namespace(src=tmp_path / "raw", dst=tmp_path / "out", seed=None)
    assert scrub.main(args) == 0
    output = capsys.readouterr()
    assert output.out == f"scrubbed 1 session into {tmp_path / 'out'}: 2 events kept, 4 lines dropped (1 damaged)\n"
    assert CANARY not in output.out + output.err
    (lines,) = scrubbed_logs(tmp_path / "out").values()
    assert len(lines) == 2


@pytest.mark.parametrize("log", ["random bytes", "a link to another program's file"])
def test_a_log_that_holds_no_event_is_named_and_left_out(raw, tmp_path, capsys, log):
    """It was counted among the sessions scrubbed, an empty log written for it, which a
    report of the copy then named as damaged: it is named so now, as every command names it."""
    junk = raw / "junk" / "events.jsonl"
    junk.parent.mkdir()
    other = tmp_path / "passwd"
    other.write_text("root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/usr/sbin:/bin/sh\n")
    if log == "random bytes":
        junk.write_bytes(bytes(range(7, 256)) * 4 + b"\n")
    else:
        junk.symlink_to(other)
    err, out = scrub_said(raw, tmp_path / "out", capsys)
    assert err == ("hydrafusion-tailer scrub: session junk: no line of its log is an event "
                   "(damaged, or not a Copilot CLI log); skipped\n")
    assert out.startswith(f"scrubbed 2 sessions into {tmp_path / 'out'}: ")
    assert len(scrubbed_logs(tmp_path / "out")) == 2


def scrub_said(src: Path, dst: Path, capsys) -> tuple[str, str]:
    """`scrub SRC DST`, in this process, which succeeds: what it wrote to stderr and stdout."""
    assert scrub.main(argparse.Namespace(src=src, dst=dst, seed="s")) == 0
    output = capsys.readouterr()
    return output.err, output.out


def test_a_session_folder_whose_log_is_a_fifo_is_named_so(tmp_path, capsys):
    """Given one session folder whose log is a FIFO, scrub said there was no events.jsonl
    there (exit 1); it names it as in a state folder, never opening it."""
    folder = tmp_path / "raw" / "s"
    folder.mkdir(parents=True)
    os.mkfifo(folder / "events.jsonl")
    err, out = scrub_said(folder, tmp_path / "out", capsys)
    assert err == "hydrafusion-tailer scrub: session s: its log is not a regular file; skipped\n"
    assert out.startswith(f"scrubbed 0 sessions into {tmp_path / 'out'}: ")


def test_refuses_a_destination_that_is_not_empty(raw, tmp_path, capsys):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "mine.txt").write_text("keep me")
    args = argparse.Namespace(src=raw, dst=tmp_path / "out", seed=None)
    assert scrub.main(args) == scrub.EXIT_USAGE
    assert "not empty" in capsys.readouterr().err
    assert [path.name for path in (tmp_path / "out").iterdir()] == ["mine.txt"]


@pytest.mark.parametrize("inside", ["sub/out", "session-a/out", "."])
def test_a_destination_inside_the_source_is_refused(raw, tmp_path, capsys, inside):
    """`scrub SRC SRC/sub` wrote the copy into SRC, where report and run then read each
    session twice, once more under its new id."""
    args = argparse.Namespace(src=raw, dst=raw / inside, seed=None)
    assert scrub.main(args) == scrub.EXIT_USAGE
    assert "its copies would be read as more sessions" in capsys.readouterr().err
    assert sorted(path.name for path in raw.iterdir()) == ["session-a", "session-b"]
    assert not (raw / "session-a" / "out").exists()


def test_a_destination_that_is_a_link_to_nothing_is_named_so(raw, tmp_path, capsys):
    """It said "out: File exists" (mkdir meeting the link), true but no help."""
    (tmp_path / "out").symlink_to(tmp_path / "gone")
    args = argparse.Namespace(src=raw, dst=tmp_path / "out", seed=None)
    assert scrub.main(args) == scrub.EXIT_USAGE
    assert "is a link to nothing: give a new folder, or remove the link" in capsys.readouterr().err
    assert (tmp_path / "out").is_symlink() and not (tmp_path / "gone").exists()


def test_a_scrub_that_cannot_write_whole_leaves_nothing_and_can_be_run_again(raw, tmp_path, monkeypatch, capsys):
    """A disk that filled up (or a file size limit) as the second session was written left
    the first session and half of the second, its last line cut: a copy one might share
    taking it for whole, and a DST that the next scrub refused as not empty."""
    import errno
    from pathlib import Path

    real_write, writes = Path.write_bytes, []

    def full_at_the_second(path, data):
        writes.append(path)
        if len(writes) == 2:
            real_write(path, data[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(path, data)
    monkeypatch.setattr(Path, "write_bytes", full_at_the_second)
    args = argparse.Namespace(src=raw, dst=tmp_path / "new" / "out", seed=None)
    assert scrub.main(args) == scrub.EXIT_USAGE
    assert "No space left on device" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()
    monkeypatch.setattr(Path, "write_bytes", real_write)
    assert scrub.main(args) == 0


def test_a_write_that_fails_names_the_destination(raw, tmp_path, monkeypatch, capsys):
    """A write's error names no file, and the message named SRC: "raw: No space left on
    device", sending the user to free room where the logs are rather than where the copy
    goes."""
    import errno
    from pathlib import Path

    def full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(Path, "write_bytes", full)
    args = argparse.Namespace(src=raw, dst=tmp_path / "out", seed=None)
    assert scrub.main(args) == scrub.EXIT_USAGE
    assert capsys.readouterr().err == (
        f"hydrafusion-tailer scrub: {tmp_path / 'out'}: No space left on device\n")


def test_a_reader_gone_before_the_summary_is_no_traceback(raw, tmp_path):
    """`scrub SRC DST | head -0`, or a reader that quit while the logs were read: a
    BrokenPipeError traceback after a scrub that was whole."""
    import os
    import subprocess
    import sys

    from tailerproc import ROOT, tailer_env

    reader, writer = os.pipe()
    os.close(reader)
    try:
        done = subprocess.run([sys.executable, "-m", "tailer", "scrub", str(raw), str(tmp_path / "out")],
                              cwd=ROOT, env=tailer_env(), stdout=writer, stderr=subprocess.PIPE, timeout=60)
    finally:
        os.close(writer)
    assert (done.returncode, done.stderr) == (0, b"")
    assert len(scrubbed_logs(tmp_path / "out")) == 2


@given(seed=st.integers(0, 2**64))
def test_a_random_uuid_is_what_the_uuid_module_makes_of_the_same_bits(seed):
    """The demo's and the scrubber's ids, without importing uuid: the same text, so the
    same seed gives the same ids as before."""
    import random
    import uuid

    drawn = random.Random(seed).getrandbits(128)
    assert scrub.seeded_uuid(random.Random(seed)) == str(uuid.UUID(int=drawn, version=4))


def test_the_default_seed_reads_a_log_a_piece_at_a_time(tmp_path):
    """It read each log whole into memory: a state folder of GBs held at once. The digest is
    the same as of the whole bytes."""
    import hashlib
    import tracemalloc

    log = tmp_path / "s" / "events.jsonl"
    log.parent.mkdir()
    data = b'{"type":"session.info","data":{}}\n' * (24 << 20 >> 5)  # ~24 MB
    log.write_bytes(data)
    tracemalloc.start()
    try:
        seed = scrub.default_seed({"s": log})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert seed == hashlib.sha256(b"s\0" + data + b"\0").hexdigest()
    assert peak < 8 << 20  # the whole log: 24 MB, twice over in the concatenation


@pytest.mark.parametrize("beside", [False, True], ids=["alone", "another-scrub-beside"])
def test_a_stopped_scrub_removes_what_it_wrote_and_nothing_else(tmp_path, monkeypatch, beside):
    """A stop (KeyboardInterrupt, commands/stops.py) after one session was written: that
    session and the folders made for DST go, but not what another scrub into the same DST
    wrote meanwhile (two at once), nor DST with it."""
    from tailer.commands.demo import FIXTURES

    dst = tmp_path / "new" / "dst"
    real_read, sessions = scrub.read_events, []

    def stopped_at_the_second(session):
        sessions.append(session)
        if len(sessions) == 2:
            if beside:
                (dst / "another").mkdir()
                (dst / "another" / "events.jsonl").write_text("{}\n")
            raise KeyboardInterrupt
        return real_read(session)
    monkeypatch.setattr(scrub, "read_events", stopped_at_the_second)
    with pytest.raises(KeyboardInterrupt):
        scrub.scrub_tree(FIXTURES, dst, "seed")
    if beside:
        assert [path.relative_to(tmp_path).as_posix() for path in sorted(tmp_path.rglob("*"))] == [
            "new", "new/dst", "new/dst/another", "new/dst/another/events.jsonl"]
    else:
        assert list(tmp_path.iterdir()) == []
