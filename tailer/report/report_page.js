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

  // A count as the page's figures show one (tailer/report/html.py _count): exact, with
  // thousands separators.
  function count(number) { return number.toLocaleString("en-US"); }

  // The token kinds of a leg or a call, as the page names them (html.py TOKEN_KINDS).
  const TOKENS = [["i", "input_tokens", "uncached input"], ["o", "output_tokens", "output"],
                  ["h", "cache_read_tokens", "cache read"], ["w", "cache_write_tokens", "cache write"]];

  function tokens(part) {
    return TOKENS.map(([key, , label]) => count(part[key]) + " " + label).join(", ") + " tokens";
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
    const started = el("td", "time");
    // The date and the time each whole, so a narrow column breaks between them only.
    started.append(el("span", "", turn.t.slice(0, 10)), " ", el("span", "", turn.t.slice(11, 19)));
    tr.appendChild(started);
    tr.appendChild(el("td", "session", turn.s.slice(0, 8)));
    const pattern = el("td", "pattern", turn.k === "fusion" ? turn.p : turn.k);
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
      if (leg.a) chip.appendChild(el("b", "", "\u00a0★")); // the star never alone on a line
      legs.appendChild(chip);
    });
    tr.appendChild(legs);
    tr.appendChild(el("td", "num credits", money(turn.c, turn.u, 2)));
    tr.appendChild(counted("calls", turn.n, "call"));
    tr.appendChild(counted("tools", turn.tools.length, "tool"));
    tr.appendChild(el("td", "num duration", seconds(turn.d)));
    const outcome = el("td", "outcome", turn.o.replace("_", " "));
    if (turn.why) outcome.appendChild(breakable(el("small", "why"), " (" + turn.why + ")"));
    tr.appendChild(outcome);
    tr.addEventListener("click", () => toggle(turn, tr));
    tr.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") { event.preventDefault(); toggle(turn, tr); }
    });
    return tr;
  }

  // `node` with `text` in it, free to break after each underscore (`router_unavailable`),
  // never inside a word.
  function breakable(node, text) {
    text.split("_").forEach((part, index) => {
      if (index > 0) node.append("_", document.createElement("wbr"));
      node.append(part);
    });
    return node;
  }

  // A count's cell; on a phone, where the list has no header, it says what it counts.
  function counted(className, number, unit) {
    const td = el("td", "num " + className, String(number));
    td.dataset.unit = number === 1 ? unit : unit + "s";
    return td;
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
    const box = el("div", "waterfall-box");
    cell.appendChild(box);
    detail.appendChild(cell);
    tr.after(detail);
    tr.classList.add("open");
    drawTurn(box, turn);
  }

  // Nice axis steps: 1, 2 or 5 times a power of ten, about `count` across.
  function step(span, count) {
    const rough = span / count;
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

  // The width of `text` in the page's font at `size` px, to lay the waterfall out around
  // its labels whatever their length.
  const measure = (() => {
    const context = document.createElement("canvas").getContext("2d");
    return (text, size, weight) => {
      context.font = (weight || "normal") + " " + size + "px " + getComputedStyle(document.body).fontFamily;
      return context.measureText(text).width;
    };
  })();

  // `text` cut in its middle to fit `room` px at 12 px, an ellipsis where it was cut.
  function fitted(text, room) {
    const cut = (keep) => text.slice(0, Math.ceil(keep / 2)) + "…" +
                          text.slice(text.length - Math.floor(keep / 2));
    if (measure(text, 12) <= room) return text;
    let keep = text.length - 1;
    while (keep > 2 && measure(cut(keep), 12) > room) keep--;
    return cut(keep);
  }

  // What follows a leg's bar: its verdict, its failure or the kept answer's star.
  function markOf(lane) {
    if (lane.kind !== "leg") return null;
    const leg = lane.leg;
    if (leg.v) return { text: (leg.v === "accept" ? "✓ " : "✗ ") + leg.v, className: "verdict " + (VERDICT_CLASS.get(leg.v) || "") };
    if (leg.s !== "succeeded") return { text: "✗ " + leg.s, className: "verdict verdict-failed" };
    if (leg.a) return { text: "★ answer", className: "kept-mark" };
    return null;
  }

  // The waterfall's geometry for `available` px: labels left of the bars and marks after
  // them where there is room, else (a phone) each lane's label and mark on a line above
  // its bar. Drawn at the size it is shown, so its text is the page's 12 px at any width.
  function layout(lanes, available) {
    const width = Math.max(240, Math.min(1100, Math.floor(available)));
    const marks = lanes.map(markOf);
    const markRoom = Math.max(0, ...marks.map((mark) => (mark ? measure(mark.text, 12, 600) : 0)));
    const labels = lanes.map((lane) => (lane.kind === "routing" ? "routing" : lane.label));
    if (width < 560) {
      return { width, marks, markRoom, labels, narrow: true, left: 4, right: 4, row: 48, bar: 18 };
    }
    const labelRoom = Math.max(...labels.map((label) => measure(label, 12)));
    const left = Math.min(labelRoom + 20, Math.floor(width * 0.4));
    return { width, marks, markRoom, labels, narrow: false, left, right: markRoom + 16, row: 34, bar: 4 };
  }

  function waterfall(turn, available) {
    const TOP = 8, AXIS = 26;
    const lanes = lanesOf(turn);
    const shape = layout(lanes, available);
    const WIDTH = shape.width, ROW = shape.row, BAR = shape.bar;
    const spans = lanes.concat(...lanes.map((lane) => lane.calls.concat(lane.tools)));
    const start = Math.min(0, ...spans.map((part) => part.t));
    const end = Math.max(turn.d, ...spans.map((part) => part.t + part.d), start + 1);
    const plot = WIDTH - shape.left - shape.right;
    const x = (ms) => shape.left + (plot * (ms - start)) / (end - start);
    const width = (part) => Math.max(2, x(part.t + part.d) - x(part.t));
    const height = TOP + lanes.length * ROW + AXIS;
    const figure = svg("svg", { class: "waterfall", viewBox: "0 0 " + WIDTH + " " + height,
                                width: WIDTH, height: height, role: "img", "data-fusion": turn.f });
    const tick = step(end - start, Math.max(2, Math.floor(plot / 90)));
    for (let t = Math.ceil(start / tick) * tick; t <= end; t += tick) {
      const text = seconds(t).replace(".0 s", " s");
      const half = measure(text, 11) / 2 + 1;
      figure.appendChild(svg("line", { class: "grid", x1: x(t), x2: x(t), y1: TOP, y2: height - AXIS + 4 }));
      figure.appendChild(svg("text", { class: "axis", x: Math.min(Math.max(x(t), half), WIDTH - half),
                                       y: height - 8, "text-anchor": "middle" }, text));
    }
    lanes.forEach((lane, index) => {
      const y = TOP + index * ROW;
      const mark = shape.marks[index];
      const room = shape.narrow ? WIDTH - 8 - (mark ? shape.markRoom + 10 : 0) : shape.left - 14;
      const shown = fitted(shape.labels[index], room);
      const label = shape.narrow
        ? svg("text", { class: "lane", x: 4, y: y + 12 }, shown)
        : svg("text", { class: "lane", x: shape.left - 10, y: y + BAR + 11, "text-anchor": "end" }, shown);
      if (shown !== shape.labels[index]) label.appendChild(svg("title", {}, shape.labels[index]));
      figure.appendChild(label);
      if (lane.kind === "routing") {
        const bar = svg("rect", { class: "routing", x: x(lane.t), y: y + BAR, width: width(lane), height: 14, rx: 3 });
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
        bar = svg("rect", { class: classes.join(" "), x: x(leg.t), y: y + BAR, width: width(leg),
                            height: 14, rx: 3, fill: color(leg) });
        bar.appendChild(svg("title", {}, lane.label + ": " + seconds(leg.d) + ", " +
          money(leg.c, leg.u, 2) + " credits, " + leg.n + " calls, " + tokens(leg) +
          (legNote(leg) ? " (" + legNote(leg) + ")" : "")));
      } else {
        bar = svg("rect", { class: "span", x: x(lane.t), y: y + BAR, width: width(lane), height: 14, rx: 3 });
      }
      figure.appendChild(bar);
      for (const call of lane.calls) {
        const block = svg("rect", { class: "call", x: x(call.t), y: y + BAR + 3, width: width(call),
                                    height: 8, fill: data.colors[call.m] });
        block.appendChild(svg("title", {}, "model call on " + data.models[call.m] + ": " +
          seconds(call.d) + ", " + money(call.c, 0, 3) + " credits, " + tokens(call) +
          (call.f ? ", " + call.f : "")));
        figure.appendChild(block);
      }
      for (const tool of lane.tools) {
        const replayed = tool.w !== "live";
        const classes = "tool" + (replayed ? " replayed" : "") + (tool.ok === false ? " failed" : "");
        const stroke = svg("rect", { class: classes, x: x(tool.t), y: y + BAR + 17, width: width(tool), height: 6, rx: 1 });
        stroke.appendChild(svg("title", {}, "tool " + tool.n + ": " + seconds(tool.d) +
          (tool.ok === false ? ", failed" : "") +
          (tool.w === "between_calls" ? " (replayed at commit; placed after the call that asked for it)" : "") +
          (tool.w === "commit" ? " (replayed at commit; when it ran is not in the log)" : "")));
        figure.appendChild(stroke);
      }
      if (!mark) return;
      figure.appendChild(shape.narrow
        ? svg("text", { class: mark.className, x: WIDTH - 4, y: y + 12, "text-anchor": "end" }, mark.text)
        : svg("text", { class: mark.className, x: x(lane.leg.t) + width(lane.leg) + 6, y: y + BAR + 11 }, mark.text));
    });
    return figure;
  }

  // An opened turn: its facts, its waterfall as wide as the box, and each leg's figures
  // (an ordinary prompt: each call's), its tokens of every kind among them.
  function drawTurn(box, turn) {
    const facts = [turn.k === "fusion" ? turn.p : turn.k, turn.o.replace("_", " "),
                   money(turn.c, turn.u, 2) + " credits", turn.n + " calls", turn.tools.length + " tools",
                   seconds(turn.d), "session " + turn.s, turn.f];
    if (turn.why) facts.splice(2, 0, turn.why);
    box.appendChild(el("p", "facts", facts.join(" · ")));
    box.appendChild(waterfall(turn, box.clientWidth));
    if (turn.tools.some((tool) => tool.w !== "live")) {
      box.appendChild(el("p", "facts", "Hatched tools were replayed when the answer was committed: " +
                         "their times are where the log allows them, not when they ran."));
    }
    box.appendChild(partFigures(turn));
  }

  function partFigures(turn) {
    const legs = turn.l.length > 0;
    const table = el("table", "figures leg-figures");
    table.dataset.fusion = turn.f;
    const over = table.createTHead().insertRow();
    over.className = "over";
    over.appendChild(el("th")).colSpan = 4;
    over.appendChild(el("th", "", "tokens")).colSpan = TOKENS.length;
    over.appendChild(el("th"));
    const head = table.tHead.insertRow();
    [legs ? "leg" : "call", "model", "credits", "calls"].concat(TOKENS.map(([, , label]) => label), ["time"])
      .forEach((name) => head.appendChild(el("th", name === "model" ? "model" : "", name)));
    const body = table.createTBody();
    (legs ? turn.l : turn.calls).forEach((part, index) => {
      const row = body.insertRow();
      row.appendChild(el("td", "", legs ? (turn.o === "route_failed" ? "fallback" : part.k) + (part.a ? "\u00a0★" : "")
                                        : "call " + (index + 1)));
      const name = el("td", "model");
      const swatch = el("i");
      swatch.style.background = data.colors[part.m];
      name.append(swatch, data.models[part.m]);
      row.appendChild(name);
      row.appendChild(el("td", "", legs ? money(part.c, part.u, 2) : money(part.c, 0, 3)));
      row.appendChild(el("td", "", legs ? count(part.n) : "1"));
      for (const [key, field] of TOKENS) {
        const cell = el("td", "", count(part[key]));
        cell.dataset.tokens = field;
        row.appendChild(cell);
      }
      row.appendChild(el("td", "", seconds(part.d)));
    });
    const scroller = el("div", "table-box");
    scroller.appendChild(table);
    return scroller;
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
