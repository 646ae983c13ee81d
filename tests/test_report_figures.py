"""The report's figures on plain data: a turn's row, and the figures over rows."""

from datetime import datetime, timezone

from exposition_helpers import samples
from tailer.report.figures import by_kind, headline, snapshot, turn_row
from test_metrics import counted, turns_of


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
    assert figures.headline == headline([row for row in rows if row.kind != "ordinary"])
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
