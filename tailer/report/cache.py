"""The report's cache: what reading each session log gave, so the next report reads only the
bytes appended since.

One file per state folder, in `$XDG_CACHE_HOME/hydrafusion/report/` (else
`~/.cache/hydrafusion/report/`), named by checksums of the folder's path: the path itself is
written nowhere. The folder is made 0700 and the file 0600. Per session log it holds a
`LogEntry`:

- the log's identity when it was read (device, inode, size, modification time) and when
  that was looked at;
- where reading stopped and the open turns there, in the daemon's own saved form
  (tailer/turns/session_state.py): the position with the digest of the bytes before it,
  the open turns' records, the keys of the finished turns, the ledgers; kept as its JSON,
  parsed only where the log is read on;
- the rows of the turns it finished (figures.turn_data, in no time zone), the rows its open
  turns give when finished as they stand, the CLI's totals checked, the damaged lines.

Metadata only: what the report's JSON shows and what the daemon's checkpoint keeps.

The file is a header line (what it is, the tailer's version, the cache format, the length
of the entries, the CRC-32 of the rest); the entries as one JSON object, in which each
log's state and each turn's JSON as the report prints it (figures.TurnJson, with its model
calls and tools most of the bytes) are there by their lengths only; then those texts one
after another, an entry's state first. Loading it is one parse of the entries and a read
of each text, never parsed, and a log is then looked at with one stat: a warm report of
thousands of sessions costs little more than listing them. A file that cannot be read, is damaged
(its CRC says so, whatever the damage) or comes from another version is ignored with
one line on stderr and made again. It is replaced in one step (tailer/atomic_file.py), so
two reports at once each read a whole file; the last to finish wins, and each file is
right, since every entry is checked against its log before it is trusted.

Bounded: sessions no longer in the state folder are dropped; past MAX_BYTES, the sessions
whose logs changed longest ago are left out (and read from their start next time); past
MAX_FILES state folders, the file written longest ago is deleted.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
import zlib
from pathlib import Path

from ..records import record
from .. import __version__
from ..atomic_file import replace_file
from ..saved_state import mapping, sequence, whole
from .figures import PRINTED_AT

KIND = "hydrafusion report cache"
FORMAT = 5
MAX_BYTES = 128 << 20
MAX_FILES = 4
READ_BUFFER = 1 << 20
# A log modified this close before it was looked at may change again within the file
# system's time granularity, leaving the same time and size: it is checked by reading.
RECENT_NS = 2_000_000_000


def cache_file(environ: dict[str, str], state_dir: Path) -> Path | None:
    """Where the cache of `state_dir` lives; None when there is no home to put it in."""
    base = environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # the XDG rule: a relative value is ignored
        home = environ.get("HOME") or environ.get("USERPROFILE")
        if not home:
            return None
        base = os.path.join(home, ".cache")
    path = os.fsencode(state_dir.resolve())
    # Checksums are enough (and spare every report hashlib's OpenSSL): were two folders'
    # names the same, each report would find the other's sessions gone and drop them.
    name = f"{zlib.crc32(path):08x}{zlib.adler32(path):08x}"
    return Path(base, "hydrafusion", "report", f"{name}.json")


def identity(path: Path) -> tuple[list[int], int]:
    """The log's device, inode, size and modification time, and when they were looked at
    (taken first: a log changed after the look is newer than it). Raises OSError."""
    seen_ns = time.time_ns()
    found = os.stat(path)
    return [found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns], seen_ns


@record(slots=True)
class LogEntry:
    """What the report keeps of one session log; see the module docstring."""

    identity: list[int]  # device, inode, size, modification time (ns), before it was read
    seen_ns: int  # when the identity was looked at
    state: bytes  # the JSON of session_state.session_to_state: position, open turns, finished keys
    turns: list[list]  # the finished turns' rows (figures.turn_data)
    open_turns: list[list]  # the open turns' rows, finished as they stand
    checks: list[list]  # the CLI's totals checked (gather.check_data)
    damaged_lines: int

    def unchanged(self, now: list[int]) -> bool:
        """Whether the log is surely as it was when read, by its identity alone."""
        return now == self.identity and now[3] < self.seen_ns - RECENT_NS

    def to_data(self) -> tuple[list, list[str]]:
        """The entry as the cache writes it: its data, its state and each turn's TurnJson
        with its text replaced by the text's length, and those texts in order."""
        texts = [self.state, *(row[PRINTED_AT][0] for row in (*self.turns, *self.open_turns))]
        turns, open_turns = ([_with_text_length(row) for row in rows] for rows in (self.turns, self.open_turns))
        return [self.identity, self.seen_ns, len(self.state), turns, open_turns, self.checks,
                self.damaged_lines], texts

    @classmethod
    def from_data(cls, data: object) -> "LogEntry":
        """ValueError when `data` is not shaped as to_data writes it (its state is checked
        where it is read on: session_state.check). Its state and its turns' TurnJson texts
        are then their lengths, until load reads the texts."""
        values = sequence(data, "a cache entry")
        if len(values) != 7:
            raise ValueError("a cache entry is not a list of 7")
        found, seen_ns, state, turns, open_turns, checks, damaged = values
        if len(sequence(found, "a log's identity")) != 4:
            raise ValueError("a log's identity is not 4 numbers")
        for number in found:
            whole(number, "a log's identity")
        return cls(found, whole(seen_ns, "when a log was seen"), whole(state, "the length of a log's state"),
                   sequence(turns, "a log's turns"), sequence(open_turns, "a log's open turns"),
                   sequence(checks, "a log's checks"), whole(damaged, "a log's damaged lines"))


def load(path: Path) -> tuple[dict[str, LogEntry], str | None]:
    """The entries of the cache at `path`, and why it was ignored (None: it was not, or
    there is none yet)."""
    try:
        # A big buffer: the texts are read one at a time, most of them a few kB.
        with open(path, "rb", buffering=READ_BUFFER) as handle:
            return _read(handle)
    except FileNotFoundError:
        return {}, None
    except OSError as error:
        return {}, f"cannot be read ({error.strerror})"


def _read(handle) -> tuple[dict[str, LogEntry], str | None]:
    """The file read part by part, each turn's JSON text on its own: the file is never in
    memory whole beside what is made of it (a month's cache is some 50 MB). The CRC is
    known once all is read, so what a damaged file gave is then dropped."""
    try:
        head = mapping(json.loads(handle.readline()), "the cache's header")
    except ValueError:
        return {}, "is damaged"
    if head.get("kind") != KIND:
        return {}, "is damaged"
    if head.get("version") != __version__ or head.get("format") != FORMAT:
        return {}, "was written by another version of the tailer"
    try:
        # Every length is at most the bytes left: a damaged one may not ask for more memory.
        left = os.fstat(handle.fileno()).st_size - handle.tell()
        index_bytes = whole(head.get("index_bytes"), "the length of the cache's entries", left)
        index = handle.read(index_bytes)
        left -= index_bytes
        crc = zlib.crc32(index)
        sessions = mapping(json.loads(index), "the cache's sessions")
        entries = {session_id: LogEntry.from_data(entry) for session_id, entry in sessions.items()}
        for entry in entries.values():
            entry.state = handle.read(whole(entry.state, "the length of a log's state", left))
            left -= len(entry.state)
            crc = zlib.crc32(entry.state, crc)
            for row in (*entry.turns, *entry.open_turns):
                printed = sequence(sequence(row, "a cached turn")[PRINTED_AT], "a turn's JSON")
                length = whole(printed[0], "the length of a turn's JSON", left)
                printed[0] = handle.read(length)
                left -= length
                crc = zlib.crc32(printed[0], crc)
    except (ValueError, TypeError, IndexError):
        return {}, "is damaged"
    if handle.read(1) or f"{crc:08x}" != head.get("crc32"):
        return {}, "is damaged"
    return entries, None


def save(path: Path, entries: dict[str, LogEntry]) -> None:
    """Replace the cache at `path` with `entries` (at most MAX_BYTES of them); delete the
    caches of other state folders written longest ago, past MAX_FILES. Raises OSError."""
    pieces = {}  # session id -> its data's JSON, its turns' JSON texts
    for session_id, entry in entries.items():
        data, texts = entry.to_data()
        pieces[session_id] = f"{json.dumps(session_id)}:{json.dumps(data, separators=(',', ':'))}", texts
    size = sum(len(piece) + sum(map(len, texts)) for piece, texts in pieces.values())
    for session_id in sorted(entries, key=lambda session_id: entries[session_id].identity[3]):
        if size <= MAX_BYTES:
            break
        piece, texts = pieces.pop(session_id)
        size -= len(piece) + sum(map(len, texts))
    # ASCII: json.dumps escapes every other character.
    index = ("{" + ",".join(piece for piece, _ in pieces.values()) + "}").encode("ascii")
    crc = zlib.crc32(index)
    for _, texts in pieces.values():
        for text in texts:
            crc = zlib.crc32(text, crc)
    header = json.dumps({"kind": KIND, "version": __version__, "format": FORMAT,
                         "index_bytes": len(index), "crc32": f"{crc:08x}"}).encode("utf-8")
    _make_folder(path.parent)

    def write(handle) -> None:
        handle.write(header + b"\n")
        handle.write(index)
        for _, texts in pieces.values():
            handle.writelines(texts)

    replace_file(path, write, durable=False)
    _drop_least_used(path.parent)


def _with_text_length(row: list) -> list:
    text, *rest = row[PRINTED_AT]
    return [*row[:PRINTED_AT], [len(text), *rest], *row[PRINTED_AT + 1:]]


def _make_folder(folder: Path) -> None:
    """The cache's folder, 0700 even when it was made before with a looser mode."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if stat.S_IMODE(os.stat(folder).st_mode) != 0o700:
        os.chmod(folder, 0o700)


def _drop_least_used(folder: Path) -> None:
    caches = []
    for entry in os.scandir(folder):
        if entry.name.endswith(".json") and entry.is_file(follow_symlinks=False):
            caches.append((entry.stat().st_mtime_ns, entry.path))
    for _, old in sorted(caches, reverse=True)[MAX_FILES:]:
        with contextlib.suppress(OSError):
            os.unlink(old)
