"""A finished turn's row: what the report keeps of a turn, and the row as plain data.

A month holds some 7,500 turns of some 200,000 model calls and tools; the report keeps a
row per turn (its figures, its legs, its calls and tools as JSON text), never the turn's
records, and the report's cache and its workers keep and send the row as plain lists, in no
time zone (turn_data), checked as they are loaded (check_turn_rows). tailer/report/figures.py
adds rows up.
"""

from __future__ import annotations

import functools
import itertools
import json
import operator
from datetime import datetime, timezone, tzinfo

from ..records import record
from ..copilot.event_records import LegEnded
from ..copilot.event_values import EARLIEST_NS, LATEST_NS
from . import turn_text, worth as worth_figures
from .read import report_pattern
from ..turns.assembly import Turn, leg_start_ns

KINDS = ("fusion", "ordinary", "fallback")


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
        credits=shown_credits(nano, unknown),
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
        credits=shown_credits(nano_aiu, unknown),
        unknown_credit_calls=unknown,
        input_tokens=usage.uncached_input(),
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        failure_reason=leg.failure_reason,
    )


def shown_credits(nano_aiu: int, unknown: int) -> float | None:
    """The known credits of some calls, `unknown` more of unknown credits: None when those
    leave nothing known (0 known beside an unknown is no figure), so that parts add up to
    their whole in any order."""
    return None if unknown and not nano_aiu else nano_aiu / 1e9


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
