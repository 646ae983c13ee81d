"""Parse one events.jsonl line into a small record of allowlisted metadata.

The Copilot CLI's field names are known in tailer/copilot/ alone, and a line becomes a
record only here. The log is the CLI's private resume state, so the parser is lenient
(absent, null and wrongly typed fields all read as "absent") and it copies out only the
metadata its decoders name: text fields such as `content`, `projectionMessage`,
`stagedTerminal`, `message` or `errorMessage` are never read, so they cannot leak into
traces, metrics or logs downstream.

Besides the fusion events, the parser reads what rebuilds a whole turn: each model call
(`session.usage_record`), each tool call (`tool.execution_start` / `_complete`: names, ids
and success, never arguments or results), the moment of each prompt (`user.message`: its
id and time, never its text), where each CLI run begins (`session.start`, `session.resume`)
and the CLI's own totals (`session.shutdown`, `session.usage_checkpoint`).

A line goes through, in order, the modules beside this one:
- event_types.py: the types read, and the line's type told from its first bytes, so most
  lines are rejected before any JSON parsing (`may_be_read`, `leading_type`);
- line_json.py: the line's JSON, without the bulk of a tool event or a prompt (never read);
- event_decoders.py: each event type's decoder, `data` into a record of event_records.py;
- event_values.py: the checks every field goes through. A value of the right type but an
  absurd size (a count of 1e300, a duration of centuries, a year 2554 timestamp, an id
  holding a lone surrogate) makes the line damaged: `Malformed("absurd_<kind>")` (or
  `bad_timestamp`), counted, never exported. Every text that leaves the tailer as a
  machine code (a pattern, a reason, a model or tool name, an id) must also look like one
  (tailer/codes.py): `codes_only` checks each record against CODE_FIELDS as it is built,
  so no output downstream ever sees free text there. A value that is no code becomes
  `other` (an id: absent, since `other` would join unrelated records), and the record
  names the field in `not_codes` for the metrics to count;
- event_fields.py: the fields each fusion event may carry and needs, for the drift notes.
scrub_tables.py holds what `scrub` keeps of each event, beside them.
"""

from __future__ import annotations

from ..records import replace
from ..codes import ENUM, FIELD, IDENTIFIER, OTHER
from .event_decoders import BAD_KEY, CODES_CHECKED, DECODERS, KEY_FIELDS, MISSING_KEY
from .event_fields import KNOWN_FIELDS, REQUIRED_FIELDS
from .event_records import Event, Malformed, UnknownFusionEvent
from .event_types import ANY_MARKER, KNOWN_UNUSED, USER_MESSAGE, leading_type
from .event_values import Absurd, codes_only, is_code, parse_timestamp, read_text
from .line_json import loads, loads_without_bulk

# The types a decoder reads, and the fusion types known and skipped, as a line writes them.
_READ_TYPES = frozenset(event_type.encode() for event_type in DECODERS)
_KNOWN_UNUSED_TYPES = frozenset(event_type.encode() for event_type in KNOWN_UNUSED)


def parse_line(line: bytes) -> Event | Malformed | None:
    """Turn one line (without its newline) into a record, a Malformed, or None to ignore."""
    line = line.strip(b"\0 \t\r")
    written_type = leading_type(line)
    if written_type is None:
        if ANY_MARKER.search(line) is None:
            return None
        obj = None
    elif written_type in _READ_TYPES:
        obj = loads_without_bulk(line, written_type)
    elif written_type.find(b"fusion_") < 0 or written_type in _KNOWN_UNUSED_TYPES:
        return None
    else:
        obj = None
    if obj is None:
        try:
            obj = loads(line)
        except UnicodeDecodeError:
            return Malformed("invalid_utf8")
        except ValueError:
            return Malformed("invalid_json")
        except RecursionError:
            return Malformed("too_deep")
    if not isinstance(obj, dict):
        return Malformed("not_an_object")
    event_type = obj.get("type")
    if not isinstance(event_type, str):
        return Malformed("missing_type")
    try:
        return _record(event_type, obj)
    except Absurd as absurd:
        return Malformed(f"absurd_{absurd.kind}")


def _record(event_type: str, obj: dict) -> Event | Malformed | None:
    """parse_line's work once the line is a JSON object with a type; raises Absurd."""
    parse = DECODERS.get(event_type)
    if parse is None:
        if "fusion_" in event_type and event_type not in KNOWN_UNUSED:
            time_ns = parse_timestamp(obj.get("timestamp"))
            return UnknownFusionEvent(time_ns or 0,
                                      event_type=ENUM.accept(read_text(event_type)) or "unknown")
        return None
    time_ns = parse_timestamp(obj.get("timestamp"))
    if time_ns is None:
        return Malformed("bad_timestamp")
    data = obj.get("data")
    if data is None and event_type not in KEY_FIELDS:
        data = {}
    if not isinstance(data, dict):
        return Malformed("bad_data")
    key = None
    not_codes = ()
    key_field = KEY_FIELDS.get(event_type)
    if key_field is not None:
        key = read_text(data.get(key_field))
        if key is None:
            return Malformed(MISSING_KEY[key_field])
        if not is_code(IDENTIFIER, key):
            return Malformed(BAD_KEY[key_field])
    elif event_type == USER_MESSAGE:
        key = read_text(obj.get("id"))
        if key is not None and not IDENTIFIER.is_code(key):
            key, not_codes = None, ("prompt_id",)  # the prompt is placed by its time instead
    record = parse(time_ns, key, data)
    if isinstance(record, Malformed):
        return record
    if event_type in CODES_CHECKED:  # its decoder checked the codes, and has no notes
        return record
    not_codes += codes_only(record)
    if not_codes:
        record.not_codes = not_codes
    if event_type not in KNOWN_FIELDS:
        return record
    # Both notes are empty on almost every line: see that cheaply, build them only if not.
    known = KNOWN_FIELDS[event_type]
    missing = [k for k in REQUIRED_FIELDS[event_type] if data.get(k) is None]
    if missing or not known.issuperset(data):
        unknown = tuple(sorted(_field_name(k) for k in data if k not in known))
        record = replace(
            record, event_type=event_type, unknown_fields=unknown, missing_fields=tuple(missing)
        )
    return record


def _field_name(name: str) -> str:
    """An unknown field's name as it is reported: OTHER when it is no field name."""
    if FIELD.is_code(name):
        return name
    read_text(name)  # a lone surrogate damages the line, as in any text
    return OTHER
