"""`hydrafusion-tailer report`: the answers from the session logs, with nothing but Python.

Many people cannot or will not run the stack, so the report reads the session logs itself,
through the daemon's own stages (files -> lines -> events -> turns), and prints what the
dashboard shows. It is read-only: no daemon, no checkpoint, no network, nothing written but
the HTML file asked for and the cache (cache.py) that spares the next report what this one
read. A turn still open when a log ends is finished as `incomplete`, as
the daemon does when a session goes idle.

This module is the command: its options and what it does with them. Reading and choosing
the turns is gather.py (through the cache, in worker processes) and read.py, the figures report_figures.py, the renderers report_table.py,
report_text.py (JSON, CSV) and report_html.py, `--watch` live.py. docs/REPORT.md describes the command and
its output.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import threading
from datetime import datetime, timedelta, timezone, tzinfo
from pathlib import Path
from typing import TextIO

from .. import __version__, invocation
from ..atomic_file import remove_killed_saves, replace_file
from . import text as report_text
from ..copilot.files import find_logs, is_session_folder
from ..copilot.ledger import chosen_ledger
from ..path_options import check_output_file, exists, is_folder, ledger_path, user_path
from ..printable import printable
from ..stdout_gone import stdout_to_devnull
from ..wording import counted
from .cache import cache_file
from .figures import GROUPINGS, snapshot
from .gather import Reading, WorkerFailed, default_jobs, gather
from .ledger import ledger_check
from .read import Selection
from .wrap import cut
from ..copilot.problems import folder_problem, no_event_problem, session_folder_given, state_dir_problem
from ..turns.session_log import holds_no_event

EXIT_NO_SESSIONS = 1  # and no turn that the filters choose: nothing to report either way
EXIT_USAGE = 2
FORMATS = ("table", "json", "csv", "csv-calls", "csv-worth")
PIPED_WIDTH = 100  # piped without $COLUMNS: what a reader's window or a file shows whole
# A narrower table would cut more than it shows: a narrower terminal wraps its lines instead.
NARROWEST = 40
# Wider than any screen: a bar as long as a mistyped $COLUMNS would never finish printing.
WIDEST = 1000
CHOOSING = ("since", "until", "session", "model", "pattern")  # the options that choose turns


def add_arguments(parser: argparse.ArgumentParser, state_dir: Path) -> None:
    parser.add_argument("--version", action="version", version=f"hydrafusion-tailer {__version__}")
    parser.add_argument("--no-color", action="store_true",
                        help="no colour even on a terminal (as $NO_COLOR)")
    parser.add_argument(
        "--state-dir", type=user_path, default=state_dir,
        help="Copilot session-state folder [$COPILOT_STATE_DIR, else "
        "$COPILOT_HOME/session-state, else ~/.copilot/session-state]",
    )
    parser.add_argument("--since", metavar="WHEN",
                        help="turns that started at or after WHEN: a date (2026-11-04, local "
                        "midnight), today, yesterday, a date and time, or a time ago (2w, 7d, 24h, 30m)")
    parser.add_argument("--until", metavar="WHEN",
                        help="turns that started before WHEN; a date counts in whole")
    # Stripped: a value pasted with a space matched nothing, and the line naming what there
    # is listed it ('--pattern fallback : the patterns seen: ..., fallback (2)').
    parser.add_argument("--session", metavar="ID", type=str.strip,
                        help="one session: its id or the start of it")
    parser.add_argument("--model", type=str.strip,
                        help="turns with a leg on this model (part of its name, any case)")
    parser.add_argument("--pattern", type=str.strip, help="turns of this pattern, any case (single, cascade, critique, ...; "
                        "fallback: route failures; ordinary: prompts without fusion)")
    parser.add_argument("--format", choices=FORMATS, default="table", type=str.lower,
                        help="what to print: a table (default), one JSON document, CSV with "
                        "one row per leg, CSV with one row per model call, or CSV of was fusion "
                        "worth it")
    parser.add_argument("--html", type=user_path, metavar="FILE",
                        help="write one self-contained HTML page to FILE instead")
    parser.add_argument("--watch", action="store_true",
                        help="keep the table on screen, redrawn as turns arrive (Ctrl-C ends)")
    parser.add_argument("--by", choices=GROUPINGS, type=str.lower,
                        help="one table (or CSV, JSON) of every prompt's use, HydraFusion's and "
                        "ordinary, by day, ISO week, month or session, with its total")
    parser.add_argument("--order", choices=("asc", "desc"), type=str.lower,
                        help="with --by: oldest first (asc, default) or newest first (desc)")
    parser.add_argument("--breakdown", action="store_true",
                        help="with --by: a row per model inside each group (the JSON has them always)")
    parser.add_argument("--timezone", metavar="NAME",
                        help="the time zone of days, weeks, months and times shown: an IANA "
                        "name, any case (Europe/Berlin, utc); default the system's")
    parser.add_argument("--turns", type=_count, metavar="N",
                        help="the table lists only the newest N turns (0: the summary alone)")
    parser.add_argument("--no-cache", action="store_true",
                        help="read every log from its start, without the report's cache, and "
                        "write none (docs/REPORT.md: the cache)")
    parser.add_argument("--ledger", type=ledger_path, metavar="FILE|none",
                        help="the Copilot CLI's own ledger of model calls to check the logs "
                        "against, or `none` [default: session-store.db beside the state folder]")
    parser.add_argument("--jobs", type=_jobs, metavar="N",
                        help="read the logs in N processes (default: one per CPU; 1: in this one)")
    parser.add_argument("--demo", action="store_true",
                        help="report on the bundled example sessions, moved to end a few minutes "
                        "ago (with --watch, a turn is replayed every 30 s)")


def parse_when(text: str, now: datetime, *, zone: tzinfo | None = None,
               whole_day_after: bool = False) -> datetime:
    """`2w`, `7d`, `24h`, `30m` before `now` (spans of time, whatever the zone); a date,
    `today` or `yesterday` (midnight in `zone`, else the system's; the next one with
    whole_day_after); or an ISO date and time (in `zone` unless it names its offset).
    Units and words in any case (`3D` as `TODAY`): a user who typed one in capitals
    means the same; but `M`, which many tools read as months, is refused rather than
    taken as minutes. Raises ValueError."""
    text = text.strip()
    ago = re.fullmatch(r"(\d+(?:\.\d+)?)([wdhm])", text, flags=re.IGNORECASE)
    if ago and ago.group(2) == "M":
        raise ValueError(f"{text!r}: minutes are `m`; for months, give the date to start from "
                         "(2026-09-01)")
    if ago:
        unit = {"w": "weeks", "d": "days", "h": "hours", "m": "minutes"}[ago.group(2).lower()]
        try:
            return now - timedelta(**{unit: float(ago.group(1))})
        except OverflowError:
            raise _beyond_the_calendar(text) from None
    days_back = {"today": 0, "yesterday": 1}.get(text.lower())
    if days_back is not None:
        text = (now.astimezone(zone).date() - timedelta(days=days_back)).isoformat()
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a date (2026-11-04, today, yesterday), a date and "
                         "time, or 2w / 7d / 24h / 30m") from None
    try:
        if whole_day_after and re.fullmatch(r"\d{4}-\d\d-\d\d", text):
            moment += timedelta(days=1)  # on the wall clock, before the offset is known
        if moment.tzinfo is None:
            # The zone's offset on that day, daylight saving time included.
            moment = moment.replace(tzinfo=zone) if zone else moment.astimezone()
    except (OverflowError, ValueError):  # moved past the calendar's first or last day
        raise _beyond_the_calendar(text) from None
    return moment


def _beyond_the_calendar(text: str) -> ValueError:
    return ValueError(f"{text!r} is too far back or ahead: a date's year runs from 1 to 9999")


def selection_from(args: argparse.Namespace, now: datetime, zone: tzinfo | None = None) -> Selection:
    def ns(moment: datetime | None) -> int | None:
        return None if moment is None else int(moment.timestamp() * 1e9)

    since = parse_when(args.since, now, zone=zone) if args.since else None
    until = parse_when(args.until, now, zone=zone, whole_day_after=True) if args.until else None
    if since and until and until <= since:
        raise ValueError(f"--until {args.until} is not after --since {args.since}")
    return Selection(ns(since), ns(until), args.session, args.model, args.pattern)


def filters_of(args: argparse.Namespace) -> dict[str, str]:
    """The options that chose the turns, as given: a report says what it covers."""
    return {name: getattr(args, name) for name in CHOOSING if getattr(args, name)}


class Progress:
    """`read 12 of 200 sessions, 340.2 of 1018.4 MB` on a terminal's stderr, once reading has lasted
    AFTER_S, then every EVERY_S until `close` erases it: drawn by a thread of its own from
    what the Reading holds, so a log of hundreds of MB moves it as it is read, and reading
    never waits for it. Nothing else writes to stderr while the logs are read."""

    AFTER_S = 1.0
    EVERY_S = 0.25

    def __init__(self, stream: TextIO, reading: Reading):
        self.stream, self.reading = stream, reading
        self.total_bytes = sum(reading.sizes.values())
        self._shown = False
        self._closed = threading.Event()
        self._drawer = threading.Thread(target=self._draw_until_closed, daemon=True)
        self._drawer.start()

    def line(self) -> str:
        reading = self.reading
        done = min(reading.bytes(), self.total_bytes)  # a log that grew while it was read
        return (f"read {reading.logs_read:,} of {counted(len(reading.sizes), 'session')}, "
                f"{done / 1e6:.1f} of {self.total_bytes / 1e6:.1f} MB")

    def close(self) -> None:
        """Stop drawing and erase the line: before the report, or an error, is printed."""
        self._closed.set()
        self._drawer.join()
        if self._shown:
            self._write("\r\x1b[K")

    def _draw_until_closed(self) -> None:
        if self._closed.wait(self.AFTER_S):
            return
        self._shown = True
        while (self._write(f"\r{cut(self.line(), self._columns() - 1)}\x1b[K")
               and not self._closed.wait(self.EVERY_S)):
            pass

    def _columns(self) -> int:
        """The terminal's width now (it may be resized while the logs are read): a line
        wider wraps, and `\\r` goes back to the start of its last row alone, so each redraw
        would leave the rows above it on screen."""
        try:
            return max(os.get_terminal_size(self.stream.fileno()).columns, 2)
        except (OSError, ValueError):
            return 80

    def _write(self, text: str) -> bool:
        """Whether `text` reached the terminal (a terminal hung up takes no more)."""
        try:
            self.stream.write(text)
            self.stream.flush()
        except OSError:
            return False
        return True


def main(args: argparse.Namespace, environ: dict[str, str], *, state_dir: Path | None = None,
         on_pass=None) -> int:
    """The report on `args.state_dir`, or on `state_dir` with `on_pass` called before every
    pass of --watch (the demo's copy and its replay: tailer/commands/demo_report.py)."""
    now = datetime.now(timezone.utc)
    try:
        selection, zone = checked(args, now)
    except ValueError as error:
        return refused(error)
    # The demo's copy is made afresh each time: a cache of it would only be litter.
    cache_path = None if args.no_cache or state_dir is not None else cache_file(environ, args.state_dir)
    # Nor has it a ledger (its copy is not in the CLI's folder).
    ledger = chosen_ledger(args.ledger, args.state_dir) if state_dir is None else None
    return _report(args, environ, state_dir or args.state_dir, selection, now, zone,
                   cache_path, ledger, on_pass=on_pass)


def checked(args: argparse.Namespace, now: datetime) -> tuple[Selection, tzinfo | None]:
    """The turns the options choose and the report's time zone, or ValueError with the
    one-line reason: checked before a log is read or the demo's copy is made
    (tailer/commands/demo_run.py)."""
    for name in CHOOSING:
        if getattr(args, name) is not None and not getattr(args, name).strip():
            raise ValueError(f"--{name} is empty")  # it would choose every turn, unsaid
    zone = time_zone(args.timezone)
    selection = selection_from(args, now, zone)
    if args.watch and (args.html or args.format != "table"):
        raise ValueError("--watch shows the table: it takes neither --html nor --format")
    _check_views(args)
    if args.html and args.format != "table":
        raise ValueError("--html writes the page: it takes no --format")
    if args.html:
        check_output_file("--html", args.html)
    if args.ledger is not None:
        if args.watch or args.demo:
            raise ValueError("--ledger is checked by a report of the logs: it takes neither "
                             "--watch nor --demo")
        chosen_ledger(args.ledger, args.state_dir)
    return selection, zone


def refused(error: ValueError) -> int:
    """A usage error: its one line on stderr, and the exit code."""
    print(f"hydrafusion-tailer report: {error}", file=sys.stderr)
    return EXIT_USAGE


def _check_views(args: argparse.Namespace) -> None:
    """The view options with what they shape, or a one-line reason (ValueError)."""
    if (args.order or args.breakdown) and not args.by:
        raise ValueError("--order and --breakdown shape the table of --by day|week|month|session")
    if args.breakdown and args.format == "csv-worth":
        raise ValueError("--breakdown adds rows per model to --by's table, CSV or JSON, not to --format csv-worth")
    if args.by and (args.watch or args.html
                    or args.format not in ("table", "csv", "json", "csv-worth")):
        raise ValueError("--by prints a table, or its groups as --format csv, json or csv-worth: "
                         "it takes neither --watch, --html nor --format csv-calls")
    if args.turns is not None and (args.by or args.watch or args.html or args.format != "table"):
        raise ValueError("--turns shortens the table's turn list: it takes neither --by, "
                         "--watch, --html nor --format")


def time_zone(name: str | None) -> tzinfo | None:
    """The report's time zone: an IANA zone named in any case, or None for the system's
    (daylight saving included). Raises ValueError for an unknown name."""
    if name is None:
        return None
    import zoneinfo  # here: finding the zone files' folders costs every start-up otherwise

    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        pass
    # In another case (`utc`, `europe/berlin`): the zone of that name, as the IANA spells it.
    # Listing the zones reads the zone files' folders, so only a name not found costs it.
    spelled = {zone.lower(): zone for zone in zoneinfo.available_timezones()}.get(name.lower())
    if spelled is None:
        raise ValueError(f"--timezone {printable(name)!r} is not a time zone name "
                         "(e.g. Europe/Berlin, UTC)")
    return zoneinfo.ZoneInfo(spelled)


def _report(args: argparse.Namespace, environ: dict[str, str], state_dir: Path,
            selection: Selection, now: datetime, zone, cache_path: Path | None,
            ledger_path: Path | None, on_pass=None) -> int:
    color = sys.stdout.isatty() and not environ.get("NO_COLOR") and not args.no_color
    try:
        found = (is_folder if args.watch else exists)("--state-dir", state_dir)
    except ValueError as error:
        return refused(error)
    if args.watch:
        if not found:
            return _nothing_found(state_dir, exists=False)
        if not sys.stdout.isatty():
            print("hydrafusion-tailer report: --watch redraws a terminal, and the output is "
                  "not one (a pipe, a file, closed): leave it out", file=sys.stderr)
            return EXIT_USAGE
        from . import live  # imported by --watch alone: the inotify watcher costs start-up

        try:
            return live.watch(state_dir, selection, filters_of(args), sys.stdout,
                              color=color, zone=zone, on_pass=on_pass, cache_path=cache_path,
                              jobs=args.jobs)
        except WorkerFailed as error:  # its first pass reads through the cache, as a report does
            print(f"hydrafusion-tailer report: {error}", file=sys.stderr)
            return EXIT_USAGE
        except live.TerminalGone:
            # Closed under nohup: ended as its hangup ends a watch, with nobody left to tell.
            stdout_to_devnull()
            return 0
    if not found:
        return _nothing_found(state_dir, exists=False)
    try:
        logs, unreadable = find_logs(state_dir)
    except OSError as error:
        print(f"hydrafusion-tailer report: {state_dir_problem(error)}", file=sys.stderr)
        return EXIT_USAGE
    if not logs and not unreadable:
        return _nothing_found(state_dir, exists=True)
    wanted = {sid for sid, path in logs.items() if selection.wants_log(sid, path)}
    progress: Progress | None = None

    def reading(logs: Reading) -> None:
        nonlocal progress
        if logs.sizes and _shows_progress(args):
            progress = Progress(sys.stderr, logs)

    try:
        try:
            gathered = gather(logs, wanted, selection, zone, now=now.timestamp(),
                              cache_path=cache_path, workers=args.jobs or default_jobs(),
                              on_reading=reading)
        finally:  # erased before any line is printed, the one below too
            if progress is not None:
                progress.close()
    except WorkerFailed as error:
        print(f"hydrafusion-tailer report: {error}", file=sys.stderr)
        return EXIT_USAGE
    if gathered.cache_problem is not None:
        print(f"hydrafusion-tailer report: {gathered.cache_problem}", file=sys.stderr)
    problems = dict(gathered.problems)
    for session_id, error in unreadable.items():
        if selection.wants_session(session_id):
            problems[session_id] = folder_problem(session_id, error)
    problems.update(_no_event_logs(logs, wanted - problems.keys(), gathered))
    for problem in sorted(problems.values()):
        print(f"hydrafusion-tailer report: {problem}", file=sys.stderr)
    ledger = ledger_check(ledger_path, gathered.states, logs.keys() | unreadable.keys(), selection)
    if ledger.problem is not None:
        print(f"hydrafusion-tailer report: {ledger.problem}", file=sys.stderr)

    def matched_nothing() -> int:
        return _matched_nothing(args, logs, len(wanted), lambda chosen: gather(
            logs, {sid for sid in logs if chosen.wants_session(sid)}, chosen, zone,
            now=now.timestamp(), cache_path=cache_path, workers=args.jobs or default_jobs()).rows)

    # A table or page of zeros says nothing; a program's JSON or CSV is still a document.
    # Sessions the CLI's ledger holds without a log are what a report of them shows.
    nothing = (bool(filters_of(args)) and not gathered.rows and not gathered.in_flight
               and not ledger.only_in_ledger and not ledger.only_in_ledger_unnamed)
    if nothing and (args.html or args.format == "table"):
        return matched_nothing()
    in_flight = []
    if gathered.in_flight:
        from .now import in_flight_row  # here: turns are seldom running, and it costs start-up

        in_flight = [in_flight_row(turn, round(now.timestamp() * 1e9), zone)
                     for turn in gathered.in_flight]
    figures = snapshot(gathered.rows, now=now, tz=zone,
                       skipped={"damaged_lines": gathered.damaged_lines,
                                "unreadable_logs": len(problems)},
                       filters=filters_of(args), checks=gathered.checks, in_flight=in_flight,
                       groupings=_groupings(args), ledger=ledger)
    if args.html:
        try:
            from . import html as report_html  # imported by --html alone, as live is

            # Renamed onto FILE whole: a reader never sees half a page, and a symlink
            # there is replaced, never written through to the file it points to.
            page = report_html.render(figures).encode("utf-8")
            remove_killed_saves(args.html, older_than_s=KILLED_PAGE_AGE_S)
            replace_file(args.html, lambda out: out.write(page), durable=False, mode=None)
        except OSError as error:
            print(f"hydrafusion-tailer report: cannot write {printable(str(args.html))}: "
                  f"{error.strerror}", file=sys.stderr)
            return EXIT_USAGE
        print(f"wrote {printable(str(args.html))}: {_turns_counted(figures)}", file=sys.stderr)
        return 0
    if args.format == "json" and args.by:
        text = [report_text.render_groups_json(figures, args.by, order=args.order or "asc")]
    elif args.format == "json":
        text = report_text.render_json(figures)  # pieces: a month is written as it is made
    elif args.format == "csv" and args.by:
        text = report_text.render_groups_csv(figures, args.by, order=args.order or "asc",
                                             breakdown=args.breakdown)
    elif args.format == "csv":
        text = report_text.render_csv(figures)
    elif args.format == "csv-calls":
        text = report_text.render_calls_csv(figures)
    elif args.format == "csv-worth":
        text = report_text.render_worth_csv(figures, args.by, order=args.order or "asc")
    elif args.by:
        from . import groups_table  # here, as the table below: JSON and CSV print no table

        text = groups_table.render_groups(figures, args.by, order=args.order or "asc",
                                          breakdown=args.breakdown, width=_width(environ), color=color)
    else:
        from . import table as report_table

        text = report_table.render_table(figures, width=_width(environ), color=color,
                                         turns=args.turns)
    try:
        if args.format == "json":  # bytes: the turns' texts are written as the cache holds them
            sys.stdout.flush()
            sys.stdout.buffer.writelines(text)
            sys.stdout.buffer.flush()
        else:  # one str: writelines would write it a character at a time
            sys.stdout.write(text)
            sys.stdout.flush()
    except BrokenPipeError:
        # `report | head`: the reader has all it wanted.
        stdout_to_devnull()
    except OSError as error:
        # `report > FILE` on a full disk: the output is cut short, and saying so is all that
        # is left (what is still buffered goes nowhere, or Python's exit would fail on it).
        stdout_to_devnull()
        print(f"hydrafusion-tailer report: cannot write the report ({error.strerror})",
              file=sys.stderr)
        return EXIT_USAGE
    if nothing:
        return matched_nothing()
    if not figures.turns and args.format == "table":
        print(_no_turns_hint(len(logs), len(wanted), filters_of(args)), file=sys.stderr)
    return 0


# A temporary page this old is a killed run's: a page, tens of MB at most, is written in
# far less (the status line's saves are judged so too: statusline/saved.py).
KILLED_PAGE_AGE_S = 60


def _groupings(args: argparse.Namespace) -> tuple[str, ...]:
    """The groupings the output shows: the one of --by, every one in the JSON, the days on
    the page and in the table."""
    if args.by:
        return (args.by,)
    return GROUPINGS if args.format == "json" else ("day",)


def _turns_counted(figures) -> str:
    """`26 turns (+3 ordinary)`, as the table's title counts them."""
    ordinary = sum(kind.turns for kind in figures.by_kind if kind.kind == "ordinary")
    text = counted(figures.headline.turns, "turn")
    return text + f" (+{ordinary} ordinary)" if ordinary else text


def _nothing_found(state_dir: Path, *, exists: bool) -> int:
    if exists and is_session_folder(state_dir):
        parent, name = os.path.split(os.path.abspath(state_dir))
        print(f"hydrafusion-tailer report: {printable(session_folder_given(state_dir))}.\n"
              f"  This session alone: {invocation.command()} report --state-dir "
              f"{printable(parent)} --session {printable(name)}", file=sys.stderr)
        return EXIT_NO_SESSIONS
    if exists:
        why = "has no session logs (*/events.jsonl)"
    else:  # --watch refuses what is there but no folder (a session's events.jsonl)
        why = "is not a folder" if os.path.exists(state_dir) else "does not exist"
    print(
        f"hydrafusion-tailer report: {printable(str(state_dir))} {why}.\n"
        "  Copilot CLI keeps its sessions in ~/.copilot/session-state (or "
        "$COPILOT_HOME/session-state).\n"
        "  Elsewhere? Give --state-dir DIR or set COPILOT_STATE_DIR.\n"
        f"  No sessions yet? `{invocation.command()} report --demo` shows a report of example "
        "sessions.",
        file=sys.stderr,
    )
    # A folder that is not there is input the user must mend; an empty one is nothing to report.
    return EXIT_NO_SESSIONS if exists else EXIT_USAGE


def _no_event_logs(logs: dict[str, Path], read: set[str], gathered) -> dict[str, str]:
    """Of the logs `read` that gave no turn, those that hold no event (random bytes, another
    program's file), each with its one line: named as damaged, not taken for a session that
    did nothing. Only their heads are looked at (session_log.holds_no_event)."""
    quiet = read - {row.session_id for row in gathered.rows} - {
        turn.session_id for turn in gathered.in_flight}
    return {session_id: no_event_problem(session_id) for session_id in sorted(quiet)
            if holds_no_event(logs[session_id])}


def _matched_nothing(args: argparse.Namespace, logs: dict[str, Path], read: int, rows_of) -> int:
    """The filters chose no turn: what there is instead (no_match.py), and exit 1, nothing
    to report."""
    from .no_match import what_there_is  # here: only a report that matched nothing needs it

    filters = filters_of(args)
    lines = what_there_is(filters, sorted(logs), rows_of)
    print(_no_turns_hint(len(logs), read, filters), *(f"  {line}" for line in lines),
          sep="\n", file=sys.stderr)
    return EXIT_NO_SESSIONS


def _no_turns_hint(found: int, read: int, filters: dict[str, str]) -> str:
    if filters:
        chosen = printable(" ".join(f"--{k} {v}" for k, v in filters.items()))
        return (f"No turn matches {chosen} "
                f"({read} of {counted(found, 'session log')} read).")
    return (f"{counted(found, 'session log')} read, none with a HydraFusion turn: HydraFusion "
            "routes only sessions that use the `hydrafusion` (auto) model.")


def _width(environ: dict[str, str]) -> int:
    """A terminal's whole width; piped (or a terminal that gives no width), $COLUMNS when it
    is a number, as `COLUMNS=60 report | less` asks, else PIPED_WIDTH; from NARROWEST to
    WIDEST."""
    columns = os.get_terminal_size(sys.stdout.fileno()).columns if sys.stdout.isatty() else 0
    if not columns:
        given = environ.get("COLUMNS", "").strip()
        # isdecimal, not isdigit: `²` is a digit, and no number to int.
        columns = int(given) if given.isdecimal() else PIPED_WIDTH
    return max(NARROWEST, min(WIDEST, columns))


def _count(text: str) -> int:
    """A whole number of 0 or more, for argparse (which turns the ValueError into usage)."""
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (0 or more)")
    return int(text)


def _jobs(text: str) -> int:
    """A number of processes: a whole number of 1 or more, for argparse."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of processes (1 or more)")
    return int(text)


def _shows_progress(args: argparse.Namespace) -> bool:
    """Whether reading shows its progress: for the table on a terminal alone. Piped, or
    as a document for a program (--format, --html), the output is not watched, and a line
    drawn on the terminal over a pager's screen would garble it."""
    return (args.format == "table" and not args.html and sys.stdout.isatty()
            and sys.stderr.isatty())
