"""`--then CMD`: the user's own status line command, run beside ours on the same stdin.

It runs as the CLI would run it (`/bin/sh -c CMD`, in the same folder), started before our
line is worked out so the two take the time of the slower one. It has `--then-timeout`
seconds; past them, or when its output passes MAX_OUTPUT_BYTES, its whole process group is
killed (it is started in a session of its own, so a pipeline's every process goes). Its
stderr goes nowhere, as ours does. A SIGTERM, SIGHUP or SIGINT to us (the CLI kills a
command it waited 10 s for) ends its group too before we exit. It is started with
os.posix_spawn: the subprocess module would cost the footer some 5 ms of start-up.

Its output is shown as the CLI would show it, but for what a terminal would obey: colours
(SGR sequences) are kept, any other control character is escaped as printable escapes it.
"""

from __future__ import annotations

import os
import time

MAX_OUTPUT_BYTES = 64 << 10
SHELL = "/bin/sh"


class Then:
    """The user's command, started; `output` waits for what it printed."""

    def __init__(self, command: str, stdin: bytes | None, timeout_s: float):
        self.deadline = time.monotonic() + timeout_s
        self.pid: int | None = None
        self.stdout: int | None = None
        read_in, write_in = os.pipe()
        read_out, write_out = os.pipe()
        try:
            os.set_blocking(write_in, False)
            try:  # never more than a pipe holds (where.MAX_INPUT_BYTES): no thread to feed it
                os.write(write_in, stdin or b"")
            except BlockingIOError:
                pass
            os.close(write_in)
            write_in = None
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                self.pid = os.posix_spawn(SHELL, [SHELL, "-c", command], os.environ, setsid=True,
                                          file_actions=[(os.POSIX_SPAWN_DUP2, read_in, 0),
                                                        (os.POSIX_SPAWN_DUP2, write_out, 1),
                                                        (os.POSIX_SPAWN_DUP2, devnull, 2)])
            finally:
                os.close(devnull)
            self.stdout = read_out
            _end_with_us(self)
        except OSError:
            os.close(read_out)
        finally:
            for fd in (read_in, write_out, write_in):
                if fd is not None:
                    os.close(fd)

    def output(self) -> str:
        """What it printed, as text; "" when it failed, timed out or was not started."""
        if self.pid is None or self.stdout is None:
            return ""
        import select

        chunks, size = [], 0
        try:
            while size <= MAX_OUTPUT_BYTES:
                left = self.deadline - time.monotonic()
                if left <= 0 or not select.select([self.stdout], [], [], left)[0]:
                    break
                chunk = os.read(self.stdout, MAX_OUTPUT_BYTES + 1 - size)
                if not chunk:
                    return _shown(b"".join(chunks)) if self._succeeded() else ""
                chunks.append(chunk)
                size += len(chunk)
        finally:
            os.close(self.stdout)
            self.stdout = None
        self.stop()
        return ""

    def _succeeded(self) -> bool:
        """Whether it exited with 0 (as the CLI shows a command's output only then), waited
        for until the deadline."""
        while True:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                return False
            if pid:
                self.pid = None
                return os.waitstatus_to_exitcode(status) == 0
            if time.monotonic() >= self.deadline:
                self.stop()
                return False
            time.sleep(0.002)

    def stop(self) -> None:
        """Kill its process group and reap it."""
        if self.pid is None:
            return
        pid, self.pid = self.pid, None
        try:
            os.killpg(pid, 9)
        except OSError:
            pass
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass


def _end_with_us(then: Then) -> None:
    """On SIGTERM, SIGHUP or SIGINT, kill its group, then exit as killed by that signal."""
    import signal

    def end(number, frame) -> None:
        then.stop()
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)

    for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(number, end)


def joined(theirs: str, ours: str, width: int | None) -> str:
    """Their output, then ours: on their last line when the two fit the width there, else
    on a line of its own below theirs."""
    from .render import visible_width

    if not theirs:
        return ours
    if not ours:
        return theirs
    lines = theirs.split("\n")
    last = lines[-1]
    if width is None or visible_width(_without_colours(last)) + 2 + visible_width(_without_colours(ours)) <= width:
        lines[-1] = f"{last}  {ours}" if last else ours
        return "\n".join(lines)
    return f"{theirs}\n{ours}"


def _shown(output: bytes) -> str:
    """Their output as the CLI shows it (trimmed), colours kept, other controls escaped."""
    import re

    from ..printable import printable

    text = output.decode("utf-8", "replace").strip()
    lines = []
    for line in text.split("\n"):
        pieces = re.split(r"(\x1b\[[0-9;]*m)", line.rstrip("\r"))
        lines.append("".join(piece if index % 2 else printable(piece)
                             for index, piece in enumerate(pieces)))
    return "\n".join(lines)


def _without_colours(text: str) -> str:
    import re

    return re.sub(r"\x1b\[[0-9;]*m", "", text)
