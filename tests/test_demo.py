"""The demo: fixtures moved to recent times, and turns replayed with fresh ids."""

import json
import random
import re
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

from exposition_helpers import samples
from fixture_truth import FIXTURES, fixture_turns, ordinary_turns, read_lines
from sessiongen import SessionWriter
from tailer.commands import demo
from tailer.commands import demo_run
from tailer.commands.cli import parse_args
from tailer.copilot import event_records, event_types, event_values, events
from tailer.commands import scrub
from tailerproc import ROOT, tailer_env
from tailer.turns.assembly import SessionTurns

NOW = datetime(2026, 12, 1, 12, 0, 0, 250_000, tzinfo=timezone.utc)
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def ns(timestamp):
    """A timestamp, or unix milliseconds as a shutdown's session start gives them."""
    return int(timestamp) * 1_000_000 if timestamp.isdigit() else event_values.parse_timestamp(timestamp)


def timestamps(line):
    """Every time an event holds, as written: its own, a start or resume time, and a
    shutdown's session start (unix milliseconds, and in its accounting snapshot)."""
    data = line["data"]
    found = [line["timestamp"]] + [data[name] for name in ("startTime", "resumeTime") if name in data]
    if line["type"] == event_types.SHUTDOWN:
        found += [str(data["sessionStartTime"]), data["accountingSnapshot"]["sessionStartTime"]]
    return found


def sessions_by_start(folder):
    logs = [read_lines(path) for path in folder.glob("*/events.jsonl")]
    return sorted(logs, key=lambda lines: ns(lines[0]["timestamp"]))


def without_ids(line):
    """The event with every id and time blanked, to compare copies."""
    text = json.dumps(line)
    for old in [line["id"], line["parentId"]] + timestamps(line):
        if old:
            text = text.replace(f'"{old}"', '""').replace(f": {old},", ": 0,")
    return json.loads(UUID.sub("", text))


def tailer_turns(lines):
    session = SessionTurns("demo")
    found = []
    for line in lines:
        record = events.parse_line(json.dumps(line).encode())
        if isinstance(record, event_records.Event):
            found += session.feed(record)
    return found + session.finish_open()


def test_prepare_moves_each_session_whole_so_the_last_turn_ends_minutes_before_now(tmp_path):
    written = demo.prepare(FIXTURES, tmp_path / "work", NOW)
    assert len(written) == len(list(FIXTURES.iterdir()))
    before, after = sessions_by_start(FIXTURES), sessions_by_start(tmp_path / "work")
    offsets = set()
    for old, new in zip(before, after, strict=True):
        assert [without_ids(line) for line in new] == [without_ids(line) for line in old]
        moved = {ns(b) - ns(a) for o, n in zip(old, new) for a, b in zip(timestamps(o), timestamps(n), strict=True)}
        assert len(moved) == 1, "a session's internal timing changed"
        offsets |= moved
        assert [line["parentId"] for line in new[1:]] == [line["id"] for line in new[:-1]]
        assert new[0]["data"]["sessionId"] != old[0]["data"]["sessionId"]
    assert len(offsets) == 1, "the gaps between sessions changed though the set spans under two days"
    last = max(ns(line["timestamp"]) for lines in after for line in lines)
    assert last == ns("2026-12-01T11:57:00.250Z")
    fixture_ids = {line["id"] for lines in before for line in lines}
    assert fixture_ids.isdisjoint(line["id"] for lines in after for line in lines)


def test_prepared_sessions_hold_every_fixture_turn(tmp_path):
    demo.prepare(FIXTURES, tmp_path / "work", NOW)
    turns = [turn for lines in sessions_by_start(tmp_path / "work") for turn in tailer_turns(lines)]
    assert sorted((t.pattern, t.outcome, len(t.legs)) for t in turns if not t.ordinary) == sorted(
        (t.pattern, t.outcome, len(t.legs)) for t in fixture_turns())
    assert sorted(len(t.calls) for t in turns if t.ordinary) == sorted(t.calls for t in ordinary_turns())
    assert all(NOW - timedelta(days=2) < datetime.fromtimestamp(t.end_ns / 1e9, timezone.utc) < NOW for t in turns)


def test_prepare_shrinks_the_gaps_of_a_set_spread_over_more_than_two_days(tmp_path):
    for index, day in enumerate((0, 3, 6)):
        writer = SessionWriter(f"s{index}", datetime(2026, 10, 1 + day, 9, tzinfo=timezone.utc))
        writer.single("gpt-5.6-sol")
        writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol")
        writer.write(tmp_path / "raw")
    scrub.scrub_tree(tmp_path / "raw", tmp_path / "fixtures", seed="s")
    demo.prepare(tmp_path / "fixtures", tmp_path / "work", NOW)
    before, after = sessions_by_start(tmp_path / "fixtures"), sessions_by_start(tmp_path / "work")
    ends = []
    for old, new in zip(before, after, strict=True):
        moved = {ns(n["timestamp"]) - ns(o["timestamp"]) for o, n in zip(old, new, strict=True)}
        assert len(moved) == 1
        ends.append(ns(new[-1]["timestamp"]))
    assert ends == sorted(ends)
    assert ends[-1] == ns("2026-12-01T11:57:00.250Z")
    assert ends[-1] - ends[0] == pytest.approx(timedelta(days=2).total_seconds() * 1e9, rel=1e-6)


def test_prepare_refuses_a_folder_that_is_not_empty(tmp_path):
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "mine").write_text("")
    with pytest.raises(ValueError, match="not empty"):
        demo.prepare(FIXTURES, tmp_path / "work", NOW)


class Clock:
    def __init__(self, now):
        self.now = now

    def __call__(self):
        return self.now


def replay(replayer, clock, ticks):
    """Tick once a second, as the daemon's loop does: each line of the log with the clock
    of the tick that wrote it (unix ns)."""
    written = []
    for _ in range(ticks):
        before = replayer.log_path.stat().st_size if replayer.log_path.exists() else 0
        if replayer.tick():
            new = replayer.log_path.read_bytes()[before:].decode().splitlines()
            written += [(json.loads(line), round(clock.now * 1000) * 1_000_000) for line in new]
        clock.now += 1
    return written


def test_replayer_writes_each_event_when_its_time_comes_with_fresh_ids(tmp_path):
    """A turn is replayed as the CLI writes it: each event at the first tick at or after its
    time, so it is seen in flight a leg at a time; fresh ids, the fixtures' timing kept."""
    clock = Clock(NOW.timestamp())
    replayer = demo.Replayer(tmp_path / "work", FIXTURES, interval_s=30, clock=clock, rng=random.Random(1))
    sources = [turn for lines in sessions_by_start(FIXTURES) for turn in tailer_turns(lines)]
    assert any(turn.ordinary for turn in sources)  # each ordinary turn is replayed on its own
    written = replay(replayer, clock, 2400)
    lines = [line for line, _ in written]
    assert lines == read_lines(replayer.log_path)
    assert lines[0]["type"] == event_types.SESSION_START
    assert lines[0]["data"]["sessionId"] == replayer.session_id == replayer.log_path.parent.name
    assert [line["parentId"] for line in lines] == [None] + [line["id"] for line in lines[:-1]]
    assert len({line["id"] for line in lines}) == len(lines)
    for line, at in written[1:]:
        assert at - 1e9 < ns(line["timestamp"]) <= at, "written before its time, or a tick late"

    *replayed, cut_short = tailer_turns(lines)  # the run ended during the last one
    assert len(replayed) > len(sources)
    expected = (sources * 3)[:len(replayed)]
    fixture_fusion_ids = {turn.key for turn in sources}
    assert len({turn.key for turn in replayed} | fixture_fusion_ids) == len(replayed) + len(sources)
    for turn, source in zip(replayed, expected, strict=True):
        assert (turn.pattern, turn.outcome, turn.degraded_reason) == (source.pattern, source.outcome,
                                                                      source.degraded_reason)
        assert [(leg.phase_kind, leg.model, leg.status, leg.verdict, leg.usage, leg.duration_ms)
                for leg in turn.legs] == [(leg.phase_kind, leg.model, leg.status, leg.verdict, leg.usage,
                                           leg.duration_ms) for leg in source.legs]
        assert all(leg.phase_id.startswith(turn.key + ":") for leg in turn.legs)
        assert turn.end_ns - source.end_ns == turn.start_ns - source.start_ns, "a turn's timing changed"


def test_a_replayed_turn_is_in_flight_a_leg_at_a_time(tmp_path):
    """Between a turn's routing decision and its rollup, its model calls and legs arrive
    over several ticks: "now" shows it running, then each leg done while the next runs."""
    clock = Clock(NOW.timestamp())
    replayer = demo.Replayer(tmp_path / "work", FIXTURES, interval_s=30, clock=clock, rng=random.Random(3))
    written = replay(replayer, clock, 1200)
    routed, legs = {}, {}  # per fusion turn, the tick of its routing decision, of each leg
    for line, at in written:
        if line["type"] == event_types.RESOLVED:
            routed[line["data"]["fusionId"]] = at
        elif line["type"] in (event_types.PHASE_COMPLETED, event_types.PHASE_FAILED):
            legs.setdefault(line["data"]["fusionId"], []).append(at)
    assert len(routed) > 15
    for fusion_id, at in routed.items():
        ended = legs.get(fusion_id, [])
        assert all(at < end for end in ended), "a leg ended as its turn began: never seen running"
        if len(ended) > 1:
            assert ended[0] < ended[-1], "every leg of a turn written at once"


def test_replayed_turns_never_overlap_and_come_at_the_interval(tmp_path):
    clock = Clock(NOW.timestamp())
    replayer = demo.Replayer(tmp_path / "work", FIXTURES, interval_s=20, clock=clock, rng=random.Random(2))
    replay(replayer, clock, 3000)
    replayed = tailer_turns(read_lines(replayer.log_path))
    assert len(replayed) > 20
    for earlier, later in zip(replayed, replayed[1:]):
        gap_s = (later.start_ns - earlier.start_ns) / 1e9
        assert gap_s >= 20 - 1  # a routing decision comes up to its latency after the turn's start
        assert earlier.end_ns <= later.start_ns
        if gap_s > 21:  # held back only as long as the last turn needed to end, and a pause
            assert later.start_ns - earlier.end_ns < (demo.PAUSE_S + 1) * 1e9


# Runs the command line as `python -m tailer` does, with inotify failing to start.
WITHOUT_INOTIFY = (
    "import sys, tailer.copilot.watch, tailer.commands.cli\n"
    "def unavailable(): raise OSError(24, 'Too many open files')\n"
    "tailer.copilot.watch.Inotify = unavailable\n"
    "sys.exit(tailer.commands.cli.main())\n"
)


def demo_once(checkpoint, textfile, *, inotify=True) -> tuple[float, float]:
    """`demo --once`; returns the turns it counted in all, and the turns in flight."""
    start = ["-m", "tailer"] if inotify else ["-c", WITHOUT_INOTIFY]
    command = [sys.executable, *start, "demo", "--once", "--state-dir", str(FIXTURES),
               "--checkpoint", str(checkpoint), "--otlp-endpoint", "none",
               "--metrics-address", "none", "--textfile", str(textfile)]
    result = subprocess.run(command, cwd=ROOT, env=tailer_env(), capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    exposition = textfile.read_text()
    return (sum(samples(exposition, "hydrafusion_turns_total").values()),
            sum(samples(exposition, "hydrafusion_turns_in_flight").values()))


def test_a_restarted_demo_carries_on_and_counts_nothing_twice(tmp_path):
    """The copy of the fixtures stays beside the checkpoint: a second start (a container
    restart, say) reads on from the checkpoint instead of counting a fresh copy again."""
    checkpoint, textfile = tmp_path / "state" / "demo.json", tmp_path / "demo.prom"
    first = demo_once(checkpoint, textfile)
    copy = demo_run.demo_sessions(checkpoint)
    sessions = {path.parent.name for path in copy.glob("*/events.jsonl")}
    second = demo_once(checkpoint, textfile)

    # Each start begins replaying a turn at once, in a demo session of its own: in flight,
    # as a turn the CLI is writing (the first start's stays so, as a CLI stopped mid-turn
    # leaves it, until the idle timeout ends it).
    assert first == (len(fixture_turns()), 1)
    assert second == (len(fixture_turns()), 2)
    assert sessions < {path.parent.name for path in copy.glob("*/events.jsonl")}


def test_a_demo_without_inotify_sees_its_replayed_turn_too(tmp_path):
    """Where inotify is unavailable (another platform, or its instances used up) the
    watcher polls: the first replayed turn must be there when the logs are first listed."""
    checkpoint, textfile = tmp_path / "state" / "demo.json", tmp_path / "demo.prom"
    assert demo_once(checkpoint, textfile, inotify=False) == (len(fixture_turns()), 1)


def test_a_copy_cut_short_is_made_again_not_carried_on_with(tmp_path):
    checkpoint, textfile = tmp_path / "state" / "demo.json", tmp_path / "demo.prom"
    partial = demo_run.demo_sessions(checkpoint).with_name("demo.json.sessions.partial")
    (partial / "cut-short").mkdir(parents=True)
    (partial / "cut-short" / "events.jsonl").write_text('{"type":"session.start"')

    assert demo_once(checkpoint, textfile) == (len(fixture_turns()), 1)
    assert not partial.exists()


@pytest.mark.parametrize("what", ["file", "link-to-nothing"])
def test_a_copys_place_taken_by_no_folder_is_named_and_no_copy_is_left(tmp_path, what):
    """A file or a dangling link at FILE.sessions: the whole copy was made aside, then its
    rename failed, "[Errno 20] Not a directory: '...sessions.partial' -> '...sessions'", and
    the copy stayed there as .partial."""
    checkpoint = tmp_path / "demo.json"
    copy = demo_run.demo_sessions(checkpoint)
    if what == "file":
        copy.write_text("mine")
    else:
        copy.symlink_to(tmp_path / "gone")
    result = subprocess.run(
        [sys.executable, "-m", "tailer", "demo", "--once", "--checkpoint", str(checkpoint),
         "--otlp-endpoint", "none"], cwd=ROOT, env=tailer_env(), capture_output=True, text=True,
        timeout=120)
    assert result.returncode == 2
    assert result.stderr == f"hydrafusion-tailer demo: {copy} is not a folder: move it away, or give another --checkpoint\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["demo.json.lock", "demo.json.sessions"]


def test_the_demo_replays_the_bundled_sessions_whatever_copilot_state_dir_says():
    """`demo` alone replays the example sessions the package holds (a pipx install has no
    clone to point --state-dir at), never the user's own sessions unasked."""
    assert parse_args(["demo"], {"COPILOT_STATE_DIR": "/home/me/sessions"}).state_dir == FIXTURES
    assert demo.FIXTURES == FIXTURES
