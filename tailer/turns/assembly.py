"""Assemble the turns of one session from its parsed events, and check its sums.

A pure state machine: records in, finished turns out. It knows nothing of files, HTTP or
clocks, so every lifecycle (and every way a lifecycle can break) is a unit test with a
list of records.

A turn is one user prompt. A fusion turn is keyed by its fusionId and holds its routing,
its legs, and the model calls and tool calls each leg made (a call names its leg by the
phase id in its `fusion` block). A prompt answered without fusion is an ordinary turn,
keyed `prompt-{id of its user.message}`, holding the calls and tools that followed it. A
route failure's prompt is answered as an ordinary turn whose calls carry no `fusion` block:
they belong to the failed route's turn and its fallback leg.

The CLI writes a fusion turn's own `user.message` after its `resolved`: that prompt joins
the routed turn. Any other prompt opens an ordinary turn, which ends at the next prompt,
the next routed turn, a new CLI run, the shutdown or the idle timeout.

Each session also keeps a ledger of what its calls cost, per model, since the CLI run
began (`session.start` or `session.resume`) and since the log began; the CLI's own
totals (`session.shutdown`, `session.usage_checkpoint`) are checked against it
(tailer/turns/reconciliation.py).

Only durable events reach the log, and the CLI may crash or be killed anywhere, so a turn
may lack its `resolved`, its rollup or some legs. A turn without a rollup is finished as
`incomplete` when the session moves on (the next `resolved` or `route_failed`), when the
session shuts down, or when the caller decides the session has gone idle
(`finish_open`). Never at `user.message`: the CLI writes a turn's own prompt after its
`resolved`.
"""

from __future__ import annotations

from ..records import field, fields, record, replace
from ..copilot.event_records import (
    CommitStarted, Completed, Event, Handoff, LegEnded, ModelCall, Prompt, REJECTING_VERDICTS,
    Resolved, RouteFailed, RunStarted, SessionEnded, SessionTotals, ToolCompleted, ToolStarted,
    Usage,
)
from .reconciliation import Reconciliation, reconcile

TYPE_CHECKING = False  # typing costs the footer's start-up (copilot/lines.py)
if TYPE_CHECKING:
    from typing import Callable

# How many finished fusion ids a session remembers, so a late or repeated event of a turn
# already reported does not come back as a second turn.
REMEMBERED_FINISHED = 4096

# When a session's log has not changed for this long, its open turn is finished as
# incomplete (`finish_open`): the default of the daemon's --idle-timeout and the report's.
IDLE_TIMEOUT_S = 1800.0


ORDINARY_PREFIX = "prompt-"
# The outcome of a turn whose routing failed (the event is events.ROUTE_FAILED).
ROUTE_FAILED_OUTCOME = "route_failed"
INCOMPLETE_OUTCOME = "incomplete"  # a turn finished without its end: idle, or its log gone

# How a tool span's times were found (`ToolCall.timing`).
LIVE = "live"  # the tool's own start and complete events, written as it ran
BETWEEN_CALLS = "between_calls"  # replayed; placed after the call that asked for it
AT_COMMIT = "commit"  # replayed, and the log does not say when it ran: the replay's time


@record
class ToolCall:
    """One tool run, from its start and complete events (either may be missing)."""

    tool_call_id: str
    name: str | None
    mcp_server: str | None
    mcp_tool: str | None
    success: bool | None
    phase_id: str | None  # the leg that ran it, as its `fusion` block says
    start_ns: int
    end_ns: int
    timing: str = LIVE


@record
class Turn:
    """Everything the log said about one turn, plus the figures derived from it.

    `key` is what the session knows the turn by: the fusionId of a fusion turn, the
    attemptId without `:route` of a route failure, `prompt-{event id}` of an ordinary turn.
    Long because every output reads the same derived figures (models, usage, outcome, the
    committed leg, tool times): each is a short property over the records, kept here so that
    no two outputs derive one differently.
    """

    session_id: str
    key: str
    resolved: Resolved | None = None
    legs: list[LegEnded] = field(factory=list)
    handoffs: list[Handoff] = field(factory=list)
    commit: CommitStarted | None = None
    completed: Completed | None = None
    route_failure: RouteFailed | None = None
    ordinary: bool = False
    prompt: Prompt | None = None
    calls: list[ModelCall] = field(factory=list)
    tool_events: list[ToolStarted | ToolCompleted] = field(factory=list)
    # Placed once by `finish`: a finished turn's tools, and its legs' calls (in the order of
    # `legs`), are read by every output, its legs' calls several times a leg by the metrics.
    _finished_tools: list[ToolCall] | None = field(default=None, repr=False, compare=False)
    _finished_leg_calls: list[list[ModelCall]] | None = field(default=None, repr=False, compare=False)

    @property
    def kind(self) -> str:
        """`fusion`, `ordinary`, or `fallback` (a route failure, answered without fusion)."""
        if self.ordinary:
            return "ordinary"
        return "fallback" if self.route_failure is not None else "fusion"

    @property
    def pattern(self) -> str:
        """The log's pattern; a route failure names none and is `fallback`, its kind, in
        every output (metrics, traces, the log line, the report)."""
        if self.route_failure is not None:
            return "fallback"
        for source in (self.resolved, self.completed):
            if source is not None and source.pattern:
                return source.pattern
        return "unknown"

    @property
    def outcome(self) -> str:
        """An ordinary turn is `completed` when its last call ended without asking for tools."""
        if self.route_failure is not None:
            return ROUTE_FAILED_OUTCOME
        if self.completed is not None:
            return self.completed.outcome or "completed"
        if self.ordinary and self.calls and self.calls[-1].finish_reason != "tool_calls":
            return "completed"
        return INCOMPLETE_OUTCOME

    @property
    def synthetic_model(self) -> str:
        for source in (self.resolved, self.completed, self.route_failure):
            if source is not None and source.synthetic_model:
                return source.synthetic_model
        return "hydrafusion"

    @property
    def policy(self) -> str | None:
        for source in (self.resolved, self.route_failure):
            if source is not None and source.policy:
                return source.policy
        return None

    @property
    def routing_latency_ms(self) -> float | None:
        for source in (self.resolved, self.route_failure):
            if source is not None and source.routing_latency_ms is not None:
                return source.routing_latency_ms
        return None

    @property
    def committed_phase_id(self) -> str | None:
        """The leg whose answer the user got; a route failure's answer is its fallback leg."""
        if self.completed is not None and self.completed.final_source_phase_id:
            return self.completed.final_source_phase_id
        if self.commit is not None and self.commit.source_phase_id:
            return self.commit.source_phase_id
        if self.route_failure is not None and self.legs:
            return self.legs[-1].phase_id
        return None

    @property
    def response_model(self) -> str | None:
        if self.ordinary:
            return self.calls[-1].model if self.calls else None
        if self.completed is not None and self.completed.final_source_model:
            return self.completed.final_source_model
        if self.commit is not None and self.commit.source_model:
            return self.commit.source_model
        committed = self.committed_phase_id
        for leg in self.legs:
            if leg.phase_id == committed:
                return leg.model
        return None

    def is_committed(self, leg: LegEnded) -> bool:
        return leg.phase_id == self.committed_phase_id

    @property
    def legs_usage(self) -> Usage:
        return sum((leg.usage for leg in self.legs), Usage())

    @property
    def calls_usage(self) -> Usage:
        return sum((call.usage for call in self.calls), Usage())

    @property
    def usage(self) -> Usage:
        """The rollup's figures; the legs' sum when the rollup never came; an ordinary
        turn's calls."""
        if self.ordinary:
            return self.calls_usage
        return self.completed.usage if self.completed is not None else self.legs_usage

    def leg_credits(self, leg: LegEnded) -> tuple[int, int]:
        """The leg's known credits (nano-AIU) and how many of its calls they leave out.

        A call's record says whether its credits are known (ModelCall.credits_known). The
        CLI writes a leg's `totalNanoAiu` as the sum of its calls that have credits (0 when
        none has, as 1.0.102 does), so the leg's figure is its known credits, unless none of
        its calls is known: then nothing is, whatever the figure. A leg that gives no figure
        (`credits_given`) counts its calls' known credits, or, without records, leaves all
        its requests out."""
        calls = self.leg_calls(leg)
        unknown = sum(not call.credits_known for call in calls)
        if not calls and not leg.credits_given:
            return 0, leg.usage.request_count
        if unknown and unknown >= max(len(calls), leg.usage.request_count):
            return 0, unknown
        if leg.credits_given:
            return leg.usage.nano_aiu, unknown
        return sum(call.usage.nano_aiu for call in calls if call.credits_known), unknown

    @property
    def unknown_credit_calls(self) -> int:
        """Model calls whose credits the log does not give: those of its legs (a fusion
        turn's calls are counted by leg), or of its calls (an ordinary turn)."""
        if self.ordinary:
            return sum(not call.credits_known for call in self.calls)
        return sum(self.leg_credits(leg)[1] for leg in self.legs)

    @property
    def known_nano_aiu(self) -> int:
        """The credits the log gives: its legs' known ones, or its calls' (an ordinary turn)."""
        if self.ordinary:
            return sum(call.usage.nano_aiu for call in self.calls if call.credits_known)
        return sum(self.leg_credits(leg)[0] for leg in self.legs)

    @property
    def credits_known(self) -> bool:
        """False when a call of the turn gives no credits: its credits are then a lower bound."""
        return self.unknown_credit_calls == 0

    @property
    def usage_mismatch(self) -> bool:
        return self.completed is not None and self.completed.usage != self.legs_usage

    @property
    def review_nano_aiu(self) -> int:
        """Credits spent on legs that did not produce the answer (the known ones)."""
        return sum(self.leg_credits(leg)[0] for leg in self.legs if not self.is_committed(leg))

    @property
    def gate_outcome(self) -> str | None:
        """What a cascade's gate did: `rejected` (a verdict sent the draft back to the
        repair), `accepted` (its judge kept the draft), `unjudged` (no verdict: the judge
        failed or never ran); None for every other pattern, which has no gate. One rule for
        the metrics (hydrafusion_gate_*) and the report's figures of the gate."""
        if self.pattern != "cascade" or self.kind != "fusion":
            return None
        verdicts = [leg.verdict for leg in self.legs if leg.verdict]
        if any(verdict in REJECTING_VERDICTS for verdict in verdicts):
            return "rejected"
        return "accepted" if verdicts else "unjudged"

    @property
    def models(self) -> list[str]:
        """The models of the legs; of the calls for an ordinary turn."""
        if self.ordinary:
            return sorted({call.model for call in self.calls})
        return sorted({leg.model or "unknown" for leg in self.legs})

    @property
    def prompt_model(self) -> str:
        """The model a prompt is counted under (the prompt families' `model` label, the
        report's model column): an ordinary turn's main model, a route failure's fallback,
        else the synthetic model HydraFusion answered as."""
        if self.ordinary:
            return self.main_model
        if self.route_failure is not None:
            return self.route_failure.fallback_model or self.response_model or "unknown"
        return self.synthetic_model

    @property
    def main_model(self) -> str:
        """The model that answered an ordinary turn: the one most of its calls used."""
        counts: dict[str, int] = {}
        for call in self.calls:
            counts[call.model] = counts.get(call.model, 0) + 1
        return max(counts, key=counts.__getitem__) if counts else "unknown"  # ties: the first

    def leg_of(self, phase_id: str | None) -> LegEnded | None:
        """The leg a call or tool served, by its phase id; None: the turn itself.

        A route failure's fallback answer runs as an ordinary turn, so its calls and tools
        carry no phase id: they belong to the fallback leg.
        """
        for leg in self.legs:
            if leg.phase_id == phase_id:
                return leg
        if phase_id is None and self.route_failure is not None and self.legs:
            return self.legs[-1]
        return None

    def leg_calls(self, leg: LegEnded) -> list[ModelCall]:
        """The leg's calls; a finished turn's the list `finish` found, to every caller."""
        if self._finished_leg_calls is not None:
            for known, calls in zip(self.legs, self._finished_leg_calls):
                if known is leg:
                    return calls
        return self._calls_of([leg])[0]

    def _calls_of(self, legs: list[LegEnded]) -> list[list[ModelCall]]:
        # leg_of once per phase id the calls name (a few), not once per call: the report
        # asks this of every leg of every turn, some 60 leg_of calls a turn before.
        owners = {phase_id: self.leg_of(phase_id)
                  for phase_id in {call.phase_id for call in self.calls}}
        return [[call for call in self.calls if owners[call.phase_id] is leg] for leg in legs]

    def calls_difference(self, leg: LegEnded) -> Usage | None:
        """The leg's own figures minus its calls' (request_count: minus the number of
        calls); None when they agree, or when the turn has no calls at all to compare
        (a log written before the CLI recorded calls). Credits are left out (0) when a
        call of the leg gives none: unknown is not a difference."""
        if not self.calls:
            return None
        calls = self.leg_calls(leg)
        difference = leg.usage - sum((call.usage for call in calls), Usage())
        if not all(call.credits_known for call in calls):
            difference = replace(difference, nano_aiu=0)
        return None if difference == Usage() else difference

    @property
    def tools(self) -> list[ToolCall]:
        """The tool calls in log order, each with its times (see ToolCall.timing); while the
        turn is open, found afresh from what it holds so far."""
        if self._finished_tools is not None:
            return self._finished_tools
        return self._tool_calls()

    def finish(self) -> None:
        """Nothing more is added to this turn: its legs' calls and its tools are placed for good."""
        self._finished_leg_calls = self._calls_of(self.legs)
        self._finished_tools = self._tool_calls()

    def _tool_calls(self) -> list[ToolCall]:
        # Each tool call's first start and first end, in the order its first event came: one
        # walk of the events (a month has some 100,000 tools), then one ToolCall each, made
        # by position in the order of its fields.
        pairs: dict[str, list] = {}
        for event in self.tool_events:
            pair = pairs.get(event.tool_call_id)
            if pair is None:
                pair = pairs[event.tool_call_id] = [None, None]
            ended = event.__class__ is not ToolStarted
            if pair[ended] is None:
                pair[ended] = event
        tools = []
        for tool_call_id, (start, end) in pairs.items():
            first = start or end
            if start is None:
                name = mcp_server = mcp_tool = None
            else:
                name, mcp_server, mcp_tool = start.tool_name, start.mcp_server, start.mcp_tool
            if end is None:
                tools.append(ToolCall(tool_call_id, name, mcp_server, mcp_tool, None,
                                      first.phase_id or None, first.time_ns, first.time_ns))
            else:
                tools.append(ToolCall(tool_call_id, name, mcp_server, mcp_tool, end.success,
                                      first.phase_id or end.phase_id, first.time_ns,
                                      max(end.time_ns, first.time_ns)))
        self._place_replayed(tools)
        return tools

    def _place_replayed(self, tools: list[ToolCall]) -> None:
        """Give the committed leg's replayed tools the times the log allows.

        The CLI replays the committed leg's tools when it commits the answer, so their
        timestamps are the commit's. Each of the leg's calls names the tools it asked for
        (`toolCounts`) and the replay keeps their order: when the replayed tools are exactly
        the ones the calls asked for, in that order, each ran between the end of the call
        that asked for it and the start of the next call (or the leg's end). Otherwise they
        stay at the commit's time, marked AT_COMMIT.
        """
        if self.commit is None:
            return
        committed_ns = self.commit.time_ns
        replayed = [tool for tool in tools if tool.start_ns >= committed_ns]
        if not replayed:
            return
        for tool in replayed:
            tool.timing = AT_COMMIT
        leg = self.leg_of(self.committed_phase_id)
        if leg is None:
            return
        calls = sorted(self.leg_calls(leg), key=lambda call: call.time_ns)
        untils = [call_start_ns(call) for call in calls[1:]] + [leg.time_ns]
        windows = [(call, call.time_ns, max(until, call.time_ns))
                   for call, until in zip(calls, untils)]
        position = 0
        placed = []
        for call, start, end in windows:
            asked = replayed[position:position + len(call.tool_requests)]
            if sorted(tool.name or "" for tool in asked) != list(call.tool_requests):
                return
            placed += [(tool, start, end) for tool in asked]
            position += len(asked)
        if position != len(replayed):
            return
        for tool, start, end in placed:
            tool.start_ns, tool.end_ns, tool.timing = start, end, BETWEEN_CALLS

    @property
    def model_sequence(self) -> list[str]:
        return [leg.model or "unknown" for leg in self.legs]

    @property
    def compound(self) -> bool:
        return len(self.models) > 1

    @property
    def verdict(self) -> str | None:
        """The last judge's verdict: the one that decided which answer was kept."""
        verdicts = [leg.verdict for leg in self.legs if leg.verdict]
        return verdicts[-1] if verdicts else None

    @property
    def degraded_reason(self) -> str | None:
        return self.completed.degraded_reason if self.completed is not None else None

    @property
    def end_ns(self) -> int:
        if self.completed is not None:
            return self.completed.time_ns
        return max(event.time_ns for event in self._events())

    @property
    def start_ns(self) -> int:
        """Routing's start for a fusion turn; the prompt for an ordinary one."""
        if self.completed is not None:
            return self.completed.time_ns - _ms_to_ns(self.completed.duration_ms)
        starts = [leg_start_ns(leg) for leg in self.legs]
        starts += [call_start_ns(call) for call in self.calls]
        if self.prompt is not None:
            starts.append(self.prompt.time_ns)
        for source in (self.resolved, self.route_failure):
            if source is not None:
                starts.append(source.time_ns - _ms_to_ns(source.routing_latency_ms or 0))
        if not starts:
            starts = [event.time_ns for event in self._events()]
        return min(starts)

    def judged_leg(self, judge: LegEnded) -> LegEnded | None:
        """The answer a judge looked at: the last root-scope leg that ended before it."""
        candidate = None
        for leg in self.legs:
            if leg is judge:
                return candidate
            if leg.scope == "root" and leg.role != "judge":
                candidate = leg
        return None

    def _events(self) -> list[Event]:
        single = (self.resolved, self.commit, self.completed, self.route_failure, self.prompt)
        return ([e for e in single if e is not None] + self.legs + self.handoffs + self.calls
                + self.tool_events)

    def add_leg(self, leg: LegEnded) -> bool:
        """Keep one leg per phase id: a leg reported as failed and then completed is one leg.

        Returns whether the leg is new.
        """
        for index, known in enumerate(self.legs):
            if known.phase_id == leg.phase_id:
                self.legs[index] = _merge_legs(known, leg)
                return False
        self.legs.append(leg)
        return True


def leg_start_ns(leg: LegEnded) -> int:
    return leg.time_ns - _ms_to_ns(leg.duration_ms)


def call_start_ns(call: ModelCall) -> int:
    """A usage record is written when its call ends."""
    return call.time_ns - _ms_to_ns(call.duration_ms)


def _ms_to_ns(milliseconds: float) -> int:
    return round(milliseconds * 1_000_000)


def _merge_legs(first: LegEnded, second: LegEnded) -> LegEnded:
    """The later report wins, but keeps what only the earlier one said."""
    merged = {}
    for name in (f.name for f in fields(LegEnded)):
        later, earlier = getattr(second, name), getattr(first, name)
        merged[name] = earlier if later in (None, (), Usage()) else later
    return LegEnded(**merged)


@record
class SessionContext:
    """What a session remembers between records besides its open turns (checkpointed).

    `run` and `log` are the ledgers: credits, tokens and calls per model since the CLI run
    began and since the log began, from each call's usage record (a leg that left no call
    records counts with its own figures). None while unknown: reading began mid-run.
    `run_unpriced` and `log_unpriced` name the models of each ledger with a call whose
    credits the log does not give (ModelCall.credits_known): their credits are a lower
    bound, not compared with the CLI's.
    """

    current: str | None = None  # the turn the latest prompt belongs to
    awaiting_prompt: str | None = None  # a routed turn whose user.message is still to come
    run: dict[str, Usage] | None = None
    log: dict[str, Usage] | None = None
    run_unpriced: set[str] = field(factory=set)
    log_unpriced: set[str] = field(factory=set)


class SessionTurns:
    """The open turns of one session, the ids of the ones already finished, its ledgers.

    Over 150 lines because each record kind has its rule for which turn it opens, joins or
    finishes (the CLI writes no turn starts), and those rules share one view of the open turns.
    """

    def __init__(self, session_id: str, open_turns: list[Turn] = (), finished: list[str] = (),
                 context: SessionContext | None = None):
        """`open_turns`, `finished` and `context` come from a checkpoint (see the
        properties of the same names)."""
        self.session_id = session_id
        self._open: dict[str, Turn] = {turn.key: turn for turn in open_turns}
        self._finished: dict[str, None] = dict.fromkeys(finished)  # oldest first
        self.context = context or SessionContext()
        self._checks: list[Reconciliation] = []

    @property
    def open_count(self) -> int:
        return len(self._open)

    @property
    def open_turns(self) -> list[Turn]:
        return list(self._open.values())

    @property
    def finished(self) -> list[str]:
        """The turn keys already reported, oldest first."""
        return list(self._finished)

    def forget_open(self) -> None:
        """Drop the open turns and ledgers: the log is being read again, which rebuilds them."""
        self._open.clear()
        self.context = SessionContext()

    def take_reconciliations(self) -> list[Reconciliation]:
        """The checks of the CLI's totals made since the last call."""
        checks, self._checks = self._checks, []
        return checks

    def feed(self, event: Event) -> list[Turn]:
        """Take one record; return the turns it finished (often none)."""
        if isinstance(event, ModelCall):
            self.call(event)
            return []
        if isinstance(event, (ToolStarted, ToolCompleted)):
            self.tool(event)
            return []
        if isinstance(event, SessionTotals):
            finished = self.finish_open() if isinstance(event, SessionEnded) else []
            context = self.context
            check = reconcile(self.session_id, event, (("run", context.run, context.run_unpriced),
                                                       ("log", context.log, context.log_unpriced)))
            if check is not None:
                self._checks.append(check)
            return finished
        if isinstance(event, RunStarted):
            finished = self.finish_open()
            if event.resumed:
                log, log_unpriced = self.context.log, self.context.log_unpriced
            else:
                log, log_unpriced = {}, set()
            self.context = SessionContext(run={}, log=log, log_unpriced=log_unpriced)
            return finished
        if isinstance(event, Prompt):
            return self._prompt(event)
        if isinstance(event, (Resolved, RouteFailed)):
            finished = self.finish_open(keep=event.fusion_id)
            turn = self._turn(event.fusion_id)
            self.context.current = self.context.awaiting_prompt = event.fusion_id
            if turn is None:
                return finished
            if isinstance(event, Resolved):
                turn.resolved = event
            else:
                turn.route_failure = event
            return finished
        turn = self._owner(event)
        if turn is None:
            return []
        if isinstance(event, LegEnded):
            if turn.add_leg(event) and not turn.leg_calls(event):
                self._account(event.model or "unknown", event.usage)
            if turn.route_failure is not None:
                # The fallback leg is the last thing the CLI logs for a failed route.
                return [self._finish(turn)]
        elif isinstance(event, Handoff):
            turn.handoffs.append(event)
        elif isinstance(event, CommitStarted):
            turn.commit = event
        elif isinstance(event, Completed):
            turn.completed = event
            return [self._finish(turn)]
        return []

    def call(self, call: ModelCall) -> None:
        """Take a model call, which finishes no turn: with `tool`, what most records of a log
        are, taken without feed's tests (SessionLog.read's short way)."""
        self._account(call.model, call.usage, call.credits_known)
        turn = self._owner(call)
        if turn is not None:
            turn.calls.append(call)

    def tool(self, event: ToolStarted | ToolCompleted) -> None:
        """Take a tool's start or end, which finishes no turn (see `call`)."""
        turn = self._owner(event)
        if turn is not None:
            turn.tool_events.append(event)

    def finish_where(self, over: Callable[[Turn], bool]) -> list[Turn]:
        """Finish the open turns `over` says have ended, as they stand."""
        return [self._finish(turn) for turn in list(self._open.values()) if over(turn)]

    def finish_open(self, keep: str | None = None) -> list[Turn]:
        """Finish every open turn but `keep` as it stands (`incomplete` where no rollup came)."""
        return [
            self._finish(turn) for turn in list(self._open.values()) if turn.key != keep
        ]

    def _prompt(self, prompt: Prompt) -> list[Turn]:
        """A routed turn's own prompt joins it; any other opens an ordinary turn."""
        awaiting, self.context.awaiting_prompt = self.context.awaiting_prompt, None
        if awaiting in self._open:
            self._open[awaiting].prompt = prompt
            return []
        if awaiting in self._finished:
            return []  # the prompt of a turn already reported, in a log read again
        finished = [self._finish(turn) for turn in list(self._open.values()) if turn.ordinary]
        key = ORDINARY_PREFIX + prompt.prompt_id
        self.context.current = key
        turn = self._turn(key, ordinary=True)
        if turn is not None:
            turn.prompt = prompt
        return finished

    def _owner(self, event: Event) -> Turn | None:
        """The open turn a record belongs to: by its fusion id, else the current prompt's."""
        fusion_id = getattr(event, "fusion_id", None)
        if fusion_id is not None:
            return self._turn(fusion_id)
        return self._open.get(self.context.current)

    def _account(self, model: str, usage: Usage, credits_known: bool = True) -> None:
        context = self.context
        for ledger, unpriced in ((context.run, context.run_unpriced),
                                 (context.log, context.log_unpriced)):
            if ledger is not None:
                known = ledger.get(model)
                ledger[model] = usage if known is None else known + usage
                if not credits_known:
                    unpriced.add(model)

    def _turn(self, key: str, ordinary: bool = False) -> Turn | None:
        """The open turn for this key, a new one, or None when it was already finished."""
        if key in self._finished:
            return None
        turn = self._open.get(key)
        if turn is None:
            turn = self._open[key] = Turn(self.session_id, key, ordinary=ordinary)
        return turn

    def _finish(self, turn: Turn) -> Turn:
        turn.finish()
        del self._open[turn.key]
        self._finished[turn.key] = None
        if len(self._finished) > REMEMBERED_FINISHED:
            del self._finished[next(iter(self._finished))]
        if self.context.awaiting_prompt == turn.key:
            self.context.awaiting_prompt = None
        return turn
