"""The report's vocabulary and views: one name for a route failure, legs numbered one way,
a model's whole use, the groups by day, week, month and session, time zones, length."""

import csv
import io
import json
from datetime import datetime, timezone

import pytest

from realcli import record
from sessiongen import whole_session
from tailerproc import ROOT
from tailer.copilot.events import Usage
from tailer.report.html import render as render_html
from tailer.copilot.files import session_logs
from tailer.report.figures import snapshot, turn_row
from tailer.report.read import Selection, SessionReader, wanted_turns
from tailer.report.table import render_table
from tailer.report.text import render_calls_csv, render_csv, render_json

NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)


def snap_of(state_dir, selection=Selection(), tz=timezone.utc):
    reader = SessionReader()
    logs = session_logs(state_dir)
    rows = [turn_row(turn, tz) for turn in wanted_turns(logs, selection, reader)]
    return snapshot(rows, now=NOW, tz=tz, sessions=len(logs), skipped=reader.skipped(),
                    checks=reader.reconciliations)


def test_a_route_failure_is_fallback_everywhere_and_filters_ignore_case(tmp_path):
    whole_session("vocabulary").write(tmp_path)
    snap = snap_of(tmp_path)
    failed = {t.fusion_id for t in snap.turns if t.outcome == "route_failed"}
    assert failed and {t.pattern for t in snap.turns if t.fusion_id in failed} == {"fallback"}
    assert "unknown" not in {p.pattern for p in snap.by_pattern}
    assert "fallback" in {p.pattern for p in snap.by_pattern}
    for rows in (csv.DictReader(io.StringIO(render_csv(snap))),
                 json.loads("".join(render_json(snap)))["turns"]):
        assert {row["pattern"] for row in rows if row["fusion_id"] in failed} == {"fallback"}
    assert "fallback" in render_table(snap, width=100)

    def chosen(**options):
        return {t.fusion_id for t in snap_of(tmp_path, Selection(**options)).turns}

    assert chosen(pattern="fallback") == chosen(pattern="FallBack") == failed
    assert chosen(pattern="CASCADE") == chosen(pattern="cascade") != set()
    assert chosen(pattern="ordinary") == {t.fusion_id for t in snap.turns if t.kind == "ordinary"}
    assert chosen(model="SONNET") == chosen(model="sonnet") != set()


def test_legs_are_numbered_from_zero_in_every_format(tmp_path):
    whole_session("legs").write(tmp_path)
    snap = snap_of(tmp_path)
    document = json.loads("".join(render_json(snap)))
    by_turn = {turn["fusion_id"]: turn for turn in document["turns"]}
    leg_rows = [row for row in csv.DictReader(io.StringIO(render_csv(snap))) if row["leg"]]
    for row in leg_rows:
        leg = by_turn[row["fusion_id"]]["legs"][int(row["leg"])]
        assert (leg["model"], leg["kind"]) == (row["model"], row["kind"])
    assert "0" in {row["leg"] for row in leg_rows}
    calls = list(csv.DictReader(io.StringIO(render_calls_csv(snap))))
    for turn in document["turns"]:
        mine = [row for row in calls if row["fusion_id"] == turn["fusion_id"]]
        assert [row["leg"] for row in mine] == [
            "" if call["leg"] is None else str(call["leg"]) for call in turn["model_calls"]]


def _clis_totals(checks) -> dict[str, Usage]:
    """The CLI's own per-model totals of whole logs (session.shutdown modelMetrics): a run's
    shutdown adds its run; one compared as the whole log's (scope `log`) is all of it."""
    sessions: dict[str, dict[str, Usage]] = {}
    for check in checks:
        if check.source != "shutdown":
            continue
        mine = {} if check.scope == "log" else sessions.get(check.session_id, {})
        for model, usage in check.theirs.items():
            mine[model] = mine.get(model, Usage()) + usage
        sessions[check.session_id] = mine
    totals: dict[str, Usage] = {}
    for models in sessions.values():
        for model, usage in models.items():
            totals[model] = totals.get(model, Usage()) + usage
    return totals


@pytest.mark.parametrize("where", ["generated", "realcli"])
def test_by_model_is_a_models_whole_use_as_the_cli_counts_it(tmp_path, where):
    if where == "generated":
        whole_session("per-model").write(tmp_path)
        state = tmp_path
    else:
        state = record.recorded((ROOT / "tests/realcli/VERSION").read_text().strip())[0]
    reader = SessionReader()
    rows = [turn_row(turn, timezone.utc) for turn in wanted_turns(session_logs(state), Selection(), reader)]
    snap = snapshot(rows, now=NOW, tz=timezone.utc, checks=reader.reconciliations)
    assert any(t.kind == "ordinary" for t in snap.turns)
    cli = _clis_totals(reader.reconciliations)
    ours = {use.name: use for use in snap.by_model}
    assert ours.keys() == cli.keys()
    for model, theirs in cli.items():
        use = ours[model]
        assert (use.calls, round(use.credits * 1e9), use.input_tokens, use.output_tokens,
                use.cache_read_tokens, use.cache_write_tokens) == (
            theirs.request_count, theirs.nano_aiu, theirs.input_tokens, theirs.output_tokens,
            theirs.cache_read_tokens, theirs.cache_write_tokens), model
        for name in ("calls", "credits", "input_tokens", "output_tokens", "cache_read_tokens",
                     "cache_write_tokens"):
            assert getattr(use, name) == pytest.approx(
                getattr(use.fusion, name) + getattr(use.ordinary, name)), (model, name)
    assert sum(use.fusion.credits for use in snap.by_model) == pytest.approx(snap.headline.credits)
    assert any(use.ordinary.calls for use in snap.by_model)
    table = render_table(snap, width=120)
    assert "BY MODEL, all use" in table
    assert ("in ordinary prompts" in table) == any(
        use.fusion.calls and use.ordinary.calls for use in snap.by_model)
    assert "HydraFusion turns only" in table and "BY LEG KIND, HydraFusion" in table
    document = json.loads("".join(render_json(snap)))
    assert {m["name"]: m["ordinary"]["calls"] for m in document["by_model"]} == {
        use.name: use.ordinary.calls for use in snap.by_model}
    calls = list(csv.DictReader(io.StringIO(render_calls_csv(snap))))
    for model, theirs in cli.items():
        mine = [row for row in calls if row["model"] == model]
        assert (len(mine), sum(int(row["cache_write_tokens"]) for row in mine)) == (
            theirs.request_count, theirs.cache_write_tokens)
    page = render_html(snap)
    assert "Credit share by model: all use" in page and "in ordinary prompts" in page
