"""Pair each turn with the CLI's own trace of the same prompt, and link the two both ways.

The CLI's telemetry (tailer/outputs/copilot_otel.py) makes one trace per prompt, rooted in an
`invoke_agent` span; the tailer makes one per turn. A turn and a CLI root are the same
prompt when they have the same session (the turn's session id is the root's
`gen_ai.conversation.id`) and their times overlap: the turn from its start (routing's
start, or the prompt) to its last event, the root from its start to its end. Of several
that overlap, the one that overlaps longest wins. Prompts of one session follow one
another, so only the right one overlaps.

Either side may come first. A fusion turn is finished when its rollup is read, a moment
before the CLI ends (and writes) its root span; an ordinary turn is finished only at the
next prompt, long after. So each side waits for the other, up to `wait_s` when it is
recent, and whatever waited too long goes out without its link. These make the link
still come when one side is already gone, and cost nothing where there is no other side:

- our trace and root span ids are derived from the session and fusion ids
  (tailer/outputs/spans.py), so a CLI root can point at a turn that is still open, whose spans do
  not exist yet (`open_turns`);
- a turn waits only while the CLI writes telemetry (a record read in the last ten
  minutes), so where it never does, turns go out at once;
- what is read in one pass waits at least until the pass's end, so a backfill reading
  both sides of old prompts in one pass links them;
- the roots seen last, on both sides, are remembered per session (a few per session, for
  a bounded number of sessions), so a turn finished after its CLI root went out still
  links to it;
- what waits is written to the checkpoint as ready to send, without its link
  (`held()`): a restart loses the link of what was waiting, never its spans.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from typing import Callable

from .copilot_otel import Record, Root, span_unit
from .otlp import Unit
from .spans import span_id, trace_id, turn_spans
from ..turns.assembly import Turn

# How long a recent turn or CLI root waits for the other side. The CLI writes its spans
# when their batch is exported (every few seconds) or when it exits.
WAIT_S = 15.0
# Only what ended this recently waits that long: the other side of older data (a backfill)
# was written long ago, and is linked if it was read in the same pass or before.
RECENT_NS = 120 * 10**9
# A turn waits for the CLI only while the CLI writes telemetry (a record read this
# recently): where it never does, turns are not held back at all.
ACTIVE_S = 600.0
REMEMBERED_PER_SESSION = 16
REMEMBERED_SESSIONS = 2_000


def turn_root(turn: Turn) -> Root:
    start = turn.start_ns
    return Root(turn.session_id, trace_id(turn.session_id, turn.key),
                span_id(turn.session_id, turn.key, "turn"), start,
                max(start, turn.end_ns))


def best_match(root: Root, candidates: list[Root]) -> Root | None:
    """The candidate of the same session whose time overlaps `root`'s longest."""
    found, longest = None, -1
    for candidate in candidates:
        overlap = min(root.end_ns, candidate.end_ns) - max(root.start_ns, candidate.start_ns)
        if candidate.session_id == root.session_id and overlap > longest and overlap >= 0:
            found, longest = candidate, overlap
    return found


class _Remembered:
    """The last roots seen, per session; the least recently used sessions are forgotten."""

    def __init__(self) -> None:
        self._sessions: OrderedDict[str, deque[Root]] = OrderedDict()

    def add(self, root: Root) -> None:
        roots = self._sessions.pop(root.session_id, None)
        if roots is None:
            roots = deque(maxlen=REMEMBERED_PER_SESSION)
        roots.append(root)
        self._sessions[root.session_id] = roots
        while len(self._sessions) > REMEMBERED_SESSIONS:
            self._sessions.popitem(last=False)

    def of(self, session_id: str) -> list[Root]:
        return list(self._sessions.get(session_id, ()))


class PromptLinks:
    """Takes finished turns (`add_turn`) and the CLI's span records (`add_cli`, as
    cli_otel.convert made them); hands out our traces and the CLI's span units, linked
    where a pair was found (`take`).

    `open_turns(session_id)` gives the turns of a session still open in the reading stage.
    """

    def __init__(self, open_turns: Callable[[str], list[Turn]], *, wait_s: float = WAIT_S,
                 clock: Callable[[], float] = time.monotonic,
                 now_ns: Callable[[], int] = time.time_ns):
        self._open_turns = open_turns
        self._wait_s = wait_s
        self._clock = clock
        self._now_ns = now_ns
        self._turns = _Remembered()
        self._cli = _Remembered()
        self._cli_read_at = float("-inf")
        self._waiting_turns: dict[str, tuple[Turn, Root, float]] = {}
        self._waiting_cli: dict[str, tuple[Record, Root, float]] = {}
        self._traces: list[list[Unit]] = []
        self._cli_units: list[Unit] = []

    def add_turn(self, turn: Turn) -> None:
        root = turn_root(turn)
        self._turns.add(root)
        for key, (record, cli_root, _) in list(self._waiting_cli.items()):
            if best_match(cli_root, [root]) is not None:
                del self._waiting_cli[key]
                self._send_cli(record, root)
        cli_root = best_match(root, self._cli.of(root.session_id))
        if cli_root is not None:
            self._traces.append(turn_spans(turn, cli_root))
        else:
            active = self._clock() - self._cli_read_at < ACTIVE_S
            self._waiting_turns[root.trace_id] = (turn, root, self._deadline(root, active))

    def add_cli(self, record: Record) -> None:
        """One span record of the CLI's export (metrics do not pass here)."""
        self._cli_read_at = self._clock()
        root = record.root
        if root is None:
            self._send_cli(record, None)
            return
        self._cli.add(root)
        for key, (turn, turn_root_, _) in list(self._waiting_turns.items()):
            if best_match(turn_root_, [root]) is not None:
                del self._waiting_turns[key]
                self._traces.append(turn_spans(turn, root))
        ours = best_match(root, self._turns.of(root.session_id) + self._open_roots(root))
        if ours is not None:
            self._send_cli(record, ours)
        else:
            self._waiting_cli[record.key] = (record, root, self._deadline(root))

    def expire(self, everything: bool = False) -> None:
        """Let what waited past its time (or, at the end of a run, everything) go unlinked."""
        now = self._clock()
        for key, (record, root, _) in list(self._waiting_cli.items()):
            ours = best_match(root, self._open_roots(root))  # opened since, maybe
            if ours is not None:
                del self._waiting_cli[key]
                self._send_cli(record, ours)
        for key, (turn, _, deadline) in list(self._waiting_turns.items()):
            if everything or now >= deadline:
                del self._waiting_turns[key]
                self._traces.append(turn_spans(turn))
        for key, (record, _, deadline) in list(self._waiting_cli.items()):
            if everything or now >= deadline:
                del self._waiting_cli[key]
                self._send_cli(record, None)

    def take(self) -> tuple[list[list[Unit]], list[Unit]]:
        """Our traces and the CLI's span units ready to send, each once."""
        traces, units = self._traces, self._cli_units
        self._traces, self._cli_units = [], []
        return traces, units

    def held(self) -> tuple[list[list[Unit]], list[Unit]]:
        """What is waiting, as it would go out unlinked: the checkpoint keeps it so."""
        traces = [turn_spans(turn) for turn, _, _ in self._waiting_turns.values()]
        return traces, [span_unit(record) for record, _, _ in self._waiting_cli.values()]

    def _open_roots(self, root: Root) -> list[Root]:
        return [turn_root(turn) for turn in self._open_turns(root.session_id)]

    def _send_cli(self, record: Record, link: Root | None) -> None:
        self._cli_units.append(span_unit(record, link))

    def _deadline(self, root: Root, active: bool = True) -> float:
        """Until when a side waits: a while when it is recent (and, for a turn, the CLI
        writes telemetry), else until the next `expire()`, the end of the pass that read
        it (the other side of old data is found if it was read in the same pass or
        before)."""
        recent = active and self._now_ns() - root.end_ns < RECENT_NS
        return self._clock() + (self._wait_s if recent else 0.0)
