"""The README's first lines give the commands a newcomer needs, and they stay true."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def first_block():
    return re.search(r"```sh\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)


def first_commands():
    return [line.split("#")[0].strip() for line in first_block().splitlines() if line.strip()]


def test_readme_opens_with_the_report_the_stack_and_the_tests():
    report, stack, tests = first_commands()
    assert report == "python3 -m tailer report"
    assert "--demo" in first_block().splitlines()[0]
    assert stack == "docker compose up -d"
    assert tests == "bash .ci/run"
    assert "```sh" in (ROOT / "README.md").read_text().splitlines()[:3]


def test_the_first_command_shows_the_answers_with_nothing_installed():
    """On a machine without sessions the report says to add --demo, which shows them."""
    done = subprocess.run([sys.executable, "-m", "tailer", "report", "--demo"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "HydraFusion: 26 turns (+3 ordinary), 5 sessions" in done.stdout


def test_ci_runs_the_readme_test_command():
    """`bash .ci/run` installs the test dependencies, then runs exactly the suite."""
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == "python3 -m pytest -q"


def test_readme_links_exist():
    text = (ROOT / "README.md").read_text()
    for target in re.findall(r"\]\(([^)#]+)\)", text):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), target
