"""`report`: reading the logs into turns, choosing turns, the figures, the command itself."""

import io
import json
import os
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings, strategies as st

from report_helpers import report_json, run_report, wanted_turns, write_month
from sessiongen import START, SessionWriter, every_pattern, whole_session
from tailer.commands import launch
from tailer.copilot import events
from tailer.report import command as report
from tailer.copilot.files import session_logs
from tailer.report.figures import snapshot
from tailer.report.checks import check_figures
from tailer.report.rows import turn_row
from tailer.report.read import Selection, SessionReader
from tailer.turns.assembly import IDLE_TIMEOUT_S
from tailerproc import ROOT, tailer_env

NOW = datetime(2026, 12, 1, 12, tzinfo=timezone.utc)
SCHEMA = json.loads((ROOT / "docs" / "report.schema.json").read_text())


def figures_of(state_dir, selection=Selection(), tz=timezone.utc):
    reader = SessionReader()
    logs = session_logs(state_dir)
    turns = [turn_row(turn, tz) for turn in wanted_turns(logs, selection, reader)]
    return snapshot(turns, now=NOW, tz=tz, skipped=reader.skipped(),
                    checks=list(map(check_figures, reader.reconciliations)))


def test_every_turn_and_leg_as_the_log_holds_them(tmp_path):
    writer = every_pattern("every-pattern")
    writer.write(tmp_path)
    snap = figures_of(tmp_path)
    got = {turn.fusion_id: turn for turn in snap.turns}
    assert len(snap.turns) == len(writer.expected)
    for truth in writer.expected:
        turn = got[truth.fusion_id]
        pattern = truth.pattern if truth.kind == "fusion" else truth.kind
        assert (turn.pattern, turn.outcome) == (pattern, truth.outcome)
        assert turn.credits == pytest.approx(truth.nano_aiu / 1e9, abs=1e-12)
        assert turn.degraded_reason == truth.degraded_reason
        assert turn.route_failure_reason == truth.route_failure_reason
        assert [(leg.model, leg.kind, leg.status, leg.verdict, leg.committed, leg.calls)
                for leg in turn.legs] == [
            (leg.model, leg.phase_kind, leg.status, leg.verdict, leg.committed, leg.request_count)
            for leg in truth.legs]
    assert [turn.start for turn in snap.turns] == sorted(turn.start for turn in snap.turns)


def test_ordinary_turns_calls_and_tools(tmp_path):
    """Fusion and ordinary prompts of one session: each with its calls and tools, each call
    and tool under the leg it served; fusion figures leave the ordinary prompts out."""
    writer = whole_session("whole")
    writer.write(tmp_path)
    snap = figures_of(tmp_path)
    got = {turn.fusion_id: turn for turn in snap.turns}
    assert set(got) == {turn.fusion_id for turn in writer.expected}
    for truth in writer.expected:
        turn = got[truth.fusion_id]
        assert turn.kind == truth.kind
        assert (len(turn.model_calls), len(turn.tools)) == (truth.calls, truth.tools), truth.fusion_id
        if truth.kind == "ordinary":
            assert turn.legs == [] and turn.calls == truth.calls
            assert {call.leg for call in turn.model_calls} == {None}
            assert turn.credits == pytest.approx(truth.nano_aiu / 1e9)
        else:
            assert {call.leg for call in turn.model_calls} <= set(range(len(turn.legs)))
    kinds = {kind.kind: kind for kind in snap.by_kind}
    for name in ("fusion", "ordinary", "fallback"):
        mine = [t for t in writer.expected if t.kind == name]
        assert kinds[name].turns == len(mine)
        assert kinds[name].tools == sum(t.tools for t in mine)
        assert kinds[name].credits == pytest.approx(sum(t.nano_aiu for t in mine) / 1e9)
    assert snap.headline.turns == sum(t.kind != "ordinary" for t in writer.expected)
    assert any(tool.timing == "between_calls" for turn in snap.turns for tool in turn.tools)


def test_the_clis_own_totals_are_checked(tmp_path):
    whole_session("agrees").write(tmp_path)
    whole_session("differs", totals_off_by=3).write(tmp_path)
    checks = figures_of(tmp_path).reconciliation
    assert {(c.session_id, c.agrees) for c in checks} == {("agrees", True), ("differs", True),
                                                          ("differs", False)}
    wrong = [c for c in checks if not c.agrees][0]
    assert wrong.source == "shutdown" and len(wrong.differences) == 1
    difference = wrong.differences[0]
    assert round((difference["cli"]["credits"] - difference["ours"]["credits"]) * 1e9) in (3, -3)


def test_headline_figures_follow_the_stack_definitions(tmp_path):
    """Computed here from the generator's truth, the way docs/METRICS.md writes them in PromQL."""
    expected = [turn for turn in write_month(tmp_path, days=10) if turn.kind != "ordinary"]
    head = figures_of(tmp_path).headline
    legs = [leg for turn in expected for leg in turn.legs]
    routed = [turn for turn in expected if turn.outcome != "route_failed"]
    total = sum(leg.nano_aiu for leg in legs)
    assert head.turns == len(expected)
    assert head.credits == pytest.approx(total / 1e9)
    assert head.calls == sum(leg.request_count for leg in legs)
    assert head.outcomes == {outcome: sum(t.outcome == outcome for t in expected)
                             for outcome in {t.outcome for t in expected}}
    assert head.compound_rate == pytest.approx(
        sum(len(set(turn.models)) > 1 for turn in routed) / len(routed))
    judged = [turn for turn in expected if any(leg.verdict for leg in turn.legs)]
    assert head.judged_turns == len(judged)
    assert head.judge_rejection_rate == pytest.approx(sum(
        any(leg.verdict in ("reject", "revise") for leg in turn.legs) for turn in judged) / len(judged))
    assert head.review_share == pytest.approx(
        sum(leg.nano_aiu for leg in legs if not leg.committed) / total)
    assert head.cache_share == pytest.approx(
        sum(leg.cache_read_tokens for leg in legs) / sum(leg.input_tokens for leg in legs))
    assert head.failed_legs == sum(leg.status != "succeeded" for leg in legs)


def test_groups_add_up_to_the_headline(tmp_path):
    write_month(tmp_path, days=12)
    snap = figures_of(tmp_path)
    head = snap.headline
    for groups in ([use.fusion for use in snap.by_model], snap.by_leg_kind):
        groups = [group for group in groups if group.legs]
        assert sum(group.credits for group in groups) == pytest.approx(head.credits)
        assert sum(group.calls for group in groups) == head.calls
        assert sum(group.legs for group in groups) == sum(len(t.legs) for t in snap.turns)
    for groups in (snap.by_model, snap.by_leg_kind):
        assert [group.credits for group in groups] == sorted((g.credits for g in groups), reverse=True)
    fusion = [turn for turn in snap.turns if turn.kind != "ordinary"]
    assert sum(p.turns for p in snap.by_pattern) == head.turns
    assert sum(p.credits for p in snap.by_pattern) == pytest.approx(head.credits)
    for figures in snap.by_pattern:
        per_turn = sorted(t.credits for t in fusion if t.pattern == figures.pattern)
        assert (figures.min_credits, figures.max_credits) == (per_turn[0], per_turn[-1])
        assert figures.min_credits <= figures.median_credits <= figures.max_credits
    assert sum(day.turns for day in snap.by_day) == head.turns
    for day in snap.by_day:
        assert sum(day.credits_by_model.values()) == pytest.approx(day.credits)
    assert [day.key for day in snap.by_day] == sorted({t.start[:10] for t in fusion})
    assert sum(kind.turns for kind in snap.by_kind) == len(snap.turns)
    assert sum(k.turns for k in snap.by_kind if k.kind != "ordinary") == head.turns


def test_ratios_with_nothing_to_divide_by_are_absent():
    head = snapshot([], now=NOW).headline
    assert (head.turns, head.credits) == (0, 0)
    assert head.compound_rate is head.judge_rejection_rate is head.review_share is None
    assert head.cache_share is None


def test_days_and_times_are_in_the_reports_time_zone(tmp_path):
    writer = SessionWriter("late", datetime(2026, 11, 4, 23, 30, tzinfo=timezone.utc))
    writer.single("gpt-5.6-sol")
    writer.write(tmp_path)
    plus_two = timezone(timedelta(hours=2))
    assert figures_of(tmp_path).by_day[0].key == "2026-11-04"
    local = figures_of(tmp_path, tz=plus_two)
    assert local.by_day[0].key == "2026-11-05"
    assert local.turns[0].start.endswith("+02:00") and local.utc_offset == "+02:00"


# -- Reading ---------------------------------------------------------------------------------


PIECES = every_pattern("pieces")


@settings(max_examples=60)
@given(cuts=st.lists(st.integers(min_value=0, max_value=10**9), max_size=12))
def test_reading_in_pieces_finds_the_same_turns_once(cuts):
    """However the log grows between reads (mid-line too), every turn comes out once, as a
    single read finds it: what --watch relies on."""
    writer = PIECES
    text = "".join(line + "\n" for line in writer.lines()).encode()
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder, "pieces", "events.jsonl")
        log.parent.mkdir()
        log.write_bytes(b"")
        reader, found = SessionReader(), []
        for cut in sorted({cut % (len(text) + 1) for cut in cuts}) + [len(text)]:
            log.write_bytes(text[:cut])
            found += reader.read("pieces", log)
        found += reader.finish("pieces")
    assert sorted(t.key for t in found) == sorted(t.fusion_id for t in writer.expected)
    by_id = {turn.key: turn for turn in found}
    for truth in writer.expected:
        assert [leg.phase_id for leg in by_id[truth.fusion_id].legs] == [
            leg.phase_id for leg in truth.legs]


def test_each_turn_comes_out_as_it_finishes(tmp_path, monkeypatch):
    """A log of thousands of turns is not held as Turns (all their calls and tools) until
    its end: each is handed on once finished, for the report to keep only its row."""
    writer = SessionWriter("many", START)
    for _ in range(20):
        writer.single("gpt-5.6-sol")
    path = writer.write(tmp_path)
    parsed = []
    parse_line = events.parse_line
    monkeypatch.setattr(events, "parse_line", lambda line: parsed.append(line) or parse_line(line))
    turns = SessionReader().read("many", path)
    next(turns)
    read_for_the_first = len(parsed)
    assert len(list(turns)) == 19
    assert read_for_the_first < len(parsed) / 10


def test_damaged_lines_are_counted_and_cost_nothing_else(tmp_path):
    writer = every_pattern("damaged")
    path = writer.write(tmp_path)
    with open(path, "ab") as log:
        log.write(b'{"type":"session.fusion_completed","data":{}}\n\xff\xfe"session.fusion_\n')
    snap = figures_of(tmp_path)
    assert snap.skipped == {"damaged_lines": 2, "unreadable_logs": 0}
    assert snap.headline.turns == len(writer.expected)


def test_an_open_turn_at_the_end_of_a_log_is_in_flight_until_the_log_is_idle(tmp_path):
    writer = SessionWriter("open", START)
    writer.single("gpt-5.6-sol")
    writer.incomplete("mai-code-1.1-flash", "gpt-5.6-sol")  # no shutdown follows
    path = writer.write(tmp_path)
    fresh = report_json("--state-dir", str(tmp_path))
    assert [t["outcome"] for t in fresh["turns"]] == ["completed"]
    assert [t["fusion_id"] for t in fresh["in_flight"]] == [writer.expected[1].fusion_id]
    quiet = path.stat().st_mtime - IDLE_TIMEOUT_S
    os.utime(path, (quiet, quiet))
    idle = report_json("--state-dir", str(tmp_path))
    assert [t["outcome"] for t in idle["turns"]] == ["completed", "incomplete"]
    assert idle["in_flight"] == []


# -- Choosing turns -------------------------------------------------------------------------


def test_when_takes_dates_times_and_durations():
    now = datetime(2026, 11, 10, 15, 30, tzinfo=timezone(timedelta(hours=1)))
    assert report.parse_when("7d", now) == now - timedelta(days=7)
    assert report.parse_when("24h", now) == now - timedelta(hours=24)
    assert report.parse_when("90m", now) == now - timedelta(minutes=90)
    # Units in capitals as TODAY and Yesterday are taken: one case rule for every word,
    # but M, months to many tools, is not silently minutes.
    for upper, lower in (("3D", "3d"), ("2W", "2w"), ("24H", "24h")):
        assert report.parse_when(upper, now) == report.parse_when(lower, now)
    with pytest.raises(ValueError, match="minutes are `m`; for months, give the date"):
        report.parse_when("3M", now)
    # A date or time without an offset is the machine's local time.
    assert report.parse_when("2026-11-04", now) == datetime(2026, 11, 4).astimezone()
    assert report.parse_when("2026-11-04", now, whole_day_after=True) == datetime(
        2026, 11, 5).astimezone()
    assert report.parse_when("2026-11-04T10:00Z", now) == datetime(2026, 11, 4, 10, tzinfo=timezone.utc)
    for bad in ("last week", "7", "d7", "2026-13-01", "1y"):
        with pytest.raises(ValueError):
            report.parse_when(bad, now)


def test_selection_by_time_session_model_and_pattern(tmp_path):
    expected = write_month(tmp_path, days=6)
    everything = figures_of(tmp_path).turns
    day = lambda n: int((datetime(2026, 10, 1, tzinfo=timezone.utc) + timedelta(days=n)).timestamp() * 1e9)

    def chosen(**options):
        return {t.fusion_id for t in figures_of(tmp_path, Selection(**options)).turns}

    window = chosen(since_ns=day(2), until_ns=day(4))
    assert window == {t.fusion_id for t in everything if "2026-10-03" <= t.start[:10] <= "2026-10-04"}
    assert window
    session = expected[0].session_id
    assert chosen(session=session[:-3]) == {t.fusion_id for t in expected if t.session_id == session}
    assert chosen(pattern="critique") == {t.fusion_id for t in everything if t.pattern == "critique"}
    assert chosen(model="OPUS") == {t.fusion_id for t in everything
                                    if any("opus" in part.model for part in t.legs + t.model_calls)}
    assert chosen(model="opus") and chosen(model="opus") != {t.fusion_id for t in everything}


def test_logs_last_written_before_since_are_not_read(tmp_path):
    write_month(tmp_path, days=3)
    old = datetime(2026, 10, 2, tzinfo=timezone.utc).timestamp()
    logs = session_logs(tmp_path)
    for path in logs.values():
        os.utime(path, (old, old))
    selection = Selection(since_ns=int(old * 1e9) + 1)
    assert not any(selection.wants_log(sid, path) for sid, path in logs.items())


# -- The command ------------------------------------------------------------------------------


def test_no_sessions_says_where_it_looked_and_what_to_try(tmp_path):
    # docs/REPORT.md, "Exit codes": a missing folder is input to mend (2), an empty one
    # nothing to report (1).
    for state_dir, code in ((tmp_path / "missing", 2), (tmp_path, 1)):
        done = run_report("--state-dir", str(state_dir))
        assert done.returncode == code
        assert str(state_dir) in done.stderr
        assert "--state-dir" in done.stderr and "--demo" in done.stderr
        assert done.stdout == ""
    env = tailer_env(COPILOT_HOME=str(tmp_path / "home"))
    done = run_report(env=env)
    assert done.returncode == 2 and str(tmp_path / "home" / "session-state") in done.stderr


def test_demo_shows_every_fixture_turn_at_recent_times_and_leaves_nothing(tmp_path):
    env = tailer_env(TMPDIR=str(tmp_path))
    done = run_report("--demo", "--format", "json", env=env)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    fixtures = report_json("--state-dir", str(ROOT / "fixtures"))
    assert document["headline"] == fixtures["headline"]
    assert document["by_model"] == fixtures["by_model"]
    last = datetime.fromisoformat(document["last_turn"])
    assert timedelta(0) < datetime.now(timezone.utc) - last < timedelta(hours=1)
    assert list(tmp_path.iterdir()) == []


def test_the_report_writes_nothing_but_its_cache(tmp_path):
    """And with --no-cache, nothing at all."""
    state = tmp_path / "state"
    every_pattern("read-only").write(state)
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    env = tailer_env(XDG_STATE_HOME=str(tmp_path / "xdg"), HOME=str(tmp_path / "home"),
                     XDG_CACHE_HOME=str(tmp_path / "cache"))
    for options in ([], ["--format", "json"], ["--format", "csv"]):
        done = run_report("--state-dir", str(state), "--no-cache", *options, env=env)
        assert done.returncode == 0
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} == before
    assert run_report("--state-dir", str(state), env=env).returncode == 0
    written = {p for p in tmp_path.rglob("*") if p not in before}
    assert written and all(p.is_relative_to(tmp_path / "cache" / "hydrafusion" / "report")
                           or p in (tmp_path / "cache", tmp_path / "cache" / "hydrafusion")
                           for p in written), written


def test_progress_goes_to_a_terminal_only(tmp_path, monkeypatch):
    """The line as drawn from a Reading (tests/test_report_progress.py: in a terminal)."""
    from tailer.report.gather import Job, Reading

    logs = [every_pattern(f"progress-{index}").write(tmp_path) for index in range(3)]
    shown = io.StringIO()
    monkeypatch.setattr(report.Progress, "AFTER_S", 0.0)
    monkeypatch.setattr(report.Progress, "EVERY_S", 0.01)
    reading = Reading({path.parent.name: path.stat().st_size for path in logs})
    progress = report.Progress(shown, reading)
    for path in logs:
        reading.log_read(Job(path.parent.name, path, None, 0))
    total = sum(path.stat().st_size for path in logs) / 1e6
    deadline = time.monotonic() + 30
    while f"\rread 3 of 3 sessions, {total:.1f} of {total:.1f} MB" not in shown.getvalue():
        assert time.monotonic() < deadline, shown.getvalue()
        time.sleep(0.01)
    progress.close()
    assert shown.getvalue().endswith("\r\x1b[K")  # the line is cleared once reading is done
    done = run_report("--state-dir", str(tmp_path))  # stderr is a pipe here, not a terminal
    assert done.returncode == 0 and "reading" not in done.stderr


def test_the_progress_line_reads_as_words():
    """`reading 0/1 sessions` read as neither words nor a fraction: the counts are said."""
    from tailer.report.gather import Reading

    for sizes, said in (({"one": 1_500_000}, "read 0 of 1 session, 0.0 of 1.5 MB"),
                        ({f"log-{n}": 1_000 for n in range(1_200)},
                         "read 0 of 1,200 sessions, 0.0 of 1.2 MB")):
        progress = report.Progress(io.StringIO(), Reading(sizes))
        try:
            assert progress.line() == said
        finally:
            progress.close()


def test_usage_errors(tmp_path):
    every_pattern("usage").write(tmp_path)
    for options in (["--since", "last week"], ["--watch", "--format", "json"],
                    ["--watch", "--html", str(tmp_path / "x.html")], ["--format", "xml"]):
        done = run_report("--state-dir", str(tmp_path), *options)
        assert done.returncode == 2, options
        assert "Traceback" not in done.stderr


def test_filters_that_match_nothing_say_so(tmp_path):
    """Nothing to report (exit 1), no table of zeros; tests/test_command_frictions.py checks
    what is named instead."""
    every_pattern("nothing").write(tmp_path)
    done = run_report("--state-dir", str(tmp_path), "--model", "no-such-model")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("No turn matches --model no-such-model")


def test_installed_entry_point_runs_the_report(tmp_path, capsys):
    """pyproject's `hydrafusion-tailer` script is tailer.commands.launch:main."""
    every_pattern("entry").write(tmp_path)
    assert launch.main(["report", "--state-dir", str(tmp_path), "--format", "json"], {}) == 0
    assert json.loads(capsys.readouterr().out)["headline"]["turns"] == 9
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'hydrafusion-tailer = "tailer.commands.launch:main"' in pyproject


def test_json_document_follows_its_schema(tmp_path):
    validator = jsonschema.Draft202012Validator(
        SCHEMA, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    write_month(tmp_path / "month", days=5)
    (tmp_path / "empty").mkdir()
    every_pattern("empty-but-one").write(tmp_path / "empty")
    documents = [
        report_json("--state-dir", str(ROOT / "fixtures")),
        report_json("--state-dir", str(tmp_path / "month"), "--since", "2026-10-02", "--model", "sol"),
    ]
    matching_nothing = run_report("--format", "json", "--state-dir", str(tmp_path / "empty"),
                                  "--pattern", "none-such")
    assert matching_nothing.returncode == 1  # nothing to report, and still a document
    documents.append(json.loads(matching_nothing.stdout))
    for document in documents:
        errors = sorted(validator.iter_errors(document), key=str)
        assert not errors, errors[0]
    assert documents[1]["filters"] == {"since": "2026-10-02", "model": "sol"}
    assert documents[2]["turns"] == [] and documents[2]["first_turn"] is None


def test_schema_names_every_field_the_report_writes():
    """additionalProperties is false throughout: a new field must be documented first."""
    broken = report_json("--state-dir", str(ROOT / "fixtures"))
    broken["turns"][0]["legs"][0]["prompt"] = "x"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, SCHEMA)


def test_the_installed_package_carries_the_pages_script_and_style(tmp_path):
    """`pip install .` (the container, a user) must bring report_page.js and .css along:
    setuptools' build_py, which a wheel build runs, copies what will be installed."""
    import shutil
    import subprocess
    import sys

    source = tmp_path / "source"
    for folder in ("tailer", "fixtures"):  # fixtures/: the demo's sessions, tailer/fixtures
        shutil.copytree(ROOT / folder, source / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run([sys.executable, "-c", "from setuptools import setup; setup()", "-q",
                    "build_py", "--build-lib", str(tmp_path / "lib")],
                   cwd=source, check=True, capture_output=True, timeout=300)
    installed = {str(path.relative_to(tmp_path / "lib" / "tailer"))
                 for path in (tmp_path / "lib" / "tailer").rglob("*") if path.is_file()}
    assert {"report/report_page.js", "report/report_page.css", "report/command.py",
            "report/html.py", "commands/cli.py", "copilot/events.py"} <= installed
