"""The session watcher: appeared, vanished and touched logs, cheaply, with inotify and polling.

Tests that need the schedule (hot every pass, cold once a round) drive the watcher with a
fake clock and `changes(0)`. With a clock that never moves, polling never runs after the
first call, so whatever is reported came from inotify events alone: the tests that run
in both modes use such a clock in inotify mode.
"""

import contextlib
import errno
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tailer.copilot import watch
from tailer.copilot.files import LOG_NAME, find_logs
from tailer.copilot.lines import NotARegularFile
from tailer.copilot.watch import Changes, SessionWatcher

DAYS_AGO_S = 3 * 24 * 3600
INOTIFY = sys.platform.startswith("linux")


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture(params=[True, False], ids=["inotify", "polling"])
def use_inotify(request):
    if request.param and not INOTIFY:
        pytest.skip("inotify is Linux only")
    return request.param


@pytest.fixture
def clock(use_inotify):
    """Frozen in inotify mode, so that what is reported there came from events alone."""
    return FakeClock() if use_inotify else time.monotonic


@pytest.fixture
def state_dir(tmp_path):
    path = tmp_path / "session-state"
    path.mkdir()
    return path


@pytest.fixture
def watchers():
    """Makes watchers and closes them, so no test leaks inotify instances."""
    made = []

    def make(state_dir, **options):
        made.append(SessionWatcher(state_dir, **options))
        return made[-1]

    yield make
    for watcher in made:
        watcher.close()


def write_log(state_dir, session_id, text="{}\n", *, age_s=0.0):
    folder = state_dir / session_id
    folder.mkdir(exist_ok=True)
    log = folder / LOG_NAME
    log.write_text(text)
    if age_s:
        then = time.time() - age_s
        os.utime(log, (then, then))
    return log


def append(log, text="{}\n"):
    with open(log, "a") as handle:
        handle.write(text)


def collect(watcher, done, *, timeout=5.0):
    """Merge what `changes()` reports until `done(merged)` or `timeout` real seconds."""
    merged = Changes()
    deadline = time.monotonic() + timeout
    frozen = isinstance(watcher.clock, FakeClock)
    while not done(merged) and time.monotonic() < deadline:
        # A frozen clock would make changes(0.05) wait forever: pace the loop here instead.
        found = watcher.changes(0 if frozen else 0.05)
        merged.appeared.update(found.appeared)
        merged.vanished |= found.vanished
        merged.touched |= found.touched
        if frozen:
            time.sleep(0.01)
    return merged


def started(watcher):
    """The first call's report, which must come without waiting; then the call that watches
    the folders it found (inotify), so that what a test changes next is reported by events
    alone."""
    first = watcher.changes(3600)
    assert not watcher.changes(0)
    return first


def step(watcher, clock, seconds):
    """Advance the fake clock pass by pass; return (fake seconds taken, merged report)."""
    begin = clock.now
    merged = Changes()
    while clock.now - begin < seconds:
        clock.now += watch.PASS_INTERVAL_S
        found = watcher.changes(0)
        merged.appeared.update(found.appeared)
        merged.vanished |= found.vanished
        merged.touched |= found.touched
    return merged


def test_a_report_names_each_session_once():
    log, status = os.path.join("s", LOG_NAME), os.stat(".")
    replaced = Changes()
    replaced.vanish("s")
    replaced.appear("s", log, status, 1)
    assert replaced == Changes(touched={"s"})
    fleeting = Changes()
    fleeting.appear("s", log, status, 1)
    fleeting.touch("s")
    assert fleeting == Changes(appeared={"s": log}, looked={"s": (status, 1)})
    fleeting.vanish("s")
    assert fleeting == Changes()
    gone = Changes(touched={"s"})
    gone.vanish("s")
    assert gone == Changes(vanished={"s"})


def test_first_call_reports_every_existing_log_without_waiting(
    state_dir, use_inotify, watchers, monkeypatch
):
    logs = {name: write_log(state_dir, name, age_s=DAYS_AGO_S) for name in ("a", "b", "c")}
    (state_dir / "empty").mkdir()
    (state_dir / "not-a-session.txt").write_text("x")

    def no_waiting(*args):
        raise AssertionError("the first call waited")

    monkeypatch.setattr(time, "sleep", no_waiting)
    monkeypatch.setattr(watch.Inotify, "wait", no_waiting)
    watcher = watchers(state_dir, use_inotify=use_inotify)
    assert watcher.mode == ("inotify" if use_inotify else "polling")
    before_ns = time.time_ns()
    first = started(watcher)
    assert first.appeared == {name: str(log) for name, log in logs.items()}
    assert not first.vanished and not first.touched
    # Each log's stat as the watcher took it, for a caller that would take it again.
    assert first.looked.keys() == logs.keys()
    for name, (status, seen_ns) in first.looked.items():
        assert status.st_ino == os.stat(logs[name]).st_ino and before_ns <= seen_ns <= time.time_ns()


def test_a_new_session_appears(state_dir, use_inotify, clock, watchers):
    watcher = watchers(state_dir, clock=clock, use_inotify=use_inotify)
    assert not started(watcher)
    log = write_log(state_dir, "new")
    found = collect(watcher, lambda c: c.appeared)
    assert found.appeared == {"new": str(log)}


def test_a_folder_made_empty_is_noticed_when_its_log_appears(
    state_dir, use_inotify, clock, watchers
):
    watcher = watchers(state_dir, clock=clock, use_inotify=use_inotify)
    started(watcher)
    (state_dir / "later").mkdir()
    assert not collect(watcher, bool, timeout=0.3)  # the folder is listed, still empty
    log = write_log(state_dir, "later")
    assert collect(watcher, lambda c: c.appeared).appeared == {"later": str(log)}


def test_an_append_is_touched(state_dir, use_inotify, clock, watchers):
    log = write_log(state_dir, "s")
    write_log(state_dir, "quiet")
    watcher = watchers(state_dir, clock=clock, use_inotify=use_inotify)
    started(watcher)
    append(log)
    found = collect(watcher, lambda c: c.touched)
    assert found.touched == {"s"}
    assert not found.appeared and not found.vanished


def test_truncation_and_replacement_are_touched(state_dir, use_inotify, clock, watchers):
    log = write_log(state_dir, "s", "{}\n" * 10)
    watcher = watchers(state_dir, clock=clock, use_inotify=use_inotify)
    started(watcher)
    os.truncate(log, 3)
    assert collect(watcher, lambda c: c.touched) == Changes(touched={"s"})
    replacement = state_dir / "s" / "events.jsonl.tmp"
    replacement.write_text("{}\n")
    os.replace(replacement, log)  # same size, new inode
    assert collect(watcher, lambda c: c.touched) == Changes(touched={"s"})


def test_a_deleted_log_or_folder_vanishes_and_a_new_log_appears_again(
    state_dir, use_inotify, clock, watchers
):
    log = write_log(state_dir, "s")
    write_log(state_dir, "gone")
    watcher = watchers(state_dir, clock=clock, use_inotify=use_inotify)
    started(watcher)
    shutil.rmtree(state_dir / "gone")
    assert collect(watcher, lambda c: c.vanished) == Changes(vanished={"gone"})
    log.unlink()
    assert collect(watcher, lambda c: c.vanished) == Changes(vanished={"s"})
    write_log(state_dir, "s")
    assert collect(watcher, lambda c: c.appeared) == Changes(appeared={"s": str(log)})


def test_a_renamed_folder_is_followed_under_its_new_name(state_dir, use_inotify, clock, watchers):
    write_log(state_dir, "old")
    watcher = watchers(state_dir, clock=clock, use_inotify=use_inotify)
    started(watcher)
    (state_dir / "old").rename(state_dir / "new")
    found = collect(watcher, lambda c: c.vanished and c.appeared)
    assert found == Changes(appeared={"new": str(state_dir / "new" / LOG_NAME)}, vanished={"old"})
    append(state_dir / "new" / LOG_NAME)
    assert collect(watcher, lambda c: c.touched) == Changes(touched={"new"})


def test_a_missing_state_dir_warns_once_and_is_picked_up_when_made(
    tmp_path, use_inotify, watchers, caplog
):
    state_dir = tmp_path / "session-state"
    watcher = watchers(state_dir, use_inotify=use_inotify)
    assert not started(watcher)
    assert not collect(watcher, bool, timeout=0.3)
    state_dir.mkdir()
    log = write_log(state_dir, "s")
    assert collect(watcher, lambda c: c.appeared).appeared == {"s": str(log)}
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage() for r in warnings] == [
        "cannot list the state directory: it does not exist"]


def test_an_unreadable_folder_warns_once_and_the_others_go_on(
    state_dir, use_inotify, clock, watchers, monkeypatch, caplog
):
    """Permission is simulated: the tests may run as root, who can read anything."""
    locked = write_log(state_dir, "locked")
    log = write_log(state_dir, "open")
    real_stat = os.stat

    def stat(path, *args, **kwargs):
        if os.fspath(path) == os.fspath(locked):
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_stat(path, *args, **kwargs)

    watcher = watchers(state_dir, clock=clock, use_inotify=use_inotify)
    started(watcher)
    monkeypatch.setattr(os, "stat", stat)
    append(locked)
    append(log)
    assert collect(watcher, lambda c: c.touched) == Changes(touched={"open"})
    append(locked)
    collect(watcher, bool, timeout=0.3)
    assert [r.getMessage() for r in caplog.records] == [
        "session locked: cannot read its folder: Permission denied"]


def count_stats(monkeypatch) -> list[str]:
    """From now on, every os.stat call's path, in order."""
    stat_calls = []
    real_stat = os.stat

    def counting_stat(path, *args, **kwargs):
        stat_calls.append(os.fspath(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", counting_stat)
    return stat_calls


def test_cold_logs_are_stat_once_a_round_a_slice_per_pass(state_dir, watchers, monkeypatch):
    count = 1000
    logs = {write_log(state_dir, f"s{i:04d}", age_s=DAYS_AGO_S) for i in range(count)}
    clock = FakeClock()
    watcher = watchers(state_dir, clock=clock, use_inotify=False)
    assert len(started(watcher).appeared) == count
    stat_calls = count_stats(monkeypatch)
    per_pass = []
    while clock.now < 1000.0 + watch.SWEEP_ROUND_S + watch.PASS_INTERVAL_S:
        clock.now += watch.PASS_INTERVAL_S
        before = len(stat_calls)
        assert not watcher.changes(0)
        per_pass.append(len(stat_calls) - before)
    # A pass: the state dir, plus count * 0.25 s / 30 s cold logs (about 8).
    assert max(per_pass) <= 1 + count * watch.PASS_INTERVAL_S / watch.SWEEP_ROUND_S + 2
    assert {str(log) for log in logs} <= set(stat_calls)


def test_a_cold_log_resumed_is_seen_within_a_round_when_polling(state_dir, watchers):
    logs = [write_log(state_dir, f"s{i}", age_s=DAYS_AGO_S) for i in range(50)]
    clock = FakeClock()
    watcher = watchers(state_dir, clock=clock, use_inotify=False)
    started(watcher)
    step(watcher, clock, 5)  # some way into the first round
    append(logs[0])
    append(logs[-1])
    begin = clock.now
    found = Changes()
    while found.touched != {"s0", "s49"} and clock.now - begin < 120:
        found.touched |= step(watcher, clock, watch.PASS_INTERVAL_S).touched
    assert found.touched == {"s0", "s49"}
    assert clock.now - begin <= watch.SWEEP_ROUND_S + watch.PASS_INTERVAL_S
    # Once seen changing, a log is hot: the next append is seen on the next pass.
    append(logs[0])
    assert step(watcher, clock, watch.PASS_INTERVAL_S).touched == {"s0"}


@pytest.mark.skipif(not INOTIFY, reason="inotify is Linux only")
def test_inotify_reports_an_append_to_a_cold_log_at_once(state_dir, watchers):
    log = write_log(state_dir, "cold", age_s=DAYS_AGO_S)
    watcher = watchers(state_dir, clock=FakeClock(), use_inotify=True)
    started(watcher)
    append(log)
    assert collect(watcher, lambda c: c.touched) == Changes(touched={"cold"})


@pytest.mark.skipif(not INOTIFY, reason="inotify is Linux only")
def test_the_first_call_watches_its_folders_only_at_the_next_which_sees_a_change_between(
    state_dir, watchers, monkeypatch
):
    """A watch's first drawing does not wait for a watch a folder: a log written between
    the first call's listing and its folder's watch is reported by the next call, which
    adds the watches, and what follows by inotify."""
    logs = [write_log(state_dir, f"s{i}", age_s=DAYS_AGO_S) for i in range(3)]
    watched = []
    real_add_watch = watch.Inotify.add_watch

    def add_watch(self, path, mask):
        watched.append(Path(path).name)
        return real_add_watch(self, path, mask)

    monkeypatch.setattr(watch.Inotify, "add_watch", add_watch)
    watcher = watchers(state_dir, clock=FakeClock(), use_inotify=True)
    assert len(watcher.changes(3600).appeared) == 3
    assert watched == [state_dir.name]
    append(logs[1])
    assert watcher.changes(0) == Changes(touched={"s1"})
    assert sorted(watched[1:]) == ["s0", "s1", "s2"]
    append(logs[2])
    assert collect(watcher, lambda c: c.touched) == Changes(touched={"s2"})


@pytest.mark.skipif(not INOTIFY, reason="inotify is Linux only")
def test_inotify_follows_a_folder_deleted_and_made_again(state_dir, watchers):
    write_log(state_dir, "s")
    watcher = watchers(state_dir, clock=FakeClock(), use_inotify=True)
    started(watcher)
    shutil.rmtree(state_dir / "s")
    (state_dir / "s").mkdir()
    log = write_log(state_dir, "s")
    found = collect(watcher, lambda c: c.touched or c.appeared)
    assert found in (Changes(touched={"s"}), Changes(appeared={"s": str(log)}, vanished={"s"}))
    append(log)
    assert collect(watcher, lambda c: c.touched) == Changes(touched={"s"})


@pytest.mark.skipif(not INOTIFY, reason="inotify is Linux only")
def test_without_inotify_events_cold_logs_are_still_swept_within_a_minute(
    state_dir, watchers, monkeypatch
):
    """Docker Desktop bind mounts deliver no events: simulated by dropping them all."""
    logs = [write_log(state_dir, f"s{i}", age_s=DAYS_AGO_S) for i in range(50)]
    monkeypatch.setattr(watch.Inotify, "read_events", lambda self: [])
    clock = FakeClock()
    watcher = watchers(state_dir, clock=clock, use_inotify=True)
    started(watcher)
    step(watcher, clock, 5)
    append(logs[0])
    begin = clock.now
    found = Changes()
    while not found.touched and clock.now - begin < 180:
        found = step(watcher, clock, watch.PASS_INTERVAL_S)
    assert found.touched == {"s0"}
    assert clock.now - begin <= 2 * watch.SWEEP_ROUND_S + watch.PASS_INTERVAL_S


@pytest.mark.skipif(not INOTIFY, reason="inotify is Linux only")
def test_watched_cold_logs_are_stat_once_a_minute(state_dir, watchers, monkeypatch):
    logs = {str(write_log(state_dir, f"s{i}", age_s=DAYS_AGO_S)) for i in range(100)}
    clock = FakeClock()
    watcher = watchers(state_dir, clock=clock, use_inotify=True)
    started(watcher)
    stat_calls = count_stats(monkeypatch)
    step(watcher, clock, 2 * watch.SWEEP_ROUND_S + watch.PASS_INTERVAL_S)
    assert sorted(path for path in stat_calls if path in logs) == sorted(logs)


@pytest.mark.skipif(not INOTIFY, reason="inotify is Linux only")
@pytest.mark.parametrize("limited_folders, said", [(3, "3 session folders"), (1, "1 session folder")])
def test_watch_limit_warns_once_and_polls_those_folders(state_dir, watchers, monkeypatch, caplog,
                                                        limited_folders, said):
    """The user's watch limit is simulated: ENOSPC for folders named limited-*. One such
    folder was "1 session folders"."""
    real_add_watch = watch.Inotify.add_watch

    def add_watch(self, path, mask):
        if Path(path).name.startswith("limited-"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_add_watch(self, path, mask)

    monkeypatch.setattr(watch.Inotify, "add_watch", add_watch)
    limited = [write_log(state_dir, f"limited-{i}", age_s=DAYS_AGO_S) for i in range(limited_folders)]
    write_log(state_dir, "watched", age_s=DAYS_AGO_S)
    clock = FakeClock()
    watcher = watchers(state_dir, clock=clock, use_inotify=True)
    assert len(started(watcher).appeared) == limited_folders + 1
    late = write_log(state_dir, "limited-late")
    assert step(watcher, clock, 1).appeared == {"limited-late": str(late)}
    append(late)
    assert step(watcher, clock, watch.PASS_INTERVAL_S).touched == {"limited-late"}
    append(limited[0])
    found = Changes()
    while not found.touched and clock.now < 1000.0 + 120:
        found = step(watcher, clock, watch.PASS_INTERVAL_S)
    assert found.touched == {"limited-0"}
    assert [r.getMessage() for r in caplog.records] == [
        f"inotify cannot watch {said} (the inotify watch limit is reached:"
        " raise fs.inotify.max_user_watches): polling them instead"]


@pytest.mark.skipif(not INOTIFY, reason="inotify is Linux only")
def test_inotify_queue_overflow_touches_every_log_once(state_dir, watchers):
    queue_limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    if queue_limit > 100_000:
        pytest.skip("overflowing this machine's inotify queue would take too long")
    busy = [write_log(state_dir, "busy-a"), write_log(state_dir, "busy-b")]
    write_log(state_dir, "quiet")
    watcher = watchers(state_dir, clock=FakeClock(), use_inotify=True)
    started(watcher)
    handles = [open(log, "ab", buffering=0) for log in busy]
    try:
        for index in range(queue_limit + 100):  # alternating, so no two events merge
            handles[index % 2].write(b"\n")
    finally:
        for handle in handles:
            handle.close()
    found = collect(watcher, lambda c: "quiet" in c.touched)
    assert found == Changes(touched={"busy-a", "busy-b", "quiet"})
    assert not collect(watcher, bool, timeout=0.2)


def test_a_log_reached_through_two_folders_is_reported_once(state_dir, use_inotify, clock, watchers):
    """A link to a session's folder, a hard link of its log: one session, as find_logs lists
    it (the real folder before a link, then by name), or its turns are counted twice."""
    log = write_log(state_dir, "b")
    (state_dir / "a").symlink_to("b")
    (state_dir / "c").mkdir()
    os.link(log, state_dir / "c" / LOG_NAME)
    other = write_log(state_dir, "d")
    watcher = watchers(state_dir, clock=clock, use_inotify=use_inotify)
    assert started(watcher).appeared == {"b": str(log), "d": str(other)}
    assert find_logs(state_dir) == ({"b": log, "d": other}, {})
    append(log)
    assert collect(watcher, lambda c: c.touched) == Changes(touched={"b"})
    (state_dir / "e").symlink_to("d")
    (state_dir / "f").mkdir()
    os.link(other, state_dir / "f" / LOG_NAME)
    assert not collect(watcher, bool, timeout=0.5)
    assert find_logs(state_dir)[0].keys() == {"b", "d"}
    # A link shares its folder's inotify watch: removing the link leaves the folder's.
    (state_dir / "e").unlink()
    assert not collect(watcher, bool, timeout=0.5)
    append(other)
    assert collect(watcher, lambda c: c.touched) == Changes(touched={"d"})


def test_a_log_that_becomes_another_sessions_vanishes_from_its_own(
    state_dir, use_inotify, clock, watchers
):
    first = write_log(state_dir, "a")
    second = write_log(state_dir, "b")
    watcher = watchers(state_dir, clock=clock, use_inotify=use_inotify)
    started(watcher)
    second.unlink()
    os.link(first, second)
    assert collect(watcher, lambda c: c.vanished) == Changes(vanished={"b"})
    second.unlink()
    write_log(state_dir, "b")  # its own file again
    assert collect(watcher, lambda c: c.appeared) == Changes(appeared={"b": str(second)})
    first.unlink()
    os.link(second, first)  # now the other way round: "a" gives way while "b" holds the file
    assert collect(watcher, lambda c: c.vanished) == Changes(vanished={"a"})


NAMES = ("a", "b", "c", "d")
FOLDER_OPS = st.one_of(
    st.tuples(st.just("make"), st.sampled_from(NAMES)),
    st.tuples(st.just("append"), st.sampled_from(NAMES)),
    st.tuples(st.just("link_folder"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
    st.tuples(st.just("hard_link"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
    st.tuples(st.just("replace_log"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
    st.tuples(st.just("rename"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
    st.tuples(st.just("remove"), st.sampled_from(NAMES)),
    st.tuples(st.just("fifo"), st.sampled_from(NAMES)),
)


def apply_folder_op(state_dir: Path, op: tuple) -> None:
    """One change a user or a backup tool may make in the state folder; none where it
    does not apply."""
    kind, name, *other = op
    path, target = state_dir / name, state_dir / other[0] if other else None
    there = os.path.lexists(path)
    target_log = target / LOG_NAME if target else None
    if kind == "make" and not there:
        write_log(state_dir, name)
    elif kind == "append" and (path / LOG_NAME).is_file():
        append(path / LOG_NAME)
    elif kind == "link_folder" and not there and target.is_dir() and not target.is_symlink():
        path.symlink_to(other[0])
    elif kind in ("hard_link", "replace_log") and target_log.is_file() and name != other[0]:
        if kind == "hard_link" and not there:
            path.mkdir()
            os.link(target_log, path / LOG_NAME)
        elif (kind == "replace_log" and path.is_dir() and not path.is_symlink()
              and not _same_file(target_log, path / LOG_NAME)):
            # A rename onto another name of the same file does nothing (POSIX), and left
            # `next` there for the next replace to collide with.
            os.link(target_log, path / "next")
            os.replace(path / "next", path / LOG_NAME)
    elif kind == "rename" and there and not os.path.lexists(target):
        path.rename(target)
    elif kind == "remove" and there:
        path.unlink() if path.is_symlink() else shutil.rmtree(path)
    elif kind == "fifo" and path.is_dir() and not path.is_symlink():
        with contextlib.suppress(FileNotFoundError):
            (path / LOG_NAME).unlink()
        os.mkfifo(path / LOG_NAME)


def _same_file(one: Path, other: Path) -> bool:
    return os.path.exists(other) and os.path.samefile(one, other)


@given(st.lists(st.tuples(FOLDER_OPS, st.integers(0, 3)), max_size=25))
@example([(("make", "a"), 0), (("hard_link", "d", "a"), 0), (("replace_log", "d", "a"), 0),
          (("replace_log", "d", "a"), 0)])
@example([(("make", "a"), 0), (("make", "b"), 0), (("fifo", "a"), 1),
          (("replace_log", "a", "b"), 1)])
@settings(max_examples=300)
def test_every_log_file_is_reported_once_whatever_is_done_to_the_folders(ops):
    """Model test: after any changes to the session folders (made, linked, hard linked,
    renamed, removed, a log replaced by another's or by a FIFO), once the watcher has
    looked again, the logs it reports are exactly the files find_logs lists (one folder
    each), no file under two names, and the sessions it cannot read are the ones find_logs
    names: what the daemon and --watch count is what the report counts."""
    with tempfile.TemporaryDirectory() as top:
        state_dir = Path(top)
        clock = FakeClock()
        watcher = SessionWatcher(state_dir, clock=clock, use_inotify=False)
        reported: dict[str, str] = {}

        def take(found: Changes) -> None:
            assert not found.vanished - reported.keys() and not found.touched - reported.keys()
            assert not found.appeared.keys() & reported.keys()
            for session_id in found.vanished:
                del reported[session_id]
            reported.update(found.appeared)

        try:
            take(watcher.changes(0))
            for op, passes in ops:
                apply_folder_op(state_dir, op)
                take(step(watcher, clock, passes * watch.PASS_INTERVAL_S))
            take(step(watcher, clock, watch.RELIST_EVERY_S + 2 * watch.SWEEP_ROUND_S))
        finally:
            watcher.close()
        files = [(status.st_dev, status.st_ino) for status in map(os.stat, reported.values())]
        assert len(set(files)) == len(files)
        logs, unreadable = find_logs(state_dir)
        listed = {(status.st_dev, status.st_ino) for status in map(os.stat, logs.values())}
        assert set(files) == listed
        assert watcher.unreadable.keys() == unreadable.keys()


def test_a_loop_of_links_as_a_folder_is_named_as_find_logs_names_it(state_dir, watchers):
    """`ln -s loop loop`: find_logs names it unreadable (the report, doctor, scrub); the
    watcher said nothing of it (run, --watch)."""
    (state_dir / "loop").symlink_to("loop")
    write_log(state_dir, "s")
    watcher = watchers(state_dir, use_inotify=False)
    assert started(watcher).appeared.keys() == {"s"}
    unreadable = find_logs(state_dir)[1]
    assert watcher.unreadable.keys() == unreadable.keys() == {"loop"}
    assert watcher.unreadable["loop"].errno == unreadable["loop"].errno == errno.ELOOP


def test_a_fifo_as_a_log_is_named_as_find_logs_names_it_until_a_log_is_back(
    state_dir, use_inotify, clock, watchers, caplog
):
    """A FIFO (a socket, a folder) where a session's log would be: find_logs named no log
    of it, and the watcher said nothing (run, --watch), where a log replaced by one once
    read is named as a log that cannot be read. Both name it now, never opening it; a
    log that replaces it again is read."""
    os.mkdir(state_dir / "x")
    os.mkfifo(state_dir / "x" / LOG_NAME)
    log = write_log(state_dir, "s")
    watcher = watchers(state_dir, clock=clock, use_inotify=use_inotify)
    assert started(watcher).appeared.keys() == {"s"}
    unreadable = find_logs(state_dir)[1]
    assert watcher.unreadable.keys() == unreadable.keys() == {"x"}
    assert isinstance(unreadable["x"], NotARegularFile)
    assert isinstance(watcher.unreadable["x"], NotARegularFile)
    log.unlink()
    os.mkfifo(log)
    assert collect(watcher, lambda c: c.vanished) == Changes(vanished={"s"})
    assert watcher.unreadable.keys() == find_logs(state_dir)[1].keys() == {"x", "s"}
    log.unlink()
    write_log(state_dir, "s")
    assert collect(watcher, lambda c: c.appeared) == Changes(appeared={"s": str(log)})
    assert watcher.unreadable.keys() == find_logs(state_dir)[1].keys() == {"x"}
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        "session x: its log is not a regular file; skipped",
        "session s: its log is not a regular file; skipped"]
