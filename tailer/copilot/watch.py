"""Tell the daemon which session logs appeared, vanished or may have changed, cheaply.

People keep thousands of session folders, nearly all untouched for days, so opening every
log on every pass burns CPU for nothing. The watcher instead remembers each log's
(size, mtime_ns, inode) and spends its effort where writes are likely:

- Hot logs, changed in the last 10 minutes (or just appeared), are stat'ed on every pass
  (every 0.25 s), so an active session is seen well within a second.
- Cold logs are stat'ed round-robin, a slice per pass, so each is seen about every 30 s and
  a session resumed days later is picked up within a minute.
- The state directory is stat'ed on every pass and listed again when it changed, and in any
  case every 60 s. Listing never stats a folder it already knows.
- Folders without a log yet get the same treatment: the log's path is checked, hot or cold.

On Linux, inotify (through ctypes) reports writes at once: one watch on the state directory
and one per session folder. Polling carries on underneath as a safety net, because file
events do not cross every mount (Docker Desktop bind mounts) and watches run out
(fs.inotify.max_user_watches): hot logs are still stat'ed every pass, cold ones about every
60 s, and folders that could not be watched every 30 s as in polling mode.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import sys
import time
from pathlib import Path
from typing import Callable

from ..records import field, record
from ..wording import counted
from .files import LOG_NAME, listing_order
from .inotify import (IN_CREATE, IN_DELETE, IN_EXCL_UNLINK, IN_IGNORED, IN_MODIFY, IN_MOVE_SELF,
                      IN_MOVED_FROM, IN_MOVED_TO, IN_ONLYDIR, IN_Q_OVERFLOW, Inotify)
from .lines import NotARegularFile
from .problems import folder_problem, state_dir_problem

log = logging.getLogger("tailer")

PASS_INTERVAL_S = 0.25
HOT_FOR_S = 600.0
# One round of the cold sweep. Watched folders are only checked every other round.
SWEEP_ROUND_S = 30.0
RELIST_EVERY_S = 60.0

# Every way a session folder can come and go. A watch follows a moved directory, so the
# state directory moving away is an event of its own.
STATE_DIR_EVENTS = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_MOVE_SELF | IN_ONLYDIR
# Every way the log inside a folder can be created, written, replaced or removed.
FOLDER_EVENTS = (
    IN_CREATE | IN_MODIFY | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE | IN_ONLYDIR | IN_EXCL_UNLINK
)


@record
class Changes:
    """What one `SessionWatcher.changes()` call found.

    A session id is in at most one of the three: a log deleted and created again within one
    call is `touched` (replaced), and one that came and went within a call is not reported.
    `appeared` gives each log's path as text: a Path for each of 10,000 logs cost a watch's
    first drawing some 50 ms, and it reads few of them.
    `looked` holds, for each log that appeared, the watcher's stat of it and the time (unix
    ns) just before it was taken: a caller that would look at every log again may use them
    (a watch's cache check of 10,000 logs).
    """

    appeared: dict[str, str] = field(factory=dict)
    vanished: set[str] = field(factory=set)
    touched: set[str] = field(factory=set)
    looked: dict[str, tuple[os.stat_result, int]] = field(factory=dict)

    def __bool__(self) -> bool:
        return bool(self.appeared or self.vanished or self.touched)

    def appear(self, session_id: str, path: str, status: os.stat_result, seen_ns: int) -> None:
        if session_id in self.vanished:
            self.vanished.discard(session_id)
            self.touched.add(session_id)
        else:
            self.appeared[session_id] = path
            self.looked[session_id] = status, seen_ns

    def vanish(self, session_id: str) -> None:
        self.touched.discard(session_id)
        self.looked.pop(session_id, None)
        if self.appeared.pop(session_id, None) is None:
            self.vanished.add(session_id)

    def touch(self, session_id: str) -> None:
        if session_id not in self.appeared:
            self.touched.add(session_id)


class _Folder:
    """What is remembered of one session folder: kept tiny, as there may be 10,000."""

    __slots__ = ("identity", "wd")

    def __init__(self) -> None:
        # Its log's (size, mtime_ns, inode, device); None while it has none, or while its
        # log is another listed folder's (SessionWatcher._check).
        self.identity: tuple[int, int, int, int] | None = None
        self.wd: int | None = None  # its inotify watch; None when it is only polled


class SessionWatcher:
    """Reports session logs under `state_dir` that appeared, vanished or may have changed.

    `mode` is "inotify" or "polling", for the start-up log line. `clock` (monotonic
    seconds) drives every schedule here: hot, cold, re-listing. Waiting uses real time, so
    with a clock that does not advance on its own call `changes(0)`.

    Long because its schedules are one state: which folders are hot or cold, when the state
    directory is listed again, and which events inotify (tailer/copilot/inotify.py) reported
    decide together what to stat next. The C calls live apart, in inotify.py.
    """

    def __init__(
        self,
        state_dir: Path,
        *,
        clock: Callable[[], float] = time.monotonic,
        use_inotify: bool = True,
    ):
        self.state_dir = state_dir
        self.clock = clock
        self._root = os.fspath(state_dir)
        self._prefix = os.path.join(self._root, "")  # with its trailing separator
        self._inotify: Inotify | None = None
        if use_inotify and sys.platform.startswith("linux"):
            try:
                self._inotify = Inotify()
            except OSError as error:
                log.warning("inotify is unavailable (%s): polling session logs instead",
                            error.strerror)
        self.mode = "inotify" if self._inotify else "polling"
        self._folders: dict[str, _Folder] = {}
        # (inode, device) of each log reported -> its session: a log reached through a
        # second folder (a link, a hard link) is not reported again (files.find_logs).
        self._by_file: dict[tuple[int, int], str] = {}
        self._hot: dict[str, float] = {}  # session id -> when it last changed or appeared
        # inotify watch -> its sessions: one watch, whose wd inotify gives again for the
        # same folder reached through a link.
        self._watched: dict[int, list[str]] = {}
        self._state_wd: int | None = None
        self._state_identity: tuple[int, int, int] | None = None
        self._started = False
        self._next_poll = 0.0
        self._next_relist = 0.0
        self._sweep_order: list[str] = []
        self._sweep_next = 0
        self._sweep_round = 0
        self._sweep_credit = 0.0
        self._swept_at = 0.0
        self._unwatched: list[int] = []  # errno of each watch refused since the last pass
        self._watch_next_pass: list[str] = []  # folders of the first listing, not watched yet
        self._warned_unwatched = False
        # Why the state folder cannot be listed now, in every command's words; None once it
        # is: warned of once, and shown by `report --watch` as long as it lasts.
        self.listing_problem: str | None = None
        # Session folders that cannot be read, or whose log is not a regular file
        # (find_logs), and why: warned of once, until readable again.
        self.unreadable: dict[str, OSError] = {}

    def changes(self, timeout: float) -> Changes:
        """Wait up to `timeout` seconds for something that may have changed, and report it.

        May return early and empty. The first call returns every existing log in
        `appeared` at once; with inotify, the folders it found are watched at the start of
        the next call, which then checks each log again, so that a change in between is
        reported: 10,000 watches would otherwise delay a watch's first drawing by some 50 ms.
        """
        if not self._started:
            self._started = True
            return self._start()
        deadline = self.clock() + timeout
        while True:
            found = self._pass()
            remaining = deadline - self.clock()
            if found or remaining <= 0:
                return found
            wait = min(PASS_INTERVAL_S, remaining)
            if self._inotify:
                self._inotify.wait(wait)
            else:
                time.sleep(wait)

    def close(self) -> None:
        """Drop every inotify watch. The watcher cannot be used afterwards."""
        if self._inotify:
            self._inotify.close()
            self._inotify = None

    def _start(self) -> Changes:
        now = self.clock()
        changes = Changes()
        self._state_dir_changed()
        self._relist(now, changes, watch_folders=False)
        if self._inotify:
            self._watch_next_pass = list(self._folders)
        self._cool_old_folders()
        self._next_poll = now + PASS_INTERVAL_S
        self._swept_at = now
        self._warn_unwatched()
        return changes

    def _pass(self) -> Changes:
        now = self.clock()
        changes = Changes()
        if self._watch_next_pass:
            self._watch_listed(now, changes)
        suspects, relist, overflow = self._read_events() if self._inotify else (set(), False, False)
        polling_due = now >= self._next_poll
        if polling_due:
            self._next_poll = now + PASS_INTERVAL_S
            if self._state_dir_changed() or now >= self._next_relist:
                relist = True
        if relist or overflow:
            self._relist(now, changes)
        if overflow:
            # Events were lost: any folder may have changed in any way.
            suspects = set(self._folders)
        elif polling_due:
            suspects.update(self._hot_folders(now))
            suspects.update(self._sweep_slice(now))
        for session_id in suspects:
            self._check(session_id, now, changes)
        if overflow:
            for session_id, folder in self._folders.items():
                if folder.identity is not None:
                    changes.touch(session_id)
        self._warn_unwatched()
        return changes

    def _read_events(self) -> tuple[set[str], bool, bool]:
        """(folders to check, whether to list the state directory, whether events were lost)."""
        suspects = set()
        relist = overflow = False
        for wd, mask, name in self._inotify.read_events():
            if mask & IN_Q_OVERFLOW:
                overflow = True
            elif wd == self._state_wd:
                relist = True
                if mask & (IN_IGNORED | IN_MOVE_SELF):
                    # Gone or moved away: watch whatever stands at its path when next listed.
                    self._inotify.remove_watch(wd)
                    self._state_wd = None
            elif (session_ids := self._watched.get(wd)) is not None:
                if mask & IN_IGNORED:
                    # The kernel dropped the watch: the folder was deleted, perhaps made
                    # again under the same name, which then needs a watch of its own.
                    del self._watched[wd]
                    for session_id in session_ids:
                        folder = self._folders[session_id]
                        folder.wd = None
                        self._watch(session_id, folder)
                    suspects.update(session_ids)
                elif name == LOG_NAME:
                    suspects.update(session_ids)
        return suspects, relist, overflow

    def _state_dir_changed(self) -> bool:
        """Stat the state directory: a folder made or removed changes its mtime and links."""
        try:
            status = os.stat(self._root)
            identity = (status.st_mtime_ns, status.st_nlink, status.st_ino)
        except OSError:
            identity = None
        changed = identity != self._state_identity
        self._state_identity = identity
        return changed

    def _watch_listed(self, now: float, changes: Changes) -> None:
        """Watch the folders of the first listing (`_start`), each log checked once watched:
        a change made before its watch was added is then reported by the check, any later
        one by inotify."""
        for session_id in self._watch_next_pass:
            folder = self._folders.get(session_id)
            if folder is not None and folder.wd is None:
                self._watch(session_id, folder)
                self._check(session_id, now, changes)
        self._watch_next_pass = []

    def _relist(self, now: float, changes: Changes, *, watch_folders: bool = True) -> None:
        self._next_relist = now + RELIST_EVERY_S
        if self._inotify and self._state_wd is None:
            # Before listing, so that a folder made meanwhile is either listed or reported.
            try:
                self._state_wd = self._inotify.add_watch(self._root, STATE_DIR_EVENTS)
            except OSError:
                pass  # it is stat'ed on every pass anyway
        names = self._list_state_dir()
        if names is None:
            return
        # Forget before adding: a renamed folder keeps its inode, and so its watch.
        for session_id in self._folders.keys() - names.keys():
            self._forget(session_id, changes)
        for session_id in names:
            if session_id not in self._folders:
                self._add_folder(session_id, now, changes, watch_folders)

    def _list_state_dir(self) -> dict[str, None] | None:
        """Names of the session folders, in files.listing_order; None when the directory
        cannot be listed."""
        names = {}
        try:
            with os.scandir(self._root) as entries:
                for entry in sorted(entries, key=listing_order):
                    if entry.name in self._folders or _is_dir(entry):
                        names[entry.name] = None
        except FileNotFoundError:
            self._warn_state_dir("it does not exist")
            return {}  # every session in it is gone
        except OSError as error:
            self._warn_state_dir(error.strerror)
            return None  # cannot tell what is there: keep what is known
        self.listing_problem = None
        return names

    def _add_folder(self, session_id: str, now: float, changes: Changes, watch_folder: bool) -> None:
        folder = _Folder()
        self._folders[session_id] = folder
        if watch_folder:
            self._watch(session_id, folder)
        self._hot[session_id] = now
        self._check(session_id, now, changes)

    def _forget(self, session_id: str, changes: Changes) -> None:
        folder = self._folders.pop(session_id)
        self._hot.pop(session_id, None)
        self.unreadable.pop(session_id, None)
        if folder.wd is not None:
            sharing = self._watched[folder.wd]
            sharing.remove(session_id)
            if not sharing:
                del self._watched[folder.wd]
                self._inotify.remove_watch(folder.wd)
        if folder.identity is not None:
            self._release(folder)
            changes.vanish(session_id)

    def _check(self, session_id: str, now: float, changes: Changes) -> None:
        """Stat one folder's log and report how it differs from what was last seen."""
        folder = self._folders.get(session_id)
        if folder is None:
            return
        seen_ns = time.time_ns()
        # Formatting the path is cheaper than os.path.join: 10,000 logs make it count.
        path = f"{self._prefix}{session_id}{os.sep}{LOG_NAME}"
        try:
            status = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            status = None
        except OSError as error:
            self._cannot_read(session_id, error)
            return
        if status is not None and not stat.S_ISREG(status.st_mode):
            # A FIFO in its place, say: named as find_logs names it, and its log, if it had
            # one, gone.
            self._cannot_read(session_id, NotARegularFile.at(path))
            status = None
        else:
            self.unreadable.pop(session_id, None)
        identity = None
        if status is not None:
            identity = (status.st_size, status.st_mtime_ns, status.st_ino, status.st_dev)
            if identity == folder.identity:
                return
            if self._by_file.setdefault(identity[2:], session_id) != session_id:
                identity = None  # another listed folder's log: that session reports it
        if identity is None:
            if folder.identity is not None:
                self._release(folder)
                changes.vanish(session_id)
                self._hot[session_id] = now  # a new log may follow soon
            return
        if folder.identity is None:
            changes.appear(session_id, path, status, seen_ns)
        else:
            if folder.identity[2:] != identity[2:]:
                self._release(folder)
            changes.touch(session_id)
        folder.identity = identity
        self._hot[session_id] = now

    def _cannot_read(self, session_id: str, error: OSError) -> None:
        if session_id not in self.unreadable:
            log.warning("%s", folder_problem(session_id, error))
        self.unreadable[session_id] = error

    def _release(self, folder: _Folder) -> None:
        """The folder's log is no longer its session's: another folder may report it."""
        del self._by_file[folder.identity[2:]]
        folder.identity = None

    def _cool_old_folders(self) -> None:
        """At start every folder has just appeared; only the recently written stay hot.

        File times are wall-clock times, so this is the one place that reads the real clock.
        """
        recent_ns = time.time_ns() - int(HOT_FOR_S * 1e9)
        for session_id in list(self._hot):
            identity = self._folders[session_id].identity
            if identity is not None:
                modified = identity[1]
            else:
                try:
                    modified = os.stat(os.path.join(self._root, session_id)).st_mtime_ns
                except OSError:
                    modified = 0
            if modified < recent_ns:
                del self._hot[session_id]

    def _hot_folders(self, now: float) -> list[str]:
        for session_id in [s for s, since in self._hot.items() if now - since >= HOT_FOR_S]:
            del self._hot[session_id]
        return list(self._hot)

    def _sweep_slice(self, now: float) -> list[str]:
        """The cold folders due now, so that each is checked once per SWEEP_ROUND_S."""
        if self._sweep_next >= len(self._sweep_order):
            self._sweep_order = list(self._folders)
            self._sweep_next = 0
            self._sweep_round += 1
        due = self._sweep_credit + len(self._sweep_order) * (now - self._swept_at) / SWEEP_ROUND_S
        self._swept_at = now
        self._sweep_credit = due - int(due)
        start = self._sweep_next
        self._sweep_next = min(start + int(due), len(self._sweep_order))
        due_ids = []
        for session_id in self._sweep_order[start:self._sweep_next]:
            folder = self._folders.get(session_id)
            if folder is None or session_id in self._hot:
                continue
            if folder.wd is not None and self._sweep_round % 2:
                continue  # inotify reports it; this is only the safety net
            due_ids.append(session_id)
        return due_ids

    def _watch(self, session_id: str, folder: _Folder) -> None:
        if not self._inotify:
            return
        try:
            folder.wd = self._inotify.add_watch(f"{self._prefix}{session_id}", FOLDER_EVENTS)
        except OSError as error:
            if error.errno in (errno.ENOSPC, errno.EACCES):
                self._unwatched.append(error.errno)
            # Otherwise (ENOENT, ENOTDIR) it is gone already, and the check that follows
            # says so.
            return
        self._watched.setdefault(folder.wd, []).append(session_id)

    def _warn_unwatched(self) -> None:
        if self._unwatched and not self._warned_unwatched:
            self._warned_unwatched = True
            hint = ""
            if errno.ENOSPC in self._unwatched:
                hint = " (the inotify watch limit is reached: raise fs.inotify.max_user_watches)"
            log.warning(
                "inotify cannot watch %s%s: polling them instead",
                counted(len(self._unwatched), "session folder"), hint,
            )
        self._unwatched.clear()

    def _warn_state_dir(self, reason: str) -> None:
        if self.listing_problem is None:
            log.warning("%s", state_dir_problem(reason))
        self.listing_problem = state_dir_problem(reason)


def _is_dir(entry: os.DirEntry) -> bool:
    """Whether the entry may be a session folder: one that cannot be looked at (a loop of
    links, a folder not to be entered) is, so that its check names why, as find_logs does."""
    try:
        return entry.is_dir()
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True
