"""`hydrafusion-tailer statusline`: HydraFusion in Copilot CLI's own footer (docs/STATUSLINE.md).

The CLI runs the command on every refresh with a JSON object on stdin; the command prints
one line: the turn in flight leg by leg, else the last turn, then the session's credits
and review share. It must never break the footer nor slow it, so `show` answers whatever
happens with exit 0, nothing on stderr, and a line or nothing: stdin that is no object of
the CLI's, a log that is missing or cannot be read, a saved state that is damaged or not
ours, a disk that is full, a bug. Each refresh reads only what the CLI appended to the log
since the last one (tailer/statusline/summary.py), and none of it when nothing was
(tailer/statusline/saved.py).

`--install` and `--uninstall` change the CLI's settings (tailer/statusline/settings.py) and,
as every command does, say what is wrong in one line with exit 2.
"""

from __future__ import annotations

import os
import time

from . import saved, where
from .options import DEFAULT_FORMAT, DEFAULT_THEN_TIMEOUT_S, MAX_THEN_TIMEOUT_S, Options
from .render import line, neutral
from .view import Snapshot, snapshot_from_data

READ_BUDGET_S = 0.025  # of reading the log per refresh: see summary.py
EXIT_USAGE = 2
NO_TURN = Snapshot()
UNREADABLE = "HydraFusion: the session log cannot be read"


def add_arguments(parser, environ: dict[str, str]) -> None:
    """The options, checked as quick_options checks them (tailer/statusline/options.py)."""
    import argparse

    from . import options

    def checked(check):
        def convert(value: str):
            try:
                return check(value)
            except ValueError as error:
                raise argparse.ArgumentTypeError(str(error)) from None
        convert.__name__ = check.__name__.removeprefix("parse_")
        return convert

    parser.add_argument(
        "--format", dest="template", type=checked(options.parse_format), metavar="TEMPLATE",
        default=options.parse_format(DEFAULT_FORMAT),
        help=f"the line, with fields in braces: {', '.join('{%s}' % name for name in options.FIELDS)} "
        f"[default: {DEFAULT_FORMAT!r}] (docs/STATUSLINE.md)")
    parser.add_argument(
        "--width", type=checked(options.parse_width), metavar="COLUMNS",
        help="at most this many columns [default: the terminal's, else $COLUMNS]")
    parser.add_argument(
        "--then", type=checked(options.parse_then), metavar="COMMAND",
        help="also run this status line command (yours, from before) with the same stdin, "
        "and show its output before ours")
    parser.add_argument(
        "--then-timeout", dest="then_timeout_s", type=checked(options.parse_then_timeout),
        default=DEFAULT_THEN_TIMEOUT_S, metavar="SECONDS",
        help=f"end --then's command (its whole process group) after this long [default "
        f"{DEFAULT_THEN_TIMEOUT_S:g}, at most {MAX_THEN_TIMEOUT_S:g}]")
    setting = parser.add_mutually_exclusive_group()
    setting.add_argument(
        "--install", action="store_true",
        help="set this command, with the options given, as the CLI's status line in "
        "$COPILOT_HOME/settings.json (else ~/.copilot/settings.json); a command already set "
        "runs after it (--then)")
    setting.add_argument(
        "--uninstall", action="store_true",
        help="remove it from the CLI's settings, putting back the command it ran with --then")


def main(args, environ: dict[str, str]) -> int:
    """The command after argparse read it: --install, --uninstall, or the line."""
    if not (args.install or args.uninstall):
        return show(Options(args.template, args.width, args.then, args.then_timeout_s), environ)
    import sys

    from .settings import SettingsError, install, settings_path, uninstall

    try:
        path = settings_path(environ)
        message = install(path, installed_options(args)) if args.install else uninstall(path)
    except SettingsError as error:
        print(f"hydrafusion-tailer statusline: {error}", file=sys.stderr)
        return EXIT_USAGE
    print(message)
    return 0


def installed_options(args) -> list[str]:
    """The display options given with --install, as the installed command carries them."""
    kept = []
    if args.template.text != DEFAULT_FORMAT:
        kept += ["--format", args.template.text]
    if args.width is not None:
        kept += ["--width", str(args.width)]
    if args.then is not None:
        kept += ["--then", args.then]
    if args.then_timeout_s != DEFAULT_THEN_TIMEOUT_S:
        kept += ["--then-timeout", f"{args.then_timeout_s:g}"]
    return kept


def show(options: Options, environ: dict[str, str], stdin: int = 0, stdout: int = 1) -> int:
    """Print the line (and --then's output); exit 0 whatever happens."""
    ours, width, then = "", options.width, None
    try:
        data = where.read_input(stdin)
        if options.then:
            from .then import Then

            try:
                then = Then(options.then, data, options.then_timeout_s)
            except OSError:  # no pipe to be had (no descriptor left): theirs lost, not ours
                pass
        if width is None:
            width = where.terminal_width(environ)
        ours = our_line(data, options, width, environ)
    except Exception:  # a bug must cost the line, never the footer
        ours = ""
    text = ours
    if then is not None:
        try:
            from .then import joined

            text = joined(then.output(), ours, width)
        except Exception:
            then.stop()
    try:
        os.write(stdout, (text + "\n").encode("utf-8") if text else b"")
    except OSError:
        pass
    return 0


def our_line(data: bytes | None, options: Options, width: int | None,
             environ: dict[str, str]) -> str:
    """The line for the session the CLI's object names; "" when it names none."""
    log_path = where.log_of(data, environ)
    if log_path is None:
        return ""
    now_ns = time.time_ns()
    try:
        found = os.stat(log_path)
    except FileNotFoundError:  # a new session whose log the CLI has not written yet
        return line(NO_TURN, options.template, width, _color(environ), now_ns)
    except OSError:
        return neutral(UNREADABLE, width)
    snapshot = session_snapshot(log_path, found, now_ns, environ)
    if snapshot is None:
        return neutral(UNREADABLE, width)
    return line(snapshot, options.template, width, _color(environ), now_ns)


def session_snapshot(log_path: str, found: os.stat_result, now_ns: int,
                     environ: dict[str, str]) -> Snapshot | None:
    """The snapshot of the log: the saved one when the log is as it was, else the log read
    on (or from its start) and the state saved again; None when the log cannot be read."""
    identity = [found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns]
    folder_path = saved.state_folder(environ)
    folder = saved.open_private_folder(folder_path) if folder_path else None
    try:
        name = saved.state_name(log_path)
        data = saved.read_own(folder, name) if folder is not None else None
        stored = saved.decode(data) if data else None
        if stored is not None and stored.unchanged(identity):
            try:
                return snapshot_from_data(stored.snapshot)
            except ValueError:
                stored = None
        return _read_on(log_path, identity, now_ns, folder, name, stored)
    finally:
        if folder is not None:
            folder.close()


def _read_on(log_path: str, identity: list[int], now_ns: int,
             folder: saved.PrivateFolder | None, name: str,
             stored: saved.Stored | None) -> Snapshot | None:
    """Read the log from where `stored` stopped (or its start), within READ_BUDGET_S where
    the state can be saved."""
    from . import summary

    # The budget spreads a big log over refreshes that each go on from the last one's
    # state: with nowhere to save it, each began again and stopped at the same place
    # ("reading the log 3%" for good), so such a refresh reads the log whole.
    savable = folder is not None and os.access(folder.path, os.W_OK)
    deadline = time.monotonic() + READ_BUDGET_S if savable else float("inf")
    session_id = os.path.basename(os.path.dirname(log_path))
    reading = None
    if stored is not None and stored.identity[:2] == identity[:2]:
        reading_data = stored.reading_bytes()
        if reading_data is not None:
            try:
                reading = summary.resumed(session_id, log_path, reading_data)
            except (ValueError, KeyError, TypeError, RecursionError):
                reading = None
    try:
        reading, caught_up = summary.read_on(reading or summary.fresh(session_id, log_path),
                                             deadline, identity[2])
    except OSError:
        return None
    percent = None if caught_up else min(99, 100 * reading.log.reader.offset // max(identity[2], 1))
    snapshot = summary.snapshot(reading, identity[3], now_ns, percent)
    if folder is not None:
        state = saved.encode(identity, now_ns, caught_up, snapshot.to_data(), reading.to_data())
        if saved.save(folder, name, state):
            saved.clean(folder, now_ns)
    return snapshot


def _color(environ: dict[str, str]) -> bool:
    """Colours unless NO_COLOR is set to anything (no-color.org)."""
    return not environ.get("NO_COLOR")
