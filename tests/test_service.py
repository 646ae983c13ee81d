"""The main loop's promises: one turn's failure costs that turn, a crash saves nothing."""

import logging

from exposition_helpers import samples
from sessiongen import START, SessionWriter, every_pattern
from tailer import checkpoint, service
from tailer.exposition import Registry
from tailer.fanout import TurnFanout
from tailer.metrics import TurnMetrics
from tailer.outbox import Outbox
from assembly import assemble


def test_a_turn_the_outputs_fail_on_costs_that_turn_only(monkeypatch, caplog):
    writer = SessionWriter("s", START)
    writer.single("gpt-5.6-sol")
    writer.single("mai-code-1.1-flash")
    first, second = assemble(writer.lines(), "s")
    metrics = TurnMetrics(Registry())
    fanout = TurnFanout(metrics, Outbox(None), None)
    real_count = metrics.count_turn

    def failing_on_the_first(turn):
        if turn is first:
            raise ZeroDivisionError("secret text")
        real_count(turn)

    monkeypatch.setattr(metrics, "count_turn", failing_on_the_first)
    with caplog.at_level(logging.ERROR, logger="tailer"):
        fanout.send([first, second], reading_history=False)
    text = metrics.registry.render_final()
    assert samples(text, "hydrafusion_tailer_turn_errors_total") == {(): 1}
    assert sum(samples(text, "hydrafusion_turns_total").values()) == 1
    assert "ZeroDivisionError" in caplog.text and "secret text" not in caplog.text


def test_an_unexpected_error_ends_the_run_without_a_save(tmp_path, monkeypatch):
    """Nothing is marked finished unless it was delivered: turns read in the pass that
    failed must be read again next time, so the checkpoint is left as it was."""
    state = tmp_path / "state"
    state.mkdir()
    every_pattern("s").write(state)
    config = service.Config(state_dir=state, checkpoint=tmp_path / "cp.json", from_start=True)

    def broken_step(self):
        self.tailer.poll()  # reads and finishes the turns...
        raise RuntimeError("a bug")  # ...and fails before they are handed on

    monkeypatch.setattr(service.Run, "step", broken_step)
    assert service.run(config) == 1
    assert checkpoint.load(config.checkpoint) is None
