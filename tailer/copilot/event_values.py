"""What a value read from a log may be, and the checks every field goes through.

Every number and text the parser copies out is checked against the range its outputs can
carry (OTLP's int64 and uint64 nanoseconds, doubles, Prometheus's float counters, the
checkpoint's JSON). A value of the right type but an absurd size (a count of 1e300, a
duration of centuries, a year 2554 timestamp, an id holding a lone surrogate) raises
Absurd, and the line is damaged. Every text that leaves as a machine code must also look
like one (tailer/codes.py): codes_only checks a record against CODE_FIELDS.
"""

from __future__ import annotations

import math

from ..codes import ENUM, IDENTIFIER, MODEL, OTHER, TOOL, VERSION, CodeKind
from .event_records import CODE_FIELDS, Event, PlannedLeg, Resolved, Usage


# What a value read from a log may be. The bounds are far beyond anything real and far
# inside what every output carries, so no sum or conversion downstream can overflow.
#
# Metadata strings are identifiers and enum values; anything longer is cut here, and the
# cap keeps a damaged log from producing huge spans.
MAX_TEXT = 200
# Tokens and requests of one leg or turn: every whole number up to here is exact in a
# float (Prometheus counters are floats), and a turn must sum over 1,000 such legs before
# its total leaves int64 (OTLP intValue; tailer.outputs.spans clamps even that).
MAX_COUNT = 2**53
# Nano-credits of one leg or turn: a million credits, about a million times a real leg's.
# Exact in a float, so credits (nano-AIU / 1e9) lose nothing, and a float holds the sum of
# any number of them that a lifetime of turns can reach.
MAX_NANO_AIU = 10**15
# durationMs and routingLatencyMs: 30 days, where real turns take minutes. Turned into
# nanoseconds and taken off a timestamp, it stays far inside int64.
MAX_DURATION_MS = 30 * 86_400_000
# Event timestamps: the years 2000 to 2199. Unix nanoseconds fit int64 up to 2262, so every
# span time stays a valid int64 and uint64 with room for the durations taken off it.
EARLIEST_NS = 946_684_800 * 10**9  # 2000-01-01T00:00:00Z
LATEST_NS = 7_258_118_400 * 10**9  # 2200-01-01T00:00:00Z


class Absurd(Exception):
    """A value of the right type outside the range its outputs can carry (see MAX_COUNT)."""

    def __init__(self, kind: str):
        super().__init__(kind)
        self.kind = kind


def parse_timestamp(value: object) -> int | None:
    """ISO-8601 with 0 to 9+ fraction digits to unix nanoseconds; naive means UTC.

    None for a text that is no such time, and for a time outside EARLIEST_NS..LATEST_NS.
    """
    if not isinstance(value, str):
        return None
    if value in _PARSED:
        return _PARSED[value]
    time_ns = _cli_timestamp(value)
    if time_ns is None:
        time_ns = _parse_any_timestamp(value)
    if time_ns is not None and not EARLIEST_NS <= time_ns < LATEST_NS:
        time_ns = None
    if len(_PARSED) >= _PARSED_LIMIT:
        _PARSED.clear()
    _PARSED[value] = time_ns
    return time_ns


def format_timestamp(time_ns: int) -> str:
    """A time as the CLI writes it: ISO-8601 UTC, always three fraction digits (1.0.102).
    `time_ns` lies within EARLIEST_NS..LATEST_NS, as any parse_timestamp gives."""
    from datetime import datetime, timezone

    seconds, rest = divmod(time_ns, 1_000_000_000)
    moment = datetime.fromtimestamp(seconds, timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{rest // 1_000_000:03d}Z"


# Lines written together share their time (the CLI replays a leg's messages and tools at
# one instant), so a few remembered answers spare most lines the parsing. Bounded: cleared
# when full.
_PARSED: dict[str, int | None] = {}
_PARSED_LIMIT = 64

# The form the CLI writes, `2026-09-09T02:43:27.961Z`, is read by arithmetic: the general
# way's pattern and datetime (`re` with its `enum`, and datetime, imported and compiled)
# cost the footer's refresh some 5 ms of start-up. Nearly every line falls in a minute
# of the lines before it, so each minute's start is remembered: a line then costs what
# fromisoformat and the pattern that vetted its text did. tests/test_events.py holds the
# two ways to the same answers.
_MINUTES: dict[str, int] = {}
_MINUTES_LIMIT = 64
_DAYS_BEFORE_MONTH = (0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334, 365)
_DAYS_TO_1970 = 719_162  # from 0001-01-01, the first day of the proleptic Gregorian calendar


def _cli_timestamp(value: str) -> int | None:
    """The time of a text in the CLI's form, `YYYY-MM-DDTHH:MM:SS`, then `.` and 1 to 9
    fraction digits or none, then `Z`; None for any other text, and for a date or time that
    does not exist (the general way decides those)."""
    length = len(value)
    if not (length == 20 or 22 <= length <= 30 and value[19] == ".") or value[16] != ":" or value[-1] != "Z":
        return None
    digits = value[17:19] + value[20:-1]  # the seconds, then the fraction's
    if not (digits.isascii() and digits.isdigit()):
        return None
    second = int(value[17:19])
    if second > 59:
        return None
    minute = value[:16]
    minute_ns = _MINUTES.get(minute)
    if minute_ns is None:
        minute_ns = _minute_start(minute)
        if minute_ns is None:
            return None
        if len(_MINUTES) >= _MINUTES_LIMIT:
            _MINUTES.clear()
        _MINUTES[minute] = minute_ns
    return minute_ns + second * 1_000_000_000 + int(value[20:-1].ljust(9, "0"))


def _minute_start(minute: str) -> int | None:
    """The time of `YYYY-MM-DDTHH:MM` (`minute`) and no seconds; None when that is not the
    text or no such time exists."""
    if minute[4:14:3] != "--T:":
        return None
    digits = minute[0:4] + minute[5:7] + minute[8:10] + minute[11:13] + minute[14:16]
    if not (digits.isascii() and digits.isdigit()):
        return None
    year, month, day = int(minute[0:4]), int(minute[5:7]), int(minute[8:10])
    hour, minutes = int(minute[11:13]), int(minute[14:16])
    if not (year >= 1 and 1 <= month <= 12 and hour < 24 and minutes < 60):
        return None
    leap_day = 1 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 0
    days_before = _DAYS_BEFORE_MONTH[month - 1] + (leap_day if month > 2 else 0)
    month_days = _DAYS_BEFORE_MONTH[month] - _DAYS_BEFORE_MONTH[month - 1] + (leap_day if month == 2 else 0)
    if not 1 <= day <= month_days:
        return None
    past = year - 1  # whole years, and their leap days, since 0001-01-01
    days = past * 365 + past // 4 - past // 100 + past // 400 + days_before + day - 1 - _DAYS_TO_1970
    return ((days * 24 + hour) * 60 + minutes) * 60 * 1_000_000_000


def _parse_any_timestamp(value: str) -> int | None:
    """The general way, for every form parse_timestamp takes."""
    import re
    from datetime import datetime, timezone

    match = re.fullmatch(_TIMESTAMP, value.strip())
    if not match:
        return None
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    try:
        moment = datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second),
            tzinfo=timezone.utc,
        )
    except ValueError:
        return None
    offset_s = 0
    if zone and zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        offset_s = sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    seconds = int(moment.timestamp()) - offset_s
    nanos = int((fraction or "0").ljust(9, "0"))
    return seconds * 1_000_000_000 + nanos


# The general way's pattern, compiled on its first use (and kept by re).
_TIMESTAMP = r"(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:\.(\d{1,9})\d*)?(Z|[+-]\d\d:?\d\d)?"


# The helpers every field goes through. Absent, null and wrongly typed values read as absent
# (the log is lenient); a value of the right type outside its range raises Absurd.

def read_text(value: object) -> str | None:
    if type(value) is str and 0 < len(value) <= MAX_TEXT and value.isascii():
        return value  # nearly every text: an id, a name, an enum value
    if not isinstance(value, str) or not value:
        return None
    text = value[:MAX_TEXT]
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # A half of a UTF-16 pair, which JSON may escape on its own (`"\ud800"`): it has no
        # UTF-8 encoding, so a text holding one cannot reach a span, a log line or a checkpoint.
        raise Absurd("text") from None
    return text


def read_count(value: object, limit: int = MAX_COUNT, kind: str = "count") -> int:
    """A whole number from 0 to limit (a float such as 3.0 too); absent reads as 0."""
    # `type`, not isinstance: a JSON true is a bool, an int subclass, and reads as absent.
    if type(value) is int and 0 <= value <= limit:
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    if isinstance(value, float) and value.is_integer() and 0 <= value <= limit:
        return int(value)
    raise Absurd(kind)  # negative, fractional, NaN, infinite or too big


def read_number(value: object) -> float | None:
    """A finite number as a float; absent, wrongly typed, too big or not finite read as None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)  # an integer of hundreds of digits does not fit a float
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def read_duration(value: object) -> float | None:
    """Milliseconds from 0 to MAX_DURATION_MS."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if 0 <= value <= MAX_DURATION_MS:  # False for NaN; no float overflow for a huge int
        return float(value)
    raise Absurd("duration")


# The codes of each kind seen lately: nearly every value (a model, a pattern, a leg's phase
# id) repeats on many lines, and a set lookup costs a fraction of a check. Bounded: cleared
# when full. Only accepted values are kept, so a refusal is always decided by the check.
# By the kind's name: a str keeps its hash, where a CodeKind's is made anew on every line.
_SEEN_LIMIT = 4096
_SEEN: dict[str, set[str]] = {kind.name: set() for kind in (ENUM, MODEL, TOOL, IDENTIFIER, VERSION)}
# CODE_FIELDS with each field's set of seen codes, for the loop below.
_CODE_CHECKS = {
    record_type: tuple((name, kind, _SEEN[kind.name]) for name, kind in fields)
    for record_type, fields in CODE_FIELDS.items()
}


def is_code(kind: CodeKind, value: str) -> bool:
    seen = _SEEN[kind.name]
    if value in seen:
        return True
    if not kind.is_code(value):
        return False
    if len(seen) >= _SEEN_LIMIT:
        seen.clear()
    seen.add(value)
    return True


def code_fields(record_type: type, **keys: str) -> tuple:
    """For read_codes: each field of `record_type` named (as field=its key in the log), with
    its kind of code from CODE_FIELDS."""
    kinds = dict(CODE_FIELDS[record_type])
    return tuple((key, name, kinds[name], _SEEN[kinds[name].name]) for name, key in keys.items())


def read_codes(source: dict, fields: tuple) -> tuple[list, tuple[str, ...]]:
    """read_text of each field of `source` (code_fields), and codes_only's check of it, in
    one call: the values, each that is no code of its kind made OTHER (None for an id), and
    the names of those fields. The decoders of the lines a log holds most of (a model call,
    a tool's start and end) check their codes so, where a call to read_text and to is_code
    for each field and codes_only's loop over the record made a third of their cost."""
    values = []
    refused = ()
    for key, name, kind, seen in fields:
        value = source.get(key)
        if value is None or value.__class__ is str and value in seen:
            values.append(value)  # absent, or a code seen before (a short ASCII text)
            continue
        value = read_text(value)
        if value is not None and not is_code(kind, value):
            value = None if kind is IDENTIFIER else OTHER
            refused += (name,)
        values.append(value)
    return values, refused


def names_only(names: tuple[str, ...] | dict[str, Usage], kind: CodeKind):
    """codes_only's check of a field of names (tool names, or a map by model): the names
    (keys) with each that is no code made OTHER, or None when all are codes."""
    seen = _SEEN[kind.name]
    if not names or seen.issuperset(names) or all([is_code(kind, name) for name in names]):
        return None
    return _named_codes_only(names, kind)


def codes_only(record: Event) -> tuple[str, ...]:
    """Put OTHER (None for an id) in each field of CODE_FIELDS that holds no code of its
    kind; the names of those fields. For a record not yet handed on (the parser's, or one
    rebuilt from saved data), which it changes in place."""
    refused = ()
    for name, kind, seen in _CODE_CHECKS.get(type(record), ()):
        value = getattr(record, name)
        if value.__class__ is str:
            if value not in seen and not is_code(kind, value):
                setattr(record, name, None if kind is IDENTIFIER else OTHER)
                refused += (name,)
        elif value:  # tool names, or a map by model
            named = names_only(value, kind)
            if named is not None:
                setattr(record, name, named)
                refused += (name,)
    if record.__class__ is Resolved and record.phase_plan:
        refused += _plan_codes_only(record)
    return refused


_PLAN_CODES = (("kind", "phase_kind"), ("role", "role"), ("scope", "scope"))


def _plan_codes_only(record: Resolved) -> tuple[str, ...]:
    """codes_only for the phase plan: each leg's kind, role and scope is an ENUM, and a
    refusal is counted under the field a leg record holds it in. The plan is made again
    only when a value is refused: its codes nearly always are among those seen lately."""
    refused = {counted_as for leg in record.phase_plan for name, counted_as in _PLAN_CODES
               if getattr(leg, name) is not None and not is_code(ENUM, getattr(leg, name))}
    if refused:
        record.phase_plan = tuple(
            PlannedLeg(**{name: ENUM.accept(getattr(leg, name)) for name, _ in _PLAN_CODES},
                       conditional=leg.conditional)
            for leg in record.phase_plan)
    return tuple(sorted(refused))


def _named_codes_only(value: tuple[str, ...] | dict[str, Usage], kind: CodeKind):
    """The names (or a map's keys) with each that is no code made OTHER: a map's figures
    under refused names add up under OTHER, as the calls of such models do."""
    if isinstance(value, tuple):
        return tuple(sorted(name if kind.is_code(name) else OTHER for name in value))
    merged: dict[str, Usage] = {}
    for name, usage in value.items():
        name = name if kind.is_code(name) else OTHER
        merged[name] = merged[name] + usage if name in merged else usage
    return merged
