"""Read complete lines from a growing file, from a saved position, in bounded memory.

The CLI appends to its log while we read it and may die mid-line, so only text up to the
last `\\n` is consumed: a half-written last line waits until it is completed. Lines are
split on `\\n` alone (never `str.splitlines()`, which also splits on U+2028 inside JSON
strings) and handed on as bytes, so each line is decoded on its own and one bad byte spoils
one line only.

Where we are in a log is one value, `Position`: the byte offset just past the last line
consumed, the line count, and a digest of the end of that line. Before every read the
digest is checked against the bytes now just before the offset, so a log that was
rewritten (shorter, or rewritten and grown past the offset) is noticed and read again from
its start; a log copied or restored elsewhere, or seen through a remounted volume, still
matches and is resumed.

Lines are split by `readline`, in C. A caller's `wanted` test sees each line and most lines
are dropped by it without any Python work on their text (see event_types.may_be_read). A line
longer than MAX_LINE_BYTES (tool output runs to tens of MB) is never held whole: its first
HEAD_BYTES are kept and it is handed on marked `oversized`. A line still being written is
kept where it was read to, so a long line written in many pieces is read once (twice once
it is complete, below), not once per piece.

Memory is what bounds a line longer than CHUNK_BYTES, not time: it is first read through
in chunks, keeping only its head, its length and its end, and once its newline is found
it is read again in one piece of exactly its size. Holding it as it came would cost two or
three times its size at once (readline's pieces and their join, then the copy without the
newline), and the peak memory of a backfill is the few lines of several MB its logs hold.
"""

from __future__ import annotations

import os
import stat

from ..records import TupleRecord

# typing costs `statusline` some 5 ms of start-up (its NamedTuple more), and pathlib 3 ms:
# a type checker takes this as True.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import BinaryIO, Callable, Iterator

MAX_LINE_BYTES = 8 << 20
HEAD_BYTES = 4096
CHUNK_BYTES = 1 << 20
BUFFER_BYTES = 256 << 10
TAIL_BYTES = 1024  # how much of the last line's end the position's digest covers


class NotARegularFile(OSError):
    """A log that is a FIFO, a device or a folder: never opened for reading (it may block)."""

    @classmethod
    def at(cls, path: Path | str) -> NotARegularFile:
        return cls(f"not a regular file: {os.fspath(path)!r}")


class Line(TupleRecord):
    """One complete line. A tuple: one is made for every line handed out, and a tuple is
    made several times faster than a frozen dataclass.

    number: int, 1-based, for messages that point a user at the damage; data: bytes,
    without its newline, only the head when oversized; end_offset: int, the byte position
    just past this line's newline; oversized: bool."""

    __slots__ = ()
    _fields = ("number", "data", "end_offset", "oversized")

    def __new__(cls, number: int, data: bytes, end_offset: int, oversized: bool = False):
        return tuple.__new__(cls, (number, data, end_offset, oversized))


# A Line made without the Python frame of its __new__: the loop below makes one for every
# line it hands out, and that frame was a tenth of what handing out a line cost.
_new_line = tuple.__new__


class Position(TupleRecord):
    """Where a reader is in its log: past `offset` bytes and `line` lines, the last
    `tail_size` bytes before the offset having the digest `tail` (a tuple: one is made
    for every read that moves)."""

    __slots__ = ()
    _fields = ("offset", "line", "tail_size", "tail")

    def __new__(cls, offset: int = 0, line: int = 0, tail_size: int = 0, tail: str = ""):
        return tuple.__new__(cls, (offset, line, tail_size, tail))

    def to_data(self) -> list:
        return list(self)

    @classmethod
    def from_data(cls, data) -> "Position":
        """A position from a checkpoint; ValueError if it is not one."""
        if not isinstance(data, list) or len(data) != 4:
            raise ValueError("a log position is not a list of 4")
        offset, line, tail_size, tail = data
        if not (_is_count(offset) and _is_count(line) and _is_count(tail_size)
                and tail_size <= min(offset, TAIL_BYTES) and isinstance(tail, str)):
            raise ValueError("a log position is not an offset, a line, a size and a digest")
        return cls(offset, line, tail_size, tail)


def _is_count(value) -> bool:
    return type(value) is int and value >= 0


def _digest(data: bytes) -> str:
    global _SHA256
    if _SHA256 is None:
        _SHA256 = _sha256()
    return _SHA256(data).hexdigest()[:32]


# Found on the first digest, not at import, nor at each digest: a failed import searches
# sys.path anew every time, and --watch takes a digest of each of 10,000 logs.
_SHA256 = None


def _sha256():
    """SHA-256, CPython's own where it has it: hashlib loads OpenSSL first (some 4 ms of the
    status line's start-up, for a digest of at most TAIL_BYTES), and gives the same digest."""
    try:
        from _sha2 import sha256  # CPython 3.12 and later
    except ImportError:
        try:
            from _sha256 import sha256  # CPython 3.11
        except ImportError:
            from hashlib import sha256
    return sha256


def open_regular(path: Path) -> BinaryIO:
    """Open a file for reading only if it is a regular file, without ever blocking.

    O_NONBLOCK makes opening a FIFO return at once instead of waiting for a writer; the
    type is then checked on the open descriptor, so a swap between a check and the open
    cannot slip through. Once `open` has the descriptor, it alone closes it: a stop signal's
    KeyboardInterrupt just after it returned drops the file object, which closes it, and a
    second close here would have raised EBADF in its place (the stop taken for an
    unreadable log, and the report going on).
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except BaseException:
        os.close(fd)
        raise
    if not regular:
        os.close(fd)
        raise NotARegularFile.at(path)
    return open(fd, "rb", buffering=BUFFER_BYTES)


def tail_at(path: Path, offset: int, size: int) -> str | None:
    """The digest of the `size` bytes before `offset` in the log at `path`, as a Position
    keeps it; None when the log is shorter, unreadable or not a regular file."""
    try:
        with open_regular(path) as handle:
            handle.seek(offset - size)
            data = handle.read(size)
    except OSError:
        return None
    return _digest(data) if len(data) == size else None


class _Unfinished:
    """A line longer than one chunk, or read up to the end of the file without its newline:
    what is known of it so far. Not its bytes: it is read again whole once it is complete."""

    __slots__ = ("head", "length", "tail")

    def __init__(self) -> None:
        self.head = b""  # its first HEAD_BYTES: all that is handed on of an oversized line
        self.length = 0
        self.tail = b""  # its last TAIL_BYTES: checked before reading on, digested at its end

    @property
    def oversized(self) -> bool:
        return self.length > MAX_LINE_BYTES

    def add(self, piece: bytes) -> None:
        if len(self.head) < HEAD_BYTES:
            self.head += piece[:HEAD_BYTES - len(self.head)]
        self.length += len(piece)
        self.tail = (self.tail + piece[-TAIL_BYTES:])[-TAIL_BYTES:]


class LineReader:
    """Follows one file. `read()` yields the complete lines appended since the last call.

    `position` can be saved and given back to a new reader to resume exactly there. When
    the file no longer matches it (shrunk, replaced or rewritten), reading starts again
    from the beginning and `generation` goes up, so the caller can tell that lines will
    come again. With `wanted`, only the lines it accepts are handed out.
    """

    __slots__ = ("path", "position", "wanted", "generation", "_unfinished", "_reading")

    def __init__(self, path: Path, position: Position = Position(),
                 wanted: Callable[[bytes], bool] | None = None):
        self.path = path
        self.position = position
        self.wanted = wanted
        self.generation = 0
        self._unfinished: _Unfinished | None = None
        self._reading: BinaryIO | None = None  # the file while `read` runs

    @property
    def offset(self) -> int:
        return self.position.offset

    @property
    def reached(self) -> int:
        """How far into the file the read under way has got, for another thread to look at
        (a progress line): the open file's own offset, its read-ahead included, so reading
        pays nothing for it; where reading stopped when no read runs."""
        reading = self._reading
        if reading is not None:
            try:
                return reading.raw.tell()
            except (OSError, ValueError):  # closed meanwhile: the read has ended
                pass
        return self.position.offset

    def read(self) -> Iterator[Line]:
        """Yield new complete lines. Raises OSError when the file cannot be opened or read.

        Stopping early is fine: the position then stands after the last line handed out.
        """
        with open_regular(self.path) as handle:
            size = os.fstat(handle.fileno()).st_size
            if not self._still_matches(handle, size):
                self.rewind()
            start = self.position.offset
            if self._unfinished is not None:
                start += self._unfinished.length
            if size > start:
                handle.seek(start)
                self._reading = handle
                try:
                    yield from self._lines(handle)
                finally:
                    self._reading = None

    def skip_to_end(self) -> None:
        """Move past every complete line without handing any out (start-at-end mode).

        Counting the lines keeps later warnings' line numbers true; a half-written last
        line is not skipped, so it is read once the CLI completes it.
        """
        with open_regular(self.path) as handle:
            offset, lines = self.position.offset, self.position.line
            read_to = offset
            handle.seek(offset)
            while chunk := handle.read(CHUNK_BYTES):
                newlines = chunk.count(b"\n")
                if newlines:
                    lines += newlines
                    offset = read_to + chunk.rindex(b"\n") + 1
                read_to += len(chunk)
            if offset != self.position.offset:
                size = min(offset, TAIL_BYTES)
                handle.seek(offset - size)
                self.position = Position(offset, lines, size, _digest(handle.read(size)))
                self._unfinished = None

    def rewind(self) -> None:
        """Start again from the beginning: the file was truncated, replaced or rewritten."""
        self.position = Position()
        self._unfinished = None
        self.generation += 1

    def _still_matches(self, handle: BinaryIO, size: int) -> bool:
        """Whether the bytes before our position, and the end of a line we are part way
        through, are still the ones we read."""
        position, unfinished = self.position, self._unfinished
        read_to = position.offset + (unfinished.length if unfinished is not None else 0)
        if size < read_to:
            return False
        if position.tail_size:
            handle.seek(position.offset - position.tail_size)
            if _digest(handle.read(position.tail_size)) != position.tail:
                return False
        if unfinished is not None:
            handle.seek(read_to - len(unfinished.tail))
            return handle.read(len(unfinished.tail)) == unfinished.tail
        return True

    def _lines(self, handle: BinaryIO) -> Iterator[Line]:
        """The loop every byte of a log goes through: kept to what must run per line."""
        wanted = self.wanted
        offset, number = self.position.offset, self.position.line
        last = None  # the last line consumed (with its newline): its end makes the digest
        unfinished, self._unfinished = self._unfinished, None
        # A line read whole in one piece of at most this is never oversized: no line's
        # length is compared to MAX_LINE_BYTES, on every line of every log.
        piece = min(CHUNK_BYTES, MAX_LINE_BYTES)
        try:
            while True:
                line = handle.readline(piece)
                if unfinished is None:
                    if line[-1:] == b"\n":
                        offset += len(line)
                        number += 1
                        last = line
                        if wanted is None or wanted(line):
                            yield _new_line(Line, (number, line[:-1], offset, False))
                        continue
                    if not line:
                        break
                    unfinished = _Unfinished()
                elif not line:
                    break
                if line[-1:] != b"\n":
                    unfinished.add(line)
                    continue
                unfinished.add(line[:-1])
                if unfinished.oversized:
                    data = unfinished.head
                else:
                    data = _read_again(handle, offset, unfinished)
                    if data is None:  # changed meanwhile: the next read checks the file
                        unfinished = None
                        break
                offset += unfinished.length + 1
                number += 1
                last = unfinished.tail + b"\n"
                oversized, unfinished = unfinished.oversized, None
                if wanted is None or wanted(data):
                    yield _new_line(Line, (number, data, offset, oversized))
        finally:
            self._unfinished = unfinished
            if last is not None:
                tail = last[-TAIL_BYTES:]
                self.position = Position(offset, number, len(tail), _digest(tail))


def _read_again(handle: BinaryIO, start: int, line: _Unfinished) -> bytes | None:
    """The complete line that begins at `start`, read in one piece; None if the file no
    longer holds what was read of it. Leaves the file just past its newline."""
    handle.seek(start)
    data = handle.read(line.length)
    handle.seek(start + line.length + 1)
    if len(data) != line.length or not data.endswith(line.tail):
        return None
    return data
