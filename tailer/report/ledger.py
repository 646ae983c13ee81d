"""The report's check of the session logs against the CLI's own ledger of model calls.

The comparing is tailer/turns/ledger_check.py's, as `doctor` does it; what the report adds
is where its side comes from and which sessions it covers. A log's whole-log sums are in the
state reading it left (the cache's entry: SessionLog's context), so a warm report reads no
log for them, and parses those states only when there is a ledger to compare them with.
The sessions compared are the ones the report read (`--session`, and `--since` by when a log
last changed, choose them; --model and --pattern choose turns, not sessions); the ledger's
sessions without a log are those `--session`, `--since` and `--until` want by their calls.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..copilot.ledger import LedgerSession
from ..turns import session_state
from ..turns.ledger_check import LedgerCheck, LogSums, check, log_sums
from .read import Selection


def ledger_check(path: Path | None, states: dict[str, bytes], listed: set[str],
                 selection: Selection) -> LedgerCheck:
    """The sessions of `states` (each read log's state, by session id) against the ledger
    at `path` (None: not checked); `listed` is every session of the state folder."""
    return check(path, lambda: _sums(states), listed,
                 lambda session_id, found: _wanted(selection, session_id, found))


def _sums(states: dict[str, bytes]) -> dict[str, LogSums | None]:
    sums = {}
    for session_id, state in states.items():
        try:
            saved = session_state.log_ledger_of(json.loads(state))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue  # not shaped as saved: the cache is checked where it is loaded
        sums[session_id] = log_sums(*saved)
    return sums


def _wanted(selection: Selection, session_id: object, found: LedgerSession) -> bool:
    """Whether a session of the ledger without a log is one the report covers."""
    if selection.session is not None and not (type(session_id) is str
                                              and selection.wants_session(session_id)):
        return False
    since, until = selection.since_ns, selection.until_ns
    if since is not None and found.last_ns is not None and found.last_ns < since:
        return False
    return not (until is not None and found.first_ns is not None and found.first_ns >= until)
