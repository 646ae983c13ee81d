"""The rules of the path options every command shares: a path as given, a file to write.

They live apart from the commands so that building the command line's parser, which every
command does first, imports no command's own modules (tailer/commands/cli.py).
"""

from __future__ import annotations

import argparse
import os
import stat
from pathlib import Path

from .printable import printable


def user_path(text: str) -> Path:
    """A path option's value, `~` expanded (`--state-dir=~/x` and variables reach us
    unexpanded); an empty one is refused, since it would quietly mean the current folder."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path")
    # os.path's: `~name` of no such user stays as typed, as a shell leaves it, where
    # Path.expanduser raises RuntimeError.
    return Path(os.path.expanduser(text))


NO_LEDGER = "none"


def ledger_path(text: str) -> Path | str:
    """`--ledger`'s value: a file, or NO_LEDGER (`none`, any case, as every option's) for none."""
    return NO_LEDGER if text.strip().lower() == NO_LEDGER else user_path(text)


def exists(option: str, path: Path) -> bool:
    """Whether anything is at the path a user gave for `option`; ValueError, with the
    one-line reason, when it cannot be looked at (a folder above it closed to this user),
    where Path.exists() and Path.is_dir() raise PermissionError."""
    return _status(option, path) is not None


def is_folder(option: str, path: Path) -> bool:
    """Whether the path a user gave for `option` is a folder; ValueError as `exists`."""
    status = _status(option, path)
    return status is not None and stat.S_ISDIR(status.st_mode)


def _status(option: str, path: Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as error:
        raise ValueError(f"{option} {printable(str(path))}: {error.strerror}") from None


def missing_folders(path: Path) -> list[Path]:
    """`path` and its parents that do not exist, innermost first: what a command makes to
    write at `path`, and removes again if it is stopped before the write is whole."""
    missing = []
    while not os.path.lexists(path) and path.parent != path:
        missing.append(path)
        path = path.parent
    return missing


def nearest_existing(path: Path) -> Path:
    """The innermost of `path` and its parents that exists: the folder a path's missing
    folders would be made in, which must be a writable folder, not a file."""
    missing = missing_folders(path)
    return missing[-1].parent if missing else path


def check_input_file(option: str, path: Path) -> None:
    """A file a user gave a command to read, refused now (ValueError) when it is not there
    or is a folder."""
    if not exists(option, path):
        raise ValueError(f"{option} {printable(str(path))} does not exist")
    if is_folder(option, path):
        raise ValueError(f"{option} {printable(str(path))} is a folder: give a file")


def check_output_file(option: str, path: Path) -> None:
    """A file a command will write, refused now (ValueError) if it cannot be: the report's
    page before a log is read, the daemon's textfile before it starts."""
    if is_folder(option, path):
        raise ValueError(f"{option} {printable(str(path))} is a folder: give a file name")
    # The file is renamed onto its path: a device there (`/dev/null`, `/dev/stdout`'s link,
    # writable by root) would itself be replaced, for every program of the machine.
    status = _status(option, path)
    if status is not None and not stat.S_ISREG(status.st_mode):
        raise ValueError(f"{option} {printable(str(path))} is not a regular file: give a file name")
    if not is_folder(option, path.parent):
        raise ValueError(f"{option} {printable(str(path))}: its folder does not exist")
    if not os.access(path.parent, os.W_OK):
        raise ValueError(f"{option} {printable(str(path))}: its folder is not writable")
