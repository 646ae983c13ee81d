"""The report as one self-contained HTML page (`report --html FILE`).

The page must open anywhere, offline, and be safe to mail around: no network, no external
script, font or image (its Content-Security-Policy forbids them), and nothing in it but
what the JSON report holds. Every string from a log is escaped here (html.escape) or set
as text by the script, never parsed as markup.

It must also stay quick with thousands of turns. So the figures and charts are drawn here,
once, as HTML and inline SVG; the turn list and each turn's waterfall are drawn by the
page's script (report_page.js) from the turns embedded as JSON, the list a page at a time
and a waterfall only when its turn is opened.
"""

from __future__ import annotations

import json
import math
from html import escape
from importlib import resources

from ..turns import ledger_check
from ..wording import counted
from .figures import Snapshot
from .rows import TurnRow

# Tableau 10: distinct, and kind to the common colour-vision deficiencies.
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
           "#ff9da7", "#9c755f", "#bab0ac")
KIND_COLORS = {"primary": "#4e79a7", "draft": "#6f97c4", "judge": "#f28e2b",
               "critic": "#b07aa1", "repair": "#59a14f", "revision": "#76b7b2",
               "follow_up": "#9c755f"}
# The kinds of token a Spend, a leg and a call count, as the page names them: every one
# shown, none left to a tooltip.
TOKEN_KINDS = (("input_tokens", "input"), ("output_tokens", "output"),
               ("cache_read_tokens", "cache read"), ("cache_write_tokens", "cache write"))


def render(snap: Snapshot) -> str:
    colors = model_colors(snap)
    page = resources.files(__package__)
    return _PAGE.format(
        style=page.joinpath("report_page.css").read_text(encoding="utf-8"),
        script=page.joinpath("report_page.js").read_text(encoding="utf-8"),
        subtitle=escape(_subtitle(snap)),
        cards=_cards(snap),
        kinds=_kind_table(snap),
        checks=_checks(snap) + _ledger(snap),
        days=_day_chart(snap, colors),
        model_share=_share("model", snap.by_model, colors,
                           sum(use.credits or 0.0 for use in snap.by_model), parts=True),
        kind_share=_share("leg-kind", snap.by_leg_kind, _kind_colors(snap),
                          snap.headline.credits),
        patterns=_pattern_table(snap),
        router=_router_table(snap),
        worth=_worth(snap),
        data=_embedded(snap, colors),
        pattern_options=_options(sorted({t.pattern for t in snap.turns})),
        outcome_options=_options(sorted({t.outcome for t in snap.turns})),
        kind_options=_options([k.kind for k in snap.by_kind if k.turns]),
        model_options=_options(list(colors)),
    )


def model_colors(snap: Snapshot) -> dict[str, str]:
    """Every model of a leg or a call: the biggest spenders on legs get the palette first,
    models only ordinary prompts used come after; past ten, a hue of their own."""
    names = [spend.name for spend in snap.by_model]
    names += sorted({call.model for turn in snap.turns for call in turn.model_calls} - set(names))
    return {name: (PALETTE[index] if index < len(PALETTE)
                   else f"hsl({index * 137.508 % 360:.0f}, 45%, 55%)")
            for index, name in enumerate(names)}


def _kind_colors(snap: Snapshot) -> dict[str, str]:
    others = iter(PALETTE[5:] * len(snap.by_leg_kind))
    return {s.name: KIND_COLORS.get(s.name) or next(others) for s in snap.by_leg_kind}


def _subtitle(snap: Snapshot) -> str:
    ordinary = sum(kind.turns for kind in snap.by_kind if kind.kind == "ordinary")
    parts = [f"{counted(snap.headline.turns, 'HydraFusion turn')}, "
             f"{counted(ordinary, 'ordinary prompt')}, in {counted(snap.sessions, 'session')}"]
    if snap.first_turn:
        parts.append(f"{_minute(snap.first_turn)} to {_minute(snap.last_turn)} "
                     f"(UTC{snap.utc_offset})")
    parts += [f"--{name} {value}" for name, value in snap.filters.items()]
    parts.append(f"made {_minute(snap.generated_at)}")
    return " · ".join(parts)


def _cards(snap: Snapshot) -> str:
    head = snap.headline
    outcomes = ", ".join(f"{count} {outcome.replace('_', ' ')}"
                         for outcome, count in head.outcomes.items())
    judged = (f"{head.rejected_turns} of {head.judged_turns} judged turns"
              if head.judged_turns else "no turn judged")
    cards = [
        ("turns", head.turns, str(head.turns), "HydraFusion: " + (outcomes or "no turns")),
        ("credits", head.credits, _money(head.credits),
         f"HydraFusion turns: {head.calls} calls" + (
             f", {head.unknown_credit_calls} of unknown credits left out"
             if head.unknown_credit_calls else "")),
        ("compound_rate", head.compound_rate, _percent(head.compound_rate),
         "routed turns on more than one model"),
        ("judge_rejection_rate", head.judge_rejection_rate,
         _percent(head.judge_rejection_rate), f"drafts sent back: {judged}"),
        ("review_share", head.review_share, _percent(head.review_share),
         "credits on legs whose answer was not kept"),
        ("cache_share", head.cache_share, _percent(head.cache_share),
         "of input tokens (uncached, cache reads and writes) read from the cache"),
    ]
    labels = {"compound_rate": "compound rate", "judge_rejection_rate": "judge rejection rate",
              "review_share": "review share", "cache_share": "cache share of input"}
    return "\n".join(
        f'<div class="card" data-figure="{name}" data-value="{_raw(raw)}">'
        f'<div class="value">{escape(shown)}</div>'
        f'<div class="label">{escape(labels.get(name, name))}</div>'
        f'<div class="note">{escape(note)}</div></div>'
        for name, raw, shown, note in cards
    )


def _kind_table(snap: Snapshot) -> str:
    """Fusion, ordinary and fallback prompts side by side, one column each."""
    kinds = snap.by_kind
    rows = [
        ("prompts", [str(k.turns) for k in kinds]),
        ("credits", [_money(k.credits, k.unknown_credit_calls) for k in kinds]),
        ("median credits", [_money(k.median_credits) for k in kinds]),
        ("model calls", [str(k.calls) for k in kinds]),
        ("calls / prompt", [f"{k.calls / k.turns:.1f}" if k.turns else "–" for k in kinds]),
        ("tool calls", [str(k.tools) for k in kinds]),
        ("median time", [f"{k.median_duration_ms / 1000:.1f} s" for k in kinds]),
    ]
    if any(k.unknown_credit_calls for k in kinds):
        rows.insert(4, ("calls of unknown credits", [str(k.unknown_credit_calls) for k in kinds]))
    head = "".join(f"<th>{escape(k.kind)}</th>" for k in kinds)
    body = "".join(
        f"<tr><td>{escape(name)}</td>"
        + "".join(f'<td data-kind="{escape(k.kind)}" data-row="{escape(name)}">{escape(v)}</td>'
                  for k, v in zip(kinds, values))
        + "</tr>" for name, values in rows)
    return _boxed(f'<table class="figures kinds"><thead><tr><th></th>{head}</tr></thead>'
                  f"<tbody>{body}</tbody></table>")


def _checks(snap: Snapshot) -> str:
    """The CLI's own totals against the sums of the calls."""
    checks = snap.reconciliation
    if not checks:
        return '<p class="empty">The logs hold no totals of the CLI to check.</p>'
    wrong = [check for check in checks if not check.agrees]
    summary = (f'<p class="checks" data-checked="{len(checks)}" data-differ="{len(wrong)}">'
               f"{len(checks)} totals written by the CLI checked: "
               + (f'<b class="bad">{len(wrong)} differ from our sums</b>' if wrong
                  else '<b class="good">every one matches our sums</b>') + "</p>")
    rows = "".join(
        f"<tr><td>{escape(check.session_id[:8])}</td><td>{escape(check.source)}</td>"
        f'<td class="model">{escape(d["model"])}</td>'
        f"<td>{_money(d['ours']['credits'], digits=4)}</td>"
        f"<td>{_money(d['cli']['credits'], digits=4)}</td><td>{d['ours']['calls']}</td>"
        f"<td>{d['cli']['calls']}</td></tr>"
        for check in wrong for d in check.differences)
    if not rows:
        return summary
    return summary + _boxed(
        '<table class="figures"><thead><tr><th>session</th><th>totals</th>'
        '<th>model</th><th>our credits</th><th>CLI credits</th><th>our calls</th>'
        f'<th>CLI calls</th></tr></thead><tbody>{rows}</tbody></table>')


def _ledger(snap: Snapshot) -> str:
    """The logs against the CLI's ledger: one line, a row per session that differs, and
    those it holds without a log; nothing when it was not checked."""
    found = snap.ledger
    if found is None or found.status != ledger_check.CHECKED:
        return ""
    summary = (f'<p class="checks ledger" data-checked="{found.sessions_checked}" '
               f'data-differ="{len(found.differ)}">'
               + (f'<b class="bad">{escape(ledger_check.summary(found))}</b>' if found.differ
                  else f'<b class="good">{escape(ledger_check.summary(found))}</b>') + "</p>")
    rows = "".join(
        f"<tr><td>{escape(differs.session_id[:8])}</td>"
        f'<td class="text">{escape(ledger_check.described(differs))}</td></tr>'
        for differs in found.differ)
    rows += "".join(
        f'<tr><td>{escape(only.session_id[:8])}</td><td class="text">in the CLI\'s ledger '
        f"without a log: {counted(only.cli.calls, 'call')}</td></tr>"
        for only in found.only_in_ledger)
    if found.only_in_ledger_unnamed:
        rows += (f'<tr><td></td><td class="text">'
                 f"{counted(found.only_in_ledger_unnamed, 'more session')} "
                 "in the CLI's ledger without a log</td></tr>")
    if not rows:
        return summary
    return summary + _boxed('<table class="figures"><thead><tr><th>session</th><th>the log '
                            f"against the CLI's ledger</th></tr></thead><tbody>{rows}</tbody>"
                            "</table>")


# The chart's sizes, in its own units: a phone draws it at under half of them, so its axis
# text is 22 units there (report_page.css) and each label is given room for that.
CHART_WIDTH, CHART_HEIGHT, CHART_TOP, CHART_BOTTOM, CHART_RIGHT = 720, 214, 18, 40, 8
DIGIT_WIDTH = 14  # a digit of the phone's axis text, with a little to spare
DAY_LABEL_ROOM = 76  # a day's label (`10-01`) at that size, and a gap
POLICY_CHAR = 7  # a character of a policy's label (11 units, drawn only on a wider screen)


def _day_chart(snap: Snapshot, colors: dict[str, str]) -> str:
    """Stacked bars, one per day with turns, the biggest spender at the bottom."""
    days = snap.by_day
    if not days:
        return '<p class="empty">No turns.</p>'
    width, height, top = CHART_WIDTH, CHART_HEIGHT, CHART_TOP
    most = _nice_ceiling(max(day.credits or 0.0 for day in days))
    ticks = [most * tick / 4 for tick in range(5)]
    left = 12 + DIGIT_WIDTH * max(len(f"{value:g}") for value in ticks)
    plot_w, plot_h = width - left - CHART_RIGHT, height - CHART_BOTTOM - top
    step = plot_w / len(days)
    bar = max(1.0, min(48.0, step * 0.7))
    parts = [f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" '
             f'aria-label="credits per day by model">']
    for tick, value in enumerate(ticks):
        y = top + plot_h - plot_h * tick / 4
        parts.append(f'<line class="grid" x1="{left}" x2="{width - CHART_RIGHT}" y1="{y:.1f}" '
                     f'y2="{y:.1f}"/><text class="axis" x="{left - 6}" y="{y + 4:.1f}" '
                     f'text-anchor="end">{value:g}</text>')
    label_every = math.ceil(DAY_LABEL_ROOM / step)
    for index, day in enumerate(days):
        x = left + step * index + (step - bar) / 2
        y = top + plot_h
        for spend in snap.by_model:
            credits = day.credits_by_model.get(spend.name) or 0.0
            if credits <= 0:
                continue
            h = plot_h * credits / most
            y -= h
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{h:.1f}" '
                f'fill="{colors[spend.name]}"><title>{escape(day.key)} · {escape(spend.name)}: '
                f'{credits:.2f} credits</title></rect>')
        parts.append(f'<rect class="day-hit" x="{x:.1f}" y="{top}" width="{bar:.1f}" '
                     f'height="{plot_h}"><title>{escape(day.key)}: {day.turns} turns, '
                     f'{_money(day.credits, day.unknown_credit_calls)} credits</title></rect>')
        if index % label_every == 0 and x + bar / 2 + DAY_LABEL_ROOM / 2 <= width:
            parts.append(f'<text class="axis" x="{x + bar / 2:.1f}" y="{height - 5}" '
                         f'text-anchor="middle">{escape(day.key[5:])}</text>')
    parts += _policy_marks(days, left, step, plot_h)
    parts.append("</svg>")
    return "".join(parts) + _legend([(spend.name, colors[spend.name]) for spend in snap.by_model])


def _policy_marks(days: list, left: float, step: float, plot_h: float) -> list[str]:
    """A dashed line before each day a new version of the router's policy first appeared,
    with the version written beside it where it fits: right of its line, else left of it,
    else not at all (it is in the line's tooltip and in the policy versions' table), so
    no label runs over another or off the chart."""
    marks, free_from = [], left
    for index, day in enumerate(days):
        if not day.new_policy_versions:
            continue
        x = left + step * index
        names = ", ".join(day.new_policy_versions)
        room = POLICY_CHAR * len(names)
        label = ""
        if x + 3 >= free_from and x + 3 + room <= CHART_WIDTH - CHART_RIGHT:
            label = f'<text class="axis" x="{x + 3:.1f}" y="{CHART_TOP - 4}">'
            free_from = x + 3 + room + 6
        elif x - 3 - room >= free_from:
            label = f'<text class="axis" x="{x - 3:.1f}" y="{CHART_TOP - 4}" text-anchor="end">'
            free_from = x + 6
        marks.append(
            f'<g class="policy" data-day="{escape(day.key)}" '
            f'data-policy="{escape(" ".join(day.new_policy_versions))}">'
            f'<line class="policy-mark" x1="{x:.1f}" x2="{x:.1f}" y1="{CHART_TOP}" '
            f'y2="{CHART_TOP + plot_h}"/>' + (f"{label}{escape(names)}</text>" if label else "")
            + f"<title>{escape(day.key)}: router policy {escape(names)} first seen</title></g>")
    return marks


def _share(name: str, spends: list, colors: dict[str, str], total: float | None,
           parts: bool = False) -> str:
    """One bar split by share of credits, and a table with the figures and every kind of
    token the spends count (`name` tells the page's tests which table it is); with `parts`
    (models: ModelUse), the credits of their fusion legs and ordinary calls apart too. A
    model whose credits are unknown keeps its row, its calls and tokens: only its credits
    and share are unknown (–)."""
    if not spends:
        return '<p class="empty">No credits.</p>'
    bar, rows = [], []
    for spend in spends:
        share = spend.credits / total if total and spend.credits is not None else None
        color = colors[spend.name]
        if share:
            bar.append(f'<span style="width:{100 * share:.3f}%;background:{color}" '
                       f'title="{escape(spend.name)}: {100 * share:.1f}%"></span>')
        rows.append(
            f'<tr data-name="{escape(spend.name)}" data-credits="{_raw(spend.credits)}" '
            f'data-unknown="{spend.unknown_credit_calls}">'
            f'<td class="name"><i style="background:{color}"></i>{escape(spend.name)}</td>'
            f'<td>{_count(spend.legs)}</td><td>{_count(spend.calls)}</td>'
            f'<td>{_money(spend.credits, spend.unknown_credit_calls)}</td>'
            + (f'<td>{_money(spend.fusion.credits, spend.fusion.unknown_credit_calls)}</td>'
               f'<td>{_money(spend.ordinary.credits, spend.ordinary.unknown_credit_calls)}</td>'
               if parts else "")
            + "".join(f'<td data-tokens="{field}">{_count(getattr(spend, field))}</td>'
                      for field, _ in TOKEN_KINDS)
            + f'<td>{_percent(share)}</td></tr>')
    credit_heads = ("<th>credits</th><th>in HydraFusion turns</th><th>in ordinary prompts</th>"
                    if parts else "<th>credits</th>")
    return (f'<div class="share-bar">{"".join(bar)}</div>'
            + _boxed(f'<table class="figures" data-share="{name}"><thead>'
                     f'<tr class="over"><th colspan="{4 + 2 * parts}"></th>'
                     f'<th colspan="{len(TOKEN_KINDS)}">tokens (input uncached)</th><th></th></tr>'
                     f'<tr><th></th><th>legs</th><th>calls</th>{credit_heads}'
                     + "".join(f"<th>{label}</th>" for _, label in TOKEN_KINDS)
                     + f'<th>share</th></tr></thead><tbody>{"".join(rows)}</tbody></table>'))


def _pattern_table(snap: Snapshot) -> str:
    rows = "".join(
        f'<tr><td>{escape(p.pattern)}</td><td>{p.turns}</td>'
        f'<td>{_money(p.credits, p.unknown_credit_calls)}</td><td>{_money(p.median_credits)}</td>'
        f'<td>{"–" if p.min_credits is None else f"{p.min_credits:.2f} – {p.max_credits:.2f}"}'
        f'</td></tr>'
        for p in snap.by_pattern)
    return _boxed('<table class="figures"><thead><tr><th>pattern</th><th>turns</th>'
                  '<th>credits</th><th>median per turn</th><th>range</th></tr></thead>'
                  f'<tbody>{rows}</tbody></table>')


def _router_table(snap: Snapshot) -> str:
    """Each version of the router's policy: when it was seen, its pattern mix and costs."""
    if not snap.router:
        return '<p class="empty">No routed turns.</p>'
    rows = "".join(
        f'<tr data-policy="{escape(policy.policy_version or "unknown")}">'
        f'<td>{escape(policy.policy_version or "unknown")}</td>'
        f'<td>{escape(_minute(policy.first_seen))}</td><td>{escape(_minute(policy.last_seen))}</td>'
        f'<td>{policy.turns}</td><td>{_percent(policy.compound_rate)}</td><td class="patterns">'
        + ", ".join(f"<span>{escape(pattern)} {turns} ({_money(policy.median_credits[pattern])})"
                    "</span>" for pattern, turns in policy.patterns.items())
        + "</td></tr>"
        for policy in snap.router)
    return _boxed('<table class="figures router"><thead><tr><th>policy version</th>'
                  '<th>first seen</th><th>last seen</th><th>turns</th><th>compound</th>'
                  '<th>patterns (median credits per turn)</th></tr></thead>'
                  f'<tbody>{rows}</tbody></table>')


def _worth(snap: Snapshot) -> str:
    """The table's "worth it" section (tailer/report/worth.py): what the review and the
    gate cost, measured; the same work on one model and the fitted prices, each a table
    captioned as an estimate."""
    worth = snap.worth
    if worth is None or not worth.by_pattern:
        return '<p class="empty">No HydraFusion turns.</p>'

    def table(caption: str, heads: list[str], rows: list[list[str]], estimate: bool = False) -> str:
        if not rows:
            return ""
        head = "".join(f"<th>{escape(name)}</th>" for name in heads)
        body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
        mark = ' class="figures estimate"' if estimate else ' class="figures"'
        return _boxed(f"<table{mark}><caption>{escape(caption)}</caption><thead><tr>{head}</tr>"
                      f"</thead><tbody>{body}</tbody></table>")

    def measured(group) -> list[str]:
        return [escape(group.key), str(group.turns), _money(group.credits, group.unknown_credit_calls),
                _money(group.answer.credits, group.answer.unknown_credit_calls),
                _money(group.review.credits, group.review.unknown_credit_calls)]

    def estimated(estimate) -> list[str]:
        saved = (None if estimate.alone is None or estimate.credits is None
                 else estimate.alone - estimate.credits)
        return [f"{estimate.turns}/{estimate.turns + estimate.not_estimated}",
                _money(estimate.credits, estimate.unknown_credit_calls), _money(estimate.alone),
                _money(estimate.error), "–" if saved is None else f"{saved:+.2f}"]

    alone = "estimated of all, their credits, one model alone (estimate), ±, saved (estimate)"
    refused = "".join(f"<li>{escape(model.model)}: not fitted ({escape(model.fit.replace('_', ' '))}, "
                      f"{counted(model.calls, 'call')} of known credits)</li>"
                      for model in worth.prices if model.fit != "fitted")
    return "".join([
        table("Credits kept (the answer) and not kept (review: judges, critics, drafts, failed legs)",
              ["pattern", "turns", "credits", "kept", "not kept", "review"],
              [measured(group) + [_percent(group.review_share)] for group in worth.by_pattern]),
        table("The median turn on its answering model against the median single turn there",
              ["pattern on model", "turns", "median", "single turns", "single median", "× single"],
              [[escape(f"{item.pattern} on {item.model}"), str(item.turns), _money(item.median_credits),
                str(item.single_turns), _money(item.single_median_credits),
                "–" if item.ratio is None else f"{item.ratio:.2f}×"] for item in worth.versus_single]),
        table("The gate of a cascade: accepted (the draft kept), rejected (the repair kept, the "
              "draft and judge on top), unjudged; beside the same work on one model (estimate)",
              ["gate", "turns", "credits", "kept", "not kept", *alone.split(", ")],
              [measured(group) + estimated(group.one_model) for group in worth.gate], estimate=True),
        table("The same work on one model, by pattern and policy version: an estimate, the kept "
              "leg's tokens at the answering model's fitted prices",
              ["group", *alone.split(", ")],
              [[escape(group.key)] + estimated(group.one_model)
               for group in worth.by_pattern + worth.by_policy_version], estimate=True),
        table("Prices per 1M tokens, fitted by least squares from your calls of known credits "
              "(an estimate; error: of one call, over its mean)",
              ["model", "calls", "unknown", "input", "cache read", "cache write", "output", "error"],
              [[escape(model.model), str(model.calls), str(model.unknown_credit_calls),
                *("–" if model.prices[kind] is None else f"{model.prices[kind] * 1e6:.4g}"
                  for kind in ("input", "cache_read", "cache_write", "output")),
                _percent(model.relative_error)]
               for model in worth.prices if model.fit == "fitted"], estimate=True),
        f'<ul class="refused">{refused}</ul>' if refused else "",
    ])


def _legend(items: list[tuple[str, str]]) -> str:
    return '<ul class="legend">' + "".join(
        f'<li><i style="background:{color}"></i>{escape(name)}</li>' for name, color in items
    ) + "</ul>"


def _options(values: list[str]) -> str:
    return "".join(f'<option value="{escape(v)}">{escape(v)}</option>' for v in values)


def _embedded(snap: Snapshot, colors: dict[str, str]) -> str:
    """The turns for the script, compact (5,000 turns make a few MB), safe inside <script>."""
    models = list(colors)
    index = {model: number for number, model in enumerate(models)}
    turns = [_turn_object(turn, index) for turn in snap.turns]
    text = json.dumps({"models": models, "colors": [colors[m] for m in models], "turns": turns},
                      separators=(",", ":"))
    # Nothing in it may end the script element or start markup.
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _turn_object(turn: TurnRow, index: dict[str, int]) -> dict:
    """A turn for the script: its figures, legs, calls and tools, models by their index."""
    calls, tools = turn.printed.calls_and_tools()
    return {
        "t": turn.start, "s": turn.session_id, "f": turn.fusion_id, "k": turn.kind,
        "p": turn.pattern, "o": turn.outcome, "c": _rounded(turn.credits, 4),
        "u": turn.unknown_credit_calls, "n": turn.calls,
        "d": round(turn.duration_ms, 1), "r": turn.routing_ms,
        "why": turn.degraded_reason or turn.route_failure_reason, "pv": turn.policy_version,
        "l": [{"m": index[leg.model], "k": leg.kind, "s": leg.status, "v": leg.verdict,
               "a": int(leg.committed), "t": round(leg.start_ms, 1), "d": leg.duration_ms,
               "c": _rounded(leg.credits, 4), "u": leg.unknown_credit_calls, "n": leg.calls,
               "i": leg.input_tokens, "o": leg.output_tokens, "h": leg.cache_read_tokens,
               "w": leg.cache_write_tokens}
              for leg in turn.legs],
        "calls": [{"g": call.leg, "m": index[call.model], "t": round(call.start_ms, 1),
                   "d": call.duration_ms, "c": _rounded(call.credits, 4), "i": call.input_tokens,
                   "o": call.output_tokens, "h": call.cache_read_tokens,
                   "w": call.cache_write_tokens, "f": call.finish_reason}
                  for call in calls],
        "tools": [{"g": tool.leg, "n": tool.name, "ok": tool.success, "t": round(tool.start_ms, 1),
                   "d": round(tool.duration_ms, 1), "w": tool.timing}
                  for tool in tools],
    }


def _nice_ceiling(value: float) -> float:
    """The axis top: 1, 2, 2.5 or 5 times a power of ten, at least `value`."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return next(factor * power for factor in (1, 2, 2.5, 5, 10) if factor * power >= value)


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _money(credits: float | None, unknown: int = 0, digits: int = 2) -> str:
    """Credits as the page shows them: `–` when none is known, `≥` before those that leave
    out calls of unknown credits (figures.py)."""
    if credits is None:
        return "–"
    return ("≥" if unknown else "") + f"{credits:.{digits}f}"


def _raw(value: float | None) -> str:
    """A figure for a data- attribute: empty when it is unknown."""
    return "" if value is None else repr(value)


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _count(count: int) -> str:
    """A count as the page's script writes one too (report_page.js, count): exact, with
    thousands separators."""
    return f"{count:,}"


def _boxed(table: str) -> str:
    """A table in a box of its own that scrolls sideways when the table is wider than the
    panel (on a phone), so the page never does."""
    return f'<div class="table-box">{table}</div>'


def _minute(moment: str) -> str:
    return moment[:16].replace("T", " ")


_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>HydraFusion report</title>
<style>
{style}</style>
</head>
<body>
<header>
<h1>HydraFusion report</h1>
<p class="sub">{subtitle}</p>
</header>
<main>
<section class="cards">
{cards}
</section>
<section class="panels">
<div class="panel wide"><h2>Credits per day, by model: HydraFusion turns (dashed: a new router policy)</h2>{days}</div>
<div class="panel"><h2>Fusion and ordinary prompts</h2>{kinds}</div>
<div class="panel"><h2>The CLI's own totals</h2>{checks}</div>
<div class="panel"><h2>By pattern: HydraFusion turns</h2>{patterns}</div>
<div class="panel wide"><h2>Credit share by model: all use</h2>{model_share}</div>
<div class="panel wide"><h2>Credit share by leg kind: HydraFusion turns</h2>{kind_share}</div>
<div class="panel wide"><h2>The router's policy versions</h2>{router}</div>
<div class="panel wide"><h2>Was fusion worth it: HydraFusion turns</h2>{worth}</div>
</section>
<section class="panel turns">
<h2>Turns</h2>
<div class="filters">
<input id="filter-text" type="search" placeholder="Filter: model, session or fusion id" aria-label="filter">
<select id="filter-kind" aria-label="kind"><option value="">every kind</option>{kind_options}</select>
<select id="filter-pattern" aria-label="pattern"><option value="">every pattern</option>{pattern_options}</select>
<select id="filter-outcome" aria-label="outcome"><option value="">every outcome</option>{outcome_options}</select>
<select id="filter-model" aria-label="model"><option value="">every model</option>{model_options}</select>
<span id="turn-count"></span>
</div>
<p class="hint">Newest first. Open a turn to see its legs, model calls and tools on a time axis; <b>★</b> marks the leg whose answer was kept. An ordinary prompt was answered without fusion, by the model of its calls.</p>
<table id="turn-list"><thead><tr><th>started</th><th>session</th><th>pattern</th><th>legs</th><th class="num">credits</th><th class="num">calls</th><th class="num">tools</th><th class="num">duration</th><th>outcome</th></tr></thead><tbody id="turn-rows"></tbody></table>
<button id="more" type="button" hidden>Show more</button>
</section>
</main>
<script type="application/json" id="report-data">{data}</script>
<script>
{script}</script>
</body>
</html>
"""
