"""tailer/outputs/prompt_links.py: each turn and the CLI's own trace of the same prompt, linked
both ways, whichever side is read first (docs/TRACES.md, "The CLI's own trace").

Plain data: two prompts of one session, each as the CLI's `invoke_agent` root record and
as the turn the tailer rebuilds from log lines, with clocks the test moves. The same
pairing on what the real CLI wrote is in tests/test_realcli.py.
"""

import json
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from assembly import assemble
from tailer.outputs import prompt_links
from tailer.outputs.copilot_otel import Record, Root, convert
from tailer.outputs.spans import span_id, trace_id

SESSION = "8d3c0f52-0c2e-4a55-b0a7-1f1a3e0f0c11"
T0 = 1793793600_000_000_000  # 2026-11-04T12:00:00Z
SECOND = 10**9


def log_lines() -> list[str]:
    """A fusion turn (12:00:00-12:00:05, routing from 11:59:59.9) and an ordinary prompt
    (12:01:00), which ends at the shutdown."""
    return [json.dumps(line) for line in [
        {"type": "session.fusion_resolved", "timestamp": "2026-11-04T12:00:00.000Z",
         "data": {"fusionId": "fusion-a", "pattern": "single", "routingLatencyMs": 100}},
        {"type": "session.fusion_completed", "timestamp": "2026-11-04T12:00:05.000Z",
         "data": {"fusionId": "fusion-a", "pattern": "single", "outcome": "completed",
                  "durationMs": 5100, "totalNanoAiu": 0}},
        {"type": "user.message", "timestamp": "2026-11-04T12:01:00.000Z", "id": "u1",
         "data": {}},
        {"type": "session.shutdown", "timestamp": "2026-11-04T12:01:05.000Z", "data": {}},
    ]]


def converted(line: dict) -> Record:
    return convert(json.dumps(line).encode(), Counter())


def root_line(number: int, start_s: float, end_s: float, session: str = SESSION) -> dict:
    """The CLI's root span record of a prompt, as its file export writes it."""
    return {"type": "span", "traceId": f"{number:032x}", "spanId": f"{number:016x}",
            "name": "invoke_agent", "kind": 0,
            "startTime": [int(T0 // SECOND + start_s), int(start_s % 1 * 1e9)],
            "endTime": [int(T0 // SECOND + end_s), int(end_s % 1 * 1e9)],
            "attributes": {"gen_ai.operation.name": "invoke_agent",
                           "gen_ai.conversation.id": session},
            "resource": {"attributes": {"service.name": "github-copilot"}}}


def cli_root(number: int, start_s: float, end_s: float, session: str = SESSION) -> Record:
    return converted(root_line(number, start_s, end_s, session))


def cli_child(number: int) -> Record:
    return converted({**root_line(number, 0.1, 0.2), "spanId": f"{number + 100:016x}",
                      "parentSpanId": f"{number:016x}", "name": "chat gpt-5.6-sol"})


class Clocks:
    def __init__(self, now_ns: int):
        self.monotonic = 0.0
        self.now_ns = now_ns


def linker(now_ns: int = T0 + 70 * SECOND, open_turns=lambda session: []):
    clocks = Clocks(now_ns)
    links = prompt_links.PromptLinks(open_turns, wait_s=15.0,
                                     clock=lambda: clocks.monotonic,
                                     now_ns=lambda: clocks.now_ns)
    return links, clocks


def sent(links) -> tuple[dict, dict]:
    """What went out: our roots by trace id, the CLI's spans by span id."""
    traces, units = links.take()
    ours = {spans[0].key: json.loads(spans[0].json) for spans in traces}
    theirs = {}
    for unit in units:
        (span,) = json.loads(unit.json)["scopeSpans"][0]["spans"]
        theirs[span["spanId"]] = span
    return ours, theirs


def link_of(span: dict) -> tuple[str, str, str] | None:
    links = span.get("links", [])
    if not links:
        return None
    (link,) = links
    (attribute,) = link["attributes"]
    return link["traceId"], link["spanId"], attribute["value"]["stringValue"]


FUSION_TRACE = trace_id(SESSION, "fusion-a")
FUSION_ROOT = span_id(SESSION, "fusion-a", "turn")
ORDINARY_TRACE = trace_id(SESSION, "prompt-u1")
ORDINARY_ROOT = span_id(SESSION, "prompt-u1", "turn")


def assert_both_linked(ours: dict, theirs: dict) -> None:
    assert link_of(ours[FUSION_TRACE]) == (f"{1:032x}", f"{1:016x}", "copilot_cli")
    assert link_of(ours[ORDINARY_TRACE]) == (f"{2:032x}", f"{2:016x}", "copilot_cli")
    assert link_of(theirs[f"{1:016x}"]) == (FUSION_TRACE, FUSION_ROOT, "hydrafusion_turn")
    assert link_of(theirs[f"{2:016x}"]) == (ORDINARY_TRACE, ORDINARY_ROOT, "hydrafusion_turn")
    assert link_of(theirs[f"{101:016x}"]) is None  # only the prompt's root carries it


def test_turns_first_wait_for_the_clis_roots_and_both_are_linked():
    links, clocks = linker()
    links.add_cli(cli_child(1))  # the CLI writes telemetry: a turn waits for its root
    _, child = sent(links)
    for turn in assemble(log_lines(), SESSION):
        links.add_turn(turn)
    links.expire()
    assert links.take() == ([], [])  # recent: they wait for the CLI
    clocks.monotonic = 5.0
    for record in (cli_root(1, 0.0, 5.5), cli_root(2, 59.9, 64.0)):
        links.add_cli(record)
    ours, theirs = sent(links)
    assert_both_linked(ours, {**child, **theirs})


def test_cli_roots_first_wait_for_the_turns_and_both_are_linked():
    links, clocks = linker()
    for record in (cli_child(1), cli_root(1, 0.0, 5.5), cli_root(2, 59.9, 64.0)):
        links.add_cli(record)
    links.expire()
    ours, theirs = sent(links)
    assert list(theirs) == [f"{101:016x}"]  # the child goes at once; the roots wait
    clocks.monotonic = 3.0
    for turn in assemble(log_lines(), SESSION):
        links.add_turn(turn)
    ours, later = sent(links)
    assert_both_linked(ours, {**theirs, **later})


def test_a_cli_root_links_to_a_turn_still_open_whose_spans_come_later():
    """An ordinary prompt ends only at the next prompt: the CLI's root is long written."""
    lines = log_lines()
    (open_turn,) = [t for t in assemble(lines[:3], SESSION)]  # the fusion turn is done
    still_open = assemble(lines[:3] + ['{"type":"session.fusion_resolved",'
                                       '"timestamp":"2026-11-04T12:09:00.000Z","data":'
                                       '{"fusionId":"fusion-b"}}'], SESSION)
    ordinary = next(t for t in still_open if t.ordinary)
    opened = {SESSION: [ordinary]}
    links, clocks = linker(open_turns=lambda session: opened.get(session, []))
    links.add_turn(open_turn)
    links.add_cli(cli_root(2, 59.9, 64.0))
    _, theirs = sent(links)
    assert link_of(theirs[f"{2:016x}"]) == (ORDINARY_TRACE, ORDINARY_ROOT, "hydrafusion_turn")
    clocks.monotonic = 600.0  # finished at the next prompt, ten minutes on
    links.add_turn(ordinary)
    ours, _ = sent(links)
    assert link_of(ours[ORDINARY_TRACE]) == (f"{2:032x}", f"{2:016x}", "copilot_cli")


def test_without_the_clis_telemetry_a_turn_is_not_held_back():
    links, clocks = linker()
    for turn in assemble(log_lines(), SESSION):
        links.add_turn(turn)
    links.expire()  # the end of the pass that read them
    ours, _ = sent(links)
    assert set(ours) == {FUSION_TRACE, ORDINARY_TRACE}
    clocks.monotonic = prompt_links.ACTIVE_S  # the CLI wrote, ten minutes ago
    links.add_cli(cli_child(1))
    clocks.monotonic += prompt_links.ACTIVE_S
    links.add_turn(assemble(log_lines(), SESSION)[0])
    links.expire()
    assert [spans[0].key for spans in links.take()[0]] == [FUSION_TRACE]


def test_what_waits_too_long_goes_unlinked_and_what_waits_is_kept_unlinked():
    links, clocks = linker()
    (fusion, _) = assemble(log_lines(), SESSION)
    links.add_cli(cli_root(9, 300.0, 301.0))  # another prompt of the session
    links.add_turn(fusion)
    traces, units = links.held()
    assert [spans[0].key for spans in traces] == [FUSION_TRACE]
    assert [json.loads(unit.json)["scopeSpans"][0]["spans"][0].get("links") for unit in units] \
        == [None]
    clocks.monotonic = 14.9
    links.expire()
    assert links.take() == ([], [])
    clocks.monotonic = 15.0
    links.expire()
    ours, theirs = sent(links)
    assert link_of(ours[FUSION_TRACE]) is None and link_of(theirs[f"{9:016x}"]) is None
    assert links.held() == ([], [])


def test_old_data_read_in_one_pass_is_linked_without_waiting():
    """A backfill: both sides long past; they pair up within the pass, then go."""
    links, _ = linker(now_ns=T0 + 86400 * SECOND)
    for turn in assemble(log_lines(), SESSION):
        links.add_turn(turn)
    for record in (cli_child(1), cli_root(1, 0.0, 5.5)):
        links.add_cli(record)
    links.expire()
    ours, theirs = sent(links)
    assert link_of(ours[FUSION_TRACE])[0] == f"{1:032x}"
    assert link_of(ours[ORDINARY_TRACE]) is None  # its CLI root was never read
    assert link_of(theirs[f"{1:016x}"])[:2] == (FUSION_TRACE, FUSION_ROOT)


def test_another_sessions_root_at_the_same_time_is_not_a_match():
    links, clocks = linker()
    (fusion, _) = assemble(log_lines(), SESSION)
    links.add_turn(fusion)
    links.add_cli(cli_root(1, 0.0, 5.5, session="another-session"))
    clocks.monotonic = 20.0
    links.expire()
    ours, theirs = sent(links)
    assert link_of(ours[FUSION_TRACE]) is None and link_of(theirs[f"{1:016x}"]) is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 10**6)), min_size=1,
                max_size=8),
       st.integers(0, 10**6), st.integers(0, 10**6))
def test_of_back_to_back_prompts_each_matches_its_own(gaps, jitter_start, jitter_end):
    """Prompts of a session follow one another (each starts after the last ended); the
    CLI's root of a prompt may start a little after the turn's routing and end a little
    after its last event, never past the next prompt. Each root finds its own turn."""
    turns, cli, at = [], [], 0
    for number, (gap, length) in enumerate(gaps):
        start, end = at + gap, at + gap + length
        turns.append(Root(SESSION, f"t{number}", "s", start, end))
        cli.append(Root(SESSION, f"c{number}", "s", start + min(jitter_start, length),
                        end + min(jitter_end, gaps[number + 1][0] if number + 1 < len(gaps)
                                  else jitter_end)))
        at = cli[-1].end_ns + 1
    for number, root in enumerate(cli):
        assert prompt_links.best_match(root, turns).trace_id == f"t{number}"
