"""The status line's saved state: one small file per session log, beside the report's cache.

`$XDG_CACHE_HOME/hydrafusion/statusline/<checksums of the log's path>.json` (else under
~/.cache) holds where reading the log stopped and what the line showed then, so a refresh
reads only the bytes the CLI appended since, and one that finds the log as it was reads
none and imports none of the reading stages. The file is three lines:

- a header: what it is, the tailer's version, the format, the CRC-32 of each line below;
- the view: the log's identity (device, inode, size, modification time) when it was last
  looked at, when that was, whether reading had caught up with it, and the snapshot the
  line is drawn from (tailer/statusline/view.py);
- the reading: where reading stopped and what it holds of the session (summary.py), parsed
  only when the log is read on.

It is trusted as the report's cache is, by the same rules (tailer/private_files.py): the
folder must be this user's own, closed to others and no symbolic link
(`open_private_folder`), a file is read only when it is a regular file of this user's that
nobody else may write (anything else at its path is refused without being opened for
reading, and never replaced), and
whatever its bytes, a line that is not what `encode` writes is ignored: the log is read
again, so the line shows the same, or the neutral "reading" while it catches up. A save is
a whole new file renamed into place (`save`), so a reader sees a whole file or none; one
killed before its rename leaves a `.*.tmp` file, removed by a later save once it is a
minute old. Only the
files this module names are ever removed: `MAX_FILES` states (the sessions looked at
longest ago go first) and those leftovers.
"""

from __future__ import annotations

import os
import zlib

from .. import __version__
from ..private_files import NotPrivate, PrivateFolder, is_own_file

KIND = "hydrafusion statusline"
FORMAT = 1
MAX_FILES = 64
MAX_STATE_BYTES = 8 << 20
LEFTOVER_AGE_NS = 60 * 10**9
# A log modified this close before it was looked at may change again within the file
# system's time granularity with the same size and time: the report's cache reads such a
# log again too (tailer/report/cache.py, RECENT_NS).
RECENT_NS = 2_000_000_000
_NAME_DIGITS = 16
_WRITE_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                | getattr(os, "O_CLOEXEC", 0))
# Where a folder cannot be opened as a descriptor (Windows), nothing is saved.
CAN_SAVE = hasattr(os, "O_NOFOLLOW") and os.open in os.supports_dir_fd


def state_folder(environ: dict[str, str]) -> str | None:
    """Where the states live: beside the report's cache (tailer/report/cache.py, the same
    XDG rule); None when there is no home to put it in."""
    base = environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        home = environ.get("HOME")
        if not home:
            return None
        base = os.path.join(home, ".cache")
    return os.path.join(base, "hydrafusion", "statusline")


def state_name(log_path: str) -> str:
    """The state's file name for a log: checksums of its path (no path ever in a name)."""
    path = os.fsencode(log_path)
    return f"{zlib.crc32(path):08x}{zlib.adler32(path):08x}.json"


def open_private_folder(path: str) -> PrivateFolder | None:
    """The folder at `path`, held open, made (0700) if missing; None when it cannot be
    trusted: a symbolic link, not a folder, another user's (tailer/private_files.py's
    rules, the report's cache's). One of this user's own that others may write is closed
    and used, since the line has nowhere to say why it would not be: what others put there
    meanwhile is theirs, and never read."""
    if not CAN_SAVE:
        return None
    try:
        return PrivateFolder(path, make=True, close_writable=True)
    except (NotPrivate, OSError, ValueError):  # ValueError: a NUL in the path
        return None


def _own_file(found: os.stat_result) -> bool:
    """A file of this user's that no one else may write (is_own_file), of a size we read."""
    return is_own_file(found) and found.st_size <= MAX_STATE_BYTES


def read_own(folder: PrivateFolder, name: str) -> bytes | None:
    """The file's bytes, or None when it is missing or not one of ours (never opened then)."""
    try:
        with folder.read(name) as handle:
            found = os.fstat(handle.fileno())
            if found.st_size > MAX_STATE_BYTES:
                return None
            data = handle.read(found.st_size + 1)
    except OSError:  # NotARegularFile among them
        return None
    return data if len(data) <= found.st_size else None  # it grew while read: ours are replaced


class Stored:
    """A state as read back: the view's values, checked, and the reading's bytes, checked
    against their CRC where they are used (`reading_bytes`)."""

    __slots__ = ("identity", "seen_ns", "caught_up", "snapshot", "_reading", "_reading_crc")

    def __init__(self, identity: list[int], seen_ns: int, caught_up: bool, snapshot: list,
                 reading: bytes, reading_crc: str):
        self.identity, self.seen_ns, self.caught_up = identity, seen_ns, caught_up
        self.snapshot = snapshot
        self._reading, self._reading_crc = reading, reading_crc

    def unchanged(self, now: list[int]) -> bool:
        """Whether the log is surely as it was when its lines were read, by its identity:
        no line was added since, and the line may be drawn from the snapshot."""
        return self.caught_up and now == self.identity and now[3] < self.seen_ns - RECENT_NS

    def reading_bytes(self) -> bytes | None:
        return self._reading if _crc(self._reading) == self._reading_crc else None


def encode(identity: list[int], seen_ns: int, caught_up: bool, snapshot: list,
           reading: bytes) -> bytes:
    from ..fast_json import dumps

    view = dumps([identity, seen_ns, caught_up, snapshot]).encode("ascii")
    header = dumps({"kind": KIND, "version": __version__, "format": FORMAT,
                    "view_crc": _crc(view), "reading_crc": _crc(reading)}).encode("ascii")
    return b"\n".join((header, view, reading)) + b"\n"


def decode(data: bytes) -> Stored | None:
    """The state in `data`, or None when it is not what `encode` wrote for this version."""
    from ..fast_json import loads

    parts = data.split(b"\n")
    if len(parts) != 4 or parts[3]:
        return None
    header, view, reading, _ = parts
    try:
        head = loads(header)
        if (type(head) is not dict or head.get("kind") != KIND or head.get("format") != FORMAT
                or head.get("version") != __version__ or head.get("view_crc") != _crc(view)
                or type(head.get("reading_crc")) is not str):
            return None
        identity, seen_ns, caught_up, snapshot = loads(view)
    except (ValueError, TypeError, RecursionError):
        return None
    if (type(identity) is not list or len(identity) != 4
            or any(type(number) is not int or number < 0 for number in identity)
            or type(seen_ns) is not int or type(caught_up) is not bool):
        return None
    return Stored(identity, seen_ns, caught_up, snapshot, reading, head["reading_crc"])


def _crc(data: bytes) -> str:
    return f"{zlib.crc32(data):08x}"


def save(private: PrivateFolder, name: str, data: bytes) -> bool:
    """Replace the state `name` with `data`; False when it was not saved: the disk is full,
    the folder cannot be written, or something not ours stands at its path (left alone).

    The new file is written whole under a temporary name, then the old one is removed and
    the new one renamed into its place: a reader finds the old state, none (and reads the
    log again), or the new one, never part of one. Not renamed over the old one: ext4 (by
    default, auto_da_alloc) then writes the new file's blocks out before the rename returns,
    some 3 ms of a refresh whose state changed."""
    folder = private.fd
    if len(data) > MAX_STATE_BYTES:
        return False
    try:
        found = os.stat(name, dir_fd=folder, follow_symlinks=False)
        if not _own_file(found):
            return False
    except FileNotFoundError:
        pass
    except OSError:
        return False
    temporary = f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    try:
        fd = os.open(temporary, _WRITE_FLAGS, 0o600, dir_fd=folder)
    except OSError:
        return False
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        _remove(folder, name)
        os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
        return True
    except OSError:
        _remove(folder, temporary)
        return False


def clean(private: PrivateFolder, now_ns: int) -> None:
    """Remove what only this module makes: the states past MAX_FILES (those written longest
    ago), and the leftovers of saves killed before their rename, once a minute old.

    Not PrivateFolder.tidy, whose lock a refresh would pay for on every save: a leftover
    is known by its age instead, and a save never takes a minute."""
    folder, states = private.fd, []
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                kind = _kind_of(entry.name)
                if kind is None or not entry.is_file(follow_symlinks=False):
                    continue
                found = entry.stat(follow_symlinks=False)
                if found.st_uid != os.geteuid():
                    continue
                if kind == "state":
                    states.append((found.st_mtime_ns, entry.name))
                elif found.st_mtime_ns < now_ns - LEFTOVER_AGE_NS:
                    _remove(folder, entry.name)
    except OSError:
        return
    for _, name in sorted(states, reverse=True)[MAX_FILES:]:
        _remove(folder, name)


def _kind_of(name: str) -> str | None:
    """`state` for a name state_name makes, `leftover` for one of save's temporary files."""
    if name.startswith(".") and name.endswith(".tmp"):
        parts = name[1:-4].split(".")  # <digits>, json, <pid>, <random>
        if len(parts) == 4 and _kind_of(f"{parts[0]}.{parts[1]}") == "state" \
                and parts[2].isdigit() and _is_hex(parts[3]):
            return "leftover"
        return None
    stem, dot, suffix = name.partition(".")
    return "state" if suffix == "json" and len(stem) == _NAME_DIGITS and _is_hex(stem) else None


def _is_hex(text: str) -> bool:
    return bool(text) and all(char in "0123456789abcdef" for char in text)


def _remove(folder: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=folder)
    except OSError:
        pass
