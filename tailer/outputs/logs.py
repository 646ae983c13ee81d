"""What the tailer writes to its own log for each turn (warnings that cannot flood: log_limit).

The per-turn line is what a user greps for to see that the tailer works, so its shape is
fixed, as the project's post documents it: `fusion {id[:20]} pattern=... phases=...
models=... aiu=...` (phases: the turn's legs), and for a prompt answered without fusion
`ordinary {key[:20]} model=... calls=... tools=... aiu=...` (`aiu=unknown` when a call's
usage record gives no credits). The first turn of a version
of the router's policy adds `router policy_version=... first seen: plan_version=...
rule_id=... turn {id[:20]} at {start, UTC}` (tailer/outputs/policy_versions.py); past the
first 32 versions, `router: N more policy versions first seen ...` once a day. Warnings
about damaged lines name the file and line number and the reason, never the line's text,
which may hold a prompt or an answer.

Every record is made printable once, where it is formatted (PrintableFormatter), whoever
logged it: a session folder's name, a model or a collector's error body can neither drive
the terminal that shows the log nor forge a line of its own.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone

from ..printable import printable
from ..turns.assembly import Turn

log = logging.getLogger("tailer")


class PrintableFormatter(logging.Formatter):
    """A logging.Formatter whose every line is printable (tailer/printable.py).

    The line of a record (time, level, message) is escaped whole, so a value with a line
    break stays on its record's line. A traceback keeps its lines, for reading, each one
    escaped and indented: a line break in an exception's message can start a line, but not
    one that passes for a record of its own. A line with nothing to escape is left as it
    is, so the per-turn line keeps its shape.
    """

    def formatMessage(self, record: logging.LogRecord) -> str:
        return printable(super().formatMessage(record))

    def formatException(self, ei) -> str:
        return _printable_lines(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        return _printable_lines(super().formatStack(stack_info))


def _printable_lines(text: str) -> str:
    return "\n".join("  " + printable(line) for line in text.split("\n"))


def turn_line(turn: Turn) -> str:
    if turn.ordinary:
        return (f"ordinary {turn.key[:20]} model={turn.main_model} calls={len(turn.calls)}"
                f" tools={len(turn.tools)} {_aiu(turn)}")
    line = (
        f"fusion {turn.key[:20]} pattern={turn.pattern} phases={len(turn.legs)}"
        f" models={','.join(turn.models)} {_aiu(turn)}"
    )
    if turn.outcome != "completed":
        line += f" outcome={turn.outcome}"
    if turn.route_failure is not None:
        line += f" reason={turn.route_failure.reason or 'unknown'}"
    return line


def _aiu(turn: Turn) -> str:
    """`aiu=` the turn's credits; `aiu>=` those known when a call gave none, `aiu=unknown`
    when none is known."""
    if turn.credits_known:
        return f"aiu={turn.usage.aiu:.2f}"
    known = turn.known_nano_aiu
    return f"aiu>={known / 1e9:.2f}" if known else "aiu=unknown"


def policy_line(turn: Turn) -> str:
    """The line for a routed turn whose policy version the tailer had never seen."""
    resolved = turn.resolved
    start = datetime.fromtimestamp(turn.start_ns // 10**9, timezone.utc)
    return (f"router policy_version={resolved.policy_version} first seen:"
            f" plan_version={resolved.plan_version or 'unknown'}"
            f" rule_id={resolved.rule_id or 'unknown'} turn {turn.key[:20]}"
            f" at {start:%Y-%m-%dT%H:%M:%SZ}")


def held_policies_line(count: int, newest: str, logged: int, since_s: int | None) -> str:
    """The day's line for the new policy versions past the first `logged`, each of which
    had no line of its own; `since_s`: the last such line (unix seconds), None if none."""
    since = "" if since_s is None else f" since {_utc(since_s)}"
    versions = "version" if count == 1 else "versions"
    return (f"router: {count} more policy {versions} first seen{since}, the newest "
            f"policy_version={newest}; past the first {logged}, new versions are counted "
            "in one line a day")


def _utc(seconds: int) -> str:
    return f"{datetime.fromtimestamp(seconds, timezone.utc):%Y-%m-%dT%H:%M:%SZ}"


def log_turn(turn: Turn) -> None:
    level = logging.WARNING if turn.route_failure is not None else logging.INFO
    log.log(level, "%s", turn_line(turn))

