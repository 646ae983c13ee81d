"""The few inotify calls the session watcher needs (tailer/copilot/watch.py), through ctypes.

Apart from the watcher so that its logic reads without the C layer, and so a platform
without inotify fails in one place: `Inotify()` raises OSError, and the watcher polls.
"""

from __future__ import annotations

import ctypes
import errno
import os
import select
import struct

# From <sys/inotify.h>; the same on every Linux architecture.
IN_MODIFY = 0x2
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x1000000
IN_EXCL_UNLINK = 0x4000000

_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len; then the name
_READ_BYTES = 64 * 1024
# A writer in a tight loop can keep the queue full; stopping after this many reads leaves the
# rest for the next pass instead of never returning.
_READS_PER_PASS = 16


class Inotify:
    """The few inotify calls the watcher needs, through ctypes. Raises OSError if unavailable."""

    def __init__(self) -> None:
        try:
            # dlopen(NULL): the running Python's own symbols include libc's, with glibc and
            # musl alike, and without find_library() running ldconfig.
            libc = ctypes.CDLL(None, use_errno=True)
            init1 = libc.inotify_init1
            self._add_watch = libc.inotify_add_watch
            self._rm_watch = libc.inotify_rm_watch
        except (OSError, AttributeError) as error:
            raise OSError(errno.ENOSYS, "no inotify in the C library") from error
        init1.argtypes = [ctypes.c_int]
        self._add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        self._rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
        fd = init1(os.O_NONBLOCK | os.O_CLOEXEC)  # IN_NONBLOCK, IN_CLOEXEC
        if fd < 0:
            raise _last_error()
        self.fd = fd
        # poll, not select: select cannot wait on a descriptor numbered 1024 or above.
        self._poller = select.poll()
        self._poller.register(fd, select.POLLIN)

    def add_watch(self, path: str, mask: int) -> int:
        wd = self._add_watch(self.fd, os.fsencode(path), mask)
        if wd < 0:
            raise _last_error()
        return wd

    def remove_watch(self, wd: int) -> None:
        # Fails harmlessly when the kernel has dropped the watch already.
        self._rm_watch(self.fd, wd)

    def wait(self, seconds: float) -> None:
        self._poller.poll(seconds * 1000)

    def read_events(self) -> list[tuple[int, int, str]]:
        """Every queued event as (watch, mask, name); name is "" for the watched folder itself."""
        events = []
        for _ in range(_READS_PER_PASS):
            try:
                data = os.read(self.fd, _READ_BYTES)
            except BlockingIOError:
                break
            offset = 0
            while offset < len(data):
                wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
                offset += _EVENT.size
                name = data[offset:offset + length].rstrip(b"\0")
                offset += length
                events.append((wd, mask, os.fsdecode(name)))
        return events

    def close(self) -> None:
        os.close(self.fd)


def _last_error() -> OSError:
    code = ctypes.get_errno()
    return OSError(code, os.strerror(code))
