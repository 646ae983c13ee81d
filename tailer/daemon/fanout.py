"""Where a finished turn goes: its spans, its counts (live, or as history), its log line.

One place decides, so the reading stage only returns turns and each output only takes them.
A turn that one of them cannot handle (a bug, not bad input: the parser already turned bad
input into damage counts) costs that turn, logged and counted, never the process.
"""

from __future__ import annotations

import logging

from ..outputs.history import History
from ..outputs.logs import log_turn
from ..outputs.metrics import Metrics
from ..outputs.outbox import Outbox
from ..outputs.policy_versions import PolicyVersions
from ..outputs.prompt_links import PromptLinks
from ..outputs.spans import turn_spans
from ..turns.assembly import Turn

log = logging.getLogger("tailer")


class TurnFanout:
    """`links`: when the CLI's own telemetry is followed, a turn's spans go there, to be
    linked with the CLI's trace of the same prompt before they reach the outbox.
    `policies`: the router's policy versions seen, whose first turns are logged."""

    def __init__(self, metrics: Metrics, outbox: Outbox, history: History | None,
                 links: PromptLinks | None = None, policies: PolicyVersions | None = None):
        self.metrics = metrics
        self.outbox = outbox
        self.history = history
        self.links = links
        self.policies = policies or PolicyVersions()

    def send(self, turns: list[Turn], *, reading_history: bool) -> None:
        """Hand each turn on. `reading_history`: the turns come from the start-up reading,
        so those that ended before this run began are counted as history."""
        for turn in turns:
            try:
                self._send(turn, reading_history)
            except Exception as error:  # noqa: BLE001 - one turn, not the process
                self.metrics.count_turn_error()
                log.error("fusion %s: could not be handed on (%s); it is skipped",
                          turn.key[:20], type(error).__name__)

    def _send(self, turn: Turn, reading_history: bool) -> None:
        if self.links is not None:
            self.links.add_turn(turn)
        elif self.outbox.exporting:
            self.outbox.submit(turn_spans(turn))
        end_ms = turn.end_ns // 1_000_000
        history = self.history
        if history is not None and reading_history and history.takes(end_ms):
            history.record(end_ms, self.metrics.count_turn_as_history(turn))
        else:
            self.metrics.count_turn(turn)
        log_turn(turn)
        version = self.policies.note(turn)
        if version is not None:
            self.metrics.count_new_policy(version, turn.start_ns)
