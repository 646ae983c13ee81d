"""Keep the tailer's state in one file, so a restart resumes exactly where it stopped.

The state is one consistent cut of the whole pipeline, taken between two passes of the main
loop: every log's position, the turns still open, the fusion ids already
reported, the counter values, and the spans the collector has not accepted yet. Restoring
all of it together is what makes a crash harmless: the lines after the cut are read again
and counted again, from counters that had not counted them yet.

This module keeps the file: its lock, the heartbeat on it, the atomic save, the load and
the migration from older versions. What each part holds is its component's to say: each
writes its own part (`to_state`, `state`) and checks it when it is read back (its
`*_from_state`, gathered by the daemon in stages.Saved).

The file is replaced atomically (atomic_file.replace_file: a temporary file in the same
folder, flushed to disk, then renamed over the old one), so a crash while saving leaves the
previous cut intact.

A checkpoint may still be damaged (a bit flip, a hand edit, another program's file at its
path), and whatever `load` returns is trusted by every stage. So `load` opens only a
regular file, without blocking, refuses one above MAX_BYTES before reading it, and has
every field's type and range checked, each part by the component that saved it (the
reading stage's `sessions` by tailer/turns/session_state.py); anything else is a CheckpointError,
which the caller answers by moving the file aside and starting afresh rather than crashing
on it later.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from pathlib import Path
from typing import BinaryIO, Callable

if os.name == "nt":
    import msvcrt
else:
    import fcntl

from ..turns import session_state
from ..atomic_file import remove_killed_saves, replace_file
from ..private_files import another_users
from ..saved_state import mapping, sequence

VERSION = 4
HEARTBEAT_S = 10.0
# A checkpoint holds positions, the last fusion ids of each session, open turns and at most
# 10,000 unsent spans: some 40 MB for 10,000 sessions of 50 turns each with a full outbox.
# A file larger than this is not one we wrote, and is refused before it is read.
MAX_BYTES = 256 << 20

class CheckpointError(Exception):
    """The saved state cannot be used: unreadable, not ours, or from another version."""


class CheckpointInUse(Exception):
    """Another tailer holds the checkpoint, or may: its lock cannot be taken."""


def default_path(environ: dict[str, str], name: str = "checkpoint.json") -> Path:
    """$XDG_STATE_HOME/hydrafusion/NAME, else ~/.local/state/hydrafusion/NAME."""
    base = environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(base, "hydrafusion", name)


def claim(path: Path) -> BinaryIO | None:
    """Lock the checkpoint for this process; the lock lasts as long as the returned file is open.

    Two tailers on one checkpoint would each resume from the other's saves, counting turns
    twice or missing them, so a second one is refused (CheckpointInUse). The lock belongs to
    the operating system, which ends it with the process, `kill -9` included. Returns None
    when the lock file cannot be made with nothing in its way (a full disk; a folder not
    writable, refused at start by the command line): the checkpoint's own saves report that
    problem. Anything at the lock's path that is not a regular file we can open (a folder,
    a FIFO, a link, another user's file) is refused (CheckpointInUse): run unlocked, this
    tailer and another could share the checkpoint.

    A symlink at the lock's path is never followed (O_NOFOLLOW): one planted there, dangling
    or not, would make us create or touch the file it names.

    With the lock held no save of this checkpoint can be running, so the temporary files
    that saves killed before their rename left (`kill -9`, a machine that stopped) are
    removed: each can be as large as a checkpoint, and nothing else would ever remove them.
    """
    lock_path = _lock_path(path)
    # Whatever is there is opened without blocking or becoming our terminal: it is looked
    # at before it is used.
    flags = (os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
             | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0))
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(os.open(lock_path, flags, 0o600), "r+b")
    except OSError as error:
        try:
            found = os.lstat(lock_path)
        except OSError:
            return None
        raise _in_the_way(path, lock_path, found, error.strerror) from None
    # A FIFO opens, and flock takes it, but no tailer of ours made it.
    found = os.fstat(handle.fileno())
    if not stat.S_ISREG(found.st_mode):
        handle.close()
        raise _in_the_way(path, lock_path, found, None)
    try:
        if os.name == "nt":
            handle.seek(0)
            msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)
        else:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        handle.close()
        if os.name != "nt" and not isinstance(error, BlockingIOError):
            # Not held by another: a file system without locks (NFS without its lock daemon).
            raise CheckpointInUse(
                f"cannot lock the checkpoint {path}: {error.strerror}; give it a --checkpoint "
                "on a file system that has locks (a local one)"
            ) from None
        raise CheckpointInUse(
            f"another tailer is using the checkpoint {path}; give this one a --checkpoint "
            "of its own"
        ) from None
    remove_killed_saves(path)
    return handle


def _in_the_way(path: Path, lock_path: Path, found: os.stat_result,
                strerror: str | None) -> CheckpointInUse:
    if stat.S_ISLNK(found.st_mode):
        what = "is a symbolic link, never followed"
    elif stat.S_ISDIR(found.st_mode):
        what = "is a folder"
    elif stat.S_ISFIFO(found.st_mode):
        what = "is a FIFO"
    elif not stat.S_ISREG(found.st_mode):
        what = "is not a regular file"
    else:
        # A regular file that would not open: another user's (0600), or what the open said.
        what = another_users(found) or f"cannot be opened: {strerror}"
    return CheckpointInUse(f"cannot lock the checkpoint {path}: {lock_path} {what}; give this "
                           "tailer a --checkpoint of its own")


def _lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


def last_alive(path: Path) -> float | None:
    """When the last tailer on this checkpoint was last known alive (see `beat`), in Unix
    seconds; None when no tailer ever held it, or none saved it. Read it before `claim`.

    A lock with no checkpoint beside it is a first start's that was killed before its first
    save. It had shown Prometheus none of the counters a history covers (scrapes leave them
    out until the history is pushed, and saved: Registry.withhold), so it bounds nothing.
    Taken for alive until its lock's time + HEARTBEAT_S, it would put every past turn of
    the next start's history there: each past day 0, all of it in one spike.
    """
    try:
        os.stat(path)
    except FileNotFoundError:
        return None
    except OSError:
        pass  # there, but not for us to look at: `load` says so
    try:
        return os.stat(_lock_path(path)).st_mtime
    except OSError:
        return None


def beat(claimed: BinaryIO) -> None:
    """Note that this tailer is alive, on the lock file's modification time.

    A tailer killed with -9 cannot say when it stopped, and Prometheus may have scraped it
    until then; the next one must place no history sample before that (tailer/outputs/history.py).
    Touching the lock file every HEARTBEAT_S, from the moment its scrapes show the counters
    (service.Heartbeat), bounds that moment at no cost to the disk's data.
    """
    with contextlib.suppress(OSError, NotImplementedError):
        os.utime(claimed.fileno())


def save(path: Path, state: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_file(path, lambda out: _write({"version": VERSION, **state}, out), durable=True)


def _write(state: dict, out: BinaryIO) -> None:
    """json.dumps(state) into `out`, the spans waiting for the collector a trace at a time.

    They can be megabytes while a backfill outruns the collector, and the whole as one
    string (its pieces, their join, then its encoding) would hold them three times more:
    that was the peak memory of an exporting backfill. The rest is written by one
    json.dumps, which is several times faster than json.dump's Python encoder on the many
    small values of thousands of sessions.
    """
    def write(text: str) -> None:
        out.write(text.encode("ascii"))  # json.dumps escapes everything else

    pending = state.get("pending")
    if not pending:
        write(json.dumps(state, separators=(",", ":")))
        return
    rest = {key: value for key, value in state.items() if key != "pending"}
    write(json.dumps(rest, separators=(",", ":"))[:-1] + ',"pending":[')
    for number, trace in enumerate(pending):
        write(("," if number else "") + json.dumps(trace, separators=(",", ":")))
    write("]}")


def load(path: Path, parts: Callable[[dict], object] = lambda state: state):
    """The saved state as `parts` reads it back (each component checking its own part:
    ValueError, KeyError or TypeError when damaged), or None when there is none yet;
    CheckpointError when it is unusable."""
    try:
        data = _read(path)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise CheckpointError(f"cannot read {path}: {error.strerror or error}") from error
    try:
        state = json.loads(data)
    except (ValueError, RecursionError) as error:
        raise CheckpointError(f"{path} is not a JSON checkpoint ({type(error).__name__})") from error
    if not isinstance(state, dict) or state.get("version") not in (2, 3, VERSION):
        raise CheckpointError(f"{path} is not a version {VERSION} checkpoint")
    try:
        if state["version"] == 2:
            state = _from_version_2(state)
        if state["version"] == 3:
            state = _from_version_3(state)
        _check(state)
        return parts(state)
    except (KeyError, TypeError, ValueError, RecursionError) as error:
        raise CheckpointError(f"{path} is damaged ({type(error).__name__}: {error})") from error


def _read(path: Path) -> bytes:
    """The bytes of a regular file of at most MAX_BYTES, else CheckpointError, never blocking.

    O_NONBLOCK makes opening a FIFO return at once (and a read of one too); the checks on
    the open file then refuse it, a device (a link to /dev/zero would never end) or a file
    too large to be ours, before anything is read.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    with open(os.open(path, flags | getattr(os, "O_BINARY", 0)), "rb") as handle:
        status = os.fstat(handle.fileno())
        if not stat.S_ISREG(status.st_mode):
            raise CheckpointError(f"{path} is not a regular file")
        too_large = CheckpointError(f"{path} is larger than {MAX_BYTES >> 20} MiB")
        if status.st_size > MAX_BYTES:
            raise too_large
        data = handle.read(MAX_BYTES + 1)  # it may have grown since
        if len(data) > MAX_BYTES:
            raise too_large
        return data


def _from_version_2(state: dict) -> dict:
    """Version 2 kept a digest of a log's first bytes; its positions carry on unchecked
    until the next read, which takes the digest that version 3 keeps."""
    sessions = {}
    for session_id, saved in mapping(state["sessions"], "sessions").items():
        saved = dict(mapping(saved, "a session"))
        saved["position"] = [saved.pop("offset"), saved.pop("line"), 0, ""]
        saved.pop("identity", None)
        sessions[session_id] = saved
    return {**state, "version": 3, "sessions": sessions}


def _from_version_3(state: dict) -> dict:
    """Version 3 took a model call's `cost`, a price multiplier, for its credits: the
    credits of the calls it kept, and of the ledgers that summed them, are unknown."""
    sessions = {}
    for session_id, saved in mapping(state["sessions"], "sessions").items():
        saved = dict(mapping(saved, "a session"))
        saved["open"] = [_without_call_credits(turn)
                         for turn in sequence(saved["open"], "a session's open turns")]
        context = saved.get("context")
        if context is not None:
            context = dict(mapping(context, "a session's context"))
            for ledger in ("run", "log"):
                models = context[ledger]
                context[f"{ledger}_unpriced"] = list(mapping(models, "a ledger")) if models else []
            saved["context"] = context
        sessions[session_id] = saved
    return {**state, "version": VERSION, "sessions": sessions}


def _without_call_credits(turn: dict) -> dict:
    records = []
    for record in sequence(mapping(turn, "an open turn")["records"], "an open turn's records"):
        if mapping(record, "a record").get("kind") == "ModelCall":
            usage = {**mapping(record["usage"], "a call's usage"), "nano_aiu": 0}
            record = {**record, "usage": usage, "credits_known": False}
        records.append(record)
    return {**turn, "records": records}

def _check(state: dict) -> None:
    """Raise on anything not shaped as `save` writes it, naming the field, never its value.

    Every stage trusts what it restores, so a value of the wrong type or range here would
    crash every start (an offset of "10"), or worse, be exported. The other parts are
    checked by the components that read them back (`load`'s `parts`).
    """
    session_state.check(state)
