"""The fanout on plain data: each finished turn goes to the traces (or to the prompt links),
to the counters live or as history, and to the log, and one that fails costs only itself."""

import logging

from assembly import assemble
from exposition_helpers import samples
from sessiongen import START, SessionWriter
from tailer.outputs.exposition import Registry
from tailer.daemon.fanout import TurnFanout
from tailer.outputs.metrics import Metrics
from tailer.outputs.outbox import Outbox, traces_from_state
from test_outbox import FakeExporter


class FakeHistory:
    """History that takes every turn that ended before `cutoff_ms`."""

    def __init__(self, cutoff_ms: int):
        self.cutoff_ms = cutoff_ms
        self.recorded = []

    def takes(self, time_ms: int) -> bool:
        return time_ms < self.cutoff_ms

    def record(self, time_ms: int, gained: list) -> None:
        self.recorded.append((time_ms, gained))


class FakeLinks:
    def __init__(self):
        self.turns = []

    def add_turn(self, turn):
        self.turns.append(turn)


def two_turns():
    writer = SessionWriter("s", START)
    writer.single("gpt-5.6-sol")
    writer.ordinary("mai-code-1.1-flash")
    writer.shutdown()
    return assemble(writer.lines(), "s")


def exporting_outbox() -> tuple[Outbox, list]:
    made = []
    return Outbox(lambda on_result: made.append(FakeExporter(on_result)) or made[-1]), made


def turns_counted(metrics: Metrics) -> float:
    return sum(samples(metrics.registry.render_final(), "hydrafusion_prompts_total").values())


def test_live_turns_are_exported_counted_and_logged(caplog):
    turns = two_turns()
    metrics = Metrics(Registry())
    outbox, exporters = exporting_outbox()
    with caplog.at_level(logging.INFO, logger="tailer"):
        TurnFanout(metrics, outbox, None).send(turns, reading_history=False)
    assert [spans[0].key for spans in exporters[0].submitted] == [
        spans[0].key for spans in outbox_traces(outbox)]
    assert len(exporters[0].submitted) == 2 and turns_counted(metrics) == 2
    # the fusion turn is the first of its router policy version: a line of its own
    assert [line.split()[0] for line in caplog.messages] == ["fusion", "router", "ordinary"]


def outbox_traces(outbox: Outbox) -> list:
    return traces_from_state(outbox.to_state())


def test_turns_read_at_start_up_go_to_history_when_it_takes_them():
    first, second = two_turns()
    metrics = Metrics(Registry())
    history = FakeHistory(cutoff_ms=second.end_ns // 1_000_000)  # takes the first only
    fanout = TurnFanout(metrics, Outbox(None), history)
    fanout.send([first, second], reading_history=True)
    assert [time_ms for time_ms, _ in history.recorded] == [first.end_ns // 1_000_000]
    assert history.recorded[0][1]  # what the samples gained
    fanout.send([first], reading_history=False)  # read live: counted live, whenever it ended
    assert len(history.recorded) == 1


def test_with_prompt_links_the_spans_wait_for_their_pair():
    turns = two_turns()
    links = FakeLinks()
    outbox, exporters = exporting_outbox()
    metrics = Metrics(Registry())
    TurnFanout(metrics, outbox, None, links).send(turns, reading_history=False)
    assert links.turns == turns and exporters[0].submitted == []
    assert turns_counted(metrics) == 2


def test_a_turn_an_output_fails_on_costs_that_turn_only(caplog):
    first, second = two_turns()
    metrics = Metrics(Registry())

    class Failing(FakeLinks):
        def add_turn(self, turn):
            if turn is first:
                raise KeyError("a prompt's text")
            super().add_turn(turn)

    links = Failing()
    TurnFanout(metrics, Outbox(None), None, links).send([first, second], reading_history=False)
    assert links.turns == [second] and turns_counted(metrics) == 1
    assert samples(metrics.registry.render_final(),
                   "hydrafusion_tailer_turn_errors_total") == {(): 1}
    assert "KeyError" in caplog.text and "a prompt's text" not in caplog.text
