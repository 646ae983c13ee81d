"""The report's vocabulary and views: one name for a route failure, legs numbered one way,
a model's whole use, the groups by day, week, month and session, time zones, length."""

import csv
import io
import json
from datetime import datetime, timezone

from sessiongen import whole_session
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
