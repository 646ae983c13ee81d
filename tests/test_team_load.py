"""bench/team_load.py stays runnable: three tailers for a few seconds through the real
collector into the real Prometheus, and nothing lost.

The harness itself measures (200 tailers, docs/PERFORMANCE.md "Team load"); this runs it
tiny and checks what it checks: every span written to the logs arrives once, every
tailer's series are in Prometheus with the logs' turns, credits and spans, labelled by its
instance and user, and the collector refused and failed nothing.
"""

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_three_tailers_lose_nothing_through_the_collector(tmp_path):
    out = tmp_path / "figures.json"
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / "team_load.py"), "--tailers", "3", "--seconds", "6",
         "--turn-every", "2", "--first-turns", "2", "--metric-interval", "2", "--json", str(out)],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    figures = json.loads(out.read_text())
    assert figures["lost"] == [] and "NOTHING LOST" in result.stdout
    spans, prom = figures["spans"], figures["prometheus"]
    assert spans["written"] == spans["received_unique"] > 0 and figures["turns_appended"] == 9
    assert prom["instances"] == prom["users"] == 3 and prom["wrong_by_instance"] == {}
    assert prom["samples_in_window"] > 0 and figures["per_tailer"]["series"] > 10
    assert figures["collector"]["spans_accepted"] >= spans["written"]
    assert figures["collector"]["points_accepted"] > 0
