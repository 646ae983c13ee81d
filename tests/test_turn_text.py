"""A turn's JSON text as turn_row writes it (tailer/report/turn_text.py) is the text the
general path writes, json.dumps of its fields (report_helpers.turn_json), for any value
its fields' types allow: texts of any character, numbers of any size, None where a field may be
absent. Floats are finite, as the records' are (the decoders refuse the others)."""

from hypothesis import given, strategies as st

from tailer.copilot.event_records import ModelCall, Usage
from tailer.report import turn_text
from report_helpers import turn_json
from tailer.report.figures import compact_json
from tailer.report.rows import CallRow, LegRow, ToolRow, TurnRow
from tailer.turns.assembly import AT_COMMIT, BETWEEN_CALLS, LIVE, ToolCall, call_start_ns

TEXTS = st.text()
MAYBE_TEXTS = st.none() | TEXTS
COUNTS = st.integers(0, 2**64)
NUMBERS = st.floats(allow_nan=False, allow_infinity=False) | st.integers(-2**64, 2**64)
MAYBE_NUMBERS = st.none() | NUMBERS
TIMES = st.integers(0, 2**63)
LEGS = st.none() | st.integers(0, 100)


@st.composite
def model_calls(draw) -> ModelCall:
    usage = Usage(1, *(draw(COUNTS) for _ in range(5)))
    return ModelCall(draw(TIMES), draw(TEXTS), draw(MAYBE_TEXTS), usage, draw(st.booleans()),
                     draw(st.floats(0, 1e12)), draw(st.none() | st.floats(0, 1e12)),
                     draw(MAYBE_TEXTS), draw(MAYBE_TEXTS), draw(MAYBE_TEXTS), draw(MAYBE_TEXTS),
                     draw(MAYBE_TEXTS), tuple(draw(st.lists(TEXTS, max_size=2))))


@st.composite
def tool_calls(draw) -> ToolCall:
    start_ns = draw(TIMES)
    return ToolCall(draw(TEXTS), draw(MAYBE_TEXTS), draw(MAYBE_TEXTS), draw(MAYBE_TEXTS),
                    draw(st.none() | st.booleans()), draw(MAYBE_TEXTS), start_ns,
                    start_ns + draw(TIMES), draw(st.sampled_from((LIVE, BETWEEN_CALLS, AT_COMMIT))))


@st.composite
def leg_rows(draw) -> LegRow:
    return LegRow(draw(TEXTS), draw(TEXTS), draw(TEXTS), draw(TEXTS), draw(MAYBE_TEXTS),
                  draw(st.booleans()), draw(NUMBERS), draw(NUMBERS), draw(COUNTS),
                  draw(MAYBE_NUMBERS), draw(COUNTS), draw(COUNTS), draw(COUNTS), draw(COUNTS),
                  draw(COUNTS), draw(MAYBE_TEXTS))


@st.composite
def turn_rows(draw) -> TurnRow:
    return TurnRow(draw(TEXTS), draw(TEXTS), draw(TEXTS), draw(TEXTS), draw(TEXTS), draw(TEXTS),
                   draw(TEXTS), draw(st.booleans()), draw(MAYBE_NUMBERS), draw(COUNTS),
                   draw(COUNTS), draw(NUMBERS), draw(MAYBE_NUMBERS), draw(MAYBE_TEXTS),
                   draw(MAYBE_TEXTS), draw(st.lists(leg_rows(), max_size=3)), None,
                   draw(MAYBE_TEXTS))


def call_row(turn_start_ns: int, call: ModelCall, leg: int | None) -> CallRow:
    """What rows.CallRow says a call is."""
    usage = call.usage
    return CallRow(leg, call.model, (call_start_ns(call) - turn_start_ns) / 1e6, call.duration_ms,
                   usage.nano_aiu / 1e9 if call.credits_known else None, usage.uncached_input(),
                   usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens,
                   call.finish_reason)


def tool_row(turn_start_ns: int, tool: ToolCall, leg: int | None) -> ToolRow:
    """What rows.ToolRow says a tool call is."""
    return ToolRow(leg, tool.name or "unknown", tool.success, (tool.start_ns - turn_start_ns) / 1e6,
                   (tool.end_ns - tool.start_ns) / 1e6, tool.timing)


@given(TIMES, model_calls(), LEGS)
def test_a_calls_text_is_json_of_its_row(turn_start_ns, call, leg):
    assert turn_text.call_text(turn_start_ns, call, leg) == compact_json(call_row(turn_start_ns, call, leg))


@given(TIMES, tool_calls(), LEGS)
def test_a_tools_text_is_json_of_its_row(turn_start_ns, tool, leg):
    assert turn_text.tool_text(turn_start_ns, tool, leg) == compact_json(tool_row(turn_start_ns, tool, leg))


@given(turn_rows(), TIMES, st.lists(st.tuples(model_calls(), LEGS), max_size=3),
       st.lists(st.tuples(tool_calls(), LEGS), max_size=3))
def test_a_turns_text_is_the_general_paths(row, turn_start_ns, calls, tools):
    text, start_at = turn_text.printed(
        row, [turn_text.call_text(turn_start_ns, call, leg) for call, leg in calls],
        [turn_text.tool_text(turn_start_ns, tool, leg) for tool, leg in tools])
    general = turn_json(row, [call_row(turn_start_ns, call, leg) for call, leg in calls],
                        [tool_row(turn_start_ns, tool, leg) for tool, leg in tools])
    assert (text, start_at) == (general.text, general.start_at)
