"""The CLI's own ledger of model calls (`session-store.db`): read safely, compared truly.

The ledger is the real CLI's: its table as the pinned version made it and the rows it wrote
for the recorded scenarios (tests/realcli, `ledger.sql`), beside a copy of those scenarios'
logs; or rows the real CLI would write for generated logs, one per usage record, read from
the logs' lines here (ledgergen.rows_of_log). Then it is changed as life changes it: a row
the log lost, a row the log never had, a session whose log is gone, credits the CLI did not
know, another program holding a lock, a file that is no database, another CLI version's
layout, figures too large to add up, a FIFO or a symlink at its path. `report` and `doctor`
run as a user runs them.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from ledgergen import TABLE, cli_table_sql, rows_of_log, rows_of_state, write_ledger
from realcli import driver, record
from report_helpers import run_report
from sessiongen import START, SessionWriter, every_pattern, whole_session
from tailer.copilot.event_records import Usage
from tailer.copilot.ledger import (
    BUSY_TIMEOUT_S, LedgerLayoutChanged, LedgerProblem, LedgerSession, read_ledger,
)
from tailer.path_options import NO_LEDGER, ledger_path
from tailerproc import ROOT, tailer_env

VERSION = driver.pinned_version()
A_UUID = "0b5e1a2c-3d4e-4f50-8a6b-7c8d9e0f1a2b"
# The recorded scenarios' sessions, each in the ledger.
SESSIONS = len(record.recorded(VERSION)[1])


@pytest.fixture
def home(tmp_path) -> tuple[Path, Path, dict[str, str]]:
    """A Copilot home as the real CLI left it: the recorded scenarios' logs in
    session-state and its ledger beside them; (state dir, ledger, scenario -> session id)."""
    state_dir, sessions = record.recorded(VERSION)
    copilot = tmp_path / "copilot-home"
    shutil.copytree(state_dir, copilot / "session-state")
    ledger = record.ledger_database(VERSION, copilot)
    return copilot / "session-state", ledger, sessions


def ledger_of(*args: str, env: dict[str, str] | None = None) -> tuple[dict, str]:
    """`report --format json ARGS`: its `ledger` object and its stderr."""
    done = run_report("--format", "json", *args, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["ledger"], done.stderr


def doctor(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tailer", "doctor", *args], cwd=ROOT,
                          env=env or tailer_env(), capture_output=True, text=True, timeout=120)


def change(ledger: Path, *statements: str) -> None:
    connection = sqlite3.connect(ledger)
    try:
        for statement in statements:
            connection.execute(statement)
        connection.commit()
    finally:
        connection.close()


# -- the real CLI's ledger and logs ----------------------------------------------------------


def test_every_session_of_the_real_cli_matches_its_ledger(home):
    state_dir, _, sessions = home
    found, stderr = ledger_of("--state-dir", str(state_dir))
    assert found["status"] == "checked" and stderr == ""
    assert found["sessions_checked"] == len(sessions) == SESSIONS
    assert found["differ"] == [] and found["only_in_ledger"] == []
    # The `unpriced` scenario's calls have no credits, in the log as in the ledger.
    assert (found["credits_not_compared"], found["not_in_ledger"]) == (1, 0)
    table = run_report("--state-dir", str(state_dir), "--turns", "0")
    assert f"{SESSIONS} sessions checked against the CLI's ledger, all match" in table.stdout
    done = doctor("--state-dir", str(state_dir))
    assert done.returncode == 0, done.stdout
    assert f"  {SESSIONS} sessions checked against the CLI's ledger, all match" in done.stdout


def test_a_call_the_log_lost_is_named_with_what_differs(home):
    """The ledger keeps a call whose usage record the log does not have (a crash)."""
    state_dir, ledger, sessions = home
    session = sessions["critique_revise"]
    change(ledger, f"INSERT INTO {TABLE} (session_id, model, input_tokens, output_tokens, "
                   "cache_read_tokens, cache_write_tokens, total_nano_aiu) "
                   f"VALUES ('{session}', 'gpt-5.6-sol', 1200, 40, 200, 0, 250000000)")
    found, _ = ledger_of("--state-dir", str(state_dir))
    (differs,) = found["differ"]
    assert differs["session_id"] == session
    assert differs["figures"] == ["calls", "input_tokens", "output_tokens", "cache_read_tokens",
                                  "credits"]
    assert (differs["ours"]["calls"], differs["cli"]["calls"]) == (3, 4)
    assert differs["cli"]["credits"] - differs["ours"]["credits"] == pytest.approx(0.25)
    table = run_report("--state-dir", str(state_dir), "--turns", "0").stdout
    assert f"{SESSIONS} sessions checked against the CLI's ledger, 1 differ" in table
    # Input is uncached, as the CLI's /usage and ccusage count it, in the report and doctor.
    assert (differs["ours"]["input_tokens"], differs["cli"]["input_tokens"]) == (3000, 4000)
    assert f"  {session[:8]} calls 3 vs 4, input 3,000 vs 4,000," in table
    done = doctor("--state-dir", str(state_dir))
    assert done.returncode == 1
    assert f"{SESSIONS} sessions checked against the CLI's ledger, 1 differ" in done.stdout
    assert f"  {session}  calls 3, the ledger 4; input tokens 3000, the ledger 4000;" in done.stdout


def test_a_call_the_ledger_lost_is_named_too(home):
    state_dir, ledger, sessions = home
    session = sessions["cascade_repair_tool"]
    change(ledger, f"DELETE FROM {TABLE} WHERE id = (SELECT max(id) FROM {TABLE} "
                   f"WHERE session_id = '{session}')")
    found, _ = ledger_of("--state-dir", str(state_dir))
    (differs,) = found["differ"]
    assert differs["session_id"] == session
    assert (differs["ours"]["calls"], differs["cli"]["calls"]) == (4, 3)
    assert doctor("--state-dir", str(state_dir)).returncode == 1


def test_sessions_in_the_ledger_without_a_log_are_listed(home):
    """A session folder removed, and one the CLI never wrote a log for; an id that is not
    shaped as the CLI's is counted, never shown."""
    state_dir, ledger, sessions = home
    gone = sessions["single"]
    shutil.rmtree(state_dir / gone)
    change(ledger,
           f"INSERT INTO {TABLE} (session_id, model, input_tokens, output_tokens, "
           f"total_nano_aiu, created_at) VALUES ('{A_UUID}', 'm', 5, 6, NULL, '2026-12-01T10:00:00Z')",
           f"INSERT INTO {TABLE} (session_id, model, input_tokens) VALUES ('not an id', 'm', 1)")
    found, _ = ledger_of("--state-dir", str(state_dir))
    assert found["sessions_checked"] == SESSIONS - 1 and found["differ"] == []
    assert [only["session_id"] for only in found["only_in_ledger"]] == sorted([gone, A_UUID])
    new = next(only for only in found["only_in_ledger"] if only["session_id"] == A_UUID)
    assert new["cli"] == {"calls": 1, "input_tokens": 5, "output_tokens": 6, "cache_read_tokens": 0,
                          "cache_write_tokens": 0, "credits": None}
    assert found["only_in_ledger_unnamed"] == 1
    table = run_report("--state-dir", str(state_dir), "--turns", "0").stdout
    assert "in the CLI's ledger without a log: 3 sessions" in table
    assert f"  {A_UUID[:8]}: 1 call, unknown credits" in table and "not an id" not in table
    done = doctor("--state-dir", str(state_dir))
    assert f"  {A_UUID}  1  unknown" in done.stdout and "not an id" not in done.stdout
    # --session and --since choose them as they choose the logs, by their calls.
    found, _ = ledger_of("--state-dir", str(state_dir), "--session", A_UUID[:8])
    assert [only["session_id"] for only in found["only_in_ledger"]] == [A_UUID]
    assert found["only_in_ledger_unnamed"] == 0 and found["sessions_checked"] == 0
    found, _ = ledger_of("--state-dir", str(state_dir), "--since", "2026-12-02")
    assert A_UUID not in [only["session_id"] for only in found["only_in_ledger"]]
    found, _ = ledger_of("--state-dir", str(state_dir), "--until", "2026-12-01T09:00Z")
    assert A_UUID not in [only["session_id"] for only in found["only_in_ledger"]]


def test_credits_are_compared_only_where_both_sides_know_them(home, tmp_path):
    """A call the CLI had no credits for (null in the ledger): the session's calls and
    tokens are still compared, its credits not, and that is said."""
    state_dir, ledger, sessions = home
    session = sessions["max"]
    change(ledger, f"UPDATE {TABLE} SET total_nano_aiu = NULL WHERE id = (SELECT min(id) "
                   f"FROM {TABLE} WHERE session_id = '{session}')")
    found, _ = ledger_of("--state-dir", str(state_dir))
    assert found["differ"] == [] and found["credits_not_compared"] == 2  # and `unpriced`
    table = run_report("--state-dir", str(state_dir), "--turns", "0").stdout
    assert "credits of 2 sessions not compared: a call's credits unknown" in table
    # And one calls more: it differs by its calls and tokens, never by unknown credits.
    change(ledger, f"INSERT INTO {TABLE} (session_id, model, input_tokens) VALUES ('{session}', 'm', 7)")
    found, _ = ledger_of("--state-dir", str(state_dir))
    (differs,) = found["differ"]
    assert differs["figures"] == ["calls", "input_tokens"] and differs["cli"]["credits"] is None


def test_a_log_without_credits_is_compared_without_them(tmp_path):
    """Usage records that say `aiCreditsStatus: unavailable` (no copilotUsage): the log
    knows no credits, the ledger has nulls; calls and tokens still match."""
    state_dir = tmp_path / "session-state"
    writer = SessionWriter("a" * 8 + A_UUID[8:], START, unpriced=1)
    writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol")
    writer.ordinary("gpt-5.6-sol")
    writer.shutdown()
    log = writer.write(state_dir)
    write_ledger(tmp_path / "session-store.db", rows_of_log(log))
    found, _ = ledger_of("--state-dir", str(state_dir))
    assert (found["sessions_checked"], found["differ"], found["credits_not_compared"]) == (1, [], 1)


def test_generated_sessions_match_the_ledger_the_cli_would_write(tmp_path):
    """Every pattern, resumed runs, ordinary prompts and tools: one row per usage record,
    read from the logs' lines, adds up to what the tailer reads, session by session."""
    state_dir = tmp_path / "session-state"
    writers = [every_pattern("ledger-every"), whole_session("ledger-whole")]
    resumed = SessionWriter(A_UUID, START)
    resumed.single("gpt-5.6-sol")
    resumed.shutdown()
    resumed.resume()
    resumed.ordinary("claude-sonnet-4.6", tools=("bash", "view"))
    writers.append(resumed)
    for writer in writers:
        writer.write(state_dir)
    write_ledger(tmp_path / "session-store.db", rows_of_state(state_dir))
    found, _ = ledger_of("--state-dir", str(state_dir))
    assert (found["sessions_checked"], found["differ"], found["not_in_ledger"]) == (3, [], 0)


def test_the_ledger_is_found_beside_the_state_folder_wherever_it_is(home, tmp_path):
    """$COPILOT_HOME/session-state, $COPILOT_STATE_DIR and --state-dir elsewhere: beside
    each; --ledger names another; `none` reads none."""
    state_dir, ledger, _ = home
    env = tailer_env(COPILOT_HOME=str(state_dir.parent))
    found, _ = ledger_of(env=env)
    assert found["status"] == "checked" and found["sessions_checked"] == SESSIONS
    moved = tmp_path / "elsewhere" / "state"
    shutil.move(str(state_dir), moved)
    found, _ = ledger_of(env=tailer_env(COPILOT_STATE_DIR=str(moved)))
    assert found["status"] == "absent"  # beside the folder named, not in $COPILOT_HOME
    shutil.copy(ledger, moved.parent / "session-store.db")
    found, _ = ledger_of(env=tailer_env(COPILOT_STATE_DIR=str(moved)))
    assert found["sessions_checked"] == SESSIONS
    found, _ = ledger_of("--state-dir", str(moved))
    assert found["sessions_checked"] == SESSIONS
    (moved.parent / "session-store.db").unlink()
    found, _ = ledger_of("--state-dir", str(moved), "--ledger", str(ledger))
    assert found["sessions_checked"] == SESSIONS
    found, _ = ledger_of("--state-dir", str(moved), "--ledger", "none")
    assert found == {"status": "off", "problem": None, "sessions_checked": 0, "differ": [],
                     "credits_not_compared": 0, "not_in_ledger": 0, "logs_without_start": 0,
                     "only_in_ledger": [], "only_in_ledger_unnamed": 0}
    assert "not read (--ledger none)" in doctor("--state-dir", str(moved), "--ledger", "none").stdout


def test_none_in_any_case_reads_no_ledger():
    """`none` turns off every other output in any case (--otlp-endpoint NONE); `--ledger
    NONE` was taken for a file: 'does not exist', exit 2."""
    assert ledger_path("NONE") == ledger_path(" None ") == NO_LEDGER


def test_a_warm_report_reads_the_ledger_as_it_is_now(home, tmp_path):
    """The cache spares the logs, not the ledger: a row added after a report shows in the
    next one, read from the cache, as --no-cache shows it."""
    state_dir, ledger, sessions = home
    env = tailer_env(XDG_CACHE_HOME=str(tmp_path / "cache"))
    first, _ = ledger_of("--state-dir", str(state_dir), env=env)
    assert first["differ"] == []
    change(ledger, f"DELETE FROM {TABLE} WHERE id = (SELECT min(id) FROM {TABLE} "
                   f"WHERE session_id = '{sessions['resumed']}')",
           f"DELETE FROM {TABLE} WHERE session_id = '{sessions['plain']}'")
    warm, _ = ledger_of("--state-dir", str(state_dir), env=env)
    cold, _ = ledger_of("--state-dir", str(state_dir), "--no-cache")
    assert warm == cold and [d["session_id"] for d in warm["differ"]] == [sessions["resumed"]]
    # A log whose session the ledger holds no call of: counted (a session older than the
    # ledger, or one it lost), not compared.
    assert warm["not_in_ledger"] == 1 and warm["sessions_checked"] == SESSIONS - 1


def test_ledger_takes_neither_watch_nor_demo(home):
    state_dir, ledger, _ = home
    for extra in (["--state-dir", str(state_dir), "--watch"], ["--demo"]):
        done = run_report("--ledger", str(ledger), *extra)
        assert done.returncode == 2 and "--ledger" in done.stderr and "Traceback" not in done.stderr
    demo = json.loads(run_report("--demo", "--format", "json").stdout)
    assert demo["ledger"]["status"] == "off"


# -- a ledger that cannot be read: one line, the report goes on ---------------------------


def not_read(state_dir: Path, expected: str, status: str = "not_read") -> None:
    """The report and doctor say `expected` in one line, and the report is whole."""
    found, stderr = ledger_of("--state-dir", str(state_dir))
    assert found["status"] == status and expected in found["problem"], found
    assert stderr == f"hydrafusion-tailer report: {found['problem']}\n"
    table = run_report("--state-dir", str(state_dir))
    assert table.returncode == 0 and f", {SESSIONS} sessions," in table.stdout
    assert "checked against the CLI's ledger" not in table.stdout
    done = doctor("--state-dir", str(state_dir))
    assert f"  {found['problem']}\n" in done.stdout and "Traceback" not in done.stderr
    assert done.returncode == (1 if status == "unknown_layout" else 0)


def test_a_file_that_is_no_database(home):
    state_dir, ledger, _ = home
    ledger.write_bytes(b"not a database, but a prompt someone saved here\n" * 100)
    not_read(state_dir, "is damaged or not a SQLite database")


def test_another_cli_versions_layout_is_named(home):
    state_dir, ledger, _ = home
    change(ledger, f"ALTER TABLE {TABLE} DROP COLUMN cache_write_tokens")
    not_read(state_dir, f"has no column cache_write_tokens in {TABLE}", "unknown_layout")
    change(ledger, f"DROP TABLE {TABLE}")
    not_read(state_dir, f"has no table {TABLE}", "unknown_layout")
    # A view of that name could show any table's text as its figures: not read either.
    change(ledger, "CREATE TABLE other (session_id TEXT)",
           f"CREATE VIEW {TABLE} AS SELECT session_id, 1 AS input_tokens FROM other")
    not_read(state_dir, f"has no table {TABLE}", "unknown_layout")


def test_figures_that_are_not_whole_numbers_are_not_summed(home):
    state_dir, ledger, sessions = home
    change(ledger, f"UPDATE {TABLE} SET input_tokens = 'twelve hundred' WHERE id = 1")
    not_read(state_dir, "holds figures that are not whole numbers")
    change(ledger, f"UPDATE {TABLE} SET input_tokens = -5000 WHERE id = 1")
    not_read(state_dir, "holds figures that are not whole numbers")
    change(ledger, f"UPDATE {TABLE} SET input_tokens = 1.5 WHERE id = 1")
    not_read(state_dir, "holds figures that are not whole numbers")
    change(ledger, f"UPDATE {TABLE} SET input_tokens = x'00' WHERE id = 1")
    not_read(state_dir, "holds figures that are not whole numbers")


@pytest.mark.parametrize("column", ["input_tokens", "total_nano_aiu"])
def test_figures_too_large_to_add_up_are_named_plainly(home, column):
    """Whole numbers each, but past SQLite's integers together: the sum overflows in SQL,
    which SQLite calls SQLITE_ERROR; the user is told what the file holds."""
    state_dir, ledger, _ = home
    change(ledger, f"UPDATE {TABLE} SET {column} = {2**63 - 1} WHERE session_id = "
                   f"(SELECT session_id FROM {TABLE} GROUP BY session_id HAVING count(*) > 1 LIMIT 1)")
    not_read(state_dir, "holds figures too large to add up: not checked")


def hold_lock(ledger: Path, ready: threading.Event, release: threading.Event, *, exclusive_wal: bool):
    """Another program writing the ledger: an exclusive lock held until `release`."""
    connection = sqlite3.connect(ledger, isolation_level=None, check_same_thread=False)
    try:
        if exclusive_wal:
            connection.execute("PRAGMA locking_mode = EXCLUSIVE")
        else:
            connection.execute("PRAGMA journal_mode = DELETE")
        connection.execute("BEGIN EXCLUSIVE")
        connection.execute(f"UPDATE {TABLE} SET duration_ms = 1 WHERE id = 1")
        if exclusive_wal:
            connection.execute("COMMIT")  # the WAL's exclusive lock outlives the transaction
        ready.set()
        release.wait(60)
    finally:
        connection.close()


@pytest.mark.parametrize("exclusive_wal", [False, True], ids=["begin-exclusive", "wal-exclusive-mode"])
def test_a_locked_ledger_is_waited_on_briefly_then_named(home, exclusive_wal):
    state_dir, ledger, _ = home
    ready, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=hold_lock, args=(ledger, ready, release),
                              kwargs={"exclusive_wal": exclusive_wal})
    holder.start()
    try:
        assert ready.wait(30)
        found, stderr = ledger_of("--state-dir", str(state_dir))
        assert found["status"] == "not_read"
        assert f"is busy (locked by another program for over {BUSY_TIMEOUT_S:g} s)" in found["problem"]
        with pytest.raises(LedgerProblem, match="is busy"):
            read_ledger(ledger)
    finally:
        release.set()
        holder.join(30)
    assert ledger_of("--state-dir", str(state_dir))[0]["status"] == "checked"


def test_a_lock_released_within_the_wait_is_waited_for(home):
    """The CLI's writes are short: one that ends within the wait does not cost the check."""
    _, ledger, _ = home
    ready, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=hold_lock, args=(ledger, ready, release),
                              kwargs={"exclusive_wal": False})
    holder.start()
    try:
        assert ready.wait(30)
        threading.Timer(BUSY_TIMEOUT_S / 4, release.set).start()
        assert len(read_ledger(ledger)) == SESSIONS
    finally:
        release.set()
        holder.join(30)


def test_a_fifo_at_the_ledgers_path_or_its_wal_is_refused_without_blocking(home):
    state_dir, ledger, _ = home
    wal = Path(f"{ledger}-wal")
    os.mkfifo(wal)
    not_read(state_dir, "session-store.db-wal is not a regular file")
    wal.unlink()
    ledger.unlink()
    os.mkfifo(ledger)
    not_read(state_dir, "(session-store.db) is not a regular file")
    ledger.unlink()
    ledger.mkdir()
    not_read(state_dir, "(session-store.db) is not a regular file")


def test_a_ledger_given_that_cannot_be_read_is_named_by_the_file_given(home, tmp_path):
    """`--ledger FILE` of a FIFO or of a damaged file: the line named the CLI's
    session-store.db, a file the user did not give (and may have, whole, beside the state
    folder). The file given is named."""
    state_dir, _, _ = home
    os.mkfifo(tmp_path / "pipe.db")
    (tmp_path / "copy.db").write_bytes(b"not a database, but a prompt someone saved here\n" * 100)
    for name, why in (("pipe.db", "is not a regular file"),
                      ("copy.db", "is damaged or not a SQLite database")):
        found, _ = ledger_of("--state-dir", str(state_dir), "--ledger", str(tmp_path / name))
        assert f"the CLI's ledger ({name}) {why}" in found["problem"], found


def test_a_symlink_is_followed_to_a_ledger_and_refused_to_anything_else(home, tmp_path):
    state_dir, ledger, _ = home
    real = tmp_path / "real.db"
    shutil.move(str(ledger), real)
    ledger.symlink_to(real)
    assert ledger_of("--state-dir", str(state_dir))[0]["sessions_checked"] == SESSIONS
    ledger.unlink()
    os.mkfifo(tmp_path / "fifo")
    ledger.symlink_to(tmp_path / "fifo")
    not_read(state_dir, "is not a regular file")
    ledger.unlink()
    ledger.symlink_to(tmp_path / "nothing")
    assert ledger_of("--state-dir", str(state_dir))[0]["status"] == "absent"
    ledger.unlink()
    ledger.symlink_to(ledger)
    not_read(state_dir, "cannot be read (Too many levels of symbolic links)")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_a_ledger_this_user_cannot_read(home):
    state_dir, ledger, _ = home
    ledger.chmod(0)
    not_read(state_dir, "cannot be read (Permission denied)")


# -- the reader itself ------------------------------------------------------------------------


def test_reading_changes_nothing_of_the_file(home):
    """Read-only: the ledger's bytes, its time, and the files beside it are as they were."""
    _, ledger, _ = home
    before = {path.name: (path.read_bytes(), path.stat().st_mtime_ns) for path in ledger.parent.iterdir()
              if path.is_file()}
    assert len(read_ledger(ledger)) == SESSIONS
    after = {path.name: (path.read_bytes(), path.stat().st_mtime_ns) for path in ledger.parent.iterdir()
             if path.is_file()}
    assert after == before


def test_a_ledger_in_a_folder_with_odd_characters_is_read(home, tmp_path):
    """The path goes into a SQLite URI: `?`, `#` and `%` must not end or escape it."""
    _, ledger, _ = home
    folder = tmp_path / "a?b#c%20d e"
    folder.mkdir()
    shutil.copy(ledger, folder / "session-store.db")
    assert len(read_ledger(folder / "session-store.db")) == SESSIONS


ROW = st.fixed_dictionaries({
    "session_id": st.sampled_from([A_UUID, "s-2", "s-3"]),
    "input_tokens": st.integers(0, 10**9), "output_tokens": st.integers(0, 10**6),
    "cache_read_tokens": st.none() | st.integers(0, 10**6),
    "cache_write_tokens": st.integers(0, 10**6),
    "total_nano_aiu": st.none() | st.integers(0, 10**12),
    "created_at": st.sampled_from(["2026-12-05T23:48:04.496Z", "2026-12-06 01:00:00", "garbage"]),
})


@settings(max_examples=60)
@given(st.lists(ROW, max_size=30))
def test_the_ledger_is_summed_per_session_as_its_rows_add_up(tmp_path_factory, rows):
    path = tmp_path_factory.mktemp("ledger") / "session-store.db"
    write_ledger(path, [dict(row, model="m") for row in rows])
    truth = {}
    for row in rows:
        usage, unknown = truth.get(row["session_id"], (Usage(), 0))
        usage += Usage(1, row["input_tokens"], row["output_tokens"], row["cache_read_tokens"] or 0,
                       row["cache_write_tokens"], row["total_nano_aiu"] or 0)
        truth[row["session_id"]] = usage, unknown + (row["total_nano_aiu"] is None)
    found = read_ledger(path)
    assert {sid: (session.usage, session.unknown_credits) for sid, session in found.items()} == truth
    assert all(isinstance(session, LedgerSession) for session in found.values())


def test_an_absent_ledger_is_none_and_a_layout_change_its_own_problem(tmp_path):
    assert read_ledger(tmp_path / "session-store.db") is None
    write_ledger(tmp_path / "session-store.db", [],
                 schema=cli_table_sql().replace("total_nano_aiu INTEGER,", ""))
    with pytest.raises(LedgerLayoutChanged, match="no column total_nano_aiu"):
        read_ledger(tmp_path / "session-store.db")


def test_a_ledger_the_cli_is_writing_is_read_by_two_reports_at_once(home):
    """The CLI appends a row per call while reports read (WAL: readers never wait for it):
    two reports at once each read a whole ledger, and the file is the CLI's still."""
    state_dir, ledger, sessions = home
    writer = subprocess.Popen([sys.executable, "-c", (
        "import sqlite3, sys, time\n"
        f"c = sqlite3.connect({str(ledger)!r}, isolation_level=None)\n"
        "print('writing', flush=True)\n"
        "while True:\n"
        f"    c.execute(\"INSERT INTO {TABLE} (session_id, model, input_tokens) VALUES "
        f"('{sessions['plain']}', 'm', 1)\")\n"
        "    time.sleep(0.001)\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "writing"
        reports = [subprocess.Popen([sys.executable, "-m", "tailer", "report", "--format", "json",
                                     "--state-dir", str(state_dir)], cwd=ROOT, env=tailer_env(),
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                   for _ in range(2)]
        for report in reports:
            out, err = report.communicate(timeout=120)
            assert report.returncode == 0 and err == "", err
            found = json.loads(out)["ledger"]
            assert found["status"] == "checked" and found["sessions_checked"] == SESSIONS
            (differs,) = found["differ"]  # the rows written so far, whole
            assert differs["session_id"] == sessions["plain"] and differs["cli"]["calls"] > 1
    finally:
        writer.kill()
        writer.wait()
    connection = sqlite3.connect(ledger)
    assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    connection.close()


@settings(max_examples=80)
@given(st.lists(st.tuples(st.integers(0, 1 << 16), st.binary(min_size=1, max_size=8)),
                min_size=1, max_size=6))
def test_any_damage_to_the_file_is_a_ledger_or_one_line(tmp_path_factory, damage):
    """The real CLI's ledger with bytes overwritten anywhere (its header, its pages): read,
    or refused with a LedgerProblem; never another exception."""
    folder = tmp_path_factory.mktemp("damaged")
    path = record.ledger_database(VERSION, folder)
    data = bytearray(path.read_bytes())
    for at, replacement in damage:
        at %= len(data)
        data[at:at + len(replacement)] = replacement
    path.write_bytes(bytes(data))
    try:
        found = read_ledger(path)
    except LedgerProblem as problem:
        assert "\n" not in str(problem) and str(problem).startswith("the CLI's ledger")
    else:
        assert found is not None and all(isinstance(s, LedgerSession) for s in found.values())
