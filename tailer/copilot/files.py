"""Find the session logs under the Copilot state directory.

Each session is a folder named for its id holding `events.jsonl`. This module knows paths
and nothing about what the files say.
"""

from __future__ import annotations

import os
from pathlib import Path

LOG_NAME = "events.jsonl"


def session_logs(state_dir: Path) -> dict[str, Path]:
    """Session id -> path of its log, for every session folder that has one (see find_logs)."""
    return find_logs(state_dir)[0]


def find_logs(state_dir: Path) -> tuple[dict[str, Path], dict[str, OSError]]:
    """Session id -> path of its log, for every session folder that has one; and session
    id -> why, for the folders that cannot be read.

    Raises OSError when the state directory itself cannot be listed; a session folder that
    vanishes while we look is simply not listed.
    """
    found, unreadable = {}, {}
    with os.scandir(state_dir) as entries:
        for entry in entries:
            try:
                if not entry.is_dir():
                    continue
                log = Path(entry.path, LOG_NAME)
                os.stat(log)
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError as error:
                unreadable[entry.name] = error
                continue
            if log.is_file():
                found[entry.name] = log
    return found, unreadable
