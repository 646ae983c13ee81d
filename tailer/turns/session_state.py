"""The reading stage's saved state: each session's log position, open turns, the fusion ids
it already reported, its context, and for a log that vanished, when it did (a tombstone).

This is the `sessions` part of a checkpoint, written and read back here, beside the reading
(tailer/turns/session_log.py); tailer/daemon/checkpoint.py keeps the file. Every stage trusts what it
restores, so `check` refuses anything not shaped as `session_to_state` writes it, and a
record restored here is checked field by field as tailer/copilot/event_values.py checks the log's: it is
trusted downstream as much as one just parsed.
"""

from __future__ import annotations


from ..copilot import event_records, event_values
from ..records import Field, as_dict, fields
from ..saved_state import finite, mapping, sequence, text, whole
from ..copilot.lines import Position
from .assembly import SessionContext, SessionTurns, Turn

_RECORD_TYPES = {
    cls.__name__: cls
    for cls in (event_records.Resolved, event_records.LegEnded, event_records.Handoff,
                event_records.CommitStarted, event_records.Completed, event_records.RouteFailed,
                event_records.ModelCall, event_records.ToolStarted, event_records.ToolCompleted,
                event_records.Prompt)
}


def check(state: dict) -> None:
    """Raise ValueError, KeyError or TypeError on a `sessions` part not shaped as saved."""
    for session_id, saved in mapping(state["sessions"], "sessions").items():
        checked_session(session_id, saved)


def checked_session(session_id: str, saved: dict) -> tuple[Position, SessionTurns]:
    """One session's part checked as `check` checks it, and what it holds: each open turn
    is decoded once (the status line's refresh resumes one session on every refresh, and
    decoding them twice was a tenth of its work). ValueError, KeyError or TypeError when
    damaged."""
    mapping(saved, "a session")
    position = Position.from_data(saved["position"])
    if "gone_at" in saved:
        finite(saved["gone_at"], "when a session's log went", 0)
    _record_texts(sequence(saved["finished"], "a session's finished turns"), "a finished turn's id")
    open_turns = [turn_from_data(turn) for turn in sequence(saved["open"], "a session's open turns")]
    context = context_from_data(saved.get("context"))
    return position, SessionTurns(session_id, open_turns, saved["finished"], context)


def session_to_state(position: Position, turns: SessionTurns) -> dict:
    """One session as the checkpoint keeps it."""
    return {
        "position": position.to_data(),
        "open": [turn_to_data(turn) for turn in turns.open_turns],
        "finished": turns.finished,
        "context": context_to_data(turns.context),
    }


def turns_from_state(session_id: str, saved: dict) -> SessionTurns:
    """The session's turn assembly as `session_to_state` saved it (checked by `check`)."""
    return SessionTurns(session_id, [turn_from_data(t) for t in saved["open"]],
                        saved["finished"], context_from_data(saved.get("context")))


def turn_to_data(turn: Turn) -> dict:
    records = [turn.resolved, turn.commit, turn.completed, turn.route_failure, turn.prompt]
    records += turn.legs + turn.handoffs + turn.calls + turn.tool_events
    data = {
        "session": turn.session_id,
        "fusion": turn.key,
        "records": [_record_to_data(r) for r in records if r],
    }
    if turn.ordinary:
        data["ordinary"] = True
    return data


def turn_from_data(data: dict) -> Turn:
    """The turn `turn_to_data` gave; ValueError, KeyError or TypeError when damaged."""
    mapping(data, "an open turn")
    ordinary = data.get("ordinary", False)
    if type(ordinary) is not bool:
        raise ValueError("an open turn's kind is not true or false")
    # The session id is a folder name: any text, surrogate escapes of non-UTF-8 bytes too.
    turn = Turn(text(data["session"], "an open turn's session", None),
                _record_text(data["fusion"], "an open turn's id"), ordinary=ordinary)
    records = sequence(data["records"], "an open turn's records")
    if not records:  # a turn opens with its first record: one without is no turn saved here
        raise ValueError("an open turn holds no record")
    for record in map(_record_from_data, records):
        if isinstance(record, event_records.LegEnded):
            turn.legs.append(record)
        elif isinstance(record, event_records.Handoff):
            turn.handoffs.append(record)
        elif isinstance(record, event_records.ModelCall):
            turn.calls.append(record)
        elif isinstance(record, (event_records.ToolStarted, event_records.ToolCompleted)):
            turn.tool_events.append(record)
        elif isinstance(record, event_records.Prompt):
            turn.prompt = record
        elif isinstance(record, event_records.Resolved):
            turn.resolved = record
        elif isinstance(record, event_records.CommitStarted):
            turn.commit = record
        elif isinstance(record, event_records.Completed):
            turn.completed = record
        elif isinstance(record, event_records.RouteFailed):
            turn.route_failure = record
    return turn


def context_to_data(context: SessionContext) -> dict:
    """A session's context (see turns.SessionContext) as the checkpoint keeps it."""
    return {
        "current": context.current,
        "awaiting_prompt": context.awaiting_prompt,
        "run": _ledger_to_data(context.run),
        "log": _ledger_to_data(context.log),
        "run_unpriced": sorted(context.run_unpriced),
        "log_unpriced": sorted(context.log_unpriced),
    }


def context_from_data(data: dict | None) -> SessionContext:
    """None (a checkpoint written before contexts were kept) gives an empty context."""
    if data is None:
        return SessionContext()
    mapping(data, "a session's context")
    return SessionContext(
        current=_optional(_record_text)(data["current"], "a session's model"),
        awaiting_prompt=_optional(_record_text)(data["awaiting_prompt"], "a session's prompt"),
        run=_ledger_from_data(data["run"]),
        log=_ledger_from_data(data["log"]),
        run_unpriced=set(_texts(data["run_unpriced"], "a ledger's model")),
        log_unpriced=set(_texts(data["log_unpriced"], "a ledger's model")),
    )


def log_ledger_of(saved: dict) -> tuple[dict[str, event_records.Usage] | None, set[str]]:
    """A saved session's whole-log ledger and the models of it whose credits are unknown
    (SessionContext.log and log_unpriced), checked as context_from_data checks them, without
    the rest of its context. ValueError, KeyError or TypeError when not shaped as saved."""
    data = saved.get("context")
    if data is None:
        return None, set()
    mapping(data, "a session's context")
    return _ledger_from_data(data["log"]), set(_texts(data["log_unpriced"], "a ledger's model"))


def _ledger_to_data(ledger: dict[str, event_records.Usage] | None) -> dict | None:
    if ledger is None:
        return None
    return {model: as_dict(usage) for model, usage in ledger.items()}


def _ledger_from_data(data: dict | None) -> dict[str, event_records.Usage] | None:
    if data is None:
        return None
    return {_record_text(model, "a ledger's model"): _usage(usage, "a ledger's usage")
            for model, usage in mapping(data, "a ledger").items()}


def _record_to_data(record: event_records.Event) -> dict:
    """As JSON will give it back (tuples as lists): a tombstone keeps this in memory.

    `not_codes` is left out: it was counted when the line was read, and a restored record
    must not count it again. An empty phase plan is left out too, and a leg's
    `credits_given` when true: a checkpoint written before they were kept is saved again as
    it was."""
    values = as_dict(record)
    del values["not_codes"]
    if values.get("phase_plan") == ():
        del values["phase_plan"]
    if values.get("credits_given") is True:
        del values["credits_given"]
    return {"kind": type(record).__name__,
            **{name: list(value) if type(value) is tuple else value
               for name, value in values.items()}}


def _record_from_data(data: dict) -> event_records.Event:
    """A record back from its data, each field checked as tailer.copilot.event_values checks the log's:
    a record restored here is trusted downstream as much as one just parsed."""
    values = dict(mapping(data, "a record"))
    cls = _RECORD_TYPES.get(text(values.pop("kind"), "a record's kind"))
    if cls is None:
        raise ValueError("a record is of no known kind")
    checks = _RECORD_CHECKS[cls]
    if not checks.keys() >= values.keys():
        raise ValueError(f"a {cls.__name__} record has a field it does not know")
    for name, value in values.items():
        values[name] = checks[name](value, f"{cls.__name__}.{name}")
    record = cls(**values)
    event_values.codes_only(record)  # its codes too: free text in a saved file never leaves either
    return record



# -- The checks of a record's fields: each returns the value as the record holds it --


def _record_text(value: object, what: str) -> str:
    """As tailer.copilot.event_values reads text: at most MAX_TEXT characters with a UTF-8 form."""
    try:
        text(value, what, event_values.MAX_TEXT).encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} holds a lone surrogate") from None
    return value


def _record_texts(values: list, what: str) -> None:
    """_record_text of each value, at once where all pass: a session remembers up to 4,096
    finished ids, and the footer's refresh checks them all. The saved values come from JSON,
    so each text is a str itself, never a subclass, which join would also take."""
    try:
        if max(map(len, values), default=0) <= event_values.MAX_TEXT:
            "".join(values).encode("utf-8")  # TypeError: not all texts
            return
    except (TypeError, UnicodeEncodeError):
        pass
    for value in values:
        _record_text(value, what)


def _optional(check):
    return lambda value, what: None if value is None else check(value, what)


def _time_ns(value: object, what: str) -> int:
    return whole(value, what, event_values.LATEST_NS - 1, event_values.EARLIEST_NS)


def _milliseconds(value: object, what: str) -> float:
    return finite(value, what, 0, event_values.MAX_DURATION_MS)


def _usage(value: object, what: str) -> event_records.Usage:
    usage = mapping(value, what)
    if usage.keys() != _USAGE_LIMITS.keys():
        raise ValueError(f"{what} does not hold the usage fields")
    for name, count in usage.items():
        # The field's name is put in words only when it is wrong: the report's check of
        # the CLI's ledger reads some 2,000 of these over a month of sessions.
        if type(count) is not int or not 0 <= count <= _USAGE_LIMITS[name]:
            whole(count, f"{what}.{name}", _USAGE_LIMITS[name])
    return event_records.Usage(**usage)


def _bool(value: object, what: str) -> bool:
    if type(value) is not bool:
        raise ValueError(f"{what} is not true or false")
    return value


def _texts(value: object, what: str) -> tuple[str, ...]:
    return tuple(_record_text(item, what) for item in sequence(value, what))


def _plan(value: object, what: str) -> tuple[event_records.PlannedLeg, ...]:
    """A phase plan as asdict wrote it: a list of legs, each of the four fields."""
    legs = sequence(value, what)
    if len(legs) > event_records.MAX_PLANNED_LEGS:
        raise ValueError(f"{what} holds more legs than a plan may")
    plan = []
    for leg in legs:
        if set(mapping(leg, what)) != {"kind", "role", "scope", "conditional"}:
            raise ValueError(f"{what} holds a leg not shaped as saved")
        plan.append(event_records.PlannedLeg(
            *(_optional(_record_text)(leg[name], what) for name in ("kind", "role", "scope")),
            _bool(leg["conditional"], what)))
    return tuple(plan)


_USAGE_LIMITS = {field.name: event_values.MAX_COUNT for field in fields(event_records.Usage)}
_USAGE_LIMITS["nano_aiu"] = event_values.MAX_NANO_AIU

# A number's check goes by what it measures, so by the field's name: a new number field
# must say here what bounds it, or this module refuses to load (tests/test_checkpoint.py).
_NUMBER_CHECKS = {
    "time_ns": _time_ns,
    "duration_ms": _milliseconds,
    "routing_latency_ms": _milliseconds,
    "time_to_first_token_ms": _milliseconds,
}
# Every other field's check goes by its type.
_TYPE_CHECKS = {
    "str": _record_text,
    "Usage": _usage,
    "tuple[str, ...]": _texts,
    "bool": _bool,
    "tuple[PlannedLeg, ...]": _plan,
}


def _field_check(cls: type, field: Field):
    kind, optional = field.type.removesuffix(" | None"), field.type.endswith(" | None")
    if kind in ("int", "float"):
        check = _NUMBER_CHECKS.get(field.name)
    else:
        check = _TYPE_CHECKS.get(kind)
    if check is None:
        raise TypeError(f"{cls.__name__}.{field.name} ({field.type}) has no check in session_state")
    return _optional(check) if optional else check


_RECORD_CHECKS = {
    cls: {field.name: _field_check(cls, field) for field in fields(cls)}
    for cls in _RECORD_TYPES.values()
}
