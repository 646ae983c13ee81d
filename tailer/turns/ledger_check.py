"""The logs against the CLI's own ledger of model calls, session by session.

The CLI writes a row per model call to its ledger (tailer/copilot/ledger.py) as it writes a
usage record to the session's log, so for every session both count the same calls, tokens
and credits. The log's side is its whole-log sums (SessionContext.log: every usage record
since the log began, a leg without call records by its own figures), the sums the
`session.shutdown` checks use too. Where they differ, the log lost calls (a crash, a run
that wrote no end) or the tailer misreads it; a session in the ledger without a log is one
whose calls no report of the logs can count.

Credits are compared only where both sides know every call's: a call the CLI had no credit
figure for is null in the ledger and unknown in the log (ModelCall.credits_known), and a
sum that leaves it out proves nothing. `report` and `doctor` show what `check` finds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ..copilot.event_records import Usage
from ..copilot.ledger import (
    SESSION_ID, LedgerLayoutChanged, LedgerProblem, LedgerSession, read_ledger,
)
from ..records import field, record
from ..wording import counted

CHECKED, ABSENT, OFF = "checked", "absent", "off"
NOT_READ, UNKNOWN_LAYOUT = "not_read", "unknown_layout"
# The figures compared, in the order they are named, and their words.
FIGURES = {"calls": "calls", "input_tokens": "input tokens", "output_tokens": "output tokens",
           "cache_read_tokens": "cache read tokens", "cache_write_tokens": "cache write tokens",
           "credits": "credits"}


@record(frozen=True, slots=True)
class Counted:
    """One side's count of a session's model calls; `credits` None where the credits of
    some call are unknown to it."""

    calls: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    credits: float | None


@record(frozen=True, slots=True)
class LogSums:
    """A session log's whole-log sums, and whether it gave every call's credits."""

    usage: Usage
    credits_known: bool


@record(frozen=True, slots=True)
class Differs:
    """A session whose log and ledger count differently: the figures that differ (FIGURES'
    names), and both sides' counts."""

    session_id: str
    figures: list[str]
    ours: Counted
    cli: Counted


@record(frozen=True, slots=True)
class OnlyInLedger:
    """A session the ledger holds calls of, with no log in the state folder."""

    session_id: str
    cli: Counted


@record(slots=True)
class LedgerCheck:
    """What checking the logs against the ledger found.

    `status`: CHECKED; ABSENT (no ledger), OFF (not asked for), NOT_READ or UNKNOWN_LAYOUT
    (`problem` says why, in one line), each with nothing counted."""

    status: str
    problem: str | None = None
    sessions_checked: int = 0  # sessions with a log and rows in the ledger
    differ: list[Differs] = field(factory=list)
    credits_not_compared: int = 0  # of those checked, where some call's credits are unknown
    not_in_ledger: int = 0  # logs with calls the ledger has no row of (older than it, say)
    logs_without_start: int = 0  # logs in the ledger read without their start: no whole sums
    only_in_ledger: list[OnlyInLedger] = field(factory=list)
    only_in_ledger_unnamed: int = 0  # of those, ids not shaped as the CLI's: counted only


def log_sums(log: dict[str, Usage] | None, unpriced: set[str]) -> LogSums | None:
    """A session's whole-log sums from its whole-log ledger and the models of it whose
    credits are unknown (SessionContext.log and log_unpriced); None when the log was not
    read from its start."""
    if log is None:
        return None
    return LogSums(sum(log.values(), Usage()), not unpriced)


def check(path: Path | None, ours: Callable[[], dict[str, LogSums | None]], listed: set[str],
          wanted: Callable[[object, LedgerSession], bool] = lambda session_id, found: True,
          ) -> LedgerCheck:
    """The sessions `ours()` gives (their logs' sums by session id, asked for only when
    there is a ledger to compare them with) against the ledger at `path` (None: OFF).
    `listed` is every session of the state folder (a log, or a folder that could not be
    read): the ledger's other sessions that `wanted` accepts are those without a log."""
    if path is None:
        return LedgerCheck(OFF)
    try:
        cli = read_ledger(path, untimed=listed)  # `wanted` looks at the others' times
    except LedgerLayoutChanged as problem:
        return LedgerCheck(UNKNOWN_LAYOUT, str(problem))
    except LedgerProblem as problem:
        return LedgerCheck(NOT_READ, str(problem))
    if cli is None:
        return LedgerCheck(ABSENT)
    return compare(cli, ours(), listed, wanted)


def compare(cli: dict[object, LedgerSession], ours: dict[str, LogSums | None], listed: set[str],
            wanted: Callable[[object, LedgerSession], bool]) -> LedgerCheck:
    """See `check`; `cli` is the ledger's sessions by id."""
    found = LedgerCheck(CHECKED)
    for session_id, sums in sorted(ours.items()):
        theirs = cli.get(session_id)
        if theirs is None:
            found.not_in_ledger += sums is not None and sums.usage.request_count > 0
            continue
        if sums is None:
            found.logs_without_start += 1
            continue
        found.sessions_checked += 1
        credits_compared = sums.credits_known and not theirs.unknown_credits
        found.credits_not_compared += not credits_compared
        ours_counted = _counted(sums.usage, sums.credits_known)
        cli_counted = _counted(theirs.usage, not theirs.unknown_credits)
        differing = [name for name in FIGURES if name != "credits"
                     and getattr(ours_counted, name) != getattr(cli_counted, name)]
        if credits_compared and sums.usage.nano_aiu != theirs.usage.nano_aiu:
            differing.append("credits")
        if differing:
            found.differ.append(Differs(session_id, differing, ours_counted, cli_counted))
    unlisted = [(session_id, theirs) for session_id, theirs in cli.items()
                if session_id not in listed and wanted(session_id, theirs)]
    for session_id, theirs in unlisted:
        if type(session_id) is str and SESSION_ID.fullmatch(session_id):
            found.only_in_ledger.append(
                OnlyInLedger(session_id, _counted(theirs.usage, not theirs.unknown_credits)))
        else:
            found.only_in_ledger_unnamed += 1
    found.only_in_ledger.sort(key=lambda only: only.session_id)
    return found


def _counted(usage: Usage, credits_known: bool) -> Counted:
    """One side's count, its input uncached as the CLI's `/usage` counts it."""
    return Counted(usage.request_count, usage.uncached_input(), usage.output_tokens,
                   usage.cache_read_tokens, usage.cache_write_tokens,
                   usage.nano_aiu / 1e9 if credits_known else None)


def summary(found: LedgerCheck) -> str:
    """`11 sessions checked against the CLI's ledger, all match`, or how many differ."""
    head = f"{counted(found.sessions_checked, 'session')} checked against the CLI's ledger, "
    return head + (f"{len(found.differ)} differ" if found.differ else "all match")


def described(differs: Differs) -> str:
    """What differs, in words: `calls 2, the ledger 3; credits 1.75, the ledger 3.25`."""
    return "; ".join(f"{FIGURES[name]} {_shown(getattr(differs.ours, name))}, the ledger "
                     f"{_shown(getattr(differs.cli, name))}" for name in differs.figures)


def _shown(value: int | float | None) -> str:
    if value is None:
        return "unknown"
    return f"{value:.9g}" if isinstance(value, float) else str(value)
