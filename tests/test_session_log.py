"""SessionLog (tailer/turns/session_log.py), the one rule every command reads a session log by:
however a log arrives (in pieces, cut mid-line, rewritten), it gives the turns and counts the
damage a single read of the whole gives, each turn once; and its problems are named in the
vocabulary's words."""

import json
import os

from hypothesis import HealthCheck, given, settings, strategies as st

from sessiongen import START, SessionWriter
from tailer.copilot import problems
from tailer.turns import session_log
from tailer.copilot.event_values import LATEST_NS
from tailer.copilot.lines import Position
from tailer.turns.session_log import SessionLog

DAMAGED = ['{"type":"session.fusion_resolved","data":{"fusionId":"fusion-cut',
           '{"type":"session.fusion_completed","data":{"fusionId":[1]}}']


def session_lines() -> list[str]:
    writer = SessionWriter("s", START)
    writer.single("gpt-5.6-sol")
    writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="reject")
    writer.incomplete("mai-code-1.1-flash", "gpt-5.6-sol")
    writer.critique("mai-code-1.1-flash", ["gpt-5.6-sol", "claude-opus-5"])
    writer.ordinary("gpt-5.6-sol")
    return writer.lines()


LINES = session_lines()


def log_bytes(damage_at: list[int]) -> bytes:
    lines = list(LINES)
    for number, at in enumerate(sorted(damage_at, reverse=True)):
        lines.insert(at, DAMAGED[number % len(DAMAGED)])
    return "".join(f"{line}\n" for line in lines).encode()


def whole_read(tmp_path, data: bytes) -> tuple[list, dict]:
    path = tmp_path / "whole.jsonl"
    path.write_bytes(data)
    log = SessionLog("s", path)
    turns = [turn for read in log.read() for turn in read.finished] + log.finish_open()
    return turns, dict(log.damage)


damage_places = st.lists(st.integers(1, len(LINES)), max_size=4)
cuts = st.lists(st.integers(0, 1 << 20), max_size=8)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(damage_at=damage_places, cut_at=cuts)
def test_a_log_read_in_pieces_gives_what_one_read_gives(tmp_path, damage_at, cut_at):
    data = log_bytes(damage_at)
    expected = whole_read(tmp_path, data)
    path = tmp_path / "pieces.jsonl"
    path.write_bytes(b"")
    log = SessionLog("s", path)
    turns = []
    for cut in sorted({cut % (len(data) + 1) for cut in cut_at}) + [len(data)]:
        with open(path, "r+b") as out:
            out.seek(0, os.SEEK_END)
            out.write(data[out.tell():cut])
        turns += [turn for read in log.read() for turn in read.finished]
    turns += log.finish_open()
    assert (turns, dict(log.damage)) == expected
    assert sum(log.damage.values()) == len(damage_at)


def checked_lines() -> list[str]:
    """LINES with the CLI's totals checked twice (a usage checkpoint, a shutdown)."""
    writer = SessionWriter("s", START)
    writer.single("gpt-5.6-sol")
    writer.usage_checkpoint()
    writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="reject")
    writer.ordinary("gpt-5.6-sol")
    writer.shutdown(nano_aiu_off_by=7)
    return writer.lines()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(damage_at=damage_places, cut_at=cuts, fail_at=st.sets(st.integers(0, 200), max_size=3))
def test_quiet_records_are_counted_and_the_rest_is_as_when_every_record_is_handed_out(
        tmp_path, damage_at, cut_at, fail_at):
    """read(quiet_until_ns), the report's and the daemon's way: the same turns in the same
    order, damage (a bug's too), checks of the CLI's totals and position as a read that hands
    out every record, however the log arrives; each record not handed out is counted."""
    lines = checked_lines()
    for number, at in enumerate(sorted({at % (len(lines) + 1) for at in damage_at}, reverse=True)):
        lines.insert(at, DAMAGED[number % len(DAMAGED)])
    data = "".join(f"{line}\n" for line in lines).encode()
    results, records = [], []
    for quiet_until_ns in (-1, LATEST_NS):
        path = tmp_path / f"events-{quiet_until_ns}.jsonl"
        path.write_bytes(b"")
        log = SessionLog("s", path)
        fed, real_feed = [], log.turns.feed

        def failing_sometimes(record):
            fed.append(record)
            if len(fed) - 1 in fail_at:
                raise KeyError("a bug")
            return real_feed(record)

        log.turns.feed = failing_sometimes
        turns, checks, handed, quiet = [], [], 0, 0
        for cut in sorted({cut % (len(data) + 1) for cut in cut_at}) + [len(data)]:
            with open(path, "r+b") as out:
                out.seek(0, os.SEEK_END)
                out.write(data[out.tell():cut])
            for read in log.read(quiet_until_ns):
                handed += read.record is not None
                turns += read.finished
            quiet += log.quiet_records
            checks += log.turns.take_reconciliations()
        turns += log.finish_open()
        results.append((turns, dict(log.damage), checks, log.reader.position))
        records.append((handed, quiet))
    every_record, quietly = results
    assert quietly == every_record
    assert every_record[2] or fail_at  # the CLI's totals were checked, unless a bug hit them
    (all_handed, none_quiet), (handed, quiet) = records
    assert none_quiet == 0 and quiet > 0 and handed + quiet == all_handed


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(read_first=st.integers(0, len(LINES)))
def test_a_rewritten_log_is_read_again_with_no_turn_twice(tmp_path, read_first):
    """The CLI rewrote its log (other bytes, same events): the open turns are forgotten and
    read again, the finished ones are not finished again."""
    path = tmp_path / "events.jsonl"
    path.write_text("".join(f"{line}\n" for line in LINES[:read_first]))
    log = SessionLog("s", path)
    turns = [turn for read in log.read() for turn in read.finished]
    rewritten = [json.dumps(json.loads(line), separators=(", ", ": ")) for line in LINES]
    path.write_text("".join(f"{line}\n" for line in rewritten))
    generation = log.generation
    turns += [turn for read in log.read() for turn in read.finished] + log.finish_open()
    expected, _ = whole_read(tmp_path, "".join(f"{line}\n" for line in LINES).encode())
    assert [t.key for t in turns] == [t.key for t in expected]
    assert log.generation == generation + (read_first > 0)


def test_open_turns_are_finished_once_the_log_is_quiet_for_the_idle_timeout(tmp_path):
    path = tmp_path / "events.jsonl"
    writer = SessionWriter("s", START)
    writer.incomplete("mai-code-1.1-flash", "gpt-5.6-sol")
    path.write_text("".join(f"{line}\n" for line in writer.lines()))
    log = SessionLog("s", path)
    assert not [turn for read in log.read() for turn in read.finished]
    modified = os.stat(path).st_mtime
    assert log.finish_if_idle(modified + 9, idle_timeout_s=10) == []
    (turn,) = log.finish_if_idle(modified + 10, idle_timeout_s=10)
    assert turn.outcome == "incomplete"
    assert log.finish_if_idle(modified + 20, idle_timeout_s=10) == []


def test_a_state_saved_mid_log_resumes_where_it_stopped(tmp_path):
    data = log_bytes([])
    path = tmp_path / "events.jsonl"
    path.write_bytes(data[:len(data) // 2])
    first = SessionLog("s", path)
    turns = [turn for read in first.read() for turn in read.finished]
    saved = json.loads(json.dumps(first.to_state()))
    path.write_bytes(data)
    resumed = SessionLog.from_state("s", path, saved)
    turns += [turn for read in resumed.read() for turn in read.finished] + resumed.finish_open()
    assert turns == whole_read(tmp_path, data)[0]


def test_a_line_the_tailer_fails_on_is_damage_not_a_crash(tmp_path, monkeypatch):
    path = tmp_path / "events.jsonl"
    path.write_bytes(log_bytes([]))
    calls = []

    def failing_once(record):
        if not calls:
            calls.append(record)
            raise KeyError("a bug")
        return real_feed(record)

    log = SessionLog("s", path)
    real_feed = log.turns.feed
    monkeypatch.setattr(log.turns, "feed", failing_once)
    reads = list(log.read())
    assert [read.error_type for read in reads if read.error_type] == ["KeyError"]
    assert log.damage == {"internal_error": 1}


def test_a_log_that_cannot_be_read_names_its_problem_and_one_that_vanished_does_not(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    log = SessionLog("s-fifo", fifo)
    assert list(log.read()) == []
    assert log.problem == "session s-fifo: its log is not a regular file; skipped"
    gone = SessionLog("s-gone", tmp_path / "nowhere", Position())
    assert list(gone.read()) == [] and gone.problem is None


def test_the_vocabulary():
    denied = PermissionError(13, "Permission denied")
    assert problems.folder_problem("s", denied) == "session s: cannot read its folder: Permission denied"
    assert problems.log_problem("s", denied) == "session s: cannot read its log: Permission denied"
    assert problems.state_dir_problem(denied) == "cannot list the state directory: Permission denied"
    assert problems.line_problem("s", 3, "invalid_json") == \
        "session s: skipped line 3 of events.jsonl: invalid_json"
    assert problems.line_problem("s", 3, "internal_error", "KeyError") == \
        "session s: line 3 of events.jsonl could not be handled (KeyError); skipped"


# -- A log that is no log: no line of its head an event --------------------------------------


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=3000))
def test_a_log_of_events_is_never_taken_for_damage_whatever_follows(tmp_path, tail):
    """The CLI starts every log with session.start: whatever comes after (damage, a cut
    line), it holds an event."""
    writer = SessionWriter("real", START)
    writer.single("gpt-5.6-sol")
    path = writer.write(tmp_path)
    with open(path, "ab") as log:
        log.write(tail)
    assert not session_log.holds_no_event(path)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=100_000))
def test_bytes_with_no_event_are_named_as_damage_when_they_hold_a_line(tmp_path, data):
    data = data.replace(b'"type"', b'"tipe"')  # no line of them can be an event
    path = tmp_path / "events.jsonl"
    path.write_bytes(data)
    head = data[:session_log.HEAD_BYTES]
    lines = head.split(b"\n")[:-1] if len(data) > session_log.HEAD_BYTES else head.split(b"\n")
    assert session_log.holds_no_event(path) == any(line.strip() for line in lines)


def test_an_empty_or_missing_log_is_no_damage(tmp_path):
    (tmp_path / "empty.jsonl").write_bytes(b"")
    assert not session_log.holds_no_event(tmp_path / "empty.jsonl")
    assert not session_log.holds_no_event(tmp_path / "missing.jsonl")
