"""The HTML report, opened in headless Chromium: what it shows must be what the data holds."""

import os
import re
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from chromium import Browser, needs_chromium
from sessiongen import START, SessionWriter, every_pattern, whole_session
from tailer import records
from tailer.report import checks as report_checks, figures as report_figures, rows as report_rows
from tailer.report import html as report_html
from tailer.copilot import event_values
from tailer.copilot.files import session_logs
from tailer.report.read import Selection, SessionReader
from report_helpers import run_report, wanted_turns
from tailerproc import ROOT

NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)
FIGURES = ("turns", "credits", "compound_rate", "judge_rejection_rate", "review_share",
           "cache_share")
# Everything the page holds, as the script sees it.
READ_PAGE = """(() => {
  const figures = {};
  document.querySelectorAll("[data-figure]").forEach((card) => {
    figures[card.dataset.figure] = card.dataset.value === "" ? null : Number(card.dataset.value);
  });
  const shares = {};
  document.querySelectorAll("tr[data-credits]").forEach((row) => {
    shares[row.dataset.name] = (shares[row.dataset.name] || 0) + Number(row.dataset.credits);
  });
  const kinds = {};
  document.querySelectorAll("td[data-kind]").forEach((cell) => {
    kinds[cell.dataset.kind + " " + cell.dataset.row] = cell.textContent;
  });
  const checks = document.querySelector("p.checks");
  return {figures, shares, kinds, rows: document.querySelectorAll("tr.turn").length,
          checked: checks && Number(checks.dataset.checked),
          differ: checks && Number(checks.dataset.differ),
          count: document.getElementById("turn-count").textContent,
          dayBars: document.querySelectorAll("svg.chart rect.day-hit").length};
})()"""
OPEN_ALL = """(() => {
  document.querySelectorAll("tr.turn").forEach((row) => row.click());
  return Array.from(document.querySelectorAll("svg.waterfall")).map((svg) => ({
    fusion: svg.dataset.fusion,
    legs: svg.querySelectorAll("rect.leg").length,
    calls: svg.querySelectorAll("rect.call").length,
    tools: svg.querySelectorAll("rect.tool").length,
    replayed: svg.querySelectorAll("rect.tool.replayed").length,
    committed: svg.querySelectorAll("rect.leg.committed").length,
    failed: svg.querySelectorAll("rect.leg.failed").length,
    verdicts: Array.from(svg.querySelectorAll("text.verdict")).map((t) => t.textContent),
  }));
})()"""


def snapshot_of(state_dir):
    reader = SessionReader()
    logs = session_logs(state_dir)
    turns = [report_rows.turn_row(turn, timezone.utc)
             for turn in wanted_turns(logs, Selection(), reader)]
    return report_figures.snapshot(turns, now=NOW, tz=timezone.utc, skipped=reader.skipped(),
                    checks=list(map(report_checks.check_figures, reader.reconciliations)))


def write_page(snap, path):
    path.write_text(report_html.render(snap), encoding="utf-8")
    return path.as_uri()


def test_the_page_needs_nothing_from_outside(tmp_path):
    every_pattern("outside").write(tmp_path / "state")
    page = report_html.render(snapshot_of(tmp_path / "state"))
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert not re.search(r"""\s(src|href|srcset|action)\s*=""", page)
    assert not re.search(r"@import|url\(", page)
    assert set(re.findall(r"https?://[^\s\"']+", page)) <= {"http://www.w3.org/2000/svg"}


@needs_chromium
def test_the_page_shows_the_figures_and_a_waterfall_per_turn(tmp_path):
    state = tmp_path / "state"
    every_pattern("page").write(state)
    whole_session("whole", totals_off_by=5).write(state)
    for session in session_logs(ROOT / "fixtures").values():
        (state / session.parent.name).mkdir()
        (state / session.parent.name / "events.jsonl").write_bytes(session.read_bytes())
    snap = snapshot_of(state)
    url = write_page(snap, tmp_path / "report.html")
    with Browser(tmp_path / "profile") as browser:
        page = browser.open(url)
        seen = page.evaluate(READ_PAGE)
        head = snap.headline
        for name in FIGURES:
            assert seen["figures"][name] == pytest.approx(getattr(head, name), abs=1e-9), name
        by_model = {spend.name: spend.credits for spend in snap.by_model}
        by_kind = {spend.name: spend.credits for spend in snap.by_leg_kind}
        for name, credits in seen["shares"].items():
            assert credits == pytest.approx(by_model.get(name, 0) + by_kind.get(name, 0)), name
        assert set(seen["shares"]) == set(by_model) | set(by_kind)
        assert seen["rows"] == len(snap.turns) == sum(kind.turns for kind in snap.by_kind)
        assert seen["count"] == f"{len(snap.turns)} turns"
        assert seen["dayBars"] == len(snap.by_day)
        for kind in snap.by_kind:
            assert seen["kinds"][f"{kind.kind} prompts"] == str(kind.turns)
            assert seen["kinds"][f"{kind.kind} credits"] == f"{kind.credits:.2f}"
            assert seen["kinds"][f"{kind.kind} tool calls"] == str(kind.tools)
        assert snap.by_kind[1].turns > 0  # ordinary prompts are in the data
        assert (seen["checked"], seen["differ"]) == (
            len(snap.reconciliation), sum(not c.agrees for c in snap.reconciliation))
        assert seen["differ"] == 1

        waterfalls = {w["fusion"]: w for w in page.evaluate(OPEN_ALL)}
        assert len(waterfalls) == len(snap.turns)
        assert sum(w["replayed"] for w in waterfalls.values()) > 0
        for turn in snap.turns:
            drawn = waterfalls[turn.fusion_id]
            assert drawn["legs"] == len(turn.legs)
            assert drawn["calls"] == len(turn.model_calls)
            assert drawn["tools"] == len(turn.tools)
            assert drawn["replayed"] == sum(tool.timing != "live" for tool in turn.tools)
            assert drawn["committed"] == sum(leg.committed for leg in turn.legs)
            assert drawn["failed"] == sum(leg.status != "succeeded" for leg in turn.legs)
            assert sorted(drawn["verdicts"]) == sorted(
                ("✓ " if leg.verdict == "accept" else "✗ ") + (leg.verdict or leg.status)
                for leg in turn.legs if leg.verdict or leg.status != "succeeded")
        assert page.problems == []


@needs_chromium
def test_turns_can_be_filtered_and_opened_by_link(tmp_path):
    writer = whole_session("filters")
    writer.write(tmp_path / "state")
    snap = snapshot_of(tmp_path / "state")
    url = write_page(snap, tmp_path / "report.html")
    wanted = writer.expected[2].fusion_id
    with Browser(tmp_path / "profile") as browser:
        page = browser.open(url + "#turn=" + wanted)
        assert page.evaluate("document.querySelector('svg.waterfall').dataset.fusion") == wanted

        def shown_after(element, value):
            return page.evaluate(f"""(() => {{
                const input = document.getElementById("{element}");
                input.value = {value!r};
                input.dispatchEvent(new Event("input"));
                return Array.from(document.querySelectorAll("tr.turn")).map((r) => r.dataset.fusion);
            }})()""")

        cascades = {t.fusion_id for t in snap.turns if t.pattern == "cascade"}
        assert set(shown_after("filter-pattern", "cascade")) == cascades
        assert page.evaluate("document.getElementById('turn-count').textContent") == (
            f"{len(cascades)} of {len(snap.turns)} turns")
        shown_after("filter-pattern", "")
        with_gemini = {t.fusion_id for t in snap.turns if any("gemini" in l.model for l in t.legs)}
        assert set(shown_after("filter-text", "GEMINI")) == with_gemini
        shown_after("filter-text", "")
        ordinary = {t.fusion_id for t in snap.turns if t.kind == "ordinary"}
        assert ordinary and set(shown_after("filter-kind", "ordinary")) == ordinary
        shown_after("filter-kind", "")
        assert set(shown_after("filter-outcome", "route_failed")) == {
            t.fusion_id for t in snap.turns if t.outcome == "route_failed"}
        assert page.problems == []


def many_turns(count):
    """`count` turns made from one session's, moved one after another over two months."""
    writer = whole_session("many")
    with tempfile.TemporaryDirectory() as folder:
        writer.write(Path(folder))
        rows = snapshot_of(Path(folder)).turns
    made = []
    for number in range(count):
        row = rows[number % len(rows)]
        start = datetime.fromisoformat(row.start) + timedelta(minutes=17 * number)
        made.append(records.replace(row, fusion_id=f"fusion-{number:05d}",
                                        start=start.isoformat(timespec="milliseconds")))
    return report_figures.snapshot(made, now=NOW, tz=timezone.utc)


@needs_chromium
def test_five_thousand_turns_stay_usable(tmp_path):
    snap = many_turns(5000)
    path = tmp_path / "report.html"
    url = write_page(snap, path)
    assert path.stat().st_size < 6_000_000
    with Browser(tmp_path / "profile") as browser:
        page = browser.open(url + "#turn=fusion-00000")  # the oldest: the last of the list
        assert page.evaluate("document.querySelectorAll('svg.waterfall').length") == 1
        assert page.evaluate("document.querySelector('svg.waterfall').dataset.fusion") == "fusion-00000"
        page = browser.open(url)
        assert page.evaluate("document.querySelectorAll('tr.turn').length") == 500
        assert page.evaluate("document.getElementById('turn-count').textContent") == "5000 turns, 500 shown"
        assert page.evaluate("document.getElementById('more').click(), "
                             "document.querySelectorAll('tr.turn').length") == 1000
        assert page.evaluate("document.querySelectorAll('svg.waterfall').length") == 0
        assert page.evaluate("document.querySelectorAll('[data-figure]')[0].dataset.value") == str(
            snap.headline.turns)
        assert page.problems == []


@needs_chromium
def test_names_from_the_log_stay_text(tmp_path, monkeypatch):
    """Defence in depth: the parser makes such model names `other` (tailer/codes.py), and
    the page would still show them as text, were they let through."""
    monkeypatch.setattr(event_values, "is_code", lambda kind, value: True)
    writer = SessionWriter("hostile", START)
    hostile = ['<img src=x onerror="document.title=1">', "</script><script>document.title=2</script>"]
    for model in hostile:
        writer.single(model)
    writer.write(tmp_path / "state")
    url = write_page(snapshot_of(tmp_path / "state"), tmp_path / "report.html")
    with Browser(tmp_path / "profile") as browser:
        page = browser.open(url)
        page.evaluate("document.querySelectorAll('tr.turn').forEach((row) => row.click()), 0")
        assert page.evaluate("document.title") == "HydraFusion report"
        assert page.evaluate("document.querySelectorAll('img, script:not([type]) ~ script').length") == 0
        text = page.evaluate("document.body.innerText")
        assert all(model in text for model in hostile)
        assert page.problems == []


@needs_chromium
def test_the_browser_reports_what_a_broken_page_does(tmp_path):
    """The checks above would see a script error, a console error or a blocked request."""
    csp = report_html.render(snapshot_of(ROOT / "fixtures")).split("<title>")[0]
    pages = {
        "exception": "<script>undefinedFunction()</script>",
        "console": "<script>console.error('bad')</script>",
        "request": '<img src="http://127.0.0.1:9/x.png">',
    }
    with Browser(tmp_path / "profile") as browser:
        for name, body in pages.items():
            path = tmp_path / f"{name}.html"
            path.write_text(csp + "</head><body>" + body + "</body></html>")
            assert browser.open(path.as_uri()).problems, name


def test_a_symlink_at_the_pages_path_is_replaced_never_written_through(tmp_path):
    every_pattern("link").write(tmp_path / "state")
    kept = tmp_path / "kept.txt"
    kept.write_text("not the report's")
    page = tmp_path / "report.html"
    for target in (kept, tmp_path / "nowhere"):  # a file of someone else's, a dangling link
        page.unlink(missing_ok=True)
        page.symlink_to(target)
        done = run_report("--state-dir", str(tmp_path / "state"), "--html", str(page))
        assert done.returncode == 0, done.stderr
        assert not page.is_symlink() and page.read_text().startswith("<!doctype html>")
    assert kept.read_text() == "not the report's"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["kept.txt", "report.html", "state"]


def test_what_a_run_killed_as_it_wrote_the_page_left_is_removed_by_the_next(tmp_path):
    """SIGKILL as the page is written leaves its temporary file (`.report.html.*.tmp`, as
    big as the page), which no later run removed. The next run removes those a minute old,
    not one that a run writing the page now may be writing, nor any other file."""
    every_pattern("killed").write(tmp_path / "state")
    page = tmp_path / "report.html"
    old_s = datetime.now().timestamp() - 120
    names = {"killed": ".report.html.69aa9add5f78.tmp", "writing": ".report.html.0123456789ab.tmp",
             "another page's": ".other.html.69aa9add5f78.tmp", "the user's": "report.html.tmp"}
    for what, name in names.items():
        (tmp_path / name).write_text(what)
        if what != "writing":
            os.utime(tmp_path / name, (old_s, old_s))
    done = run_report("--state-dir", str(tmp_path / "state"), "--html", str(page))
    assert done.returncode == 0, done.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
        ["state", "report.html", *(name for what, name in names.items() if what != "killed")])


def test_the_page_is_made_as_any_file_the_user_writes(tmp_path):
    """Its mode follows the umask (a page to share), not 0600 as the tailer's own saves."""
    every_pattern("mode").write(tmp_path / "state")
    page = tmp_path / "report.html"
    for umask, mode in ((0o022, 0o644), (0o077, 0o600)):
        done = run_report("--state-dir", str(tmp_path / "state"), "--html", str(page),
                          preexec_fn=lambda umask=umask: os.umask(umask))
        assert done.returncode == 0, done.stderr
        assert page.stat().st_mode & 0o777 == mode
    assert sorted(path.name for path in tmp_path.iterdir()) == ["report.html", "state"]


def test_a_page_that_cannot_be_written_is_one_line(tmp_path):
    every_pattern("nowhere").write(tmp_path / "state")
    done = run_report("--state-dir", str(tmp_path / "state"), "--html",
                      str(tmp_path / "missing" / "report.html"))
    assert done.returncode == 2
    assert done.stderr == (f"hydrafusion-tailer report: --html "
                           f"{tmp_path / 'missing' / 'report.html'}: its folder does not exist\n")


@needs_chromium
def test_classes_come_from_a_fixed_set_whatever_the_log_says(tmp_path):
    """An outcome or a verdict is never made into a class: a crafted one adds none."""
    every_pattern("classes").write(tmp_path / "state")
    snap = snapshot_of(tmp_path / "state")
    crafted = "incomplete turn open x-injected"
    turns = [records.replace(
        turn, outcome=crafted if index % 2 else "incomplete",
        legs=[records.replace(leg, verdict=leg.verdict and "reject x-injected")
              for leg in turn.legs])
        for index, turn in enumerate(snap.turns)]
    assert any(leg.verdict for turn in turns for leg in turn.legs)
    url = write_page(records.replace(snap, turns=turns), tmp_path / "report.html")
    with Browser(tmp_path / "profile") as browser:
        page = browser.open(url)
        page.evaluate("document.querySelectorAll('tr.turn').forEach((row) => row.click()), 0")
        classes = page.evaluate("Array.from(new Set(Array.from(document.querySelectorAll('*'))"
                                ".flatMap((node) => Array.from(node.classList))))")
        rows = dict(page.evaluate("Array.from(document.querySelectorAll('tr.turn'))"
                                  ".map((row) => [row.dataset.fusion, Array.from(row.classList)])"))
        assert "x-injected" not in classes
        for turn in turns:  # the known outcome keeps its class, the crafted one gets none
            known = {"outcome-incomplete"} if turn.outcome == "incomplete" else set()
            assert set(rows[turn.fusion_id]) - {"open"} == {"turn"} | known
        assert page.problems == []
