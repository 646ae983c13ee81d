"""What the CLI hands the status line command: its JSON on stdin, the terminal it draws on.

Copilot CLI 1.0.102 pipes one JSON object to the command on each refresh (docs/STATUSLINE.md
lists what it holds); `transcript_path` is the session's state folder, whose events.jsonl is
the log, and `session_id` names that folder. Every field may be missing or anything else:
whatever is not what the CLI sends gives None, never an error. The paths are used, never
printed.

The command's stdout is a pipe, and the CLI sets no COLUMNS: the width it draws the line in
is the terminal's, which the command shares as its controlling terminal (/dev/tty). A line
wider than that wraps onto a second footer row, so it is what the line must fit.
"""

from __future__ import annotations

import os
import time

# The CLI's object is some 2 KB; a pipe holds 64 KiB, so --then can be given the same bytes
# without a thread to write them (tailer/statusline/then.py).
MAX_INPUT_BYTES = 64 << 10
INPUT_WAIT_S = 0.5  # the CLI writes its object as it starts the command, then closes the pipe
EVENTS = "events.jsonl"
MAX_SESSION_ID = 128


def read_input(fd: int = 0, wait_s: float = INPUT_WAIT_S) -> bytes | None:
    """Stdin up to its end, or None when it is more than MAX_INPUT_BYTES, a terminal (a
    person ran the command by hand: there is nothing to wait for), or not at its end within
    `wait_s`. What it reads past MAX_INPUT_BYTES it leaves unread."""
    try:
        if os.isatty(fd):
            return None
        import select  # here: the footer without stdin (a test's) never needs it

        chunks, size, deadline = [], 0, time.monotonic() + wait_s
        while size <= MAX_INPUT_BYTES:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, MAX_INPUT_BYTES + 1 - size)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
    except (OSError, ValueError):
        return None
    return None


def log_of(data: bytes | None, environ: dict[str, str]) -> str | None:
    """The session log the CLI's object names: `transcript_path`'s events.jsonl (the path
    itself when it names a .jsonl file), else that of `session_id` in the state folder
    ($COPILOT_HOME/session-state, else ~/.copilot/session-state); None when it names none."""
    if not data:
        return None
    from ..fast_json import loads

    try:
        status = loads(data)
    except (ValueError, RecursionError):  # RecursionError: 64 KiB of nested brackets
        return None
    if type(status) is not dict:
        return None
    transcript = status.get("transcript_path")
    if type(transcript) is str and transcript.strip() and "\0" not in transcript:
        if transcript.endswith(".jsonl"):
            return os.path.abspath(transcript)
        return os.path.abspath(os.path.join(transcript, EVENTS))
    session_id = status.get("session_id")
    if not _plain_name(session_id):
        return None
    home = environ.get("COPILOT_HOME") or os.path.join(os.path.expanduser("~"), ".copilot")
    return os.path.abspath(os.path.join(home, "session-state", session_id, EVENTS))


def _plain_name(value: object) -> bool:
    """A folder name of one part: never `..`, a separator or a NUL."""
    return (type(value) is str and 0 < len(value) <= MAX_SESSION_ID and value not in (".", "..")
            and not any(char in value for char in "/\\\0"))


def terminal_width(environ: dict[str, str]) -> int | None:
    """The columns of the controlling terminal; else $COLUMNS (1 to 1,000); else None."""
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        fd = None
    if fd is not None:
        try:
            return os.get_terminal_size(fd).columns or None
        except OSError:
            pass
        finally:
            os.close(fd)
    columns = environ.get("COLUMNS", "").strip()
    # isdecimal, not isdigit: `²` is a digit, and no number to int (the line was lost).
    return int(columns) if columns.isdecimal() and 1 <= int(columns) <= 1000 else None
