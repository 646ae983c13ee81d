"""Read complete lines from a growing file, from a byte position, in bounded memory.

The CLI appends to its log while we read it and may die mid-line, so only text up to the
last `\\n` is consumed: a half-written last line stays unread until it is completed. Lines
are split on `\\n` alone (never `str.splitlines()`, which also splits on U+2028 inside JSON
strings) and handed on as bytes, so each line is decoded on its own and one bad byte
spoils one line only.

A line longer than MAX_LINE_BYTES (tool output can run to tens of MB) is never held whole:
its first HEAD_BYTES are kept, the rest is skipped as it streams past, and the line is
handed on marked `oversized` for the parser to judge from its head.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

CHUNK_BYTES = 1 << 18
MAX_LINE_BYTES = 8 << 20
HEAD_BYTES = 4096


@dataclass(frozen=True, slots=True)
class Line:
    number: int  # 1-based, for messages that point a user at the damage
    data: bytes  # without its newline; only the head when oversized
    end_offset: int  # the byte position just past this line's newline
    oversized: bool = False


class LineReader:
    """Follows one file. `read()` yields the complete lines appended since the last call.

    The position is the byte offset just past the last complete line handed out, plus the
    line count, so a caller can save both and resume exactly there.
    """

    def __init__(self, path: Path, offset: int = 0, line_number: int = 0):
        self.path = path
        self.offset = offset
        self.line_number = line_number
        self._identity: tuple[int, int] | None = None

    def read(self) -> Iterator[Line]:
        """Yield new complete lines. Raises OSError when the file cannot be opened or read."""
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

    def _lines(self, handle) -> Iterator[Line]:
        pending = bytearray()  # the start of a line whose end is not read yet
        skipped = 0  # bytes of an oversized line dropped beyond `pending`
        position = self.offset  # file position of pending[0]
        while True:
            chunk = handle.read(CHUNK_BYTES)
            if not chunk:
                return
            start = 0
            while True:
                newline = chunk.find(b"\n", start)
                if newline < 0:
                    break
                length = newline - start
                end = position + len(pending) + skipped + length + 1
                oversized = skipped > 0 or len(pending) + length > MAX_LINE_BYTES
                if oversized:
                    room = max(HEAD_BYTES - len(pending), 0)
                    data = bytes(pending[:HEAD_BYTES]) + chunk[start:start + min(room, length)]
                elif pending:
                    data = bytes(pending) + chunk[start:newline]
                else:
                    data = chunk[start:newline]
                self.line_number += 1
                self.offset = end
                yield Line(self.line_number, data, end, oversized)
                pending.clear()
                skipped = 0
                position = end
                start = newline + 1
            rest = chunk[start:]
            if skipped or len(pending) + len(rest) > MAX_LINE_BYTES:
                room = max(HEAD_BYTES - len(pending), 0)
                pending += rest[:room]
                skipped += len(rest) - min(room, len(rest))
                if len(pending) > HEAD_BYTES:
                    skipped += len(pending) - HEAD_BYTES
                    del pending[HEAD_BYTES:]
            else:
                pending += rest
