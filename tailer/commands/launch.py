"""Where every start of the tailer begins (`python -m tailer`, the `hydrafusion-tailer` script).

Copilot CLI runs `statusline` on every refresh of its footer, so that one command is
answered before the command line's parser and its imports are loaded (argparse, pathlib,
typing: some 15 ms of a start the footer waits for): its usual command line is read by
tailer/statusline/options.py's quick_options. Anything that reads differently there
(--help, --install, a wrong value) goes to tailer/commands/cli.py as every other command does.
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None, environ: dict[str, str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    if arguments[:1] == ["statusline"]:
        from ..statusline.options import quick_options

        options = quick_options(arguments[1:])
        if options is not None:
            from ..statusline.command import show

            return show(options, dict(os.environ if environ is None else environ))
    from .cli import main as parsed_main

    return parsed_main(argv, environ)
