"""The report's cache trusts only itself (issue #39): what the cache folder, the cache's path
or the cache's bytes hold can cost one line on stderr and a rebuild, never a wrong figure,
a hang, a traceback or a user's file.

- A log edited in place (the same size, the same last kilobyte, its time put back) is read
  again: the cache's identity of a log has its change time, and a log that did not grow is
  read from its start.
- A cache folder of another user, one others may write, or a link is not used: a cache
  planted there claiming twice the credits is never shown, and nothing there is written or
  removed. A FIFO, a socket, a link or a folder at the cache's path is never opened for
  reading, and is replaced by a cache.
- Whatever the cache's bytes (any bytes; any JSON under a right header and right CRCs; the
  real entries with any part changed), the report equals `--no-cache`'s with one line on
  stderr, or takes the cache's word without failing; a cache refused is made again.
- What killed saves left is removed; the clean-up removes nothing the cache did not make.

tailer/private_files.py's own tests are tests/test_private_files.py.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from report_helpers import MONTH_START, run_report
from sessiongen import SessionWriter, every_pattern, whole_session
from tailer import __version__
from tailer.records import replace
from tailer.report import cache, gather, prices, worth
from tailerproc import ROOT, tailer_env
from test_report_cache import LONG, PAST_NS, answers, cache_lines, report

NOBODY = 65534
EXAMPLES = 200 if LONG else 25
NOT_USED = "the cache is not used (--no-cache reads without it)"


def old_logs(state: Path) -> None:
    """Each log last written long ago, as most of a real state folder is: a report trusts
    its identity."""
    for log in state.glob("*/events.jsonl"):
        os.utime(log, ns=(PAST_NS, PAST_NS))


@pytest.fixture
def state(tmp_path) -> Path:
    """Two old sessions, and one whose last turn is still running (written minutes ago)."""
    state = tmp_path / "state"
    every_pattern("every-pattern").write(state)
    whole_session("whole", MONTH_START).write(state)
    old_logs(state)
    writer = SessionWriter("running", MONTH_START)
    writer.single("gpt-5.6-sol")
    writer.incomplete("gpt-5.6-sol", "claude-opus-5")  # no rollup, no shutdown: still open
    log = writer.write(state)
    os.utime(log, ns=(time.time_ns() - 600 * 10**9,) * 2)
    return state


def environ_of(tmp_path: Path) -> dict[str, str]:
    return {"XDG_CACHE_HOME": str(tmp_path / "xdg")}


def uncached(state: Path) -> dict:
    code, stdout, stderr = report(state, {}, "--format", "json", "--no-cache")
    assert code == 0 and stderr == "", stderr
    return answers(stdout)


def warm(state: Path, environ: dict[str, str]) -> Path:
    """The cache of `state` filled; its path."""
    code, _, stderr = report(state, environ, "--format", "json")
    assert code == 0 and stderr == "", stderr
    path = cache.cache_file(environ, state)
    assert cache.load(path)[1] is None
    return path


def planted(path: Path) -> bytes:
    """The cache at `path` made to claim twice the credits of every turn and leg, whole and
    with right CRCs, as an attacker would plant it: a report that trusted it would show them.
    Its bytes."""
    entries, problem = cache.load(path)
    assert problem is None
    doubled = {}
    for session_id, entry in entries.items():
        turns = [[*row[:9], row[9] * 2, *row[10:15], [[*leg[:9], leg[9] * 2, *leg[10:]] for leg in row[15]],
                  *row[16:]] for row in entry.turns]
        doubled[session_id] = replace(entry, turns=turns, line=None)
    cache.save(path, doubled)
    return path.read_bytes()


# -- a log's identity --------------------------------------------------------------------


def edited_in_place(log: Path) -> None:
    """One digit of a model call's credits in the log's first half changed in place: the
    same size, the same last kilobyte."""
    data = bytearray(log.read_bytes())
    at = data.index(b'"totalNanoAiu":', 0, len(data) // 2) + len(b'"totalNanoAiu":')
    data[at] = ord("1") if data[at] != ord("1") else ord("2")
    with open(log, "r+b") as handle:  # in place: the same file
        handle.write(data)


@pytest.mark.parametrize("time_put_back", [False, True], ids=["time-moved", "time-put-back"])
def test_an_edit_in_place_of_the_same_size_is_read_again(state, tmp_path, time_put_back):
    environ = environ_of(tmp_path)
    warm(state, environ)
    before = answers(report(state, environ, "--format", "json")[1])
    log = state / "every-pattern" / "events.jsonl"
    size, tail = log.stat().st_size, log.read_bytes()[-1024:]
    edited_in_place(log)
    os.utime(log, ns=(PAST_NS, PAST_NS) if time_put_back else (PAST_NS + 10**9,) * 2)
    assert log.stat().st_size == size and log.read_bytes()[-1024:] == tail
    code, stdout, stderr = report(state, environ, "--format", "json")
    assert code == 0 and stderr == ""
    assert answers(stdout) == uncached(state) != before


def test_a_log_that_grew_while_it_was_read_and_was_edited_after_is_read_again(tmp_path):
    """The log's identity is looked at before it is read: one appended to meanwhile is kept
    at the size reading stopped at, so an edit in place that keeps that size is no append."""
    state = tmp_path / "state"
    log = every_pattern("grows").write(state)
    old_logs(state)
    looked = {"grows": (os.stat(log), time.time_ns())}
    with open(log, "ab") as handle:
        handle.write("".join(line + "\n" for line in every_pattern("later").lines()).encode())
    os.utime(log, ns=(PAST_NS + 10**9,) * 2)
    first = gather.refresh({"grows": log}, {"grows"}, {}, workers=1, looked=looked)
    assert first.entries["grows"].identity[2] == log.stat().st_size
    edited_in_place(log)
    os.utime(log, ns=(PAST_NS + 10**9,) * 2)
    again = gather.refresh({"grows": log}, {"grows"}, first.entries, workers=1)
    fresh = gather.refresh({"grows": log}, {"grows"}, {}, workers=1)
    assert again.entries["grows"].turns == fresh.entries["grows"].turns
    assert again.entries["grows"].turns != first.entries["grows"].turns


# -- the cache's folder ------------------------------------------------------------------


def another_users(folder: Path) -> str:
    if os.geteuid() != 0:
        pytest.skip("only root can give a folder to another user")
    os.chown(folder, NOBODY, NOBODY)
    return f"belongs to another user (uid {NOBODY})"


def writable_by_others(mode: int):
    def make(folder: Path) -> str:
        os.chmod(folder, mode)
        return f"may be written by others (mode {mode:o}; chmod 700 it)"
    return make


def a_link(folder: Path) -> str:
    """The folder moved aside, a link to it in its place."""
    aside = folder.with_name("aside")
    folder.rename(aside)
    folder.symlink_to(aside)
    return "is a symbolic link"


@pytest.mark.parametrize("untrusted", [another_users, writable_by_others(0o770), writable_by_others(0o777),
                                       writable_by_others(0o1777), a_link],
                         ids=["another-user", "group-writable", "world-writable", "sticky-world-writable",
                              "a-link"])
def test_a_cache_folder_not_the_users_alone_is_not_used(state, tmp_path, untrusted):
    """A cache planted in a folder others may write (or put a link in the place of) would
    show twice the credits: it is neither read nor written, and nothing in it is removed,
    the user's own files included."""
    environ = environ_of(tmp_path)
    path = warm(state, environ)
    planted_bytes = planted(path)
    theirs = {f"{name}.json": b"the user's" for name in ("notes", "a", "b", "c", "d", "e")}
    for name, data in theirs.items():
        (path.parent / name).write_bytes(data)
    for number in range(cache.MAX_FILES + 1):
        (path.parent / f"{number:016x}.json").write_bytes(planted_bytes)
    why = untrusted(path.parent)
    every_pattern("new").write(state)  # a change: a cache in use would be saved
    for _ in range(2):
        code, stdout, stderr = report(state, environ, "--format", "json")
        assert code == 0 and answers(stdout) == uncached(state)
        assert stderr == (f"hydrafusion-tailer report: the cache's folder {path.parent} {why}: {NOT_USED}\n")
    folder = path.parent.resolve()
    assert path.read_bytes() == planted_bytes
    assert {name: (folder / name).read_bytes() for name in theirs} == theirs
    assert len(os.listdir(folder)) == len(theirs) + cache.MAX_FILES + 2


def test_a_cache_folder_the_user_made_read_only_stays_so(state, tmp_path):
    """A folder of the user's own closed to writing (0500) is the user's choice: a report
    reads the cache in it and never makes it writable again."""
    environ = environ_of(tmp_path)
    folder = warm(state, environ).parent
    os.chmod(folder, 0o500)
    every_pattern("new").write(state)  # a change: a cache in use would be saved
    code, stdout, _ = report(state, environ, "--format", "json")
    assert code == 0 and answers(stdout) == uncached(state)
    assert oct(os.stat(folder).st_mode & 0o7777) == oct(0o500)


def test_a_read_only_cache_folder_costs_one_line_and_no_figure(state):
    """Run as a user the folder's mode binds (root writes in any): the report reads the
    cache, cannot save it, says so in one line, and shows what the logs hold."""
    from test_reading_parity import nobody

    (become, user), python = nobody()
    top = Path(tempfile.mkdtemp(prefix="tailer-read-only-cache-"))
    try:
        os.chmod(top, 0o755)
        shutil.copytree(state, top / "state")
        for path in [top, *top.rglob("*")]:
            os.chown(path, user.pw_uid, user.pw_gid, follow_symlinks=False)
        env = tailer_env(XDG_CACHE_HOME=str(top / "xdg"), HOME=str(top))

        def as_nobody(*options: str) -> subprocess.CompletedProcess:
            return subprocess.run([python, "-m", "tailer", "report", "--state-dir", str(top / "state"),
                                   "--format", "json", *options], cwd=ROOT, env=env, text=True,
                                  capture_output=True, timeout=120, preexec_fn=become)

        first = as_nobody()
        assert first.returncode == 0 and first.stderr == "", first.stderr
        folder = cache.cache_file({"XDG_CACHE_HOME": str(top / "xdg")}, top / "state").parent
        os.chmod(folder, 0o500)
        every_pattern("new").write(top / "state")  # a change: a cache in use would be saved
        for path in (top / "state").rglob("*"):
            os.chown(path, user.pw_uid, user.pw_gid, follow_symlinks=False)
        expected = answers(as_nobody("--no-cache").stdout)
        for _ in range(2):
            done = as_nobody()
            assert done.returncode == 0 and answers(done.stdout) == expected
            assert done.stderr == ("hydrafusion-tailer report: the cache cannot be saved (Permission "
                                   "denied): the next report reads every log again\n")
            assert oct(os.stat(folder).st_mode & 0o7777) == oct(0o500)
    finally:
        shutil.rmtree(top)


def special_file(kind: str, path: Path, elsewhere: Path):
    """A FIFO, a socket, a folder or a link to a planted cache at the cache's path; what
    must stay open while the report runs."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.listen()
        return server
    elif kind == "folder":
        path.mkdir()
    else:
        path.rename(elsewhere)
        path.symlink_to(elsewhere)
    return None


@pytest.mark.parametrize("kind", ["fifo", "socket", "folder", "link"])
def test_a_special_file_at_the_caches_path_is_never_opened_and_is_replaced(state, tmp_path, kind):
    """A FIFO at the cache's path hung every report (opened for reading, it waits for a
    writer: the report is a process of its own here, so that the test fails rather than
    hangs); a link to a planted cache was followed."""
    environ = environ_of(tmp_path)
    path = warm(state, environ)
    elsewhere = tmp_path / "planted.json"
    planted_bytes = planted(path)
    if kind != "link":
        path.unlink()
    held = special_file(kind, path, elsewhere)
    try:
        done = run_report("--state-dir", str(state), "--format", "json",
                          env=tailer_env(**environ), timeout=60)
    finally:
        if held is not None:
            held.close()
    assert done.returncode == 0 and answers(done.stdout) == uncached(state)
    if kind == "folder":
        assert done.stderr == ("hydrafusion-tailer report: the cache cannot be saved (Is a directory): "
                               "the next report reads every log again\n")
        return
    assert done.stderr == ("hydrafusion-tailer report: the cache is not a regular file: ignored, and made "
                           "again (--no-cache reads without it)\n")
    assert path.is_file() and not path.is_symlink() and cache.load(path)[1] is None
    if kind == "link":
        assert elsewhere.read_bytes() == planted_bytes


@pytest.mark.parametrize("whose", ["group-writable", "another-user"])
def test_a_cache_not_the_users_alone_is_refused_in_its_true_words_and_made_again(
        state, tmp_path, whose):
    """A cache file others may write, or another user's (left by root, or by someone while
    its folder was open to others), was said to be "not a regular file", which it is: the
    user looked for a FIFO or a link. It is named in tailer/private_files.py's words for a
    folder refused so, and made again, this user's alone."""
    environ = environ_of(tmp_path)
    path = warm(state, environ)
    if whose == "another-user":
        why = another_users(path)
    else:
        os.chmod(path, 0o660)
        why = "may be written by others (mode 660)"
    code, stdout, stderr = report(state, environ, "--format", "json")
    assert code == 0 and answers(stdout) == uncached(state)
    assert stderr == (f"hydrafusion-tailer report: the cache {why}: ignored, and made again "
                      "(--no-cache reads without it)\n")
    assert cache.load(path)[1] is None


def test_a_cache_larger_than_any_save_writes_is_not_read_and_is_made_again(state, tmp_path, monkeypatch):
    """A sparse file of 20 GB at the cache's path (no disk used) was mapped and searched
    for its header's end, then its CRC worked out: 16 s of every report until it was
    replaced. A save writes at most MAX_BYTES and a header, so a larger file is refused
    by its size, none of its bytes looked at (here: mapping it fails the test)."""
    environ = environ_of(tmp_path)
    path = warm(state, environ)
    with path.open("r+b") as handle:
        handle.truncate(cache.MAX_BYTES + cache.MAX_HEADER_BYTES + 2)
    expected = uncached(state)

    def never(handle):
        raise AssertionError("a cache too large to be one was read")

    monkeypatch.setattr(cache, "_contents", never)
    assert cache.load(path) == ({}, "is larger than any the report writes")
    os.truncate(path, 20 << 30)
    code, stdout, stderr = report(state, environ, "--format", "json")
    assert code == 0 and answers(stdout) == expected
    assert stderr == ("hydrafusion-tailer report: the cache is larger than any the report writes: "
                      "ignored, and made again (--no-cache reads without it)\n")
    assert path.stat().st_size < cache.MAX_BYTES


def test_what_a_killed_save_left_is_removed_and_nothing_the_cache_did_not_make(state, tmp_path):
    """A save killed midway leaves its temporary file (up to 128 MB): the next save removes
    it, and past MAX_FILES caches removes the oldest of the cache's own files, never the
    user's, whatever their names."""
    environ = environ_of(tmp_path)
    path = warm(state, environ)
    folder = path.parent
    leftovers = [f".{path.name}.{'ab12' * 3}.tmp", f".{'f' * 16}.json.k2_x9qz1.tmp"]
    for name in leftovers:
        (folder / name).write_bytes(b"half a save")
    theirs = ["notes.json", "0123.json", f"{path.name}.bak", f".notes.json.{'ab12' * 3}.tmp",
              "0123456789ABCDEF.json", "cache.json"]
    for name in theirs:
        (folder / name).write_bytes(b"the user's")
        os.utime(folder / name, ns=(PAST_NS, PAST_NS))  # older than any cache
    others = [f"{number:016x}.json" for number in range(cache.MAX_FILES)]
    for number, name in enumerate(others):
        (folder / name).write_bytes(b"{}")
        os.utime(folder / name, ns=(PAST_NS + number * 10**9,) * 2)
    every_pattern("new").write(state)
    code, _, stderr = report(state, environ, "--format", "json")
    assert code == 0 and stderr == ""
    assert sorted(os.listdir(folder)) == sorted([path.name, *theirs, *others[1:]])


# -- the cache's bytes ------------------------------------------------------------------


def cache_file_of(index_lines: list[bytes], texts: bytes, **header) -> bytes:
    """A cache file: a right header over `index_lines` and `texts`, their CRCs right."""
    index = b"".join(line + b"\n" for line in index_lines)
    head = {"kind": cache.KIND, "version": __version__, "format": cache.FORMAT, "index_bytes": len(index),
            "crc32": f"{zlib.crc32(index):08x}", "texts_crc32": f"{zlib.crc32(texts):08x}", **header}
    return json.dumps(head).encode() + b"\n" + index + texts


def real_parts(path: Path) -> tuple[list, bytes]:
    """The entries of the cache at `path` as JSON values, and its texts."""
    header, _, rest = path.read_bytes().partition(b"\n")
    index_bytes = json.loads(header)["index_bytes"]
    return [json.loads(line) for line in rest[:index_bytes].splitlines()], rest[index_bytes:]


def assert_same_or_one_line(state: Path, environ: dict[str, str], expected: dict) -> None:
    """The report equals --no-cache's, with one line on stderr when the cache was ignored;
    a cache ignored is made again."""
    code, stdout, stderr = report(state, environ, "--format", "json")
    assert code == 0 and answers(stdout) == expected
    assert len(stderr.splitlines()) == len(cache_lines(stderr)) <= 1, stderr
    assert cache.load(cache.cache_file(environ, state))[1] is None


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@pytest.mark.parametrize("change", [
    "nested-header", "nested-entry", "old-identity", "row-short", "row-text-credits", "row-nan-credits",
    "row-huge-calls", "row-start-past-the-calendar", "row-kind", "row-models", "leg-short", "leg-credits",
    "row-unknown-credit-calls", "leg-unknown-credit-calls", "json-start-place", "check-short", "check-agrees", "check-difference", "checks-not-a-list",
    "worth-short", "worth-model", "worth-negative-tokens", "worth-gate", "worth-sums-short",
    "worth-huge-tokens", "worth-huge-sums"])
def test_a_cache_of_right_crcs_but_another_shape_is_refused_and_made_again(state, tmp_path, change):
    """Each of these crashed every later report (a traceback before any rebuild), or asked
    the JSON parser to recurse past its limit."""
    environ = environ_of(tmp_path)
    path = warm(state, environ)
    expected = uncached(state)
    entries, texts = real_parts(path)
    entry = next(values for session_id, values in entries if session_id == "whole")
    row, leg = entry[3][0], entry[3][0][15][0]
    if change == "nested-header":
        path.write_bytes(nested(100_000) + b"\n")
        return assert_same_or_one_line(state, environ, expected)
    edits = {
        "old-identity": lambda: entry[0].pop(),
        "row-short": lambda: row.pop(),
        "row-text-credits": lambda: row.__setitem__(9, "1.5"),
        "row-nan-credits": lambda: row.__setitem__(9, float("nan")),
        "row-huge-calls": lambda: row.__setitem__(10, 10**30),
        "row-start-past-the-calendar": lambda: row.__setitem__(0, 10**30),
        "row-kind": lambda: row.__setitem__(4, "another"),
        "row-models": lambda: row.__setitem__(1, [1, 2]),
        "leg-short": lambda: leg.pop(),
        "leg-credits": lambda: leg.__setitem__(9, "1.5"),
        "row-unknown-credit-calls": lambda: row.__setitem__(18, None),
        "leg-unknown-credit-calls": lambda: leg.__setitem__(10, 1.5),
        "json-start-place": lambda: row[16].__setitem__(1, 0),
        "check-short": lambda: entry[5].append(["whole", "shutdown", "run", True]),
        "check-agrees": lambda: entry[5].append(["whole", "shutdown", "run", "yes", []]),
        "check-difference": lambda: entry[5].append(["whole", "shutdown", "run", False, [{"model": "m"}]]),
        "checks-not-a-list": lambda: entry.__setitem__(5, {}),
        "worth-short": lambda: row[19].pop(),
        "worth-model": lambda: row[19].__setitem__(0, 7),
        "worth-negative-tokens": lambda: row[19].__setitem__(1, [-1, 0, 0, 0]),
        "worth-gate": lambda: row[19].__setitem__(2, "another"),
        "worth-sums-short": lambda: row[19].__setitem__(3, [["m", [1]]]),
        # Beyond what any log gives: the fit's floats overflowed, a traceback every report.
        "worth-huge-tokens": lambda: row[19].__setitem__(1, [10**400] * 4),
        "worth-huge-sums": lambda: row[19].__setitem__(3, [["m", [10**400] * 18]]),
    }
    lines = [json.dumps(value, separators=(",", ":")).encode() for value in entries]
    if change == "nested-entry":
        lines.append(b'["deep",' + nested(100_000) + b"]")
    else:
        edits[change]()
        lines = [json.dumps(value, separators=(",", ":")).encode() for value in entries]
    path.write_bytes(cache_file_of(lines, texts))
    loaded = cache.load(path)
    assert_same_or_one_line(state, environ, expected)
    assert loaded == ({}, "is damaged")


@settings(max_examples=EXAMPLES, deadline=None)
@given(data=st.binary(max_size=4096) | st.builds(lambda head, rest: head + rest,
                                                  st.sampled_from([b"", b'{"kind":"hydrafusion report cache"}\n']),
                                                  st.binary(max_size=512)))
def test_any_bytes_in_the_cache_give_the_same_report_or_one_line(tmp_path_factory, data):
    tmp_path = tmp_path_factory.mktemp("bytes")
    state = tmp_path / "state"
    every_pattern("bytes").write(state)
    old_logs(state)
    environ = environ_of(tmp_path)
    path = warm(state, environ)
    expected = uncached(state)
    path.write_bytes(data)
    assert_same_or_one_line(state, environ, expected)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=20)


COUNT = st.sampled_from([0, 1, 2**62, 2**63 - 1, 2**63, 2**127, -1]) | st.booleans() | st.floats(0, 1)


def counts(length: int, right: bool = True):
    """What turn_worth makes; not `right`: a list of about that many of any numbers."""
    if right:
        return st.lists(st.integers(0, 2**62), min_size=length, max_size=length)
    return st.lists(COUNT, min_size=length - 1, max_size=length + 1)


def model_sums(right: bool = True):
    names = st.text(max_size=2) if right else st.text(max_size=2) | st.integers() | st.none()
    return st.lists(st.tuples(names, counts(prices.SUMS, right)).map(list), max_size=3)


RIGHT_WORTH = st.tuples(st.none() | st.text(max_size=3), st.none() | counts(prices.PRICES),
                        st.none() | st.sampled_from(worth.GATES), model_sums()).map(list)
WRONG_FIELDS = [  # for each field, values that are wrong (or right) in many ways
    st.integers() | JSON, counts(prices.PRICES, right=False) | JSON, st.just("another") | JSON,
    model_sums(right=False) | st.lists(JSON, max_size=2) | JSON]


@st.composite
def a_worth(draw):
    """A worth as turn_worth makes it, or with one field made wrong, or of another length."""
    fields = draw(RIGHT_WORTH)
    wrong = draw(st.sampled_from(["none", "none", "field", "field", "length", "any"]))
    if wrong == "field":
        at = draw(st.integers(0, 3))
        fields[at] = draw(WRONG_FIELDS[at])
    elif wrong == "length":
        fields = fields[:draw(st.integers(0, 3))] + draw(st.lists(st.none(), max_size=2))
    elif wrong == "any":
        fields = draw(JSON)
    return fields


@settings(max_examples=EXAMPLES * 8, deadline=None)
@given(worths=st.lists(a_worth(), max_size=6))
def test_the_worths_checked_together_refuse_what_each_checked_alone_does(worths):
    """The cache checks its rows' worth fields together, a field at a time (worth.py); they
    are refused exactly when one of them, checked alone, is."""
    def refused(some: list) -> bool:
        try:
            worth.check_turn_worths(some)
        except ValueError:
            return True
        return False

    assert refused(worths) == any(refused([one]) for one in worths)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(st.tuples(st.sampled_from(["every-pattern", "whole", "running", "other"]), JSON),
                       max_size=4),
       texts=st.binary(max_size=256))
def test_any_json_of_right_crcs_gives_the_same_report_or_one_line(state, tmp_path_factory, values, texts):
    environ = environ_of(tmp_path_factory.mktemp("json"))
    warm(state, environ)
    expected = uncached(state)
    lines = [json.dumps([session_id, value]).encode() for session_id, value in values]
    cache.cache_file(environ, state).write_bytes(cache_file_of(lines, texts))
    assert_same_or_one_line(state, environ, expected)


def changed_somewhere(value, draw, new):
    """`value` (a JSON value of lists and objects) with one part of it, at any depth (most
    often a deep one: a figure of a turn), made `new`."""
    if not isinstance(value, (list, dict)) or not value or draw(st.integers(0, 7)) == 0:
        return new
    keys = list(range(len(value))) if isinstance(value, list) else sorted(value)
    key = draw(st.sampled_from(keys))
    value[key] = changed_somewhere(value[key], draw, new)
    return value


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_real_entries_with_any_part_changed_never_fail_a_report(state, tmp_path_factory, data):
    """The entries kept the logs' identities, so a change that leaves them well shaped is
    taken at the cache's word (the cache's folder is the user's alone): whatever it is, no
    output fails; one the load refuses gives --no-cache's answers, with one line."""
    tmp_path = tmp_path_factory.mktemp("changed")
    environ = environ_of(tmp_path)
    path = warm(state, environ)
    expected = uncached(state)
    entries, texts = real_parts(path)
    which = data.draw(st.integers(0, len(entries) - 1))
    entries[which] = changed_somewhere(entries[which], data.draw, data.draw(JSON))
    crafted = cache_file_of([json.dumps(value).encode() for value in entries], texts)
    for options in (("--format", "json"), ("--format", "csv-calls"), ("--by", "session"), (),
                    ("--html", str(tmp_path / "page.html"))):
        path.write_bytes(crafted)
        code, stdout, stderr = report(state, environ, *options)
        assert code == 0 and len(cache_lines(stderr)) <= 1, stderr
        if options == ("--format", "json") and stderr:
            assert answers(stdout) == expected and len(stderr.splitlines()) == 1
