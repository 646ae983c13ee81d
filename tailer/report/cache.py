"""The report's cache: what reading each session log gave, so the next report reads only the
bytes appended since.

One file per state folder, in `$XDG_CACHE_HOME/hydrafusion/report/` (else
`~/.cache/hydrafusion/report/`), named by checksums of the folder's path: the path itself is
written nowhere. The folder is made 0700 and the file 0600. Per session log it holds a
`LogEntry`:

- the log's identity when it was read (device, inode, size, modification and change
  times) and when that was looked at;
- where reading stopped and the open turns there, in the daemon's own saved form
  (tailer/turns/session_state.py): the position with the digest of the bytes before it,
  the open turns' records, the keys of the finished turns, the ledgers; kept as its JSON,
  parsed only where the log is read on;
- the rows of the turns it finished (rows.turn_data, in no time zone), the rows its open
  turns give when finished as they stand, the CLI's totals checked, the damaged lines.

Metadata only: what the report's JSON shows and what the daemon's checkpoint keeps.

The file is a header line (what it is, the tailer's version, the cache format, the length
of the entries, the CRC-32 of the entries, the CRC-32 of the texts); the entries, a line of
JSON each, in which the log's state and each turn's JSON as the report prints it
(rows.TurnJson, with its model calls and tools most of the bytes) are there by their
lengths only; then the texts one after another, an entry's state first. Loading it is one
parse of the entries while another core checks the texts' CRC (the two took about as
long), the texts never parsed nor copied, and a log is then looked at with one stat: a
warm report of thousands of sessions costs little more than listing them. Saving it
writes again, as they were read, the lines of the entries it did not change: after a new
turn in a few logs of a month, encoding the others again was most of a save.

It trusts only itself. It lives in a folder only the user writes, and is read only when it
is a regular file (tailer/private_files.py): in a folder of another user, one others may
write, or a link, it is neither read nor written (one line on stderr); a FIFO, a socket or
a link at its path is never opened, and is replaced. Every value of every entry is checked
as it is loaded (`checked`), so no content can make a report fail. A file that cannot be
read, is damaged (a CRC says so, or a value is none a report makes), is not a regular file
of the user's alone (another user's, or one others may write: the line says which), is
larger than any save writes (refused by its size, unread) or comes from another version
is ignored with one line on stderr and made again. It is
replaced in one step (tailer/atomic_file.py), so two reports at once each read a whole
file; the last to finish wins, and each file is right, since every entry is checked
against its log before it is trusted.

Bounded: sessions no longer in the state folder are dropped; past MAX_BYTES, the sessions
whose logs changed longest ago are left out (and read from their start next time); past
MAX_FILES state folders, the file written longest ago is deleted, and so are the temporary
files of saves that were killed: never a file whose name is not one the cache gives
(CACHE_NAME).
"""

from __future__ import annotations

import _thread
import itertools
import json
import mmap
import operator
import os
import re
import time
import zlib
from pathlib import Path
from typing import Callable

from ..records import field, record
from .. import __version__
from ..private_files import NotARegularFile, PrivateFolder
from ..saved_state import finite, mapping, parsed, sequence, text, whole
from .checks import Check
from .rows import PRINTED_AT, check_turn_rows

KIND = "hydrafusion report cache"
FORMAT = 11
MAX_BYTES = 128 << 20
# The header line's bytes at most (it is some 160): a file longer than MAX_BYTES and this
# is none a save wrote, and is refused by its size, unread (a sparse file of terabytes).
MAX_HEADER_BYTES = 4096
MAX_FILES = 4
MAPPED = os.name == "posix"  # see _contents
# A log modified this close before it was looked at may change again within the file
# system's time granularity, leaving the same time and size: it is checked by reading.
RECENT_NS = 2_000_000_000


def cache_file(environ: dict[str, str], state_dir: Path) -> Path | None:
    """Where the cache of `state_dir` lives; None when there is no home to put it in."""
    base = environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # the XDG rule: a relative value is ignored
        home = environ.get("HOME") or environ.get("USERPROFILE")
        if not home:
            return None
        base = os.path.join(home, ".cache")
    # realpath, not Path.resolve: the same path, but a loop of links is no RuntimeError (the
    # report then says what is wrong with the folder as it looks at it).
    path = os.fsencode(os.path.realpath(state_dir))
    # Checksums are enough (and spare every report hashlib's OpenSSL): were two folders'
    # names the same, each report would find the other's sessions gone and drop them.
    name = f"{zlib.crc32(path):08x}{zlib.adler32(path):08x}"
    return Path(base, "hydrafusion", "report", f"{name}.json")


# The names cache_file gives: the only files of the folder the cache ever removes.
CACHE_NAME = re.compile(r"[0-9a-f]{16}\.json")


def identity(path: Path) -> tuple[list[int], int]:
    """The log's device, inode, size, modification and change times, and when they were
    looked at (taken first: a log changed after the look is newer than it). Raises
    OSError."""
    seen_ns = time.time_ns()
    return identity_of(os.stat(path), seen_ns)


def identity_of(found: os.stat_result, seen_ns: int) -> tuple[list[int], int]:
    """identity() of a stat taken at `seen_ns` (unix ns, just before it).

    The change time is the system's: every write and every setting of the modification
    time (touch, os.utime) moves it on, and nothing sets it back, so an edit in place that
    keeps the size and puts the modification time back still changes the identity. (On
    Windows it is the creation time: there only the modification time tells.)"""
    return [found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns], seen_ns


@record(frozen=True, slots=True)
class LogEntry:
    """What the report keeps of one session log; see the module docstring. Frozen, as its
    line is saved again as loaded: a changed entry is a new one (gather._merged)."""

    identity: list[int]  # device, inode, size, modification and change times (ns), before it was read
    seen_ns: int  # when the identity was looked at
    state: bytes  # the JSON of session_state.session_to_state: position, open turns, finished keys
    turns: list[list]  # the finished turns' rows (rows.turn_data)
    open_turns: list[list]  # the open turns' rows, finished as they stand
    checks: list[list]  # the CLI's totals checked (check_data)
    damaged_lines: int
    line: bytes | None = field(default=None, compare=False, repr=False)  # in the file it was loaded from

    def unchanged(self, now: list[int]) -> bool:
        """Whether the log is surely as it was when read, by its identity alone: a change
        since moved its change time, and one made in the same tick of the clock as the
        write before the look is ruled out by that write being old (RECENT_NS)."""
        return now == self.identity and now[3] < self.seen_ns - RECENT_NS

    def texts(self) -> list[bytes]:
        """Its state, then each turn's TurnJson text: what follows the entries in the file."""
        return [self.state, *(row[PRINTED_AT][0] for row in (*self.turns, *self.open_turns))]

    def encoded(self, session_id: str) -> bytes:
        """Its line of the cache's entries: the one it was loaded from, else made, with the
        turns' texts and its state there by their lengths."""
        if self.line is not None:
            return self.line
        turns, open_turns = ([_with_text_length(row) for row in rows] for rows in (self.turns, self.open_turns))
        data = [self.identity, self.seen_ns, len(self.state), turns, open_turns, self.checks,
                self.damaged_lines]
        return json.dumps([session_id, data], separators=(",", ":")).encode("ascii")


def checked(entries: list[LogEntry]) -> None:
    """ValueError unless every value of the `entries` is one a report makes: identities of
    5 whole numbers, whole times and counts, rows of figures (rows.check_turn_rows),
    checks of the CLI's totals as check_data makes them; so that nothing of an entry loaded
    can fail later. (Its state, parsed only where the log is read on or a turn of it is
    running, is checked there: session_state.check.)

    The entries are checked together, by the sets of their types and by their extremes,
    each a loop in C: a watch of 10,000 sessions loads as many entries, and an entry at a
    time cost its start some 70 ms."""
    identities = list(map(_IDENTITY, entries))
    if set(map(tuple, map(map, itertools.repeat(type), identities))) - {(int,) * 5}:
        raise ValueError("a log's identity is not 5 whole numbers")
    counts = [*itertools.chain.from_iterable(map(_COUNTS, identities)),
              *itertools.chain.from_iterable(map(_SEEN_AND_DAMAGED, entries))]
    times = list(itertools.chain.from_iterable(map(_TIMES, identities)))
    if set(map(type, counts)) - {int} or not _within(counts, 0) or not _within(times, -_BOUND):
        raise ValueError("a log's identity, time or count is out of range")
    checks = list(itertools.chain.from_iterable(map(_CHECKS, entries)))
    if set(map(tuple, map(map, itertools.repeat(type), checks))) - {(str, str, str, bool, list)}:
        raise ValueError("a check of the CLI's totals is not shaped as saved")
    for difference in itertools.chain.from_iterable(map(_DIFFERENCES, checks)):  # few: where they differ
        _check_difference(difference)
    check_turn_rows([row for entry in entries for rows in (entry.turns, entry.open_turns) for row in rows])


def _within(numbers: list[int], low: int) -> bool:
    return not numbers or (low <= min(numbers) and max(numbers) < _BOUND)


def _check_difference(difference: object) -> None:
    """ValueError unless `difference` is one of a Check's, as checks.check_figures makes it."""
    if mapping(difference, "a difference").keys() != {"model", "ours", "cli"}:
        raise ValueError("a difference is not a model and two sides")
    text(difference["model"], "a difference's model", limit=None)
    for side in (difference["ours"], difference["cli"]):
        if mapping(side, "a side of a difference").keys() != set(_FIGURES):
            raise ValueError("a side of a difference is not its figures")
        if side["credits"] is not None:  # None: our credits of a model with a call of unknown credits
            finite(side["credits"], "a difference's credits")
        for name in _FIGURES[1:]:
            whole(side[name], "a difference's count", low=-_BOUND)


_IDENTITY = operator.attrgetter("identity")
_COUNTS = operator.itemgetter(0, 1, 2)  # of an identity: device, inode, size
_TIMES = operator.itemgetter(3, 4)  # modification and change times
_SEEN_AND_DAMAGED = operator.attrgetter("seen_ns", "damaged_lines")
_CHECKS = operator.attrgetter("checks")
_DIFFERENCES = operator.itemgetter(4)
_BOUND = 2**63


def _frames_a_turn(printed: memoryview, start_at: int) -> bool:
    """Whether a turn's JSON text is an object with its start's place where the row says
    (turn_text.printed makes it so); what lies between is the CRC's to vouch for."""
    return (_START_KEY_LENGTH <= start_at <= len(printed) and printed[:1] == b"{"
            and printed[-1:] == b"}" and printed[start_at - _START_KEY_LENGTH:start_at] == _START_KEY)


_START_KEY = b',"start":'
_START_KEY_LENGTH = len(_START_KEY)
_FIGURES = ("credits", "calls", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


def check_data(check: Check) -> list:
    """A check of the CLI's totals as the cache keeps it: the figures the report shows."""
    return [check.session_id, check.source, check.scope, check.agrees, check.differences]


def check_from_data(data: list) -> Check:
    """The Check of check_data (checked as it was loaded: `checked`)."""
    session_id, source, scope, agrees, differences = data
    return Check(session_id, source, scope, agrees, differences)


def _decoded(lines: list[bytes], values: list, data: memoryview, start: int) -> dict[str, LogEntry]:
    """The entries of the cache's `lines` (`values`: their JSON), by session id, their texts
    the views of `data` from `start` to its end, one after another: an entry's state, then
    each of its turns' TurnJson (LogEntry.texts). ValueError (or TypeError, IndexError,
    KeyError) when they are not shaped as LogEntry.encoded writes them; what their values
    hold is checked with `checked`.

    Taken apart a field at a time over every entry, most steps a loop in C: an entry at a
    time cost a watch of 10,000 sessions some 70 ms. Each text is a view of the file's
    bytes, never a copy: a month's 42 MB of texts are copied once, from the file to the
    JSON report's output (on a 2-core machine, each copy of them costs some 25 ms)."""
    if _types(values) - {list} or set(map(len, values)) - {2}:
        raise ValueError("a cache entry is not a session id and a list of 7")
    session_ids, fields = zip(*values) if values else ((), ())
    if _types(session_ids) - {str} or _types(fields) - {list} or set(map(len, fields)) - {7}:
        raise ValueError("a cache entry is not a session id and a list of 7")
    identities, seen, state_lengths, turns, open_turns, checks, damaged = zip(*fields) if fields else ((),) * 7
    if _types(turns) - {list} or _types(open_turns) - {list} or _types(checks) - {list}:
        raise ValueError("a log's turns, open turns or checks are not lists")
    rows = list(map(operator.add, turns, open_turns))  # an entry's, in the order of their texts
    lengths = list(itertools.chain.from_iterable(map(_text_lengths, state_lengths, rows)))
    # Lengths of at least 0 that add up to the bytes left: no text asks for more memory.
    if _types(lengths) - {int} or (lengths and min(lengths) < 0) or sum(lengths) != len(data) - start:
        raise ValueError("the texts' lengths are not those of the bytes after the entries")
    bounds = list(itertools.accumulate(lengths, initial=start))
    texts = list(map(data.__getitem__, map(slice, bounds, bounds[1:])))
    state_at = list(itertools.accumulate(map(len, rows), lambda at, count: at + 1 + count, initial=0))[:-1]
    is_turn = [True] * len(texts)
    for at in state_at:
        is_turn[at] = False
    printed = list(map(_PRINTED, itertools.chain.from_iterable(rows)))
    turn_texts = list(itertools.compress(texts, is_turn))
    if not all(map(_frames_a_turn, turn_texts, map(_START_AT, printed))):
        raise ValueError("a turn's JSON is not an object with its start")
    for turn_printed, its_text in zip(printed, turn_texts):
        turn_printed[0] = its_text
    states = [bytes(texts[at]) for at in state_at]  # bytes: a worker that reads the log on is sent it
    return dict(zip(session_ids, map(LogEntry, identities, seen, states, turns, open_turns, checks,
                                     damaged, lines)))


def _text_lengths(state_length: object, rows: list) -> list:
    """An entry's texts' lengths, as LogEntry.encoded writes them: its state's, its turns'."""
    return [state_length, *(row[PRINTED_AT][0] for row in rows)]


def _types(values) -> set[type]:
    return set(map(type, values))


_PRINTED = operator.itemgetter(PRINTED_AT)
_START_AT = operator.itemgetter(1)  # of a TurnJson's fields


def load(path: Path) -> tuple[dict[str, LogEntry], str | None]:
    """The entries of the cache at `path`, and why it was ignored (None: it was not, or
    there is none yet). Raises NotPrivate when its folder is not one to trust
    (tailer/private_files.py): the cache is then neither read nor written."""
    try:
        with PrivateFolder(path.parent, make=False) as folder, folder.read(path.name) as handle:
            if os.fstat(handle.fileno()).st_size > MAX_BYTES + MAX_HEADER_BYTES:
                return {}, "is larger than any the report writes"
            data = _contents(handle)
    except FileNotFoundError:
        return {}, None
    except NotARegularFile as refused:
        return {}, str(refused)
    except OSError as error:
        return {}, f"cannot be read ({error.strerror})"
    return _read(data)


def _contents(handle) -> mmap.mmap | bytes:
    """The whole file, mapped where the system allows it: a warm report's texts are then
    the page cache's own bytes, neither read into memory first (a month's 47 MB cost some
    25 ms to read) nor copied after. A cache is only ever replaced, never written in place
    (tailer/atomic_file.py), so the mapped file stays whole while mapped: another report's
    save makes a new file, and the mapped one lives on, unlinked, as long as its texts do.
    On Windows a mapped file could not be replaced, so there it is read (MAPPED)."""
    if not MAPPED:
        return handle.read()
    try:
        return mmap.mmap(handle.fileno(), 0, prot=mmap.PROT_READ)
    except ValueError:  # an empty file cannot be mapped
        return b""


def _read(contents: mmap.mmap | bytes) -> tuple[dict[str, LogEntry], str | None]:
    """The entries of the cache's `contents`, each turn's text a view of them."""
    header_end = contents.find(b"\n", 0, MAX_HEADER_BYTES) + 1
    data = memoryview(contents)
    try:
        head = mapping(parsed(bytes(data[:header_end])), "the cache's header")
    except ValueError:
        return {}, "is damaged"
    if head.get("kind") != KIND:
        return {}, "is damaged"
    if head.get("version") != __version__ or head.get("format") != FORMAT:
        return {}, "was written by another version of the tailer"
    try:
        index_end = header_end + whole(head.get("index_bytes"), "the length of the cache's entries",
                                       len(data) - header_end)
    except ValueError:
        return {}, "is damaged"
    index = bytes(data[header_end:index_end])
    if f"{zlib.crc32(index):08x}" != head.get("crc32"):
        return {}, "is damaged"
    texts_crc = _crc_elsewhere(data[index_end:])
    entries = _entries(index, data, index_end)
    if texts_crc() != head.get("texts_crc32") or entries is None:
        return {}, "is damaged"
    return entries, None


def _entries(index: bytes, data: memoryview, texts_start: int) -> dict[str, LogEntry] | None:
    """The entries of `index`, their texts the rest of `data` from `texts_start`; None when
    they are not shaped as `save` writes them."""
    try:
        # Split at each newline alone, which also tells that the last line ends with one:
        # splitlines() needed a count of them too, and the two were a tenth of the load.
        lines = index.split(b"\n")
        if lines.pop():
            return None
        # One parse of every line: 10,000 calls of json.loads cost a fifth more.
        values = sequence(parsed(b"[" + b",".join(lines) + b"]"), "the cache's entries")
        if len(values) != len(lines):
            return None
        entries = _decoded(lines, values, data, texts_start)
        checked(list(entries.values()))
    except (ValueError, TypeError, IndexError, KeyError):  # KeyError: a dict where a list was
        return None
    if len(entries) != len(lines):  # an id twice
        return None
    return entries


def _crc_elsewhere(data: memoryview) -> Callable[[], str | None]:
    """The CRC-32 of `data` as the header writes it, worked out in a thread of its own (zlib
    lets go of the GIL for it, so it runs on another core while this one parses the
    entries); call what this returns to wait for it (None: it could not be worked out).
    Waited for before the load returns, whatever it found: no thread outlives it into the
    workers a report forks next. _thread, not threading: importing threading costs 2 ms of
    the start-up every report pays."""
    done = _thread.allocate_lock()
    done.acquire()
    found = []

    def work() -> None:
        try:
            found.append(f"{zlib.crc32(data):08x}")
        except Exception:  # MemoryError, say: then nothing is found, and the cache is not trusted
            pass
        finally:
            done.release()

    _thread.start_new_thread(work, ())

    def result() -> str | None:
        with done:
            return found[0] if found else None

    return result


def save(path: Path, entries: dict[str, LogEntry]) -> None:
    """Replace the cache at `path` with `entries` (at most MAX_BYTES of them); delete the
    caches of other state folders written longest ago, past MAX_FILES, and what saves that
    were killed left. Raises OSError, NotPrivate."""
    pieces = {}  # session id -> its line, its texts
    for session_id, entry in entries.items():
        pieces[session_id] = entry.encoded(session_id) + b"\n", entry.texts()
    size = sum(len(line) + sum(map(len, texts)) for line, texts in pieces.values())
    for session_id in sorted(entries, key=lambda session_id: entries[session_id].identity[3]):
        if size <= MAX_BYTES:
            break
        line, texts = pieces.pop(session_id)
        size -= len(line) + sum(map(len, texts))
    index = b"".join(line for line, _ in pieces.values())
    texts_crc = 0
    for _, texts in pieces.values():
        for printed in texts:
            texts_crc = zlib.crc32(printed, texts_crc)
    header = json.dumps({"kind": KIND, "version": __version__, "format": FORMAT,
                         "index_bytes": len(index), "crc32": f"{zlib.crc32(index):08x}",
                         "texts_crc32": f"{texts_crc:08x}"}).encode("utf-8")

    def write(handle) -> None:
        handle.write(header + b"\n")
        handle.write(index)
        for _, texts in pieces.values():
            handle.writelines(texts)

    with PrivateFolder(path.parent, make=True) as folder:
        folder.replace(path.name, write)
        folder.tidy(CACHE_NAME, MAX_FILES)


def _with_text_length(row: list) -> list:
    printed, *rest = row[PRINTED_AT]
    return [*row[:PRINTED_AT], [len(printed), *rest], *row[PRINTED_AT + 1:]]
