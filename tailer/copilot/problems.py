"""How every command names a problem with the session logs: one vocabulary, so `run`,
`report`, `report --watch`, `doctor`, `scrub` and the demo say the same thing the same way.

A message names the session (its folder) and the line number, never a line's text, which
may hold a prompt or an answer.
"""

from __future__ import annotations

import os

from .lines import NotARegularFile


def folder_problem(session_id: str, error: OSError) -> str:
    """A session find_logs, or the watcher, lists no log of: its folder cannot be read, or
    its log is not a regular file, named as when a read finds it so."""
    if isinstance(error, NotARegularFile):
        return log_problem(session_id, error)
    return f"session {session_id}: cannot read its folder: {_reason(error)}"


def log_problem(session_id: str, error: OSError) -> str:
    if isinstance(error, NotARegularFile):
        return f"session {session_id}: its log is not a regular file; skipped"
    return f"session {session_id}: cannot read its log: {_reason(error)}"


def no_event_problem(session_id: str) -> str:
    """A log whose lines are none of them an event: random bytes, another program's file."""
    return (f"session {session_id}: no line of its log is an event (damaged, or not a Copilot "
            "CLI log); skipped")


def state_dir_missing(state_dir) -> str:
    """A state folder `run`, `demo` or `doctor` cannot start without: nothing there, or
    something else (a session's events.jsonl given for the folder)."""
    what = "is not a folder" if os.path.exists(state_dir) else "does not exist"
    return f"state directory {state_dir} {what} (set --state-dir or COPILOT_STATE_DIR)"


def session_folder_given(state_dir) -> str:
    """A state folder that is one session's folder (files.is_session_folder): no session
    in it, and each command says how to name the one it holds."""
    return (f"{state_dir} is one session's folder (it holds events.jsonl), not the folder of "
            f"sessions ({os.path.dirname(os.path.abspath(state_dir))})")


def state_dir_problem(error: OSError | str) -> str:
    reason = error if isinstance(error, str) else _reason(error)
    return f"cannot list the state directory: {reason}"


def line_problem(session_id: str, number: int, reason: str, error_type: str | None = None) -> str:
    if error_type is not None:
        return (f"session {session_id}: line {number} of events.jsonl could not be handled "
                f"({error_type}); skipped")
    return f"session {session_id}: skipped line {number} of events.jsonl: {reason}"


def rewritten_problem(session_id: str) -> str:
    return f"session {session_id}: its log was rewritten or replaced; reading it again"


def _reason(error: OSError) -> str:
    return error.strerror or type(error).__name__
