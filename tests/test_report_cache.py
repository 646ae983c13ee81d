"""The report's cache (tailer/report/cache.py, tailer/report/gather.py): the same answers as
reading every log from its start, always.

A Hypothesis state machine drives appends (whole lines and cut ones), new sessions, logs
rewritten in place (shorter, then growing past where the cache stopped), sessions vanishing
and coming back, the cache deleted, damaged, truncated or written by another version, and
two reports at once. After every step the report's JSON equals `--no-cache`'s on the same
files (but for `generated_at`), with a line on stderr exactly when the cache was ignored.
The logs' times are set in the past, so a log is trusted by its identity as a real old log
is; every write moves its time on, as a real one does.

Bounded for CI; HYDRAFUSION_LONG_TESTS=1 runs many more and longer sequences.
"""

import contextlib
import errno
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import zlib
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from report_helpers import MONTH_START, add_turn, run_report, write_month
from sessiongen import SessionWriter, every_pattern
from tailer import __version__
from tailer.commands import cli
from tailer.records import replace
from tailer.report import cache, gather
from tailerproc import ROOT, tailer_env

LONG = os.environ.get("HYDRAFUSION_LONG_TESTS") == "1"
PAST_NS = 1_700_000_000 * 10**9  # the logs' times: long before any report


def report(state: Path, environ: dict[str, str], *options: str) -> tuple[int, str, str]:
    """`report --state-dir STATE OPTIONS` in this process: exit code, stdout, stderr."""
    out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.StringIO()  # the JSON is bytes
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["report", "--state-dir", str(state), *options], environ)
    out.flush()
    return code, out.buffer.getvalue().decode("utf-8"), err.getvalue()


def answers(stdout: str) -> dict:
    """The report's JSON but what the clock gives: when it was made, how long each turn in
    flight has run."""
    document = json.loads(stdout)
    del document["generated_at"]
    for turn in document["in_flight"]:
        del turn["elapsed_s"]
    return document


def cache_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "the cache" in line]


def session_bytes(session_id: str, seed: int, turns: int) -> bytes:
    """A realistic log of `turns` turns; a different seed gives different bytes."""
    rng = random.Random(seed)
    writer = SessionWriter(session_id, MONTH_START + timedelta(hours=seed % 1000))
    for _ in range(turns):
        add_turn(writer, rng)
        if rng.random() < 0.1:
            writer.resume()
    if rng.random() < 0.6:
        writer.shutdown()
    return "".join(line + "\n" for line in writer.lines()).encode()


class CachedReports(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="report-cache-"))
        self.state = self.root / "state"
        self.away = self.root / "away"  # where a vanished session waits
        self.state.mkdir()
        self.away.mkdir()
        self.environ = {"XDG_CACHE_HOME": str(self.root / "cache")}
        self.content: dict[str, bytes] = {}  # session id -> all its log will hold
        self.written: dict[str, int] = {}  # session id -> bytes of it on disk
        self.gone: set[str] = set()
        self.clock_ns = PAST_NS
        self.cache_ignored = False  # the next report must say, once, that it ignored it
        self.jobs = "1"

    def teardown(self):
        shutil.rmtree(self.root, ignore_errors=True)

    # -- the logs ----------------------------------------------------------------------

    def path(self, session_id: str) -> Path:
        return self.state / session_id / "events.jsonl"

    def write(self, session_id: str, upto: int, *, in_place: bool = False) -> None:
        path = self.path(session_id)
        path.parent.mkdir(exist_ok=True)
        data = self.content[session_id]
        if in_place:  # the same file, its bytes overwritten, then cut
            with open(path, "r+b") as handle:
                handle.write(data[:upto])
                handle.truncate(upto)
        else:
            with open(path, "ab") as handle:
                handle.write(data[self.written.get(session_id, 0):upto])
        self.written[session_id] = upto
        self.clock_ns += 10**9
        os.utime(path, ns=(self.clock_ns, self.clock_ns))

    def present(self) -> list[str]:
        return sorted(self.content.keys() - self.gone)

    @rule(seed=st.integers(0, 10**6), turns=st.integers(1, 5), lines=st.integers(1, 200))
    def new_session(self, seed, turns, lines):
        session_id = f"session-{len(self.content):02d}-{seed}"
        self.content[session_id] = session_bytes(session_id, seed, turns)
        self.write(session_id, _line_end(self.content[session_id], 0, lines))

    @precondition(lambda self: self.present())
    @rule(data=st.data(), lines=st.integers(1, 60), cut=st.booleans())
    def append(self, data, lines, cut):
        session_id = data.draw(st.sampled_from(self.present()))
        content, written = self.content[session_id], self.written[session_id]
        upto = _line_end(content, written, lines)
        if cut and upto > written + 1:  # the last line cut part way
            upto = data.draw(st.integers(written + 1, upto - 1))
        self.write(session_id, upto)

    @precondition(lambda self: any(self.written[s] > 200 for s in self.present()))
    @rule(data=st.data(), seed=st.integers(0, 10**6))
    def rewrite_in_place(self, data, seed):
        """Shorter now; later appends grow it past where the cache stopped."""
        session_id = data.draw(st.sampled_from([s for s in self.present() if self.written[s] > 200]))
        self.content[session_id] = session_bytes(session_id, seed, 6)
        shorter = min(self.written[session_id] - 1, len(self.content[session_id]))
        self.write(session_id, data.draw(st.integers(1, shorter)), in_place=True)

    @precondition(lambda self: self.present())
    @rule(data=st.data())
    def vanish(self, data):
        session_id = data.draw(st.sampled_from(self.present()))
        os.rename(self.state / session_id, self.away / session_id)
        self.gone.add(session_id)

    @precondition(lambda self: self.gone)
    @rule(data=st.data())
    def come_back(self, data):
        session_id = data.draw(st.sampled_from(sorted(self.gone)))
        os.rename(self.away / session_id, self.state / session_id)
        self.gone.discard(session_id)

    # -- the cache ---------------------------------------------------------------------

    def cache_files(self) -> list[Path]:
        return sorted(Path(self.environ["XDG_CACHE_HOME"]).glob("hydrafusion/report/*.json"))

    @precondition(lambda self: self.cache_files())
    @rule()
    def delete_cache(self):
        for path in self.cache_files():
            path.unlink()
        self.cache_ignored = False  # no cache is no damaged one: made again without a word

    @precondition(lambda self: self.cache_files())
    @rule(where=st.floats(0, 1, exclude_max=True), bit=st.integers(0, 7))
    def damage_cache(self, where, bit):
        path = self.cache_files()[0]
        data = bytearray(path.read_bytes())
        data[int(where * len(data))] ^= 1 << bit
        path.write_bytes(bytes(data))
        self.cache_ignored = True

    @precondition(lambda self: self.cache_files())
    @rule(where=st.floats(0, 1, exclude_max=True))
    def truncate_cache(self, where):
        path = self.cache_files()[0]
        with open(path, "r+b") as handle:
            handle.truncate(int(where * path.stat().st_size))
        self.cache_ignored = True

    @precondition(lambda self: self.cache_files() and not self.cache_ignored)
    @rule()
    def cache_of_an_older_version(self):
        path = self.cache_files()[0]
        header, _, body = path.read_bytes().partition(b"\n")
        head = json.loads(header)
        head["version"] = "0.0.1"
        path.write_bytes(json.dumps(head).encode() + b"\n" + body)
        self.cache_ignored = True

    @rule(jobs=st.sampled_from(["1", "2", "3"]))
    def jobs_of_the_next_reports(self, jobs):
        self.jobs = jobs

    @precondition(lambda self: self.present())
    @rule()
    def two_reports_at_once(self):
        """Two processes, each reading the cache and replacing it: whichever wins, both
        answer right, and so does the next report on what was left."""
        env = tailer_env(XDG_CACHE_HOME=self.environ["XDG_CACHE_HOME"])
        command = [sys.executable, "-m", "tailer", "report", "--state-dir", str(self.state),
                   "--format", "json"]
        both = [subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for _ in range(2)]
        outputs = [process.communicate(timeout=120) for process in both]
        code, expected, _ = report(self.state, self.environ, "--format", "json", "--no-cache")
        for process, (stdout, stderr) in zip(both, outputs):
            assert process.returncode == 0, stderr
            assert answers(stdout) == answers(expected)
            if not self.cache_ignored:
                assert cache_lines(stderr) == []
        self.cache_ignored = False  # each of the two said so, if it had to

    # -- after every step -------------------------------------------------------------

    @invariant()
    def the_cache_changes_no_answer(self):
        cached = report(self.state, self.environ, "--format", "json", "--jobs", self.jobs)
        fresh = report(self.state, self.environ, "--format", "json", "--no-cache")
        assert cached[0] == fresh[0], (cached[2], fresh[2])
        if fresh[0] != 0:  # no session log yet: nothing read, the cache not looked at
            return
        assert answers(cached[1]) == answers(fresh[1])
        assert len(cache_lines(cached[2])) == (1 if self.cache_ignored else 0), cached[2]
        assert cache_lines(fresh[2]) == []
        self.cache_ignored = False


def _line_end(content: bytes, start: int, lines: int) -> int:
    """Where the `lines`-th newline after `start` ends (the content's end if sooner)."""
    end = start
    for _ in range(lines):
        newline = content.find(b"\n", end)
        if newline < 0:
            return len(content)
        end = newline + 1
    return end


CachedReports.TestCase.settings = settings(
    max_examples=300 if LONG else 8, stateful_step_count=60 if LONG else 14, deadline=None)
test_the_cache_changes_no_answer = CachedReports.TestCase


# -- --jobs --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def month(tmp_path_factory):
    """A month of sessions, and each log's bytes, to cut where a test wants."""
    state = tmp_path_factory.mktemp("month") / "state"
    write_month(state, days=12, seed=5)
    return state


@settings(max_examples=6 if not LONG else 40)
@given(jobs=st.integers(1, 6), seed=st.integers(0, 10**6))
def test_the_same_report_for_any_number_of_jobs(month, tmp_path_factory, jobs, seed):
    """Logs cut at random places (cut lines too), read by 1 to 6 processes: one answer."""
    rng = random.Random(seed)
    state = tmp_path_factory.mktemp("cut") / "state"
    for log in sorted(month.glob("*/events.jsonl")):
        data = log.read_bytes()
        (state / log.parent.name).mkdir(parents=True)
        (state / log.parent.name / "events.jsonl").write_bytes(data[:rng.randint(0, len(data))])
    environ = {}  # no home: no cache, so every log is read by the workers
    one = report(state, environ, "--format", "json", "--jobs", "1")
    many = report(state, environ, "--format", "json", "--jobs", str(jobs))
    assert one[0] == many[0] == 0, many[2]
    assert answers(many[1]) == answers(one[1])
    assert many[2] == one[2]
    assert len(answers(one[1])["turns"]) > 0


DOOMED = {}  # the session whose worker dies, whether it is killed, and the parent's pid
READ_LOG = gather.read_log


def doomed_read_log(job, reading=None):
    """read_log, that dies (or raises) in a worker process on one session, and reads as
    ever in this one. At the top of the module, so a worker finds it (by name, as pickle
    hands a function over)."""
    if os.getpid() != DOOMED["parent"] and job.session_id == DOOMED["session"]:
        if DOOMED["kill"]:
            os.kill(os.getpid(), signal.SIGKILL)
        raise RuntimeError("a bug")
    return READ_LOG(job, reading)


@pytest.mark.parametrize("kill", [True, False], ids=["killed", "raises"])
def test_a_worker_that_dies_or_fails_stops_the_report(month, monkeypatch, kill):
    session_id = sorted(path.name for path in month.iterdir())[3]
    monkeypatch.setitem(DOOMED, "session", session_id)
    monkeypatch.setitem(DOOMED, "kill", kill)
    monkeypatch.setitem(DOOMED, "parent", os.getpid())
    monkeypatch.setattr(gather, "read_log", doomed_read_log)
    code, stdout, stderr = report(month, {}, "--format", "json", "--jobs", "2")
    assert (code, stdout) == (2, "")
    assert len(stderr.splitlines()) == 1 and "no report" in stderr, stderr
    if kill:
        assert "a process reading the session logs stopped (killed" in stderr
    else:
        assert f"reading session {session_id} failed (RuntimeError)" in stderr
    # In one process the same logs give the whole report.
    assert report(month, {}, "--format", "json", "--jobs", "1")[0] == 0


def test_a_worker_that_dies_under_watch_costs_one_line(month, monkeypatch):
    """--watch's first pass reads through the cache and the workers, as a report does: a
    worker that dies there ends it with the same line and exit code, not a traceback."""
    def died(*args, **options):
        raise gather.WorkerFailed("a process reading the session logs stopped (killed by SIGKILL)")
    monkeypatch.setattr(gather, "through_cache", died)
    out, err = io.StringIO(), io.StringIO()
    out.isatty = lambda: True
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["report", "--state-dir", str(month), "--watch"], {})
    assert code == 2
    assert err.getvalue() == ("hydrafusion-tailer report: a process reading the session logs stopped "
                              "(killed by SIGKILL)\n")


def test_workers_that_cannot_start_cost_one_line_and_leave_nothing(month, monkeypatch):
    """The system refuses the second worker (EAGAIN: too many processes): one line, exit 2,
    the first worker killed and reaped, and no pipe left open."""
    forks, fork = [], os.fork

    def second_fails():
        if forks:
            raise BlockingIOError(errno.EAGAIN, os.strerror(errno.EAGAIN))
        forks.append(fork())
        return forks[-1]
    monkeypatch.setattr(os, "fork", second_fails)
    open_before = set(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else set()
    code, stdout, stderr = report(month, {}, "--format", "json", "--jobs", "2")
    assert (code, stdout) == (2, "")
    assert stderr == ("hydrafusion-tailer report: cannot start the processes that read the session "
                      f"logs ({os.strerror(errno.EAGAIN)}): no report; --jobs 1 reads in one process\n")
    with pytest.raises(ChildProcessError):
        os.waitpid(forks[0], os.WNOHANG)  # the first worker was killed and reaped
    if open_before:
        assert set(os.listdir("/proc/self/fd")) <= open_before


def test_a_huge_jobs_starts_a_few_workers_per_cpu_and_no_more_than_logs(month, monkeypatch):
    from tailer.report import workers

    started = []

    class CountedPool(workers.Pool):
        def __init__(self, size, function, **options):
            started.append(size)
            super().__init__(size, function, **options)

    monkeypatch.setattr(workers, "Pool", CountedPool)
    monkeypatch.setattr(gather, "default_jobs", lambda: 1)
    logs = len(list(month.glob("*/events.jsonl")))
    assert logs > gather.JOBS_PER_CPU
    code, stdout, _ = report(month, {}, "--format", "json", "--jobs", "99999")
    assert code == 0 and answers(stdout) == answers(report(month, {}, "--format", "json", "--jobs", "1")[1])
    assert started == [gather.JOBS_PER_CPU]
    assert [gather.pool_size(99999, n) for n in (1, 2, 3)] == [1, 2, 3]
    assert gather.pool_size(2, 10) == 2


def test_jobs_default_to_the_cpus_this_process_may_use():
    assert gather.default_jobs() == (getattr(os, "process_cpu_count", os.cpu_count)() or 1)


# -- the cache's file ----------------------------------------------------------------------


def test_the_cache_is_private_and_lives_where_xdg_says(tmp_path):
    state = tmp_path / "state"
    every_pattern("private").write(state)
    for environ, where in (({"XDG_CACHE_HOME": str(tmp_path / "xdg")}, tmp_path / "xdg"),
                           ({"HOME": str(tmp_path / "home")}, tmp_path / "home" / ".cache"),
                           ({"XDG_CACHE_HOME": "relative", "HOME": str(tmp_path / "h2")},
                            tmp_path / "h2" / ".cache")):
        assert report(state, environ)[0] == 0
        folder = where / "hydrafusion" / "report"
        files = list(folder.iterdir())
        assert len(files) == 1 and files[0].suffix == ".json"
        assert oct(folder.stat().st_mode & 0o777) == oct(0o700)
        assert oct(files[0].stat().st_mode & 0o777) == oct(0o600)
        assert str(state) not in files[0].read_text()  # named by a digest, the path nowhere
    assert not (tmp_path / "relative").exists()
    os.chmod(tmp_path / "xdg" / "hydrafusion" / "report", 0o755)  # made looser by someone
    assert report(state, {"XDG_CACHE_HOME": str(tmp_path / "xdg")}, "--no-cache")[0] == 0
    assert oct((tmp_path / "xdg/hydrafusion/report").stat().st_mode & 0o777) == oct(0o755)
    every_pattern("private-2").write(state)
    assert report(state, {"XDG_CACHE_HOME": str(tmp_path / "xdg")})[0] == 0
    assert oct((tmp_path / "xdg/hydrafusion/report").stat().st_mode & 0o777) == oct(0o700)


def test_no_cache_reads_none_and_writes_none(tmp_path):
    state = tmp_path / "state"
    every_pattern("no-cache").write(state)
    environ = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    assert report(state, environ, "--no-cache")[0] == 0
    assert not (tmp_path / "xdg").exists()
    assert report(state, environ)[0] == 0
    (file,) = (tmp_path / "xdg" / "hydrafusion" / "report").iterdir()
    file.write_bytes(b"not a cache")
    code, _, stderr = report(state, environ, "--no-cache")
    assert code == 0 and stderr == "" and file.read_bytes() == b"not a cache"


def entries_of(environ: dict[str, str], state: Path) -> dict:
    entries, problem = cache.load(cache.cache_file(environ, state))
    assert problem is None
    return entries


def test_the_cache_forgets_sessions_gone_from_the_state_folder(tmp_path):
    state = tmp_path / "state"
    for name in ("kept", "gone"):
        every_pattern(name).write(state)
    environ = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    report(state, environ, "--session", "kept")
    assert set(entries_of(environ, state)) == {"kept"}  # only the logs it read
    report(state, environ)
    assert set(entries_of(environ, state)) == {"kept", "gone"}
    shutil.rmtree(state / "gone")
    report(state, environ, "--session", "kept")
    assert set(entries_of(environ, state)) == {"kept"}


def test_the_cache_is_bounded(tmp_path, monkeypatch):
    """Past MAX_BYTES the sessions changed longest ago are left out; past MAX_FILES state
    folders, the file written longest ago goes."""
    state = tmp_path / "state"
    for number in range(4):
        log = every_pattern(f"bounded-{number}").write(state)
        os.utime(log, ns=(PAST_NS + number * 10**9,) * 2)
    environ = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    report(state, environ)
    sizes = {session_id: len(entry.encoded(session_id)) + 1 + sum(map(len, entry.texts()))
             for session_id, entry in entries_of(environ, state).items()}
    # Room for two and a half sessions' entries (their sizes are about the same).
    monkeypatch.setattr(cache, "MAX_BYTES", 2 * max(sizes.values()) + min(sizes.values()) // 2)
    every_pattern("bounded-4").write(state)  # a change, so the cache is written again
    os.utime(state / "bounded-4" / "events.jsonl", ns=(PAST_NS + 9 * 10**9,) * 2)
    fresh = report(state, environ, "--format", "json", "--no-cache")[1]
    assert answers(report(state, environ, "--format", "json")[1]) == answers(fresh)
    assert set(entries_of(environ, state)) == {"bounded-3", "bounded-4"}
    monkeypatch.undo()
    folders = []
    for number in range(cache.MAX_FILES + 1):
        folders.append(tmp_path / f"state-{number}")
        every_pattern(f"folder-{number}").write(folders[-1])
        report(folders[-1], environ)
    left = {path.name for path in (tmp_path / "xdg" / "hydrafusion" / "report").iterdir()}
    assert left == {cache.cache_file(environ, folder).name for folder in folders[1:]}


def reading_recorded(monkeypatch) -> list:
    """The jobs given to read_all from now on (in this process, whatever --jobs says)."""
    jobs, read_all = [], gather.read_all

    def recording(given, workers, on_read):
        jobs.extend(given)
        return read_all(given, workers, on_read)
    monkeypatch.setattr(gather, "read_all", recording)
    return jobs


def test_a_warm_report_reads_no_log(tmp_path, monkeypatch):
    """Old logs unchanged: no log is opened, not even to check its digest; one appended
    to is read from where the cache stopped, the rest not at all."""
    state = tmp_path / "state"
    write_month(state, days=4, seed=3)
    for log in state.glob("*/events.jsonl"):
        os.utime(log, ns=(PAST_NS, PAST_NS))
    environ = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    assert report(state, environ, "--jobs", "1")[0] == 0
    read = reading_recorded(monkeypatch)
    assert report(state, environ, "--jobs", "2")[0] == 0
    assert read == []
    log = sorted(state.glob("*/events.jsonl"))[1]
    with open(log, "ab") as handle:
        handle.write(b'{"type":"session.info","data":{}}\n')
    assert report(state, environ, "--jobs", "2")[0] == 0
    assert [(job.session_id, job.state is not None) for job in read] == [(log.parent.name, True)]


# -- --watch -------------------------------------------------------------------------------


def shown(live) -> tuple:
    """What a watch's table and live lines are made of."""
    rows = sorted((row.session_id, row.fusion_id, row.start, row.credits, row.outcome)
                  for row in live.turns)
    checks = sorted(live.figures.checks(), key=lambda check: (check.session_id, check.source, check.scope))
    return rows, live.sessions, live.in_progress(), live.skipped(), checks


def test_watch_starts_from_the_cache_and_writes_it(tmp_path, monkeypatch):
    from tailer.copilot.watch import SessionWatcher
    from tailer.report.live import LiveTurns
    from tailer.report.read import Selection

    state = tmp_path / "state"
    write_month(state, days=5, seed=8)
    writer = SessionWriter("open-turn", MONTH_START)
    writer.single("gpt-5.6-sol")
    writer.incomplete("gpt-5.6-sol", "claude-opus-5")  # no rollup, no shutdown: still open
    writer.write(state)
    for log in state.glob("*/events.jsonl"):
        os.utime(log, ns=(PAST_NS, PAST_NS))
    path = cache.cache_file({"XDG_CACHE_HOME": str(tmp_path / "xdg")}, state)

    def watching(cache_path):
        # inotify: the logs' old times would make a polling watcher look at them seldom
        live = LiveTurns(state, Selection(), watcher=SessionWatcher(state),
                         cache_path=cache_path, clock=lambda: PAST_NS / 1e9 + 60)
        live.poll(0)
        return live

    cold = watching(path)
    assert path.exists()  # a cold watch leaves the cache warm
    read = reading_recorded(monkeypatch)
    looked_again, identity = [], cache.identity
    monkeypatch.setattr(cache, "identity", lambda log: looked_again.append(log) or identity(log))
    warm = watching(path)
    assert read == [] and warm.cache_problem is None
    assert looked_again == []  # the cache is checked with the watcher's stat of each log
    assert shown(warm) == shown(cold)
    assert warm.in_progress() > 0  # the open turn, resumed from the cache's state
    # A log appended to is read on from the cache's state, and gives what reading it all gives.
    log = sorted(state.glob("*/events.jsonl"))[2]
    with open(log, "ab") as handle:
        handle.write("".join(line + "\n" for line in every_pattern("later").lines()).encode())
    before = len(warm.turns)
    for _ in range(20):
        warm.poll(0.5)
        if len(warm.turns) > before:
            break
    warm.poll(0.5)
    assert read == []  # after the first pass, the watch reads on with its own reader
    assert shown(warm) == shown(watching(None))


def test_a_cache_that_cannot_be_saved_costs_one_line(tmp_path):
    state = tmp_path / "state"
    every_pattern("unsaved").write(state)
    (tmp_path / "file").write_text("")
    environ = {"XDG_CACHE_HOME": str(tmp_path / "file")}  # no folder can be made there
    code, stdout, stderr = report(state, environ, "--format", "json")
    assert code == 0 and answers(stdout) == answers(report(state, {}, "--format", "json")[1])
    assert len(stderr.splitlines()) == len(cache_lines(stderr)) == 1
    assert "the cache cannot be saved" in stderr


@pytest.mark.parametrize("options", [(), ("--format", "csv"), ("--html", "page.html"), ("--watch",)])
def test_a_state_folder_that_is_a_loop_of_links_is_one_line(tmp_path, options):
    """Naming the cache of a --state-dir that is a loop of symbolic links (Path.resolve)
    raised RuntimeError: a traceback before the folder was looked at. One line, exit 2, as
    with --no-cache, and no cache."""
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    options = [str(tmp_path / option) if option.endswith(".html") else option for option in options]
    code, stdout, stderr = report(loop, {"XDG_CACHE_HOME": str(tmp_path / "xdg")}, *options)
    assert code == 2 and stdout == "" and len(stderr.splitlines()) == 1, stderr
    assert "symbolic links" in stderr and not (tmp_path / "xdg").exists()


def test_a_log_rewritten_to_the_same_length_is_read_again(tmp_path):
    """Other bytes of the same length: the modification time moved, so the log is opened,
    and the digest before the cache's offset no longer matches."""
    state = tmp_path / "state"
    log = every_pattern("same-length").write(state)
    os.utime(log, ns=(PAST_NS, PAST_NS))
    environ = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    before = answers(report(state, environ, "--format", "json")[1])
    data = log.read_bytes()
    other = session_bytes("same-length", 7, 12)[:len(data)]
    log.write_bytes(other[:other.rindex(b"\n") + 1].ljust(len(data), b"\n"))
    os.utime(log, ns=(PAST_NS + 10**9, PAST_NS + 10**9))
    assert log.stat().st_size == len(data)
    after = answers(report(state, environ, "--format", "json")[1])
    assert after == answers(report(state, environ, "--format", "json", "--no-cache")[1])
    assert after != before


def warm_state(tmp_path: Path, name: str) -> tuple[Path, dict[str, str], dict]:
    """A state folder of one session, its cache filled; the report's answers."""
    state = tmp_path / "state"
    every_pattern(name).write(state)
    environ = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    return state, environ, answers(report(state, environ, "--format", "json")[1])


def cache_parts(environ: dict[str, str], state: Path) -> tuple[Path, dict, bytes, bytes]:
    """The cache file, its header, its entries and its turns' texts."""
    path = cache.cache_file(environ, state)
    header, _, rest = path.read_bytes().partition(b"\n")
    head = json.loads(header)
    return path, head, rest[:head["index_bytes"]], rest[head["index_bytes"]:]


def assert_rebuilt(path: Path, state: Path, environ: dict[str, str], expected: dict) -> None:
    """The cache at path is damaged: ignored with one line, and the answers are the same."""
    assert cache.load(path) == ({}, "is damaged")
    code, stdout, stderr = report(state, environ, "--format", "json")
    assert code == 0 and answers(stdout) == expected
    assert len(cache_lines(stderr)) == 1 and "the cache is damaged" in stderr


def test_turn_texts_that_do_not_add_up_are_damage_even_under_right_crcs(tmp_path):
    """After the header come the entries (`index_bytes` long, a line each), each turn's JSON
    there by its length, then those texts back to back: a file whose lengths and texts
    disagree is damaged, whatever its CRCs say, and the report is made from the logs."""
    state, environ, expected = warm_state(tmp_path, "texts")
    path, head, index, texts = cache_parts(environ, state)
    assert index.count(b"\n") == 1 and texts.startswith(b'{"position":')  # the log's state, then its turns
    for cut in (texts[:-1], texts + b"x"):
        head = {**head, "texts_crc32": f"{zlib.crc32(cut):08x}"}
        path.write_bytes(json.dumps(head).encode() + b"\n" + index + cut)
        assert_rebuilt(path, state, environ, expected)


def test_a_flipped_byte_anywhere_is_damage(tmp_path):
    """A CRC-32 over the entries, and one over the texts: a changed byte in any of them is
    found, whatever the byte."""
    state, environ, expected = warm_state(tmp_path, "flipped")
    path = cache.cache_file(environ, state)
    whole_file = path.read_bytes()
    header_end = whole_file.index(b"\n") + 1
    for at in (header_end + 5, len(whole_file) // 2, len(whole_file) - 1):
        path.write_bytes(whole_file[:at] + bytes([whole_file[at] ^ 0x01]) + whole_file[at + 1:])
        assert_rebuilt(path, state, environ, expected)


def test_entries_not_changed_are_saved_again_as_loaded(tmp_path):
    """A save writes again the lines of the entries it loaded (encoding a month's entries
    again was most of a save after a few new turns): the file is the same as one whose
    every entry is made afresh."""
    state, environ, _ = warm_state(tmp_path, "as-loaded")
    every_pattern("another").write(state)
    report(state, environ)
    path = cache.cache_file(environ, state)
    entries, problem = cache.load(path)
    assert problem is None and all(entry.line is not None for entry in entries.values())
    cache.save(tmp_path / "again.json", entries)
    made = {session_id: replace(entry, line=None) for session_id, entry in entries.items()}
    cache.save(tmp_path / "made.json", made)
    assert (tmp_path / "again.json").read_bytes() == (tmp_path / "made.json").read_bytes() == path.read_bytes()


@pytest.mark.parametrize("index_bytes, turn_length, state_length", [
    (2**62, None, None), (-1, None, None), ("12", None, None), (None, None, None),
    ("right", 2**62, None), ("right", -1, None), ("right", None, 2**62), ("right", None, -1)])
def test_a_length_past_the_files_end_is_damage_not_a_memory_error(tmp_path, index_bytes, turn_length,
                                                                   state_length):
    """The header's length of the entries, each log's state's and each turn's length are
    at most what the file still holds: a damaged one is one line, never an attempt to read
    2**62 bytes."""
    state, environ, expected = warm_state(tmp_path, "lengths")
    path, head, index, texts = cache_parts(environ, state)
    if turn_length is not None or state_length is not None:
        session_id, entry = json.loads(index)
        if turn_length is not None:
            entry[3][0][cache.PRINTED_AT][0] = turn_length
        if state_length is not None:
            entry[2] = state_length
        index = json.dumps([session_id, entry], separators=(",", ":")).encode() + b"\n"
    if index_bytes == "right":
        index_bytes = len(index)
    head = {**head, "index_bytes": index_bytes, "crc32": f"{zlib.crc32(index):08x}"}
    path.write_bytes(json.dumps(head).encode() + b"\n" + index + texts)
    assert_rebuilt(path, state, environ, expected)


@pytest.mark.parametrize("mapped", [True, False])
def test_a_loaded_cache_outlives_the_file_it_was_loaded_from(tmp_path, monkeypatch, mapped):
    """A report maps the cache (read where it cannot be mapped: MAPPED) and its turns' texts
    are views of it: another report replacing the file meanwhile changes none of them, and
    either way of loading gives the same entries."""
    monkeypatch.setattr(cache, "MAPPED", mapped)
    state, environ, _ = warm_state(tmp_path, "outlives")
    path = cache.cache_file(environ, state)
    entries, problem = cache.load(path)
    texts = {session_id: [bytes(text) for text in entry.texts()] for session_id, entry in entries.items()}
    every_pattern("another").write(state)
    assert report(state, environ, "--format", "json")[0] == 0  # replaces the file
    path.write_bytes(b"overwritten")  # and so does this: the loaded file lives on unlinked
    assert {session_id: [bytes(text) for text in entry.texts()]
            for session_id, entry in entries.items()} == texts
    cache.save(path, entries)
    monkeypatch.setattr(cache, "MAPPED", not mapped)
    assert cache.load(path) == (entries, None)


def test_a_log_rewritten_since_the_cache_is_read_once(tmp_path, monkeypatch):
    """A log rewritten since the cache read it was read on from its start as the daemon
    reads it, then read whole again from its start: every turn of it made twice, for the
    first read's rows to be dropped. It is read once, as a new log, with the same answers."""
    state = tmp_path / "state"
    log = every_pattern("rewritten").write(state)
    os.utime(log, ns=(PAST_NS, PAST_NS))
    environ = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    report(state, environ, "--format", "json")
    log.write_bytes(session_bytes("rewritten", 7, 12))
    os.utime(log, ns=(PAST_NS + 10**9, PAST_NS + 10**9))
    made = []
    real_turn_data = gather.turn_data
    monkeypatch.setattr(gather, "turn_data", lambda turn: made.append(turn.key) or real_turn_data(turn))
    code, stdout, stderr = report(state, environ, "--format", "json", "--jobs", "1")
    assert code == 0, stderr
    assert made and len(made) == len(set(made))
    monkeypatch.undo()
    assert answers(stdout) == answers(report(state, environ, "--format", "json", "--no-cache")[1])
