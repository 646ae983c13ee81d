"""Free text where the log should hold machine codes, in every such field of every event type.

The fields are those `python -m tailer scrub` keeps as codes (tailer.copilot.scrub_tables.SCRUB_DATA, a
CodeKind in place of a Kept), which are every field the parser reads as one (CODE_FIELDS),
and the ids it reads besides the keys that place a record. POISON is text, a path and a
password; none of FRAGMENTS may reach any output.
"""

from __future__ import annotations

import json
from pathlib import Path

from sessiongen import SessionWriter
from tailer.copilot import event_types, scrub_tables
from tailer.codes import CodeKind
from tailer.copilot.scrub_tables import Kept

POISON = "SECRETX /home/alice/proj/.env password=hunter2"
FRAGMENTS = ("SECRETX", "/home/alice", "hunter2")
_ID_KINDS = (Kept.FUSION_ID, Kept.TOOL_CALL_ID)
# The keys that place a record: poisoned, the line is damaged (bad_*) and shows no other field.
_KEYS = {"fusionId", "attemptId", "toolCallId"}


def poison_codes(event: dict) -> dict:
    """The event with POISON in every code field of its type, present or not, and as the
    name of each entry of a map keyed by model or tool names."""
    spec = scrub_tables.SCRUB_DATA.get(event["type"])
    if spec is None:
        return event
    return dict(event, data=_poisoned(event.get("data") or {}, spec, _is_code_spec))


def poison_ids(event: dict) -> dict:
    """The event with POISON in every id of its data but the key that places it (and a leg's
    phaseId), and as its event id on a prompt."""
    spec = scrub_tables.SCRUB_DATA.get(event["type"])
    poisoned = dict(event)
    if event["type"] == event_types.USER_MESSAGE:
        poisoned["id"] = POISON
    if spec is None:
        return poisoned
    keys = _KEYS | ({"phaseId"} if event["type"].startswith("assistant.fusion_phase") else set())
    data = {name: value for name, value in (event.get("data") or {}).items()}
    kept = {name: value for name, value in data.items() if name in keys}
    poisoned["data"] = {**_poisoned(data, spec, lambda how: how in _ID_KINDS), **kept}
    return poisoned


def poison_key(event: dict) -> dict:
    """The event with POISON as the key that places it."""
    data = dict(event["data"])
    for key in _KEYS | {"phaseId"}:
        if key in data:
            data[key] = POISON
    return dict(event, data=data)


def _is_code_spec(how: object) -> bool:
    return isinstance(how, CodeKind)


def _poisoned(value: dict, spec: dict, poison_here) -> dict:
    value = dict(value)
    for name, how in spec.items():
        if name in scrub_tables.NAMES_OF:
            value = {f"{POISON} {i}": item for i, item in enumerate(value.values())} or {POISON: 1}
        elif poison_here(how):
            value[name] = POISON
        elif isinstance(how, dict):
            nested = value.get(name)
            value[name] = _poisoned(nested if isinstance(nested, dict) else {}, how, poison_here)
        elif isinstance(how, list) and isinstance(value.get(name), list):
            value[name] = [_poisoned(item, how[0], poison_here) for item in value[name]
                           if isinstance(item, dict)]
    return value


def write_poisoned_sessions(state: Path, writer_of) -> None:
    """Three sessions made by writer_of(session id) -> SessionWriter: one with POISON in
    every code field (and an abort, and an event whose type is POISON), one in every id, one
    in every key."""
    for session_id, poison in (("poison-codes", poison_codes), ("poison-ids", poison_ids),
                               ("poison-keys", poison_key)):
        writer: SessionWriter = writer_of(session_id)
        lines = [poison(json.loads(line)) for line in writer.lines()]
        if poison is poison_codes:
            stamp = lines[-1]["timestamp"]
            lines += [{"type": "abort", "data": {"reason": POISON}, "id": "abort-1",
                       "timestamp": stamp, "parentId": None},
                      {"type": POISON, "data": {"fusionId": POISON}, "id": "odd-1",
                       "timestamp": stamp, "parentId": None},
                      {"type": "session.fusion_" + POISON, "data": {"fusionId": "fusion-odd"},
                       "id": "odd-2", "timestamp": stamp, "parentId": None}]
        folder = state / session_id
        folder.mkdir(parents=True)
        (folder / "events.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
