"""The Copilot CLI's own ledger of model calls: `session-store.db`, beside the state folder.

The CLI (1.0.102 and later, offline too) keeps a SQLite database in `$COPILOT_HOME` (the
folder that holds `session-state`) with one row per model call in `assistant_usage_events`.
Its `/usage` reads it, and so do peers: it is the figure a user compares ours with, and it
holds the calls of sessions whose log lost them. The same file holds the user's prompts
(`sessions.summary`, `turns`), the conversation's full text (`search_index*`) and file
paths (`session_files`), so this module reads it narrowly:

- read-only, through SQLite's own read-only open (`mode=ro`), never written, never
  checkpointed, with `trusted_schema` off so nothing the file defines runs as we read; a
  database in WAL mode without its `-wal` (no program has it open) as an unchanging file
  (`immutable`), since SQLite would make a `-wal` and a `-shm` to read it otherwise;
- from `assistant_usage_events` only, and of it only the named columns of COLUMNS, summed
  per session in SQL (a month's 22,000 rows come back as 220, in some 11 ms of CPU);
- a regular file only (SQLite's open of a FIFO blocks for good), with its `-wal` and
  `-shm` beside it regular files too, or absent;
- a busy file (the CLI writing) waited on for BUSY_TIMEOUT_S, then left unread.

What comes out is numbers and session ids; an id is named only where it looks like the
CLI's (SESSION_ID), so no other text a crafted file could put there reaches an output.
Anything wrong is LedgerProblem, whose message is one line naming the file by its name.
"""

from __future__ import annotations

import os
import re
import stat
from datetime import datetime, timezone
from pathlib import Path
from typing import Collection

from ..path_options import NO_LEDGER, check_input_file
from ..printable import printable
from ..records import record
from .event_records import Usage

LEDGER_NAME = "session-store.db"
TABLE = "assistant_usage_events"
# The columns read: the session, the call's figures, when it was made. Every one is a
# number or an id; the table's other columns (the model, the agent, token details as JSON)
# are not read.
COLUMNS = ("session_id", "input_tokens", "output_tokens", "cache_read_tokens",
           "cache_write_tokens", "total_nano_aiu", "created_at")
# Each session's calls summed, in one pass over the table's index by session. SQLite's
# sum() is an integer only when every value summed is one (else a float: a figure of text,
# say), so a float, or a sum below 0, says the ledger holds what is not a count.
SUMS = (f"SELECT session_id, count(*), sum(input_tokens), sum(output_tokens), "
        f"sum(cache_read_tokens), sum(cache_write_tokens), sum(total_nano_aiu), "
        f"count(total_nano_aiu) FROM {TABLE} GROUP BY session_id")
# When some sessions' calls were made: asked of the few that need it (comparing the times
# as well took as long again as the sums over a month).
TIMES = f"SELECT session_id, min(created_at), max(created_at) FROM {TABLE} WHERE session_id IN "
_TIMES_AT_ONCE = 500  # ids in one query: older SQLite takes at most 999 parameters
BUSY_TIMEOUT_S = 1.0
# The CLI's session ids are UUIDs: an id of another shape is counted, never shown.
SESSION_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.ASCII)
# SQLite's primary result codes (an error's code with its extended bits masked off).
_BUSY, _LOCKED, _CORRUPT, _CANTOPEN, _NOTADB = 5, 6, 11, 14, 26
# What SQLite's sum() says, as a plain SQLITE_ERROR, of whole numbers past 2**63 together.
_SUM_OVERFLOW = "integer overflow"


class LedgerProblem(Exception):
    """The ledger is there but cannot be checked against; the message is one line."""


class LedgerLayoutChanged(LedgerProblem):
    """The ledger is a database without the table or columns read: another CLI version's."""


@record(frozen=True, slots=True)
class LedgerSession:
    """What the ledger holds of one session's calls: their figures summed (`usage`, its
    credits those of the calls the CLI knows them of), the calls of unknown credits
    (total_nano_aiu null), and when the first and last were made (unix ns; None when the
    ledger's time cannot be read)."""

    usage: Usage
    unknown_credits: int
    first_ns: int | None
    last_ns: int | None


def ledger_beside(state_dir: Path) -> Path:
    """Where the CLI keeps its ledger: in the folder that holds the state folder
    (`$COPILOT_HOME`, else ~/.copilot), and so beside any state folder given."""
    return state_dir.parent / LEDGER_NAME


def chosen_ledger(given: Path | str | None, state_dir: Path) -> Path | None:
    """The ledger `--ledger` names (path_options.ledger_path; None: `none`), by default the
    one beside the state folder. ValueError with the reason when a ledger given is not
    there or is a folder: a user who names a file means it."""
    if given is None:
        return ledger_beside(state_dir)
    if given == NO_LEDGER:
        return None
    check_input_file("--ledger", given)
    return given


def read_ledger(path: Path, untimed: Collection = ()) -> dict[object, LedgerSession] | None:
    """Each session's calls in the ledger at `path`, by session id (as the ledger writes it:
    any text, or another type); None when there is no file there. When its calls were made
    is read only for the sessions not in `untimed` whose ids are of the CLI's shape
    (first_ns and last_ns None for the others). Raises LedgerProblem."""
    try:
        unchanging = _check_files(path)
    except FileNotFoundError:
        return None
    import sqlite3  # here: a report without a ledger does not pay for it

    try:
        connection = sqlite3.connect(_read_only_uri(path, unchanging), uri=True,
                                     timeout=BUSY_TIMEOUT_S, isolation_level=None)
    except sqlite3.Error as error:
        raise _problem(path, error) from None
    # Text as the file holds it, bytes that are not UTF-8 escaped as a folder's name is
    # (a session id, a column's name): a damaged file is no reason to fail.
    connection.text_factory = _text
    try:
        connection.execute("PRAGMA trusted_schema = OFF")
        _check_layout(path, connection)
        sums = connection.execute(SUMS).fetchall()
        # Only ids of the CLI's shape are asked back: another (text that was not UTF-8,
        # escaped above) could not be sent as a parameter, and is counted, never named.
        timed = [row[0] for row in sums if row[0] not in untimed
                 and type(row[0]) is str and SESSION_ID.fullmatch(row[0])]
        times = {}
        for at in range(0, len(timed), _TIMES_AT_ONCE):
            ids = timed[at:at + _TIMES_AT_ONCE]
            marks = ", ".join("?" * len(ids))
            found = connection.execute(f"{TIMES}({marks}) GROUP BY session_id", ids)
            times.update((session_id, (first, last)) for session_id, first, last in found)
    # SQLite's message about a damaged schema quotes it, and may not be UTF-8 then.
    except (sqlite3.Error, UnicodeDecodeError) as error:
        raise _problem(path, error) from None
    finally:
        connection.close()
    return {row[0]: _session(path, row, *times.get(row[0], (None, None))) for row in sums}


def _named(path: Path) -> str:
    """The ledger as a line names it: by the name of its file, the CLI's session-store.db
    or the one a user gave with --ledger."""
    return f"the CLI's ledger ({printable(path.name)})"


def _text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def _check_files(path: Path) -> bool:
    """The ledger must be a SQLite database in a regular file (SQLite's open of a FIFO
    blocks for good), and its -wal and -shm, which SQLite opens too, regular files or
    absent. Whether
    nothing but the file holds the ledger now: a database in WAL mode without a -wal (no
    program has it open), which SQLite would otherwise make a -wal and a -shm for, even
    to read it, and leave behind. FileNotFoundError when there is no ledger."""
    fd = _open(path)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise LedgerProblem(f"{_named(path)} is not a regular file: not read")
        header = os.read(fd, 100)
    except OSError as error:
        raise _file_problem(path, error) from None
    finally:
        os.close(fd)
    if not header.startswith(b"SQLite format 3\0") or len(header) < 100:
        raise LedgerProblem(f"{_named(path)} is damaged or not a SQLite database: not checked")
    found = {}
    for suffix in ("-wal", "-shm"):
        try:
            found[suffix] = os.stat(f"{os.fspath(path)}{suffix}")
        except FileNotFoundError:
            continue
        except OSError as error:
            raise _file_problem(path, error) from None
        if not stat.S_ISREG(found[suffix].st_mode):
            raise LedgerProblem(f"the CLI's ledger's {printable(path.name)}{suffix} is not a "
                                "regular file: not read")
    # Bytes 18 and 19 of the header: the versions that write and read it, 2 in WAL mode.
    return header[18:20] == b"\2\2" and "-wal" not in found


def _open(path: Path) -> int:
    """The ledger opened to look at what it is, without blocking on a FIFO."""
    try:
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
        return os.open(path, flags)
    except (FileNotFoundError, NotADirectoryError):
        raise FileNotFoundError(path) from None
    except OSError as error:
        raise _file_problem(path, error) from None


def _file_problem(path: Path, error: OSError) -> LedgerProblem:
    reason = error.strerror or type(error).__name__
    return LedgerProblem(f"{_named(path)} cannot be read ({reason}): not checked")


def _read_only_uri(path: Path, unchanging: bool) -> str:
    """A SQLite URI opening `path` read-only (`unchanging`: as a file no program is
    writing, so without a -wal and a -shm). `?` and `#` end a URI's path and `%` starts an
    escape, so those are escaped; the path is absolute, so `file://` has no authority."""
    absolute = os.path.abspath(path)
    if os.name == "nt":
        absolute = "/" + absolute.replace("\\", "/")
    escaped = absolute.replace("%", "%25").replace("?", "%3f").replace("#", "%23")
    return f"file://{escaped}?mode=ro" + ("&immutable=1" if unchanging else "")


def _check_layout(path: Path, connection) -> None:
    """The table and the columns read, or LedgerLayoutChanged naming what is missing."""
    found = connection.execute("SELECT type FROM sqlite_master WHERE name = ?", (TABLE,)).fetchall()
    if found != [("table",)]:
        raise LedgerLayoutChanged(f"{_named(path)} has no table {TABLE} "
                                  "(another CLI version's layout): not checked")
    columns = {row[1] for row in connection.execute(f"PRAGMA table_info({TABLE})")}
    missing = [name for name in COLUMNS if name not in columns]
    if missing:
        raise LedgerLayoutChanged(f"{_named(path)} has no column "
                                  f"{', '.join(missing)} in {TABLE} (another CLI version's "
                                  "layout): not checked")


def _problem(path: Path, error) -> LedgerProblem:
    """SQLite's error in our words: its own message may quote the file's contents."""
    code = (getattr(error, "sqlite_errorcode", None) or 0) & 0xFF
    if isinstance(error, UnicodeDecodeError):
        code = _CORRUPT
    if code in (_BUSY, _LOCKED):
        why = f"is busy (locked by another program for over {BUSY_TIMEOUT_S:g} s)"
    elif code in (_CORRUPT, _NOTADB):
        why = "is damaged or not a SQLite database"
    elif code == _CANTOPEN:
        why = "cannot be opened read-only"
    elif str(error) == _SUM_OVERFLOW:
        why = "holds figures too large to add up"
    else:
        why = f"cannot be read ({getattr(error, 'sqlite_errorname', None) or type(error).__name__})"
    return LedgerProblem(f"{_named(path)} {why}: not checked")


def _session(path: Path, row: tuple, first: object, last: object) -> LedgerSession:
    _, calls, *figures, priced = row
    if any(type(figure) is not int or figure < 0 for figure in figures if figure is not None):
        raise LedgerProblem(f"{_named(path)} holds figures that are not whole numbers: "
                            "not checked")
    usage = Usage(calls, *(figure or 0 for figure in figures))  # in SUMS's order, Usage's
    return LedgerSession(usage, calls - priced, _time_ns(first), _time_ns(last))


def _time_ns(text: object) -> int | None:
    """The ledger's `created_at` (ISO 8601, `2026-12-05T23:48:04.496Z`) in unix ns."""
    if type(text) is not str:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:  # SQLite's own datetime('now') is UTC and says no zone
        moment = moment.replace(tzinfo=timezone.utc)
    return round(moment.timestamp() * 1e9)
