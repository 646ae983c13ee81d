"""Replace a file so that a reader, or the next start after a crash, sees the old file or
the new one, never half of either: the checkpoint and the metrics textfile are written so."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable


def replace_file(path: Path, write: Callable[[BinaryIO], None], *, durable: bool,
                 mode: int = 0o600) -> None:
    """Write a new `path` through `write(binary file)`, then rename it over the old one.

    The temporary file sits in the same directory (os.replace cannot cross file systems),
    and its name starts with a dot and ends in .tmp, so node_exporter's textfile collector
    (which reads *.prom) skips it. `durable`: flushed to disk before the rename, so a crash
    of the machine leaves a whole file too. `mode`: mkstemp makes the file 0600. On Windows
    os.replace fails (OSError) while another process holds the file open: the caller
    reports it, and its next write replaces the file.
    """
    fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as temp:
            write(temp)
            if durable:
                temp.flush()
                os.fsync(temp.fileno())
        if mode != 0o600:
            os.chmod(temp_name, mode)
        os.replace(temp_name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        raise
