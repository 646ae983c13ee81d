"""Keep the tailer's state in one file, so a restart resumes exactly where it stopped.

The state is one consistent cut of the whole pipeline, taken between two passes of the main
loop: every log's position, the turns still open, the fusion ids already
reported, the counter values, and the spans the collector has not accepted yet. Restoring
all of it together is what makes a crash harmless: the lines after the cut are read again
and counted again, from counters that had not counted them yet.

The file is replaced atomically (a temporary file in the same folder, flushed to disk, then
renamed over the old one), so a crash while saving leaves the previous cut intact.

A checkpoint may still be damaged (a bit flip, a hand edit, another program's file at its
path), and whatever `load` returns is trusted by every stage. So `load` opens only a
regular file, without blocking, refuses one above MAX_BYTES before reading it, and checks
every field's type and range; anything else is a CheckpointError, which the caller answers
by moving the file aside and starting afresh rather than crashing on it later. The reading
stage's part (`sessions`) is checked where it is made, by tailer/session_state.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO

if os.name == "nt":
    import msvcrt
else:
    import fcntl

from . import session_state
from .checks import dict_of as _dict
from .checks import list_of as _list
from .checks import number as _number
from .checks import text as _text
from .checks import whole as _int
from .exposition import ZERO_HOLD_SECONDS
from .lines import Position

VERSION = 4
HEARTBEAT_S = 10.0
# A checkpoint holds positions, the last fusion ids of each session, open turns and at most
# 10,000 unsent spans: some 40 MB for 10,000 sessions of 50 turns each with a full outbox.
# A file larger than this is not one we wrote, and is refused before it is read.
MAX_BYTES = 256 << 20

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
    with contextlib.suppress(OSError, NotImplementedError):
        os.utime(claimed.fileno())


def save(path: Path, state: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as temp:
            _write({"version": VERSION, **state}, temp)
            temp.flush()
            os.fsync(temp.fileno())
        os.replace(temp_name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        raise


def _write(state: dict, out) -> None:
    """json.dumps(state) into `out`, the spans waiting for the collector a trace at a time.

    They can be megabytes while a backfill outruns the collector, and the whole as one
    string (its pieces, their join, then its encoding) would hold them three times more:
    that was the peak memory of an exporting backfill. The rest is written by one
    json.dumps, which is several times faster than json.dump's Python encoder on the many
    small values of thousands of sessions.
    """
    pending = state.get("pending")
    if not pending:
        out.write(json.dumps(state, separators=(",", ":")))
        return
    rest = {key: value for key, value in state.items() if key != "pending"}
    out.write(json.dumps(rest, separators=(",", ":"))[:-1] + ',"pending":[')
    for number, trace in enumerate(pending):
        out.write(("," if number else "") + json.dumps(trace, separators=(",", ":")))
    out.write("]}")


def load(path: Path) -> dict | None:
    """The saved state, or None when there is none yet; CheckpointError when it is unusable."""
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
    except (KeyError, TypeError, ValueError, RecursionError) as error:
        raise CheckpointError(f"{path} is damaged ({type(error).__name__}: {error})") from error
    return state


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
    for session_id, saved in _dict(state["sessions"], "sessions").items():
        saved = dict(_dict(saved, "a session"))
        saved["position"] = [saved.pop("offset"), saved.pop("line"), 0, ""]
        saved.pop("identity", None)
        sessions[session_id] = saved
    return {**state, "version": 3, "sessions": sessions}


def _from_version_3(state: dict) -> dict:
    """Version 3 took a model call's `cost`, a price multiplier, for its credits: the
    credits of the calls it kept, and of the ledgers that summed them, are unknown."""
    sessions = {}
    for session_id, saved in _dict(state["sessions"], "sessions").items():
        saved = dict(_dict(saved, "a session"))
        saved["open"] = [_without_call_credits(turn)
                         for turn in _list(saved["open"], "a session's open turns")]
        context = saved.get("context")
        if context is not None:
            context = dict(_dict(context, "a session's context"))
            for ledger in ("run", "log"):
                models = context[ledger]
                context[f"{ledger}_unpriced"] = list(_dict(models, "a ledger")) if models else []
            saved["context"] = context
        sessions[session_id] = saved
    return {**state, "version": VERSION, "sessions": sessions}


def _without_call_credits(turn: dict) -> dict:
    records = []
    for record in _list(_dict(turn, "an open turn")["records"], "an open turn's records"):
        if _dict(record, "a record").get("kind") == "ModelCall":
            usage = {**_dict(record["usage"], "a call's usage"), "nano_aiu": 0}
            record = {**record, "usage": usage, "credits_known": False}
        records.append(record)
    return {**turn, "records": records}


def _check(state: dict) -> None:
    """Raise on anything not shaped as `save` writes it, naming the field, never its value.

    Every stage trusts what it restores, so a value of the wrong type or range here would
    crash every start (an offset of "10"), or worse, be exported.
    """
    session_state.check(state)
    for rows in _dict(state["metrics"], "metrics").values():
        for row in _list(rows, "a metric's series"):
            _metric_series(row)
    for trace in _list(state["pending"], "the pending spans"):
        _pending_trace(trace)
    if state.get("history") is not None:
        _history(state["history"])
    if state.get("cli") is not None:
        _cli(state["cli"])
    if "published_at_ms" in state:
        _int(state["published_at_ms"], "the time of the save")


def _metric_series(row: object) -> None:
    """[label values, value, zero pending, seconds of zero left], as Registry.snapshot gives."""
    if type(row) is not list or len(row) != 4:
        raise ValueError("a metric series is not a list of 4")
    labels, value, pending, hold_left = row
    for label in _list(labels, "a series' label values"):
        _text(label, "a label value")
    if type(value) is dict:  # a histogram's
        if set(value) != {"buckets", "sum"}:
            raise ValueError("a histogram's value is not its buckets and sum")
        for count in _list(value["buckets"], "a histogram's buckets"):
            _int(count, "a bucket's count")
        _metric_value(value["sum"], "a histogram's sum")
    else:
        _metric_value(value, "a series' value")
    if type(pending) is not bool:
        raise ValueError("a series' zero first state is not true or false")
    _number(hold_left, "a series' zero hold", 0, ZERO_HOLD_SECONDS)


def _metric_value(value: object, what: str) -> None:
    """A counter's or a histogram sum's exact whole number (exposition._exact: credits in
    nano units, so larger than int64 can hold), or a value as shown (a gauge, version 2)."""
    if type(value) is int:
        _int(value, what, _EXACT_BOUND, -_EXACT_BOUND)
    else:
        _number(value, what)


def _pending_trace(trace: object) -> None:
    """{"trace_id": hex, "spans": [OTLP/JSON text of each span]}, as the outbox keeps them.

    Each span's text is sent as it is, so one that is not a JSON object of its trace would
    make the collector refuse a whole batch.
    """
    trace_id = _text(_dict(trace, "a pending trace")["trace_id"], "a pending trace's id")
    if len(trace_id) != 32 or trace_id.strip("0123456789abcdef"):
        raise ValueError("a pending trace's id is not 32 hex digits")
    for span in _list(trace["spans"], "a pending trace's spans"):
        span = json.loads(_text(span, "a pending span", None))
        if type(span) is not dict or span.get("traceId") != trace_id:
            raise ValueError("a pending span is not a span of its trace")


def _cli(cli: object) -> None:
    """The CLI telemetry's side (service.CliTelemetry.state): each export file's position,
    and its span and metric units not delivered yet, as outboxes keep them."""
    for name, position in _dict(_dict(cli, "the CLI telemetry")["files"],
                                "the CLI export files").items():
        _text(name, "a CLI export file", None)
        Position.from_data(position)
    for signal in ("spans", "metrics"):
        for unit in _list(cli[signal], "the CLI's pending units"):
            _text(_dict(unit, "a CLI unit")["trace_id"], "a CLI unit's key")
            for text in _list(unit["spans"], "a CLI unit's entries"):
                if type(json.loads(_text(text, "a CLI unit's entry", None))) is not dict:
                    raise ValueError("a CLI unit is not a JSON object")


def _history(history: object) -> None:
    """The history not pushed yet, as tailer.history's History.state gives it."""
    _dict(history, "the history")
    _int(history["not_before_ms"], "the history's first time")
    _int(history["cutoff_ms"], "the history's last time")
    for key, base in _dict(history["bases"], "the history's bases").items():
        _history_key(key)
        _int(base, "a history base", _EXACT_BOUND)
    divisors = _dict(history["divisors"], "the history's divisors")
    for key, changes in _dict(history["changes"], "the history's changes").items():
        _history_key(key)
        _int(divisors[key], "a history series' divisor", _EXACT_BOUND, 1)
        for change in _list(changes, "a series' history"):
            if type(change) is not list or len(change) != 2:
                raise ValueError("a history change is not [time, amount]")
            _int(change[0], "a history change's time")
            _int(change[1], "a history change's amount", _EXACT_BOUND)


def _history_key(key: str) -> None:
    """[metric name, [[label, value], ...]] as JSON text."""
    name, labels = json.loads(key)
    _text(name, "a history series' name")
    for pair in _list(labels, "a history series' labels"):
        if type(pair) is not list or len(pair) != 2:
            raise ValueError("a history series' label is not [name, value]")
        _text(pair[0], "a history label"), _text(pair[1], "a history label value")


# A metric's exact value is that many units of 1/1e9 (exposition._exact).
_EXACT_BOUND = 2**63 * 10**9
