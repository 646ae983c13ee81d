"""The README's first lines give the two commands that matter, and they stay true."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def first_commands():
    block = re.search(r"```sh\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    return [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]


def test_readme_opens_with_start_and_test_commands():
    start, test = first_commands()
    assert start == "docker compose up -d"
    assert test == "python3 -m pytest -q"
    assert "```sh" in (ROOT / "README.md").read_text().splitlines()[:3]


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == first_commands()[1]


def test_readme_links_exist():
    text = (ROOT / "README.md").read_text()
    for target in re.findall(r"\]\(([^)#]+)\)", text):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), target
