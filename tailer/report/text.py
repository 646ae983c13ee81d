"""The report for programs: one JSON document, CSV of legs or of model calls.

Each renderer is a pure function of a report_figures.Snapshot (the table for people is
report_table.py).
"""

from __future__ import annotations

import io
import json
from typing import Iterator

from ..printable import printable
from .figures import Snapshot, compact_json
from .rows import TurnRow


def render_json(snap: Snapshot) -> Iterator[bytes]:
    """One compact document (UTF-8), in pieces: everything but the turns, then each turn,
    copied from its TurnJson with its start put in, in the report's time zone; so a month of
    turns is never one string in memory, nor decoded and encoded again.
    docs/report.schema.json describes it."""
    head = {name: getattr(snap, name) for name in snap.__slots__ if name != "turns"}
    yield (compact_json(head)[:-1] + ',"turns":[').encode("ascii")
    for index, turn in enumerate(snap.turns):
        # Views, not slices: the texts are not copied on their way to the output.
        text, at = memoryview(turn.printed.text), turn.printed.start_at
        if index:
            yield b","
        yield text[:at]
        yield json.dumps(turn.start).encode("ascii")
        yield text[at:]
    yield b"]}\n"


TURN_COLUMNS = ("session_id", "fusion_id", "turn_kind", "turn_start", "pattern", "outcome",
                "degraded_reason", "route_failure_reason")
CSV_COLUMNS = TURN_COLUMNS + (
    "leg", "kind", "role", "model", "status", "verdict", "committed", "start_ms", "duration_ms",
    "calls", "tools", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
    "credits", "failure_reason", "unknown_credit_calls",
)
CALL_COLUMNS = TURN_COLUMNS + (
    "call", "leg", "leg_kind", "model", "start_ms", "duration_ms", "input_tokens",
    "output_tokens", "cache_read_tokens", "cache_write_tokens", "credits", "finish_reason",
)


def render_csv(snap: Snapshot) -> str:
    """One row per leg; `leg` is its index in the turn's legs, from 0, as in the JSON's
    `legs`, `model_calls[].leg` and `tools[].leg`. A turn without legs (an ordinary turn, or a fusion turn the CLI
    stopped right after routing) gets one row with the leg columns empty. `credits` is
    empty where none of the leg's is known, and leaves out `unknown_credit_calls` calls."""
    out = io.StringIO()
    writer = _csv_writer(out)
    writer.writerow(CSV_COLUMNS)
    for turn in snap.turns:
        head = _turn_cells(turn)
        tools = turn.tools
        for index, leg in enumerate(turn.legs):
            writer.writerow(_cells(head + [
                index, leg.kind, leg.role, leg.model, leg.status, leg.verdict,
                _flag(leg.committed), round(leg.start_ms, 3), leg.duration_ms, leg.calls,
                sum(tool.leg == index for tool in tools), leg.input_tokens,
                leg.output_tokens, leg.cache_read_tokens, leg.cache_write_tokens, leg.credits,
                leg.failure_reason, leg.unknown_credit_calls,
            ]))
        if not turn.legs:
            writer.writerow(_cells(head + [None] * (len(CSV_COLUMNS) - len(head))))
    return out.getvalue()


def render_calls_csv(snap: Snapshot) -> str:
    """One row per model call (usage record), fusion and ordinary turns alike; `leg` is the
    index (from 0) of the leg it served in its turn, empty for an ordinary turn's calls;
    `credits` empty for a call whose credits the log does not give."""
    out = io.StringIO()
    writer = _csv_writer(out)
    writer.writerow(CALL_COLUMNS)
    for turn in snap.turns:
        head = _turn_cells(turn)
        for index, call in enumerate(turn.model_calls, 1):
            leg = turn.legs[call.leg] if call.leg is not None else None
            writer.writerow(_cells(head + [
                index, call.leg, None if leg is None else leg.kind,
                call.model, round(call.start_ms, 3), call.duration_ms, call.input_tokens,
                call.output_tokens, call.cache_read_tokens, call.cache_write_tokens, call.credits,
                call.finish_reason,
            ]))
    return out.getvalue()


def _turn_cells(turn: TurnRow) -> list:
    return [turn.session_id, turn.fusion_id, turn.kind, turn.start, turn.pattern, turn.outcome,
            turn.degraded_reason, turn.route_failure_reason]


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _cells(values: list) -> list:
    """None as an empty cell; text printable (a cell is shown in a terminal or a viewer as
    often as in a spreadsheet: no control character, no line break inside a cell); text
    that a spreadsheet would run as a formula, quoted off."""
    cells = []
    for value in values:
        if value is None:
            value = ""
        elif isinstance(value, str):
            value = printable(value)
            if value[:1] in ("=", "+", "-", "@"):
                value = "'" + value
        cells.append(value)
    return cells


# The arrays of `--by X --format json`, named as ccusage names its own (`daily --json`).
GROUP_ARRAYS = {"day": "daily", "week": "weekly", "month": "monthly", "session": "sessions"}


def render_groups_json(snap: Snapshot, by: str, *, order: str = "asc") -> bytes:
    """The groups of `by` as one document in ccusage's shape, an array and its totals: the
    groups as the whole report's JSON has them (`by_day`, ...), in the order of the table,
    and `totals`, the headline, which they add up to. docs/report-by.schema.json describes it."""
    groups = getattr(snap, f"by_{by}")
    document = {"schema_version": snap.schema_version, "by": by,
                "generated_at": snap.generated_at, "utc_offset": snap.utc_offset,
                "timezone": snap.timezone, "filters": snap.filters,
                GROUP_ARRAYS[by]: groups[::-1] if order == "desc" else groups,
                "totals": snap.headline}
    return (compact_json(document) + "\n").encode("ascii")


GROUP_COLUMNS = ("by", "key", "model", "first_turn", "last_turn", "turns", "ordinary_prompts",
                 "calls", "credits", "unknown_credit_calls", "input_tokens", "output_tokens",
                 "cache_read_tokens", "cache_write_tokens", "total_tokens", "fusion_credits",
                 "ordinary_credits", "compound_rate", "judge_rejection_rate", "review_share",
                 "tools", "new_policy_versions")


def render_groups_csv(snap: Snapshot, by: str, *, order: str = "asc",
                      breakdown: bool = False) -> str:
    """One row per day, week, month or session (`by`) with any prompt, `model` empty, as the
    table shows them: every prompt's calls, credits and tokens (input uncached), the credits
    of HydraFusion's turns and of ordinary prompts apart, HydraFusion's own figures and the
    router's policy versions first seen in it, space-separated; `breakdown` adds a row per
    model with its use under each."""
    out = io.StringIO()
    writer = _csv_writer(out)
    writer.writerow(GROUP_COLUMNS)
    groups = getattr(snap, f"by_{by}")
    for group in groups[::-1] if order == "desc" else groups:
        usage = group.all_usage
        writer.writerow(_cells([by, group.key, None, group.first_turn, group.last_turn,
                                group.turns, usage.ordinary.prompts] + _use_cells(usage) + [
                                usage.fusion.credits, usage.ordinary.credits,
                                group.compound_rate, group.judge_rejection_rate,
                                group.review_share, group.tools,
                                " ".join(group.new_policy_versions)]))
        if breakdown:
            for model in group.models:
                writer.writerow(_cells([by, group.key, model.name, None, None, None, None]
                                       + _use_cells(model) + [model.fusion.credits,
                                                              model.ordinary.credits]
                                       + [None] * 5))
    return out.getvalue()


def _use_cells(use) -> list:
    """A use's calls, credits and tokens (figures.KindUsage's or Spend's fields)."""
    return [use.calls, use.credits, use.unknown_credit_calls, use.input_tokens,
            use.output_tokens, use.cache_read_tokens, use.cache_write_tokens, use.total_tokens]


WORTH_COLUMNS = (
    "section", "key", "model", "turns", "credits", "answer_credits", "review_credits",
    "review_share", "unknown_credit_calls", "estimated_turns", "not_estimated_turns",
    "estimated_turns_credits", "one_model_estimate", "one_model_estimate_error",
    "median_credits", "single_turns", "single_median_credits", "fit", "fit_calls",
    "price_input", "price_cache_read", "price_cache_write", "price_output", "fit_error",
)


def render_worth_csv(snap: Snapshot, by: str | None = None, *, order: str = "asc") -> str:
    """Was fusion worth it (tailer/report/worth.py), one row per group: by pattern, gate
    outcome, policy version and day (`by`: by that grouping alone, in `order`), then each
    pattern on each answering model against single, then each model's fitted prices (credits
    per token). The columns a row's section has no figure for are empty; every estimate is
    in a column named so (one_model_estimate*, price_*), never in a measured one."""
    out = io.StringIO()
    writer = _csv_writer(out)
    writer.writerow(WORTH_COLUMNS)
    worth = snap.worth
    if worth is None:
        return out.getvalue()
    if by:
        groups = getattr(worth, f"by_{by}") or []
        sections = [(by, groups[::-1] if order == "desc" else groups)]
    else:
        sections = [("pattern", worth.by_pattern), ("gate", worth.gate),
                    ("policy_version", worth.by_policy_version), ("day", worth.by_day or [])]
    for section, groups in sections:
        for group in groups:
            estimate = group.one_model
            writer.writerow(_cells([
                section, group.key, None, group.turns, group.credits, group.answer.credits,
                group.review.credits, group.review_share, group.unknown_credit_calls,
                estimate.turns, estimate.not_estimated, estimate.credits, estimate.alone,
                estimate.error] + [None] * 10))
    if by:
        return out.getvalue()
    for item in worth.versus_single:
        writer.writerow(_cells(["versus_single", item.pattern, item.model, item.turns]
                               + [None] * 10 + [item.median_credits, item.single_turns,
                                                item.single_median_credits] + [None] * 7))
    for model in worth.prices:
        prices = model.prices or {}
        writer.writerow(_cells(["prices", model.model, model.model] + [None] * 5
                               + [model.unknown_credit_calls] + [None] * 8
                               + [model.fit, model.calls, *(prices.get(kind) for kind in (
                                   "input", "cache_read", "cache_write", "output")),
                                  model.error]))
    return out.getvalue()


def _csv_writer(out: io.StringIO):
    import csv  # here: the JSON report, the one this module writes most, needs none

    return csv.writer(out, lineterminator="\n")
