"""The report's vocabulary and views: one name for a route failure, legs numbered one way,
a model's whole use, the groups by day, week, month and session, time zones, length."""

import csv
import io
import json
import re
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from realcli import record
from report_helpers import report_json, run_report, wanted_turns, write_month
from sessiongen import SessionWriter, whole_session
from tailerproc import ROOT, tailer_env
from test_report import figures_of
from tailer.copilot.event_records import Usage
from tailer.report.html import render as render_html
from tailer.copilot.files import session_logs
from tailer.report.figures import check_figures, snapshot, turn_row
from tailer.report.read import Selection, SessionReader
from tailer.report.table import render_table
from tailer.report.text import render_calls_csv, render_csv, render_json

NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)


snap_of = figures_of  # the snapshot of a state folder, as test_report.py makes it


def test_a_route_failure_is_fallback_everywhere_and_filters_ignore_case(tmp_path):
    whole_session("vocabulary").write(tmp_path)
    snap = snap_of(tmp_path)
    failed = {t.fusion_id for t in snap.turns if t.outcome == "route_failed"}
    assert failed and {t.pattern for t in snap.turns if t.fusion_id in failed} == {"fallback"}
    assert "unknown" not in {p.pattern for p in snap.by_pattern}
    assert "fallback" in {p.pattern for p in snap.by_pattern}
    for rows in (csv.DictReader(io.StringIO(render_csv(snap))),
                 json.loads(b"".join(render_json(snap)))["turns"]):
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
    document = json.loads(b"".join(render_json(snap)))
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
    snap = snapshot(rows, now=NOW, tz=timezone.utc, checks=list(map(check_figures, reader.reconciliations)))
    assert any(t.kind == "ordinary" for t in snap.turns)
    cli = _clis_totals(reader.reconciliations)
    ours = {use.name: use for use in snap.by_model}
    assert ours.keys() == cli.keys()
    for model, theirs in cli.items():
        use = ours[model]
        # A model the CLI had no credits for (the `unpriced` scenario): its 0 is no price.
        nano_aiu = 0 if use.credits is None else round(use.credits * 1e9)
        assert (use.credits is None) == (use.unknown_credit_calls == use.calls > 0), model
        assert (use.calls, nano_aiu, use.input_tokens, use.output_tokens,
                use.cache_read_tokens, use.cache_write_tokens) == (
            theirs.request_count, theirs.nano_aiu, theirs.input_tokens, theirs.output_tokens,
            theirs.cache_read_tokens, theirs.cache_write_tokens), model
        for name in ("calls", "unknown_credit_calls", "input_tokens", "output_tokens",
                     "cache_read_tokens", "cache_write_tokens"):
            assert getattr(use, name) == getattr(use.fusion, name) + getattr(use.ordinary, name), (
                model, name)
        assert nano_aiu == sum(round((part.credits or 0) * 1e9) for part in (use.fusion, use.ordinary))
    assert sum(use.fusion.credits or 0 for use in snap.by_model) == pytest.approx(snap.headline.credits)
    assert any(use.ordinary.calls for use in snap.by_model)
    table = render_table(snap, width=120)
    assert "BY MODEL, all use" in table
    assert ("in ordinary prompts" in table) == any(
        use.fusion.calls and use.ordinary.calls for use in snap.by_model)
    assert "HydraFusion turns only" in table and "BY LEG KIND, HydraFusion" in table
    document = json.loads(b"".join(render_json(snap)))
    assert {m["name"]: m["ordinary"]["calls"] for m in document["by_model"]} == {
        use.name: use.ordinary.calls for use in snap.by_model}
    calls = list(csv.DictReader(io.StringIO(render_calls_csv(snap))))
    for model, theirs in cli.items():
        mine = [row for row in calls if row["model"] == model]
        assert (len(mine), sum(int(row["cache_write_tokens"]) for row in mine)) == (
            theirs.request_count, theirs.cache_write_tokens)
    page = render_html(snap)
    assert "Credit share by model: all use" in page and "in ordinary prompts" in page


# -- --by day|week|month|session ------------------------------------------------------------

GROUPINGS = ("by_day", "by_week", "by_month", "by_session")


def test_every_grouping_adds_up_to_the_headline(tmp_path):
    write_month(tmp_path, days=40)
    snap = snap_of(tmp_path)
    head = snap.headline
    fusion = [t for t in snap.turns if t.kind != "ordinary"]
    for name in GROUPINGS:
        groups = getattr(snap, name)
        assert len(groups) > 1, name
        for figure in ("turns", "calls", "tools", "judged_turns", "rejected_turns", "failed_legs"):
            assert sum(getattr(g, figure) for g in groups) == getattr(head, figure), (name, figure)
        assert sum(g.credits for g in groups) == pytest.approx(head.credits), name
        for group in groups:  # to the nano-credit the log counts in, not within float noise
            assert (sum(round(c * 1e9) for c in group.credits_by_model.values())
                    == round(group.credits * 1e9)), (name, group.key)
        assert [g.key for g in groups] == sorted(g.key for g in groups)
    assert {g.key for g in snap.by_session} == {t.session_id for t in fusion}
    assert {g.key for g in snap.by_month} == {t.start[:7] for t in fusion}
    weeks = {f"{y}-W{w:02d}" for y, w, _ in (datetime.fromisoformat(t.start).isocalendar()
                                              for t in fusion)}
    assert {g.key for g in snap.by_week} == weeks
    document = json.loads(b"".join(render_json(snap)))
    for name in GROUPINGS:
        assert [item["key"] for item in document[name]] == [g.key for g in getattr(snap, name)]
        assert set(document["headline"]) < set(document[name][0])
    assert document["timezone"] == "UTC"


def test_by_prints_one_table_in_either_order_with_a_breakdown(tmp_path):
    write_month(tmp_path, days=20)
    snap = snap_of(tmp_path)
    days = [g.key for g in snap.by_day]
    done = run_report("--state-dir", str(tmp_path), "--by", "day", "--order", "desc",
                      "--timezone", "UTC")
    assert done.returncode == 0, done.stderr
    groups, worth = done.stdout.split("WORTH IT, by day")

    def keys(table):
        return [line.split()[0] for line in table.splitlines() if re.match(r"\d{4}-\d\d-\d\d ", line)]

    assert keys(groups) == keys(worth) == days[::-1]
    assert "TURNS" not in done.stdout and "BY MODEL" not in done.stdout
    assert "compound" in done.stdout and "judge rej." in done.stdout
    plain = run_report("--state-dir", str(tmp_path), "--by", "week", "--timezone", "UTC").stdout
    broken = run_report("--state-dir", str(tmp_path), "--by", "week", "--breakdown",
                        "--timezone", "UTC").stdout
    models = {m for g in snap.by_week for m in g.credits_by_model}
    assert not any(m in plain for m in models) and all(m in broken for m in models)
    rows = list(csv.DictReader(io.StringIO(run_report(
        "--state-dir", str(tmp_path), "--by", "month", "--breakdown", "--format", "csv",
        "--timezone", "UTC").stdout)))
    months = [row for row in rows if not row["model"]]
    assert [row["key"] for row in months] == [g.key for g in snap.by_month]
    assert sum(int(row["turns"]) for row in months) == snap.headline.turns
    assert sum(float(row["credits"]) for row in rows if row["model"]) == pytest.approx(
        snap.headline.credits)


# -- Time zones -------------------------------------------------------------------------------


def _day_of_each(tmp_path, zone, moments):
    for index, moment in enumerate(moments):
        writer = SessionWriter(f"at-{index:02d}", moment)
        writer.single("gpt-5.6-sol")
        writer.write(tmp_path)
    snap = snap_of(tmp_path, tz=ZoneInfo(zone))
    return [t.start[:10] for t in sorted(snap.turns, key=lambda t: t.session_id)], snap


def _utc(*parts):
    return datetime(*parts, tzinfo=timezone.utc)


def test_days_cut_at_local_midnight_across_daylight_saving_and_half_hours(tmp_path):
    # Europe/Berlin: 2026-03-29 has 23 hours (23:00Z the day before to 22:00Z),
    # 2026-10-25 has 25 hours (22:00Z the day before to 23:00Z).
    moments = [_utc(2026, 3, 28, 22, 50), _utc(2026, 3, 28, 23, 5), _utc(2026, 3, 29, 21, 50),
               _utc(2026, 3, 29, 22, 5), _utc(2026, 10, 24, 21, 50), _utc(2026, 10, 24, 22, 5),
               _utc(2026, 10, 25, 22, 50), _utc(2026, 10, 25, 23, 5)]
    days, snap = _day_of_each(tmp_path / "berlin", "Europe/Berlin", moments)
    assert days == ["2026-03-28", "2026-03-29", "2026-03-29", "2026-03-30",
                    "2026-10-24", "2026-10-25", "2026-10-25", "2026-10-26"]
    assert {g.key: g.turns for g in snap.by_day}["2026-03-29"] == 2
    assert {g.key: g.turns for g in snap.by_day}["2026-10-25"] == 2
    assert snap.timezone == "Europe/Berlin"
    # Asia/Kolkata, UTC+05:30: midnight is 18:30Z.
    days, snap = _day_of_each(tmp_path / "kolkata", "Asia/Kolkata",
                              [_utc(2026, 11, 30, 18, 20), _utc(2026, 11, 30, 18, 40)])
    assert days == ["2026-11-30", "2026-12-01"]
    assert [g.key for g in snap.by_month] == ["2026-11", "2026-12"]
    assert snap.turns[0].start.endswith("+05:30")


def test_the_timezone_option_names_the_zone_and_refuses_an_unknown_one(tmp_path):
    writer = SessionWriter("zone", _utc(2026, 11, 30, 18, 40))
    writer.single("gpt-5.6-sol")
    writer.write(tmp_path)
    done = run_report("--state-dir", str(tmp_path), "--timezone", "Asia/Kolkata")
    assert done.returncode == 0 and done.stdout.splitlines()[0].endswith(" Asia/Kolkata")
    assert "2026-12-01" in done.stdout
    document = report_json("--state-dir", str(tmp_path), "--timezone", "Asia/Kolkata")
    assert document["timezone"] == "Asia/Kolkata" and document["by_day"][0]["key"] == "2026-12-01"
    for bad in ("Mars/Olympus", "../etc/passwd", ""):
        done = run_report("--state-dir", str(tmp_path), "--timezone", bad)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, bad
        assert "Traceback" not in done.stderr and done.stdout == ""


# -- Length -----------------------------------------------------------------------------------


def _turn_starts(table: str) -> list[str]:
    return re.findall(r"^  (\d\d:\d\d:\d\d)  ", table, re.M)


def test_the_turn_list_has_headers_and_turns_n_keeps_the_newest(tmp_path):
    whole_session("length").write(tmp_path)
    snap = snap_of(tmp_path)
    whole = render_table(snap, width=100)
    header = next(line for line in whole.splitlines() if line.lstrip().startswith("started"))
    assert header.split()[:7] == ["started", "session", "pattern", "credits", "calls/tools",
                                  "duration", "outcome"]
    starts = _turn_starts(whole)
    assert len(starts) == len(snap.turns)
    newest = render_table(snap, width=100, turns=3)
    assert _turn_starts(newest) == starts[-3:]
    assert f"the newest 3 of {len(snap.turns)}" in newest
    summary = render_table(snap, width=100, turns=0)
    assert "TURNS" not in summary and not _turn_starts(summary) and "BY MODEL" in summary
    done = run_report("--state-dir", str(tmp_path), "--turns", "2")
    assert done.returncode == 0 and len(_turn_starts(done.stdout)) == 2
    for bad in ("two", "-1", ""):
        done = run_report("--state-dir", str(tmp_path), "--turns", bad)
        assert done.returncode == 2 and "Traceback" not in done.stderr, bad


def test_piped_output_takes_its_width_from_columns_and_says_what_it_left_out(tmp_path):
    whole_session("narrow").write(tmp_path)
    env = tailer_env(COLUMNS="64")
    narrow = run_report("--state-dir", str(tmp_path), env=env).stdout
    assert max(map(len, narrow.splitlines())) <= 64
    # A model's share and legs go before its tokens; the router's times before its counts.
    assert "(too narrow for: share, legs, cache read)" in narrow
    assert "(too narrow for: last seen, first seen)" in narrow
    assert "(too narrow for: duration" in narrow  # the turn list's first to go
    header = next(line for line in narrow.splitlines() if line.lstrip().startswith("started"))
    assert "duration" not in header and "outcome" in header
    wide = run_report("--state-dir", str(tmp_path), env=tailer_env(COLUMNS="")).stdout
    assert max(map(len, wide.splitlines())) == 100 and "too narrow" not in wide
    snap = snap_of(tmp_path)
    for width in range(40, 101, 6):
        table = render_table(snap, width=width)
        assert max(map(len, table.splitlines())) <= width, width
        assert len(_turn_starts(table)) == len(snap.turns), width


def test_view_options_with_what_they_do_not_shape_are_refused_in_one_line(tmp_path):
    whole_session("refused").write(tmp_path)
    for args in (["--order", "desc"], ["--breakdown"], ["--by", "day", "--format", "json"],
                 ["--by", "week", "--html", str(tmp_path / "r.html")],
                 ["--by", "day", "--watch"], ["--turns", "3", "--format", "csv"],
                 ["--turns", "3", "--by", "day"], ["--by", "year"]):
        done = run_report("--state-dir", str(tmp_path), *args)
        assert done.returncode == 2 and done.stdout == "", args
        assert "Traceback" not in done.stderr and not (tmp_path / "r.html").exists(), args


def test_each_output_shows_the_same_with_only_the_groupings_it_asks_for(tmp_path):
    """The table, the page and --by make only the groupings they show (a table over 10,000
    sessions would otherwise make 10,000 session groups), and show what they show with all."""
    from tailer.report.figures import GROUPINGS
    from tailer.report.table import render_groups
    from tailer.report.text import render_groups_csv

    write_month(tmp_path, days=9)
    reader = SessionReader()
    rows = [turn_row(turn, timezone.utc) for turn in wanted_turns(session_logs(tmp_path), Selection(), reader)]

    def snap(groupings):
        return snapshot(rows, now=NOW, tz=timezone.utc, checks=list(map(check_figures, reader.reconciliations)),
                        groupings=groupings)

    every = snap(GROUPINGS)
    days = snap(("day",))
    assert days.by_session is None and days.by_week is None and days.by_month is None
    assert render_table(days, width=100) == render_table(every, width=100)
    assert render_table(days, width=100, height=40) == render_table(every, width=100, height=40)
    assert render_html(days) == render_html(every)
    for by in GROUPINGS:
        alone = snap((by,))
        assert [name for name in GROUPINGS if getattr(alone, f"by_{name}") is not None] == [by]
        assert render_groups(alone, by, breakdown=True) == render_groups(every, by, breakdown=True)
        assert render_groups_csv(alone, by) == render_groups_csv(every, by)


# -- Thousands --------------------------------------------------------------------------------


def test_the_table_groups_thousands_and_csv_and_json_do_not(month):
    """5,000+ turns: the table and --by group the digits of every count and credit figure
    (`4,450 turns`, `32,885.44`) as a person reads them; CSV and JSON, read by programs,
    keep the plain numbers."""
    state, _ = month
    env = tailer_env()  # one cache: the month is read once

    def report(*args: str) -> str:
        done = run_report("--state-dir", str(state), "--timezone", "UTC", *args, env=env)
        assert done.returncode == 0, done.stderr
        return done.stdout

    document = json.loads(report("--format", "json"))
    head = document["headline"]
    assert head["turns"] >= 1000 and head["credits"] >= 1000 and head["calls"] >= 1000
    table = report("--turns", "3")
    assert table.startswith(f"HydraFusion: {head['turns']:,} turns (+")
    cards = table.splitlines()[3]
    assert cards.split()[:2] == [f"{head['turns']:,}", f"{head['credits']:,.2f}"]
    assert f"{head['calls']:,} calls, {head['tools']:,} tools" in " ".join(table.split())
    assert f"({head['rejected_turns']:,}/{head['judged_turns']:,})" in cards
    fusion = next(kind for kind in document["by_kind"] if kind["kind"] == "fusion")
    row = next(line for line in table.splitlines() if line.startswith("fusion "))
    assert row.split()[1:3] == [f"{fusion['turns']:,}", f"{fusion['credits']:,.2f}"]
    assert f"{fusion['calls']:,}" in row.split() and f"{fusion['tools']:,}" in row.split()
    model = document["by_model"][0]
    row = next(line for line in table.splitlines() if line.startswith(model["name"] + " "))
    assert row.split()[1:4] == [f"{model['legs']:,}", f"{model['calls']:,}", f"{model['credits']:,.2f}"]
    assert f"the newest 3 of {len(document['turns']):,}" in table
    # Was fusion worth it: a pattern's turns and credits, and the turns estimated of all.
    worth = max(document["worth"]["by_pattern"], key=lambda group: group["turns"])
    assert worth["turns"] >= 1000
    lines = table.splitlines()
    section = next(i for i, line in enumerate(lines) if line.startswith("WORTH IT"))
    row = next(line for line in lines[section:] if line.startswith(worth["key"] + " "))
    assert row.split()[1:3] == [f"{worth['turns']:,}", f"{worth['credits']:,.2f}"]
    alone = worth["one_model"]
    assert f"{alone['turns']:,}/{alone['turns'] + alone['not_estimated']:,}" in table
    # --by: a month's turns and credits.
    biggest = max(document["by_month"], key=lambda group: group["turns"])
    assert biggest["turns"] >= 1000
    row = next(line for line in report("--by", "month").splitlines()
               if line.startswith(biggest["key"] + " "))
    assert row.split()[1:3] == [f"{biggest['turns']:,}", f"{biggest['credits']:,.2f}"]
    # CSV: plain numbers, each a field of its own.
    groups = list(csv.DictReader(io.StringIO(report("--by", "month", "--format", "csv"))))
    by_key = {group["key"]: group for group in groups}
    assert by_key[biggest["key"]]["turns"] == str(biggest["turns"])
    assert float(by_key[biggest["key"]]["credits"]) == pytest.approx(biggest["credits"])
    for text in (report("--format", "csv"), report("--format", "csv-calls")):
        rows = list(csv.reader(io.StringIO(text)))
        assert {len(row) for row in rows} == {len(rows[0])}  # no figure split by a comma
        assert not any(re.fullmatch(r"\d{1,3}(,\d{3})+(\.\d+)?", cell) for row in rows for cell in row)
