"""`python -m tailer scrub SRC DST`: copy session logs with only what is safe to share.

A user who wants to report a problem, or to give us sessions for the demo, should be able to
hand over their logs without handing over their work. A Copilot CLI log holds prompts,
answers, tool arguments and output, file paths and repository names; the scrubber writes a
copy that holds only the shape of each fusion turn, which is all the tailer needs:

- every event keeps its envelope (type, id, timestamp, parentId), so the file is still a
  log the tailer reads in the same order and with the same timing;
- fusion events keep their metadata (pattern, models, phase kinds, verdicts, statuses,
  durations, token and credit figures, reason codes), never their text (`content`,
  `projectionMessage`, `stagedTerminal`, `message`, `errorMessage`, the router's `hint`,
  `ruleName` and `scores`) nor the paths of a change checkpoint;
- `session.start` keeps the CLI version and selected model, not its context (cwd, git root,
  repository, branch); `session.shutdown` its numeric totals, per model, provider and the
  main agent, and its accounting snapshot's, never the paths of its code changes;
  `session.usage_record` each call's figures (its credits `copilotUsage.totalNanoAiu`, not
  the itemized `tokenDetails`), leg and the names of the tools it asked for, not request
  ids; tool calls their ids, tool names and success, never their arguments,
  output or error;
- every other event type (prompts, messages, permissions) keeps `data: {}`: the line stays,
  so the log's rhythm stays, but nothing of it.

The per-type list of fields lives in tailer/copilot/scrub_tables.py (`SCRUB_DATA`), beside the
parser's, in the only folder that knows the log's field names. A value in a kept field survives only if it is a number, a
boolean, or a string that is a code of the field's kind (tailer/codes.py: an enum value, a
model or tool name, a version); any other string becomes `other`, and an entry of a map
keyed by model or tool names whose name is no such name is dropped.

Ids are replaced, consistently across the sessions scrubbed (a copy of a session keeps
its turns' ids, and is counted once as in SRC), so nothing links a shared file to its
original: the session id (folder name, `sessionId`, the keys of a shutdown's accounting
watermarks) and event ids get fresh uuids, each `fusionId` a fresh `fusion-<uuid>` that
every id derived from it (`<fusionId>:phase:0`, `<fusionId>:route`, ...) follows, and tool
call ids fresh uuids. The new ids come from a
seeded random generator, so the same input and seed always give the same bytes; the default
seed is a digest of the input, which nobody else has. (Give a seed of your own only for
reproducible fixtures: whoever knows it could check a guessed original session id against
the new one.) Lines that are not a JSON object with a type and a timestamp
are dropped and counted; the summary gives counts only, never a line's text.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import re
import shutil
import sys
from pathlib import Path
from typing import Callable, Iterator

from . import stops
from ..copilot import event_values, scrub_tables
from ..codes import CodeKind
from ..copilot.scrub_tables import Kept
from ..copilot.files import LOG_NAME, find_logs
from ..copilot.lines import NotARegularFile, open_regular
from ..path_options import missing_folders
from ..printable import printable
from ..records import field, record
from ..stdout_gone import stdout_to_devnull
from ..wording import counted
from ..copilot.problems import folder_problem, no_event_problem
from ..turns.session_log import SessionLog, holds_no_event
from ..uuids import random_uuid

EXIT_NOTHING = 1  # docs/REPORT.md, "Exit codes"
EXIT_USAGE = 2
_MAX_TEXT = 200
# What a CLI-made id suffix looks like (`phase:0`, `judge`, `critic:1`, `commit:0`): anything
# else after a fusion id is replaced too, since it might not be an id.
_ID_SUFFIX = re.compile(r"[A-Za-z0-9_-]{1,40}(?::[A-Za-z0-9_-]{1,40}){0,3}")


class IdMap:
    """Fresh ids for old ones: the same old id always gets the same new id.

    `pin` fixes a replacement in advance, so a caller can splice a rewritten event into a
    log of its own (the demo uses it to chain replayed turns onto its session).

    `known`, the replacements made so far, may be shared by the maps of several sessions:
    a copy of a session's folder (cp -r ID ID.bak) holds its turns again, known by their
    ids, and replaced apart they would be other turns to every command reading the copy.
    """

    def __init__(self, rng: random.Random, known: dict[tuple[str, str], str] | None = None):
        self._rng = rng
        self._new = {} if known is None else known

    def replace(self, kind: str, old: str) -> str:
        if kind != Kept.FUSION_ID:
            return self._fresh(kind, old, self._uuid)
        fusion_id, colon, suffix = old.partition(":")
        new = self._fresh(kind, fusion_id, lambda: f"fusion-{self._uuid()}")
        if not colon:
            return new
        if not _ID_SUFFIX.fullmatch(suffix):
            suffix = self._fresh("suffix", suffix, lambda: self._uuid()[:8])
        return f"{new}:{suffix}"

    def pin(self, kind: str, old: str, new: str) -> None:
        self._new[kind, old] = new

    def _fresh(self, kind: str, old: str, make: Callable[[], str]) -> str:
        key = (kind, old)
        if key not in self._new:
            self._new[key] = make()
        return self._new[key]

    def _uuid(self) -> str:
        return seeded_uuid(self._rng)


def seeded_uuid(rng: random.Random) -> str:
    """A version 4 UUID of 128 bits drawn from `rng`: the same ids for the same seed."""
    return random_uuid(rng.getrandbits(128).to_bytes(16, "big"))


def read_events(session: SessionLog) -> Iterator[dict | None]:
    """Each line of a log as a JSON object with a type and a valid timestamp, else None.

    The lines come through the log's SessionLog, so the scrub reads a log as every command
    does (its damage and its problem counted and named alike). Blank lines are skipped; an
    oversized line is None (its bulk is not metadata); a last line without its newline may
    be half-written, so it is not a line yet and is not handed out.
    """
    for read in session.read():
        line = read.line.data.strip(b"\0 \t\r")
        if line:
            yield None if read.line.oversized else _event_object(line)


def _event_object(line: bytes) -> dict | None:
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
        return None
    if event_values.parse_timestamp(obj.get("timestamp")) is None:
        return None
    return obj


def _as_written(timestamp: str) -> str:
    return timestamp


def scrub_event(obj: dict, ids: IdMap, retime: Callable[[str], str] = _as_written) -> dict:
    """The part of one event (as read_events gives it) that may be shared.

    `retime` maps each kept timestamp; the scrubber keeps them as written.
    """
    data_fields = scrub_tables.SCRUB_DATA.get(obj["type"], {})
    event = _keep(obj, {**scrub_tables.SCRUB_ENVELOPE, "data": data_fields}, ids, retime)
    if not isinstance(event.get("data"), dict):
        event["data"] = {}
    return event


def _keep(obj: dict, fields: dict, ids: IdMap, retime: Callable[[str], str]) -> dict:
    kept = {}
    for name, value in obj.items():
        how = fields.get(name)
        if how is None:
            name, how = _by_name(fields, name, ids)
        if how is None:
            continue
        if value is None:
            kept[name] = None
        elif isinstance(how, dict):
            if isinstance(value, dict):
                kept[name] = _keep(value, how, ids, retime)
        elif isinstance(how, list):
            if isinstance(value, list):
                kept[name] = [_keep(item, how[0], ids, retime)
                              for item in value if isinstance(item, dict)]
        elif isinstance(value, (bool, int, float)):
            if how == Kept.VALUE or isinstance(how, CodeKind):
                kept[name] = value
            elif how == Kept.EPOCH_MS and type(value) is int:
                kept[name] = _retimed_ms(value, retime)
        elif isinstance(how, CodeKind):
            if isinstance(value, str):
                kept[name] = how.accept(value) or value  # an empty string stays one
        elif isinstance(value, str) and len(value) <= _MAX_TEXT and how != Kept.VALUE:
            kept[name] = retime(value) if how == Kept.TIMESTAMP else ids.replace(how, value)
    return kept


def _by_name(fields: dict, name: str, ids: IdMap) -> tuple[str, object]:
    """An entry of a map keyed by names: the name it is kept under (a session id replaced as
    every mention of it is), and how its value is kept, None when its name is no such name."""
    if Kept.ANY_SESSION in fields:
        return ids.replace(Kept.SESSION_ID, name), fields[Kept.ANY_SESSION]
    for marker, kind in scrub_tables.NAMES_OF.items():
        if marker in fields and kind.is_code(name):
            return name, fields[marker]
    return name, None


def _retimed_ms(time_ms: int, retime: Callable[[str], str]) -> int:
    """Unix milliseconds moved as `retime` moves a timestamp; a number that is no time of
    the log's (event_values.parse_timestamp's bounds) as written."""
    time_ns = time_ms * 1_000_000
    if not event_values.EARLIEST_NS <= time_ns < event_values.LATEST_NS:
        return time_ms
    moved = event_values.parse_timestamp(retime(event_values.format_timestamp(time_ns)))
    return time_ms if moved is None else moved // 1_000_000


def dumps(event: dict) -> str:
    """One log line, in the CLI's compact style, without its newline."""
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False)


@record
class Summary:
    sessions: int = 0
    events: int = 0
    dropped: int = 0  # lines that are not an event with a type and a timestamp
    damaged: int = 0  # of those, the lines the tailer counts as damaged
    problems: list[str] = field(factory=list)  # logs that could not be read


def source_logs(src: Path) -> tuple[dict[str, Path], dict[str, OSError]]:
    """Session id -> log, and session id -> why its folder or log cannot be read (find_logs):
    SRC is one session folder, or a state dir of them."""
    log = src / LOG_NAME
    if log.is_file():
        return {src.resolve().name: log}, {}
    if log.exists():  # a FIFO, a folder: never opened, named as in a state dir
        return {}, {src.resolve().name: NotARegularFile.at(log)}
    return find_logs(src)


SEED_CHUNK_BYTES = 1 << 20


def default_seed(logs: dict[str, Path]) -> str:
    """A digest of the input, so scrubbing the same logs twice gives the same files. Read a
    piece at a time: a log of GBs is never held whole."""
    digest = hashlib.sha256()
    for session_id, path in sorted(logs.items()):
        digest.update(os.fsencode(session_id) + b"\0")  # a folder's name, in any encoding
        try:
            with open_regular(path) as log:
                while piece := log.read(SEED_CHUNK_BYTES):
                    digest.update(piece)
        except OSError:
            pass  # reading it names the problem
        digest.update(b"\0")
    return digest.hexdigest()


class NothingToScrub(ValueError):
    """SRC holds no session log: nothing to do, as `report` on an empty folder (exit 1)."""


def scrub_tree(src: Path, dst: Path, seed: str | None = None) -> Summary:
    """Write the scrubbed copy of every session under `src` into `dst`/<new id>/events.jsonl.

    `dst` must not exist yet or be empty, so a scrub never mixes with other files. On a
    KeyboardInterrupt (a stop: commands/stops.py) or an OSError (a disk full) what it wrote
    is removed, `dst` left as it was: a copy someone finds there is whole, and the next
    scrub into it is not refused.
    """
    logs, unreadable = source_logs(src)
    if not logs and not unreadable:
        raise NothingToScrub(f"no {LOG_NAME} in {src} or in its folders")
    # Its sessions, under new ids, would be more sessions of SRC to every command after.
    if os.path.commonpath([os.path.realpath(src), os.path.realpath(dst)]) == os.path.realpath(src):
        raise ValueError(f"{dst} is inside {src}: its copies would be read as more sessions; "
                         "give a folder outside it")
    if dst.exists() and any(dst.iterdir()):
        raise ValueError(f"{dst} is not empty")
    if dst.is_symlink() and not dst.exists():
        raise ValueError(f"{dst} is a link to nothing: give a new folder, or remove the link")
    if seed is None:
        seed = default_seed(logs)
    summary = Summary(problems=[folder_problem(session_id, error)
                                for session_id, error in sorted(unreadable.items())])
    missing, written = missing_folders(dst), []  # removed if a stop cuts the scrub short
    try:
        _scrub_logs(logs, dst, seed, summary, written)
    # The first stop alone raises (stops.py): the removal is whole.
    except (KeyboardInterrupt, OSError):
        for folder in written:
            shutil.rmtree(folder, ignore_errors=True)
        for folder in missing:  # only if empty: another scrub may be writing there too
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    return summary


def _scrub_logs(logs: dict[str, Path], dst: Path, seed: str, summary: Summary,
                written: list[Path]) -> None:
    """Scrub each log into `dst`, counting into `summary`; each session folder made is
    added to `written` with its log written whole (stops.held)."""
    known: dict[tuple[str, str], str] = {}  # every session's: see IdMap
    for session_id, path in sorted(logs.items()):
        # Its bytes: a name in another encoding has no UTF-8 (the same seed for one that has).
        ids = IdMap(random.Random(os.fsencode(f"{seed}\n{session_id}")), known)
        session = SessionLog(session_id, path, every_line=True)
        lines = []
        for obj in read_events(session):
            if obj is None:
                summary.dropped += 1
            else:
                lines.append(dumps(scrub_event(obj, ids)) + "\n")
        summary.damaged += sum(session.damage.values())
        if session.problem is not None:
            summary.problems.append(session.problem)
            continue
        if not lines and holds_no_event(path):
            # Random bytes, another program's file: copied, it would be an empty log, no
            # session, that every command after names as damaged.
            summary.problems.append(no_event_problem(session_id))
            continue
        folder = dst / ids.replace(Kept.SESSION_ID, session_id)
        with stops.held():
            folder.mkdir(parents=True)
            written.append(folder)
            (folder / LOG_NAME).write_bytes("".join(lines).encode())  # "\n" on Windows too
        summary.sessions += 1
        summary.events += len(lines)


def main(args: argparse.Namespace) -> int:
    """The `scrub` command: args.src, args.dst (Paths) and args.seed (str or None)."""
    try:
        summary = scrub_tree(args.src, args.dst, args.seed)
    except ValueError as error:
        print(f"hydrafusion-tailer scrub: {printable(str(error))}", file=sys.stderr)
        return EXIT_NOTHING if isinstance(error, NothingToScrub) else EXIT_USAGE
    except OSError as error:  # its str() is "[Errno 2] ...": the file and the reason read better
        # What names no file is a write (a disk full): the copy's, in DST; SRC's errors do.
        where = printable(str(error.filename or args.dst))
        print(f"hydrafusion-tailer scrub: {where}: {error.strerror or type(error).__name__}",
              file=sys.stderr)
        return EXIT_USAGE
    for problem in summary.problems:
        print(f"hydrafusion-tailer scrub: {problem}", file=sys.stderr)
    try:
        print(
            f"scrubbed {counted(summary.sessions, 'session')} into {printable(str(args.dst))}: "
            f"{counted(summary.events, 'event')} kept, {counted(summary.dropped, 'line')} dropped "
            f"({summary.damaged} damaged)"
        )
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader is gone; the copy is whole all the same.
        stdout_to_devnull()
    return 0
