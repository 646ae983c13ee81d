"""The reading stage's saved state (tailer/turns/session_state.py), and a checkpoint written by the
code before it owned that state (tests/data/checkpoint-main, made by its make.py from main at
5ef4d2c): it loads with nothing lost and nothing counted twice."""

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from tailer import records
from tailer.daemon import checkpoint
from tailer.turns import session_state
from tailer.turns.sessions import Tailer
from tailer.outputs.exposition import Registry
from tailer.outputs.metrics import Metrics
from tailer.turns.session_log import SessionLog

DATA = Path(__file__).resolve().parent / "data" / "checkpoint-main"
GONE_AT = 1_800_000_000.0  # the tombstone's, as make.py wrote it
IDLE_S = 100.0


class Clock:
    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def saved(tmp_path) -> tuple[Path, dict]:
    """A state folder holding the whole log of the session the checkpoint cut, and the
    checkpoint as main wrote it."""
    state_dir = tmp_path / "state"
    (state_dir / "alive").mkdir(parents=True)
    shutil.copy(DATA / "alive" / "events.jsonl", state_dir / "alive" / "events.jsonl")
    return state_dir, json.loads((DATA / "checkpoint.json").read_text())


def read_all(state_dir: Path, clock: Clock, saved: dict | None) -> list:
    """Every turn a tailer finishes over `state_dir`, its idle ones included."""
    tailer = Tailer(state_dir, metrics=Metrics(Registry()), from_start=True,
                    idle_timeout_s=IDLE_S, saved=saved, clock=clock)
    try:
        turns = tailer.poll().turns
        clock.now += 10 * IDLE_S
        return turns + tailer.poll().turns
    finally:
        tailer.close()


# The router's ids (and the plan's repair model) a resolved record has kept since main's
# checkpoint was made: restored from it they are absent (None), and saved again they are
# written so. The one thing an open turn of that checkpoint loses: it was never saved.
ROUTER_IDS = ("policy_version", "plan_version", "model_universe_version", "rule_id",
              "selected_rule_id", "repair_model")


def without_router_ids(state):
    """The checkpoint's data, its resolved records without the router's ids (all None)."""
    if isinstance(state, list):
        return [without_router_ids(item) for item in state]
    if not isinstance(state, dict):
        return state
    if state.get("kind") == "Resolved":
        assert all(state.get(name) is None for name in ROUTER_IDS)
        state = {key: value for key, value in state.items() if key not in ROUTER_IDS}
    return {key: without_router_ids(value) for key, value in state.items()}


def test_main_s_checkpoint_has_what_the_test_needs(saved):
    _, raw = saved
    sessions = raw["sessions"]
    assert raw["version"] == checkpoint.VERSION
    assert sessions["alive"]["open"] and len(sessions["alive"]["finished"]) == 2
    assert sessions["gone"]["open"] and sessions["gone"]["gone_at"] == GONE_AT


def test_main_s_checkpoint_loads_and_is_saved_again_unchanged(saved, tmp_path):
    state_dir, raw = saved
    loaded = checkpoint.load(DATA / "checkpoint.json")
    assert loaded == raw
    tailer = Tailer(state_dir, metrics=Metrics(Registry()), from_start=False,
                    idle_timeout_s=IDLE_S, saved=loaded, clock=Clock(GONE_AT))
    try:
        tailer.start()  # the live session is now a SessionLog made from its saved state
        assert "alive" in tailer.sessions
        again = tailer.state()
    finally:
        tailer.close()
    path = tmp_path / "again.json"
    checkpoint.save(path, {**again, "metrics": raw["metrics"], "pending": raw["pending"],
                           "published_at_ms": raw["published_at_ms"]})
    assert without_router_ids(json.loads(path.read_text())) == raw


def test_main_s_checkpoint_resumes_with_no_turn_lost_or_doubled(saved, tmp_path):
    state_dir, raw = saved
    resumed = read_all(state_dir, Clock(GONE_AT + 1), checkpoint.load(DATA / "checkpoint.json"))
    fresh_dir = tmp_path / "fresh"
    shutil.copytree(state_dir, fresh_dir)
    fresh = read_all(fresh_dir, Clock(GONE_AT + 1), None)

    already = set(raw["sessions"]["alive"]["finished"])
    tombstoned = [turn["fusion"] for turn in raw["sessions"]["gone"]["open"]]
    ids = [turn.key for turn in resumed]
    assert len(ids) == len(set(ids)), "a turn finished twice"
    assert not already & set(ids), "a turn the checkpoint had reported came again"
    assert sorted(ids) == sorted([t.key for t in fresh if t.key not in already]
                                 + tombstoned)
    # The turn open at the cut is the same turn as read in one go, records from before the
    # cut restored from the checkpoint and the rest read from the log.
    by_id = {turn.key: turn for turn in fresh}
    for turn in resumed:
        if turn.session_id == "alive":
            fresh_turn = by_id[turn.key]
            if fresh_turn.resolved is not None:  # main's checkpoint kept no router ids, no plans
                fresh_turn.resolved = records.replace(
                    fresh_turn.resolved, phase_plan=(), **dict.fromkeys(ROUTER_IDS))
            assert turn == fresh_turn
        else:
            assert turn.outcome == "incomplete"


def test_a_session_log_s_state_goes_back_and_forth_unchanged(saved):
    state_dir, raw = saved
    for session_id, part in raw["sessions"].items():
        part = {key: value for key, value in part.items() if key != "gone_at"}
        log = SessionLog.from_state(session_id, state_dir / session_id / "events.jsonl", part)
        assert without_router_ids(json.loads(json.dumps(log.to_state()))) == part
        # The status line's refresh checks and decodes a part in one pass: the same log.
        checked = SessionLog(session_id, log.path, *session_state.checked_session(session_id, part))
        assert checked.to_state() == log.to_state()


@pytest.mark.parametrize("damage", [
    lambda s: s["alive"].update(position=[1, 2, 3]),
    lambda s: s["alive"].update(finished="not a list"),
    lambda s: s["alive"]["open"][0].update(fusion=7),
    # Its start and end are those of its records: none made every reader of it fail.
    lambda s: s["alive"]["open"][0].update(records=[]),
    lambda s: s["gone"].update(gone_at=float("inf")),
    lambda s: s["alive"].update(context={"current": None}),
])
def test_a_damaged_session_part_is_refused_where_it_is_kept(saved, damage):
    _, raw = saved
    damage(raw["sessions"])
    with pytest.raises((KeyError, TypeError, ValueError)):
        session_state.check(raw)
    refused = 0
    for session_id, part in raw["sessions"].items():
        try:
            session_state.checked_session(session_id, part)
        except (KeyError, TypeError, ValueError):
            refused += 1
    assert refused == 1


_ids = st.one_of(st.text(max_size=8), st.text(min_size=199, max_size=202),
                 st.sampled_from(["\ud800", "a\udfff", "fusion-1"]),
                 st.integers(), st.none(), st.lists(st.text(max_size=2), max_size=2),
                 st.dictionaries(st.text(max_size=2), st.integers(), max_size=2))


@given(st.lists(_ids, max_size=6))
def test_the_finished_ids_are_checked_as_each_one_alone(values):
    """The finished ids are checked at once where all pass (the footer's refresh checks up
    to 4,096): a list is refused exactly when one of its values alone would be."""
    def one_by_one():
        for value in values:
            session_state._record_text(value, "an id")

    outcomes = []
    for check in (one_by_one, lambda: session_state._record_texts(values, "an id")):
        try:
            check()
            outcomes.append(None)
        except ValueError as error:
            outcomes.append(str(error))
    assert outcomes[0] == outcomes[1]
