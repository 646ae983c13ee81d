"""Keep the tailer's state in one file, so a restart resumes exactly where it stopped.

The state is one consistent cut of the whole pipeline, taken between two passes of the main
loop: every log's position, the turns still open, the fusion ids already
reported, the counter values, and the spans the collector has not accepted yet. Restoring
all of it together is what makes a crash harmless: the lines after the cut are read again
and counted again, from counters that had not counted them yet.

The file is replaced atomically (a temporary file in the same folder, flushed to disk, then
renamed over the old one), so a crash while saving leaves the previous cut intact.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import tempfile
from pathlib import Path
from typing import BinaryIO

if os.name == "nt":
    import msvcrt
else:
    import fcntl

from . import events
from .lines import Position
from .turns import SessionContext, Turn

VERSION = 3
HEARTBEAT_S = 10.0

_RECORD_TYPES = {
    cls.__name__: cls
    for cls in (events.Resolved, events.LegEnded, events.Handoff, events.CommitStarted,
                events.Completed, events.RouteFailed, events.ModelCall, events.ToolStarted,
                events.ToolCompleted, events.Prompt)
}


class CheckpointError(Exception):
    """The saved state cannot be used: unreadable, not ours, or from another version."""


class CheckpointInUse(Exception):
    """Another tailer holds the checkpoint."""


def default_path(environ: dict[str, str], name: str = "checkpoint.json") -> Path:
    """$XDG_STATE_HOME/hydrafusion/NAME, else ~/.local/state/hydrafusion/NAME."""
    base = environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(base, "hydrafusion", name)


def claim(path: Path) -> BinaryIO | None:
    """Lock the checkpoint for this process; the lock lasts as long as the returned file is open.

    Two tailers on one checkpoint would each resume from the other's saves, counting turns
    twice or missing them, so a second one is refused (CheckpointInUse). The lock belongs to
    the operating system, which ends it with the process, `kill -9` included. Returns None
    when the lock file cannot be made: the checkpoint's own saves report that problem.
    """
    lock_path = _lock_path(path)
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(lock_path, "a+b")
    except OSError:
        return None
    try:
        if os.name == "nt":
            handle.seek(0)
            msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)
        else:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise CheckpointInUse(
            f"another tailer is using the checkpoint {path}; give this one a --checkpoint "
            "of its own"
        ) from None
    return handle


def _lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


def last_alive(path: Path) -> float | None:
    """When the last tailer on this checkpoint was last known alive (see `beat`), in Unix
    seconds; None when no tailer ever held it. Read it before `claim`."""
    try:
        return os.stat(_lock_path(path)).st_mtime
    except OSError:
        return None


def beat(claimed: BinaryIO) -> None:
    """Note that this tailer is alive, on the lock file's modification time.

    A tailer killed with -9 cannot say when it stopped, and Prometheus may have scraped it
    until then; the next one must place no history sample before that (tailer/history.py).
    Touching the lock file every HEARTBEAT_S bounds that moment at no cost to the disk's
    data.
    """
    with contextlib.suppress(OSError):
        os.utime(claimed.fileno())


def save(path: Path, state: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as temp:
            temp.write(json.dumps({"version": VERSION, **state}, separators=(",", ":")))
            temp.flush()
            os.fsync(temp.fileno())
        os.replace(temp_name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        raise


def load(path: Path) -> dict | None:
    """The saved state, or None when there is none yet."""
    try:
        with open(path, encoding="utf-8") as handle:
            state = json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise CheckpointError(f"cannot read {path}: {error}") from error
    if not isinstance(state, dict) or state.get("version") not in (2, VERSION):
        raise CheckpointError(f"{path} is not a version {VERSION} checkpoint")
    try:
        if state["version"] == 2:
            state = _from_version_2(state)
        _check(state)
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise CheckpointError(f"{path} is damaged ({type(error).__name__}: {error})") from error
    return state


def _from_version_2(state: dict) -> dict:
    """Version 2 kept a digest of a log's first bytes; its positions carry on unchecked
    until the next read, which takes the digest that version 3 keeps."""
    sessions = {}
    for session_id, saved in dict(state["sessions"]).items():
        saved = dict(saved)
        saved["position"] = [saved.pop("offset"), saved.pop("line"), 0, ""]
        saved.pop("identity", None)
        sessions[session_id] = saved
    return {**state, "version": VERSION, "sessions": sessions}


def _check(state: dict) -> None:
    """Raise on a checkpoint that is not shaped as `save` writes them (a hand edit, say)."""
    for saved in state["sessions"].values():
        Position.from_data(saved["position"]), list(saved["finished"])
        float(saved.get("gone_at", 0.0))
        for turn in saved["open"]:
            turn_from_data(turn)
        context_from_data(saved.get("context"))
    dict(state["metrics"])
    for trace in state["pending"]:
        str(trace["trace_id"]), [str(span) for span in trace["spans"]]


def turn_to_data(turn: Turn) -> dict:
    records = [turn.resolved, turn.commit, turn.completed, turn.route_failure, turn.prompt]
    records += turn.legs + turn.handoffs + turn.calls + turn.tool_events
    data = {
        "session": turn.session_id,
        "fusion": turn.fusion_id,
        "records": [_record_to_data(r) for r in records if r],
    }
    if turn.ordinary:
        data["ordinary"] = True
    return data


def turn_from_data(data: dict) -> Turn:
    turn = Turn(data["session"], data["fusion"], ordinary=bool(data.get("ordinary")))
    for record in map(_record_from_data, data["records"]):
        if isinstance(record, events.LegEnded):
            turn.legs.append(record)
        elif isinstance(record, events.Handoff):
            turn.handoffs.append(record)
        elif isinstance(record, events.ModelCall):
            turn.calls.append(record)
        elif isinstance(record, (events.ToolStarted, events.ToolCompleted)):
            turn.tool_events.append(record)
        elif isinstance(record, events.Prompt):
            turn.prompt = record
        elif isinstance(record, events.Resolved):
            turn.resolved = record
        elif isinstance(record, events.CommitStarted):
            turn.commit = record
        elif isinstance(record, events.Completed):
            turn.completed = record
        elif isinstance(record, events.RouteFailed):
            turn.route_failure = record
    return turn


def context_to_data(context: SessionContext) -> dict:
    """A session's context (see turns.SessionContext) as the checkpoint keeps it."""
    return {
        "current": context.current,
        "awaiting_prompt": context.awaiting_prompt,
        "run": _ledger_to_data(context.run),
        "log": _ledger_to_data(context.log),
    }


def context_from_data(data: dict | None) -> SessionContext:
    """None (a checkpoint written before contexts were kept) gives an empty context."""
    if data is None:
        return SessionContext()
    return SessionContext(
        current=_optional_text(data["current"]),
        awaiting_prompt=_optional_text(data["awaiting_prompt"]),
        run=_ledger_from_data(data["run"]),
        log=_ledger_from_data(data["log"]),
    )


def _ledger_to_data(ledger: dict[str, events.Usage] | None) -> dict | None:
    if ledger is None:
        return None
    return {model: dataclasses.asdict(usage) for model, usage in ledger.items()}


def _ledger_from_data(data: dict | None) -> dict[str, events.Usage] | None:
    if data is None:
        return None
    return {str(model): events.Usage(**usage) for model, usage in data.items()}


def _optional_text(value: object) -> str | None:
    return None if value is None else str(value)


def _record_to_data(record: events.Event) -> dict:
    return {"kind": type(record).__name__, **dataclasses.asdict(record)}


def _record_from_data(data: dict) -> events.Event:
    values = dict(data)
    cls = _RECORD_TYPES[values.pop("kind")]
    if "usage" in values:
        values["usage"] = events.Usage(**values["usage"])
    if "tool_requests" in values:
        values["tool_requests"] = tuple(values["tool_requests"])
    values["unknown_fields"] = tuple(values.get("unknown_fields", ()))
    values["missing_fields"] = tuple(values.get("missing_fields", ()))
    return cls(**values)
