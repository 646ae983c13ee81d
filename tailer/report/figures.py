"""The report's figures: one plain-data snapshot computed from finished turns.

Every renderer (table, JSON, CSV, HTML) is a pure function of a `Snapshot`, so the figures
are defined once, here, and the same way the stack defines them (docs/METRICS.md,
prometheus/rules/hydrafusion.yml, the dashboard's panels), so the report and the dashboard
show the same numbers for the same turns:

- the headline, the groups by leg kind and pattern are about HydraFusion's turns (route
  failures included, prompts answered without fusion not), as `hydrafusion_turns_total`
  and the leg families are; the headline's `all_usage` beside them, and each group by day,
  week, month and session, add every prompt's use, HydraFusion's and ordinary, each part
  kept apart (what ccusage and the CLI's own totals count);
- by model is a model's whole use, as the CLI's own per-model totals are: its fusion legs
  and its ordinary prompts' calls, each part kept apart too;
- credits, tokens and calls of those are counted from the legs, never from the turn rollup
  (which is their sum: adding both would count them twice);
- compound rate: routed turns (route failures excluded) that used more than one distinct
  model, over all routed turns;
- judge rejection rate: turns in which a verdict sent the draft back (`reject`, `revise`),
  over turns in which a judge gave a verdict: per turn, so a turn judged twice weighs once;
- review share: credits of the legs that did not produce the answer, over all credits;
- input tokens are uncached input, as the CLI's `/usage` and ccusage count them: the CLI's
  input tokens (which include its cache reads and writes, as the metrics' `type="input"`
  does, the GenAI convention) less those; cache reads, cache writes and output are apart;
- cache share of input: cache-read tokens over all input tokens (uncached, cache reads and
  cache writes: the CLI's input tokens, as the metrics count them);
- by policy version (`router`): the fusion turns (route failures excluded: no policy routed
  them) each version of the remote router's policy decided, as `hydrafusion_router_turns_total`
  counts them; a day, week, month or session names in `new_policy_versions` the versions
  whose first turn of the report is in it, but the report's first (nothing changed there);
- by kind puts every prompt on one footing, as the `hydrafusion_prompt_*` families do:
  `fusion`, `ordinary` (answered by the model the user picked, from its model calls) and
  `fallback` (a route failure, answered by the fallback model).

A ratio with nothing to divide by is None (null in JSON), as the recording rules leave it
absent rather than 0.

Unknown is unknown: a model call whose credits the log does not give (turns.assembly.Turn.leg_credits
says which) adds nothing to any `credits`, and every figure with credits counts the calls it
leaves out in `unknown_credit_calls` beside them; its `credits` is None when it knows none
beside those (nothing of them is known), never 0. A median, minimum or maximum of credits
per turn is of the turns whose credits are all known (None without any).
"""

from __future__ import annotations

import functools
import itertools
import json
import operator
from collections import Counter, defaultdict
from datetime import date, datetime, timezone, tzinfo

from ..records import field, is_record, record, replace
from ..copilot.event_records import LegEnded, REJECTING_VERDICTS, Usage
from ..copilot.event_values import EARLIEST_NS, LATEST_NS
from . import turn_text, worth as worth_figures
from .read import report_pattern
from ..turns.assembly import ROUTE_FAILED_OUTCOME, Reconciliation, Turn, leg_start_ns

SCHEMA_VERSION = 6
ORDINARY = "ordinary"
KINDS = ("fusion", "ordinary", "fallback")
GROUPINGS = ("day", "week", "month", "session")  # GROUP_KEYS's, and the Snapshot's by_ fields

# The figures are slotted records but not frozen ones, as the event records are: a frozen
# record sets each field through object.__setattr__. Treat them as values all the same.


@record(slots=True)
class Spend:
    """What a group of legs (one model, one leg kind) ran and spent."""

    name: str
    legs: int
    calls: int
    credits: float | None
    unknown_credit_calls: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    total_tokens: int  # input (uncached), output, cache read and cache write


@record(slots=True)
class ModelUse(Spend):
    """A model's whole use, as the CLI's own per-model totals count it: its legs in
    HydraFusion's turns (`fusion`, route failures' fallback legs included) and its calls in
    ordinary prompts (`ordinary`, whose `legs` is 0), and their sum in Spend's fields."""

    fusion: Spend
    ordinary: Spend


@record(slots=True)
class KindFigures:
    """The prompts of one kind (fusion, ordinary, fallback), for comparing them."""

    kind: str
    turns: int
    credits: float | None
    unknown_credit_calls: int
    calls: int
    tools: int
    median_credits: float | None
    median_duration_ms: float


@record(slots=True)
class PatternFigures:
    """Turns of one pattern and what one such turn costs (credits per turn)."""

    pattern: str
    turns: int
    credits: float | None
    unknown_credit_calls: int
    median_credits: float | None
    min_credits: float | None
    max_credits: float | None




@record(slots=True)
class LegRow:
    """One leg of a turn, as the table, the CSV and the page show it."""

    kind: str
    role: str
    model: str
    status: str
    verdict: str | None
    committed: bool
    start_ms: float  # from the start of its turn
    duration_ms: float
    calls: int
    credits: float | None
    unknown_credit_calls: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    failure_reason: str | None


@record(slots=True)
class CallRow:
    """One model call (a usage record); `leg` is the index of the leg it served."""

    leg: int | None
    model: str
    start_ms: float
    duration_ms: float
    credits: float | None  # None: the call's record gives none
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    finish_reason: str | None


@record(slots=True)
class ToolRow:
    """One tool call. `timing` says how its times are known: `live` (its own events),
    `between_calls` (replayed at commit, placed after the call that asked for it) or
    `commit` (replayed, and only the replay's time is known)."""

    leg: int | None
    name: str
    success: bool | None
    start_ms: float
    duration_ms: float
    timing: str


@record(slots=True)
class TurnJson:
    """A turn's object in the JSON report, as its bytes (ASCII, as json.dumps writes it),
    but for the value of its `start`, which goes at `start_at` (the one field that depends
    on the time zone); and the count of its tools.

    Its model calls and tools are most of a month's figures, and only the JSON report, the
    CSV of calls and the HTML page show them all: kept as one string per turn in the cache, in a worker's
    answer and in memory, a warm report copies text where it made and walked some 3 million
    objects. Bytes, not str: from the cache's file to the report's output they are never
    decoded nor encoded (a turn read from the cache has a view of the bytes the cache read,
    tailer/report/cache.py). The table and the figures need the count, and an ordinary
    turn's calls: those rows are made anew from the text where they are asked for."""

    text: bytes | memoryview
    start_at: int
    tool_count: int

    def model_calls(self) -> list[CallRow]:
        return [CallRow(**call) for call in self._object()["model_calls"]]

    def tools(self) -> list[ToolRow]:
        return [ToolRow(**tool) for tool in self._object()["tools"]]

    def calls_and_tools(self) -> tuple[list[CallRow], list[ToolRow]]:
        """Both from one parse of the text, for an output that shows both."""
        value = self._object()
        return ([CallRow(**call) for call in value["model_calls"]],
                [ToolRow(**tool) for tool in value["tools"]])

    def _object(self) -> dict:
        return json.loads(b"".join((self.text[:self.start_at], b"null", self.text[self.start_at:])))


@record(slots=True)
class TurnRow:
    """One turn (fusion, ordinary or fallback) with its legs, model calls and tools."""

    session_id: str
    fusion_id: str  # an ordinary turn's key: prompt-<id of its user.message>
    kind: str  # fusion, ordinary, fallback
    model: str  # fusion: the synthetic model; ordinary: its main model; fallback: the fallback
    start: str  # ISO 8601 with the report's UTC offset
    pattern: str  # read.report_pattern: a fusion pattern, `fallback` or `ordinary`
    outcome: str
    compound: bool
    credits: float | None
    unknown_credit_calls: int
    calls: int
    duration_ms: float
    routing_ms: float | None
    degraded_reason: str | None
    route_failure_reason: str | None
    legs: list[LegRow]
    printed: TurnJson  # the row as the JSON report prints it, with its model calls and tools
    policy_version: str | None = None  # of the router that decided it (its resolved record)
    # What only its records tell the "worth it" figures (tailer/report/worth.py); not printed
    # with the turn. None: a row made without its turn, which tells them nothing.
    worth: worth_figures.TurnWorth | None = None

    @property
    def model_calls(self) -> list[CallRow]:
        return self.printed.model_calls()

    @property
    def tools(self) -> list[ToolRow]:
        return self.printed.tools()


def compact_json(value) -> str:
    """`value` as the report's JSON writes it: compact, so the encoder written in C does the
    work, each figure an object of its fields."""
    return json.dumps(value, default=json_object, separators=(",", ":"), check_circular=False)


# A figure's class -> its fields and a getter of their values, once looked up: attrgetter
# takes them all in one call in C, where a loop over the names took one getattr each (every
# figure has two fields or more: given one name, attrgetter returns the value, not a tuple).
_FIELD_GETTERS: dict[type, tuple[tuple[str, ...], operator.attrgetter]] = {}


def json_object(value) -> dict:
    """A figure (a record of this module) as the JSON object of its fields, in their
    order (its __match_args__: every field, a base class's too, where __slots__ has its own
    only). A month's turns ask this for some 200,000 legs, model calls and tools."""
    found = _FIELD_GETTERS.get(type(value))
    if found is None:
        if not is_record(value):
            raise TypeError(f"{type(value).__name__} is not a report figure")
        names = type(value).__match_args__
        found = _FIELD_GETTERS[type(value)] = names, operator.attrgetter(*names)
    names, values = found
    return dict(zip(names, values(value)))


@record(slots=True)
class KindUsage:
    """What some prompts used, every kind of token apart: `input_tokens` is uncached input
    (the CLI's input tokens less its cache reads and writes, as ccusage counts it) and
    `total_tokens` the four kinds' sum."""

    prompts: int
    calls: int
    credits: float | None
    unknown_credit_calls: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    total_tokens: int


@record(slots=True)
class AllUsage(KindUsage):
    """Every prompt's use, HydraFusion's turns and ordinary prompts alike, as ccusage and the
    CLI's own totals count it, and its two parts (which add up to it)."""

    fusion: KindUsage  # HydraFusion's turns (fusion and fallback), from their legs
    ordinary: KindUsage  # prompts answered without fusion, from their calls


@record(slots=True)
class Headline:
    """The figures of the report's first lines: over HydraFusion's turns, but `all_usage`,
    every prompt's."""

    turns: int  # HydraFusion's turns: fusion and fallback
    credits: float | None
    unknown_credit_calls: int  # calls left out of `credits`: their credits are unknown
    calls: int
    outcomes: dict[str, int]  # completed (or the rollup's own word), incomplete, route_failed
    compound_rate: float | None
    judged_turns: int  # turns in which a judge gave a verdict
    rejected_turns: int  # of those, the ones whose draft a verdict sent back
    judge_rejection_rate: float | None
    review_share: float | None
    cache_share: float | None
    failed_legs: int  # legs that ended failed or cancelled
    tools: int  # tool calls of HydraFusion's turns
    all_usage: AllUsage  # every prompt's, HydraFusion's and ordinary


@record(slots=True)
class Group(Headline):
    """The headline's figures, under its names, of the prompts of one day, ISO week, month
    or session (`key`) that had any: of its HydraFusion turns, and every prompt's use in
    `all_usage` and by model (`models`); the credits of its HydraFusion turns' legs by model."""

    key: str  # 2026-11-04, 2026-W45, 2026-11 (in the report's time zone), or a session id
    first_turn: str  # the start of its first prompt, of any kind
    last_turn: str  # the start of its last: a session's last activity
    credits_by_model: dict[str, float | None]
    models: list[ModelUse]  # every prompt's use by model, the biggest spender first
    new_policy_versions: list[str]  # the router's versions whose first turn is in this group


@record(frozen=True, slots=True)
class PolicyFigures:
    """The fusion turns one version of the router's policy decided (None: resolved records
    that name no version): when it was first and last seen, its pattern mix and costs."""

    policy_version: str | None
    first_seen: str  # the start of its first turn
    last_seen: str  # the start of its last turn
    turns: int
    patterns: dict[str, int]  # turns per pattern, the most first
    compound_rate: float | None
    median_credits: dict[str, float | None]  # per pattern


@record(slots=True)
class Check:
    """The CLI's own totals for one run of a session, next to the sums of its calls.

    `differences` lists, per model that differs, both sides' figures (under "all models"
    when the CLI gave credits only)."""

    session_id: str
    source: str  # shutdown, usage_checkpoint
    scope: str  # run, log
    agrees: bool
    differences: list[dict]


@record(slots=True)
class Snapshot:
    """Everything a report shows: every renderer is a function of one of these."""

    schema_version: int
    generated_at: str
    utc_offset: str  # of the report's time zone when it was made
    timezone: str  # its name: str(tz) (a ZoneInfo's IANA key), or the system's (CET, UTC)
    filters: dict[str, str]
    sessions: int  # session logs read
    skipped: dict[str, int]  # damaged_lines, unreadable_logs
    first_turn: str | None
    last_turn: str | None
    headline: Headline
    by_kind: list[KindFigures]
    by_model: list[ModelUse]
    by_leg_kind: list[Spend]
    by_pattern: list[PatternFigures]
    router: list[PolicyFigures]
    by_day: list[Group] | None  # None: not made (snapshot's `groupings`)
    by_week: list[Group] | None
    by_month: list[Group] | None
    by_session: list[Group] | None
    reconciliation: list[Check]
    turns: list[TurnRow]
    in_flight: list = field(factory=list)  # report.now.InFlightRow: turns still open
    # The logs against the CLI's ledger (turns.ledger_check.LedgerCheck); None: not looked
    # at (--watch, --demo).
    ledger: object = None
    # Was fusion worth it (tailer/report/worth.py); None: not made (snapshot's `worth`).
    worth: worth_figures.Worth | None = None


def snapshot(
    turns: list[TurnRow],
    *,
    now: datetime,
    tz: tzinfo | None = None,
    sessions: int = 0,
    skipped: dict[str, int] | None = None,
    filters: dict[str, str] | None = None,
    checks: list[Check] = (),
    in_flight: list = (),
    groupings: tuple[str, ...] = GROUPINGS,
    ledger=None,
    worth: bool = True,
) -> Snapshot:
    """The figures of `turns` (finished ones, made by turn_row), listed in the order they
    started. `tz` is the report's time zone, None the machine's local one. Of the groupings
    by day, week, month and session, those not in `groupings` are None: the table shows its
    days only, and over 10,000 sessions their groups would be most of its time. Without
    `worth`, the worth figures are None, the router's and the patterns' empty (add_patterns
    and add_worth make them later): --watch's screen shows them (the table's router follows
    its worth, its patterns come before) only when it is tall, and over 10,000 sessions they
    were a tenth of its start (the router's and the patterns', 3% more)."""
    rows = sorted(turns, key=lambda row: (datetime.fromisoformat(row.start), row.session_id,
                                          row.fusion_id))
    fusion = _fusion_rows(rows)
    parts = parts_of(rows, groupings)
    every = _Sums.merged(list(parts.values())) if parts else _Sums.of([], ())
    grouped = groupings_of(rows, parts, groupings)
    return Snapshot(
        schema_version=SCHEMA_VERSION,
        generated_at=now.astimezone(tz).isoformat(timespec="seconds"),
        utc_offset=now.astimezone(tz).isoformat()[-6:],
        timezone=str(tz) if tz is not None else now.astimezone().tzname() or "local",
        filters=dict(filters or {}),
        sessions=sessions,
        skipped={"damaged_lines": 0, "unreadable_logs": 0, **(skipped or {})},
        first_turn=rows[0].start if rows else None,
        last_turn=rows[-1].start if rows else None,
        headline=every.headline(),
        by_kind=by_kind(rows),
        by_model=every.models(),
        by_leg_kind=every.leg_kinds(),
        by_pattern=by_pattern(fusion) if worth else [],
        router=router(fusion) if worth else [],
        **{f"by_{name}": grouped.get(name) for name in GROUPINGS},
        reconciliation=list(checks),
        turns=rows,
        in_flight=list(in_flight),
        ledger=ledger,
        worth=worth_figures.figures(rows, fusion, groupings) if worth else None,
    )


def _fusion_rows(rows: list[TurnRow]) -> list[TurnRow]:
    """The HydraFusion turns of `rows`, in their order."""
    return [row for row in rows if row.kind != ORDINARY]


def add_patterns(snap: Snapshot) -> None:
    """Give a snapshot made without `worth` its figures by pattern."""
    snap.by_pattern = by_pattern(_fusion_rows(snap.turns))


def add_worth(snap: Snapshot, groupings: tuple[str, ...] = GROUPINGS) -> None:
    """Give a snapshot made without `worth` its worth figures, of the same `groupings`, and
    its router's."""
    fusion = _fusion_rows(snap.turns)
    snap.worth = worth_figures.figures(snap.turns, fusion, groupings)
    snap.router = router(fusion)


def turn_row(turn: Turn, tz: tzinfo | None) -> TurnRow:
    """What the report keeps of a finished turn: plain figures, a fraction of the Turn's
    size, so a report of a month holds rows, not every record of every turn. `tz` None is
    the machine's local time zone, daylight saving time included."""
    start_ns = turn.start_ns  # found afresh at each use, from every call when incomplete
    spent = [turn.leg_credits(leg) for leg in turn.legs]  # (known nano-credits, calls left out)
    legs = [_leg_row(turn, leg, *credits) for leg, credits in zip(turn.legs, spent)]
    index = {id(leg): number for number, leg in enumerate(turn.legs)}
    # The leg of each phase id the calls and tools name (a few), found once: a turn has
    # dozens of calls and tools.
    leg_index = {}
    for phase_id in {item.phase_id for items in (turn.calls, turn.tools) for item in items}:
        leg = turn.leg_of(phase_id)
        leg_index[phase_id] = None if leg is None else index[id(leg)]
    calls = [turn_text.call_text(start_ns, call, leg_index[call.phase_id]) for call in turn.calls]
    failure = turn.route_failure
    if turn.ordinary:
        nano = sum(call.usage.nano_aiu for call in turn.calls if call.credits_known)
        unknown = sum(not call.credits_known for call in turn.calls)
        call_count = len(calls)
    else:
        nano, unknown = sum(known for known, _ in spent), sum(left for _, left in spent)
        call_count = sum(leg.calls for leg in legs)
    row = TurnRow(
        session_id=turn.session_id,
        fusion_id=turn.key,
        kind=turn.kind,
        model=turn.prompt_model,
        start=moment(start_ns, tz),
        pattern=report_pattern(turn),
        outcome=turn.outcome,
        compound=turn.compound,
        credits=_shown(nano, unknown),
        unknown_credit_calls=unknown,
        calls=call_count,
        duration_ms=(turn.end_ns - start_ns) / 1e6,
        routing_ms=turn.routing_latency_ms,
        degraded_reason=turn.degraded_reason,
        route_failure_reason=(failure.reason or "unknown") if failure is not None else None,
        legs=legs,
        printed=None,  # made of the others, just below
        policy_version=turn.resolved.policy_version if turn.resolved is not None else None,
    )
    tools = [turn_text.tool_text(start_ns, tool, leg_index[tool.phase_id]) for tool in turn.tools]
    row.printed = TurnJson(*turn_text.printed(row, calls, tools), len(tools))
    row.worth = worth_figures.TurnWorth(*worth_figures.turn_worth(turn))
    return row


def _leg_row(turn: Turn, leg: LegEnded, nano_aiu: int, unknown: int) -> LegRow:
    """`nano_aiu` and `unknown`: the leg's known credits and the calls they leave out."""
    usage = leg.usage
    return LegRow(
        kind=leg.phase_kind or "unknown",
        role=leg.role or "unknown",
        model=leg.model or "unknown",
        status=leg.status or "unknown",
        verdict=leg.verdict,
        committed=turn.is_committed(leg),
        start_ms=(leg_start_ns(leg) - turn.start_ns) / 1e6,
        duration_ms=leg.duration_ms,
        calls=usage.request_count,
        credits=_shown(nano_aiu, unknown),
        unknown_credit_calls=unknown,
        input_tokens=usage.uncached_input(),
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        failure_reason=leg.failure_reason,
    )


def headline(rows: list[TurnRow]) -> Headline:
    """The headline of `rows` (in the order they started): the figures of their
    HydraFusion turns, and every row's use in `all_usage`."""
    return _Sums.of(rows, range(len(rows))).headline()


def by_kind(rows: list[TurnRow]) -> list[KindFigures]:
    """Every kind of prompt, in a fixed order (kinds without prompts too), then any other."""
    groups: dict[str, list[TurnRow]] = {kind: [] for kind in KINDS}
    for row in rows:
        groups.setdefault(row.kind, []).append(row)
    figures = []
    for kind, group in groups.items():
        unknown = sum(row.unknown_credit_calls for row in group)
        known = [row.credits for row in group if not row.unknown_credit_calls]
        figures.append(KindFigures(
            kind=kind,
            turns=len(group),
            credits=_shown(_nano(row.credits for row in group), unknown),
            unknown_credit_calls=unknown,
            calls=sum(row.calls for row in group),
            tools=sum(row.printed.tool_count for row in group),
            median_credits=_median(known) if known else None if group else 0.0,
            median_duration_ms=_median([row.duration_ms for row in group]) if group else 0.0,
        ))
    return figures


def _biggest_first(spends: list[Spend]) -> list[Spend]:
    return sorted(spends, key=lambda spend: (-(spend.credits or 0.0), spend.name))


def by_pattern(rows: list[TurnRow]) -> list[PatternFigures]:
    grouped: dict[str, list[TurnRow]] = defaultdict(list)
    for row in rows:
        grouped[row.pattern].append(row)
    figures = []
    for pattern, group in grouped.items():
        unknown = sum(row.unknown_credit_calls for row in group)
        known = [row.credits for row in group if not row.unknown_credit_calls]
        figures.append(PatternFigures(
            pattern, len(group), _shown(_nano(row.credits for row in group), unknown),
            unknown, *((_median(known), min(known), max(known)) if known else (None,) * 3)))
    return sorted(figures, key=lambda figure: (-figure.turns, figure.pattern))


def router(rows: list[TurnRow]) -> list[PolicyFigures]:
    """The fusion turns of `rows` (in the order they started) by policy version, in the
    order each version first appeared."""
    grouped: dict[str | None, list[TurnRow]] = {}
    for row in rows:
        if row.kind == "fusion":
            grouped.setdefault(row.policy_version, []).append(row)
    figures = []
    for version, group in grouped.items():
        credits: dict[str, list[float]] = {}
        for row in group:
            known = credits.setdefault(row.pattern, [])
            if not row.unknown_credit_calls:
                known.append(row.credits)
        figures.append(PolicyFigures(
            policy_version=version,
            first_seen=group[0].start,
            last_seen=group[-1].start,
            turns=len(group),
            patterns=dict(Counter(row.pattern for row in group).most_common()),
            compound_rate=_ratio(sum(row.compound for row in group), len(group)),
            median_credits={pattern: _median(values) if values else None
                            for pattern, values in sorted(credits.items())},
        ))
    return figures


def _week(row: TurnRow) -> str:
    return _iso_week(row.start[:10])


@functools.lru_cache(maxsize=4096)
def _iso_week(day: str) -> str:
    year, week, _ = date.fromisoformat(day).isocalendar()
    return f"{year}-W{week:02d}"


# What puts a turn in a group. Its start is already in the report's time zone (turn_row),
# so days, weeks and months cut at that zone's local midnight, daylight saving included.
GROUP_KEYS = {
    "day": lambda row: row.start[:10],
    "week": _week,
    "month": lambda row: row.start[:7],
    "session": lambda row: row.session_id,
}


class _Sums:
    """What some prompts add up to, in whole numbers (credits in nano-credits, as the log
    counts them), so that parts merged in any order give the figures of their prompts.

    Each prompt is added once, to its part (its session's prompts on its day, as far as the
    groupings asked for tell them apart); the headline, the groups and the spends by model
    and leg kind are merged from the parts, a week's and a month's from days. Making each of
    them from the turns was most of a report's figures: a month holds some 7,500 turns,
    14,000 legs and a few hundred parts. HydraFusion's turns are counted by their legs,
    ordinary prompts by their calls, and apart."""

    __slots__ = ("turns", "counts", "outcomes", "by_model", "by_kind", "ordinary",
                 "ordinary_by_model", "span")

    def __init__(self, turns: int, counts: tuple[int, ...], outcomes: dict[str, list[int]],
                 by_model: dict[str, list[int]], by_kind: dict[str, list[int]], ordinary: int,
                 ordinary_by_model: dict[str, list[int]], span: tuple[int, int] | None):
        self.turns = turns  # HydraFusion's
        # credits, those of legs that did not produce the answer, failed legs, tools, and the
        # turns routed, compound (of those), judged and rejected (of those)
        self.counts = counts
        self.outcomes = outcomes  # outcome -> [turns, the index of its first turn]
        # model, leg kind -> [legs, calls, nano-credits, calls of unknown credits, input
        # (uncached), output, cache read, cache write]
        self.by_model, self.by_kind = by_model, by_kind
        self.ordinary = ordinary  # ordinary prompts
        self.ordinary_by_model = ordinary_by_model  # model -> the same of their calls, legs 0
        self.span = span  # the indices of the first and the last prompt of any kind

    @classmethod
    def of(cls, rows: list[TurnRow], indices) -> _Sums:
        """The sums of the prompts rows[i] for i in `indices`, in order."""
        credits = review_credits = failed_legs = tools = routed = compound = judged = rejected = 0
        turns = ordinary = 0
        outcomes: dict[str, list[int]] = {}
        by_model: dict[str, list[int]] = {}
        by_kind: dict[str, list[int]] = {}
        ordinary_by_model: dict[str, list[int]] = {}
        for index in indices:
            row = rows[index]
            if row.kind == ORDINARY:
                ordinary += 1
                for call in row.model_calls:
                    _add_call(ordinary_by_model, call)
                continue
            turns += 1
            seen = outcomes.get(row.outcome)
            if seen is None:
                outcomes[row.outcome] = [1, index]
            else:
                seen[0] += 1
            credits += round((row.credits or 0.0) * 1e9)
            tools += row.printed.tool_count
            if row.outcome != ROUTE_FAILED_OUTCOME:
                routed += 1
                compound += row.compound
            verdicts = False
            rejecting = False
            for leg in row.legs:
                nano = round((leg.credits or 0.0) * 1e9)
                if not leg.committed:
                    review_credits += nano
                if leg.status in ("failed", "cancelled"):
                    failed_legs += 1
                if leg.verdict:
                    verdicts = True
                    rejecting = rejecting or leg.verdict in REJECTING_VERDICTS
                for spends, name in ((by_model, leg.model), (by_kind, leg.kind)):
                    found = spends.get(name)
                    if found is None:
                        spends[name] = [1, leg.calls, nano, leg.unknown_credit_calls,
                                        leg.input_tokens, leg.output_tokens,
                                        leg.cache_read_tokens, leg.cache_write_tokens]
                    else:
                        found[0] += 1
                        found[1] += leg.calls
                        found[2] += nano
                        found[3] += leg.unknown_credit_calls
                        found[4] += leg.input_tokens
                        found[5] += leg.output_tokens
                        found[6] += leg.cache_read_tokens
                        found[7] += leg.cache_write_tokens
            judged += verdicts
            rejected += rejecting
        return cls(turns, (credits, review_credits, failed_legs, tools, routed, compound,
                           judged, rejected), outcomes, by_model, by_kind, ordinary,
                   ordinary_by_model, (indices[0], indices[-1]) if len(indices) else None)

    @classmethod
    def merged(cls, parts: list[_Sums]) -> _Sums:
        if len(parts) == 1:
            return parts[0]
        outcomes: dict[str, list[int]] = {}
        for part in parts:
            for outcome, (turns, first) in part.outcomes.items():
                seen = outcomes.setdefault(outcome, [0, first])
                seen[0] += turns
                seen[1] = min(seen[1], first)
        spans = [part.span for part in parts if part.span is not None]
        return cls(sum(part.turns for part in parts),
                   tuple(map(sum, zip(*(part.counts for part in parts)))), outcomes,
                   _summed(part.by_model for part in parts), _summed(part.by_kind for part in parts),
                   sum(part.ordinary for part in parts),
                   _summed(part.ordinary_by_model for part in parts),
                   (min(first for first, _ in spans), max(last for _, last in spans)) if spans else None)

    def headline(self) -> Headline:
        return Headline(*self._headline())

    def group(self, key: str, rows: list[TurnRow], new_policy_versions: list[str]) -> Group:
        """Its figures as the group `key`; `rows`: the prompts its indices are of."""
        first, last = self.span
        return Group(*self._headline(), key, rows[first].start, rows[last].start,
                     {model: _shown(nano, unknown)
                      for model, (_, _, nano, unknown, *_) in sorted(self.by_model.items())},
                     self.models(), new_policy_versions)

    def models(self) -> list[ModelUse]:
        """Each model's whole use: its legs in HydraFusion's turns and its calls in ordinary
        prompts, each part kept; the biggest spender first."""
        uses = []
        for name in self.by_model.keys() | self.ordinary_by_model.keys():
            fusion = self.by_model.get(name, _NONE)
            ordinary = self.ordinary_by_model.get(name, _NONE)
            uses.append(ModelUse(*_spend_fields(name, [a + b for a, b in zip(fusion, ordinary)]),
                                 Spend(*_spend_fields(name, fusion)),
                                 Spend(*_spend_fields(name, ordinary))))
        return _biggest_first(uses)

    def leg_kinds(self) -> list[Spend]:
        """The spends of HydraFusion's legs by their kind, the biggest spender first."""
        return _biggest_first([Spend(*_spend_fields(name, figures))
                               for name, figures in self.by_kind.items()])

    def _headline(self) -> tuple:
        credits, review_credits, failed_legs, tools, routed, compound, judged, rejected = self.counts
        fusion, ordinary = (_column_sums(spends) for spends in (self.by_model, self.ordinary_by_model))
        _, calls, leg_credits, unknown, input_tokens, _, cache_read_tokens, cache_write_tokens = fusion
        # The most first, ties in the order they first came (as Counter.most_common).
        ordered = sorted(self.outcomes.items(), key=lambda item: (-item[1][0], item[1][1]))
        fusion[0], ordinary[0] = self.turns, self.ordinary  # prompts, where the legs were
        return (self.turns, _shown(credits, unknown), unknown, calls,
                {name: n for name, (n, _) in ordered},
                _ratio(compound, routed), judged, rejected, _ratio(rejected, judged),
                _ratio(_credits(review_credits), _credits(leg_credits)),
                _ratio(cache_read_tokens, input_tokens + cache_read_tokens + cache_write_tokens),
                failed_legs, tools,
                AllUsage(*_usage_fields([a + b for a, b in zip(fusion, ordinary)]),
                         KindUsage(*_usage_fields(fusion)), KindUsage(*_usage_fields(ordinary))))


_NONE = [0] * 8  # a spend's figures (_Sums.by_model's) where it has none


def _add_call(spends: dict[str, list[int]], call: CallRow) -> None:
    """An ordinary prompt's model call added to its model's figures (as _Sums.by_model's)."""
    nano = 0 if call.credits is None else round(call.credits * 1e9)
    found = spends.get(call.model)
    if found is None:
        found = spends[call.model] = [0] * 8
    found[1] += 1
    found[2] += nano
    found[3] += call.credits is None
    found[4] += call.input_tokens
    found[5] += call.output_tokens
    found[6] += call.cache_read_tokens
    found[7] += call.cache_write_tokens


def _column_sums(spends: dict[str, list[int]]) -> list[int]:
    return [sum(column) for column in zip(*spends.values())] if spends else [0] * 8


def _spend_fields(name: str, figures: list[int]) -> tuple:
    """Spend's fields of a spend's figures (_Sums.by_model's)."""
    legs, calls, nano, unknown, input_tokens, output_tokens, cache_read, cache_write = figures
    return (name, legs, calls, _shown(nano, unknown), unknown, input_tokens, output_tokens,
            cache_read, cache_write, input_tokens + output_tokens + cache_read + cache_write)


def _usage_fields(figures: list[int]) -> tuple:
    """KindUsage's fields of a spend's figures whose first is a count of prompts."""
    return _spend_fields("", figures)[1:]


def _summed(spends) -> dict[str, list[int]]:
    """Parts' spends (name -> figures) added up, name by name."""
    collected: dict[str, list[list[int]]] = {}
    for part in spends:
        for name, figures in part.items():
            collected.setdefault(name, []).append(figures)
    return {name: list(map(sum, zip(*found))) for name, found in collected.items()}


def parts_of(rows: list[TurnRow], groupings: tuple[str, ...]) -> dict[tuple[str, str], _Sums]:
    """The prompts `rows` (in the order they started) in parts, by (day, session id):
    either is "" where none of `groupings` (GROUPINGS) tells it apart."""
    by_day = not {"day", "week", "month"}.isdisjoint(groupings)
    by_session = "session" in groupings
    indices: dict[tuple[str, str], list[int]] = {}
    for index, row in enumerate(rows):
        part = (row.start[:10] if by_day else "", row.session_id if by_session else "")
        found = indices.get(part)
        if found is None:
            indices[part] = [index]
        else:
            found.append(index)
    return {part: _Sums.of(rows, found) for part, found in indices.items()}


def groupings_of(rows: list[TurnRow], parts: dict[tuple[str, str], _Sums],
                 groupings: tuple[str, ...]) -> dict[str, list[Group]]:
    """The groups of the prompts `rows` (in the order they started) by each of `groupings`,
    from their parts_of: a day's, week's and month's in the order of their keys, a session's
    in the order of its last prompt (its last activity)."""
    made: dict[str, dict[str, _Sums]] = {}
    if "session" in groupings:
        made["session"] = _merged(parts, lambda part: part[1])
    if not {"day", "week", "month"}.isdisjoint(groupings):
        days = _merged(parts, lambda part: part[0])
        made.update(day=days, week=_merged(days, _iso_week), month=_merged(days, lambda day: day[:7]))
    # A version is new in the group of its first turn, but the report's first version.
    firsts: dict[str, TurnRow] = {}
    for row in rows:
        if row.kind == "fusion" and row.policy_version is not None:
            firsts.setdefault(row.policy_version, row)
    later = list(firsts.items())[1:]
    figures = {}
    for name in groupings:
        new: dict[str, list[str]] = {}
        for version, first in later:
            new.setdefault(GROUP_KEYS[name](first), []).append(version)
        order = ((lambda item: (item[1].span[1], item[0])) if name == "session"
                 else (lambda item: item[0]))
        figures[name] = [sums.group(key, rows, new.get(key, []))
                         for key, sums in sorted(made[name].items(), key=order)]
    return figures


def _merged(parts: dict, key) -> dict[str, _Sums]:
    """The parts merged by key(the part's key)."""
    grouped: dict[str, list[_Sums]] = {}
    for part, sums in parts.items():
        grouped.setdefault(key(part), []).append(sums)
    return {name: _Sums.merged(found) for name, found in grouped.items()}


def check_figures(check: Reconciliation) -> Check:
    """A check of the CLI's totals as the report shows it: what a report's cache keeps of it,
    10,000 of them where a watch of 10,000 sessions starts. Our credits of a model with a call
    of unknown credits are unknown (None) and not compared, as the check does not."""
    differences = []
    for model in sorted(check.ours.keys() | check.theirs.keys()) if check.ours != check.theirs else ():
        ours, theirs = check.ours.get(model, Usage()), check.theirs.get(model, Usage())
        unpriced = model in check.unpriced
        if (replace(ours, nano_aiu=theirs.nano_aiu) if unpriced else ours) != theirs:
            differences.append({"model": model, "ours": _figures(ours, unpriced),
                                "cli": _figures(theirs)})
    return Check(check.session_id, check.source, check.scope, check.agrees, differences)


def _figures(usage: Usage, unpriced: bool = False) -> dict:
    """One side's figures of a model, its input uncached as everywhere in the report."""
    return {"credits": None if unpriced else _credits(usage.nano_aiu), "calls": usage.request_count,
            "input_tokens": usage.uncached_input(), "output_tokens": usage.output_tokens,
            "cache_read_tokens": usage.cache_read_tokens,
            "cache_write_tokens": usage.cache_write_tokens}


def _credits(nano_aiu: int) -> float:
    return nano_aiu / 1e9


def _shown(nano_aiu: int, unknown: int) -> float | None:
    """The known credits of some calls, `unknown` more of unknown credits: None when those
    leave nothing known (0 known beside an unknown is no figure), so that parts add up to
    their whole in any order."""
    return None if unknown and not nano_aiu else nano_aiu / 1e9


def _nano(credits) -> int:
    """Credits (None: unknown, so none) added up in nano-credits, as the log counts them."""
    return sum(round(value * 1e9) for value in credits if value is not None)


def _median(values: list[float]) -> float:
    """The middle value, or the mean of the two middle ones, as statistics.median gives:
    the statistics module imports decimal and fractions, milliseconds of every start-up."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _ratio(part: float, whole: float) -> float | None:
    return part / whole if whole else None


def moment(time_ns: int, tz: tzinfo | None) -> str:
    """The time in the zone `tz` (None: the machine's), ISO 8601 to the millisecond."""
    seconds, nanos = divmod(time_ns, 1_000_000_000)
    quarter, into = divmod(seconds, QUARTER_S)
    known = _quarter(quarter, tz)
    if known is None:
        return (datetime.fromtimestamp(seconds, timezone.utc).replace(microsecond=nanos // 1000)
                .astimezone(tz).isoformat(timespec="milliseconds"))
    hour, minute, offset = known
    return f"{hour}{minute + into // 60:02d}:{into % 60:02d}.{nanos // 1_000_000:03d}{offset}"


QUARTER_S = 900


@functools.lru_cache(maxsize=1 << 16)
def _quarter(quarter: int, tz: tzinfo | None) -> tuple[str, int, str] | None:
    """What every moment of a quarter of an hour (UTC) shares in the zone `tz`: the text of
    its date and hour, its first minute and its UTC offset; None when the offset changes
    within it or is not whole quarters of an hour, which puts the quarter across two hours.

    Finding a time in a zone (above all the machine's, through localtime) and formatting it
    were most of the time of making a report's rows; a month of turns falls in some 3,000
    quarters. Offsets change months apart, so one offset at both ends is the offset between."""
    first, last = (datetime.fromtimestamp(quarter * QUARTER_S + into, timezone.utc).astimezone(tz)
                   for into in (0, QUARTER_S - 1))
    if first.utcoffset() != last.utcoffset() or first.utcoffset().total_seconds() % QUARTER_S:
        return None
    text = first.isoformat(timespec="minutes")  # 2026-11-04T10:15+01:00
    return text[:14], first.minute, text[16:]


# -- A turn's row as plain data, in no time zone: what the report's cache keeps ---------------

_LEG_FIELDS = LegRow.__match_args__
_WORTH_FIELDS = worth_figures.TurnWorth.__match_args__
PRINTED_AT = 16


def turn_data(turn: Turn) -> list:
    """What turn_row keeps of a finished turn, as JSON-able lists, with its start in
    unix nanoseconds instead of a time in one zone, and the models `--model` looks at: so
    the cache (tailer/report/cache.py) holds the same row for any --timezone, and a
    worker process sends back a few lists and one string per turn, never the turn's records.
    PRINTED_AT is where its TurnJson is: the cache keeps its text apart."""
    row = turn_row(turn, timezone.utc)
    return [
        turn.start_ns, turn.models, row.session_id, row.fusion_id, row.kind, row.model,
        row.pattern, row.outcome, row.compound, row.credits, row.calls, row.duration_ms,
        row.routing_ms, row.degraded_reason, row.route_failure_reason,
        [[getattr(leg, name) for name in _LEG_FIELDS] for leg in row.legs],
        [row.printed.text, row.printed.start_at, row.printed.tool_count], row.policy_version,
        row.unknown_credit_calls, [getattr(row.worth, name) for name in _WORTH_FIELDS],
    ]


def row_from_data(data: list, tz: tzinfo | None) -> TurnRow:
    """The TurnRow that turn_row(turn, tz) gives, from turn_data(turn)."""
    (start_ns, _models, session_id, fusion_id, kind, model, pattern, outcome, compound, credits,
     calls, duration_ms, routing_ms, degraded_reason, route_failure_reason, legs, printed,
     policy_version, unknown_credit_calls, worth) = data
    return TurnRow(session_id, fusion_id, kind, model, moment(start_ns, tz), pattern, outcome,
                   compound, credits, unknown_credit_calls, calls, duration_ms, routing_ms,
                   degraded_reason, route_failure_reason, [LegRow(*leg) for leg in legs],
                   TurnJson(*printed), policy_version, worth_figures.TurnWorth(*worth))


# The types turn_data gives a row's fields, by position (a number: int or float, as JSON
# gives it back), and those of a leg's (LegRow's fields): every way a row may be typed, so
# that the rows of the report's cache are checked by the set of their types.
_NUMBER = (int, float)
_OPTIONAL_NUMBER = (*_NUMBER, type(None))
_ROW_TYPES = ((int,), (list,), (str,), (str,), (str,), (str,), (str,), (str,), (bool,),
              _OPTIONAL_NUMBER, (int,), _NUMBER, _OPTIONAL_NUMBER, (str, type(None)),
              (str, type(None)), (list,), (list,), (str, type(None)), (int,), (list,))
_LEG_TYPES = ((str,), (str,), (str,), (str,), (str, type(None)), (bool,), _NUMBER, _NUMBER,
              (int,), _OPTIONAL_NUMBER, (int,), (int,), (int,), (int,), (int,), (str, type(None)))
_ROW_SHAPES = frozenset(itertools.product(*_ROW_TYPES))
_LEG_SHAPES = frozenset(itertools.product(*_LEG_TYPES))
_PRINTED_SHAPES = frozenset({(bytes, int, int), (memoryview, int, int)})  # TurnJson's fields
_BOUND = 2**63  # of the figures' sum: every sum and conversion of one stays finite
_ROW_FIGURES = operator.itemgetter(10, 11, 18)  # calls, duration_ms, unknown_credit_calls
_ROW_OPTIONAL_FIGURES = operator.itemgetter(9, 12)  # credits, routing_ms
# start_ms, duration_ms, calls, then unknown_credit_calls to cache_write_tokens
_LEG_FIGURES = operator.itemgetter(6, 7, 8, 10, 11, 12, 13, 14)
_LEG_CREDITS = operator.itemgetter(9)
_IS_SET = functools.partial(operator.is_not, None)


def check_turn_rows(rows: list) -> None:
    """ValueError unless each of `rows` is a row as turn_data makes one: every field of its
    type, every figure finite (and all of them together below 2**63), each start within
    the times a log can give, each kind one of KINDS. The report's cache checks its rows
    with it as it loads them, so that no row it holds can make row_from_data, the figures
    or a renderer fail; the text of each TurnJson (PRINTED_AT) is the cache's to check,
    where it keeps it.

    The rows are checked together, by the sets of their types and by sums, each a loop in
    C: a warm report loads thousands of rows, and a row at a time cost it a sixth more."""
    if set(map(tuple, map(map, itertools.repeat(type), rows))) - _ROW_SHAPES:
        raise ValueError("a cached turn is not a row of figures")
    legs = list(itertools.chain.from_iterable(map(operator.itemgetter(15), rows)))
    if set(map(tuple, map(map, itertools.repeat(type), legs))) - _LEG_SHAPES:
        raise ValueError("a cached turn's leg is not a row of figures")
    printed = list(map(operator.itemgetter(PRINTED_AT), rows))
    if set(map(tuple, map(map, itertools.repeat(type), printed))) - _PRINTED_SHAPES:
        raise ValueError("a cached turn's JSON is not a text, a place in it and a count")
    starts = list(map(operator.itemgetter(0), rows))
    if starts and not (EARLIEST_NS <= min(starts) and max(starts) < LATEST_NS):
        raise ValueError("a cached turn's start is out of range")
    if not set(map(operator.itemgetter(4), rows)) <= set(KINDS):
        raise ValueError("a cached turn's kind is none of " + ", ".join(KINDS))
    if set(map(type, itertools.chain.from_iterable(map(operator.itemgetter(1), rows)))) - {str}:
        raise ValueError("a cached turn's models are not names")
    worth_figures.check_turn_worths(list(map(operator.itemgetter(19), rows)))
    places = list(itertools.chain.from_iterable(map(operator.itemgetter(1, 2), printed)))
    if places and min(places) < 0:
        raise ValueError("a cached turn's JSON has a place or a count below 0")
    figures = itertools.chain(
        itertools.chain.from_iterable(map(_ROW_FIGURES, rows)),
        filter(_IS_SET, itertools.chain.from_iterable(map(_ROW_OPTIONAL_FIGURES, rows))),
        itertools.chain.from_iterable(map(_LEG_FIGURES, legs)),
        filter(_IS_SET, map(_LEG_CREDITS, legs)), places)
    try:
        if not sum(map(abs, figures)) < _BOUND:  # a NaN or an infinity is never below it
            raise ValueError("a cached turn's figures are out of range")
    except OverflowError:  # an int too large for a float, added to a float
        raise ValueError("a cached turn's figures are out of range") from None
