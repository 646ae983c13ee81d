"""`report --by day|week|month|session`: one table of every prompt's use by day, week,
month or session, the views a ccusage user knows, laid out as the report's table is
(table.py); a pure function of a report_figures.Snapshot. Tokens are exact, thousands
separated, as ccusage prints them, so a user can set the two side by side.
"""

from __future__ import annotations

from ..printable import printable
from .figures import Snapshot
from .table import (
    DIM, credits_text, key_kept, painter, percent_cell, table_lines, title_lines, worth_groups,
)
from .wrap import commas, cut, fit, flow

# Every prompt's use (ccusage's columns, input uncached, exact tokens as ccusage prints them),
# a session's first and last prompt, then HydraFusion's own figures: where they do not fit,
# the last columns go first, so the times before the counts.
USAGE_HEADERS = ["turns", "ordinary", "calls", "credits", "input", "output", "cache read",
                 "cache write", "total"]
SESSION_HEADERS = ["first", "last"]  # --by session's
FUSION_HEADERS = ["HydraFusion", "compound", "judge rej.", "review"]
GROUP_LEGEND = ["every prompt's use", "turns: HydraFusion's", "ordinary: prompts answered without fusion",
                "credits: of every prompt", "HydraFusion: the credits of its turns",
                "input: uncached"]


def render_groups(snap: Snapshot, by: str, *, order: str = "asc", breakdown: bool = False,
                  width: int = 100, color: bool = False) -> str:
    """One table of every prompt's use by day, week, month or session (`by`), oldest first
    (`order` desc: newest first; a session's age is its last prompt's), HydraFusion's and
    ordinary prompts' apart, and a total row, which is the headline's; `breakdown` adds a
    row per model under each group. A session has the dates of its first and last prompt (in
    the report's time zone, as ccusage's last activity), and its models under it."""
    paint = painter(color)
    groups = getattr(snap, f"by_{by}")
    if order == "desc":
        groups = groups[::-1]
    times = by == "session"
    headers = ([f"BY {by.upper()}"] + USAGE_HEADERS
               + (SESSION_HEADERS if times else []) + FUSION_HEADERS)
    # under: lines under a row (by its index) outside the columns, whose widths they would take
    rows, under = [], {}
    for group in groups:
        rows.append(_group_row(group.key, group, group.all_usage,
                               [group.first_turn[:10], group.last_turn[:10]] if times else []))
        under[len(rows) - 1] = [cut(printable(f"  ^ policy {version} first seen"), width)
                                for version in group.new_policy_versions]
        if times and not breakdown:
            names = commas([printable(model.name) for model in group.models])
            under[len(rows) - 1] += flow(["  " + names[0]] + names[1:], width) if names else []
        if breakdown:
            rows += [_model_row(model, times) for model in group.models]
    if rows:
        rows.append(_group_row("total", snap.headline, snap.headline.all_usage,
                               ["", ""] if times else []))
    table = table_lines(width, paint, headers, rows, first_kept=key_kept(by))
    for index in sorted(under, reverse=True):
        table[index + 2:index + 2] = under[index]
    lines = title_lines(snap, width, paint) + [""] + table
    if rows:
        lines += [paint(DIM, line) for line in flow(commas(GROUP_LEGEND), width, "")]
    worth = worth_groups(snap, by, order, width, paint)
    lines += [""] + worth if worth else []
    return "".join(fit(line, width).rstrip() + "\n" for line in lines)


def _group_row(label: str, head, usage, times: list[str]) -> list:
    """A group's row (or the total's, of the headline): every prompt's use of `usage` (its
    all_usage), `times` and HydraFusion's figures of `head` (a Headline or Group)."""
    return [label, head.turns, usage.ordinary.prompts, usage.calls,
            credits_text(usage.credits, usage.unknown_credit_calls)] + _tokens(usage) + times + [
        credits_text(head.credits, head.unknown_credit_calls), percent_cell(head.compound_rate),
        percent_cell(head.judge_rejection_rate), percent_cell(head.review_share)]


def _model_row(model, times: bool) -> list:
    """A model's use within a group (figures.ModelUse): its calls, credits, tokens and the
    credits of its legs in HydraFusion's turns."""
    return (["  " + model.name, "", "", model.calls,
             credits_text(model.credits, model.unknown_credit_calls)] + _tokens(model)
            + (["", ""] if times else [])
            + [credits_text(model.fusion.credits, model.fusion.unknown_credit_calls), "", "", ""])


def _tokens(use) -> list[str]:
    """A use's tokens of each kind and their total, each exact with thousands separators, as
    ccusage shows them (the figures a user compares with its)."""
    return [f"{count:,}" for count in (use.input_tokens, use.output_tokens, use.cache_read_tokens,
                                       use.cache_write_tokens, use.total_tokens)]
