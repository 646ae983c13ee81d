"""bench/reading.py stays runnable: its one run on a tiny data set gives every figure of its
table, in the form docs/PERFORMANCE.md embeds.

The harness itself measures (1 GB and 500 MB, docs/PERFORMANCE.md "The reading path"); no
timing is asserted here, only that each figure was measured and the table is whole.
"""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from ccusage import VERSION as CCUSAGE_VERSION  # noqa: E402
from reading_stages import REPORT, STAGES  # noqa: E402
from reading_table import BEGIN, END, row_names, update_doc  # noqa: E402


def test_one_run_on_a_tiny_data_set_measures_every_figure(tmp_path):
    table = tmp_path / "table.md"
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "reading.py"), "--size-mb", "2", "--watch-sessions", "20",
         "--rounds", "1", "--data", str(tmp_path / "data"), "--markdown", str(table)],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    written = table.read_text()
    assert written in done.stdout
    rows = [line for line in written.splitlines() if line.startswith("| ")][2:]  # past the header
    labels = [label for _, label in row_names(CCUSAGE_VERSION)] + ["warm `report --watch`"]
    assert len(rows) == len(labels)
    for row, label in zip(rows, labels):
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[0].startswith(label), (label, row)
        measured = cells[1:2] if "--watch" in label else cells[1:5]
        ccusage_missing = "ccusage" in label and "not installed" in written
        assert ccusage_missing or all(cell.endswith(("s", "x")) for cell in measured), row
    # The data is made before anything is measured, and never timed.
    progress = done.stderr
    assert progress.index("generating") < progress.index("making") < progress.index("round 1")
    assert "bug" not in written and "found" not in written, written


def test_the_table_goes_between_the_markers_of_the_page(tmp_path):
    page = tmp_path / "PERFORMANCE.md"
    page.write_text((REPO / "docs" / "PERFORMANCE.md").read_text())
    assert update_doc(page, "| a | table |\n") is None
    text = page.read_text()
    assert f"{BEGIN}\n| a | table |\n{END}" in text
    assert text.count(BEGIN) == text.count(END) == 1
    page.write_text("no markers\n")
    assert "markers" in update_doc(page, "| a |\n")


def test_the_stages_of_a_first_read_are_each_measured(tmp_path):
    """bench/reading_stages.py: every stage on both data sets, and what is left of the target."""
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "reading_stages.py"), "--size-mb", "2", "--rounds", "1",
         "--data", str(tmp_path / "data")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")][2:]
    assert [row.split(" | ")[0].strip("| ") for row in rows] == [label for _, label, _ in STAGES] + [REPORT[1]]
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")][1:]
        assert cells[0].endswith(" s") and cells[3].endswith(" s") and cells[1].endswith(" x"), row
    assert [line.split(":")[0] for line in done.stdout.splitlines() if "have" in line and "left" in line] == [
        "escape-heavy", "plain"]


def test_a_data_folder_that_cannot_be_made_is_one_line_and_exit_2(tmp_path):
    """--data under a regular file (or one itself): a traceback from deep in the data's
    generation, after minutes of the run for benchmark.py's later data sets."""
    in_the_way = tmp_path / "a-file"
    in_the_way.write_text("")
    for script in ("benchmark.py", "reading.py", "reading_stages.py"):
        for data in (in_the_way / "data", in_the_way):
            done = subprocess.run([sys.executable, str(REPO / "bench" / script), "--data", str(data)],
                                  capture_output=True, text=True, timeout=120)
            assert done.returncode == 2, (script, done.stderr)
            assert done.stderr.count("\n") == 1 and str(data) in done.stderr, (script, done.stderr)
            assert done.stdout == ""
