"""Worker processes of the report's own: forked from it, each handed one job at a time
through a pipe and answering through another, and bound to the report's life by a third.

concurrent.futures.ProcessPoolExecutor gave none of the guarantees below. When a worker was
killed it sent SIGTERM to the others, which a forked worker received with the report's
own handler (SIGTERM as Ctrl-C): a KeyboardInterrupt that the pool's worker loop caught as
a job's error, after which the worker waited for a job for ever and the pool joined it for
ever, so the report hung. Ctrl-C or SIGTERM to the report alone waited, in the pool's
shutdown, for every worker to finish the log it was reading; a report killed left its
workers reading on, then blocked.

Here:
- a worker that dies, by any signal or any exit, ends `Pool.run` at once with WorkerDied:
  its answers' pipe reads as closed (each worker holds only its own pipes' ends);
- leaving the pool's `with`, however (every answer in, WorkerDied, Ctrl-C, SIGTERM), kills
  and reaps every worker, with SIGINT, SIGTERM and SIGHUP held back meanwhile so that a second
  Ctrl-C cannot cut that short: a worker holds nothing an orderly end would save;
- a worker ends by itself when the report ends however it ends (SIGKILL, SIGHUP, a crash):
  the lifeline is a pipe the report never writes to and each worker watches on a thread of
  its own, which sees it closed when the report's last end of it goes, with the report;
- a worker ignores SIGINT (a Ctrl-C at a terminal reaches every process of the group: the
  report acts on it, and ends its workers) and takes the default action of every other
  signal, SIGTERM and SIGHUP included, where the report's handler would have made them
  an exception.

Jobs and answers are pickled, each after its length; the function a worker runs is the one
the pool was made with, which the fork copied, never sent.

A pool made with `progress` has each worker send, every PROGRESS_S while it runs a job,
what that function returns (how far into its job it is), on its pipe of answers, from a
thread of its own: the job's function is never asked. A worker killed part way through
sending it is a worker that died, as any other.
"""

from __future__ import annotations

import _thread
import os
import pickle
import select
import signal
import struct
import time
from typing import Callable, Iterator, NoReturn

_LENGTH = struct.Struct("<Q")
_HELD = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}  # while workers start and end
# Signals the report turns into KeyboardInterrupt (commands/stops.as_interrupt), which a
# worker must take by their default action instead.
_DEFAULT = (signal.SIGTERM, signal.SIGHUP)
PROGRESS_S = 0.2  # between two of a busy worker's reports of its progress


class WorkerDied(Exception):
    """A worker ended before it answered; the message says how (a signal's name, an exit
    status)."""


class CannotStart(Exception):
    """No worker process or pipe could be made: args[0] says why (the OSError's strerror)."""


class JobFailed(Exception):
    """The function raised in a worker: args are the job and the error's class name."""


class Pool:
    """`size` worker processes running `function` on the jobs `run` hands them, started on
    entering its `with` (CannotStart when a pipe or a process cannot be made): leaving it
    kills and reaps them all. Started there and not when made, so that nothing is left to
    end when a stop comes between the two."""

    def __init__(self, size: int, function: Callable, progress: Callable[[], object] | None = None):
        self.size = size
        self.function = function
        self.progress = progress
        self.pids: list[int | None] = []  # None: reaped
        self.jobs_fds: list[int] = []  # this process's end of each worker's pipe of jobs
        self.answers_fds: list[int] = []  # and of its pipe of answers
        self.lifeline = self._lifeline_end = -1  # the workers' end, this process's end

    def __enter__(self) -> Pool:
        try:
            # Held as each pipe is made (here and in _start): a stop whose handler ran as
            # os.pipe returned left both its ends open, in no list that close() reads. Held,
            # it is raised as they are let go, with both ends in one by then.
            previous = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
            try:
                self.lifeline, self._lifeline_end = os.pipe()
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, previous)
            for _ in range(self.size):
                self._start()
        except OSError as error:
            self.close()
            raise CannotStart(error.strerror or type(error).__name__) from None
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def run(self, jobs: list, on_progress: Callable[[object, object], None] | None = None
            ) -> Iterator[tuple[object, object]]:
        """Each job with its answer, as they come, each job to the first worker free, in the
        order given; `on_progress` is given a job and its progress as they come (see the
        module). Raises WorkerDied, JobFailed."""
        waiting = list(reversed(jobs))
        busy = {}  # a worker's answers fd -> its index, the job it is on
        poller = select.poll()
        for index, fd in enumerate(self.answers_fds):
            if waiting:
                busy[fd] = index, self._send(index, waiting.pop())
                poller.register(fd, select.POLLIN)
        while busy:
            for fd, _ in poller.poll():
                index, job = busy[fd]
                done, value = self._message(index)
                if done is None:  # progress: the job runs on
                    if on_progress is not None:
                        on_progress(job, value)
                    continue
                del busy[fd]
                if not done:
                    raise JobFailed(job, value)
                yield job, value
                if waiting:
                    busy[fd] = index, self._send(index, waiting.pop())
                else:
                    poller.unregister(fd)

    def close(self) -> None:
        """Kill and reap every worker, close every pipe."""
        try:
            previous = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
        except KeyboardInterrupt:  # a stop that came just before: raised as they were held
            self.close()
            raise
        try:
            running = [pid for pid in self.pids if pid is not None]
            for pid in running:
                _kill(pid)
            for pid in running:
                os.waitpid(pid, 0)
            for fd in (*self.jobs_fds, *self.answers_fds, self.lifeline, self._lifeline_end):
                if fd != -1:
                    os.close(fd)
            self.pids, self.jobs_fds, self.answers_fds = [], [], []
            self.lifeline = self._lifeline_end = -1
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)

    def _start(self) -> None:
        # Held from before its pipes are made (see __enter__) and across the fork: the
        # child must not run the report's handlers before it has put its own in place.
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
        try:
            job_reader, job_writer = os.pipe()
            self.jobs_fds.append(job_writer)
            theirs = [job_reader]  # the new worker's ends of its pipes: closed once it has them
            try:
                answer_reader, answer_writer = os.pipe()
                self.answers_fds.append(answer_reader)
                theirs.append(answer_writer)
                pid = os.fork()
                if pid == 0:
                    _serve(self.function, self.progress, job_reader, answer_writer,
                           self.lifeline, previous,
                           (*self.jobs_fds, *self.answers_fds, self._lifeline_end))
                self.pids.append(pid)  # before a stop held meanwhile is raised below
            finally:
                for fd in theirs:
                    os.close(fd)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)

    def _send(self, index: int, job):
        try:
            _write(self.jobs_fds[index], job)
        except BrokenPipeError:
            raise WorkerDied(self._death(index)) from None
        return job

    def _message(self, index: int) -> tuple[bool | None, object]:
        """A worker's next message: (True, an answer), (False, its error's name) or (None,
        its progress)."""
        message = _read(self.answers_fds[index])
        if message is None:
            raise WorkerDied(self._death(index))
        return message

    def _death(self, index: int) -> str:
        """How a worker whose pipe closed ended; it is reaped here."""
        pid, self.pids[index] = self.pids[index], None
        _kill(pid)  # it closed its pipes, so it is ending: this only makes sure
        _, status = os.waitpid(pid, 0)
        if not os.WIFSIGNALED(status):
            return f"exit status {os.waitstatus_to_exitcode(status)}"
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"killed by {name}" + (", as when memory runs out" if number == signal.SIGKILL else "")


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _serve(function: Callable, progress: Callable[[], object] | None, jobs: int, answers: int,
           lifeline: int, mask: set, others: tuple[int, ...]) -> NoReturn:
    """A worker's life: answer every job until the pipe of jobs closes; never returns.
    `others`: the descriptors of the report's ends and of other workers' pipes, which it
    must not hold (a pipe reads as closed only when every process has closed its end)."""
    code = 1
    try:
        for fd in others:
            os.close(fd)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for number in _DEFAULT:
            signal.signal(number, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        _thread.start_new_thread(_end_with, (lifeline,))
        # Held while a message is written, so that two never interleave; `busy` says
        # whether a job runs, so that no progress follows its answer.
        sending, busy = _thread.allocate_lock(), [False]
        if progress is not None:
            _thread.start_new_thread(_send_progress, (progress, answers, sending, busy))
        while (job := _read(jobs)) is not None:
            busy[0] = True
            try:
                answer = True, function(job)
            except Exception as error:  # the report names it, and stops
                answer = False, type(error).__name__
            with sending:
                busy[0] = False
                _write(answers, answer)
        code = 0
    finally:
        os._exit(code)  # never the report's exit path: its buffers and handlers are the report's


def _send_progress(progress: Callable[[], object], answers: int, sending, busy: list[bool]) -> None:
    """Send `progress()` every PROGRESS_S while a job runs. Whatever goes wrong here (the
    report gone, the pipe broken) ends the worker: half a message would make the rest of
    its pipe unreadable, and the report then names the worker's end."""
    try:
        while True:
            time.sleep(PROGRESS_S)
            with sending:
                if busy[0]:
                    _write(answers, (None, progress()))
    except BaseException:
        os._exit(1)


def _end_with(lifeline: int) -> None:
    """End this worker when the lifeline closes: the report has ended."""
    while os.read(lifeline, 1):
        pass
    os._exit(1)


def _write(fd: int, value) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    for piece in (_LENGTH.pack(len(data)), data):
        view = memoryview(piece)
        while view:
            view = view[os.write(fd, view):]


def _read(fd: int):
    """The next value on the pipe, or None when it closed before a whole one came."""
    header = _read_exactly(fd, _LENGTH.size)
    if header is None:
        return None
    data = _read_exactly(fd, _LENGTH.unpack(header)[0])
    return None if data is None else pickle.loads(data)


def _read_exactly(fd: int, size: int) -> bytearray | None:
    data = bytearray(size)
    view, got = memoryview(data), 0
    while got < size:
        count = os.readv(fd, [view[got:]])
        if count == 0:
            return None
        got += count
    return data
