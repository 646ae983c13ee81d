// The turn list and the waterfalls of the HTML report (tailer/report_html.py embeds this).
// Turns come from the JSON in #report-data. The list is drawn a page at a time and a turn's
// waterfall only when the turn is opened, so a report of thousands of turns opens at once.
// Every string from the logs is set as text, never parsed as markup.
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("report-data").textContent);
  const turns = data.turns.slice().reverse(); // newest first
  const PAGE = 500;
  const SVG = "http://www.w3.org/2000/svg";
  const rows = document.getElementById("turn-rows");
  const more = document.getElementById("more");
  const counter = document.getElementById("turn-count");
  const filters = {
    text: document.getElementById("filter-text"),
    kind: document.getElementById("filter-kind"),
    pattern: document.getElementById("filter-pattern"),
    outcome: document.getElementById("filter-outcome"),
    model: document.getElementById("filter-model"),
  };
  let matching = turns;
  let shown = 0;
  // A class is never made from a string of the logs: the values the stylesheet styles map
  // to fixed class names and any other value gets none, so a crafted outcome or verdict
  // cannot add classes of its choosing to the page.
  const OUTCOME_CLASS = new Map([["incomplete", "outcome-incomplete"],
                                 ["route_failed", "outcome-route_failed"]]);
  const VERDICT_CLASS = new Map([["accept", "verdict-accept"], ["reject", "verdict-reject"],
                                 ["revise", "verdict-revise"]]);

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function svg(tag, attributes, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function model(leg) { return data.models[leg.m]; }
  function color(leg) { return data.colors[leg.m]; }

  function seconds(ms) {
    const s = ms / 1000;
    if (s < 60) return s.toFixed(1) + " s";
    if (s < 3600) return Math.floor(s / 60) + " min " + String(Math.floor(s % 60)).padStart(2, "0") + " s";
    return Math.floor(s / 3600) + " h " + String(Math.floor((s % 3600) / 60)).padStart(2, "0") + " min";
  }

  // Credits as the page's figures show them (tailer/report/html.py _money): null is unknown,
  // and `unknown` calls of unknown credits make the figure a lower bound.
  function money(credits, unknown, digits) {
    if (credits === null) return "–";
    return (unknown ? "≥" : "") + credits.toFixed(digits);
  }

  function legNote(leg) {
    const notes = [];
    if (leg.v) notes.push(leg.v);
    if (leg.s !== "succeeded") notes.push(leg.s);
    return notes.join(", ");
  }

  // The legs of a fusion turn, the calls of an ordinary one: what ran it.
  function parts(turn) { return turn.k === "ordinary" ? turn.calls : turn.l; }

  function matches(turn, text, wanted, modelIndex) {
    if (wanted.kind && turn.k !== wanted.kind) return false;
    if (wanted.pattern && turn.p !== wanted.pattern) return false;
    if (wanted.outcome && turn.o !== wanted.outcome) return false;
    if (modelIndex >= 0 && !parts(turn).some((part) => part.m === modelIndex)) return false;
    if (!text) return true;
    if (turn.s.toLowerCase().includes(text) || turn.f.toLowerCase().includes(text)) return true;
    if (turn.pv && turn.pv.toLowerCase().includes(text)) return true;
    return parts(turn).some((part) => model(part).toLowerCase().includes(text));
  }

  function applyFilters() {
    const text = filters.text.value.trim().toLowerCase();
    const modelIndex = data.models.indexOf(filters.model.value);
    const wanted = { kind: filters.kind.value, pattern: filters.pattern.value,
                     outcome: filters.outcome.value };
    matching = turns.filter((turn) => matches(turn, text, wanted, modelIndex));
    rows.textContent = "";
    shown = 0;
    showMore();
  }

  function showMore() {
    const end = Math.min(matching.length, shown + PAGE);
    const fragment = document.createDocumentFragment();
    for (; shown < end; shown++) fragment.appendChild(turnRow(matching[shown]));
    rows.appendChild(fragment);
    more.hidden = shown >= matching.length;
    more.textContent = "Show " + Math.min(PAGE, matching.length - shown) + " more";
    counter.textContent = (matching.length === turns.length ? turns.length + " turns"
      : matching.length + " of " + turns.length + " turns") +
      (shown < matching.length ? ", " + shown + " shown" : "");
  }

  function turnRow(turn) {
    const tr = el("tr", "turn " + (OUTCOME_CLASS.get(turn.o) || ""));
    tr.dataset.fusion = turn.f;
    tr.tabIndex = 0;
    tr.appendChild(el("td", "time", turn.t.slice(0, 19).replace("T", " ")));
    tr.appendChild(el("td", "session", turn.s.slice(0, 8)));
    const pattern = el("td", "", turn.k === "fusion" ? turn.p : turn.k);
    if (turn.pv) pattern.title = "router policy " + turn.pv;
    tr.appendChild(pattern);
    const legs = el("td", "legs");
    if (turn.k === "ordinary") {
      callModels(turn).forEach((index, position) => {
        if (position) legs.appendChild(el("span", "arrow", "→"));
        const chip = el("span", "chip ordinary");
        const swatch = el("i");
        swatch.style.background = data.colors[index];
        chip.appendChild(swatch);
        chip.appendChild(document.createTextNode(data.models[index]));
        legs.appendChild(chip);
      });
    }
    turn.l.forEach((leg, index) => {
      if (index) legs.appendChild(el("span", "arrow", "→"));
      const chip = el("span", "chip" + (leg.a ? " kept" : "") + (leg.s !== "succeeded" ? " failed" : ""));
      const swatch = el("i");
      swatch.style.background = color(leg);
      chip.appendChild(swatch);
      chip.appendChild(document.createTextNode(model(leg)));
      const kind = turn.o === "route_failed" ? "fallback" : leg.k;
      const note = [kind].concat(leg.v ? [leg.v] : [], leg.s !== "succeeded" ? [leg.s] : []).join(":");
      chip.appendChild(el("small", VERDICT_CLASS.get(leg.v) || "", " " + note));
      if (leg.a) chip.appendChild(el("b", "", " ★"));
      legs.appendChild(chip);
    });
    tr.appendChild(legs);
    tr.appendChild(el("td", "num", money(turn.c, turn.u, 2)));
    tr.appendChild(el("td", "num", String(turn.n)));
    tr.appendChild(el("td", "num", String(turn.tools.length)));
    tr.appendChild(el("td", "num", seconds(turn.d)));
    tr.appendChild(el("td", "outcome", turn.o.replace("_", " ") + (turn.why ? " (" + turn.why + ")" : "")));
    tr.addEventListener("click", () => toggle(turn, tr));
    tr.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") { event.preventDefault(); toggle(turn, tr); }
    });
    return tr;
  }

  // The models of an ordinary turn's calls, in order, each switch once.
  function callModels(turn) {
    const found = [];
    for (const call of turn.calls) if (found[found.length - 1] !== call.m) found.push(call.m);
    return found;
  }

  function toggle(turn, tr) {
    const next = tr.nextElementSibling;
    if (next && next.classList.contains("detail")) {
      next.remove();
      tr.classList.remove("open");
      return;
    }
    const detail = el("tr", "detail");
    const cell = el("td");
    cell.colSpan = 9;
    cell.appendChild(waterfall(turn));
    detail.appendChild(cell);
    tr.after(detail);
    tr.classList.add("open");
  }

  // Nice axis steps: 1, 2 or 5 times a power of ten, about six across.
  function step(span) {
    const rough = span / 6;
    const power = Math.pow(10, Math.floor(Math.log10(rough)));
    return [1, 2, 5, 10].map((f) => f * power).find((s) => s >= rough);
  }

  // One lane per leg (an ordinary turn: one lane for its calls), each call a block inside
  // its lane's bar and each tool a tick under it; tools no leg claims get a lane of their own.
  function lanesOf(turn) {
    const lanes = turn.r ? [{ kind: "routing", t: 0, d: turn.r, calls: [], tools: [] }] : [];
    const kind = turn.o === "route_failed" ? "fallback" : null;
    turn.l.forEach((leg, index) => lanes.push({
      kind: "leg", leg: leg, label: (kind || leg.k) + " · " + model(leg), t: leg.t, d: leg.d,
      calls: turn.calls.filter((call) => call.g === index),
      tools: turn.tools.filter((tool) => tool.g === index),
    }));
    const loose = { calls: turn.calls.filter((call) => call.g === null),
                    tools: turn.tools.filter((tool) => tool.g === null) };
    if (loose.calls.length || loose.tools.length) {
      const ends = loose.calls.concat(loose.tools).map((part) => part.t + part.d);
      const start = Math.min(...loose.calls.concat(loose.tools).map((part) => part.t));
      lanes.push({ kind: "turn", t: start, d: Math.max(...ends) - start,
                   label: turn.k === "ordinary" ? "ordinary · " + callModels(turn).map(
                     (index) => data.models[index]).join(", ") : "outside any leg",
                   calls: loose.calls, tools: loose.tools });
    }
    return lanes;
  }

  function waterfall(turn) {
    const LABEL = 250, RIGHT = 110, WIDTH = 980, ROW = 34, TOP = 8, AXIS = 26;
    const lanes = lanesOf(turn);
    const spans = lanes.concat(...lanes.map((lane) => lane.calls.concat(lane.tools)));
    const start = Math.min(0, ...spans.map((part) => part.t));
    const end = Math.max(turn.d, ...spans.map((part) => part.t + part.d), start + 1);
    const plot = WIDTH - LABEL - RIGHT;
    const x = (ms) => LABEL + (plot * (ms - start)) / (end - start);
    const width = (part) => Math.max(2, x(part.t + part.d) - x(part.t));
    const height = TOP + lanes.length * ROW + AXIS;
    const figure = svg("svg", { class: "waterfall", viewBox: "0 0 " + WIDTH + " " + height,
                                width: "100%", role: "img", "data-fusion": turn.f });
    const tick = step(end - start);
    for (let t = Math.ceil(start / tick) * tick; t <= end; t += tick) {
      figure.appendChild(svg("line", { class: "grid", x1: x(t), x2: x(t), y1: TOP, y2: height - AXIS + 4 }));
      figure.appendChild(svg("text", { class: "axis", x: x(t), y: height - 8, "text-anchor": "middle" },
                             seconds(t).replace(".0 s", " s")));
    }
    lanes.forEach((lane, index) => {
      const y = TOP + index * ROW;
      const label = lane.kind === "routing" ? "routing" : lane.label;
      figure.appendChild(svg("text", { class: "lane", x: LABEL - 10, y: y + 15, "text-anchor": "end" }, label));
      if (lane.kind === "routing") {
        const bar = svg("rect", { class: "routing", x: x(lane.t), y: y + 4, width: width(lane), height: 14, rx: 3 });
        bar.appendChild(svg("title", {}, "routing: " + seconds(lane.d)));
        figure.appendChild(bar);
        return;
      }
      let bar;
      if (lane.kind === "leg") {
        const leg = lane.leg;
        const classes = ["leg"];
        if (leg.a) classes.push("committed");
        if (leg.s !== "succeeded") classes.push("failed");
        bar = svg("rect", { class: classes.join(" "), x: x(leg.t), y: y + 4, width: width(leg),
                            height: 14, rx: 3, fill: color(leg) });
        bar.appendChild(svg("title", {}, lane.label + ": " + seconds(leg.d) + ", " +
          money(leg.c, leg.u, 2) + " credits, " + leg.n + " calls, " + leg.i + " uncached input tokens, " +
          leg.h + " read from the cache, " + leg.o + " output tokens" +
          (legNote(leg) ? " (" + legNote(leg) + ")" : "")));
      } else {
        bar = svg("rect", { class: "span", x: x(lane.t), y: y + 4, width: width(lane), height: 14, rx: 3 });
      }
      figure.appendChild(bar);
      for (const call of lane.calls) {
        const block = svg("rect", { class: "call", x: x(call.t), y: y + 7, width: width(call),
                                    height: 8, fill: data.colors[call.m] });
        block.appendChild(svg("title", {}, "model call on " + data.models[call.m] + ": " +
          seconds(call.d) + ", " + money(call.c, 0, 3) + " credits, " + call.i + " uncached input tokens, " +
          call.h + " read from the cache, " + call.o + " output tokens" + (call.f ? ", " + call.f : "")));
        figure.appendChild(block);
      }
      for (const tool of lane.tools) {
        const replayed = tool.w !== "live";
        const classes = "tool" + (replayed ? " replayed" : "") + (tool.ok === false ? " failed" : "");
        const mark = svg("rect", { class: classes, x: x(tool.t), y: y + 21, width: width(tool), height: 6, rx: 1 });
        mark.appendChild(svg("title", {}, "tool " + tool.n + ": " + seconds(tool.d) +
          (tool.ok === false ? ", failed" : "") +
          (tool.w === "between_calls" ? " (replayed at commit; placed after the call that asked for it)" : "") +
          (tool.w === "commit" ? " (replayed at commit; when it ran is not in the log)" : "")));
        figure.appendChild(mark);
      }
      if (lane.kind !== "leg") return;
      const leg = lane.leg;
      let text = "";
      let markClass = "";
      if (leg.v) { text = (leg.v === "accept" ? "✓ " : "✗ ") + leg.v; markClass = "verdict " + (VERDICT_CLASS.get(leg.v) || ""); }
      else if (leg.s !== "succeeded") { text = "✗ " + leg.s; markClass = "verdict verdict-failed"; }
      else if (leg.a) { text = "★ answer"; markClass = "kept-mark"; }
      if (text) figure.appendChild(svg("text", { class: markClass, x: x(leg.t) + width(leg) + 6, y: y + 15 }, text));
    });
    const box = el("div", "waterfall-box");
    const facts = [turn.k === "fusion" ? turn.p : turn.k, turn.o.replace("_", " "),
                   money(turn.c, turn.u, 2) + " credits", turn.n + " calls", turn.tools.length + " tools",
                   seconds(turn.d), "session " + turn.s, turn.f];
    if (turn.why) facts.splice(2, 0, turn.why);
    box.appendChild(el("p", "facts", facts.join(" · ")));
    box.appendChild(figure);
    if (turn.tools.some((tool) => tool.w !== "live")) {
      box.appendChild(el("p", "facts", "Hatched tools were replayed when the answer was committed: " +
                         "their times are where the log allows them, not when they ran."));
    }
    return box;
  }

  function openFromHash() {
    const wanted = decodeURIComponent(location.hash.replace(/^#turn=/, ""));
    if (!wanted || wanted === location.hash) return;
    const index = matching.findIndex((turn) => turn.f === wanted);
    if (index < 0) return;
    while (shown <= index) showMore();
    const tr = Array.from(rows.querySelectorAll("tr.turn")).find((row) => row.dataset.fusion === wanted);
    if (tr && !tr.classList.contains("open")) toggle(matching[index], tr);
    if (tr) tr.scrollIntoView({ block: "start" });
  }

  for (const input of Object.values(filters)) input.addEventListener("input", applyFilters);
  more.addEventListener("click", showMore);
  window.addEventListener("hashchange", openFromHash);
  applyFilters();
  openFromHash();
})();
