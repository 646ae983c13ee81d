"""The outbox on plain data: what it keeps until the exporter settles it, and what a
checkpoint takes from it and gives back."""

import json

import pytest
from hypothesis import given, strategies as st

from tailer.outputs.otlp import Unit
from tailer.outputs.outbox import Outbox, traces_from_state, traces_to_state


class FakeExporter:
    """Takes what the outbox submits; the test says what became of it (`report`)."""

    def __init__(self, on_result):
        self.on_result = on_result
        self.submitted: list[list[Unit]] = []

    def submit(self, spans):
        self.submitted.append(spans)

    def report(self, outcome, spans):
        self.on_result(outcome, spans)

    def flush(self, timeout):
        return True

    def close(self, timeout):
        pass


def trace(number: int, spans: int = 2) -> list[Unit]:
    trace_id = f"{number:032x}"
    return [Unit(trace_id, json.dumps({"traceId": trace_id, "spanId": f"{index:016x}"}))
            for index in range(spans)]


def outbox_with_exporter(pending=()) -> tuple[Outbox, FakeExporter]:
    made = []
    outbox = Outbox(lambda on_result: made.append(FakeExporter(on_result)) or made[-1], pending)
    return outbox, made[0]


OPERATION = st.tuples(st.sampled_from(["submit", "delivered", "retry", "rejected", "dropped"]),
                      st.integers(1, 5), st.integers(1, 3))


@given(st.lists(OPERATION, max_size=30))
def test_what_is_not_settled_is_kept_once_and_survives_a_restart(operations):
    outbox, exporter = outbox_with_exporter()
    waiting: dict[str, list[Unit]] = {}
    for operation, number, size in operations:
        spans = trace(number, size)
        if operation == "submit":
            outbox.submit(spans)
            waiting.pop(spans[0].key, None)  # the same trace again replaces it, newest
            waiting[spans[0].key] = spans
        else:
            exporter.report(operation, spans)
            outbox.settle()
            if operation != "retry":
                # Only the spans reported are settled: a batch sent in halves (413) may
                # settle part of a trace, and the rest waits.
                settled = {span.json for span in spans}
                trace_id = spans[0].key
                left = [span for span in waiting.get(trace_id, []) if span.json not in settled]
                if left:
                    waiting[trace_id] = left  # in its place: still sent oldest first
                else:
                    waiting.pop(trace_id, None)
    assert outbox.pending_units == sum(map(len, waiting.values()))
    saved = json.loads(json.dumps(outbox.to_state()))
    assert saved == traces_to_state(waiting.values())
    again, exporter = outbox_with_exporter(traces_from_state(saved))
    assert again.pending_units == outbox.pending_units
    assert exporter.submitted == list(waiting.values())  # sent first, oldest first


def test_settle_says_what_became_of_each_batch():
    outbox, exporter = outbox_with_exporter()
    outbox.submit(trace(1, 3))
    exporter.report("retry", trace(1, 3))
    exporter.report("delivered", trace(1, 3))
    assert outbox.settle() == [("retry", 3), ("delivered", 3)]
    assert outbox.settle() == [] and outbox.pending_units == 0


def test_without_an_exporter_nothing_is_kept(caplog):
    outbox = Outbox(None, [trace(1)])
    outbox.submit(trace(2))
    assert not outbox.exporting and outbox.pending_units == 0 and outbox.to_state() == []
    assert "1 traces kept for the collector are dropped" in caplog.text
    assert outbox.flush(1.0)


@pytest.mark.parametrize("damaged", [
    [{"trace_id": "0" * 31, "spans": []}],
    [{"trace_id": "1" * 32, "spans": [json.dumps({"traceId": "2" * 32})]}],
    [{"trace_id": "1" * 32, "spans": ["not json"]}],
    [{"trace_id": "1" * 32}],
    {"trace_id": "1" * 32, "spans": []},
])
def test_damaged_traces_are_refused(damaged):
    with pytest.raises((ValueError, KeyError)):
        traces_from_state(damaged)
