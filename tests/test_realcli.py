"""The real Copilot CLI, run offline: does the tailer read the logs it really writes?

The CLI at the pinned version (tests/realcli/VERSION) is installed from npm and driven
through every scenario of tests/realcli/scenarios.py against the fake backend, which is
the only thing it can reach. The checks run twice: on the logs the CLI writes now
(`live`, skipped only when npm cannot reach its registry) and on the scrubbed copies kept
in tests/data/realcli/<version>/ (`recorded`, which need nothing). A CLI upgrade that
changes what the tailer makes of a scenario fails here, with the scenario named.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from exposition_helpers import samples
from realcli import backend, driver, footer, reading, record
from realcli.scenarios import BY_NAME, SCENARIOS
from tailer.outputs.spans import turn_spans
from tailerproc import ROOT, run_once, tailer_env

VERSION = driver.pinned_version()
NAMES = [scenario.name for scenario in SCENARIOS]
FUSION_NAMES = [scenario.name for scenario in SCENARIOS if scenario.turns]


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> driver.Outcome:
    try:
        return driver.run_scenarios(VERSION, tmp_path_factory.mktemp("realcli"))
    except driver.Unavailable as error:
        pytest.skip(f"Copilot CLI {VERSION} cannot be installed: {error}")


def _recorded() -> tuple[Path, dict[str, str]]:
    found = record.recorded(VERSION)
    assert found, (f"no recorded sessions for CLI {VERSION} in {record.data_dir(VERSION)}: "
                   "run `python3 -m tests.realcli record`")
    return found


@pytest.fixture(params=["recorded", "live"])
def logs(request) -> tuple[Path, dict[str, str]]:
    """(state dir, scenario -> session id), from the kept copies or a fresh run."""
    if request.param == "recorded":
        return _recorded()
    outcome = request.getfixturevalue("live")
    return outcome.state_dir, outcome.sessions


def turns_of(logs, name: str):
    state_dir, sessions = logs
    return reading.session_turns(state_dir / sessions[name] / "events.jsonl", sessions[name])


def test_every_prompt_ran_to_its_end(live):
    failed = [(run.scenario, run.returncode, run.stderr_tail) for run in live.runs
              if run.returncode != 0]
    assert not failed
    assert len(live.runs) == sum(len(scenario.prompts) for scenario in SCENARIOS)


def test_no_call_leaves_the_machine(live):
    """Proxies point at the fake: a call meant elsewhere would show as CONNECT or a full URL."""
    paths = Counter(request.path for request in live.requests)
    assert not [r for r in live.requests if r.method == "CONNECT" or "://" in r.path]
    fusion_prompts = sum(1 for s in SCENARIOS for prompt in s.prompts if prompt.tier)
    assert paths["/model/fusion"] == fusion_prompts
    assert paths["/chat/completions"] >= len(live.runs)


def test_the_fake_answered_every_leg_by_its_role(live):
    """Review legs were recognised by the CLI's prompts, so verdicts came from the scenario."""
    answers = Counter((r.session_id, r.answer) for r in live.requests if r.answer)
    sessions = live.sessions
    assert answers[sessions["cascade_repair_tool"], "judge"] == 1
    assert answers[sessions["critique_revise"], "critic"] == 1
    assert answers[sessions["cascade_repair_tool"], "tool_call"] == 1
    assert answers[sessions["plain_tool"], "tool_call"] == 1


@pytest.mark.parametrize("name", NAMES)
def test_the_tailer_rebuilds_each_scenario(logs, name):
    """Pattern, legs and models in order, verdicts, committed leg, outcome, policy."""
    assert reading.differences(BY_NAME[name], turns_of(logs, name)) == []


@pytest.mark.parametrize("name", FUSION_NAMES)
def test_credits_and_tokens_are_the_fake_backends_sums(logs, name):
    """Each leg is charged what the fake charged its calls; the rollup is the legs' sum. A
    leg whose calls the fake gave no credits (`unpriced`) says 0: the CLI leaves them out."""
    unpriced = BY_NAME[name].unpriced
    for turn in turns_of(logs, name):
        for leg in turn.legs:
            calls = leg.usage.request_count
            charged = 0 if leg.model in unpriced else backend.nano_aiu(leg.model)
            assert leg.usage.nano_aiu == calls * charged
            assert leg.usage.input_tokens == calls * backend.USAGE["prompt_tokens"]
            assert leg.usage.cache_read_tokens == calls * 200
        assert not turn.usage_mismatch
        if turn.completed is not None:
            assert turn.usage == turn.legs_usage


@pytest.mark.parametrize("name", FUSION_NAMES)
def test_each_turn_is_one_trace_with_a_span_per_leg(logs, name):
    for turn, expected in zip(turns_of(logs, name), BY_NAME[name].turns):
        spans = [json.loads(span.json) for span in turn_spans(turn)]
        assert len({span["traceId"] for span in spans}) == 1
        root, *children = spans
        assert root["name"] == ("hydrafusion route_failed" if expected.route_failure_reason
                                else f"hydrafusion {expected.pattern}")
        legs = [span for span in children if span.get("parentSpanId") == root["spanId"]
                and span["name"] != "route hydrafusion"]
        calls = [span for span in children if span["name"].startswith("chat ")]
        assert len(calls) == len(turn.calls)
        assert {span["parentSpanId"] for span in calls} <= {span["spanId"] for span in legs}
        tools = [span for span in children if span["name"].startswith("execute_tool ")]
        assert len(tools) == len(turn.tools)
        assert [span["name"] for span in legs] == [f"{leg.kind} {leg.model}"
                                                   for leg in expected.legs]
        committed = [span["name"] for span in legs
                     if _attribute(span, "hydrafusion.phase.committed") is True]
        assert len(committed) == 1 and committed[0].startswith(expected.committed + " ")
        verdicts = [event for span in legs for event in span.get("events", [])]
        assert len(verdicts) == sum(1 for leg in expected.legs if leg.verdict)
        failed = [span["name"] for span in legs if span.get("status", {}).get("code") == 2]
        assert failed == [f"{leg.kind} {leg.model}" for leg in expected.legs
                          if leg.status != "succeeded"]


def _attribute(span: dict, key: str):
    for attribute in span["attributes"]:
        if attribute["key"] == key:
            value = attribute["value"]
            return next(iter(value.values()))
    return None


def test_the_daemon_counts_and_logs_every_turn(logs, tmp_path):
    """`--once` over the logs: one log line per turn and counters that match the scenarios."""
    state_dir, _ = logs
    textfile = tmp_path / "turns.prom"
    done = run_once("--state-dir", str(state_dir), "--from-start", "--otlp-endpoint", "none",
                    "--textfile", str(textfile))
    assert done.returncode == 0, done.stderr
    expected = [turn for scenario in SCENARIOS for turn in scenario.turns]
    lines = re.findall(r"fusion fusion-\S+ pattern=(\S+) phases=(\d+) .*", done.stderr)
    assert Counter(lines) == Counter((t.pattern, str(len(t.legs))) for t in expected)
    text = textfile.read_text()
    turns = samples(text, "hydrafusion_turns_total")
    assert sum(turns.values()) == len(expected)
    for outcome, count in Counter(t.outcome for t in expected).items():
        assert sum(v for k, v in turns.items() if ("outcome", outcome) in k) == count
    legs = samples(text, "hydrafusion_legs_total")
    verdicts = Counter(leg.verdict or "none" for t in expected for leg in t.legs)
    for verdict, count in verdicts.items():
        assert sum(v for k, v in legs.items() if ("verdict", verdict) in k) == count
    committed = sum(v for k, v in legs.items() if ("committed", "true") in k)
    assert committed == len(expected)
    failures = samples(text, "hydrafusion_route_failures_total")
    assert failures == {(("reason", "transport"),): 1.0}
    for drift in ("unknown_fields", "missing_fields", "unknown_events", "malformed_lines"):
        assert sum(samples(text, f"hydrafusion_tailer_{drift}_total").values()) == 0


def test_doctor_sees_no_drift_in_the_clis_logs(logs):
    state_dir, sessions = logs
    done = subprocess.run([sys.executable, "-m", "tailer", "doctor", "--state-dir",
                           str(state_dir)], cwd=ROOT, env=tailer_env(), capture_output=True,
                          text=True, timeout=60)
    assert re.search(rf"^  {re.escape(VERSION)}\s+{len(sessions)}$", done.stdout, re.M)
    turns = sum(len(scenario.turns) for scenario in SCENARIOS) - 1  # the route failure
    assert re.search(rf"turns \(distinct fusion ids\)\s+{turns}$", done.stdout, re.M)
    for heading in ("Fusion event types the tailer does not know", "Unknown fields on",
                    "Required fields missing", "Malformed lines"):
        assert re.search(rf"^{heading}[^\n]*\n  none$", done.stdout, re.M), heading


@pytest.mark.parametrize("name", FUSION_NAMES + ["plain", "plain_tool"])
def test_each_calls_credits_are_what_the_fake_backend_charged(logs, name):
    """`copilotUsage.totalNanoAiu`, never `cost` (the model's premium-request multiplier);
    unknown where the fake gave none (`aiCreditsStatus: unavailable`), never 0."""
    unpriced = BY_NAME[name].unpriced
    for turn in turns_of(logs, name):
        assert turn.calls
        for call in turn.calls:
            assert call.credits_known is (call.model not in unpriced)
            if call.credits_known:
                assert call.usage.nano_aiu == backend.nano_aiu(call.model)


@pytest.mark.parametrize("name", FUSION_NAMES)
def test_each_legs_calls_are_its_requests(logs, name):
    """session.usage_record: one call per request a leg made, each tied to its leg."""
    for turn in turns_of(logs, name):
        for leg in turn.legs:
            calls = turn.leg_calls(leg)
            assert len(calls) == leg.usage.request_count
            assert {call.model for call in calls} <= {leg.model}
            assert sum(call.usage.input_tokens for call in calls) == leg.usage.input_tokens


def test_tools_belong_to_the_leg_that_ran_them(logs):
    (turn,) = turns_of(logs, "cascade_repair_tool")
    (tool,) = turn.tools
    repair = next(leg for leg in turn.legs if leg.phase_kind == "repair")
    assert (tool.name, tool.success, tool.phase_id) == ("bash", True, repair.phase_id)
    (ordinary,) = turns_of(logs, "plain_tool")
    (tool,) = ordinary.tools
    assert (tool.name, tool.success, tool.phase_id) == ("bash", True, None)
    assert [call.finish_reason for call in ordinary.calls] == ["tool_calls", "stop"]


def test_the_recorded_sessions_are_those_of_the_pinned_version(live):
    """Same fusion events in the same order; a version bump without re-recording fails."""
    state_dir, sessions = _recorded()
    assert sorted(sessions) == sorted(NAMES)
    for name in NAMES:
        kept = _fusion_types(state_dir / sessions[name] / "events.jsonl")
        fresh = _fusion_types(live.state_dir / live.sessions[name] / "events.jsonl")
        assert kept == fresh, name


def _fusion_types(log: Path) -> list[str]:
    types = [json.loads(line)["type"] for line in log.read_text().splitlines()]
    return [t for t in types if "fusion" in t or t in ("session.start", "session.resume")]


def test_the_recorded_sessions_hold_no_content():
    """Scrubbed: no prompt, answer, tool output, path or router hint survived."""
    state_dir, _ = _recorded()
    for log in state_dir.glob("*/events.jsonl"):
        text = log.read_text()
        for needle in ("REALCLI-CANARY", "say hello", "/tmp", "workspace", "Using Cascade",
                       "gho_realcliDummyToken", '"content"', '"arguments"', '"hint"'):
            assert needle not in text, (log, needle)
        for line in text.splitlines():
            event = json.loads(line)
            if event["type"] in ("user.message", "assistant.message", "system.message"):
                assert event["data"] == {}, log
            if event["type"].startswith("tool."):
                assert not {"arguments", "result", "toolTitle", "shellToolInfo",
                            "shellExecution", "toolTelemetry"} & set(event["data"]), log
    ledger = (record.data_dir(VERSION) / record.LEDGER).read_text()
    ledger += (record.data_dir(VERSION) / record.STORE_SCHEMA).read_text()
    for needle in ("REALCLI-CANARY", "say hello", "Scenario ", "/tmp", "/workspace",
                   "gho_realcliDummyToken", "INSERT INTO sessions", "INSERT INTO turns",
                   "INSERT INTO search_index"):
        assert needle not in ledger, needle
    for export in record.recorded_otel(VERSION).glob("*.jsonl"):
        text = export.read_text()
        assert record.CONTENT_MARK in text  # where the CLI had captured content
        for needle in ("say hello", "Scenario ", "/tmp", "workspace", "gho_realcliDummyToken",
                       backend.ANSWER_TEXT.replace("REALCLI-CANARY", "").strip()):
            assert needle not in text, (export, needle)


@pytest.fixture(params=["recorded", "live"])
def home(request, tmp_path) -> tuple[Path, dict[str, str]]:
    """(state dir with the CLI's ledger beside it, scenario -> session id): a copy of the
    recorded logs beside a database made of the recorded ledger, or a fresh run's own home."""
    if request.param == "recorded":
        state_dir, sessions = _recorded()
        shutil.copytree(state_dir, tmp_path / "session-state")
        record.ledger_database(VERSION, tmp_path)
        return tmp_path / "session-state", sessions
    outcome = request.getfixturevalue("live")
    return outcome.state_dir, outcome.sessions


def test_every_scenarios_log_matches_the_clis_own_ledger(home):
    """The CLI writes a row per model call to session-store.db: the report and doctor find
    each session's calls, tokens and credits there as in its log."""
    state_dir, sessions = home
    done = subprocess.run([sys.executable, "-m", "tailer", "report", "--state-dir",
                           str(state_dir), "--format", "json"], cwd=ROOT, env=tailer_env(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    ledger = json.loads(done.stdout)["ledger"]
    assert (ledger["status"], ledger["sessions_checked"]) == ("checked", len(sessions))
    assert ledger["differ"] == [] and ledger["only_in_ledger"] == [] and not ledger["not_in_ledger"]
    # The fake backend charges every call but the `unpriced` scenario's.
    assert ledger["credits_not_compared"] == ("unpriced" in sessions)
    done = subprocess.run([sys.executable, "-m", "tailer", "doctor", "--state-dir",
                           str(state_dir)], cwd=ROOT, env=tailer_env(), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout
    assert f"{len(sessions)} sessions checked against the CLI's ledger, all match" in done.stdout


def test_the_recorded_ledger_is_the_pinned_versions(live, tmp_path):
    """The table of calls as the installed CLI makes it, the same figures per scenario, and
    the same layout of the whole file: a version bump without re-recording fails here."""
    database = live.state_dir.parent / "session-store.db"
    recorded = (record.data_dir(VERSION) / record.LEDGER).read_text()
    fresh = record.ledger_sql(database)
    assert fresh.partition(";")[0] == recorded.partition(";")[0]
    assert record.store_schema(database) == \
        (record.data_dir(VERSION) / record.STORE_SCHEMA).read_text()
    _, sessions = _recorded()
    kept = record.ledger_database(VERSION, tmp_path)
    for name in NAMES:
        assert _ledger_figures(kept, sessions[name]) == _ledger_figures(database, live.sessions[name]), name


def _ledger_figures(database: Path, session_id: str) -> list[tuple]:
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        return connection.execute(
            "SELECT model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, "
            "total_nano_aiu FROM assistant_usage_events WHERE session_id = ? ORDER BY id",
            (session_id,)).fetchall()
    finally:
        connection.close()


def test_the_clis_store_holds_the_prompts_and_no_output_shows_them(live, tmp_path):
    """The real session-store.db keeps each prompt's text (its `sessions`, `turns` and
    search index): the report in every format and doctor read beside it and show none."""
    database = live.state_dir.parent / "session-store.db"
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        texts = "\n".join(str(row) for table in ("sessions", "turns", "search_index_content")
                          for row in connection.execute(f"SELECT * FROM {table}"))
    finally:
        connection.close()
    workspace = str(live.state_dir.parent.parent / "workspace")  # the CLI's cwd
    assert "say hello" in texts and workspace in texts  # there: the check below can fail
    page = tmp_path / "page.html"
    outputs = []
    for options in ([], ["--format", "json"], ["--format", "csv"], ["--html", str(page)]):
        done = subprocess.run([sys.executable, "-m", "tailer", "report", "--state-dir",
                               str(live.state_dir), *options], cwd=ROOT, env=tailer_env(),
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout + done.stderr)
    outputs.append(page.read_text())
    outputs.append(subprocess.run([sys.executable, "-m", "tailer", "doctor", "--state-dir",
                                   str(live.state_dir)], cwd=ROOT, env=tailer_env(),
                                  capture_output=True, text=True, timeout=60).stdout)
    assert "checked against the CLI's ledger" in outputs[0]
    for text in outputs:
        for needle in ("say hello", "Scenario ", workspace):
            assert needle not in text


def test_doctor_finds_the_installed_clis_schema_and_no_drift(live, tmp_path):
    """The whole schema file of the pinned version, found where the CLI unpacked it."""
    assert live.schema is not None and live.schema.is_file()
    environ = tailer_env(XDG_CACHE_HOME=str(driver.xdg_cache(VERSION)), HOME=str(tmp_path))
    done = subprocess.run([sys.executable, "-m", "tailer", "doctor", "--cli"], cwd=ROOT,
                          env=environ, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"Copilot CLI {VERSION} event schema: {live.schema}")


def test_the_recorded_schema_is_the_installed_ones_fusion_and_usage_part(live, tmp_path):
    record.keep_schema(live.schema, tmp_path)
    assert (tmp_path / record.SCHEMA).read_text() == \
        (record.data_dir(VERSION) / record.SCHEMA).read_text()


@pytest.fixture(params=["recorded", "live"])
def telemetry(request) -> tuple[Path, dict[str, str], Path]:
    """(state dir, scenario -> session id, the CLI's own export folder)."""
    if request.param == "recorded":
        state_dir, sessions = _recorded()
        return state_dir, sessions, record.recorded_otel(VERSION)
    outcome = request.getfixturevalue("live")
    return outcome.state_dir, outcome.sessions, outcome.otel_dir


def test_the_clis_own_telemetry_is_sent_on_without_its_content_and_linked_both_ways(
        telemetry, tmp_path):
    """`run --once --cli-otel` over the sessions and the export files the CLI wrote, with
    content capture on: every span and metric reaches the collector as valid OTLP, none of
    the content does, and each prompt's CLI root and our turn's root link to each other."""
    from otlp_sink import OtlpSink, plain_attributes
    from tailer.outputs.spans import span_id, trace_id

    state_dir, sessions, otel_dir = telemetry
    written = [json.loads(line) for export in otel_dir.glob("*.jsonl")
               for line in export.read_text().splitlines()]
    raw = json.dumps(written)
    assert backend.ANSWER_TEXT in raw or record.CONTENT_MARK in raw  # content to drop
    with OtlpSink() as sink:
        done = run_once("--state-dir", str(state_dir), "--from-start", "--otlp-endpoint",
                        sink.endpoint, "--cli-otel", str(otel_dir),
                        "--checkpoint", str(tmp_path / "checkpoint.json"))
        assert done.returncode == 0, done.stderr
        spans = sink.spans()
        bodies = b"\n".join(sink.raw_bodies + sink.metric_bodies).decode()
    for needle in ("REALCLI-CANARY", "say hello", "Scenario ", "/tmp", "workspace",
                   backend.ANSWER_TEXT):
        assert needle not in bodies
    cli_spans = [span for span in spans if span["resource"]["service.name"] == "github-copilot"]
    assert len(cli_spans) == sum(1 for r in written if r["type"] == "span")
    assert sum(len(request.resource_metrics) for request in sink.metric_requests) == \
        sum(1 for r in written if r["type"] == "metric")
    # The CLI's roots: one per prompt, each linked to our turn of that prompt and back.
    cli_roots = {span["traceId"]: span for span in cli_spans if "parentSpanId" not in span}
    ours = {span["traceId"]: span for span in spans
            if "parentSpanId" not in span and span["resource"]["service.name"] == "hydrafusion"}
    prompts = sum(len(scenario.prompts) for scenario in SCENARIOS)
    assert {span["name"] for span in cli_roots.values()} == {"invoke_agent"}
    assert len(cli_roots) == len(ours) == prompts
    by_session = Counter()
    for trace, root in cli_roots.items():
        (link,) = root["links"]
        turn = ours[link["traceId"]]
        session = plain_attributes(root["attributes"])["gen_ai.conversation.id"]
        assert plain_attributes(turn["attributes"])["gen_ai.conversation.id"] == session
        assert link["spanId"] == turn["spanId"]
        fusion_id = plain_attributes(turn["attributes"]).get("hydrafusion.fusion_id")
        if fusion_id is not None:  # our ids, derived: the CLI's side can name them early
            assert (link["traceId"], link["spanId"]) == (
                trace_id(session, fusion_id), span_id(session, fusion_id, "turn"))
        (back,) = turn["links"]
        assert (back["traceId"], back["spanId"]) == (trace, root["spanId"])
        by_session[session] += 1
    assert by_session == Counter({sessions[s.name]: len(s.prompts) for s in SCENARIOS})


def test_the_status_line_shows_the_turn_in_the_real_clis_footer(tmp_path):
    """Copilot CLI run interactively in tmux, offline, with `statusline --install` as its
    footer's command: after a cascade, the footer's last row is our line for that turn (its
    legs as the fake routed and judged them); the JSON the CLI piped is what the tests take
    for it (tests/data/realcli/<version>/statusline-input.json), and the prompt the CLI puts
    in it as the session's name is nowhere in the line."""
    prompt = "REALCLI-CANARY prompt: say hello"
    try:
        run = footer.run_footer(VERSION, tmp_path, BY_NAME["cascade_accept"].prompts[0].plan, prompt,
                                seen="HydraFusion last cascade")
    except driver.Unavailable as error:
        pytest.skip(f"Copilot CLI {VERSION} cannot be installed: {error}")
    except footer.NoTmux as error:
        pytest.skip(str(error))
    screen = run.screens[0]
    rows = [row.rstrip() for row in screen.splitlines() if row.strip()]
    assert rows[-1].startswith("HydraFusion last cascade: primary 1.1-flash"), screen
    assert "judge 5.6-sol accept" in rows[-1] and " cr, review " in rows[-1], rows[-1]
    assert "CANARY" not in rows[-1] and len(rows[-1]) <= footer.COLUMNS
    assert "--then" in run.setting["command"] and run.setting["refreshInterval"] == 1
    sample = json.loads((ROOT / "tests" / "data" / "realcli" / VERSION / "statusline-input.json").read_text())
    assert run.piped is not None and set(run.piped) == set(sample)
    assert {key: type(value) for key, value in run.piped.items() if value is not None} == \
        {key: type(value) for key, value in sample.items() if value is not None and run.piped.get(key) is not None}
    assert Path(run.piped["transcript_path"], "events.jsonl").is_file()
    assert "CANARY" in run.piped["session_name"]  # the CLI's: never printed
