"""The HTML report laid out for a person, at a desktop's, a laptop's and a phone's width
(issue 40, point 7), in headless Chromium.

Three pages: the demo's (`report --demo --html`), the real CLI 1.0.102's sessions
(tests/data/realcli) and a generated month and a half of long model names, a new router
policy every few days and every pattern. Each is opened at 1,400, 1,280, 1,024 and 390 px
with its longest turn opened on its waterfall, and must be as wide as the window: the page
never scrolls sideways, no element's content spills out of its box, no text of a chart is
cut at its edge, written over another or smaller than 9 px. The one exception is the
phone's: a table too wide for 390 px scrolls inside its own box (`.table-box`), the honest
design for eleven columns of figures, and the page around it still does not.

The tokens are on the page itself, not in a tooltip: every kind the report's JSON gives,
per model, per leg kind and per leg of an opened turn, as exact counts.
"""

from __future__ import annotations

import json
import random
from datetime import timedelta
from pathlib import Path

import pytest

from chromium import Browser, needs_chromium
from realcli import record
from report_helpers import MONTH_START, add_turn, run_report
from sessiongen import SessionWriter
from tailerproc import ROOT

# The three, and a 1,280 px laptop's (docs/report.png's width) between them.
WIDTHS = (1400, 1280, 1024, 390)
PHONE = 390
VERSION = (ROOT / "tests" / "realcli" / "VERSION").read_text().strip()
# As long as tailer/codes.py lets a model name be: 64 characters, and a BYOK name's two parts.
LONG_MODELS = ("claude-sonnet-4.6-thinking-extended-1m-context-window-beta-20261",
               "openai/gpt-5.6-sol-2026-11-01-preview-long-context-extended-eu",
               "gemini-3.1-pro-experimental-0925", "mai-code-1.1-flash", "claude-opus-5")
TOKEN_KINDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")

# Opens the turn with the most to show (the longest row: most legs, longest names) and an
# ordinary prompt, as a person would to look at them.
OPEN_TURNS = """(() => {
  const rows = Array.from(document.querySelectorAll("tr.turn"));
  const longest = rows.reduce((a, b) => (b.textContent.length > a.textContent.length ? b : a));
  const ordinary = rows.find((row) => row.textContent.includes("ordinary") && row !== longest);
  [longest, ordinary].forEach((row) => row && row.click());
  return document.querySelectorAll("svg.waterfall").length;
})()"""

# What spills: the page, any element whose content is wider than its box (a scroll box
# that scrolls is listed apart), and any text of a chart cut at its edge, over another
# text or too small to read.
SPILLS = """(() => {
  const spills = [], scrolling = [];
  const name = (node) => node.tagName.toLowerCase() + (node.id ? "#" + node.id : "") +
    Array.from(node.classList).map((c) => "." + c).join("");
  const where = (node) => {
    const path = [];
    for (let n = node; n && n !== document.body; n = n.parentElement) path.unshift(name(n));
    return path.slice(-4).join(" > ");
  };
  const root = document.documentElement;
  if (root.scrollWidth > window.innerWidth) spills.push("the page is " + root.scrollWidth + " px wide");
  for (const node of document.body.querySelectorAll("*")) {
    if (node instanceof SVGElement) continue;
    const style = getComputedStyle(node);
    if (style.display === "none" || node.clientWidth === 0) continue;
    if (node.getBoundingClientRect().left < -0.5) spills.push(where(node) + " starts left of the window");
    if (node.scrollWidth <= node.clientWidth + 1) continue;
    const text = where(node) + ": " + node.scrollWidth + " px of content in " + node.clientWidth;
    (["auto", "scroll"].includes(style.overflowX) ? scrolling : spills).push(text);
  }
  const overlap = (a, b) => a.x < b.x + b.width && b.x < a.x + a.width &&
                            a.y < b.y + b.height && b.y < a.y + a.height;
  for (const svg of document.querySelectorAll("svg")) {
    const view = svg.viewBox.baseVal;
    const scale = svg.getScreenCTM().a;
    const texts = Array.from(svg.querySelectorAll("text"))
      .filter((text) => text.getBoundingClientRect().width > 0);
    const boxes = texts.map((text) => text.getBBox());
    texts.forEach((text, index) => {
      const box = boxes[index];
      const said = where(svg) + ' text "' + text.textContent + '"';
      if (box.x < view.x - 0.5 || box.x + box.width > view.x + view.width + 0.5 ||
          box.y < view.y - 0.5 || box.y + box.height > view.y + view.height + 0.5)
        spills.push(said + " is cut at the chart's edge");
      const px = parseFloat(getComputedStyle(text).fontSize) * scale;
      if (px < 9) spills.push(said + " is " + px.toFixed(1) + " px high");
      boxes.slice(0, index).forEach((other, before) => {
        if (overlap(box, other)) spills.push(said + ' is written over "' + texts[before].textContent + '"');
      });
    });
  }
  return {spills, scrolling};
})()"""

# The token cells of the share tables and of the opened turns' legs, as the page shows them,
# and whether each is on the screen (inside the window and its scroll box, if any).
TOKEN_CELLS = """(() => {
  const seen = (cell) => {
    const box = cell.getBoundingClientRect();
    const scroller = cell.closest(".table-box");
    const frame = scroller ? scroller.getBoundingClientRect() : {left: 0, right: window.innerWidth};
    return box.width > 0 && box.left >= Math.max(0, frame.left) - 0.5 &&
           box.right <= Math.min(window.innerWidth, frame.right) + 0.5;
  };
  const tables = {};
  document.querySelectorAll("[data-share] tr[data-name]").forEach((row) => {
    const table = row.closest("[data-share]").dataset.share;
    tables[table] = tables[table] || {};
    tables[table][row.dataset.name] = Object.fromEntries(Array.from(
      row.querySelectorAll("td[data-tokens]")).map((cell) => [cell.dataset.tokens, cell.textContent]));
  });
  const legs = {};
  document.querySelectorAll("table.leg-figures").forEach((table) => {
    legs[table.dataset.fusion] = Array.from(table.querySelectorAll(":scope > tbody > tr")).map((row) =>
      Object.fromEntries(Array.from(row.querySelectorAll("td[data-tokens]"))
        .map((cell) => [cell.dataset.tokens, cell.textContent])));
  });
  const hidden = Array.from(document.querySelectorAll("td[data-tokens]")).filter((cell) => !seen(cell))
    .map((cell) => cell.closest("tr").dataset.name + " " + cell.dataset.tokens);
  return {tables, legs, hidden};
})()"""


# Every word of the turn list's rows that the window breaks over two lines (a model's name,
# a leg's kind, a date, a reason: words end at spaces; a reason may break after `_`), and
# every cell of an opened turn's legs, but its model's, not on one line.
BROKEN_WORDS = """(() => {
  const broken = [];
  const lines = (range) => new Set(Array.from(range.getClientRects()).map((box) => Math.round(box.top))).size;
  const walker = document.createTreeWalker(document.getElementById("turn-rows"), NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (!node.parentElement.closest("tr.turn")) continue;
    for (const found of node.data.matchAll(/\\S+/g)) {
      const range = document.createRange();
      range.setStart(node, found.index);
      range.setEnd(node, found.index + found[0].length);
      if (lines(range) > 1) broken.push(found[0]);
    }
  }
  for (const cell of document.querySelectorAll(".leg-figures tbody td:not(.model)")) {
    const range = document.createRange();
    range.selectNodeContents(cell);
    if (lines(range) > 1) broken.push(cell.textContent);
  }
  return broken;
})()"""


def long_named_month(state: Path) -> None:
    """45 days of one or two sessions a day, every pattern and ordinary prompts, on models
    with names as long as they come, the router's policy retuned every third day to a
    version with a long name."""
    rng = random.Random(40)
    for day in range(45):
        for number in range(rng.randint(1, 2)):
            start = MONTH_START + timedelta(days=day, hours=6 * number)
            writer = SessionWriter(f"layout-{day:02d}-{number}-{rng.getrandbits(32):08x}", start)
            if day % 3 == 0:
                writer.retune(f"2026-10-{day % 28 + 1:02d}.{day}-canary-rollout-eu-west-{day}",
                              plan_version=str(day))
            for _ in range(rng.randint(1, 6)):
                add_turn(writer, rng, models=LONG_MODELS)
            writer.shutdown()
            writer.write(state)


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    """Each page as the command writes it, and the JSON report of the same sessions."""
    folder = tmp_path_factory.mktemp("layout")
    long_named_month(folder / "month")
    realcli, _ = record.recorded(VERSION)
    sources = {"demo": ["--demo"], "realcli": ["--state-dir", str(realcli)],
               "month": ["--state-dir", str(folder / "month")]}
    made = {}
    for name, source in sources.items():
        page = folder / f"{name}.html"
        done = run_report(*source, "--html", str(page))
        assert done.returncode == 0, done.stderr
        document = run_report(*source, "--format", "json")
        assert document.returncode == 0, document.stderr
        made[name] = page, json.loads(document.stdout)
    return made


@needs_chromium
@pytest.mark.parametrize("name", ["demo", "realcli", "month"])
def test_the_page_fits_the_window_at_each_width(pages, name, tmp_path):
    page_path, _ = pages[name]
    with Browser(tmp_path / "profile") as browser:
        for width in WIDTHS:
            page = browser.open(page_path.as_uri(), width=width, height=900)
            assert page.evaluate(OPEN_TURNS) >= 1
            found = page.evaluate(SPILLS)
            assert found["spills"] == [], f"{name} at {width} px"
            if width != PHONE:  # wider, every table fits whole
                assert found["scrolling"] == [], f"{name} at {width} px"
            assert all(".table-box" in box.split(" > ")[-1] for box in found["scrolling"]), found
            assert page.problems == []


@needs_chromium
@pytest.mark.parametrize("name", ["demo", "realcli"])
def test_the_turn_list_breaks_no_word_at_any_width(pages, name, tmp_path):
    """Names of a common length read whole at every width, a tablet's too: the list gives
    its legs the room (or turns each turn into a card) rather than break `gpt-5.6-sol`
    a letter a line."""
    page_path, _ = pages[name]
    with Browser(tmp_path / "profile") as browser:
        for width in (*WIDTHS, 800, 920):
            page = browser.open(page_path.as_uri(), width=width, height=900)
            assert page.evaluate(OPEN_TURNS) >= 1
            assert page.evaluate(BROKEN_WORDS) == [], f"{name} at {width} px"
            assert page.problems == []


def shown(count: int) -> str:
    return f"{count:,}"


@needs_chromium
@pytest.mark.parametrize("name", ["demo", "month"])
def test_tokens_are_shown_per_model_per_leg_kind_and_per_leg(pages, name, tmp_path):
    page_path, document = pages[name]
    with Browser(tmp_path / "profile") as browser:
        for width in WIDTHS:
            page = browser.open(page_path.as_uri(), width=width, height=900)
            page.evaluate("document.querySelectorAll('tr.turn').forEach((row) => row.click()), 0")
            seen = page.evaluate(TOKEN_CELLS)
            for table, spends in (("model", document["by_model"]),
                                  ("leg-kind", document["by_leg_kind"])):
                assert seen["tables"][table] == {
                    spend["name"]: {kind: shown(spend[kind]) for kind in TOKEN_KINDS}
                    for spend in spends}, table
            assert seen["legs"] == {
                turn["fusion_id"]: [{kind: shown(part[kind]) for kind in TOKEN_KINDS}
                                    for part in (turn["legs"] or turn["model_calls"])]
                for turn in document["turns"]}
            if width != PHONE:  # on the screen, not only in the page; a phone scrolls to them
                assert seen["hidden"] == [], f"{name} at {width} px"
            assert page.problems == []
