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


def _telemetry_section() -> str:
    text = (ROOT / "README.md").read_text()
    return text.split("### The CLI's own telemetry", 1)[1].split("\n### ", 1)[0]


def test_the_clis_telemetry_settings_are_the_ones_the_tailer_and_the_stack_read():
    """Every shell sets the same CLI variables; the file lands in the folder the stack
    mounts; the names the README gives the tailer are those it reads."""
    from tailer.commands import cli

    section = _telemetry_section()
    posix = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    powershell = re.search(r"```powershell\n(.*?)```", section, re.S).group(1)
    exported = dict(re.findall(r"^export (\w+)=(.*)$", posix, re.M))
    assigned = dict(re.findall(r"^\$env:(\w+) = (.*)$", powershell, re.M))
    assert set(exported) == set(assigned) == {
        "COPILOT_OTEL_ENABLED", "COPILOT_OTEL_EXPORTER_TYPE", cli.COPILOT_OTEL_PATH_ENV}
    assert exported["COPILOT_OTEL_EXPORTER_TYPE"] == "file"
    compose = (ROOT / "docker-compose.yml").read_text()
    folder = re.search(r"\$\{COPILOT_OTEL_DIR:-~/(\S+)\}", compose).group(1)
    assert exported[cli.COPILOT_OTEL_PATH_ENV].startswith(f'"$HOME/{folder}/')
    assert assigned[cli.COPILOT_OTEL_PATH_ENV].startswith(
        '"$HOME\\' + folder.replace("/", "\\") + "\\")
    assert f"mkdir -p ~/{folder}" in posix
    assert f"`HYDRAFUSION_CLI_OTEL_PATH`" in section and cli.CLI_OTEL_ENV == "HYDRAFUSION_CLI_OTEL_PATH"
    assert "--cli-otel" in section
    assert f"{cli.CLI_OTEL_ENV}: /cli-otel" in compose
    # And the tailer follows the file the README names, from the CLI's own variable.
    environ = {cli.COPILOT_OTEL_PATH_ENV: "/home/me/.copilot/otel/copilot-otel.jsonl"}
    args = cli.parse_args(["run"], environ)
    assert cli.run_config(args, environ).cli_otel == Path(environ[cli.COPILOT_OTEL_PATH_ENV])
    assert cli.run_config(cli.parse_args(["run"], {}), {}).cli_otel is None
