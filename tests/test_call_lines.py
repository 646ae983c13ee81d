"""The short way of reading model calls and tool events (tailer/copilot/call_lines.py): on any
line it gives exactly the record the general way (events.parse_line) gives, or leaves the
line to it; and the lines the CLI writes are read the short way, so that a change elsewhere
cannot make the reading of every log slow without a test failing."""

import copy
import json
from pathlib import Path

from hypothesis import given, settings, strategies as st

from sessiongen import START, every_pattern, whole_session
from test_events import json_slots
from tailer.copilot import call_lines
from tailer.copilot.call_lines import call_record
from tailer.copilot.event_types import TOOL_COMPLETED, TOOL_STARTED, USAGE_RECORD, leading_type
from tailer.copilot.events import parse_line
from tailer.turns import session_log
from tailer.turns.assembly import SessionTurns
from tailer.turns.session_log import SessionLog

ROOT = Path(__file__).resolve().parent.parent
CALL_TYPES = (USAGE_RECORD, TOOL_STARTED, TOOL_COMPLETED)

FUSION = {"fusionId": "fusion-1", "syntheticModel": "hydrafusion", "policy": "standard",
          "pattern": "cascade", "phaseId": "fusion-1:phase:0", "phaseKind": "primary",
          "role": "solver", "sourceModel": "gpt-5.6-sol", "conversationScope": "root"}
# A line of each type as the CLI writes it (1.0.102), whose values the properties change.
COMMON = {
    USAGE_RECORD: {"usage": {
        "model": "gpt-5.6-sol", "provider": {"id": "copilot", "kind": "copilot", "label": "x"},
        "inputTokens": 7652, "outputTokens": 604, "cacheReadTokens": 3796, "cacheWriteTokens": 0,
        "cost": 1.0, "duration": 2087, "timeToFirstTokenMs": 723, "initiator": "user",
        "apiCallId": "e4b96d9c", "finishReason": "tool_calls", "reasoningEffort": "medium",
        "isAuto": True, "isByok": False, "toolCounts": {"bash": 1}, "aiCreditsStatus": "complete",
        "fusion": FUSION, "copilotUsage": {"model": "gpt-5.6-sol", "totalNanoAiu": 307081097,
                                           "tokenDetails": [{"batchSize": 1, "tokenCount": 7652}]}}},
    TOOL_STARTED: {"toolCallId": "call_68b3", "model": "gpt-5.6-sol", "fusion": FUSION,
                   "toolName": "bash", "mcpServerName": None, "mcpToolName": None,
                   "arguments": {"command": "ls -la"}},
    TOOL_COMPLETED: {"toolCallId": "call_68b3", "model": "gpt-5.6-sol", "fusion": FUSION,
                     "success": True, "result": {"content": "total 0", "detailedContent": "x"}},
}


def cli_line(event_type: str, data: dict, timestamp: object = "2026-10-01T00:01:04.900Z") -> bytes:
    """A line laid out as the CLI writes it: type first, no spaces."""
    return json.dumps({"type": event_type, "data": data, "id": "545adb0b", "timestamp": timestamp,
                       "parentId": "ba8aa9ab"}, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")


def same_as_the_general_way(line: bytes) -> bool:
    """Whether the short way gives the general way's record (compared as shown too: a 5
    is a 5.0 to ==); False when it left the line to the general way."""
    record = call_record(line)
    if record is None:
        return False
    general = parse_line(line)
    assert type(record) is type(general) and record == general and repr(record) == repr(general), line
    return True


# -- The common lines are read the short way ----------------------------------------------


def generated_lines() -> list[bytes]:
    lines = every_pattern("s-every").lines() + whole_session("s-whole", START).lines()
    return [line.encode() for line in lines]


def real_cli_lines() -> list[bytes]:
    return [line for path in sorted((ROOT / "tests" / "data" / "realcli").rglob("*.jsonl"))
            for line in path.read_bytes().split(b"\n")]


def test_every_call_and_tool_line_the_cli_writes_is_read_the_short_way():
    lines = [line for line in generated_lines() + real_cli_lines()
             if leading_type(line) in {t.encode() for t in CALL_TYPES}]
    assert {leading_type(line) for line in lines} == {t.encode() for t in CALL_TYPES}
    assert all([same_as_the_general_way(line) for line in lines])


def test_the_common_shapes_are_read_the_short_way():
    """Each type as the CLI writes it, a model call without a fusion block or credits, with
    several tools, a provider named by a text; a tool of an MCP server; bulky tool lines."""
    call = COMMON[USAGE_RECORD]["usage"]
    ordinary = {key: value for key, value in call.items() if key not in ("fusion", "copilotUsage")}
    shapes = [cli_line(event_type, data) for event_type, data in COMMON.items()] + [
        cli_line(USAGE_RECORD, {"usage": ordinary}),
        cli_line(USAGE_RECORD, {"usage": {**call, "toolCounts": {"view": 2, "bash": 1}, "provider": "copilot"}}),
        cli_line(USAGE_RECORD, {"usage": {**call, "toolCounts": {}, "aiCreditsStatus": "unavailable"}}),
        cli_line(TOOL_STARTED, {**COMMON[TOOL_STARTED], "toolName": "github-get_pr",
                                "mcpServerName": "github", "mcpToolName": "get_pr", "fusion": None}),
        cli_line(TOOL_STARTED, {**COMMON[TOOL_STARTED], "arguments": {"command": "x\"\n" * 3000}}),
        cli_line(TOOL_COMPLETED, {**COMMON[TOOL_COMPLETED], "result": {"content": "é\\" * 9000}}),
        cli_line(TOOL_COMPLETED, {**COMMON[TOOL_COMPLETED], "success": False, "result": None,
                                  "error": {"message": "x" * 9000, "code": "failure"}}),
    ]
    assert [same_as_the_general_way(line) for line in shapes] == [True] * len(shapes)


def test_a_log_of_calls_and_tools_is_read_without_the_general_way(tmp_path, monkeypatch):
    """SessionLog.read takes the short way: with the general way broken, its lines still
    become records and no damage."""
    lines = [line for line in generated_lines() if leading_type(line) in {t.encode() for t in CALL_TYPES}]
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines))

    def broken(line):
        raise AssertionError("read the general way")

    monkeypatch.setattr(session_log, "judge", broken)
    log = SessionLog("s", path)
    assert [read.record for read in log.read()] == [parse_line(line) for line in lines]
    assert log.damage == {}


def test_reading_a_log_gives_the_turns_the_general_way_gives(tmp_path):
    """The records taken the short way (SessionTurns.call and .tool) make the turns and the
    ledgers that feeding every record of parse_line makes."""
    lines = generated_lines()
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    log = SessionLog("s", path)
    read = [turn for line in log.read() for turn in line.finished] + log.finish_open()
    general = SessionTurns("s")
    fed = [turn for line in lines if (record := parse_line(line)) is not None
           and not type(record).__name__ in ("Malformed", "UnknownFusionEvent")
           for turn in general.feed(record)] + general.finish_open()
    assert read == fed and len(read) > 10
    assert log.turns.context == general.context


def test_the_heads_of_the_three_types_differ_in_the_bytes_looked_up():
    assert len(call_lines._READERS) == len(CALL_TYPES)


# -- Any line: the same record, or the general way's -----------------------------------------

SURROGATE = "\ud800"
# The values that matter to a figure, to a code and to a map, at and past every bound.
FIGURES = [None, True, False, -1, 0, 1, 2.5, 5.0, -0.0, 10**8, 10**8 + 1, 7 * 86_400_000,
           7 * 86_400_000 + 1, 10**15, 10**15 + 1, 2**53 + 1, 2**64, 10**400, 1e300,
           float("nan"), float("inf"), "5", [], {}]
TEXTS = [None, True, 5, "", "x" * 300, "a" * 129, "a" * 65, SURROGATE, "x" + SURROGATE, "é", "a b",
         "a/b/c", "other", "bash", "gpt-5.6-sol", "fusion-2:phase:1", "tool_calls", "stop",
         "unavailable", "partial", "complete", '"\\', "\u2028", [], ["bash"]]
MAPS = [None, {}, [], "x", {"bash": 0}, {"bash": 1}, {"bash": 64}, {"bash": 65}, {"bash": True},
        {"bash": 1.0}, {"bash": -1}, {"": 1}, {"a b": 1}, {"view": 2, "bash": 1},
        {"view": 40, "bash": 40}, {"bash": 1, "a b": 1}, {"bash": 2**60}, {"x" * 300: 1},
        {"é": 1}, {"totalNanoAiu": 5}, {"totalNanoAiu": 10**15 + 1}, {"id": "copilot"},
        {"id": "a b"}, {"id": 5}, {"fusionId": "f"}, {"phaseKind": "x" + SURROGATE}]
_ODD = st.sampled_from(FIGURES + TEXTS + MAPS)
_ANY = st.recursive(
    _ODD | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=5)
_TIMES = st.sampled_from(["2026-10-01 00:01:04", "2026-10-01T00:01:04+02:00", "1999-12-31T23:59:59Z",
                          "2200-01-01T00:00:00Z", "2026-02-30T00:00:00Z", "x", 5, None])


# Where each type keeps what it is read for, with the values that matter there: most
# changes go there, one or two at a time, so that a line often stays in the common shape
# but for one value.
_FUSION = {"fusionId": TEXTS, "phaseId": TEXTS, "phaseKind": TEXTS}
_READ = {
    USAGE_RECORD: {("usage",): MAPS, **{("usage", key): FIGURES for key in (
        "inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens", "duration",
        "timeToFirstTokenMs")}, **{("usage", key): TEXTS for key in (
        "model", "initiator", "finishReason", "aiCreditsStatus")}, **{("usage", key): MAPS + TEXTS
        for key in ("provider", "toolCounts", "fusion", "copilotUsage")},
        ("usage", "provider", "id"): TEXTS, ("usage", "toolCounts", "bash"): FIGURES,
        ("usage", "copilotUsage", "totalNanoAiu"): FIGURES,
        **{("usage", "fusion", key): values for key, values in _FUSION.items()}},
    TOOL_STARTED: {("toolCallId",): TEXTS, ("toolName",): TEXTS, ("mcpServerName",): TEXTS,
                   ("mcpToolName",): TEXTS, ("fusion",): MAPS + TEXTS,
                   **{("fusion", key): values for key, values in _FUSION.items()}},
    TOOL_COMPLETED: {("toolCallId",): TEXTS, ("success",): FIGURES, ("fusion",): MAPS + TEXTS,
                     **{("fusion", key): values for key, values in _FUSION.items()}},
}


def _change(data: dict, path: tuple, value: object) -> None:
    """Set the value at `path` (remove it: `value` REMOVE) where its parents are still maps."""
    node = data
    for key in path[:-1]:
        node = node.get(key) if isinstance(node, dict) else None
    if isinstance(node, dict):
        if value is REMOVE:
            node.pop(path[-1], None)
        else:
            node[path[-1]] = copy.deepcopy(value)  # the odd maps are changed later


REMOVE = object()


@st.composite
def _changed_data(draw, event_type: str) -> dict:
    """The common `data` of `event_type` with one or two of the values it is read for
    replaced by odd ones or removed; sometimes any value anywhere replaced, a field added;
    sometimes a bulk past line_json.WHOLE_BELOW (cut out, or the line read whole)."""
    data = copy.deepcopy(COMMON[event_type])
    for _ in range(draw(st.integers(0, 2))):
        path = draw(st.sampled_from(sorted(_READ[event_type])))
        _change(data, path, draw(st.sampled_from([REMOVE] + _READ[event_type][path]) | _ANY))
    if draw(st.integers(0, 3)) == 0:
        slots = json_slots(data)
        if slots:
            node, key = draw(st.sampled_from(slots))
            node[key] = copy.deepcopy(draw(_ODD | _ANY))
    if draw(st.integers(0, 3)) == 0:
        data[draw(st.text(max_size=5) | st.sampled_from(["toolCallId", "model", "fusion", "id"]))] = \
            copy.deepcopy(draw(_ODD | _ANY))
    if draw(st.integers(0, 3)) == 0:
        data[draw(st.sampled_from(["arguments", "result", "error", "x"]))] = {
            "content": draw(st.sampled_from(['a,"', "\\", "x", '"},"fusion":'])) * draw(st.integers(1, 3000))}
    return data


@st.composite
def _lines(draw) -> bytes:
    """A line of a call or tool type, in the CLI's layout or not: changed values, escapes
    where the CLI writes none, keys given twice, bytes before or after, a cut."""
    event_type = draw(st.sampled_from(CALL_TYPES))
    data = draw(_changed_data(event_type))
    envelope = {"type": event_type, "data": data, "id": "e1", "timestamp": "2026-10-01T00:01:04.900Z"}
    if draw(st.integers(0, 3)) == 0:
        envelope["timestamp"] = draw(_TIMES)
    if draw(st.integers(0, 7)) == 0:
        envelope["data"] = draw(st.sampled_from([None, [], "x", {}]))
    text = json.dumps(envelope, separators=(",", ":"), ensure_ascii=draw(st.booleans()))
    change = draw(st.sampled_from(["none"] * 6 + ["escape", "twice", "pad", "cut", "type", "more"]))
    if change == "escape":  # one letter of a value written as \u00XX, as JSON allows
        letter = draw(st.sampled_from(['"b', '"g', '"f', '"c', '"t', '"s']))
        text = text.replace(letter, letter[0] + "\\u%04x" % ord(letter[1]), 1)
    elif change == "twice":  # a key given again: JSON keeps the last
        key = draw(st.sampled_from(['"type":"x"', '"data":{}', '"timestamp":"2026-10-01T00:00:00Z"']))
        text = text[:-1] + "," + key + "}"
    elif change == "pad":
        text = draw(st.sampled_from(["", " ", "\0", "\r"])) + text + draw(st.sampled_from(["", " ", "\r", "\t"]))
    elif change == "cut":
        text = text[:draw(st.integers(0, len(text) - 1))]
    elif change == "more":  # more after the object, ending as one does
        text += draw(st.sampled_from(["{}", " }", "}", '{"a":1}']))
    elif change == "type":
        text = text.replace(event_type, draw(st.sampled_from([event_type + "d", event_type[:-1]])), 1)
    return text.encode("utf-8", "surrogatepass")


def test_each_value_read_changed_alone_reads_as_the_general_way_reads_it():
    """Every value that matters at every place a line is read for, one at a time: the
    short way gives the general way's record, or leaves the line to it."""
    taken = 0
    for event_type, places in _READ.items():
        for path, values in places.items():
            for value in [REMOVE] + values:
                data = copy.deepcopy(COMMON[event_type])
                _change(data, path, value)
                for line in (cli_line(event_type, data),
                             cli_line(event_type, {**data, "result": {"content": "x" * 5000}})):
                    taken += same_as_the_general_way(line)
    assert taken > 500  # most changes keep the common shape: the short way is held to them


@settings(max_examples=1500, deadline=None)
@given(_lines())
def test_any_line_reads_as_the_general_way_reads_it(line):
    same_as_the_general_way(line)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(CALL_TYPES), st.binary(max_size=40), st.binary(max_size=40))
def test_any_bytes_around_a_common_line_read_as_the_general_way_reads_them(event_type, before, after):
    line = cli_line(event_type, COMMON[event_type])
    same_as_the_general_way(before + line + after)
    same_as_the_general_way(line[:len(line) // 2] + before + after + line[len(line) // 2:])
