"""The dashboard's headline panels and time series, and the same figures from the files.

    truth = headline_truth(turns)                # tests/sessiongen.py's ExpectedTurn
    assert same_figures(headlines(prom, window, at), truth)
    assert same_figures(series_by_day(prom, day_starts)[title], series_truth(turns, day_starts)[title])

Used on a few days of history and live data (tests/test_dashboard_queries.py) and on a
generated month (tests/test_month.py). The queries are the dashboard's own, substituted as
Grafana would (tests/dashboard.py); the truth is computed from what the session generator
wrote, never through the tailer.
"""

from collections import defaultdict
from datetime import datetime

import pytest

import dashboard as dash

HEADLINES = ("Credits", "Credits on multi-model turns", "Compound rate", "Rejection rate",
             "Review share of credits")
REVIEW_KINDS = ("judge", "critic")


def share(part, whole):
    return part / whole if whole else None


def headline_truth(turns) -> dict[str, list[float | None]]:
    """The headline panels' figures for these turns (tests/sessiongen.py's ExpectedTurn),
    one per target of each panel; None where the panel shows nothing. Credits are the known
    ones (a leg's figure leaves out its calls of unknown credits), beside the count of those."""
    turns = [turn for turn in turns if turn.kind != "ordinary"]
    routed = [turn for turn in turns if turn.outcome != "route_failed"]
    legs = [leg for turn in turns for leg in turn.legs]
    judged = [{leg.verdict for leg in turn.legs if leg.verdict} for turn in turns]
    judged = [verdicts for verdicts in judged if verdicts]
    credits = sum(leg.nano_aiu for leg in legs) / 1e9
    multi = sum(leg.nano_aiu for turn in turns if len(set(turn.models)) > 1 for leg in turn.legs) / 1e9
    unkept = [leg for leg in legs if not leg.committed]
    return {
        "Credits": [credits, sum(turn.unknown_calls for turn in turns)],
        "Credits on multi-model turns": [multi, share(multi, credits)],
        "Compound rate": [share(sum(len(set(turn.models)) > 1 for turn in routed), len(routed))],
        "Rejection rate": [share(sum(bool(verdicts & {"reject", "revise"}) for verdicts in judged), len(judged))],
        "Review share of credits": [
            share(sum(leg.nano_aiu for leg in unkept if leg.phase_kind in REVIEW_KINDS) / 1e9, credits),
            share(sum(leg.nano_aiu for leg in unkept if leg.phase_kind not in REVIEW_KINDS) / 1e9, credits)],
    }


def same_figures(got, want) -> bool:
    """{panel: [value per target]} equal to within 1e-9 relative; None (no value) only to None."""
    def close(a, b):
        return a is None and b is None or None not in (a, b) and a == pytest.approx(b, rel=1e-9, abs=1e-9)

    return got.keys() == want.keys() and all(
        len(got[key]) == len(want[key]) and all(map(close, got[key], want[key])) for key in want)


def turn_end(turn) -> float:
    return datetime.fromisoformat(turn.end_timestamp.replace("Z", "+00:00")).timestamp()


def headlines(prom, window_seconds: float, at: float, variables=None) -> dict[str, list[float | None]]:
    """The dashboard's headline panels over the window ending at `at`, with the variables
    given (All for the rest): each target's value (None: no value)."""
    figures = defaultdict(list)
    for title, expr in dash.prometheus_exprs(window_seconds, variables):
        if title in HEADLINES:
            result = prom.query(expr, time=at)
            figures[title].append(float(result[0]["value"][1]) if result else None)
    return dict(figures)


DAY = 86400


def series_truth(turns, day_starts) -> dict:
    """The time series' points, one per UTC day: {panel: {series: [value per day]}}."""
    credits = defaultdict(lambda: [0.0] * len(day_starts))
    compound, rejection = [], []
    for index, start in enumerate(day_starts):
        inside = [t for t in turns if t.kind != "ordinary" and start < turn_end(t) <= start + DAY]
        for turn in inside:
            for leg in turn.legs:
                if leg.nano_aiu or not leg.unknown_calls:  # else no credit sample, not a 0
                    credits[leg.model][index] += leg.nano_aiu / 1e9
        figures = headline_truth(inside) if inside else {"Compound rate": [None], "Rejection rate": [None]}
        compound += figures["Compound rate"]
        rejection += figures["Rejection rate"]
    return {"Credits by model over time": dict(credits),
            "Compound rate over time": {"compound rate": compound},
            "Rejection rate over time": {"rejection rate": rejection}}


def series_by_day(prom, day_starts) -> dict:
    """The dashboard's time series with a one-day bucket, as Grafana asks for them: a range
    query stepping over the day starts; a point is the day that begins at it."""
    points = {}
    for title, expr in dash.prometheus_range_exprs(DAY):
        found = {}
        for series in prom.query_range(expr, day_starts[0], day_starts[-1], f"{DAY}s"):
            by_time = {float(at): float(value) for at, value in series["values"]}
            name = series["metric"].get("model") or title.split(" over")[0].lower()
            found[name] = [by_time.get(float(start)) for start in day_starts]
        points[title] = found
    return points


def assert_series_equal(points, truth) -> None:
    """series_by_day's points against series_truth's. A day with no credit point for a model
    (its series was not born yet) is 0 credits; a ratio with no point has no turns."""
    for title, want in truth.items():
        got = points[title]
        if title == "Credits by model over time":
            got = {model: [value or 0.0 for value in days] for model, days in got.items()}
        assert same_figures(got, want), (title, got, want)
