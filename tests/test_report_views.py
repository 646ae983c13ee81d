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
from tailer.report.figures import snapshot
from tailer.report.checks import check_figures
from tailer.report.rows import turn_row
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


def _tokens_shown(text: str) -> float:
    """A token count as the table shows it: 27,000, 27000 or 27.0k."""
    number, suffix = re.fullmatch(r"([\d.,]+)([kMG]?)", text).groups()
    return float(number.replace(",", "")) * {"": 1, "k": 1e3, "M": 1e6, "G": 1e9}[suffix]


def test_input_is_uncached_in_every_format(tmp_path):
    """"input" is what the CLI's /usage and ccusage call input: the CLI's input tokens (which
    hold its cache reads and writes) less those, in the JSON, both CSVs, the table and the
    page; the JSON keeps each kind apart with their total, and the cache share of input
    keeps its meaning, cache reads over all input."""
    whole_session("uncached").write(tmp_path)
    calls, legs = [], []  # the log's own figures: (model, input, cache read, cache write)
    for line in (tmp_path / "uncached" / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["type"] == "session.usage_record":
            usage = event["data"]["usage"]
            calls.append((usage["model"], usage["inputTokens"], usage["cacheReadTokens"],
                          usage["cacheWriteTokens"]))
        elif event["type"] == "assistant.fusion_phase_completed":
            usage = event["data"]["usage"]
            legs.append((event["data"]["model"], usage["inputTokens"], usage["cachedTokens"],
                         usage["cacheWriteTokens"]))
    assert any(write for *_, write in calls)

    def uncached_of(records):
        return sorted((model, given - read - write) for model, given, read, write in records)

    snap = snap_of(tmp_path)
    document = json.loads(b"".join(render_json(snap)))
    assert sorted((call["model"], call["input_tokens"]) for turn in document["turns"]
                  for call in turn["model_calls"]) == uncached_of(calls)
    assert sorted((leg["model"], leg["input_tokens"]) for turn in document["turns"]
                  for leg in turn["legs"]) == uncached_of(legs)
    for use in document["by_model"]:
        mine = [call for call in calls if call[0] == use["name"]]
        assert (use["input_tokens"], use["cache_read_tokens"], use["cache_write_tokens"]) == (
            sum(given - read - write for _, given, read, write in mine),
            sum(read for _, _, read, _ in mine), sum(write for *_, write in mine)), use["name"]
        assert use["total_tokens"] == sum(use[f"{kind}_tokens"] for kind in (
            "input", "output", "cache_read", "cache_write"))
    fusion_legs = [leg for turn in document["turns"] for leg in turn["legs"]]
    assert document["headline"]["cache_share"] == pytest.approx(
        sum(leg["cache_read_tokens"] for leg in fusion_legs)
        / sum(given for _, given, _, _ in legs))
    legs_csv = [row for row in csv.DictReader(io.StringIO(render_csv(snap))) if row["leg"]]
    assert sorted((row["model"], int(row["input_tokens"])) for row in legs_csv) == uncached_of(legs)
    calls_csv = list(csv.DictReader(io.StringIO(render_calls_csv(snap))))
    assert sorted((row["model"], int(row["input_tokens"])) for row in calls_csv) == uncached_of(calls)
    table = render_table(snap, width=200)
    shown = re.search(r"all usage: .* input (\S+) \(uncached\)", table).group(1)
    assert _tokens_shown(shown) == pytest.approx(snap.headline.all_usage.input_tokens, rel=0.05)
    assert _tokens_shown(shown) != pytest.approx(sum(given for _, given, _, _ in calls), rel=0.05)
    page = render_html(snap)
    assert "tokens (input uncached)" in page and '"uncached input"' in page
    embedded = {int(value) for value in re.findall(r'"i":(\d+)', page)}
    assert embedded == {given - read - write for _, given, read, write in calls + legs}


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
        # Its input is uncached, as ccusage and the CLI's /usage count it.
        assert (use.calls, nano_aiu, use.input_tokens, use.output_tokens,
                use.cache_read_tokens, use.cache_write_tokens) == (
            theirs.request_count, theirs.nano_aiu, theirs.uncached_input(), theirs.output_tokens,
            theirs.cache_read_tokens, theirs.cache_write_tokens), model
        assert use.input_tokens + use.cache_read_tokens + use.cache_write_tokens == theirs.input_tokens
        assert use.total_tokens == (use.input_tokens + use.output_tokens + use.cache_read_tokens
                                    + use.cache_write_tokens)
        for name in ("calls", "unknown_credit_calls", "input_tokens", "output_tokens",
                     "cache_read_tokens", "cache_write_tokens", "total_tokens"):
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


USAGE_FIGURES = ("prompts", "calls", "unknown_credit_calls", "input_tokens", "output_tokens",
                 "cache_read_tokens", "cache_write_tokens", "total_tokens")


def test_every_grouping_adds_up_to_the_headline(tmp_path):
    write_month(tmp_path, days=40)
    snap = snap_of(tmp_path)
    head = snap.headline
    for name in GROUPINGS:
        groups = getattr(snap, name)
        assert len(groups) > 1, name
        for figure in ("turns", "calls", "tools", "judged_turns", "rejected_turns", "failed_legs"):
            assert sum(getattr(g, figure) for g in groups) == getattr(head, figure), (name, figure)
        assert sum(g.credits for g in groups) == pytest.approx(head.credits), name
        # Every prompt's use, HydraFusion's and ordinary, adds up to the headline's all_usage.
        for part in ("all", "fusion", "ordinary"):
            for figure in USAGE_FIGURES:
                shares = [g.all_usage if part == "all" else getattr(g.all_usage, part) for g in groups]
                whole = head.all_usage if part == "all" else getattr(head.all_usage, part)
                assert sum(getattr(s, figure) for s in shares) == getattr(whole, figure), (
                    name, part, figure)
        assert sum(round(g.all_usage.credits * 1e9) for g in groups) == round(
            head.all_usage.credits * 1e9)
        for group in groups:  # to the nano-credit the log counts in, not within float noise
            assert (sum(round(c * 1e9) for c in group.credits_by_model.values())
                    == round(group.credits * 1e9)), (name, group.key)
            for figure in ("calls", "input_tokens", "output_tokens", "cache_read_tokens",
                           "cache_write_tokens", "total_tokens"):
                assert sum(getattr(m, figure) for m in group.models) == getattr(
                    group.all_usage, figure), (name, group.key, figure)
        if name == "by_session":  # by last activity
            assert [g.last_turn for g in groups] == sorted(
                (g.last_turn for g in groups), key=datetime.fromisoformat)
        else:
            assert [g.key for g in groups] == sorted(g.key for g in groups)
    # Every prompt has its group, those of sessions with ordinary prompts alone too.
    assert {g.key for g in snap.by_session} == {t.session_id for t in snap.turns}
    assert {g.key for g in snap.by_month} == {t.start[:7] for t in snap.turns}
    weeks = {f"{y}-W{w:02d}" for y, w, _ in (datetime.fromisoformat(t.start).isocalendar()
                                              for t in snap.turns)}
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
        snap.headline.all_usage.credits)
    assert sum(float(row["fusion_credits"]) for row in rows if row["model"]) == pytest.approx(
        snap.headline.credits)


REALCLI = ROOT / "tests" / "realcli" / "VERSION"
# A session's row: its id, turns, ordinary prompts, calls, credits, five token counts, its
# first and last date, HydraFusion's figures.
SESSION_ROW = re.compile(r"^([0-9a-f-]{36})((?:  +\S+){9})  +(\d{4}-\d\d-\d\d)  +(\d{4}-\d\d-\d\d)  ")


def _realcli_state():
    return record.recorded(REALCLI.read_text().strip())[0]


def _cells(line: str) -> list[str]:
    return line.split()


def test_by_session_is_every_sessions_use_by_last_activity_with_a_total_that_is_the_headlines():
    """The real CLI's sessions, two of them with ordinary prompts alone: each has its row, in
    the order of its last prompt, with its first and last prompt and its models under it;
    the total row is every prompt's use, as the report's `all usage` line beside its
    HydraFusion headline gives it."""
    state = _realcli_state()
    snap = snap_of(state)
    wide = tailer_env(COLUMNS="300")
    done = run_report("--state-dir", str(state), "--by", "session", "--timezone", "UTC", env=wide)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    header = next(line for line in lines if line.startswith("BY SESSION "))
    assert header.split()[2:] == ["turns", "ordinary", "calls", "credits", "input", "output",
                                  "cache", "read", "cache", "write", "total", "first", "last",
                                  "HydraFusion", "compound", "judge", "rej.", "review"]
    rows = [(index, SESSION_ROW.match(line)) for index, line in enumerate(lines)]
    rows = [(index, found) for index, found in rows if found]
    sessions: dict[str, list] = {}
    for turn in snap.turns:
        sessions.setdefault(turn.session_id, []).append(turn)
    ordinary_only = {sid for sid, turns in sessions.items() if all(t.kind == "ordinary" for t in turns)}
    assert ordinary_only and len(rows) == len(sessions) == 12
    last = {sid: max(datetime.fromisoformat(t.start) for t in turns) for sid, turns in sessions.items()}
    assert [found.group(1) for _, found in rows] == sorted(sessions, key=lambda sid: (last[sid], sid))
    for index, found in rows:
        turns = sessions[found.group(1)]
        assert (found.group(3), found.group(4)) == (turns[0].start[:10], turns[-1].start[:10])
        cells = found.group(2).split()
        assert (int(cells[0]), int(cells[1])) == (sum(t.kind != "ordinary" for t in turns),
                                                  sum(t.kind == "ordinary" for t in turns))
        # Tokens exact, as ccusage prints them: thousands separated.
        use = next(g for g in snap.by_session if g.key == found.group(1)).all_usage
        assert cells[4:] == [f"{n:,}" for n in (use.input_tokens, use.output_tokens,
                                                 use.cache_read_tokens, use.cache_write_tokens,
                                                 use.total_tokens)]
        models = {leg.model for t in turns for leg in t.legs} | {
            call.model for t in turns if t.kind == "ordinary" for call in t.model_calls}
        assert set(lines[index + 1].replace(",", " ").split()) == models
    total = next(line for line in lines if line.startswith("total "))
    usage = snap.headline.all_usage
    assert total.split()[1:4] == [str(snap.headline.turns), str(usage.ordinary.prompts),
                                  str(usage.calls)]
    # The report's headline says which is which: its HydraFusion figures, and all usage.
    table = run_report("--state-dir", str(state), "--timezone", "UTC", "--turns", "0", env=wide).stdout
    assert "above, HydraFusion turns only:" in table
    beside = re.search(r"^all usage: (\d+) prompts \((\d+) ordinary\), (\d+) calls, ([\d.]+) "
                       r"credits \((\d+) calls unknown\)", table, re.M)
    assert beside, table
    assert beside.groups() == (str(usage.prompts), str(usage.ordinary.prompts), str(usage.calls),
                               total.split()[4].removeprefix(">="), str(usage.unknown_credit_calls))
    assert usage.prompts == len(snap.turns) and usage.calls == sum(t.calls for t in snap.turns)


def _first_cells(lines: list[str], keys: list[str]) -> dict[str, list[str]]:
    """Each key's rows' first cells in `lines`: the key itself, or its start cut with `~`."""
    found: dict[str, list[str]] = {key: [] for key in keys}
    for line in lines:
        cell = line.split(" ", 1)[0]
        for key in keys:
            if cell == key or (cell.endswith("~") and key.startswith(cell[:-1])):
                found[key].append(cell)
    return found


def test_by_session_shows_a_session_id_whole_wherever_it_fits_beside_a_column():
    """A session id is what a user pastes into --session: in the table by session and in
    its "worth it" table, other columns are left out before it is cut, so it is whole at
    every width with room for it and one column (`turns`); narrower, its start is kept,
    and --session takes that start."""
    from tailer.report.groups_table import render_groups

    snap = snap_of(ROOT / "fixtures")
    keys = [group.key for group in snap.by_session]
    whole_from = len(keys[0]) + 2 + len("turns")
    for breakdown in (False, True):
        for width in range(200, 39, -1):
            lines = render_groups(snap, "session", breakdown=breakdown, width=width).splitlines()
            assert max(map(len, lines)) <= width, width
            worth_at = next(i for i, line in enumerate(lines) if line.startswith("WORTH IT"))
            for table in (lines[:worth_at], lines[worth_at:]):
                for key, cells in _first_cells(table, keys).items():
                    if width >= whole_from:
                        assert cells == [key], (width, breakdown, cells)
                    else:
                        assert cells == [key[:width - 8] + "~"], (width, breakdown, cells)
    narrowest = render_groups(snap, "session", width=40).splitlines()
    start = _first_cells(narrowest, keys)[keys[0]][0][:-1]
    done = run_report("--demo", "--session", start, "--by", "session", "--format", "json")
    assert done.returncode == 0, done.stderr
    assert [group["key"] for group in json.loads(done.stdout)["sessions"]] == [
        key for key in keys if key.startswith(start)] and len(start) == 32


def test_by_day_without_a_hydrafusion_turn_shows_the_ordinary_prompts_use(tmp_path):
    writer = SessionWriter("ordinary-only", _utc(2026, 11, 30, 10))
    for _ in range(3):
        writer.ordinary("claude-sonnet-4.6", tools=("bash",))
    writer.shutdown()
    writer.write(tmp_path)
    snap = snap_of(tmp_path)
    done = run_report("--state-dir", str(tmp_path), "--by", "day", "--breakdown", "--timezone",
                      "UTC", env=tailer_env(COLUMNS="200"))
    assert done.returncode == 0, done.stderr
    [day] = [line for line in done.stdout.splitlines() if line.startswith("2026-11-30 ")]
    usage = snap.headline.all_usage
    assert day.split()[1:4] == ["0", "3", str(usage.calls)] and usage.calls > 3
    assert "  claude-sonnet-4.6 " in done.stdout
    assert [line.split()[1:4] for line in done.stdout.splitlines()
            if line.startswith("total ")] == [["0", "3", str(usage.calls)]]


def test_the_title_counts_the_sessions_of_the_turns_it_counts(tmp_path):
    """"1 turn, 6 sessions" for `--model gemini` over the five fixture sessions and a copy of
    one: the title (and the JSON's `sessions`, the page's subtitle) counted every session log
    read, whatever the filters chose, a copy whose turns are all its session's and a session
    with no prompt among them. It counts the sessions of the turns it counts, as `--by
    session` lists them."""
    import shutil

    for fixture in (ROOT / "fixtures").iterdir():
        shutil.copytree(fixture, tmp_path / fixture.name)
    first = sorted(path.name for path in tmp_path.iterdir())[0]
    shutil.copytree(tmp_path / first, tmp_path / f"{first}.bak")
    SessionWriter("no-prompt-yet", _utc(2026, 11, 30, 10)).write(tmp_path)
    state = ("--state-dir", str(tmp_path), "--timezone", "UTC")

    assert report_json(*state)["sessions"] == 5
    chosen = report_json(*state, "--model", "gemini")
    assert (chosen["headline"]["turns"], chosen["sessions"]) == (1, 1)
    done = run_report(*state, "--model", "gemini", env=tailer_env(COLUMNS="200"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("HydraFusion: 1 turn, 1 session, ")
    by_session = report_json(*state, "--by", "session")["sessions"]
    assert len(by_session) == 5
    page = tmp_path.parent / "page.html"
    assert run_report(*state, "--model", "gemini", "--html", str(page)).returncode == 0
    assert "1 HydraFusion turn, 0 ordinary prompts, in 1 session" in page.read_text()


def test_by_as_json_is_an_array_and_its_totals_in_ccusages_shape(tmp_path):
    """`--by X --format json`: the groups of X in the table's order, named as ccusage names
    its arrays, and their totals, the headline; described by docs/report-by.schema.json."""
    import jsonschema
    from referencing import Registry, Resource

    write_month(tmp_path, days=9)
    main, by_schema = (json.loads((ROOT / "docs" / name).read_text())
                       for name in ("report.schema.json", "report-by.schema.json"))
    validator = jsonschema.Draft202012Validator(
        by_schema, registry=Registry().with_resource(main["$id"], Resource.from_contents(main)),
        format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    whole = report_json("--state-dir", str(tmp_path), "--timezone", "UTC")
    for by, array in (("day", "daily"), ("week", "weekly"), ("month", "monthly"),
                      ("session", "sessions")):
        document = report_json("--state-dir", str(tmp_path), "--timezone", "UTC", "--by", by)
        assert not list(validator.iter_errors(document)), by
        assert set(document) == {"schema_version", "by", "generated_at", "utc_offset", "timezone",
                                 "filters", array, "totals"}
        assert document[array] == whole[f"by_{by}"] and document["totals"] == whole["headline"]
        for figure in ("calls", "input_tokens", "output_tokens", "cache_read_tokens",
                       "cache_write_tokens", "total_tokens"):
            assert sum(g["all_usage"][figure] for g in document[array]) == (
                document["totals"]["all_usage"][figure]), (by, figure)
        newest = report_json("--state-dir", str(tmp_path), "--timezone", "UTC", "--by", by,
                             "--order", "desc", "--breakdown")
        assert newest[array] == document[array][::-1]
    document["sessions"][0]["all_usage"]["input_tokens"] = -1
    assert list(validator.iter_errors(document))


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
    for args in (["--order", "desc"], ["--breakdown"], ["--by", "day", "--format", "csv-calls"],
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
    from tailer.report.groups_table import render_groups
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
    usage = biggest["all_usage"]  # the columns: turns, ordinary, calls, credits, input, ...
    assert row.split()[1:6] == [f"{biggest['turns']:,}", f"{usage['ordinary']['prompts']:,}",
                                f"{usage['calls']:,}", f"{usage['credits']:,.2f}",
                                f"{usage['input_tokens']:,}"]
    # CSV: plain numbers, each a field of its own.
    groups = list(csv.DictReader(io.StringIO(report("--by", "month", "--format", "csv"))))
    by_key = {group["key"]: group for group in groups}
    assert by_key[biggest["key"]]["turns"] == str(biggest["turns"])
    assert by_key[biggest["key"]]["input_tokens"] == str(usage["input_tokens"])
    assert float(by_key[biggest["key"]]["credits"]) == pytest.approx(usage["credits"])
    assert float(by_key[biggest["key"]]["fusion_credits"]) == pytest.approx(biggest["credits"])
    for text in (report("--format", "csv"), report("--format", "csv-calls")):
        rows = list(csv.reader(io.StringIO(text)))
        assert {len(row) for row in rows} == {len(rows[0])}  # no figure split by a comma
        assert not any(re.fullmatch(r"\d{1,3}(,\d{3})+(\.\d+)?", cell) for row in rows for cell in row)
