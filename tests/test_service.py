"""The main loop's promises: one turn's failure costs that turn, a crash saves nothing."""

import logging

from exposition_helpers import samples
from sessiongen import START, SessionWriter, every_pattern
from tailer.daemon import checkpoint
from tailer.daemon import service
from tailer.outputs.exposition import Registry
from tailer.daemon.fanout import TurnFanout
from tailer.outputs.metrics import Metrics
from tailer.outputs.outbox import Outbox
from assembly import assemble


def test_a_turn_the_outputs_fail_on_costs_that_turn_only(monkeypatch, caplog):
    writer = SessionWriter("s", START)
    writer.single("gpt-5.6-sol")
    writer.single("mai-code-1.1-flash")
    first, second = assemble(writer.lines(), "s")
    metrics = Metrics(Registry())
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


def test_a_checkpoint_that_can_neither_be_read_nor_moved_aside_stops_the_start(tmp_path, capsys):
    """Running on would fail every save; a clear message and exit code 2 instead."""
    state = tmp_path / "state"
    state.mkdir()
    path = tmp_path / "cp.json"
    path.mkdir()  # not a checkpoint...
    (tmp_path / "cp.json.unreadable").mkdir()
    (tmp_path / "cp.json.unreadable" / "busy").touch()  # ...and its place aside is taken
    config = service.Config(state_dir=state, checkpoint=path)
    assert service.run(config) == 2
    assert "cannot be moved aside" in capsys.readouterr().err


def test_an_event_far_in_the_future_does_not_pin_the_newest_event_time():
    from tailer.copilot.event_records import SessionEnded
    import time

    metrics = Metrics(Registry())
    metrics.count_event(SessionEnded(7_000_000_000 * 10**9))  # 2191: a wrong clock
    metrics.count_event(SessionEnded(time.time_ns() - 10**9))
    shown = samples(metrics.registry.render_final(),
                    "hydrafusion_tailer_last_event_timestamp_seconds")[()]
    assert abs(shown - time.time()) < 60
    restored = Metrics(Registry())
    restored.restore({"hydrafusion_tailer_last_event_timestamp_seconds": [[[], 7e9, False, 0]]})
    assert samples(restored.registry.render_final(),
                   "hydrafusion_tailer_last_event_timestamp_seconds")[()] == 0


def test_a_once_run_that_cannot_save_its_checkpoint_exits_1_with_a_clear_line(tmp_path, monkeypatch, caplog):
    """Its progress is not kept, so a script must not take it for a run that went well."""
    import errno

    state = tmp_path / "state"
    state.mkdir()
    every_pattern("s").write(state)
    config = service.Config(state_dir=state, checkpoint=tmp_path / "cp.json", once=True)

    def full_disk(path, state):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(checkpoint, "save", full_disk)
    with caplog.at_level(logging.WARNING, logger="tailer"):
        assert service.run(config) == 1
    assert f"this --once run could not save the checkpoint {config.checkpoint}" in caplog.text
    assert "No space left on device" in caplog.text
