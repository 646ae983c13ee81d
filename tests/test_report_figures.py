"""The report's figures on plain data: a turn's row, and the figures over rows."""

import functools
import os
import subprocess
import sys
import textwrap
from collections import Counter
from datetime import datetime, timedelta, timezone, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings, strategies as st

from exposition_helpers import samples
from report_helpers import turn_json
from tailer.report.figures import (
    GROUP_KEYS, GROUPINGS, AllUsage, Headline, KindUsage, ModelUse, Spend, by_kind, headline, snapshot,
)
from tailer.report.rows import CallRow, LegRow, TurnJson, TurnRow, moment, turn_row
from test_metrics import counted, turns_of


REPO = Path(__file__).resolve().parent.parent


def rows_of(write) -> list:
    return [turn_row(turn, timezone.utc) for turn in turns_of(write)]


def test_a_prompt_has_the_model_the_metrics_count_it_under():
    turns = turns_of(lambda w: (w.single("gpt-5.6-sol"), w.ordinary("mai-code-1.1-flash"),
                                w.route_failed("claude-sonnet-5")))
    rows = [turn_row(turn, timezone.utc) for turn in turns]
    assert [(row.kind, row.model) for row in rows] == [
        ("fusion", "hydrafusion"), ("ordinary", "mai-code-1.1-flash"),
        ("fallback", "claude-sonnet-5")]
    counted_under = {dict(labels)["kind"]: dict(labels)["model"]
                     for labels in samples(counted(turns), "hydrafusion_prompts_total")}
    assert {row.kind: row.model for row in rows} == counted_under


def test_an_ordinary_prompt_counts_its_own_calls_and_credits():
    [row] = rows_of(lambda w: w.ordinary("mai-code-1.1-flash", calls=3))
    assert row.calls == len(row.model_calls) == 3 and row.legs == []
    assert abs(row.credits - sum(call.credits for call in row.model_calls)) < 1e-9


def test_a_fusion_turn_counts_its_legs_calls_and_credits():
    [row] = rows_of(lambda w: w.cascade("mai-code-1.1-flash", "gpt-5.6-sol"))
    assert row.calls == sum(leg.calls for leg in row.legs) > 0
    assert abs(row.credits - sum(leg.credits for leg in row.legs)) < 1e-9
    assert row.start.endswith("+00:00")


def test_the_headline_is_of_fusion_turns_and_every_kind_has_its_figures():
    rows = rows_of(lambda w: (w.single("gpt-5.6-sol"), w.ordinary("mai-code-1.1-flash"),
                              w.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="reject")))
    figures = snapshot(rows, now=datetime(2026, 1, 1, tzinfo=timezone.utc), tz=timezone.utc)
    assert figures.headline == headline(sorted(rows, key=lambda row: row.start))
    fusion = headline([row for row in rows if row.kind != "ordinary"])
    assert figures.headline.all_usage.fusion == fusion.all_usage.fusion
    assert fusion.all_usage.ordinary.prompts == 0
    assert (figures.headline.all_usage.fusion.prompts, figures.headline.all_usage.ordinary.prompts,
            figures.headline.all_usage.prompts) == (2, 1, 3)
    assert figures.headline.turns == 2 and figures.headline.judged_turns == 1
    assert figures.headline.rejected_turns == 1 and figures.headline.judge_rejection_rate == 1
    kinds = {figures.kind: figures for figures in by_kind(rows)}
    assert list(kinds) == ["fusion", "ordinary", "fallback"]
    assert (kinds["fusion"].turns, kinds["ordinary"].turns, kinds["fallback"].turns) == (2, 1, 0)
    assert figures.turns == sorted(rows, key=lambda row: row.start)


def test_no_rows_give_empty_figures():
    figures = snapshot([], now=datetime(2026, 1, 1, tzinfo=timezone.utc), tz=timezone.utc)
    assert figures.turns == [] and figures.first_turn is None and figures.headline.turns == 0
    assert all(kind.turns == 0 for kind in figures.by_kind)


ZONES = ("UTC", "Europe/Berlin", "America/St_Johns", "Asia/Kathmandu", "Australia/Lord_Howe",
         "Pacific/Chatham", "Europe/Amsterdam")  # offsets of 30 and 45 minutes, DST of 30, LMT


class MidQuarterChange(tzinfo):
    """A zone whose offset goes from +01:00 to +02:00 at 01:07:30 UTC on 29 March 2026, in
    the middle of a quarter hour, as no zone of the tz database does today."""

    AT = datetime(2026, 3, 29, 1, 7, 30, tzinfo=timezone.utc)
    LOCAL_AT = datetime(2026, 3, 29, 2, 7, 30)

    def fromutc(self, at: datetime) -> datetime:
        return at + timedelta(hours=1 if at.replace(tzinfo=timezone.utc) < self.AT else 2)

    def utcoffset(self, at: datetime) -> timedelta:
        return timedelta(hours=1 if at.replace(tzinfo=None) < self.LOCAL_AT else 2)

    def dst(self, at):
        return None


def plain_moment(time_ns: int, tz) -> str:
    """moment's answer the slow, sure way: every instant looked up in its zone."""
    seconds, nanos = divmod(time_ns, 1_000_000_000)
    at = datetime.fromtimestamp(seconds, timezone.utc).replace(microsecond=nanos // 1000)
    return at.astimezone(tz).isoformat(timespec="milliseconds")


@functools.cache
def changes_of(zone: str) -> list[int]:
    """The hours (unix seconds) at whose end the zone's offset changes, 1900 to 2040."""
    tz, day, hour = ZoneInfo(zone), 86_400, 3600
    offset = lambda at: datetime.fromtimestamp(at, timezone.utc).astimezone(tz).utcoffset()
    return [at for start in range(-2_208_988_800, 2_208_988_800, day)
            if offset(start) != offset(start + day)
            for at in range(start, start + day, hour) if offset(at) != offset(at + hour)]


def near_a_change(zone: str) -> st.SearchStrategy[int]:
    """Instants within a quarter of an hour of one of the zone's changes of offset."""
    return st.sampled_from(changes_of(zone) or [0]).flatmap(
        lambda at: st.integers((at - 900) * 10**9, (at + 3600 + 900) * 10**9))


@settings(max_examples=400, deadline=None)
@given(zone=st.sampled_from(ZONES), data=st.data())
def test_a_moment_is_the_instant_looked_up_in_its_zone(zone, data):
    """moment keeps each quarter hour's offset: around every change of offset, whatever the
    offset's minutes, it gives what looking the instant up gives."""
    time_ns = data.draw(st.one_of(near_a_change(zone), st.integers(-2 * 10**18, 4 * 10**18)))
    assert moment(time_ns, ZoneInfo(zone)) == plain_moment(time_ns, ZoneInfo(zone))


@given(st.integers(-3600 * 10**9, 3600 * 10**9))
def test_a_change_of_offset_within_a_quarter_hour_is_looked_up(from_change_ns):
    """Each instant of a quarter hour in which the offset changes has its own offset."""
    time_ns = int(MidQuarterChange.AT.timestamp()) * 10**9 + from_change_ns
    assert moment(time_ns, MidQuarterChange()) == plain_moment(time_ns, MidQuarterChange())


@pytest.mark.parametrize("zone", ["Europe/Berlin", "Australia/Lord_Howe"])
def test_a_moment_in_the_machines_zone_is_its_local_time(zone):
    """The machine's zone (tz None) is looked up through localtime, daylight saving included:
    in a process of its own, whose TZ is `zone`."""
    script = textwrap.dedent("""
        import random
        from datetime import datetime, timezone
        from tailer.report.rows import moment
        draw = random.Random(7)
        for _ in range(20_000):
            at = draw.randrange(1_600_000_000 * 10**9, 1_900_000_000 * 10**9)
            seconds, nanos = divmod(at, 10**9)
            plain = datetime.fromtimestamp(seconds, timezone.utc).replace(microsecond=nanos // 1000)
            assert moment(at, None) == plain.astimezone().isoformat(timespec="milliseconds"), at
        print(moment(1_792_893_600 * 10**9, None))
        """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, "TZ": zone, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == plain_moment(1_792_893_600 * 10**9, ZoneInfo(zone))


# -- The groups, against the headline of each group's own turns --------------------------------

MODELS = ("gpt-5.6-sol", "mai-code-1.1-flash", "claude-sonnet-5")


@st.composite
def leg_rows(draw) -> LegRow:
    """A leg, some of whose calls (all, at times) may be of unknown credits."""
    calls = draw(st.integers(0, 5))
    unknown = draw(st.sampled_from((0, 0, calls, draw(st.integers(0, calls)))))
    return LegRow(
        kind=draw(st.sampled_from(("draft", "judge", "repair", "critic"))), role="r",
        model=draw(st.sampled_from(MODELS)),
        status=draw(st.sampled_from(("completed", "failed", "cancelled"))),
        verdict=draw(st.sampled_from((None, "", "accept", "reject", "revise"))),
        committed=draw(st.booleans()), start_ms=0.0, duration_ms=1.0,
        calls=calls, credits=None if unknown and unknown == calls else draw(
            st.integers(1 if unknown else 0, 10**10)) / 1e9,
        unknown_credit_calls=unknown, input_tokens=draw(st.integers(0, 10**6)), output_tokens=draw(st.integers(0, 10**5)),
        cache_read_tokens=draw(st.integers(0, 10**6)), cache_write_tokens=draw(st.integers(0, 10**4)),
        failure_reason=None)


@st.composite
def fusion_rows(draw, index: int) -> TurnRow:
    # Across a year's end, so ISO weeks cross years and months; minutes, so days hold many.
    start = datetime(2026, 12, 20, tzinfo=timezone.utc) + timedelta(
        minutes=draw(st.integers(0, 60 * 24 * 30)))
    legs = draw(st.lists(leg_rows(), max_size=4))
    return TurnRow(
        session_id=draw(st.sampled_from(("s-a", "s-b", "s-c", "s-d"))), fusion_id=f"f-{index}",
        kind=draw(st.sampled_from(("fusion", "fusion", "fallback"))), model="hydrafusion",
        start=start.isoformat(timespec="milliseconds"),
        pattern=draw(st.sampled_from(("single", "cascade", "critique"))),
        outcome=draw(st.sampled_from(("completed", "incomplete", "route_failed", "aborted"))),
        compound=draw(st.booleans()), credits=shown(legs),
        unknown_credit_calls=sum(leg.unknown_credit_calls for leg in legs),
        calls=sum(leg.calls for leg in legs), duration_ms=1.0, routing_ms=None,
        degraded_reason=None, route_failure_reason=None, legs=legs,
        printed=TurnJson(b"{}", 1, draw(st.integers(0, 3))),
        policy_version=draw(st.sampled_from((None, "p1", "p2", "p3"))))


@st.composite
def ordinary_rows(draw, index: int) -> TurnRow:
    """A prompt answered without fusion: its model calls (none, at times), some of unknown
    credits, in its printed text, where the report reads them."""
    start = datetime(2026, 12, 20, tzinfo=timezone.utc) + timedelta(
        minutes=draw(st.integers(0, 60 * 24 * 30)))
    calls = [CallRow(None, draw(st.sampled_from(MODELS)), 0.0, 1.0,
                     draw(st.sampled_from((None, draw(st.integers(0, 10**10)) / 1e9))),
                     draw(st.integers(0, 10**6)), draw(st.integers(0, 10**5)),
                     draw(st.integers(0, 10**6)), draw(st.integers(0, 10**4)), "stop")
             for _ in range(draw(st.integers(0, 3)))]
    row = TurnRow(
        session_id=draw(st.sampled_from(("s-a", "s-b", "s-c", "s-d", "s-e"))),
        fusion_id=f"prompt-{index}", kind="ordinary", model=draw(st.sampled_from(MODELS)),
        start=start.isoformat(timespec="milliseconds"), pattern="ordinary", outcome="completed",
        compound=False, credits=shown(call_parts(calls)),
        unknown_credit_calls=sum(call.credits is None for call in calls), calls=len(calls),
        duration_ms=1.0, routing_ms=None, degraded_reason=None, route_failure_reason=None,
        legs=[], printed=None)
    row.printed = turn_json(row, calls, [])
    return row


def prompt_rows(index: int) -> st.SearchStrategy[TurnRow]:
    return st.one_of(fusion_rows(index), fusion_rows(index), ordinary_rows(index))


class _Part:
    """A model call as a part with credits: unknown (None) is one call left out."""

    def __init__(self, call: CallRow):
        self.credits, self.unknown_credit_calls = call.credits, int(call.credits is None)


def call_parts(calls: list[CallRow]) -> list[_Part]:
    return [_Part(call) for call in calls]


def known_nano(parts) -> int:
    """Credits of legs or turns, those of unknown credits (None) adding nothing."""
    return sum(round(part.credits * 1e9) for part in parts if part.credits is not None)


def shown(parts) -> float | None:
    """The known credits of legs or turns; None when they know none beside a call of unknown
    credits."""
    parts = list(parts)
    unknown, nano = sum(part.unknown_credit_calls for part in parts), known_nano(parts)
    return None if unknown and not nano else nano / 1e9


def tokens_of(parts) -> tuple[int, int, int, int, int]:
    """Input, output, cache read, cache write and total tokens of legs or calls."""
    kinds = [sum(getattr(part, f"{kind}_tokens") for part in parts)
             for kind in ("input", "output", "cache_read", "cache_write")]
    return (*kinds, sum(kinds))


def use_of(prompts: int, legs: list[LegRow], calls: list[CallRow]) -> tuple:
    """KindUsage's fields of `prompts` prompts whose legs and calls these are."""
    parts = legs + call_parts(calls)
    return (prompts, sum(leg.calls for leg in legs) + len(calls), shown(parts),
            sum(part.unknown_credit_calls for part in parts), *tokens_of(legs + calls))


def all_usage_of(rows: list[TurnRow]) -> AllUsage:
    """Every prompt's use: HydraFusion's turns by their legs, ordinary prompts by their calls."""
    fusion = [row for row in rows if row.kind != "ordinary"]
    legs = [leg for row in fusion for leg in row.legs]
    calls = [call for row in rows if row.kind == "ordinary" for call in row.model_calls]
    return AllUsage(*use_of(len(rows), legs, calls), KindUsage(*use_of(len(fusion), legs, [])),
                    KindUsage(*use_of(len(rows) - len(fusion), [], calls)))


def models_of(rows: list[TurnRow]) -> list[ModelUse]:
    """Each model's whole use, its legs' and its ordinary calls' apart, the biggest first."""
    legs = [leg for row in rows for leg in row.legs]
    calls = [call for row in rows if row.kind == "ordinary" for call in row.model_calls]
    uses = []
    for model in {leg.model for leg in legs} | {call.model for call in calls}:
        mine = [leg for leg in legs if leg.model == model]
        theirs = [call for call in calls if call.model == model]
        fusion, ordinary = use_of(len(mine), mine, []), use_of(0, [], theirs)
        uses.append(ModelUse(model, *use_of(len(mine), mine, theirs), Spend(model, *fusion),
                             Spend(model, *ordinary)))
    return sorted(uses, key=lambda use: (-(use.credits or 0), use.name))


def headline_of(rows: list[TurnRow]) -> tuple:
    """Headline's fields of `rows`, as docs/METRICS.md defines them, turn by turn: of their
    HydraFusion turns, and every prompt's use."""
    usage = all_usage_of(rows)
    rows = [row for row in rows if row.kind != "ordinary"]
    legs = [leg for row in rows for leg in row.legs]
    nano = known_nano
    ratio = lambda part, whole: part / whole if whole else None  # noqa: E731
    routed = [row for row in rows if row.outcome != "route_failed"]
    judged = [row for row in rows if any(leg.verdict for leg in row.legs)]
    rejected = [row for row in judged if any(leg.verdict in ("reject", "revise") for leg in row.legs)]
    return (len(rows), shown(legs), sum(leg.unknown_credit_calls for leg in legs),
            sum(leg.calls for leg in legs), list(Counter(row.outcome for row in rows).most_common()),
            ratio(sum(row.compound for row in routed), len(routed)), len(judged), len(rejected),
            ratio(len(rejected), len(judged)),
            ratio(nano(leg for leg in legs if not leg.committed) / 1e9, nano(legs) / 1e9),
            ratio(sum(leg.cache_read_tokens for leg in legs),
                  sum(leg.input_tokens + leg.cache_read_tokens + leg.cache_write_tokens for leg in legs)),
            sum(leg.status in ("failed", "cancelled") for leg in legs),
            sum(row.printed.tool_count for row in rows), usage)


def headline_fields(figures) -> tuple:
    values = [getattr(figures, name) for name in Headline.__match_args__]
    values[4] = list(values[4].items())  # the outcomes, in their order
    return tuple(values)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), count=st.integers(0, 40), groupings=st.sets(st.sampled_from(GROUPINGS)))
def test_the_headline_and_each_group_are_the_figures_of_their_own_turns(data, count, groupings):
    """Each group is the figures of its own prompts, HydraFusion's and ordinary: a day's, a
    week's and a month's in the order of their keys, a session's in the order of its last
    prompt; the headline is every group's, and its all_usage their total."""
    rows = [data.draw(prompt_rows(index)) for index in range(count)]
    snap = snapshot(rows, now=datetime(2027, 2, 1, tzinfo=timezone.utc), tz=timezone.utc,
                    groupings=tuple(sorted(groupings)))
    ordered = snap.turns
    firsts: dict[str, TurnRow] = {}
    for row in ordered:
        if row.kind == "fusion" and row.policy_version is not None:
            firsts.setdefault(row.policy_version, row)
    later = list(firsts.items())[1:]  # the report's first version is new in no group
    for name in GROUPINGS:
        groups = getattr(snap, f"by_{name}")
        if name not in groupings:
            assert groups is None
            continue
        key = GROUP_KEYS[name]
        members: dict[str, list[TurnRow]] = {}
        for row in ordered:
            members.setdefault(key(row), []).append(row)
        last = {name: max(i for i, row in enumerate(ordered) if key(row) == name) for name in members}
        assert [group.key for group in groups] == sorted(
            members, key=(lambda name: (last[name], name)) if name == "session" else None)
        for group in groups:
            own = members[group.key]
            assert headline_fields(group) == headline_of(own)
            assert (group.first_turn, group.last_turn) == (own[0].start, own[-1].start)
            assert group.models == models_of(own)
            models = sorted({leg.model for row in own for leg in row.legs})
            assert group.credits_by_model == {
                m: shown(leg for row in own for leg in row.legs if leg.model == m) for m in models}
            assert list(group.credits_by_model) == models
            assert group.new_policy_versions == [
                version for version, first in later if key(first) == group.key]
    assert headline_fields(snap.headline) == headline_of(ordered)
    assert snap.by_model == models_of(ordered)
    legs = [leg for row in ordered for leg in row.legs]
    kinds = sorted({leg.kind for leg in legs},
                   key=lambda name: (-(shown(leg for leg in legs if leg.kind == name) or 0), name))
    assert snap.by_leg_kind == [
        Spend(name, *use_of(len(own), own, []))
        for name, own in ((name, [leg for leg in legs if leg.kind == name]) for name in kinds)]
