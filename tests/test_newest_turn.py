"""The waterfall opens on the newest turn until one is chosen.

Grafana cannot run here (its licence rules it out), so this checks the three parts the
behaviour rests on, each against its source: the tailer gives every turn's root span a
`hydrafusion.turn.key` that sorts as text in the order the turns ended and ends in the
trace id; the dashboard's `traceId` variable lists those values from Tempo (a label-values
query over the dashboard's time range), keeps the trace id (the regex's `value` group),
sorts by the rest (`text`) newest first and starts empty, so Grafana selects its first
option (grafana/scenes MultiValueVariable: a current value not among the options becomes
the first option; one set from a URL, as the turn list's link does, is kept); and Tempo
answers a label-values query with up to `max_bytes_per_tag_values_query` bytes of values.
The option list is rebuilt below as scenes' `metricNamesToVariableValues` builds it.
"""

import gzip
import json
import re
from datetime import datetime, timedelta, timezone

import yaml
from hypothesis import given, strategies as st

import dashboard as dash
from assembly import assemble
from fixture_truth import FIXTURES
from otlp_sink import decode_body, plain_attributes, span_dicts
from tailer.outputs.otlp import encode_request
from tailer.outputs.spans import turn_key, turn_spans

KEY = "hydrafusion.turn.key"
SORT_ALPHABETICAL_DESC = 2
REFRESH_ON_TIME_RANGE_CHANGE = 2
# The heaviest month the stack is sized for: 1,000 turns a day for 31 days.
MONTH_OF_TURNS = 31_000
_MS = timedelta(milliseconds=1)


def trace_variable():
    (variable,) = [v for v in dash.load_dashboard()["templating"]["list"] if v["name"] == "traceId"]
    return variable


def variable_options(variable: dict, values: list[str]) -> list[tuple[str, str]]:
    """(text, value) of each option, as Grafana builds them from label values."""
    pattern = re.fullmatch(r"/(.*)/([a-z]*)", variable["regex"])
    regex = re.compile(pattern.group(1).replace("(?<", "(?P<"))
    options, seen = [], set()
    for raw in values:
        match = regex.search(raw)
        if match is None:
            continue
        text, value = match.group("text"), match.group("value")
        if value not in seen:
            seen.add(value)
            options.append((text, value))
    assert variable["sort"] == SORT_ALPHABETICAL_DESC
    return sorted(options, key=lambda option: option[0], reverse=True)


def fixture_spans() -> list[dict]:
    spans = []
    for folder in sorted(FIXTURES.iterdir()):
        lines = (folder / "events.jsonl").read_text(encoding="utf-8").splitlines()
        for turn in assemble([line for line in lines if line], folder.name):
            body = gzip.decompress(encode_request(turn_spans(turn), {"service.name": "t"}, "t", "0"))
            spans += span_dicts(decode_body(body))
    return spans


def test_the_turn_variable_lists_turns_from_tempo_newest_first_and_starts_on_the_first():
    variable = trace_variable()
    assert variable["type"] == "query" and variable["datasource"]["type"] == "tempo"
    assert variable["query"]["type"] == 1 and variable["query"]["label"] == KEY
    assert variable["refresh"] == REFRESH_ON_TIME_RANGE_CHANGE
    assert not variable["multi"] and not variable["includeAll"]
    assert variable["current"]["value"] == ""


def test_the_waterfall_opens_on_the_newest_turn_of_the_demo_fixtures():
    spans = fixture_spans()
    roots = [s for s in spans if not s.get("parentSpanId")]
    keyed = [s for s in spans if KEY in plain_attributes(s["attributes"])]
    assert keyed == roots and len(roots) > 20
    assert {plain_attributes(r["attributes"])["hydrafusion.turn.kind"] for r in roots} >= {"fusion", "ordinary"}
    options = variable_options(trace_variable(), [plain_attributes(s["attributes"])[KEY] for s in keyed])
    assert sorted(value for _, value in options) == sorted(r["traceId"] for r in roots)
    newest = max(roots, key=lambda r: int(r["endTimeUnixNano"]))
    assert options[0][1] == newest["traceId"]
    for text, value in options:
        root = next(r for r in roots if r["traceId"] == value)
        assert text.endswith(" " + root["name"])


@given(st.lists(st.integers(946_684_800_000, 7_258_118_399_999), min_size=2, max_size=30, unique=True),
       st.sampled_from(["hydrafusion cascade", "ordinary claude-sonnet-4.6", "hydrafusion route_failed"]))
def test_keys_sort_as_text_in_the_order_turns_ended(ends_ms, name):
    """Any end time the tailer accepts (years 2000 to 2199), to the millisecond."""
    keys = {end: turn_key(end * 1_000_000 + 999_999, name, f"{end:032x}") for end in ends_ms}
    assert sorted(keys.values()) == [keys[end] for end in sorted(ends_ms)]
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    for end, key in keys.items():
        when = datetime.strptime(key.split(" ")[0], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
        assert (when - epoch) // _MS == end


def test_tempo_answers_a_month_of_turn_keys_whole():
    tempo = yaml.safe_load((dash.REPO / "tempo" / "tempo.yaml").read_text())
    limit = tempo["overrides"]["defaults"]["read"]["max_bytes_per_tag_values_query"]
    longest = max(len(plain_attributes(s["attributes"])[KEY].encode())
                  for s in fixture_spans() if not s.get("parentSpanId"))
    assert limit >= MONTH_OF_TURNS * longest
