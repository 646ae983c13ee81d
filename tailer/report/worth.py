"""Was fusion worth it: what the review bought, what the gate saved, and the same work on
one model (docs/REPORT.md, "Was fusion worth it", says how each figure is made and what it
cannot tell).

Measured, from the legs, as the headline's review share is:
- per pattern (and per day, week, month, session and version of the router's policy): the
  turns, their credits, those of the legs whose answer was kept (`answer`) and of the others
  (`review`: judges, critics, drafts not kept, failed legs), and the median turn;
- the median turn of each pattern on its answering model against the median `single` turn
  on that model (`versus_single`);
- the gate: a cascade's turns by what its judge did (turns.assembly.Turn.gate_outcome, the
  rule the metrics count by), each with its credits kept and not kept.

Estimated, and kept apart from every measured figure (`one_model`): what the kept leg's
tokens would have cost on the turn's answering model alone, at prices fitted from the
user's own calls (tailer/report/prices.py).

The answering model of a fusion turn is the model it would have been answered on without
the review: for a cascade, the model its repair runs on (the repair that ran, else the one
the router's plan names, else the judge's, which a plan without one leaves as the stronger
model); for any other pattern, the model of the leg whose answer was kept. So an accepted
draft is priced on the model that would otherwise have answered it.

A turn keeps what only its records tell (TurnWorth, in the report's cache with its row):
the answering model, the kept leg's token counts, the gate, and the sums its model calls
give the fit. The credits come from its legs, as the other figures' do.
"""

from __future__ import annotations

import itertools
import math
import operator
from datetime import date

from ..records import record
from ..turns.assembly import Turn
from . import prices
from .prices import Fit, ModelPrices

GATES = ("accepted", "rejected", "unjudged")


@record(slots=True)
class TurnWorth:
    """What a turn's records tell the worth figures and its row does not (see the module)."""

    answer_model: str | None  # None: not a fusion turn, or none could be told
    answer_tokens: list[int] | None  # the kept leg's prices.token_counts; None: no leg kept
    gate: str | None  # Turn.gate_outcome
    calls: list[list]  # per model of its calls: [model, its calls' prices.call_sums added up]


def check_turn_worths(worths: list) -> None:
    """ValueError unless each of `worths` is TurnWorth's fields as turn_worth makes them: the
    report's cache checks its rows' with it as it loads them, so that no saved value can
    make the fit or a renderer fail (a count below 0 or a call's sums of another length
    would give prices no call ever had, and sums past any log's overflow the fit's floats).

    Checked a field at a time over every worth, each check a loop in C, as the rows'
    figures are (rows.check_turn_rows): a watch of 10,000 sessions loads as many."""
    if set(map(type, worths)) - {list} or set(map(len, worths)) - {len(TurnWorth.__annotations__)}:
        raise ValueError("a cached turn's worth is not its four fields")
    answer_models, tokens, gates, calls = zip(*worths) if worths else ((),) * 4
    if set(map(type, answer_models)) - {str, type(None)}:
        raise ValueError("a cached turn's answering model is not a name")
    if not _counts([kept for kept in tokens if kept is not None], prices.PRICES, _COUNT_BOUND):
        raise ValueError("a cached turn's kept tokens are not counts")
    if set(map(type, gates)) - {str, type(None)} or set(gates) - {None, *GATES}:
        raise ValueError("a cached turn's gate is none of " + ", ".join(GATES))
    model_sums = list(itertools.chain.from_iterable(calls)) if not set(map(type, calls)) - {list} else None
    if (model_sums is None or set(map(type, model_sums)) - {list} or set(map(len, model_sums)) - {2}
            or set(map(type, map(operator.itemgetter(0), model_sums))) - {str}
            or not _counts(list(map(operator.itemgetter(1), model_sums)), prices.SUMS, _PRODUCT_BOUND)):
        raise ValueError("a cached turn's calls are not sums per model")


# A turn's figures add up to below 2**63 (rows.check_turn_rows), so its token counts do,
# and a sum of products of them, or of their squares, stays below 2**126: prices.Fit's
# floats then stay finite for the calls of any report.
_COUNT_BOUND = 2**63
_PRODUCT_BOUND = _COUNT_BOUND**2


def _counts(lists: list, length: int, bound: int) -> bool:
    """Whether each of `lists` is a list of `length` whole numbers from 0 to below `bound`."""
    if set(map(type, lists)) - {list} or set(map(len, lists)) - {length}:
        return False
    values = list(itertools.chain.from_iterable(lists))
    return not values or (not set(map(type, values)) - {int} and 0 <= min(values) and max(values) < bound)


def turn_worth(turn: Turn) -> list:
    """TurnWorth's fields for a finished turn, as JSON-able lists (rows.turn_data)."""
    committed = next((leg for leg in turn.legs if turn.is_committed(leg)), None)
    tokens = None
    if committed is not None and turn.kind == "fusion":
        tokens = list(prices.token_counts(committed.usage))
    by_model: dict[str, list[list[int]]] = {}
    for call in turn.calls:
        by_model.setdefault(call.model, []).append(prices.call_sums(
            prices.token_counts(call.usage), call.usage.nano_aiu if call.credits_known else None))
    return [_answer_model(turn, committed), tokens, turn.gate_outcome,
            [[model, prices.added(sums)] for model, sums in by_model.items()]]


def _answer_model(turn: Turn, committed) -> str | None:
    if turn.kind != "fusion":
        return None
    if turn.pattern == "cascade":
        repairs = [leg.model for leg in turn.legs if leg.phase_kind == "repair" and leg.model]
        planned = turn.resolved.repair_model if turn.resolved is not None else None
        judges = [leg.model for leg in turn.legs if leg.phase_kind == "judge" and leg.model]
        for model in (repairs[-1] if repairs else None, planned, judges[0] if judges else None):
            if model:
                return model
    return (committed.model or "unknown") if committed is not None else None


@record(slots=True)
class Part:
    """The legs of some turns whose answer was kept (answer) or not (review)."""

    legs: int
    credits: float | None
    unknown_credit_calls: int


@record(slots=True)
class Estimate:
    """The same work on one model: an estimate, never a measurement, never added to one."""

    turns: int  # the turns estimated
    credits: float | None  # their measured credits, to hold the estimate against
    unknown_credit_calls: int
    alone: float | None  # their kept legs' tokens at their answering model's fitted prices
    error: float | None  # its standard error, from the fits' own
    not_estimated: int  # turns left out: no leg kept, or no fitted price for their model


@record(slots=True)
class WorthGroup:
    """Some HydraFusion turns (one pattern, gate outcome, day, ... named by `key`)."""

    key: str
    turns: int
    credits: float | None
    unknown_credit_calls: int
    answer: Part
    review: Part
    review_share: float | None  # review credits over all (known) credits
    one_model: Estimate


@record(slots=True)
class VersusSingle:
    """A pattern's median turn on one answering model against the median single turn there."""

    pattern: str
    model: str
    turns: int
    median_credits: float | None
    single_turns: int
    single_median_credits: float | None
    ratio: float | None  # median_credits over single_median_credits


@record(slots=True)
class Worth:
    """The report's "worth it" section."""

    by_pattern: list[WorthGroup]
    gate: list[WorthGroup]  # cascade turns by GATES, those with turns
    by_policy_version: list[WorthGroup]  # fusion turns, versions in the order first seen
    by_day: list[WorthGroup] | None  # None: not made (figures.snapshot's `groupings`)
    by_week: list[WorthGroup] | None
    by_month: list[WorthGroup] | None
    by_session: list[WorthGroup] | None
    versus_single: list[VersusSingle]
    prices: list[ModelPrices]  # every model of a call, the most calls first


class _Tally:
    """What some turns add up to, in whole numbers, so parts merge in any order (FIGURES),
    and the kept token counts of the turns estimated, by answering model: added up where a
    group is priced, in one pass over each column."""

    __slots__ = ("figures", "tokens")
    FIGURES = ("turns", "answer legs", "answer nano-credits", "answer unknown calls",
               "review legs", "review nano-credits", "review unknown calls", "turns estimated",
               "their nano-credits", "their unknown calls", "turns not estimated")

    def __init__(self):
        self.figures, self.tokens = [0] * len(self.FIGURES), {}

    @classmethod
    def merged(cls, parts: list[_Tally]) -> _Tally:
        whole = cls()
        whole.figures = [sum(column) for column in zip(*(part.figures for part in parts))]
        for part in parts:
            for model, counts in part.tokens.items():
                whole.tokens.setdefault(model, []).extend(counts)
        return whole

    def group(self, key: str, fits: dict[str, Fit]) -> WorthGroup:
        (turns, answer_legs, answer_nano, answer_unknown, review_legs, review_nano,
         review_unknown, estimated, estimated_nano, estimated_unknown, left) = self.figures
        unknown = answer_unknown + review_unknown
        alone = error = None
        if estimated:
            found = [fits[model].estimate([sum(column) for column in zip(*counts)])
                     for model, counts in sorted(self.tokens.items())]
            alone = sum(nano for nano, _ in found) / 1e9
            error = math.sqrt(sum(spread * spread for _, spread in found)) / 1e9
        return WorthGroup(
            key, turns, _shown(answer_nano + review_nano, unknown), unknown,
            Part(answer_legs, _shown(answer_nano, answer_unknown), answer_unknown),
            Part(review_legs, _shown(review_nano, review_unknown), review_unknown),
            review_nano / (answer_nano + review_nano) if answer_nano + review_nano else None,
            Estimate(estimated, _shown(estimated_nano, estimated_unknown) if estimated else None,
                     estimated_unknown, alone, error, left))


def figures(rows: list, fusion: list, groupings: tuple[str, ...]) -> Worth:
    """The worth figures of the report's turns: `rows` every turn (the fit takes every call
    of known credits, ordinary prompts' too), `fusion` HydraFusion's in the order they
    started (rows.TurnRow); by day, week, month and session only those in `groupings`.

    One pass over the turns, each added to its part (the turns of one pattern, gate,
    policy version, day and, where asked for, session), in whole numbers; every grouping is
    merged from the parts: a month's 7,500 turns make a few hundred parts."""
    fits = _fits(rows)
    # Per model, the token types its calls never had; no entry: no fitted price at all.
    unpriced = {model: fit.unseen for model, fit in fits.items() if fit.fitted}
    by_session = "session" in groupings
    parts: dict[tuple, _Tally] = {}
    medians: dict[tuple[str, str], list[float]] = {}
    turns_on: dict[tuple[str, str], int] = {}
    for row in fusion:
        worth = row.worth or _NO_WORTH
        answer_legs = answer_nano = answer_unknown = review_legs = review_nano = review_unknown = 0
        for leg in row.legs:
            nano = round(leg.credits * 1e9) if leg.credits else 0
            if leg.committed:
                answer_legs += 1
                answer_nano += nano
                answer_unknown += leg.unknown_credit_calls
            else:
                review_legs += 1
                review_nano += nano
                review_unknown += leg.unknown_credit_calls
        key = (row.kind, row.pattern, worth.gate, row.policy_version, row.start[:10],
               row.session_id if by_session else "")
        tally = parts.get(key)
        if tally is None:
            tally = parts[key] = _Tally()
        figures = tally.figures
        figures[0] += 1
        figures[1] += answer_legs
        figures[2] += answer_nano
        figures[3] += answer_unknown
        figures[4] += review_legs
        figures[5] += review_nano
        figures[6] += review_unknown
        model, counts = worth.answer_model, worth.answer_tokens
        unseen = unpriced.get(model)
        if counts is not None and unseen is not None and not any(counts[i] for i in unseen):
            figures[7] += 1
            figures[8] += answer_nano + review_nano
            figures[9] += answer_unknown + review_unknown
            found = tally.tokens.get(model)
            if found is None:
                tally.tokens[model] = [counts]
            else:
                found.append(counts)
        else:
            figures[10] += 1
        if model is not None:
            on = (row.pattern, model)
            turns_on[on] = turns_on.get(on, 0) + 1
            if not row.unknown_credit_calls:
                medians.setdefault(on, []).append(row.credits)

    def grouped(key, keep=lambda part: True) -> dict[str, _Tally]:
        found: dict[str, list[_Tally]] = {}
        for part, tally in parts.items():
            if keep(part):
                found.setdefault(key(part), []).append(tally)
        return {name: _Tally.merged(tallies) for name, tallies in found.items()}

    def listed(tallies: dict[str, _Tally], order=None) -> list[WorthGroup]:
        names = order(tallies) if order else sorted(tallies)
        return [tallies[name].group(name, fits) for name in names]

    patterns = listed(grouped(lambda part: part[1]),
                      lambda found: sorted(found, key=lambda name: (-found[name].figures[0], name)))
    days = grouped(lambda part: part[4])
    made = {"day": days, "week": _by(days, _week), "month": _by(days, lambda day: day[:7])}
    orders = {}
    if by_session:
        made["session"] = grouped(lambda part: part[5])
        orders["session"] = _by_last_prompt(rows)
    gates = grouped(lambda part: part[2], lambda part: part[2] is not None)
    return Worth(
        by_pattern=patterns,
        gate=listed(gates, lambda found: [name for name in GATES if name in found]
                    + sorted(set(found) - set(GATES))),
        by_policy_version=listed(grouped(lambda part: part[3] or "unknown",
                                         lambda part: part[0] == "fusion"), list),
        **{f"by_{name}": listed(made[name], orders.get(name)) if name in groupings else None
           for name in ("day", "week", "month", "session")},
        versus_single=_versus_single(turns_on, medians, [group.key for group in patterns]),
        prices=[fit.figures() for fit in sorted(fits.values(), key=lambda fit: (-fit.calls, fit.model))],
    )


_NO_WORTH = TurnWorth(None, None, None, [])  # a row made without its turn (tests): nothing to tell


def _fits(rows: list) -> dict[str, Fit]:
    """Every model's fit, from the calls of every turn."""
    sums: dict[str, list[list[int]]] = {}
    for row in rows:
        if row.worth is not None:
            for model, found in row.worth.calls:
                sums.setdefault(model, []).append(found)
    return {model: Fit(model, prices.added(found)) for model, found in sums.items()}


def _by_last_prompt(rows: list):
    """Sessions in the order --by session lists them (figures.groupings_of): by their last
    prompt, an ordinary one too, of `rows` (in the order they started), so the "worth it"
    table under it, and its JSON and CSV, follow its rows."""
    last = {row.session_id: index for index, row in enumerate(rows)}
    return lambda found: sorted(found, key=lambda name: (last[name], name))


def _by(days: dict[str, _Tally], key) -> dict[str, _Tally]:
    found: dict[str, list[_Tally]] = {}
    for day, tally in days.items():
        found.setdefault(key(day), []).append(tally)
    return {name: _Tally.merged(tallies) for name, tallies in found.items()}


def _versus_single(turns_on: dict, medians: dict, patterns: list[str]) -> list[VersusSingle]:
    """Each pattern but single on each answering model, beside single turns there."""
    order = {pattern: at for at, pattern in enumerate(patterns)}
    found = []
    for (pattern, model), turns in turns_on.items():
        if pattern == "single":
            continue
        own = medians.get((pattern, model))
        single = medians.get(("single", model))
        median = _median(own) if own else None
        single_median = _median(single) if single else None
        found.append(VersusSingle(
            pattern, model, turns, median, turns_on.get(("single", model), 0), single_median,
            median / single_median if median is not None and single_median else None))
    return sorted(found, key=lambda item: (order.get(item.pattern, len(order)), -item.turns, item.model))


def _week(day: str) -> str:
    year, week, _ = date.fromisoformat(day).isocalendar()
    return f"{year}-W{week:02d}"


def _shown(nano_aiu: int, unknown: int) -> float | None:
    """Known credits beside `unknown` calls of unknown credits: None when none is known
    (as figures.py shows every credits figure)."""
    return None if unknown and not nano_aiu else nano_aiu / 1e9


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
