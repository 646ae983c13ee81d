"""`hydrafusion-tailer completion bash|zsh`: the script bash loads, and what Tab then offers."""

import shutil
import subprocess
import sys

import pytest

from tailer.commands.cli import COMMANDS, build_parser
from tailer.commands.completion import script
from tailerproc import ROOT, tailer_env

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def completions(tmp_path, *words: str) -> list[str]:
    """What bash offers after `hydrafusion-tailer WORDS` (the last word being completed),
    with the script loaded as the README says."""
    made = subprocess.run([sys.executable, "-m", "tailer", "completion", "bash"], cwd=ROOT,
                          env=tailer_env(), capture_output=True, text=True, timeout=60, check=True)
    (tmp_path / "completion.bash").write_text(made.stdout)
    line = " ".join(["hydrafusion-tailer", *words])
    program = (f'source {tmp_path}/completion.bash\n'
               'complete -p hydrafusion-tailer >&2\n'
               f'COMP_WORDS=(hydrafusion-tailer {" ".join(repr(w) for w in words)})\n'
               f'COMP_CWORD={len(words)}\nCOMP_LINE={line!r}\nCOMP_POINT=${{#COMP_LINE}}\n'
               '_hydrafusion_tailer\nprintf "%s\\n" "${COMPREPLY[@]}"\n')
    done = subprocess.run(["bash", "--norc", "--noprofile"], input=program, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "complete -o filenames -F _hydrafusion_tailer" in done.stderr, done.stderr
    return done.stdout.split()


def test_every_command_completes(tmp_path):
    assert sorted(completions(tmp_path, "")) == sorted(COMMANDS + ("-h", "--help", "--version"))
    assert completions(tmp_path, "rep") == ["report"]


def test_the_reports_options_and_their_values_complete(tmp_path):
    offered = completions(tmp_path, "report", "--")
    assert {"--state-dir", "--since", "--until", "--session", "--model", "--pattern", "--format",
            "--html", "--watch", "--demo", "--no-color", "--version", "--help"} <= set(offered)
    assert "--once" not in offered  # run's, not the report's
    assert completions(tmp_path, "report", "--for") == ["--format"]
    assert completions(tmp_path, "report", "--format", "") == ["table", "json", "csv", "csv-calls"]
    (tmp_path / "page.html").write_text("")
    assert completions(tmp_path, "report", "--html", "pa") == ["page.html"]
    assert {"bash", "zsh"} <= set(completions(tmp_path, "completion", ""))


def test_zsh_loads_the_same_function_through_bashcompinit():
    text = script(build_parser({}), "zsh")
    assert text.splitlines()[1] == "autoload -U +X bashcompinit && bashcompinit"
    assert text.partition("\n_hydrafusion_tailer()")[2] == script(build_parser({}), "bash").partition(
        "\n_hydrafusion_tailer()")[2]


def test_the_readme_says_how_to_load_it():
    readme = (ROOT / "README.md").read_text()
    for shell in ("bash", "zsh"):
        assert f"source <(hydrafusion-tailer completion {shell})" in readme
