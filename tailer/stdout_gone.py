"""What a command does once its stdout takes no more writes: its reader is gone
(`report | head`, `doctor | less` quit early) or its disk is full.

What is still buffered in sys.stdout would fail again when Python flushes it at exit,
printing `Exception ignored ... BrokenPipeError` and exiting 120 in place of the command's
own exit code. With the file descriptor pointed at /dev/null that flush succeeds, so each
command ends as it chooses, silently or with its own one line.
"""

from __future__ import annotations

import os
import sys


def stdout_to_devnull() -> None:
    """Point sys.stdout's file descriptor at /dev/null: whatever is written or flushed to
    it from now on is dropped without an error."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)
