"""Read complete lines from a growing file, from a byte position, in bounded memory.

The CLI appends to its log while we read it and may die mid-line, so only text up to the
last `\\n` is consumed: a half-written last line stays unread until it is completed. Lines
are split on `\\n` alone (never `str.splitlines()`, which also splits on U+2028 inside JSON
strings) and handed on as bytes, so each line is decoded on its own and one bad byte
spoils one line only.

Most lines of a session can never matter to the tailer. Given `markers` (byte strings that
every interesting line contains), the reader looks for the markers in whole chunks and cuts
out only the lines around them, so the rest costs a byte search and a newline count rather
than Python work per line: that is what lets a backfill run near the speed of the disk.

A line longer than MAX_LINE_BYTES (tool output can run to tens of MB) is never held whole:
its first HEAD_BYTES are kept, the rest is skipped as it streams past, and the line is
handed on marked `oversized` (when its head holds a marker) for the parser to judge.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator

CHUNK_BYTES = 1 << 20
MAX_LINE_BYTES = 8 << 20
HEAD_BYTES = 4096
FINGERPRINT_BYTES = 1024


@dataclass(frozen=True, slots=True)
class Line:
    number: int  # 1-based, for messages that point a user at the damage
    data: bytes  # without its newline; only the head when oversized
    end_offset: int  # the byte position just past this line's newline
    oversized: bool = False


def fingerprint(path: Path, size: int = FINGERPRINT_BYTES) -> str:
    """A digest of the file's first bytes: tells a rewritten log from the one we followed."""
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read(size)).hexdigest()[:32]


class LineReader:
    """Follows one file. `read()` yields the complete lines appended since the last call.

    The position is the byte offset just past the last complete line consumed, plus the
    line count, so a caller can save both and resume exactly there. When the file shrinks
    or is replaced by another file, reading starts again from the beginning and
    `generation` goes up, so the caller can tell that lines will come again.
    """

    __slots__ = ("path", "offset", "line_number", "markers", "generation", "_identity")

    def __init__(self, path: Path, offset: int = 0, line_number: int = 0,
                 markers: tuple[bytes, ...] = ()):
        self.path = path
        self.offset = offset
        self.line_number = line_number
        self.markers = markers
        self.generation = 0
        self._identity: tuple[int, int] | None = None

    def read(self) -> Iterator[Line]:
        """Yield new complete lines (with markers: only those holding one).

        Raises OSError when the file cannot be opened or read.
        """
        with open(self.path, "rb") as handle:
            status = os.fstat(handle.fileno())
            identity = (status.st_dev, status.st_ino)
            if self._identity is not None and identity != self._identity:
                self.rewind()
            self._identity = identity
            if status.st_size < self.offset:
                self.rewind()
            if status.st_size == self.offset:
                return
            handle.seek(self.offset)
            yield from self._lines(handle)

    def skip_to_end(self) -> None:
        """Move past every complete line without handing any out (start-at-end mode).

        Counting the lines keeps later warnings' line numbers true; a half-written last
        line is not skipped, so it is read once the CLI completes it.
        """
        with open(self.path, "rb") as handle:
            handle.seek(self.offset)
            position = self.offset
            while chunk := handle.read(CHUNK_BYTES):
                newlines = chunk.count(b"\n")
                if newlines:
                    self.line_number += newlines
                    self.offset = position + chunk.rindex(b"\n") + 1
                position += len(chunk)

    def rewind(self) -> None:
        """Start again from the beginning: the file was truncated or replaced."""
        self.offset = 0
        self.line_number = 0
        self.generation += 1

    def _lines(self, handle: BinaryIO) -> Iterator[Line]:
        carry = bytearray()  # the start of a line whose end is not read yet
        while chunk := handle.read(CHUNK_BYTES):
            first = chunk.find(b"\n")
            if first < 0:
                carry += chunk
            else:
                start = 0
                if carry:
                    carry += memoryview(chunk)[:first + 1]
                    yield from self._complete_lines(carry, 0, len(carry))
                    start = first + 1
                end = max(chunk.rfind(b"\n", start) + 1, start)
                if end > start:
                    yield from self._complete_lines(chunk, start, end)
                carry = bytearray(memoryview(chunk)[end:])
            if len(carry) > MAX_LINE_BYTES:
                yield from self._oversized(handle, bytes(carry[:HEAD_BYTES]), len(carry))
                carry = bytearray()

    def _complete_lines(self, data: bytes | bytearray, begin: int, end: int) -> Iterator[Line]:
        """Hand out the lines of data[begin:end] holding a marker (all of them without markers).

        data[begin] sits at the reader's offset and data[end - 1] is a newline.
        """
        base_offset, base_line = self.offset - begin, self.line_number
        newlines_before, counted_to = 0, begin
        for start in self._candidate_starts(data, begin, end):
            newlines_before += data.count(b"\n", counted_to, start)
            counted_to = start
            stop = data.index(b"\n", start, end)
            oversized = stop - start > MAX_LINE_BYTES
            text = bytes(data[start:start + HEAD_BYTES] if oversized else data[start:stop])
            number = base_line + newlines_before + 1
            self.offset, self.line_number = base_offset + stop + 1, number
            yield Line(number, text, self.offset, oversized)
        self.offset = base_offset + end
        self.line_number = base_line + newlines_before + data.count(b"\n", counted_to, end)

    def _candidate_starts(self, data: bytes | bytearray, begin: int, end: int) -> list[int]:
        """Start offsets of the lines in data[begin:end] to hand out, in order."""
        if not self.markers:
            starts, position = [], begin
            while position < end:
                starts.append(position)
                position = data.index(b"\n", position, end) + 1
            return starts
        starts = set()
        for marker in self.markers:
            position = data.find(marker, begin, end)
            while position >= 0:
                starts.add(max(data.rfind(b"\n", begin, position) + 1, begin))
                position = data.find(marker, data.index(b"\n", position, end), end)
        return sorted(starts)

    def _oversized(self, handle: BinaryIO, head: bytes, length: int) -> Iterator[Line]:
        """Stream past the rest of an over-long line; hand out its head if it may matter.

        `length` bytes of the line (from the reader's offset) are read already.
        """
        while True:
            chunk = handle.read(CHUNK_BYTES)
            if not chunk:
                return  # not complete yet: read again, from its start, once it is
            newline = chunk.find(b"\n")
            if newline >= 0:
                break
            length += len(chunk)
        end_offset = self.offset + length + newline + 1
        self.line_number += 1
        self.offset = end_offset
        if not self.markers or any(marker in head for marker in self.markers):
            yield Line(self.line_number, head, end_offset, oversized=True)
        handle.seek(end_offset)
