"""The report as a table for people: plain ASCII that fits a width, colour optional.

A pure function of a report_figures.Snapshot. Plain ASCII, because a Windows console or a
redirected file may take nothing else; colour is the caller's decision (a terminal, and no
NO_COLOR) and never changes the layout, so the coloured and the plain table line up the
same. Every name from a log (model, pattern, outcome, verdict, leg kind, session id) goes
through printable() before it is measured or cut, so a value can neither drive the
terminal nor break a row, and the escapes it shows instead count in the column widths; a
session id, the name of a folder and so any text, through one_column() as every cell of a
table, so a wide or zero-width character cannot move the columns after it either.
"""

from __future__ import annotations

from ..printable import one_column, printable
from ..wording import counted
from ..turns import ledger_check
from .figures import Snapshot, Spend
from .rows import LegRow, TurnRow
from .wrap import commas, cut as _cut, fit as _fit, flow, prose as _prose

BOLD, DIM, RED, GREEN, YELLOW, MAGENTA = "1", "2", "31", "32", "33", "35"
# The leg kinds a reader takes for granted: a turn's first answer. Others are named.
_PLAIN_KINDS = ("primary", "draft")


def render_table(snap: Snapshot, *, width: int = 100, color: bool = False,
                 height: int | None = None, turns: int | None = None) -> str:
    """The report for a terminal. With `height`, at most that many lines: the summary, then
    as many of the newest turns as fit (what --watch shows). With `turns`, only the newest
    that many turns (0: the summary alone)."""
    paint = _painter(color)
    sections = _sections(snap, width, paint)
    shown = snap.turns if turns is None else snap.turns[len(snap.turns) - turns:] if turns else []
    cells = list(zip(*(map(cell, shown) for _, cell, _ in TURN_COLUMNS)))  # made once, a loop in C a column
    columns = _turn_columns(cells, width)  # of every turn shown, so the widths never jump
    # Each turn takes a line or more: on a screen of `height` lines, the newest `height`
    # turns are the most that can be drawn (a watch over 10,000 turns draws some 30).
    drawable = len(shown) if height is None else min(height, len(shown))
    blocks = _turn_blocks(shown[len(shown) - drawable:], cells[len(cells) - drawable:], columns,
                          width, paint, shown[-drawable - 1].start[:10] if drawable < len(shown) else None)
    turns_heading = _turns_heading(len(shown), len(snap.turns), width, paint)
    dropped = []
    if shown:
        header, note = _turn_header(columns, width, any(block.beside for block in blocks))
        turns_heading.append(paint(BOLD, header))
        dropped = [paint(DIM, line) for line in note]
    if height is None:
        turn_lines = _headed(blocks)
    else:
        sections = kept_sections(sections, height)
        room = height - sum(map(len, sections)) - len(turns_heading) - len(dropped)
        turn_lines = _newest(blocks, room)
    lines = [line for section in sections for line in section]
    if shown:
        lines += turns_heading + turn_lines + dropped
    return "".join(_fit(line, width) + "\n" for line in lines[:height])


def kept_sections(sections: list[list[str]], height: int) -> list[list[str]]:
    """The summary's sections a screen of `height` lines keeps, its least read tables given
    up first until half the height is left for the newest turns (render_table, live)."""
    kept = list(sections)
    while len(kept) > 1 and sum(map(len, kept)) > height // 2:
        kept.pop()
    return kept


def _turns_heading(shown: int, turns: int, width: int, paint) -> list[str]:
    """`TURNS  the newest 3 of 29  (* the leg ...)`, on as many lines as `width` needs."""
    parts = ["TURNS"] + ([f" the newest {shown:,} of {turns:,}"] if shown < turns else [])
    parts += [" (* the leg whose answer was kept; ordinary: the models of its calls)"]
    first, *rest = flow(parts, width)
    return [paint(BOLD, "TURNS") + paint(DIM, first[len("TURNS"):])] + [paint(DIM, line)
                                                                        for line in rest]


def _sections(snap: Snapshot, width: int, paint) -> list[list[str]]:
    """The summary, one list of lines per section, the ones to keep longest first."""
    head = snap.headline
    lines = _title_lines(snap, width, paint)
    if snap.filters:
        lines += flow(["only"] + [one_column(f"--{k} {v}") for k, v in snap.filters.items()], width)
    lines.append("")
    lines += _cards([
        ("turns", f"{head.turns:,}"),
        ("credits", _credits(head.credits) + (
            f" ({counted(head.unknown_credit_calls, 'call')} unknown)"
            if head.unknown_credit_calls else "")),
        ("compound rate", _percent(head.compound_rate)),
        ("judge rejections", _percent(head.judge_rejection_rate)
         + (f" ({head.rejected_turns:,}/{head.judged_turns:,})" if head.judged_turns else "")),
        ("review share", _percent(head.review_share)),
        ("cache share of input", _percent(head.cache_share)),
    ], width, paint)
    notes = [f"{count:,} {printable(outcome)}" for outcome, count in head.outcomes.items()]
    notes += [counted(head.calls, "call"), counted(head.tools, "tool")]
    if head.failed_legs:
        notes.append(f"{counted(head.failed_legs, 'failed or cancelled leg')}")
    skipped = snap.skipped
    if skipped["damaged_lines"]:
        notes.append(f"{counted(skipped['damaged_lines'], 'damaged line')} skipped")
    if skipped["unreadable_logs"]:
        notes.append(f"{counted(skipped['unreadable_logs'], 'log')} unreadable")
    lines += flow(["above, HydraFusion turns only:"] + commas(notes), width)
    lines += _all_usage(head.all_usage, width)
    unknown = sum(kind.unknown_credit_calls for kind in snap.by_kind)
    if unknown:
        lines += _prose(f"credits leave out {counted(unknown, 'call')} whose credits the CLI "
                        "did not give: >= at least, - none known", width)
    lines.append("")
    spend_headers = ["legs", "calls", "credits", "share", "input", "output", "cache read"]
    return [
        lines,
        _table(width, paint, ["BY KIND", "turns", "credits", "median", "calls", "tools",
                              "median time"], [
            [k.kind, k.turns, _credits(k.credits, k.unknown_credit_calls),
             _credits(k.median_credits), k.calls, k.tools, _duration(k.median_duration_ms)]
            for k in snap.by_kind
        ]) + _paragraph(_checks(snap, width, paint) + _ledger(snap, width, paint)),
        _table(width, paint, ["BY MODEL, all use"] + spend_headers, _model_rows(snap),
               left_out_first=SPEND_LEFT_OUT_FIRST),
        _table(width, paint, ["BY PATTERN, HydraFusion", "turns", "credits", "median", "range"], [  # PATTERN_SECTION
            [p.pattern, p.turns, _credits(p.credits, p.unknown_credit_calls),
             _credits(p.median_credits),
             "-" if p.min_credits is None else f"{_credits(p.min_credits)} - {_credits(p.max_credits)}"]
            for p in snap.by_pattern
        ]),
        _table(width, paint, ["BY LEG KIND, HydraFusion"] + spend_headers,
               _spend_rows(snap.by_leg_kind, head.credits), left_out_first=SPEND_LEFT_OUT_FIRST),
        worth_section(snap, width, paint),  # WORTH_SECTION
        _table(width, paint, ["ROUTER, policy version", "first seen", "last seen", "turns",
                              "compound", "median"], _router_rows(snap),
               left_out_first=("last seen", "first seen")),
        _day_table(snap, width, paint),
    ]


def _all_usage(usage, width: int) -> list[str]:
    """Every prompt's use beside the headline's HydraFusion figures: the total of `--by`."""
    credits = f"{_credits(usage.credits)} credits" + (
        f" ({counted(usage.unknown_credit_calls, 'call')} unknown)"
        if usage.unknown_credit_calls else "")
    return flow(["all usage:"] + commas([
        f"{counted(usage.prompts, 'prompt')} ({usage.ordinary.prompts} ordinary)",
        counted(usage.calls, "call"), credits,
        f"input {_count(usage.input_tokens)} (uncached)", f"output {_count(usage.output_tokens)}",
        f"cache read {_count(usage.cache_read_tokens)}",
        f"cache write {_count(usage.cache_write_tokens)}",
        f"total {_count(usage.total_tokens)} tokens"]), width)


def _checks(snap: Snapshot, width: int, paint) -> list[str]:
    """The CLI's own totals against our sums: one line, and one per model that differs."""
    checks = snap.reconciliation
    if not checks:
        return []
    wrong = [check for check in checks if not check.agrees]
    lines = flow(["CLI totals:", f"{len(checks):,} checked,",
                  paint(RED, f"{len(wrong):,} differ") if wrong else "all match our sums"], width)
    for check in wrong:
        for difference in check.differences:
            ours, cli = difference["ours"], difference["cli"]
            lines += _prose(one_column(
                f"  {check.session_id[:8]} {check.source}: {difference['model']} ours "
                f"{_credits(ours['credits'])} credits / {ours['calls']:,} calls, CLI "
                f"{_credits(cli['credits'])} / {cli['calls']:,}"), width)
    return lines


def _paragraph(lines: list[str]) -> list[str]:
    """Lines with a blank one after them, or none."""
    return lines + [""] if lines else []


LEDGER_ONLY_SHOWN = 10  # sessions of the CLI's ledger without a log named; JSON has them all


def _ledger(snap: Snapshot, width: int, paint) -> list[str]:
    """The logs against the CLI's ledger: one line, one per session that differs, those it
    holds without a log. Nothing when it was not checked (stderr said why, if it was there)."""
    found = snap.ledger
    if found is None or found.status != ledger_check.CHECKED:
        return []
    summary = ledger_check.summary(found).split(" ")
    # Each word painted, so the colour holds on whichever line a word lands.
    lines = flow([paint(RED, word) for word in summary] + ["(ours vs the ledger's)"]
                 if found.differ else summary, width)
    for differs in found.differ:
        head = f"  {one_column(differs.session_id[:8])}"
        lines += flow([head] + commas(_differing(differs)), width, " " * (len(head) + 1))
    said = []
    if found.credits_not_compared:
        said.append(f"  credits of {counted(found.credits_not_compared, 'session')} not "
                    "compared: a call's credits unknown")
    if found.not_in_ledger:
        said.append(f"  {counted(found.not_in_ledger, 'log')} with calls the ledger has none of")
    if found.logs_without_start:
        said.append(f"  {counted(found.logs_without_start, 'log')} read without its start: "
                    "not compared")
    only = found.only_in_ledger
    unnamed = found.only_in_ledger_unnamed
    if only or unnamed:
        said.append("in the CLI's ledger without a log: "
                    + counted(len(only) + unnamed, "session"))
    for missing in only[:LEDGER_ONLY_SHOWN]:
        credits = "unknown" if missing.cli.credits is None else _credits(missing.cli.credits)
        said.append(f"  {missing.session_id[:8]}: {counted(missing.cli.calls, 'call')}, "
                    f"{credits} credits")
    left = len(only) - LEDGER_ONLY_SHOWN + unnamed if len(only) > LEDGER_ONLY_SHOWN else unnamed
    if left:
        said.append(f"  and {left:,} more (--format json lists them)")
    return lines + [line for text in said for line in _prose(text, width)]


_LEDGER_WORDS = {"calls": "calls", "input_tokens": "input", "output_tokens": "output",
                 "cache_read_tokens": "cache read", "cache_write_tokens": "cache write",
                 "credits": "credits"}


def _differing(differs) -> list[str]:
    """`calls 2 vs 3`, `credits 1.75 vs 3.25`: each figure that differs, exact, both sides."""
    def shown(value):
        if value is None:
            return "unknown"
        return f"{value:,.9g}" if isinstance(value, float) else f"{value:,}"

    return [f"{_LEDGER_WORDS[name]} {shown(getattr(differs.ours, name))} vs "
            f"{shown(getattr(differs.cli, name))}" for name in differs.figures]


def _title_lines(snap: Snapshot, width: int, paint) -> list[str]:
    """`HydraFusion: 26 turns (+3 ordinary), 5 sessions, 2026-11-30 15:36 - 2026-12-01 22:00
    Europe/Berlin`, broken between its parts where `width` needs (the time span kept whole)."""
    ordinary = sum(kind.turns for kind in snap.by_kind if kind.kind == "ordinary")
    parts = [f"HydraFusion: {counted(snap.headline.turns, 'turn')}"
             + (f" (+{ordinary:,} ordinary)," if ordinary else ","),
             counted(snap.sessions, "session") + ("," if snap.first_turn else "")]
    if snap.first_turn:
        parts.append(f"{_minute(snap.first_turn)} - {_minute(snap.last_turn)}")
    parts.append(printable(snap.timezone))
    return [paint(BOLD, line) for line in flow(parts, width)]


def _cards(cards: list[tuple[str, str]], width: int, paint) -> list[str]:
    """Figures as labelled columns, wrapped onto more rows when they do not fit."""
    lines, labels, values, used = [], [], [], 0
    for label, value in cards:
        size = max(len(label), len(value)) + 3
        if used and used + size > width:
            lines += ["".join(labels).rstrip(), "".join(values).rstrip()]
            labels, values, used = [], [], 0
        labels.append(paint(DIM, label.rjust(size)))
        values.append(paint(BOLD, value.rjust(size)))
        used += size
    return lines + ["".join(labels).rstrip(), "".join(values).rstrip()]


def _spend_rows(spends: list[Spend], total: float | None, label: str | None = None) -> list[list]:
    return [[label or s.name, s.legs, s.calls, _credits(s.credits, s.unknown_credit_calls),
             _percent(s.credits / total if total and s.credits is not None else None),
             _count(s.input_tokens), _count(s.output_tokens), _count(s.cache_read_tokens)]
            for s in spends]


def _router_rows(snap: Snapshot) -> list[list]:
    """A row per version of the router's policy, in the order they first appeared, and
    under it one per pattern it chose: its turns and median credits."""
    rows = []
    for policy in snap.router:
        rows.append([policy.policy_version or "unknown", _minute(policy.first_seen),
                     _minute(policy.last_seen), policy.turns, _percent(policy.compound_rate), ""])
        rows += [["  " + pattern, "", "", turns, "", _credits(policy.median_credits[pattern])]
                 for pattern, turns in policy.patterns.items()]
    return rows


def _minute(moment: str) -> str:
    return moment[:16].replace("T", " ")


def _model_rows(snap: Snapshot) -> list[list]:
    """Each model's whole use, then its two parts when it has both, labelled."""
    total = sum(use.credits or 0.0 for use in snap.by_model)
    rows = []
    for use in snap.by_model:
        rows += _spend_rows([use], total)
        if use.fusion.calls and use.ordinary.calls:
            rows += _spend_rows([use.fusion], total, "  in HydraFusion turns")
            rows += _spend_rows([use.ordinary], total, "  in ordinary prompts")
    return rows


def _day_table(snap: Snapshot, width: int, paint) -> list[str]:
    rows = [[day.key, day.turns, _credits(day.credits, day.unknown_credit_calls)]
            for day in snap.by_day]
    lines = _table(width, paint, ["PER DAY, HydraFusion", "turns", "credits"], rows, blank=False)
    if not rows:
        return lines
    room = width - len(lines[1]) - 2
    most = max(day.credits or 0.0 for day in snap.by_day) or 1
    for index, day in enumerate(snap.by_day, 1):
        if room > 4:
            credits = day.credits or 0.0
            lines[index] += "  " + "#" * max(1 if credits else 0, round(room * credits / most))
    return lines + [""]


# -- Was fusion worth it (tailer/report/worth.py) ---------------------------------------------

_ESTIMATE_NOTE = "  * an estimate: the kept leg's tokens at the answering model's fitted prices"
_REFUSED = {
    "too_few_calls": "too few calls (3 a price at least)",
    "singular": "its calls cannot tell the prices apart",
    "ill_conditioned": "its calls can hardly tell the prices apart",
}


def worth_section(snap: Snapshot, width: int, paint) -> list[str]:
    """What the review bought and the gate saved (measured), then the same work on one
    model and the prices it is made with (estimates, labelled so on every line that holds
    one); nothing without HydraFusion turns."""
    worth = snap.worth
    if worth is None or not worth.by_pattern:
        return []
    lines = _table(width, paint, ["WORTH IT, by pattern", "turns", "credits", "kept",
                                  "not kept", "review"],
                   [_worth_row(group) for group in worth.by_pattern], blank=False)
    lines += _note("  kept: the leg whose answer the user got; not kept: judges, critics, "
                   "drafts, failed legs", width, paint)
    lines.append("")
    lines += _table(width, paint, ["MEDIAN TURN vs SINGLE, on", "turns", "median",
                                   "single turns", "single median", "x single"],
                    [[f"{versus.pattern} on {versus.model}", versus.turns,
                      _credits(versus.median_credits), versus.single_turns,
                      _credits(versus.single_median_credits),
                      "-" if versus.ratio is None else f"{versus.ratio:.2f}x"]
                     for versus in worth.versus_single])
    if worth.gate:
        lines += _table(width, paint, ["THE GATE, cascade", "turns", "credits", "kept",
                                       "not kept", "estimated", "one model*", "saved*"],
                        [_gate_row(group) for group in worth.gate], blank=False)
        lines += _note("  accepted: the draft kept, its judge not; rejected: the repair kept, "
                       "the draft and judge on top", width, paint)
        lines.append("")
    rows = []
    for label, groups in (("by pattern", worth.by_pattern),
                          ("by policy version", worth.by_policy_version),
                          ("by day", worth.by_day or [])):
        if groups:
            rows.append([label] + [""] * 5)
            rows += [["  " + group.key, *_estimated(group.one_model)] for group in groups]
    lines += _table(width, paint, ["ONE MODEL ALONE*", "estimated", "measured", "one model*",
                                   "+/-", "saved*"], rows, blank=False)
    lines += _note(_ESTIMATE_NOTE, width, paint) + [""]
    return lines + _prices_table(worth.prices, width, paint)


def _worth_row(group) -> list:
    return [group.key, group.turns, _credits(group.credits, group.unknown_credit_calls),
            _credits(group.answer.credits, group.answer.unknown_credit_calls),
            _credits(group.review.credits, group.review.unknown_credit_calls),
            _percent(group.review_share)]


def _gate_row(group) -> list:
    """A gate outcome's measured figures, then the turns estimated, the estimate and what
    it saved (not its error: ONE MODEL ALONE has it)."""
    turns, _, alone, _, saved = _estimated(group.one_model)
    return _worth_row(group)[:5] + [turns, alone, saved]


def _estimated(estimate) -> list:
    """The turns estimated of all, their measured credits, the estimate, its error, and
    what fusion saved against it: the estimate less the measured credits of those turns."""
    turns = f"{estimate.turns:,}/{estimate.turns + estimate.not_estimated:,}"
    if estimate.alone is None:
        return [turns, "-", "-", "-", "-"]
    saved = None if estimate.credits is None else estimate.alone - estimate.credits
    return [turns, _credits(estimate.credits, estimate.unknown_credit_calls),
            _credits(estimate.alone), f"{estimate.error:,.2f}",
            "-" if saved is None else f"{saved:+,.2f}"]


def _prices_table(prices: list, width: int, paint) -> list[str]:
    """Each model's fitted prices per million tokens, with the fit's error per call; the
    models it refused to fit, each with why, under the table."""
    fitted = [model for model in prices if model.fit == "fitted"]
    lines = _table(width, paint, ["PRICES*, credits per 1M tokens", "calls", "unknown", "input",
                                  "cache read", "cache write", "output", "error"],
                   [[model.model, model.calls, model.unknown_credit_calls,
                     *(_per_million(model.prices[kind]) for kind in
                       ("input", "cache_read", "cache_write", "output")),
                     "-" if model.relative_error is None else f"{100 * model.relative_error:.1f}%"]
                    for model in fitted], blank=False)
    lines += [line for model in prices if model.fit != "fitted"
              for line in _prose(printable(f"  {model.model}: not fitted, {_REFUSED.get(model.fit, model.fit)}; "
                                           f"{counted(model.calls, 'call')} of known credits"), width)]
    if lines:
        lines += _note("  * least squares over your calls of known credits; input: uncached; "
                       "error: a call's, over its mean", width, paint) + [""]
    return lines


def _note(text: str, width: int, paint) -> list[str]:
    """A dimmed note under a table, wrapped between words (_prose), never cut."""
    return [paint(DIM, line) for line in _prose(text, width)]


def _per_million(price: float | None) -> str:
    return "-" if price is None else f"{price * 1e6:.4g}"


FIRST_COLUMN_KEPT = 24  # a name column is cut below this only when no other column is left
SESSION_ID_KEPT = 36  # a session id (a UUID) whole, as --session takes it: its tables keep it
# The columns of the tables by model and by leg kind a narrow terminal leaves out before the
# others: a share is the credits column over its total, and a model's legs are HydraFusion's.
SPEND_LEFT_OUT_FIRST = ("share", "legs")


def _table(width: int, paint, headers: list[str], rows: list[list], blank: bool = True,
           left_out_first: tuple[str, ...] = (), first_kept: int = FIRST_COLUMN_KEPT) -> list[str]:
    """Left-aligned first column, the rest right-aligned; a whole number with thousands
    separators. Where it does not fit, columns are left out, those `left_out_first` names
    first (in that order), then the others from the right (a line under the table names
    them), so the names keep up to `first_kept` characters; only then is the first column
    cut, its start kept. At least one column beside the names is kept."""
    if not rows:
        return []
    cells = [[f"{cell:,}" if isinstance(cell, int) else one_column(str(cell)) for cell in row]
             for row in rows]
    widths = [max(len(row[i]) for row in [headers] + cells) for i in range(len(headers))]
    order = [headers.index(name) for name in left_out_first if name in headers]
    order += [index for index in range(len(headers) - 1, 0, -1) if index not in order]
    kept, left_out = list(range(len(headers))), []
    first = min(widths[0], first_kept)
    while len(kept) > 2 and first + sum(widths[i] + 2 for i in kept[1:]) > width:
        left_out.append(order[len(left_out)])
        kept.remove(left_out[-1])
    widths[0] = max(8, min(widths[0], width - sum(widths[i] + 2 for i in kept[1:])))

    def line(row: list[str]) -> str:
        return "  ".join([_cut(row[0], widths[0]).ljust(widths[0])]
                         + [row[i].rjust(widths[i]) for i in kept[1:]])

    lines = [paint(BOLD, line(headers))] + [line(row) for row in cells]
    if left_out:
        lines += [paint(DIM, text) for text in _too_narrow([headers[i] for i in left_out], width)]
    return lines + ([""] if blank else [])


# -- One line (or a few) per turn -----------------------------------------------------------


class _TurnBlock:
    """The lines of one turn, the day it belongs to (the table heads each day), and whether
    its legs are beside its columns."""

    def __init__(self, day: str, first_of_day: bool, lines: list[str], beside: bool):
        self.day, self.first_of_day, self._lines, self.beside = day, first_of_day, lines, beside

    def lines(self, with_day: bool) -> list[str]:
        heading = [self.day] if self.first_of_day or with_day else []
        return heading + self._lines


# The turn list's columns: header, cell of a turn, right-aligned. Where the fixed columns
# do not fit, TURN_COLUMNS_DROPPED are left out in that order (a line under the list says
# which). A turn's legs go beside the columns where each of their labels fits there (they
# wrap after an arrow, under each other), else on the lines below.
TURN_COLUMNS = (
    ("started", lambda turn: turn.start[11:19], False),
    ("session", lambda turn: one_column(turn.session_id)[:8], False),
    ("pattern", lambda turn: _pattern(turn), False),
    ("credits", lambda turn: _credits(turn.credits, turn.unknown_credit_calls), True),
    ("calls/tools", lambda turn: _counts(turn), True),
    ("duration", lambda turn: _duration(turn.duration_ms), True),
    ("outcome", lambda turn: printable(turn.outcome), False),
)
TURN_COLUMNS_DROPPED = ("duration", "calls/tools", "session", "credits")


def _turn_columns(cells: list[tuple[str, ...]], width: int) -> list[tuple[str, int, int, bool]]:
    """The columns that fit in `width` (at least 2 + the started, pattern and outcome
    columns), each with its width and its place in a turn's `cells`; none without turns."""
    if not cells:
        return []
    columns = [(name, max(len(name), max(map(len, texts))), at, right)
               for at, ((name, _, right), texts) in enumerate(zip(TURN_COLUMNS, zip(*cells)))]
    for name in TURN_COLUMNS_DROPPED:
        if 2 + sum(column[1] + 2 for column in columns) <= width:
            break
        columns = [column for column in columns if column[0] != name]
    return columns


def _turn_header(columns: list[tuple[str, int, int, bool]], width: int,
                 beside: bool) -> tuple[str, list[str]]:
    """The turn list's header line (`legs` at its end when a turn's legs are `beside` the
    columns), and the lines naming the columns left out (none when all fit)."""
    head = "  " + "".join((name.rjust(w) if right else name.ljust(w)) + "  "
                          for name, w, _, right in columns)
    legs = "legs" if beside else "(legs below)"
    head = head + legs if len(head) + len(legs) <= width else head.rstrip()
    shown = {column[0] for column in columns}
    dropped = [name for name in TURN_COLUMNS_DROPPED if name not in shown]
    return _cut(head, width), _too_narrow(dropped, width) if dropped else []


def _turn_blocks(turns: list[TurnRow], cells: list[tuple[str, ...]],
                 columns: list[tuple[str, int, int, bool]], width: int, paint,
                 day: str | None) -> list[_TurnBlock]:
    """The turns' blocks in `columns`, of their `cells`; `day`: the turn's before the first."""
    blocks = []
    indent = 2 + sum(column[1] + 2 for column in columns)
    # A month's thousands of turns show a few hundred different lists of legs: each is
    # labelled and wrapped once.
    drawn_legs: dict[tuple, tuple[bool, list[str]]] = {}
    for turn, texts in zip(turns, cells):
        head = "  "
        for name, w, at, right in columns:
            text = texts[at]
            if name == "outcome":  # painted before it is padded: colour never ends in spaces
                head += _paint_outcome(turn.outcome, text, paint) + " " * (w - len(text)) + "  "
            else:
                head += (text.rjust(w) if right else text.ljust(w)) + "  "
        if turn.kind == "ordinary":
            beside, legs = _legs_lines(call_models(turn), None, indent, width, paint)
        else:
            key = (turn.kind == "fallback", *((leg.model, leg.kind, leg.verdict, leg.status, leg.committed)
                                              for leg in turn.legs))
            drawn = drawn_legs.get(key)
            if drawn is None:
                labels = [leg_label(leg, turn.kind == "fallback") for leg in turn.legs]
                drawn = drawn_legs[key] = _legs_lines(labels, [_leg_color(leg) for leg in turn.legs],
                                                      indent, width, paint)
            beside, legs = drawn
        lines = [head + legs[0]] + legs[1:] if beside else [head.rstrip()] + legs
        blocks.append(_TurnBlock(turn.start[:10], turn.start[:10] != day, lines, beside))
        day = turn.start[:10]
    return blocks


def _legs_lines(labels: list[str], colors: list | None, indent: int, width: int,
                paint) -> tuple[bool, list[str]]:
    """Whether the legs go beside a turn's columns (which end at `indent`), and their lines:
    beside, the first to follow the columns and the others indented to them; else below."""
    colors = colors or [None] * len(labels)
    beside = bool(labels) and all(len(label) + 3 * (index < len(labels) - 1) <= width - indent
                                  for index, label in enumerate(labels))
    if beside:
        legs = _wrap(labels, colors, width - indent, paint)
        return True, legs[:1] + [" " * indent + line for line in legs[1:]]
    return False, ["      " + line for line in _wrap(labels, colors, width - 6, paint)]


def _newest(blocks: list[_TurnBlock], room: int) -> list[str]:
    """The newest turns that fit in `room` lines, each day headed."""
    taken: list[_TurnBlock] = []
    for block in reversed(blocks):
        if len(_headed([block] + taken)) > room:
            break
        taken.insert(0, block)
    return _headed(taken)


def _headed(blocks: list[_TurnBlock]) -> list[str]:
    lines = []
    for index, block in enumerate(blocks):
        lines += block.lines(with_day=index == 0 or block.day != blocks[index - 1].day)
    return lines


def _pattern(turn: TurnRow) -> str:
    """A fusion turn's pattern; what answered the others (`ordinary`, `fallback`)."""
    return printable(turn.pattern)


def _counts(turn: TurnRow) -> str:
    return f"{turn.calls:,}/{turn.printed.tool_count:,}"


def call_models(turn: TurnRow) -> list[str]:
    """The models an ordinary turn's calls used, in order, each switch shown once, printable."""
    models: list[str] = []
    for call in turn.model_calls:
        model = printable(call.model)
        if not models or models[-1] != model:
            models.append(model)
    return models


def leg_label(leg: LegRow, route_failed: bool = False) -> str:
    """`gpt-5.6-sol judge:reject`, `mai-code-1.1-flash*` (* the answer kept): the model, then
    the kind unless it is a first answer, the verdict and any status but success; printable."""
    kind = "fallback" if route_failed else leg.kind
    notes = [note for note in (leg.verdict, None if leg.status == "succeeded" else leg.status)
             if note]
    label = leg.model
    if notes or kind not in _PLAIN_KINDS:
        label += " " + ":".join([kind] + notes)
    return printable(label) + ("*" if leg.committed else "")


def _leg_color(leg: LegRow) -> str | None:
    if leg.status != "succeeded" or leg.verdict in ("reject", "revise"):
        return RED
    if leg.verdict == "accept":
        return GREEN
    return None


def _wrap(labels: list[str], colors: list, width: int, paint) -> list[str]:
    """`a -> b -> c` broken after an arrow where it would pass `width`; each label cut to fit."""
    lines, line, used = [], "", 0
    for index, (label, color) in enumerate(zip(labels, colors)):
        arrow = index < len(labels) - 1
        text = _cut(label, width - 3 * arrow) + (" ->" if arrow else "")
        if used and used + 1 + len(text) > width:
            lines.append(line)
            line, used = "", 0
        if used:
            line, used = line + " ", used + 1
        body = text[:-3] if arrow else text
        line += (paint(color, body) if color else body) + (" ->" if arrow else "")
        used += len(text)
    return lines + ([line] if line else [])


def _paint_outcome(outcome: str, padded: str, paint) -> str:
    color = {"incomplete": YELLOW, "route_failed": MAGENTA}.get(outcome)
    return paint(color, padded) if color else padded


# -- Formatting -------------------------------------------------------------------------------


def _painter(color: bool):
    def paint(code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if color and text else text
    return paint


def _credits(value: float | None, unknown: int = 0) -> str:
    """`2,212.50`; `>=12.50` when it leaves out `unknown` calls of unknown credits; `-` when
    nothing of its credits is known (figures.py: None)."""
    if value is None:
        return "-"
    return f">={value:,.2f}" if unknown else f"{value:,.2f}"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _count(value: int) -> str:
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= limit:
            return f"{value / limit:.1f}{suffix}"
    return str(value)


def _duration(milliseconds: float) -> str:
    seconds = milliseconds / 1000
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"


def _too_narrow(names: list[str], width: int) -> list[str]:
    """`  (too narrow for: duration, calls/tools)`: the columns left out, in that order."""
    return flow(["  (too narrow for:"] + commas(names[:-1] + [names[-1] + ")"]), width, "   ")


def _worth_groups(snap: Snapshot, by: str, order: str, width: int, paint) -> list[str]:
    """The same groups' credits kept and not kept (their review share is the table's
    `review`), and the same work on one model (an estimate: tailer/report/worth.py)."""
    groups = getattr(snap.worth, f"by_{by}", None) if snap.worth is not None else None
    if not groups:
        return []
    rows = [_worth_row(group)[:5] + _estimated(group.one_model)
            for group in (groups[::-1] if order == "desc" else groups)]
    lines = _table(width, paint, [f"WORTH IT, by {by}", "turns", "credits", "kept", "not kept",
                                  "estimated", "measured", "one model*", "+/-", "saved*"], rows,
                   blank=False, first_kept=key_kept(by))
    return lines + _note(_ESTIMATE_NOTE, width, paint) + [""]


def key_kept(by: str) -> int:
    """The characters a --by table's keys keep before its columns but one are left out."""
    return SESSION_ID_KEPT if by == "session" else FIRST_COLUMN_KEPT


# -- What the --by table (groups_table.py) and --watch (live.py) lay out with ----------------

table_lines, title_lines, painter, summary_sections = _table, _title_lines, _painter, _sections
PATTERN_SECTION, WORTH_SECTION = 3, 5  # places in _sections: live.may_show asks if each is kept
percent_cell, worth_groups, credits_text = _percent, _worth_groups, _credits
