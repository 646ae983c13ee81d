"""Was fusion worth it (issue 42): the prices fitted from the user's calls, the same work on
one model, the gate and the review, against the truth of generated calls and sessions.

The fit (tailer/report/prices.py) is exact: calls priced by a known linear rule give those
prices back, and what any tokens would cost at them, to the last nano-credit; noise shows as
the fit's error, and too few calls, or calls that cannot tell the prices apart, are refused.
The report's figures are then held to the truth of sessions whose calls cost their tokens
at known prices (tests/sessiongen.py's `prices`), computed from what the writer chose.
"""

from __future__ import annotations

import math
import random
import tempfile
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from report_helpers import wanted_turns
from sessiongen import START, SessionWriter
from tailer.copilot.files import session_logs
from tailer.report import prices
from tailer.report.figures import snapshot
from tailer.report.checks import check_figures
from tailer.report.rows import turn_row
from tailer.report.prices import Fit, call_sums
from tailer.report.read import Selection, SessionReader

NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)
TYPES = prices.TOKEN_TYPES


def fit_of(calls, model="m") -> Fit:
    """The fit of calls given as (token counts, nano-credits or None)."""
    return Fit(model, prices.added([call_sums(counts, nano) for counts, nano in calls]))


def cost(rule, counts) -> int:
    return sum(price * count for price, count in zip(rule, counts))


token_counts = st.tuples(st.integers(0, 200_000), st.integers(0, 400_000), st.integers(0, 8_000),
                         st.integers(0, 16_000))
rules = st.tuples(*[st.integers(0, 20_000)] * 4)  # nano-credits per token, by type


def basis(scale: int = 1000) -> list[tuple[int, int, int, int]]:
    """A call of each type alone: with them, no set of calls leaves two prices alike."""
    return [tuple(scale * (i == j) for j in range(4)) for i in range(4)]


@settings(max_examples=300, deadline=None)
@given(rule=rules, calls=st.lists(token_counts, min_size=8, max_size=60), asked=token_counts)
def test_prices_of_a_linear_rule_come_back_exactly(rule, calls, asked):
    """Each call costs its tokens at `rule`: the fit gives `rule` back to the last digit, no
    error, and prices any tokens at exactly what the rule says."""
    counts = basis() + calls
    fit = fit_of([(c, cost(rule, c)) for c in counts])
    figures = fit.figures()
    assert figures.fit == "fitted" and figures.calls == len(counts)
    assert figures.prices == {name: price / 1e9 for name, price in zip(TYPES, rule)}
    assert figures.error == 0 and figures.price_errors == dict.fromkeys(TYPES, 0.0)
    assert figures.relative_error in (0.0, None)
    assert fit.estimate(asked) == (cost(rule, asked), 0.0)


@settings(max_examples=100, deadline=None)
@given(rule=rules, calls=st.lists(token_counts, min_size=12, max_size=60),
       seed=st.integers(0, 2**32))
def test_noise_in_the_credits_shows_as_the_fits_error(rule, calls, seed):
    """Credits off the rule by up to 5%: the error shown is the spread of the calls around
    the fitted prices (the residual standard error), and every estimate carries one."""
    rng = random.Random(seed)
    counts = basis(10_000) + calls
    credits = [round(cost(rule, c) * rng.uniform(0.95, 1.05)) + rng.randint(0, 5) for c in counts]
    fit = fit_of(list(zip(counts, credits)))
    figures = fit.figures()
    assert figures.fit == "fitted"
    fitted = [figures.prices[name] * 1e9 for name in TYPES]
    residuals = [nano - sum(p * n for p, n in zip(fitted, c)) for c, nano in zip(counts, credits)]
    spread = math.sqrt(sum(r * r for r in residuals) / (len(counts) - 4)) / 1e9
    assert figures.error == pytest.approx(spread, rel=1e-6, abs=1e-15)
    if any(residuals):
        assert figures.error > 0 and fit.estimate((1000, 1000, 1000, 1000))[1] > 0
        assert figures.relative_error == pytest.approx(
            figures.error / (sum(credits) / len(counts) / 1e9), rel=1e-9)


@pytest.mark.parametrize("types", [4, 3, 2, 1])
def test_too_few_calls_are_refused_not_guessed(types):
    """Three calls per price at the least: one fewer is `too_few_calls`, no price at all."""
    rule = (3000, 300, 3750, 15000)
    rng = random.Random(types)
    calls = [tuple(rng.randint(1, 9000) if i < types else 0 for i in range(4)) for _ in range(3 * types)]
    enough = fit_of([(c, cost(rule, c)) for c in calls]).figures()
    assert enough.fit == "fitted"
    assert [enough.prices[name] for name in TYPES] == [
        price / 1e9 if i < types else None for i, price in enumerate(rule)]
    short = fit_of([(c, cost(rule, c)) for c in calls[1:]]).figures()
    assert (short.fit, short.prices, short.error, short.calls) == ("too_few_calls", None, None, len(calls) - 1)


def test_calls_that_cannot_tell_the_prices_apart_are_refused():
    """Every call alike, or cache reads always twice the uncached input: `singular`, exactly
    (the determinant is 0, not a small float); two types that agree to within a few parts in
    a million: `ill_conditioned`."""
    rule = (3000, 300, 3750, 15000)
    alike = [((1000, 4000, 0, 200), cost(rule, (1000, 4000, 0, 200)))] * 20
    assert fit_of(alike).status == "singular"
    rng = random.Random(1)
    tied = [(u, 2 * u, 0, rng.randint(1, 999)) for u in (rng.randint(1, 10**5) for _ in range(20))]
    assert fit_of([(c, cost(rule, c)) for c in tied]).status == "singular"
    near = [(u, 2 * u + (u % 3 == 0), 0, rng.randint(1, 999))
            for u in (rng.randint(10**5, 10**6) for _ in range(20))]
    refused = fit_of([(c, cost(rule, c)) for c in near])
    assert refused.status == "ill_conditioned" and refused.figures().prices is None
    assert not refused.covers((1, 1, 0, 1))


def test_a_type_no_call_had_has_no_price_and_tokens_of_it_are_not_priced():
    rule = (3000, 300, 3750, 15000)
    rng = random.Random(2)
    calls = [(rng.randint(1, 9000), rng.randint(1, 9000), 0, rng.randint(1, 900)) for _ in range(12)]
    fit = fit_of([(c, cost(rule, c)) for c in calls])
    assert fit.figures().prices["cache_write"] is None
    assert fit.covers((5, 5, 0, 5)) and not fit.covers((5, 5, 1, 5))


def test_calls_of_unknown_credits_are_left_out_of_the_fit_and_counted():
    rule = (3000, 300, 3750, 15000)
    rng = random.Random(3)
    calls = [tuple(rng.randint(1, 9000) for _ in range(4)) for _ in range(16)]
    known = fit_of([(c, cost(rule, c)) for c in calls]).figures()
    both = fit_of([(c, cost(rule, c)) for c in calls] + [(c, None) for c in calls[:5]]).figures()
    assert (both.calls, both.unknown_credit_calls) == (16, 5)
    assert (both.prices, both.error) == (known.prices, known.error)


# -- The report's figures, on sessions whose calls cost their tokens at known prices ----------

MODELS = ("gpt-5.6-sol", "mai-code-1.1-flash", "claude-opus-5")
TURN_KINDS = ("single", "accept", "reject", "degraded", "incomplete", "critique", "revise",
              "fallback")


def write_turn(writer: SessionWriter, kind: str, models: tuple[str, str, str]) -> str | None:
    """One turn of `kind` on `models`; the model the report must price it on (None: none)."""
    draft, judge, repair = models
    if kind == "single":
        writer.single(draft)
        return draft
    if kind == "accept":
        writer.cascade(draft, judge, repair_model=repair)
        return repair  # the plan's repair model: what the kept draft saved is priced on it
    if kind == "reject":
        writer.cascade(draft, judge, verdict="reject", repair_model=repair)
        return repair
    if kind == "degraded":
        writer.degraded(draft, judge)  # the plan names the draft's model for the repair
        return draft
    if kind == "incomplete":
        writer.incomplete(draft, judge)
        return draft
    if kind == "critique":
        writer.critique(draft, [judge, repair])
        return draft
    if kind == "revise":
        writer.critique(draft, [judge], revision_model=draft)
        return draft
    writer.route_failed(draft)
    return None


def snap_of(state: Path, **options):
    reader = SessionReader()
    turns = list(wanted_turns(session_logs(state), Selection(), reader))
    return snapshot([turn_row(turn, timezone.utc) for turn in turns], now=NOW, tz=timezone.utc,
                    checks=list(map(check_figures, reader.reconciliations)), **options)


def counts_of(leg) -> tuple[int, int, int, int]:
    return (leg.input_tokens - leg.cache_read_tokens - leg.cache_write_tokens,
            leg.cache_read_tokens, leg.cache_write_tokens, leg.output_tokens)


def fitted_models(turns) -> dict[str, set[int]]:
    """The models the fit must price, with the token types their calls had: three calls of
    known credits per type at the least (every call is known here)."""
    calls, seen = defaultdict(int), defaultdict(set)
    for turn in turns:
        for leg in turn.legs:
            calls[leg.model] += leg.request_count
            seen[leg.model] |= {i for i, count in enumerate(counts_of(leg)) if count}
    return {model: seen[model] for model in calls
            if calls[model] >= 3 * len(seen[model]) and calls[model] > len(seen[model])}


def truth_of(turns, answers: dict[str, str | None], rules: dict) -> dict:
    """{figure: value} of `turns` (sessiongen's ExpectedTurn), figured turn by turn."""
    fitted = fitted_models(turns)
    truth = defaultdict(lambda: [0, 0, 0, 0, 0])  # turns, estimated, not, measured nano, alone nano
    gates = defaultdict(lambda: [0, 0, 0])  # turns, kept nano, not kept nano
    for turn in turns:
        if turn.kind == "ordinary":
            continue
        kept = [leg for leg in turn.legs if leg.committed]
        model = answers[turn.fusion_id]
        counts = counts_of(kept[0]) if kept and turn.kind == "fusion" else None
        priced = (counts is not None and model in fitted
                  and all(count == 0 or i in fitted[model] for i, count in enumerate(counts)))
        for key in (("pattern", turn.pattern), ("policy", turn.policy_version) if turn.kind == "fusion" else None):
            if key is None:
                continue
            figures = truth[key]
            figures[0] += 1
            figures[1 if priced else 2] += 1
            if priced:
                figures[3] += sum(leg.nano_aiu for leg in turn.legs)
                figures[4] += cost(rules[model], counts)
        if turn.pattern == "cascade" and turn.kind == "fusion":
            verdicts = {leg.verdict for leg in turn.legs if leg.verdict}
            gate = "rejected" if verdicts & {"reject", "revise"} else "accepted" if verdicts else "unjudged"
            gates[gate][0] += 1
            gates[gate][1] += sum(leg.nano_aiu for leg in turn.legs if leg.committed)
            gates[gate][2] += sum(leg.nano_aiu for leg in turn.legs if not leg.committed)
    return {"groups": dict(truth), "gates": dict(gates), "fitted": fitted}


def shown(group) -> list:
    estimate = group.one_model
    alone = round(estimate.alone * 1e9) if estimate.alone is not None else 0
    measured = round(estimate.credits * 1e9) if estimate.credits is not None else 0
    return [group.turns, estimate.turns, estimate.not_estimated, measured, alone]


@settings(max_examples=25, deadline=None)
@given(turns=st.lists(st.tuples(st.sampled_from(TURN_KINDS), st.permutations(MODELS)),
                      min_size=1, max_size=24),
       rules=st.fixed_dictionaries({model: rules for model in MODELS}),
       retune_at=st.integers(0, 24))
def test_the_same_work_on_one_model_is_the_truth_on_known_prices(turns, rules, retune_at):
    """By pattern and by policy version: the turns estimated and not (no leg kept, no fit for
    the answering model, or tokens of a type its calls never had), their measured credits
    and the kept legs' tokens at the answering model's prices, to the nano-credit; the gate's
    credits kept and not kept; each model's fit exact, or refused where the truth has too
    few calls."""
    with tempfile.TemporaryDirectory() as state:
        writer = SessionWriter("worth-0", START, prices=rules)
        answers = {}
        for index, (kind, models) in enumerate(turns):
            if index == retune_at:
                writer.retune("2026-11-05")
            model = write_turn(writer, kind, models)
            answers[writer.expected[-1].fusion_id] = model
        writer.shutdown()
        writer.write(Path(state))
        snap = snap_of(Path(state))
    truth = truth_of(writer.expected, answers, rules)
    worth = snap.worth
    groups = truth["groups"]
    assert {group.key: shown(group) for group in worth.by_pattern} == {
        key: figures for (kind, key), figures in groups.items() if kind == "pattern"}
    assert {group.key: shown(group) for group in worth.by_policy_version} == {
        key: figures for (kind, key), figures in groups.items() if kind == "policy"}
    assert {group.key: [group.turns, round((group.answer.credits or 0) * 1e9),
                        round((group.review.credits or 0) * 1e9)] for group in worth.gate} == truth["gates"]
    fitted = {model.model: model for model in worth.prices if model.fit == "fitted"}
    assert fitted.keys() == truth["fitted"].keys()
    for name, model in fitted.items():
        assert model.error == 0
        assert model.prices == {kind: price / 1e9 if i in truth["fitted"][name] else None
                                for i, (kind, price) in enumerate(zip(TYPES, rules[name]))}
    # Every day together is every pattern together: the same turns, the same estimate.
    assert sum(shown(day)[4] for day in worth.by_day) == sum(shown(group)[4] for group in worth.by_pattern)


def test_calls_of_unknown_credits_are_counted_per_model_and_the_fit_stays_exact(tmp_path):
    """A third of the calls of unknown credits (`aiCreditsStatus: unavailable`), ordinary
    prompts' among them: each model's fit leaves them out and counts them, and the prices
    of the known calls still come back exactly; an ordinary prompt's calls count in the fit."""
    rules = {"gpt-5.6-sol": (2500, 250, 3125, 10000), "mai-code-1.1-flash": (500, 50, 625, 2000),
             "claude-opus-5": (5000, 500, 6250, 25000)}
    writer = SessionWriter("worth-unknown", START, prices=rules, unpriced=0.3)
    rng = random.Random(4)
    for _ in range(12):
        draft, judge, repair = rng.sample(list(rules), 3)
        write_turn(writer, rng.choice(TURN_KINDS), (draft, judge, repair))
        writer.ordinary("gpt-5.6-sol", calls=3)
    writer.shutdown()
    writer.write(tmp_path)
    worth = snap_of(tmp_path).worth
    unknown, known = defaultdict(int), defaultdict(int)
    for turn in writer.expected:
        if turn.kind == "ordinary":
            unknown[turn.models[0]] += turn.unknown_calls
            known[turn.models[0]] += turn.calls - turn.unknown_calls
        for leg in turn.legs:
            unknown[leg.model] += leg.unknown_calls
            known[leg.model] += leg.request_count - leg.unknown_calls
    assert sum(unknown.values()) > 0
    assert {model.model: (model.calls, model.unknown_credit_calls) for model in worth.prices} == {
        model: (known[model], unknown[model]) for model in known}
    fitted = [model for model in worth.prices if model.fit == "fitted"]
    assert {model.model for model in fitted} >= {"gpt-5.6-sol"}
    for model in fitted:
        assert model.error == 0
        assert {kind: price for kind, price in model.prices.items() if price is not None} == {
            kind: rules[model.model][i] / 1e9 for i, kind in enumerate(TYPES)
            if model.prices[kind] is not None}


def test_the_answering_model_and_the_median_single_turn_on_it():
    """A cascade whose draft was kept is compared on the model its repair would have run
    on, with the single turns answered there: the post's "a fifth of a comparable
    single-model turn"."""
    with tempfile.TemporaryDirectory() as state:
        writer = SessionWriter("worth-versus", START)
        cascades = [writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol", repair_model="gpt-5.6-sol")
                    for _ in range(3)]
        singles = [writer.single("gpt-5.6-sol") for _ in range(4)] + [writer.single("claude-opus-5")]
        writer.write(Path(state))
        worth = snap_of(Path(state)).worth

    def median(values):
        values = sorted(values)
        middle = len(values) // 2
        return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2

    (versus,) = worth.versus_single
    cascade = median([turn.nano_aiu / 1e9 for turn in cascades])
    single = median([turn.nano_aiu / 1e9 for turn in singles[:4]])
    assert (versus.pattern, versus.model, versus.turns, versus.single_turns) == (
        "cascade", "gpt-5.6-sol", 3, 4)
    assert (versus.median_credits, versus.single_median_credits, versus.ratio) == (
        pytest.approx(cascade), pytest.approx(single), pytest.approx(cascade / single))


# -- The outputs: the table (and --by), CSV, HTML -------------------------------------------

RULES = {"gpt-5.6-sol": (2500, 250, 3125, 10000), "mai-code-1.1-flash": (500, 50, 625, 2000),
         "claude-opus-5": (5000, 500, 6250, 25000)}


def priced_state(state: Path, *, seed: int = 5, turns: int = 30, extra=None) -> None:
    """Sessions of every kind of turn, their calls priced by RULES; `extra` writes more."""
    writer = SessionWriter("worth-out", START, prices=RULES)
    rng = random.Random(seed)
    for _ in range(turns):
        write_turn(writer, rng.choice(TURN_KINDS), tuple(rng.sample(MODELS, 3)))
    if extra is not None:
        extra(writer)
    writer.shutdown()
    writer.write(state)


def section(table: str, title: str) -> dict[str, list[str]]:
    """The rows of one of the table's sections, by their first cell."""
    lines = table.split("\n" + title, 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    return {line.split()[0]: line.split()[1:] for line in lines if not line.startswith("  ")}


def test_the_table_shows_the_worth_figures_and_labels_every_estimate(tmp_path):
    """WORTH IT by pattern, the median turn against single, the gate, ONE MODEL ALONE and
    PRICES: each figure as Snapshot.worth holds it; each column holding an estimate starred,
    with the line saying it is one; a model the fit refused says why, never a price."""
    from tailer.report.table import render_table

    priced_state(tmp_path, extra=lambda writer: writer.single("claude-sonnet-4.6"))
    worth = snap_of(tmp_path).worth
    table = render_table(snap_of(tmp_path), width=200)
    patterns = section(table, "WORTH IT, by pattern")
    assert list(patterns) == [group.key for group in worth.by_pattern]
    for group in worth.by_pattern:
        assert patterns[group.key][:4] == [str(group.turns), f"{group.credits:.2f}",
                                           f"{group.answer.credits:.2f}", f"{group.review.credits:.2f}"]
    gates = section(table, "THE GATE, cascade")
    for group in worth.gate:
        estimate = group.one_model
        assert gates[group.key] == [str(group.turns), f"{group.credits:.2f}",
                                    f"{group.answer.credits:.2f}", f"{group.review.credits:.2f}",
                                    f"{estimate.turns}/{estimate.turns + estimate.not_estimated}",
                                    f"{estimate.alone:.2f}", f"{estimate.alone - estimate.credits:+.2f}"]
    alone = table.split("\nONE MODEL ALONE*", 1)[1].split("\n\n", 1)[0]
    for group in worth.by_pattern:
        estimate = group.one_model
        if estimate.alone is not None:
            assert f"  {group.key} " in alone and f" {estimate.alone:.2f} " in alone
    assert "* an estimate" in alone
    fitted = section(table, "PRICES*, credits per 1M tokens")
    for model in worth.prices:
        if model.fit == "fitted":
            assert fitted[model.model][2:6] == [
                "-" if price is None else f"{price * 1e6:.4g}" for price in model.prices.values()]
        else:
            assert f"  {model.model}: not fitted, too few calls" in table
    assert "claude-sonnet-4.6: not fitted" in table and "claude-sonnet-4.6 " not in fitted
    versus = table.split("\nMEDIAN TURN vs SINGLE, on", 1)[1].split("\n\n", 1)[0]
    for item in worth.versus_single:
        assert f"{item.pattern} on {item.model}" in versus


def test_no_fusion_no_worth_section(tmp_path):
    from tailer.report.table import render_table

    writer = SessionWriter("worth-none", START)
    writer.ordinary("gpt-5.6-sol", calls=3)
    writer.shutdown()
    writer.write(tmp_path)
    assert "WORTH IT" not in render_table(snap_of(tmp_path), width=200)


def test_json_and_csv_hold_the_same_worth_figures(tmp_path):
    """The JSON's `worth` is Snapshot.worth, field for field; `--format csv-worth` has a row
    per group (by pattern, gate, policy version, day; with --by, by that alone, in --order),
    per pattern on each answering model, and per model's prices, the estimate only in the
    columns named so."""
    import csv
    import io
    import json

    from report_helpers import run_report
    from tailer import records

    priced_state(tmp_path)
    worth = snap_of(tmp_path).worth
    document = json.loads(run_report("--state-dir", str(tmp_path), "--format", "json",
                                     "--timezone", "UTC").stdout)
    assert document["worth"] == json.loads(json.dumps(records.as_dict(worth)))
    done = run_report("--state-dir", str(tmp_path), "--format", "csv-worth", "--timezone", "UTC")
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(io.StringIO(done.stdout)))

    def number(cell):
        return None if cell == "" else float(cell)

    for section, groups in (("pattern", worth.by_pattern), ("gate", worth.gate),
                            ("policy_version", worth.by_policy_version), ("day", worth.by_day)):
        found = [row for row in rows if row["section"] == section]
        assert [row["key"] for row in found] == [group.key for group in groups]
        for row, group in zip(found, groups):
            assert [int(row["turns"]), number(row["credits"]), number(row["answer_credits"]),
                    number(row["review_credits"]), int(row["estimated_turns"]),
                    int(row["not_estimated_turns"]), number(row["estimated_turns_credits"]),
                    number(row["one_model_estimate"]), number(row["one_model_estimate_error"])] == [
                group.turns, group.credits, group.answer.credits, group.review.credits,
                group.one_model.turns, group.one_model.not_estimated, group.one_model.credits,
                group.one_model.alone, group.one_model.error]
    versus = [row for row in rows if row["section"] == "versus_single"]
    assert [(row["key"], row["model"], number(row["median_credits"]),
             number(row["single_median_credits"])) for row in versus] == [
        (item.pattern, item.model, item.median_credits, item.single_median_credits)
        for item in worth.versus_single]
    fitted = {row["model"]: row for row in rows if row["section"] == "prices"}
    assert list(fitted) == [model.model for model in worth.prices]
    for model in worth.prices:
        row = fitted[model.model]
        assert (row["fit"], int(row["fit_calls"]), int(row["unknown_credit_calls"])) == (
            model.fit, model.calls, model.unknown_credit_calls)
        if model.fit == "fitted":
            assert [number(row["price_" + kind]) for kind in TYPES] == list(model.prices.values())
            assert [number(row["price_" + kind]) * 1e9 for kind in TYPES if row["price_" + kind]] == [
                pytest.approx(price) for i, price in enumerate(RULES[model.model])
                if model.prices[TYPES[i]] is not None]
    weeks = list(csv.DictReader(io.StringIO(run_report(
        "--state-dir", str(tmp_path), "--format", "csv-worth", "--by", "week", "--order", "desc",
        "--timezone", "UTC").stdout)))
    assert {row["section"] for row in weeks} == {"week"}
    assert [row["key"] for row in weeks] == [group.key for group in snap_of(tmp_path, groupings=("week",)).worth.by_week][::-1]


@pytest.mark.parametrize("where", ["demo", "realcli"])
def test_worth_by_session_is_in_by_sessions_order_in_every_format(where):
    """The "worth it" groups by session come in --by session's order, by a session's last
    prompt (an ordinary one too), not by id: in the table under --by session, in the JSON's
    `worth.by_session`, in `--format csv-worth --by session`, each turned round by --order
    desc."""
    import csv
    import io
    import json

    from realcli import record
    from report_helpers import run_report
    from tailerproc import ROOT, tailer_env

    state = ROOT / "fixtures" if where == "demo" else record.recorded(
        (ROOT / "tests" / "realcli" / "VERSION").read_text().strip())[0]
    snap = snap_of(state)
    worth = {group.key for group in snap.worth.by_session}
    expected = [group.key for group in snap.by_session if group.key in worth]
    assert len(expected) == len(worth) > 2 and expected != sorted(expected)
    assert [group.key for group in snap.worth.by_session] == expected
    for order, keys in (("asc", expected), ("desc", expected[::-1])):
        options = ("--state-dir", str(state), "--timezone", "UTC", "--order", order, "--by", "session")
        table = run_report(*options, env=tailer_env(COLUMNS="200")).stdout.splitlines()
        at = next(index for index, line in enumerate(table) if line.startswith("WORTH IT"))
        assert [line.split()[0] for line in table[at + 1:at + 1 + len(keys)]] == keys
        rows = csv.DictReader(io.StringIO(run_report(*options, "--format", "csv-worth").stdout))
        assert [row["key"] for row in rows] == keys
    document = json.loads(run_report("--state-dir", str(state), "--format", "json").stdout)
    assert [group["key"] for group in document["worth"]["by_session"]] == expected


def test_the_page_shows_the_worth_figures_and_labels_every_estimate(tmp_path):
    """The HTML page's panel: the same figures as the table, each table holding an estimate
    of class `estimate` and captioned as one, a model the fit refused named with why."""
    from html.parser import HTMLParser

    from tailer.report.html import render

    class Tables(HTMLParser):
        def __init__(self):
            super().__init__()
            self.tables, self.cell, self.items = [], None, []

        def handle_starttag(self, tag, attrs):
            if tag == "table":
                self.tables.append({"class": dict(attrs).get("class", ""), "caption": "", "rows": []})
            elif tag == "tr" and self.tables:
                self.tables[-1]["rows"].append([])
            elif tag in ("td", "th", "caption", "li"):
                self.cell = tag

        def handle_data(self, data):
            if self.cell == "caption":
                self.tables[-1]["caption"] += data
            elif self.cell in ("td", "th"):
                self.tables[-1]["rows"][-1].append(data)
            elif self.cell == "li":
                self.items.append(data)

        def handle_endtag(self, tag):
            if tag in ("td", "th", "caption", "li"):
                self.cell = None

    priced_state(tmp_path, extra=lambda writer: writer.single("claude-sonnet-4.6"))
    snap = snap_of(tmp_path)
    worth = snap.worth
    page = Tables()
    page.feed(render(snap))
    by_caption = {table["caption"].split(" ")[0] + " " + table["caption"].split(" ")[1]: table
                  for table in page.tables if table["caption"]}
    kept = by_caption["Credits kept"]["rows"][1:]
    assert kept == [[group.key, str(group.turns), f"{group.credits:.2f}", f"{group.answer.credits:.2f}",
                     f"{group.review.credits:.2f}", f"{100 * group.review_share:.1f}%"]
                    for group in worth.by_pattern]
    gate = by_caption["The gate"]
    assert [row[:2] + row[5:7] for row in gate["rows"][1:]] == [
        [group.key, str(group.turns), f"{group.one_model.turns}/{group.turns}",
         f"{group.one_model.credits:.2f}"] for group in worth.gate]
    for caption in ("The gate", "The same", "Prices per"):
        assert "estimate" in by_caption[caption]["class"] and "estimate" in by_caption[caption]["caption"]
    assert "estimate" not in by_caption["Credits kept"]["class"]
    alone = {row[0]: row for row in by_caption["The same"]["rows"][1:]}
    for group in worth.by_pattern:
        if group.one_model.alone is not None:
            assert alone[group.key][3] == f"{group.one_model.alone:.2f}"
    prices = {row[0]: row for row in by_caption["Prices per"]["rows"][1:]}
    assert set(prices) == {model.model for model in worth.prices if model.fit == "fitted"}
    assert any(item.startswith("claude-sonnet-4.6: not fitted (too few calls") for item in page.items)


def test_csv_worth_takes_by_and_order_and_refuses_breakdown_in_one_line(tmp_path):
    from report_helpers import run_report

    priced_state(tmp_path, turns=4)
    done = run_report("--state-dir", str(tmp_path), "--format", "csv-worth", "--by", "day", "--breakdown")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "--breakdown" in done.stderr and "Traceback" not in done.stderr
    assert run_report("--state-dir", str(tmp_path), "--format", "csv-worth", "--watch").returncode == 2


def test_report_md_says_how_each_worth_figure_is_made_and_what_it_cannot_tell():
    from tailerproc import ROOT

    text = (ROOT / "docs" / "REPORT.md").read_text()
    section = text.split("\n## Was fusion worth it\n", 1)[1].split("\n## ", 1)[0]
    for named in ("WORTH IT, by pattern", "MEDIAN TURN vs SINGLE", "THE GATE, cascade", "PRICES\\*",
                  "ONE MODEL ALONE\\*", "answering model", "least squares", "too few calls",
                  "unknown", "estimate", "csv-worth", "`worth`"):
        assert named in section, named
    limits = section.split("What it cannot tell:", 1)[1]
    assert "One model\n  alone might have answered differently" in limits
    assert "the repair leg\n  saw the draft" in limits
