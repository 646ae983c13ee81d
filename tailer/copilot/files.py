"""Find the session logs under the Copilot state directory.

Each session is a folder named for its id holding `events.jsonl`. This module knows paths
and nothing about what the files say.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .lines import NotARegularFile

LOG_NAME = "events.jsonl"


def is_session_folder(path: Path) -> bool:
    """Whether `path` holds a log itself: one session's folder given where the folder of
    sessions was meant (`--state-dir ~/.copilot/session-state/ID`), which lists none."""
    return os.path.isfile(os.path.join(path, LOG_NAME))


def session_logs(state_dir: Path) -> dict[str, Path]:
    """Session id -> path of its log, for every session folder that has one (see find_logs)."""
    return find_logs(state_dir)[0]


def find_logs(state_dir: Path) -> tuple[dict[str, Path], dict[str, OSError]]:
    """Session id -> path of its log, for every session folder that has one; and session
    id -> why, for the folders that cannot be read and those whose log is not a regular
    file (NotARegularFile: a FIFO, a socket, a folder), never opened as it may block.

    A log reached through two folders (a link to another session's folder or log, a hard
    link) is one session, listed once, under the folder `listing_order` takes first: read
    under both names, each of its turns would be counted twice.

    Raises OSError when the state directory itself cannot be listed; a session folder that
    vanishes while we look is simply not listed.
    """
    found, unreadable = {}, {}
    by_file: dict[tuple[int, int], str] = {}
    with os.scandir(state_dir) as entries:
        for entry in sorted(entries, key=listing_order):
            try:
                if not entry.is_dir():
                    continue
                log = Path(entry.path, LOG_NAME)
                status = os.stat(log)
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError as error:
                unreadable[entry.name] = error
                continue
            if not stat.S_ISREG(status.st_mode):
                unreadable[entry.name] = NotARegularFile.at(log)
            elif by_file.setdefault((status.st_dev, status.st_ino), entry.name) == entry.name:
                found[entry.name] = log
    return found, unreadable


def listing_order(entry: os.DirEntry) -> tuple[bool, str]:
    """The order session folders are taken in: of two folders that reach one log, the
    first is its session. A real folder comes before a link to one, so a link to another
    session's folder gives way to that session; then by name, so that every command, and
    the daemon from its first listing on, picks the same one."""
    try:
        is_link = entry.is_symlink()
    except OSError:
        is_link = True
    return is_link, entry.name
