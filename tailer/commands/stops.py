"""How a stop signal ends `report`, `doctor` and `scrub`: SIGTERM (`timeout`, `kill`) and
SIGHUP (its terminal closed, or the shell that ran it there killed) as Ctrl-C does, with a
KeyboardInterrupt, so that a --watch shows the cursor again, the demo's copy and a scrub cut
short are removed, and the command exits 130 without a traceback, where the default action
would leave them behind.

A KeyboardInterrupt can be raised wherever Python code runs, which three places cannot
take, each met by a burst of stop signals (tests/test_stops.py):
- a second stop in the clean-up the first began: only the first stop raises; the others
  are ignored (a closed terminal sends SIGHUP twice, the shell passing its own on);
- a finalizer (a generator collected, a __del__), where Python drops what is raised,
  printing "Exception ignored": such a stop is raised again at the next Python call;
- a step that must be whole (the demo's copy made and its name kept, or removed:
  shutil.rmtree closes a folder twice when interrupted there): `held`, the stop raised
  once the step is done. Not with the signal mask: Python runs the handler of a signal
  that came just before the mask at the first moment after it, inside the step.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys

STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
                     if hasattr(signal, name))


class _Stops:
    """The stop signals' handler and state while a command runs (`as_interrupt`)."""

    def __init__(self, dropped) -> None:
        self.dropped = dropped  # sys.unraisablehook before ours
        self.owner = os.getpid()
        self.stopped = False  # the first stop came: the command is ending
        self.holding = 0  # steps under way that must be whole
        self.pending = False  # a stop that came during one, raised when the last ends

    def handle(self, signum, frame) -> None:
        if self.stopped:
            return
        if os.getpid() != self.owner:  # a worker forked from the report: its parent ends it
            raise KeyboardInterrupt
        # A handler may run inside another's, before it gets here: one of them raises.
        self.stopped = True
        self.interrupt()

    def interrupt(self) -> None:
        if self.holding:
            self.pending = True
            return
        raise KeyboardInterrupt

    def lost(self, unraisable) -> None:
        """sys.unraisablehook: a stop raised in a finalizer is raised again at the first
        call or return after it (a profile function is told of each); anything else goes
        to the hook before ours."""
        if not isinstance(unraisable.exc_value, KeyboardInterrupt) or os.getpid() != self.owner:
            self.dropped(unraisable)
            return
        here, profile = sys._getframe(), sys.getprofile()

        def again(frame, event, arg) -> None:
            if frame is not here:  # this hook's own return
                sys.setprofile(profile)
                self.interrupt()
        sys.setprofile(again)


_stops: _Stops | None = None  # the command's, while it runs: the signals are the process's


@contextlib.contextmanager
def as_interrupt():
    """The stop signals end what runs inside as Ctrl-C does (see the module)."""
    global _stops
    stops = _stops = _Stops(sys.unraisablehook)
    # One ignored from the start stays so: SIGHUP under nohup, SIGINT in a shell's
    # background job (a Ctrl-C is for the job in front).
    previous = {number: signal.signal(number, stops.handle) for number in STOP_SIGNALS
                if signal.getsignal(number) is not signal.SIG_IGN}
    sys.unraisablehook = stops.lost
    try:
        yield
    finally:
        sys.unraisablehook = stops.dropped
        _stops = None
        if not stops.stopped:  # else its handler stays, ignoring the stops still to come
            for number, handler in previous.items():
                signal.signal(number, handler)


@contextlib.contextmanager
def held():
    """A stop that comes while the step inside runs is raised once it is done. One that came
    just before may still be raised on entering, before the step: a step that must run
    however the command ends is retried on that KeyboardInterrupt."""
    stops = _stops
    if stops is None:
        yield
        return
    stops.holding += 1
    try:
        yield
    finally:
        stops.holding -= 1
        if stops.pending and not stops.holding:
            stops.pending = False
            raise KeyboardInterrupt
