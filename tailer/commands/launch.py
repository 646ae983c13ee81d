"""Where every start of the tailer begins (`python -m tailer`, the `hydrafusion-tailer` script).

Copilot CLI runs `statusline` on every refresh of its footer, so that one command is
answered before the command line's parser and its imports are loaded (argparse, pathlib,
typing: some 15 ms of a start the footer waits for): its usual command line is read by
tailer/statusline/options.py's quick_options. Anything that reads differently there
(--help, --install, a wrong value) goes to tailer/commands/cli.py as every other command does.
"""

from __future__ import annotations

import gc
import os
import sys

EXIT_INTERRUPTED = 130  # commands/cli.py's, which the footer's refresh never imports


def main(argv: list[str] | None = None, environ: dict[str, str] | None = None) -> int:
    # Started with its stdout or stderr closed (`cmd >&-`, a scheduler's job), Python makes
    # it None: a traceback at its first use, or print(file=sys.stderr) putting the errors in
    # the stdout. What is printed there goes nowhere, as to /dev/null.
    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w")
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")
    try:
        return _main(argv, environ)
    except KeyboardInterrupt:
        # Ctrl-C as the command starts (its imports, its options read), before it set its
        # own stops (commands/stops.py): the exit of a command cut short, no traceback.
        return EXIT_INTERRUPTED


def _main(argv: list[str] | None, environ: dict[str, str] | None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    if arguments[:1] == ["statusline"]:
        from ..statusline.options import quick_options

        options = quick_options(arguments[1:])
        if options is not None:
            if argv is None:
                refresh(options)
            from ..statusline.command import show

            return show(options, dict(os.environ if environ is None else environ))
    from .cli import main as parsed_main

    return parsed_main(argv, environ)


def refresh(options) -> None:
    """The footer's command as a process of its own (argv None: the CLI's, not a test's
    call of main): it never returns. The cyclic garbage collector is off, and the process
    ends by os._exit, past the interpreter's tear-down of the modules it imported: the two
    were some 15% of the instructions of a refresh with a turn in flight (docs/PERFORMANCE.md).
    Both are safe here alone: a refresh reads a bounded number of new bytes (its reading
    budget), and everything it writes (its line, its saved state, renamed into place)
    has gone through os.write before `show` returns."""
    gc.disable()
    from ..statusline.command import show

    code = show(options, dict(os.environ))
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed, or its reader gone
            pass
    os._exit(code)
