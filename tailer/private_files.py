"""Files a command keeps for itself between runs (the report's cache; the status line's
state), trusted as far as nobody but this user can have written them.

What such a file holds decides what a command shows, so it is kept and read back only
where this user alone writes, and read without being fooled or blocked:

- Its folder (PrivateFolder) is this user's own, written by nobody else (no group or world
  write) and not a symbolic link; it is made 0700 when missing, and a folder of the user's
  own that others may only read is closed to them when it is written: their permissions
  are taken away, never one added (a folder the user made read-only stays so). Anything else (another
  user's folder in a shared $XDG_CACHE_HOME, a group-writable one, a link) is refused
  with NotPrivate, and nothing in it is read or written: a planted file could double the
  figures shown, or hang every run. Everything is then done relative to the folder's
  descriptor, opened once without following a link, so a folder put in its place after
  the check is never the one used. The folders above it are the user's to arrange (a
  ~/.cache that is a link elsewhere is common).
- A file in it is read only when it is a regular file of this user's that nobody else
  may write (`read`, `is_own_file`): looked at first without following a link, then
  opened without following one and without blocking and checked again on the open
  descriptor. A FIFO, a device, a socket, a link or another user's file at its name is
  refused with NotARegularFile, never opened for reading.
- A file is written whole (`replace`: a temporary file renamed onto it, through
  tailer/atomic_file.py), under the folder's lock held shared while the temporary file
  exists. `tidy` takes that lock exclusive, without waiting, before removing temporary
  files: those it finds then belong to saves that were killed (a lock ends with its
  process). Where there is no flock (Windows), the lock is not taken and no temporary
  file is removed.
- `tidy` removes only files whose names the caller's pattern says it made, and their
  temporary files: never another file of the folder.

A command that has nowhere to say why it refused a folder (the status line prints its
line and nothing else) asks with `close_writable` for a folder of the user's own that
others may write to be closed (to them alone) and used instead: what others put in it while it was
open is theirs, and `read` refuses it.

On Windows there is no owner, mode or folder descriptor to check: a folder is used by
its path (under the user's profile, whose access list is the user's own), and a link or
a file that is not regular is still refused.

Imported by the status line on every refresh of the CLI's footer: what only a save or a
refusal needs (tailer/atomic_file.py, tailer/printable.py, and with them re and pathlib)
is imported there, and typing not at all.
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False  # typing costs the footer's start-up; a type checker takes it as True
if TYPE_CHECKING:
    import re
    from pathlib import Path
    from typing import BinaryIO, Callable

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

POSIX = os.name == "posix"
_FOLDER = (os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
           | getattr(os, "O_CLOEXEC", 0))
_FILE = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
         | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0))


class NotPrivate(Exception):
    """A folder not to trust; the message is its path and why, on one line."""


class NotARegularFile(OSError):
    """A FIFO, a device, a socket, a folder, a link or a file not the user's alone where a
    file was expected: never opened for reading (a FIFO would block, a device could do
    anything, another user's file say anything). The message is which, in a refusal's
    words ("is not a regular file", "belongs to another user (uid 0)")."""


def is_own_file(found: os.stat_result) -> bool:
    """Whether `found` (an lstat) is a regular file of this user's that nobody else may
    write: the only file a private state reads, or replaces."""
    return _not_own_file(found) is None


def _not_own_file(found: os.stat_result) -> str | None:
    """Why `found` is not a file `is_own_file`, in a refusal's words; None when it is."""
    if not stat.S_ISREG(found.st_mode):
        return "is not a regular file"
    return _not_alone(found) if POSIX else None


def another_users(found: os.stat_result) -> str | None:
    """The words `belongs to another user (uid N)` when the file `found` describes is not
    this user's; None when it is, or where files have no owner to compare (Windows). Every
    refusal of a file that is not ours says it so: the private states' and the daemon's
    checkpoint lock's."""
    if POSIX and found.st_uid != os.geteuid():
        return f"belongs to another user (uid {found.st_uid})"
    return None


def _not_alone(found: os.stat_result, *, writable_ours: bool = False,
               private_mode: str = "") -> str | None:
    """Why the file or folder `found` describes may be written by others than this user,
    in a refusal's words (with `private_mode`, the chmod that closes it); None when it may
    not, or, with `writable_ours`, when it is this user's own."""
    owner = another_users(found)
    if owner is not None:
        return owner
    if found.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not writable_ours:
        fix = f"; chmod {private_mode} it" if private_mode else ""
        return f"may be written by others (mode {stat.S_IMODE(found.st_mode):o}{fix})"
    return None


class PrivateFolder:
    """A folder that only this user writes, held open; see the module docstring. With
    `make`, made 0700 when missing and closed to others when there; with `close_writable`,
    one of the user's own that others may write is closed and used (see the module
    docstring). Raises
    NotPrivate, FileNotFoundError (not made and missing), OSError. Use it in a `with`, or
    close() it."""

    def __init__(self, path: str | Path, *, make: bool, close_writable: bool = False):
        self.path = path
        if make:
            try:
                os.makedirs(path, mode=0o700, exist_ok=True)
            except FileExistsError:
                pass  # not a folder, or a link to none: refused just below
        self.fd = _open_folder(path) if POSIX else None
        try:
            found = os.stat(self.fd) if POSIX else os.stat(path, follow_symlinks=False)
            mode = _checked(path, found, writable_ours=close_writable)
            if (make or close_writable) and POSIX and mode & 0o077:
                # Others could read it: not any more. Only their bits go: a folder the
                # user made read-only stays so, and the writes in it fail (and say so).
                os.chmod(self.fd, stat.S_IMODE(mode) & 0o700)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> PrivateFolder:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def read(self, name: str) -> BinaryIO:
        """The file `name` opened for reading, if it is a regular file of the user's own
        that nobody else may write (`is_own_file`). Raises FileNotFoundError,
        NotARegularFile, OSError."""
        where = self._where(name)
        why = _not_own_file(os.stat(where, dir_fd=self.fd, follow_symlinks=False))
        if why is not None:
            raise NotARegularFile(why)
        fd = os.open(where, _FILE, dir_fd=self.fd)
        try:
            why = _not_own_file(os.fstat(fd))
        except BaseException:
            os.close(fd)
            raise
        if why is not None:  # put there since it was looked at
            os.close(fd)
            raise NotARegularFile(why)
        return open(fd, "rb")  # closes fd from here on, however it ends (lines.open_regular)

    def replace(self, name: str, write: Callable[[BinaryIO], None]) -> None:
        """Replace the file `name` with what `write(binary file)` writes, whole or not at
        all (made 0600). Raises OSError."""
        from pathlib import Path

        from .atomic_file import replace_file  # a save's alone: the footer's refresh saves seldom

        locked = self._lock(fcntl.LOCK_SH) if fcntl is not None else False
        try:
            replace_file(Path(self._where(name)), write, durable=False, folder_fd=self.fd)
        finally:
            if locked:
                fcntl.flock(self.fd, fcntl.LOCK_UN)

    def tidy(self, made: re.Pattern[str], keep: int) -> None:
        """Remove the files `made` names but the `keep` written last, and the temporary
        files of their saves that were killed; nothing else. Raises OSError."""
        from .atomic_file import temporary_of

        ours, leftovers = [], []
        with os.scandir(self.fd if POSIX else self.path) as entries:
            for entry in entries:
                if not entry.is_file(follow_symlinks=False):
                    continue
                target = temporary_of(entry.name)
                if made.fullmatch(entry.name):
                    ours.append((entry.stat(follow_symlinks=False).st_mtime_ns, entry.name))
                elif target is not None and made.fullmatch(target):
                    leftovers.append(entry.name)
        removed = [name for _, name in sorted(ours, reverse=True)[keep:]]
        if leftovers and fcntl is not None and self._lock(fcntl.LOCK_EX | fcntl.LOCK_NB):
            removed += leftovers  # no save is running: each is a killed save's
            fcntl.flock(self.fd, fcntl.LOCK_UN)  # a save starting now makes a name of its own
        for name in removed:
            try:
                os.unlink(self._where(name), dir_fd=self.fd)
            except FileNotFoundError:
                pass  # another run's tidy was first

    def _where(self, name: str) -> str:
        return name if self.fd is not None else os.path.join(self.path, name)

    def _lock(self, how: int) -> bool:
        """Whether the folder's lock is now held `how` (not with LOCK_NB while another
        holds it, nor on a file system that has no locks)."""
        try:
            fcntl.flock(self.fd, how)
        except OSError:
            return False
        return True


def _open_folder(path: str | Path) -> int:
    try:
        return os.open(path, _FOLDER)
    except OSError as error:
        try:
            found = os.stat(path, follow_symlinks=False)
        except OSError:  # not there, or under a file: there is no such folder
            raise FileNotFoundError(error.errno, error.strerror, str(path)) from None
        _checked(path, found)
        raise


def _checked(path: str | Path, found: os.stat_result, *, writable_ours: bool = False) -> int:
    """The folder's mode, if this user alone may write in it (or, `writable_ours`, it is
    this user's own); else NotPrivate."""
    from .printable import printable  # a refusal's alone

    if stat.S_ISLNK(found.st_mode):
        raise NotPrivate(f"{printable(str(path))} is a symbolic link")
    if not stat.S_ISDIR(found.st_mode):
        raise NotPrivate(f"{printable(str(path))} is not a folder")
    why = _not_alone(found, writable_ours=writable_ours, private_mode="700") if POSIX else None
    if why is not None:
        raise NotPrivate(f"{printable(str(path))} {why}")
    return found.st_mode
