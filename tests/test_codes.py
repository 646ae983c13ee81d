"""Codes are codes: a field passed on as a machine code keeps only a code of its kind.

Every field of tailer.copilot.event_records.CODE_FIELDS, given free text, reads as `other` (an id as absent)
and is counted; a key that is no id damages its line; every value the real CLI, the
fixtures and the session generator write is a code; and docs/TRACES.md's table is the code's.
"""

import json
import re
from pathlib import Path

from hypothesis import given, strategies as st

from exposition_helpers import samples
from poison import FRAGMENTS, POISON, write_poisoned_sessions
from sessiongen import every_pattern, whole_session
from tailer import records
from tailer import codes
from tailer.copilot import event_records, event_types, event_values, events
from tailer.commands import scrub
from tailer.turns.session_state import turn_from_data, turn_to_data
from tailer.codes import IDENTIFIER, OTHER
from tailer.outputs.exposition import Registry
from tailer.outputs.metrics import LABEL_VALUE_LIMITS, Metrics
from tailer.turns.assembly import Turn

ROOT = Path(__file__).resolve().parent.parent


def records_of(path: Path) -> list:
    return [record for line in path.read_bytes().split(b"\n")
            if (record := events.parse_line(line)) is not None]


def real_logs(tmp_path: Path) -> list[Path]:
    """The fixtures, the real CLI's recorded sessions and the generator's every pattern."""
    paths = sorted((ROOT / "fixtures").rglob("events.jsonl"))
    paths += sorted((ROOT / "tests" / "data" / "realcli").glob("*/sessions/*/events.jsonl"))
    for writer in (every_pattern("gen-0"), whole_session("gen-1", totals_off_by=3)):
        paths.append(writer.write(tmp_path))
    return paths


def test_no_real_value_becomes_other(tmp_path):
    read = 0
    for path in real_logs(tmp_path):
        for record in records_of(path):
            assert not isinstance(record, event_records.Malformed) or record.reason.startswith(
                ("absurd_", "damaged_", "invalid_")), (path, record)
            if not isinstance(record, event_records.Malformed):
                assert record.not_codes == (), (path, record)
                read += 1
    assert read > 500


def test_free_text_in_every_code_field_becomes_other_and_is_named(tmp_path):
    write_poisoned_sessions(tmp_path, every_pattern)
    named, damage = set(), set()
    for path in sorted(tmp_path.rglob("events.jsonl")):
        for record in records_of(path):
            assert not any(fragment in repr(record) for fragment in FRAGMENTS), record
            if isinstance(record, event_records.Malformed):
                damage.add(record.reason)
            else:
                named |= set(record.not_codes)
    assert named == set(event_records.NOT_CODE_FIELDS)
    assert {"bad_fusion_id", "bad_attempt_id", "bad_tool_call_id"} <= damage


def test_a_refused_code_is_other_and_a_refused_id_absent():
    leg = {"fusionId": "fusion-1", "phaseId": "fusion-1:judge", "phaseKind": "judge",
           "model": "gpt-5.6-sol", "status": "failed", "durationMs": 5,
           "degradedToPhaseId": POISON, "reason": POISON}
    record = events.parse_line(json.dumps({
        "type": event_types.PHASE_FAILED, "timestamp": "2026-11-04T12:00:00Z", "data": leg}).encode())
    assert (record.failure_reason, record.degraded_to_phase_id) == (OTHER, None)
    assert (record.phase_kind, record.model) == ("judge", "gpt-5.6-sol")
    assert record.not_codes == ("failure_reason", "degraded_to_phase_id")
    leg["phaseId"] = POISON
    assert events.parse_line(json.dumps({
        "type": event_types.PHASE_FAILED, "timestamp": "2026-11-04T12:00:00Z", "data": leg}).encode()
    ) == event_records.Malformed("bad_phase_id")


def test_a_prompt_whose_id_is_no_id_is_placed_by_its_time():
    record = events.parse_line(json.dumps({
        "type": event_types.USER_MESSAGE, "id": POISON, "timestamp": "2026-11-04T12:00:00Z",
        "data": {}}).encode())
    assert record.prompt_id.startswith("at-") and record.not_codes == ("prompt_id",)


def test_names_of_maps_that_are_no_names_add_up_under_other():
    line = {"type": event_types.SHUTDOWN, "timestamp": "2026-11-04T12:00:00Z", "data": {
        "modelMetrics": {name: {"requests": {"count": 1}} for name in ("gpt-5.6-sol", POISON, "a b")}}}
    record = events.parse_line(json.dumps(line).encode())
    assert {name: usage.request_count for name, usage in record.models.items()} == {
        "gpt-5.6-sol": 1, OTHER: 2}
    assert record.not_codes == ("models",)


def test_a_record_restored_from_a_checkpoint_keeps_only_codes():
    """A checkpoint is a file anyone with the account can edit: what it restores is checked
    as what the parser reads."""
    leg = event_records.LegEnded(
        1788921807960000000, fusion_id="fusion-1", phase_id="fusion-1:phase:0", phase_kind="primary",
        role=POISON,
        scope="root", model="gpt-5.6-sol", status="succeeded", verdict=None, duration_ms=1.0,
        usage=event_records.Usage(), failure_reason=None, degraded_to_phase_id=POISON)
    (restored,) = turn_from_data(turn_to_data(Turn("s", "fusion-1", legs=[leg]))).legs
    assert (restored.role, restored.degraded_to_phase_id, restored.model) == (OTHER, None, "gpt-5.6-sol")


# Every text, and texts built of the characters codes are made of, so both answers occur.
_TEXTS = st.one_of(st.text(max_size=80), st.text(alphabet="aZ09._:-/+ ", min_size=1, max_size=80))


@given(st.sampled_from([(kind, name) for kind, fields in event_records.CODE_FIELDS.items()
                        for name, _ in fields]), _TEXTS)
def test_a_code_field_holds_a_code_other_or_nothing(field, text):
    """A record made with any text in any code field keeps it only when it is a code."""
    record_type, name = field
    kind = dict(event_records.CODE_FIELDS[record_type])[name]
    values = {f.name: _filler(f.type) for f in records.fields(record_type)}
    values[name] = {"tuple": (text,), "dict": {text: event_records.Usage()}}.get(
        type(values[name]).__name__, text)
    record = record_type(**values)
    refused = event_values.codes_only(record)
    kept = getattr(record, name)
    shown = next(iter(kept)) if isinstance(kept, (tuple, dict)) else kept
    if text and kind.is_code(text):
        assert (shown, refused) == (text, ())
    elif text:
        assert shown == (None if kind is IDENTIFIER else OTHER) and refused == (name,)


def _filler(annotation: str):
    """A plain value of a record field's declared type."""
    if "tuple" in annotation:
        return ()
    if "dict" in annotation:
        return {}
    if "Usage" in annotation:
        return event_records.Usage()
    return {"int": 0, "float": 0.0, "bool": False}.get(annotation.split(" ")[0], "x")


def test_every_label_value_of_the_refusals_counter_has_its_own_series():
    metrics = Metrics(Registry(label_value_limits=LABEL_VALUE_LIMITS))
    shown = samples(metrics.registry.render_final(), "hydrafusion_tailer_values_not_codes_total")
    assert shown == {(("field", name),): 0 for name in event_records.NOT_CODE_FIELDS}
    record = events.parse_line(json.dumps({
        "type": event_types.RESOLVED, "timestamp": "2026-11-04T12:00:00Z",
        "data": {"fusionId": "fusion-1", "pattern": POISON, "policy": POISON}}).encode())
    metrics.count_event(record)
    shown = samples(metrics.registry.render_final(), "hydrafusion_tailer_values_not_codes_total")
    assert shown[(("field", "pattern"),)] == shown[(("field", "policy"),)] == 1
    assert sum(shown.values()) == 2


def test_scrub_keeps_a_string_only_when_it_is_a_code(tmp_path):
    raw = tmp_path / "raw"
    write_poisoned_sessions(raw, every_pattern)
    scrub.scrub_tree(raw, tmp_path / "out", seed="s")
    text = "".join(path.read_text() for path in sorted((tmp_path / "out").rglob("events.jsonl")))
    assert text.count('"other"') > 100  # the poisoned fields are there, as `other`
    assert not any(fragment in text for fragment in FRAGMENTS)


def test_scrub_keeps_every_real_code_as_written(tmp_path):
    writer = every_pattern("scrub-real")
    writer.write(tmp_path / "raw")
    scrub.scrub_tree(tmp_path / "raw", tmp_path / "out", seed="s")
    (path,) = (tmp_path / "out").rglob("events.jsonl")
    assert '"other"' not in path.read_text()
    assert all(not isinstance(record, event_records.Malformed) and record.not_codes == ()
               for record in records_of(path))


# -- docs/TRACES.md ------------------------------------------------------------------------


def _table(heading: str) -> dict[str, list[str]]:
    """First cell (unquoted) -> the other cells, of the table whose header starts so."""
    text = (ROOT / "docs" / "TRACES.md").read_text()
    start = text.index(heading)
    rows = {}
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[cells[0].strip("`")] = cells[1:]
    return rows


def test_the_docs_table_of_fields_is_the_codes():
    documented = {name: cells[-1] for name, cells in _table("| Field (`field` label)").items()}
    in_code = {name: kind.name for fields in event_records.CODE_FIELDS.values() for name, kind in fields}
    assert documented == {**in_code, "prompt_id": IDENTIFIER.name}
    assert set(documented) == set(event_records.NOT_CODE_FIELDS)


def test_the_docs_table_of_kinds_names_every_kind_and_its_length():
    kinds = {value.name: value for value in vars(codes).values() if isinstance(value, codes.CodeKind)}
    documented = _table("| Kind | Rule")
    assert set(documented) == set(kinds)
    for name, (_, longest, _) in documented.items():
        kind = kinds[name]
        length = int(re.match(r"\d+", longest).group())
        assert kind.is_code("a" * length) and not kind.is_code("a" * (length + 1)), name
