"""The rules of the path options every command shares: a path as given, a file to write.

They live apart from the commands so that building the command line's parser, which every
command does first, imports no command's own modules (tailer/commands/cli.py).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from .printable import printable


def user_path(text: str) -> Path:
    """A path option's value, `~` expanded (`--state-dir=~/x` and variables reach us
    unexpanded); an empty one is refused, since it would quietly mean the current folder."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path")
    return Path(text).expanduser()


def check_output_file(option: str, path: Path) -> None:
    """A file a command will write, refused now (ValueError) if it cannot be: the report's
    page before a log is read, the daemon's textfile before it starts."""
    if path.is_dir():
        raise ValueError(f"{option} {printable(str(path))} is a folder: give a file name")
    if not path.parent.is_dir():
        raise ValueError(f"{option} {printable(str(path))}: its folder does not exist")
    if not os.access(path.parent, os.W_OK):
        raise ValueError(f"{option} {printable(str(path))}: its folder is not writable")
