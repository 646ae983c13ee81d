"""The same numbers everywhere: the report and the daemon's metrics, on the same files.

The daemon runs as a user runs it (`run --once --from-start`, with `--idle-timeout 0` so
that, like the report, it finishes the turns still open at the end of a log) and writes its
metrics to a textfile. Every headline figure and every per-model and per-leg-kind total of
the report must be what the dashboard's queries (docs/METRICS.md) make of those metrics.
"""

import json

import pytest

from exposition_helpers import samples
from report_helpers import report_json, write_month
from sessiongen import START, SessionWriter, every_pattern, whole_session
from tailerproc import ROOT, run_once


def metrics_of(state_dir, tmp_path):
    textfile = tmp_path / "metrics.prom"
    done = run_once("--from-start", "--idle-timeout", "0", "--state-dir", str(state_dir),
                    "--textfile", str(textfile), "--otlp-endpoint", "none",
                    "--metrics-address", "none", "--checkpoint", str(tmp_path / "checkpoint.json"))
    assert done.returncode == 0, done.stderr
    return textfile.read_text()


def total(text, name, **wanted):
    """sum(name{wanted}): a label value starting with ! is excluded, a tuple is any of."""
    found = 0.0
    for labels, value in samples(text, name).items():
        labels = dict(labels)
        if all(_matches(labels.get(key), want) for key, want in wanted.items()):
            found += value
    return found


def by(text, name, label, **wanted):
    """sum by (label) (name{wanted})."""
    values = {}
    for labels, value in samples(text, name).items():
        labels = dict(labels)
        if all(_matches(labels.get(key), want) for key, want in wanted.items()):
            values[labels[label]] = values.get(labels[label], 0.0) + value
    return values


def _matches(value, wanted):
    if isinstance(wanted, tuple):
        return value in wanted
    if wanted.startswith("!"):
        return value not in wanted[1:].split("|")
    return value == wanted


def ratio(part, whole):
    return part / whole if whole else None


def assert_same_numbers(document, text):
    head = document["headline"]
    assert head["turns"] == total(text, "hydrafusion_turns_total")
    assert head["outcomes"] == {
        outcome: int(count) for outcome, count in by(text, "hydrafusion_turns_total", "outcome").items()
        if count}
    assert head["outcomes"].get("route_failed", 0) == total(text, "hydrafusion_route_failures_total")
    # Credits are the known ones (docs/REPORT.md, "Unknown credits"): null where none is, and
    # the calls left out are counted on both sides.
    assert (head["credits"] or 0.0) == pytest.approx(total(text, "hydrafusion_aiu_total"), rel=1e-12)
    assert head["unknown_credit_calls"] == total(
        text, "hydrafusion_unknown_credit_calls_total", kind="!ordinary")
    assert head["calls"] == total(text, "hydrafusion_requests_total")
    assert head["compound_rate"] == pytest.approx(ratio(
        total(text, "hydrafusion_turns_total", compound="true", outcome="!route_failed"),
        total(text, "hydrafusion_turns_total", outcome="!route_failed")))
    assert head["judge_rejection_rate"] == pytest.approx(ratio(
        total(text, "hydrafusion_judged_turns_total", rejected="true"),
        total(text, "hydrafusion_judged_turns_total")))
    assert head["judged_turns"] == total(text, "hydrafusion_judged_turns_total")
    assert head["rejected_turns"] == total(text, "hydrafusion_judged_turns_total", rejected="true")
    assert head["review_share"] == pytest.approx(ratio(
        total(text, "hydrafusion_aiu_total", committed="false"), total(text, "hydrafusion_aiu_total")))
    assert head["cache_share"] == pytest.approx(ratio(
        total(text, "hydrafusion_tokens_total", type="cache_read"),
        total(text, "hydrafusion_tokens_total", type="input")))
    assert head["failed_legs"] == total(text, "hydrafusion_legs_total", status="!succeeded")

    for group, label in (("by_model", "model"), ("by_leg_kind", "phase_kind")):
        credits = by(text, "hydrafusion_aiu_total", label)
        legs = by(text, "hydrafusion_legs_total", label)
        calls = by(text, "hydrafusion_requests_total", label)
        tokens = {kind: by(text, "hydrafusion_tokens_total", label, type=kind)
                  for kind in ("input", "output", "cache_read", "cache_write")}
        # By model, its legs are its `fusion` part (its `ordinary` one has no metric by model).
        groups = document[group] if group == "by_leg_kind" else [
            model["fusion"] for model in document[group] if model["fusion"]["legs"]]
        # A group that knows no credits has no series of them, not one at 0.
        assert {g["name"] for g in groups if g["credits"] is not None} == set(credits)
        for figures in groups:
            name = figures["name"]
            assert (figures["credits"] or 0.0) == pytest.approx(credits.get(name, 0.0), rel=1e-12), name
            assert (figures["legs"], figures["calls"]) == (legs[name], calls[name]), name
            # The report's input is uncached (ccusage's, the CLI's /usage's); the metrics'
            # type="input" holds the cache reads and writes, as the GenAI convention does.
            assert (figures["input_tokens"] + figures["cache_read_tokens"]
                    + figures["cache_write_tokens"]) == tokens["input"][name], name
            for kind in ("output", "cache_read", "cache_write"):
                assert figures[f"{kind}_tokens"] == tokens[kind][name], (name, kind)

    prompts = by(text, "hydrafusion_prompts_total", "kind")
    prompt_credits = by(text, "hydrafusion_prompt_aiu_total", "kind")
    prompt_calls = by(text, "hydrafusion_prompt_model_calls_total", "kind")
    unknown = by(text, "hydrafusion_unknown_credit_calls_total", "kind")
    tools = by(text, "hydrafusion_tool_calls_total", "kind")
    for figures in document["by_kind"]:
        kind = figures["kind"]
        assert figures["turns"] == prompts.get(kind, 0), kind
        assert (figures["credits"] or 0.0) == pytest.approx(prompt_credits.get(kind, 0.0), rel=1e-12), kind
        assert figures["unknown_credit_calls"] == unknown.get(kind, 0), kind
        assert figures["calls"] == prompt_calls.get(kind, 0), kind
        assert figures["tools"] == tools.get(kind, 0), kind
    assert sum(len(turn["model_calls"]) for turn in document["turns"]) == total(
        text, "hydrafusion_model_calls_total")
    assert head["tools"] == total(text, "hydrafusion_tool_calls_total", kind="!ordinary")
    checks = document["reconciliation"]
    assert len(checks) == total(text, "hydrafusion_reconciliations_total")
    assert sum(not check["agrees"] for check in checks) == total(
        text, "hydrafusion_reconciliations_total", result="disagree")

    # A route failure's pattern is `fallback` in the report and in the metrics' label alike
    # (docs/REPORT.md, "Which turns").
    by_pattern = by(text, "hydrafusion_turns_total", "pattern")
    assert {p["pattern"]: p["turns"] for p in document["by_pattern"]} == by_pattern
    pattern_credits = by(text, "hydrafusion_aiu_total", "pattern")
    for figures in document["by_pattern"]:
        assert (figures["credits"] or 0.0) == pytest.approx(pattern_credits.get(figures["pattern"], 0.0))


def write_twice_judged(state_dir):
    """A cascade whose repaired answer a judge looks at again and accepts: two verdicts in
    one turn, which the per-turn rejection rate counts once."""
    writer = SessionWriter("twice-judged", START)
    writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="reject", repair_model="gpt-5.6-sol")
    writer.shutdown()
    lines = [json.loads(line) for line in writer.lines()]
    judge = next(line for line in lines if line["type"] == "assistant.fusion_phase_completed"
                 and line["data"]["phaseKind"] == "judge")
    again = json.loads(json.dumps(judge))
    again["data"].update(phaseId=judge["data"]["phaseId"] + ":again", verdict="accept")
    rollup = next(i for i, line in enumerate(lines) if line["type"] == "session.fusion_completed")
    lines.insert(rollup, again)
    totals, usage = lines[rollup + 1]["data"], again["data"]["usage"]  # the rollup sums every leg
    for name in ("requestCount", "inputTokens", "outputTokens", "cachedTokens", "cacheWriteTokens",
                 "totalNanoAiu"):
        totals[name] += usage.get(name) or 0
    totals["phaseCount"] += 1
    folder = state_dir / "twice-judged"
    folder.mkdir(parents=True)
    (folder / "events.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_the_demo_fixtures_give_the_same_numbers(tmp_path):
    fixtures = ROOT / "fixtures"
    document = report_json("--state-dir", str(fixtures))
    assert document["headline"]["turns"] == 26
    assert_same_numbers(document, metrics_of(fixtures, tmp_path))


def test_a_generated_month_gives_the_same_numbers(tmp_path):
    state = tmp_path / "state"
    expected = write_month(state)
    write_twice_judged(state)
    # Calls of unknown credits: some of a session's, and all of another's.
    for writer in (whole_session("unpriced-some", unpriced=0.4), every_pattern("unpriced-all", unpriced=1)):
        writer.write(state)
        expected += writer.expected
    document = report_json("--state-dir", str(state))
    assert document["headline"]["turns"] == sum(t.kind != "ordinary" for t in expected) + 1 > 200
    assert document["headline"]["unknown_credit_calls"] == sum(
        t.unknown_calls for t in expected if t.kind != "ordinary") > 0
    assert [k["turns"] for k in document["by_kind"] if k["kind"] == "ordinary"] == [
        sum(t.kind == "ordinary" for t in expected)]
    assert len(document["by_day"]) == 31  # the month, and the twice-judged turn's day
    assert_same_numbers(document, metrics_of(state, tmp_path))


def test_a_route_failure_is_fallback_in_the_report_the_metrics_the_log_and_the_spans(tmp_path):
    """The real CLI's route failure (tests/data/realcli, `route_failed`): the log names no
    pattern, and every output calls it `fallback`, never `unknown` (issue 39, point 7)."""
    from realcli import record
    from tailer.copilot.files import session_logs
    from tailer.outputs.spans import turn_spans
    from report_helpers import wanted_turns
    from tailer.report.read import Selection, SessionReader

    state_dir, sessions = record.recorded((ROOT / "tests" / "realcli" / "VERSION").read_text().strip())
    state = tmp_path / "state"
    (state / sessions["route_failed"]).mkdir(parents=True)
    (state / sessions["route_failed"] / "events.jsonl").write_bytes(
        (state_dir / sessions["route_failed"] / "events.jsonl").read_bytes())
    document = report_json("--state-dir", str(state))
    assert {(turn["kind"], turn["pattern"]) for turn in document["turns"]} == {("fallback", "fallback")}
    text = metrics_of(state, tmp_path)
    patterned = [labels for name in ("hydrafusion_turns_total", "hydrafusion_legs_total",
                                     "hydrafusion_aiu_total", "hydrafusion_judged_turns_total",
                                     "hydrafusion_turn_duration_seconds_count")
                 for labels in samples(text, name)]
    assert patterned and {dict(labels)["pattern"] for labels in patterned} == {"fallback"}
    assert_same_numbers(document, text)
    [turn] = wanted_turns(session_logs(state), Selection(), SessionReader())
    root = json.loads(turn_spans(turn)[0].json)
    assert {"key": "hydrafusion.pattern", "value": {"stringValue": "fallback"}} in root["attributes"]
    done = run_once("--from-start", "--idle-timeout", "0", "--state-dir", str(state),
                    "--otlp-endpoint", "none", "--checkpoint", str(tmp_path / "again.json"))
    assert " pattern=fallback " in done.stderr and "pattern=unknown" not in done.stderr
