"""The report's figures: one plain-data snapshot computed from the rows of finished turns
(tailer/report/rows.py).

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
import json
import operator
from collections import Counter, defaultdict
from datetime import date, datetime, tzinfo

from ..records import field, is_record, record
from ..copilot.event_records import REJECTING_VERDICTS
from . import worth as worth_figures
from .checks import Check
from .rows import KINDS, CallRow, TurnRow, shown_credits
from ..turns.assembly import ROUTE_FAILED_OUTCOME

SCHEMA_VERSION = 7
ORDINARY = "ordinary"
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
class Snapshot:
    """Everything a report shows: every renderer is a function of one of these."""

    schema_version: int
    generated_at: str
    utc_offset: str  # of the report's time zone when it was made
    timezone: str  # its name: str(tz) (a ZoneInfo's IANA key), or the system's (CET, UTC)
    filters: dict[str, str]
    sessions: int  # the sessions of the turns counted (HydraFusion and ordinary)
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
        sessions=len({row.session_id for row in rows}),
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
            credits=shown_credits(_nano(row.credits for row in group), unknown),
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
            pattern, len(group), shown_credits(_nano(row.credits for row in group), unknown),
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
                     {model: shown_credits(nano, unknown)
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
        return (self.turns, shown_credits(credits, unknown), unknown, calls,
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
    return (name, legs, calls, shown_credits(nano, unknown), unknown, input_tokens, output_tokens,
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


def _credits(nano_aiu: int) -> float:
    return nano_aiu / 1e9


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


