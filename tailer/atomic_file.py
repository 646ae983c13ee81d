"""Replace a file so that a reader, or the next start after a crash, sees the old file or
the new one, never half of either: the checkpoint, the metrics textfile and the report's
cache are written so."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import time
from pathlib import Path
from typing import BinaryIO, Callable

# `.NAME.RANDOM.tmp`: how a temporary file is named (RANDOM is hex digits here; tempfile's
# letters, digits and underscores in the files older versions left).
_TEMPORARY = re.compile(r"\.(.+)\.[a-z0-9_]+\.tmp", re.DOTALL)
_NEW_FILE = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_BINARY", 0))


def replace_file(path: Path, write: Callable[[BinaryIO], None], *, durable: bool,
                 mode: int | None = 0o600, folder_fd: int | None = None) -> None:
    """Write a new `path` through `write(binary file)`, then rename it over the old one.

    The temporary file sits in the same directory (os.replace cannot cross file systems),
    and its name starts with a dot and ends in .tmp (`temporary_of` tells one), so
    node_exporter's textfile collector (which reads *.prom) skips it. `durable`: flushed
    to disk before the rename, so a crash of the machine leaves a whole file too. `mode`:
    the file is made 0600, then given `mode`; None: made as any file a command writes, 0666
    less the umask (a page the user asked for, to share). `folder_fd`: the folder, held
    open (tailer/private_files.py): `path` is a name in it, and the file is made and
    renamed relative to it, never through a folder put in its place since. On Windows
    os.replace fails (OSError) while another process holds the file open: the caller
    reports it, and its next write replaces the file.
    """
    fd, temp_name = _new_temporary(path, folder_fd, 0o666 if mode is None else 0o600)
    try:
        with os.fdopen(fd, "wb") as temp:
            write(temp)
            if durable:
                temp.flush()
                os.fsync(temp.fileno())
        if mode is not None and mode != 0o600:
            os.chmod(temp_name, mode, dir_fd=folder_fd)
        os.replace(temp_name, path if folder_fd is None else path.name,
                   src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp_name, dir_fd=folder_fd)
        raise


def temporary_of(name: str) -> str | None:
    """The name of the file that a temporary file of replace_file named `name` was to
    replace, or None when `name` is none of ours."""
    match = _TEMPORARY.fullmatch(name)
    return match.group(1) if match else None


def remove_killed_saves(path: Path, *, older_than_s: float | None = None) -> None:
    """Remove the temporary files replace_file made for `path` and a kill left behind, and
    nothing else: not those of another file in the same folder, nor a folder. For the one
    writer of `path` (a tailer holding its checkpoint), before its first save: a save of
    another writer running at that moment would lose its file and say so. For a file that
    several runs may write at once (a report's page), `older_than_s`: only this user's
    regular files that old, since a younger one may be a save under way."""
    if older_than_s is not None:
        before = time.time() - older_than_s
        owner = os.geteuid() if hasattr(os, "geteuid") else None
    try:
        with os.scandir(path.parent) as entries:
            for entry in entries:
                if temporary_of(entry.name) != path.name or entry.is_dir(follow_symlinks=False):
                    continue
                if older_than_s is not None:
                    found = entry.stat(follow_symlinks=False)
                    if not (stat.S_ISREG(found.st_mode) and found.st_mtime < before
                            and owner in (None, found.st_uid)):
                        continue
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
    except OSError:
        pass  # the folder cannot be listed: the saves will say what is wrong with it


def _new_temporary(path: Path, folder_fd: int | None, mode: int) -> tuple[int, str]:
    """A new file beside `path`, made with `mode` (less the umask) and never through a link
    (O_EXCL, O_NOFOLLOW), and its name (relative to `folder_fd` when given)."""
    for _ in range(100):
        name = f".{path.name}.{os.urandom(6).hex()}.tmp"
        if folder_fd is None:
            name = os.path.join(path.parent, name)
        try:
            return os.open(name, _NEW_FILE, mode, dir_fd=folder_fd), name
        except FileExistsError:
            continue  # 2**48 names: only a folder filled on purpose gets here twice
        except BaseException:
            # A stop (KeyboardInterrupt) raised as os.open returns, its descriptor never
            # kept: the file is made all the same, and nobody else would remove it.
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=folder_fd)
            raise
    raise FileExistsError(errno.EEXIST, "no free name for a temporary file", str(path.parent))
