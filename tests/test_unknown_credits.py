"""Unknown is unknown: a model call whose credits the CLI did not give is counted as unknown,
never as 0, in every output (docs/REPORT.md, "Unknown credits"; docs/METRICS.md).

First on the session the real CLI 1.0.102 wrote when the API's answers carried no
`copilot_usage` (tests/data/realcli's `unpriced` scenario: a cascade whose judge's credits are
unavailable, a single turn and an ordinary prompt whose every call's are): the report's
table, JSON, CSVs and page, the daemon's metrics, log lines and spans. Then, over generated
sessions with any share of such calls, that every total is the sum of the known calls'
credits and every count of calls left out is the number of calls the files mark unavailable.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings, strategies as st

from chromium import Browser, needs_chromium
from exposition_helpers import samples
from realcli import backend, record
from realcli.scenarios import BY_NAME, FLASH, SOL, SONNET, TERRA
from report_helpers import run_report, wanted_turns
from sessiongen import START, SessionWriter
from tailer.copilot.files import session_logs
from tailer.outputs.exposition import Registry
from tailer.outputs.metrics import Metrics
from tailer.outputs.spans import turn_spans
from tailer.report.figures import snapshot
from tailer.report.checks import check_figures
from tailer.report.rows import turn_row
from tailer.report.read import Selection, SessionReader
from tailer.report.text import render_calls_csv, render_csv, render_json
from tailerproc import ROOT, run_once

VERSION = (ROOT / "tests" / "realcli" / "VERSION").read_text().strip()
SCHEMA = json.loads((ROOT / "docs" / "report.schema.json").read_text())
UNPRICED = BY_NAME["unpriced"]


@pytest.fixture(scope="module")
def unpriced(tmp_path_factory) -> Path:
    """A state folder holding the real CLI's `unpriced` session alone."""
    state_dir, sessions = record.recorded(VERSION)
    state = tmp_path_factory.mktemp("unpriced") / "session-state"
    shutil.copytree(state_dir / sessions["unpriced"], state / sessions["unpriced"])
    return state


def charged(model: str) -> float:
    """What the fake backend charged a call of `model` (the scenario's other models)."""
    assert model not in UNPRICED.unpriced
    return backend.nano_aiu(model) / 1e9


def test_the_real_clis_unavailable_credits_are_unknown_in_the_json(unpriced):
    done = run_report("--state-dir", str(unpriced), "--format", "json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    jsonschema.validate(document, SCHEMA)
    cascade, single = (turn for turn in document["turns"] if turn["kind"] == "fusion")
    (ordinary,) = (turn for turn in document["turns"] if turn["kind"] == "ordinary")
    known = charged(FLASH) + charged(SONNET)
    assert (cascade["credits"], cascade["unknown_credit_calls"]) == (pytest.approx(known), 1)
    assert [(leg["model"], leg["credits"], leg["unknown_credit_calls"]) for leg in cascade["legs"]] == [
        (FLASH, charged(FLASH), 0), (SOL, None, 1), (SONNET, charged(SONNET), 0)]
    assert [call["credits"] for call in cascade["model_calls"]] == [charged(FLASH), None, charged(SONNET)]
    for turn in (single, ordinary):  # every call unknown: nothing of the turn is known, not 0
        assert (turn["credits"], turn["unknown_credit_calls"]) == (None, 1)
        assert [call["credits"] for call in turn["model_calls"]] == [None]
    assert single["legs"][0]["model"] == TERRA and single["legs"][0]["credits"] is None
    head = document["headline"]
    assert (head["credits"], head["unknown_credit_calls"], head["calls"]) == (pytest.approx(known), 2, 4)
    kinds = {kind["kind"]: kind for kind in document["by_kind"]}
    assert (kinds["fusion"]["credits"], kinds["fusion"]["unknown_credit_calls"]) == (pytest.approx(known), 2)
    assert (kinds["ordinary"]["credits"], kinds["ordinary"]["unknown_credit_calls"]) == (None, 1)
    assert kinds["fusion"]["median_credits"] is None  # no fusion turn's credits are all known
    models = {use["name"]: use for use in document["by_model"]}
    assert {name: (use["credits"], use["unknown_credit_calls"], use["calls"])
            for name, use in models.items()} == {
        FLASH: (charged(FLASH), 0, 1), SONNET: (charged(SONNET), 0, 1), SOL: (None, 2, 2),
        TERRA: (None, 1, 1)}
    assert (models[SOL]["fusion"]["credits"], models[SOL]["ordinary"]["credits"]) == (None, None)
    patterns = {pattern["pattern"]: pattern for pattern in document["by_pattern"]}
    assert patterns["single"]["credits"] is None and patterns["single"]["median_credits"] is None
    [day] = document["by_day"]
    assert day["credits_by_model"][TERRA] is None and day["unknown_credit_calls"] == 2
    # The CLI's shutdown says 0 for the models it had no credits for: not compared, not a
    # difference, and our side of them is unknown.
    assert all(check["agrees"] for check in document["reconciliation"])


def test_the_real_clis_unavailable_credits_are_unknown_in_the_table(unpriced):
    done = run_report("--state-dir", str(unpriced), "--timezone", "UTC", env=None)
    assert done.returncode == 0, done.stderr
    table = done.stdout
    known = f"{charged(FLASH) + charged(SONNET):.2f}"
    assert f"{known} (2 calls unknown)" in table
    assert "credits leave out 3 calls whose credits the CLI did not give" in table
    turns = {line.split()[2]: line for line in table.splitlines()
             if re.match(r"  \d\d:\d\d:\d\d  ", line)}
    assert turns["cascade"].split()[3] == ">=" + known
    assert turns["single"].split()[3] == "-"
    assert turns["ordinary"].split()[3] == "-"
    kinds = {line.split()[0]: line.split() for line in table.splitlines()
             if line.startswith(("fusion ", "ordinary "))}
    assert kinds["ordinary"][2:4] == ["-", "-"] and kinds["fusion"][2] == ">=" + known
    models = {line.split()[0]: line.split() for line in table.splitlines()
              if line.startswith((TERRA, SOL))}
    assert models[TERRA][1:4] == ["1", "1", "-"] and models[SOL][3] == "-"
    assert "0.00" not in "".join(turns.values())


def test_the_real_clis_unavailable_credits_are_empty_cells_in_the_csvs(unpriced):
    legs = run_report("--state-dir", str(unpriced), "--format", "csv")
    calls = run_report("--state-dir", str(unpriced), "--format", "csv-calls")
    assert legs.returncode == calls.returncode == 0, legs.stderr + calls.stderr
    rows = list(csv.DictReader(io.StringIO(legs.stdout)))
    assert {(row["model"], row["credits"], row["unknown_credit_calls"]) for row in rows} == {
        (FLASH, repr(charged(FLASH)), "0"), (SOL, "", "1"), (SONNET, repr(charged(SONNET)), "0"),
        (TERRA, "", "1"), ("", "", "")}  # the last: the ordinary prompt, which has no leg
    by_model = {}
    for row in csv.DictReader(io.StringIO(calls.stdout)):
        by_model.setdefault(row["model"], set()).add(row["credits"])
    assert by_model == {FLASH: {repr(charged(FLASH))}, SONNET: {repr(charged(SONNET))},
                        SOL: {""}, TERRA: {""}}
    groups = run_report("--state-dir", str(unpriced), "--by", "day", "--format", "csv")
    [day] = list(csv.DictReader(io.StringIO(groups.stdout)))
    # Every prompt's: the ordinary prompt's call on SOL leaves out a third call; the credits
    # of HydraFusion's turns apart, of which two.
    assert (float(day["credits"]), day["unknown_credit_calls"]) == (
        pytest.approx(charged(FLASH) + charged(SONNET)), "3")
    assert (float(day["fusion_credits"]), day["ordinary_credits"]) == (
        pytest.approx(charged(FLASH) + charged(SONNET)), "")


def test_the_real_clis_unavailable_credits_keep_their_calls_and_tokens_on_the_page(unpriced, tmp_path):
    page = tmp_path / "report.html"
    done = run_report("--state-dir", str(unpriced), "--html", str(page))
    assert done.returncode == 0, done.stderr
    html = page.read_text()
    assert "No credits." not in html
    terra = re.search(r'<tr data-name="gpt-5.6-terra" data-credits="" data-unknown="1">(.*?)</tr>', html)
    assert terra, "the model of unknown credits lost its row"
    cells = re.findall(r"<td>([^<]*)</td>", terra.group(1))
    tokens = dict(re.findall(r'<td data-tokens="(\w+)">([^<]*)</td>', terra.group(1)))
    # legs, calls, credits, share; tokens (input uncached: 1,200 less 200 read from the cache)
    assert cells[:3] == ["1", "1", "–"] and cells[-1] == "–"
    assert (tokens["input_tokens"], tokens["output_tokens"], tokens["cache_read_tokens"]) == (
        "1,000", "40", "200"), tokens
    assert re.search(r'data-figure="credits" data-value="2.5"><div class="value">2.50</div>.*?'
                     r"2 of unknown credits left out", html)
    data = json.loads(re.search(r'<script type="application/json" id="report-data">(.*?)</script>',
                                html).group(1))
    turns = {turn["p"]: turn for turn in data["turns"]}
    assert (turns["single"]["c"], turns["single"]["u"]) == (None, 1)
    assert (turns["ordinary"]["c"], turns["ordinary"]["calls"][0]["c"]) == (None, None)
    assert [leg["c"] for leg in turns["cascade"]["l"]] == [charged(FLASH), None, charged(SONNET)]


# The turn list's credits and each opened turn's facts, as the page's script drew them.
READ_TURNS = """(() => {
  const rows = Array.from(document.querySelectorAll("tr.turn"));
  const cells = rows.map((row) => [row.children[2].textContent, row.children[4].textContent]);
  rows.forEach((row) => row.click());
  const facts = Array.from(document.querySelectorAll("p.facts")).map((p) => p.textContent);
  const titles = Array.from(document.querySelectorAll("svg.waterfall rect.leg title, svg.waterfall rect.call title"))
    .map((title) => title.textContent);
  return {cells, facts, titles};
})()"""


@needs_chromium
def test_the_pages_script_draws_unknown_credits_as_unknown(unpriced, tmp_path):
    page = tmp_path / "report.html"
    assert run_report("--state-dir", str(unpriced), "--html", str(page)).returncode == 0
    with Browser(tmp_path / "profile") as browser:
        opened = browser.open(page.as_uri())
        seen = opened.evaluate(READ_TURNS)
        assert opened.problems == []
    known = f"{charged(FLASH) + charged(SONNET):.2f}"
    assert sorted(seen["cells"]) == sorted([["cascade", "≥" + known], ["single", "–"], ["ordinary", "–"]])
    assert sum(" · – credits · " in fact for fact in seen["facts"]) == 2
    assert sum(f" · ≥{known} credits · " in fact for fact in seen["facts"]) == 1
    assert sum(", – credits, " in title for title in seen["titles"]) == 5  # 2 legs, 3 calls
    assert not any("0.00 credits" in title or "0.000 credits" in title for title in seen["titles"])


def test_the_real_clis_unavailable_credits_add_no_credits_to_the_metrics(unpriced, tmp_path):
    textfile = tmp_path / "metrics.prom"
    done = run_once("--state-dir", str(unpriced), "--from-start", "--idle-timeout", "0",
                    "--otlp-endpoint", "none", "--textfile", str(textfile),
                    "--checkpoint", str(tmp_path / "checkpoint.json"))
    assert done.returncode == 0, done.stderr
    text = textfile.read_text()
    assert samples(text, "hydrafusion_unknown_credit_calls_total") == {
        (("kind", "fusion"), ("model", SOL), ("pattern", "cascade")): 1,
        (("kind", "fusion"), ("model", TERRA), ("pattern", "single")): 1,
        (("kind", "ordinary"), ("model", SOL), ("pattern", "ordinary")): 1}
    credits = {dict(labels)["model"]: value
               for labels, value in samples(text, "hydrafusion_aiu_total").items()}
    assert credits == {FLASH: charged(FLASH), SONNET: charged(SONNET)}  # no 0 for SOL, TERRA
    prompts = {dict(labels)["kind"]: value
               for labels, value in samples(text, "hydrafusion_prompt_aiu_total").items()}
    assert prompts == {"fusion": pytest.approx(charged(FLASH) + charged(SONNET))}
    lines = done.stderr
    assert re.search(rf"pattern=cascade .* aiu>={charged(FLASH) + charged(SONNET):.2f}", lines)
    assert re.search(r"pattern=single .* aiu=unknown", lines)
    assert re.search(r"ordinary \S+ model=gpt-5.6-sol .* aiu=unknown", lines)


def test_the_real_clis_unavailable_credits_leave_no_credits_on_the_spans(unpriced):
    reader = SessionReader()
    turns = {turn.pattern if turn.kind == "fusion" else turn.kind: turn
             for turn in wanted_turns(session_logs(unpriced), Selection(), reader)}
    for pattern, unknown in (("cascade", 1), ("single", 1), ("ordinary", 1)):
        root, *others = [json.loads(span.json) for span in turn_spans(turns[pattern])]
        attributes = {a["key"]: a["value"] for a in root["attributes"]}
        assert "hydrafusion.aiu" not in attributes and "hydrafusion.review_aiu" not in attributes
        assert attributes["hydrafusion.unknown_credit_calls"] == {"intValue": str(unknown)}
    legs = [json.loads(span.json) for span in turn_spans(turns["cascade"])][2:5]
    priced = [any(a["key"] == "hydrafusion.aiu" for a in leg["attributes"]) for leg in legs]
    assert priced == [True, False, True]  # the judge's credits are unknown


# -- Over generated sessions: totals are the known calls' sums, counts the unknown calls ------

KINDS = ("single", "accept", "reject", "critique", "revision", "degraded", "incomplete",
         "route_failed", "ordinary")


def write(writer: SessionWriter, kind: str) -> None:
    {
        "single": lambda: writer.single("gpt-5.6-sol"),
        "accept": lambda: writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol"),
        "reject": lambda: writer.cascade("mai-code-1.1-flash", "gpt-5.6-sol", verdict="reject",
                                         repair_model="claude-sonnet-4.6"),
        "critique": lambda: writer.critique("gpt-5.6-sol", ["claude-sonnet-4.6", "gemini-3.1-pro"]),
        "revision": lambda: writer.critique("gpt-5.6-sol", ["claude-sonnet-4.6"],
                                            revision_model="gpt-5.6-sol"),
        "degraded": lambda: writer.degraded("mai-code-1.1-flash", "gpt-5.6-sol"),
        "incomplete": lambda: writer.incomplete("mai-code-1.1-flash", "gpt-5.6-sol"),
        "route_failed": lambda: writer.route_failed("gpt-5.6-mini"),
        "ordinary": lambda: writer.ordinary("claude-sonnet-4.6", calls=3),
    }[kind]()


def known(nano_aiu: int, unknown: int) -> float | None:
    """What a figure of credits must be: the known credits, None when they are none beside
    a call of unknown credits."""
    return None if unknown and not nano_aiu else nano_aiu / 1e9


@settings(max_examples=40, deadline=None)
@given(sessions=st.lists(st.tuples(st.sampled_from((0.0, 0.25, 0.5, 0.8, 1.0)),
                                   st.lists(st.sampled_from(KINDS), min_size=1, max_size=6)),
                         min_size=1, max_size=3),
       seed=st.integers(0, 2**32))
def test_every_total_is_the_known_calls_sum_and_counts_the_calls_left_out(sessions, seed):
    truth = []
    with tempfile.TemporaryDirectory() as state:
        for number, (unpriced, kinds) in enumerate(sessions):
            writer = SessionWriter(f"gen-{seed:08x}-{number}", START, unpriced=unpriced)
            for kind in kinds:
                write(writer, kind)
            writer.shutdown()
            writer.write(Path(state))
            truth += writer.expected
        reader = SessionReader()
        turns = list(wanted_turns(session_logs(Path(state)), Selection(), reader))
    snap = snapshot([turn_row(turn, timezone.utc) for turn in turns], now=datetime.now(timezone.utc),
                    tz=timezone.utc, checks=list(map(check_figures, reader.reconciliations)))
    rows = {row.fusion_id: row for row in snap.turns}
    assert len(rows) == len(truth)
    for expected in truth:
        row = rows[expected.fusion_id]
        nano = expected.nano_aiu if expected.kind == "ordinary" else sum(leg.nano_aiu for leg in expected.legs)
        assert (row.credits, row.unknown_credit_calls) == (
            pytest.approx(known(nano, expected.unknown_calls)), expected.unknown_calls)
        for leg, want in zip(row.legs, expected.legs):
            assert (leg.credits, leg.unknown_credit_calls) == (
                pytest.approx(known(want.nano_aiu, want.unknown_calls)), want.unknown_calls)
        assert sum(call.credits is None for call in row.model_calls) == expected.unknown_calls
    fusion = [t for t in truth if t.kind != "ordinary"]
    fusion_nano = sum(leg.nano_aiu for t in fusion for leg in t.legs)
    fusion_unknown = sum(t.unknown_calls for t in fusion)
    head = snap.headline
    assert (head.credits, head.unknown_credit_calls) == (
        pytest.approx(known(fusion_nano, fusion_unknown)), fusion_unknown)
    for kind in snap.by_kind:
        mine = [t for t in truth if t.kind == kind.kind]
        assert (kind.credits, kind.unknown_credit_calls) == (
            pytest.approx(known(sum(t.nano_aiu for t in mine), sum(t.unknown_calls for t in mine))),
            sum(t.unknown_calls for t in mine))
    assert sum(use.unknown_credit_calls for use in snap.by_model) == sum(t.unknown_calls for t in truth)
    document = json.loads(b"".join(render_json(snap)))
    assert document["headline"]["unknown_credit_calls"] == fusion_unknown
    empty = sum(row["credits"] == "" for row in csv.DictReader(io.StringIO(render_calls_csv(snap))))
    assert empty == sum(t.unknown_calls for t in truth)
    legs = list(csv.DictReader(io.StringIO(render_csv(snap))))
    assert sum(int(row["unknown_credit_calls"] or 0) for row in legs) == fusion_unknown
    # The daemon's metrics of the same turns: credits of the known calls, the others counted.
    metrics = Metrics(Registry())
    for turn in turns:
        metrics.count_turn(turn)
    text = metrics.registry.render_final()
    assert sum(samples(text, "hydrafusion_aiu_total").values()) == pytest.approx(fusion_nano / 1e9)
    unknown = samples(text, "hydrafusion_unknown_credit_calls_total")
    for kind in ("fusion", "fallback", "ordinary"):
        assert sum(value for labels, value in unknown.items() if ("kind", kind) in labels) == sum(
            t.unknown_calls for t in truth if t.kind == kind)
