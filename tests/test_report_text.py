"""The report's table, CSV and JSON."""

import contextlib
import csv
import io
import json
import os
import pty
import re
import subprocess
import sys
from datetime import datetime, timezone

import pytest

from report_helpers import report_json, run_report, wanted_turns, write_month
from sessiongen import START, SessionWriter, every_pattern, whole_session
from tailer import records
from tailer.commands import cli
from tailer.copilot.files import session_logs
from tailer.report.figures import snapshot
from tailer.report.checks import check_figures
from tailer.report.rows import turn_row
from tailer.report.read import Selection, SessionReader
from tailer.report.table import render_table
from tailer.report.text import CSV_COLUMNS, render_calls_csv, render_csv, render_json
from tailerproc import ROOT, tailer_env

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)


def snap_of(state_dir):
    reader = SessionReader()
    logs = session_logs(state_dir)
    rows = [turn_row(turn, timezone.utc) for turn in wanted_turns(logs, Selection(), reader)]
    return snapshot(rows, now=NOW, tz=timezone.utc, skipped=reader.skipped(),
                    checks=list(map(check_figures, reader.reconciliations)))


def test_table_fits_its_width_with_long_names(tmp_path):
    write_month(tmp_path, days=8)
    writer = SessionWriter("long-names", START)
    writer.cascade("a-model-with-a-name-much-longer-than-anyone-would-give-it-really-" * 3,
                   "judge-" * 30, verdict="reject", repair_model="r" * 150)
    writer.critique("d" * 60, ["c1" * 20, "c2" * 20, "c3" * 20], revision_model="v" * 40)
    writer.write(tmp_path)
    snap = snap_of(tmp_path)
    for width in (100, 80, 60):
        for color in (False, True):
            lines = render_table(snap, width=width, color=color).splitlines()
            assert max(len(ANSI.sub("", line)) for line in lines) <= width
    assert render_table(snap, width=100).count("\n") > len(snap.turns)


def test_colour_changes_nothing_but_colour(tmp_path):
    every_pattern("colour").write(tmp_path)
    snap = snap_of(tmp_path)
    plain = render_table(snap)
    coloured = render_table(snap, color=True)
    assert not ANSI.search(plain)
    assert ANSI.search(coloured)
    assert ANSI.sub("", coloured) == plain


def test_every_kind_of_turn_is_visible(tmp_path):
    writer = every_pattern("visible")
    writer.write(tmp_path)
    table = render_table(snap_of(tmp_path))
    joined = " ".join(line.strip() for line in table.splitlines())
    assert "mai-code-1.1-flash -> gpt-5.6-sol judge:reject -> gpt-5.6-sol repair*" in joined
    assert "mai-code-1.1-flash* -> gpt-5.6-sol judge:accept" in joined
    assert "gpt-5.6-sol judge:failed" in joined and "judge:cancelled" in joined
    assert "gpt-5.6-mini fallback*" in joined
    outcomes = re.findall(r"^\s+\d\d:\d\d:\d\d\s+\S+\s+\S+\s+[\d.]+\s+\d+/\d+\s+\S+\s+(\S+)",
                          table, re.M)
    assert sorted(outcomes) == sorted(turn.outcome for turn in writer.expected)
    for heading in ("BY KIND", "BY MODEL", "BY LEG KIND", "BY PATTERN", "PER DAY", "TURNS"):
        assert heading in table
    for figure in ("compound rate", "judge rejections", "review share", "cache share of input"):
        assert figure in table


def test_height_keeps_the_newest_turns_under_their_day(tmp_path):
    write_month(tmp_path, days=4)
    snap = snap_of(tmp_path)
    full = render_table(snap).splitlines()
    started = re.compile(r"  \d\d:\d\d:\d\d  ")
    # A screen as tall as the whole table gives the turns half of it at least: all of them.
    tall = render_table(snap, height=len(full)).splitlines()
    assert [line for line in tall if started.match(line)] == [line for line in full if started.match(line)]
    for height in (len(full) - 5, 45, 30):
        lines = render_table(snap, height=height).splitlines()
        assert len(lines) <= height
        turn_lines = [line for line in lines if line.startswith("TURNS")]
        if turn_lines:
            turn_lines = lines[lines.index(turn_lines[0]) + 2:]  # under the column headers
        if not turn_lines:
            continue
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", turn_lines[0])
        # The newest turns' lines as the whole table has them, in its columns' widths (of
        # every turn, not only the drawn ones), the first under its day.
        assert turn_lines[1:] == full[len(full) - len(turn_lines) + 1:]
        header = next(i for i, line in enumerate(full) if line.startswith("TURNS")) + 1
        assert lines[lines.index(turn_lines[0]) - 1] == full[header]


def run_on_a_terminal(args, env):
    """The report with a pseudo-terminal as its stdout: what a person sees."""
    leader, follower = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "tailer", "report", *args], cwd=ROOT, env=env,
                               stdin=subprocess.DEVNULL, stdout=follower, stderr=subprocess.PIPE)
    os.close(follower)
    output = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
    process.wait(timeout=60)
    os.close(leader)
    return process.returncode, output.decode()


@pytest.mark.parametrize("damaged, said", [(1, "1 damaged line skipped"),
                                           (2, "2 damaged lines skipped")])
def test_the_damaged_lines_are_counted_in_words(tmp_path, damaged, said):
    """A broken line appended to a log (a CLI killed mid-write): '1 damaged lines skipped'."""
    path = every_pattern("damaged").write(tmp_path)
    with open(path, "ab") as log:
        log.write(b'{"type":"session.fusion_completed","data":{}}\n' * damaged)
    notes = " ".join(render_table(snap_of(tmp_path), width=300).split())
    assert f" {said}" in notes


def test_colour_on_a_terminal_unless_no_color(tmp_path):
    every_pattern("terminal").write(tmp_path)
    args = ["--state-dir", str(tmp_path)]
    code, coloured = run_on_a_terminal(args, tailer_env())
    assert code == 0 and ANSI.search(coloured)
    code, plain = run_on_a_terminal(args, tailer_env(NO_COLOR="1"))
    assert code == 0 and not ANSI.search(plain) and "TURNS" in plain
    piped = run_report(*args)
    assert not ANSI.search(piped.stdout) and "TURNS" in piped.stdout


class _CountedWrites(io.TextIOWrapper):
    """A stdout that counts the calls made to write to it."""

    writes = 0

    def write(self, text):
        self.writes += 1
        return super().write(text)


@pytest.mark.parametrize("options", [[], ["--format", "csv"], ["--by", "day"]])
def test_the_table_and_csv_are_written_whole_not_a_character_at_a_time(tmp_path, options):
    """A text output is one string: written through writelines, each of its characters was
    a call of its own (a month's table, some 1 MB, took longer to write than to make)."""
    write_month(tmp_path, days=4)
    out = _CountedWrites(io.BytesIO(), encoding="utf-8")
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = cli.main(["report", "--state-dir", str(tmp_path), *options], tailer_env())
    out.flush()
    assert code == 0 and len(out.buffer.getvalue()) > 1000
    assert out.writes <= 2


def test_csv_has_one_row_per_leg(tmp_path):
    writer = every_pattern("csv")
    path = writer.write(tmp_path)
    with open(path, "a") as log:  # a turn that never got further than its routing
        log.write(json.dumps({"type": "session.fusion_resolved", "timestamp": "2026-11-05T09:00:00Z",
                              "data": {"fusionId": "fusion-legless", "pattern": "single",
                                       "routingLatencyMs": 180}}) + "\n")
    quiet = path.stat().st_mtime - 86_400  # idle: its open turn is finished as incomplete
    os.utime(path, (quiet, quiet))
    done = run_report("--state-dir", str(tmp_path), "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    assert tuple(rows[0]) == CSV_COLUMNS
    legs = [row for row in rows if row["leg"]]
    assert len(legs) == sum(len(turn.legs) for turn in writer.expected)
    assert [row["fusion_id"] for row in rows if not row["leg"]] == ["fusion-legless"]
    assert sum(float(row["credits"]) for row in legs) == pytest.approx(sum(
        leg.nano_aiu for turn in writer.expected for leg in turn.legs) / 1e9)
    assert {row["committed"] for row in legs} == {"true", "false"}
    committed = {row["fusion_id"] for row in legs if row["committed"] == "true"}
    assert committed == {turn.fusion_id for turn in writer.expected if turn.committed_phase_id}


def test_csv_of_calls_has_one_row_per_model_call(tmp_path):
    writer = whole_session("calls")
    writer.write(tmp_path)
    rows = list(csv.DictReader(io.StringIO(render_calls_csv(snap_of(tmp_path)))))
    assert len(rows) == sum(turn.calls for turn in writer.expected)
    for truth in writer.expected:
        mine = [row for row in rows if row["fusion_id"] == truth.fusion_id]
        assert len(mine) == truth.calls
        assert {row["turn_kind"] for row in mine} <= {truth.kind}
        if truth.kind == "ordinary":
            assert {row["leg"] for row in mine} <= {""}
        else:
            legs = {leg.phase_kind for leg in truth.legs}
            assert {row["leg_kind"] for row in mine} <= legs
    done = run_report("--state-dir", str(tmp_path), "--format", "csv-calls")
    assert done.returncode == 0 and len(list(csv.DictReader(io.StringIO(done.stdout)))) == len(rows)


def test_csv_cells_never_become_formulas(tmp_path):
    """A model can no longer start with `=` or `@` (it would be `other`: tailer/codes.py),
    but a session folder's name can."""
    for session_id in ("=HYPERLINK(\"x\")", "@SUM(A1)"):
        writer = SessionWriter(session_id, START)
        writer.single("gpt-5.6-sol")
        writer.write(tmp_path)
    rows = list(csv.DictReader(io.StringIO(render_csv(snap_of(tmp_path)))))
    assert sorted(row["session_id"] for row in rows) == ["'=HYPERLINK(\"x\")", "'@SUM(A1)"]


def test_a_turns_json_is_its_rows_fields_in_order(tmp_path):
    """The JSON copies each turn's model calls and tools from the text they are kept as
    (rows.TurnJson): the same objects, in the same place, as the row's fields give (but
    `worth`, what only the worth figures read, never printed with the turn)."""
    every_pattern("detail").write(tmp_path)
    snap = snap_of(tmp_path)
    document = json.loads(b"".join(render_json(snap)))
    assert len(document["turns"]) == len(snap.turns) > 0
    for turn, row in zip(document["turns"], snap.turns):
        fields = {name: getattr(row, name) for name in row.__match_args__
                  if name not in ("printed", "worth")}
        fields["legs"] = [records.as_dict(leg) for leg in row.legs]
        fields["model_calls"] = [records.as_dict(call) for call in row.model_calls]
        fields["tools"] = [records.as_dict(tool) for tool in row.tools]
        order = [name for name in row.__match_args__ if name != "worth"]
        order[order.index("printed"):order.index("printed") + 1] = ["model_calls", "tools"]
        assert list(turn) == order and turn == fields
        assert len(row.tools) == row.printed.tool_count
    assert any(turn["model_calls"] for turn in document["turns"])
    assert any(turn["tools"] for turn in document["turns"])


def test_json_holds_the_table_figures(tmp_path):
    every_pattern("json").write(tmp_path)
    document = report_json("--state-dir", str(tmp_path))
    snap = snap_of(tmp_path)
    assert document["headline"]["turns"] == snap.headline.turns
    assert document["headline"]["credits"] == snap.headline.credits
    assert [m["name"] for m in document["by_model"]] == [m.name for m in snap.by_model]
    assert len(document["turns"]) == len(snap.turns)
