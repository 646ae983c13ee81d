"""The status line drawn from a snapshot: a pure function of it, the template, the width and
the clock.

Each field of the template (options.FIELDS) is a list of segments, a text and the colour it
is drawn in; the line is the template's texts and its fields' segments in order. A line
wider than the terminal would wrap onto a second footer row, so one that does not fit is
drawn again with less detail (the legs without their credits, then without their models),
then cut to the width with `…`. Every text of a snapshot is printable as it is (view.py), the
template's too (options.parse_format), so the only control characters a line may hold are
the colours' own SGR sequences, and none unless `color`.
"""

from __future__ import annotations

from .options import Template
from .view import Snapshot, TurnView

RESET = "\x1b[0m"
YELLOW, GREEN, RED, DIM = "\x1b[33m", "\x1b[32m", "\x1b[31m", "\x1b[2m"
# How a leg's state reads in a turn in flight: report --watch's marks (tailer/report/now.py).
MARKS = {"done": "+", "running": "*", "pending": ".", "skipped": "-"}
KEEPING_VERDICTS = ("accept", "approve")
REJECTING_VERDICTS = ("reject", "revise")
ELLIPSIS = "…"
DETAIL_LEVELS = 3  # every detail; the legs without credits; the legs without models

Segments = list  # of (text, colour) pairs; colour "" for none


def line(snapshot: Snapshot, template: Template, width: int | None, color: bool, now_ns: int) -> str:
    """The status line of `snapshot` at `now_ns`, at most `width` columns (None: no limit)."""
    snapshot = snapshot.at(now_ns)
    if snapshot.reading is not None:
        return fit([(f"HydraFusion: reading the log {snapshot.reading}%", "")], width, color)
    segments: Segments = []
    for detail in range(DETAIL_LEVELS):
        fields = _fields(snapshot, now_ns, detail)
        segments = [segment for is_field, text in template.parts
                    for segment in (fields[text] if is_field else [(text, "")])]
        if width is None or visible_width("".join(text for text, _ in segments)) <= width:
            break
    return fit(segments, width, color)


def neutral(text: str, width: int | None) -> str:
    """A line that says only why there is nothing to show (no colour, no figure)."""
    return fit([(text, "")], width, False)


def _fields(snapshot: Snapshot, now_ns: int, detail: int) -> dict[str, Segments]:
    flying, last = snapshot.flying, snapshot.last
    turn = flying or last
    fields: dict[str, Segments] = {
        "state": _plain("running" if flying else "last" if last else ""),
        "pattern": _plain(turn.pattern if turn else ""),
        "elapsed": _plain(_elapsed((now_ns - flying.start_ns) / 1e9) if flying else ""),
        "legs": _legs(turn, flying is not None, detail) if turn else [],
        "running": _running(flying),
        "verdict": _verdict(turn),
        "credits": _plain(_credits(turn) if turn else ""),
        "answer": _plain(_answer(last) if last and not flying else ""),
        "session_credits": _plain(f"{snapshot.session_nano / 1e9:.2f}"),
        "review_share": _plain(_share(snapshot)),
    }
    fields["turn"] = _turn(fields, flying, last, detail)
    fields["session"] = [("session ", ""), *fields["session_credits"], (" cr, review ", ""),
                         *fields["review_share"]]
    return fields


def _turn(fields: dict[str, Segments], flying: TurnView | None, last: TurnView | None,
          detail: int) -> Segments:
    """`cascade 12s: +primary 1.1-flash 0.41 > *judge 5.6-sol > .repair` in flight;
    `last cascade: primary 1.1-flash 0.41 > judge 5.6-sol accept 0.62 = 1.03, answer
    primary 1.1-flash` once it answered; an ordinary turn's model and credits."""
    if flying is not None:
        head = [(f"{flying.pattern} ", ""), *fields["elapsed"]]
        if flying.kind == "ordinary":
            return head + ([(f": {short_model(flying.model)} {_credits(flying)}", "")]
                           if flying.model else [])
        return head + [(": ", "")] + (fields["legs"] or [("routing", DIM)])
    if last is None:
        return [("no turn yet", "")]
    outcome = [] if last.outcome == "completed" else [(f" ({last.outcome})", RED)]
    head = [(f"last {last.pattern}", ""), *outcome, (": ", "")]
    if last.kind == "ordinary":
        return head + [(f"{short_model(last.model)} {_credits(last)}", "")]
    answer = [(", answer ", ""), *fields["answer"]] if fields["answer"] and detail < 2 else []
    return head + fields["legs"] + [(f" = {_credits(last)}", "")] + answer


def _legs(turn: TurnView, flying: bool, detail: int) -> Segments:
    segments: Segments = []
    for leg in turn.legs:
        if segments:
            segments.append((" > ", ""))
        text = (MARKS[leg.state] if flying else "") + leg.kind
        if leg.model and (detail < 2 or leg.state == "running"):
            text += " " + short_model(leg.model)
        colour = YELLOW if leg.state == "running" else DIM if leg.state in ("pending", "skipped") else ""
        segments.append((text, RED if leg.failed else colour))
        if leg.verdict:
            segments.append((" " + leg.verdict, _verdict_colour(leg.verdict)))
        if leg.failed:
            segments.append((" failed", RED))
        if detail == 0 and leg.state in ("done", "running") and (leg.nano_aiu or not flying):
            segments.append((f" {leg.nano_aiu / 1e9:.2f}", ""))
    return segments


def _running(flying: TurnView | None) -> Segments:
    if flying is None:
        return []
    for leg in flying.legs:
        if leg.state == "running":
            return [(leg.kind + (" " + short_model(leg.model) if leg.model else ""), YELLOW)]
    return []


def _verdict(turn: TurnView | None) -> Segments:
    verdicts = [leg.verdict for leg in turn.legs if leg.verdict] if turn else []
    return [(verdicts[-1], _verdict_colour(verdicts[-1]))] if verdicts else []


def _verdict_colour(verdict: str) -> str:
    return GREEN if verdict in KEEPING_VERDICTS else RED if verdict in REJECTING_VERDICTS else ""


def _answer(turn: TurnView) -> str:
    if turn.kind == "ordinary":
        return short_model(turn.model)
    if turn.answer < 0:
        return ""
    leg = turn.legs[turn.answer]
    return leg.kind + (" " + short_model(leg.model) if leg.model else "")


def _credits(turn: TurnView) -> str:
    """`1.03`, or `>=1.03` when a call gave no credits (the figure is then a lower bound)."""
    return ("" if turn.credits_known else ">=") + f"{turn.nano_aiu / 1e9:.2f}"


def _share(snapshot: Snapshot) -> str:
    if not snapshot.leg_nano:
        return "-"
    return f"{100 * snapshot.review_nano / snapshot.leg_nano:.0f}%"


def _plain(text: str) -> Segments:
    return [(text, "")] if text else []


def short_model(model: str | None) -> str:
    """The model's name without a provider's `org/` and with only the last two parts of its
    name: `sonnet-4.6`, `5.6-sol`, `1.1-flash`, `gpt-5.4` (the leg's kind beside it says
    the rest)."""
    if not model:
        return "?"
    name = model.rpartition("/")[2] or model
    return "-".join(name.split("-")[-2:])


def _elapsed(seconds: float) -> str:
    """`42s`, `3m07s`, `2h05m`: report --watch's form (tailer/report/now.py)."""
    minutes, seconds = divmod(max(int(seconds), 0), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


def fit(segments: Segments, width: int | None, color: bool) -> str:
    """The segments as one line of at most `width` columns, cut with `…` when wider."""
    out, used = [], 0
    total = visible_width("".join(text for text, _ in segments))
    limit = total if width is None or total <= width else width - 1
    for text, colour in segments:
        if used >= limit:
            break
        if used + visible_width(text) > limit:
            text = _cut(text, limit - used)
        used += visible_width(text)
        out.append(f"{colour}{text}{RESET}" if color and colour and text else text)
    if width is not None and total > width:
        out.append(ELLIPSIS)
    return "".join(out)


def _cut(text: str, columns: int) -> str:
    """The longest start of `text` of at most `columns` columns."""
    kept = ""
    for char in text:
        if visible_width(kept + char) > columns:
            break
        kept += char
    return kept


def visible_width(text: str) -> int:
    """The columns `text` takes on a terminal: two for a wide East Asian character, none for
    a combining one (unicodedata only when there may be one: below U+0300, where the
    combining marks begin, every character takes one column)."""
    if text.isascii() or max(text) < "\u0300":
        return len(text)
    import unicodedata

    return sum(0 if unicodedata.combining(char) else
               2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)
