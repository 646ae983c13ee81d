"""What the tailer writes to its own log for each turn (warnings that cannot flood: log_limit).

The per-turn line is what a user greps for to see that the tailer works, so its shape is
fixed: `fusion {id[:20]} pattern=... phases=... models=... aiu=...`, and for a prompt
answered without fusion `ordinary {key[:20]} model=... calls=... tools=... aiu=...`
(`aiu=unknown` when a call's usage record gives no credits). Warnings about damaged lines
name the file and line number and the reason, never the line's text, which may hold a
prompt or an answer.
"""

from __future__ import annotations

import logging

from .turns import Turn

log = logging.getLogger("tailer")


def turn_line(turn: Turn) -> str:
    if turn.ordinary:
        aiu = f"{turn.usage.aiu:.2f}" if turn.credits_known else "unknown"
        return (f"ordinary {turn.fusion_id[:20]} model={turn.main_model} calls={len(turn.calls)}"
                f" tools={len(turn.tools)} aiu={aiu}")
    line = (
        f"fusion {turn.fusion_id[:20]} pattern={turn.pattern} phases={len(turn.legs)}"
        f" models={','.join(turn.models)} aiu={turn.usage.aiu:.2f}"
    )
    if turn.outcome != "completed":
        line += f" outcome={turn.outcome}"
    if turn.route_failure is not None:
        line += f" reason={turn.route_failure.reason or 'unknown'}"
    return line


def log_turn(turn: Turn) -> None:
    level = logging.WARNING if turn.route_failure is not None else logging.INFO
    log.log(level, "%s", turn_line(turn))

