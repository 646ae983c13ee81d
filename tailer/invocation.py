"""How the user ran the tailer, so that a hint names a command they can type as it is.

Installed, the command is `hydrafusion-tailer` (the script pip or pipx made); from a checkout
it is `python3 -m tailer`, and a hint naming the other one fails. The name a message starts
with (`hydrafusion-tailer report: ...`) stays the same either way: it says who speaks, not
what to type.
"""

from __future__ import annotations

import shlex
import sys

from .printable import printable

INSTALLED = "hydrafusion-tailer"  # pyproject.toml's [project.scripts]


def command() -> str:
    """`python3 -m tailer`, the interpreter named as it was typed (`python`, a venv's path),
    when the package runs as a module; else the installed command."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name == "tailer.__main__":
        python = sys.orig_argv[0] if sys.orig_argv else "python3"
        return f"{printable(shlex.quote(python))} -m tailer"
    return INSTALLED
