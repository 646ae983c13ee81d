"""`hydrafusion-tailer completion bash|zsh`: the script bash loads, and what Tab then offers."""

import shutil
import subprocess
import sys

import pytest

from tailer.commands.cli import COMMANDS, build_parser
from tailer.commands.completion import script
from tailerproc import ROOT, tailer_env
from tmux import BASH, ZSH, Terminal, needs_tmux

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
    assert completions(tmp_path, "report", "--format", "") == ["table", "json", "csv", "csv-calls", "csv-worth"]
    assert {"bash", "zsh"} <= set(completions(tmp_path, "completion", ""))


# -- File names, as bash in a terminal completes them ----------------------------------------
# Names a list of words would split or glob: a space, a `*` (globbed, it became every name of
# the folder), a newline, quotes.
AWKWARD = ["my file.html", "*", "new\nline.html", 'a"q.html', "b'q.html", "plain.html"]


def typed_in_a_terminal(tmp_path, typed: str, keys: list[str], shell: str = "bash",
                        before: str = "true") -> list[str]:
    """The arguments `hydrafusion-tailer` gets when `typed` is typed into an interactive
    `shell` in a terminal (the script loaded as the README says, after `before`), then
    `keys`, then Enter: what Tab or Alt-* (readline's insert-completions: every completion,
    quoted as bash quotes it) put on the line. The command is a function writing its
    arguments to a file. No error may show on the screen."""
    made = subprocess.run([sys.executable, "-m", "tailer", "completion", shell], cwd=ROOT,
                          env=tailer_env(), capture_output=True, text=True, timeout=60, check=True)
    (tmp_path / f"completion.{shell}").write_text(made.stdout)
    out = tmp_path / "arguments"
    terminal = Terminal(tmp_path / "names", {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
                        shell=ZSH if shell == "zsh" else BASH)
    try:
        terminal.type(f"{before}; source {tmp_path}/completion.{shell}; "
                      f"hydrafusion-tailer() {{ printf '%s\\0' \"$@\" > {out}.new; mv {out}.new {out}; }}")
        terminal.keys("Enter")
        terminal.type(typed)
        terminal.keys(*keys, "Enter")
        terminal.wait_for(out.exists)
        shown = "\n".join(terminal.lines())
        assert not any(word in shown for word in ("not found", "compdef", "insecure", "rror")), shown
        return out.read_bytes().decode().split("\0")[:-1]
    finally:
        terminal.kill()


@pytest.fixture
def awkward_names(tmp_path):
    names = tmp_path / "names"
    names.mkdir()
    for name in AWKWARD:
        (names / name).write_text("")
    (names / "sub dir").mkdir()
    return names


@needs_tmux
@pytest.mark.parametrize("typed, given", [("report --html ", ["report", "--html"]),
                                          ("scrub ", ["scrub"])])
def test_every_file_name_is_offered_exactly_as_it_is(tmp_path, awkward_names, typed, given):
    offered = typed_in_a_terminal(tmp_path, f"hydrafusion-tailer {typed}", ["Escape", "*"])
    assert offered[:len(given)] == given
    assert sorted(offered[len(given):]) == sorted([*AWKWARD, "sub dir"])


@needs_tmux
@pytest.mark.parametrize("start, name", [("my", "my file.html"), ("ne", "new\nline.html"),
                                         ("a", 'a"q.html'), ("b", "b'q.html"), ("su", "sub dir/")])
def test_a_file_name_completes_to_itself(tmp_path, awkward_names, start, name):
    typed = f"hydrafusion-tailer report --state-dir {start}"
    assert typed_in_a_terminal(tmp_path, typed, ["Tab"]) == ["report", "--state-dir", name]


@needs_tmux
@pytest.mark.skipif(shutil.which("zsh") is None, reason="needs zsh")
@pytest.mark.parametrize("before", ["true", "autoload -U compinit && compinit -u"],
                         ids=["without compinit", "after compinit"])
def test_zsh_completes_a_command_and_a_file_name_with_or_without_compinit(
        tmp_path, awkward_names, before):
    """In a real zsh (no startup files): a ~/.zshrc that never ran compinit, as one without a
    framework, and one that did. Without compinit, bashcompinit's `complete` had no compdef
    to call: an error at every start of the shell, and no command completed."""
    typed = "hydrafusion-tailer rep"
    assert typed_in_a_terminal(tmp_path, typed, ["Tab"], "zsh", before) == ["report"]
    typed = "hydrafusion-tailer report --state-dir my"
    assert typed_in_a_terminal(tmp_path, typed, ["Tab"], "zsh", before) == [
        "report", "--state-dir", "my file.html"]


def test_zsh_loads_the_same_function_through_bashcompinit():
    """zsh has no compopt: registered with -o default, its bashcompinit completes file names
    itself (_default) where the function offers no words."""
    def function(text):
        return text.partition("\n_hydrafusion_tailer()")[2].rpartition("\ncomplete ")[0]

    text = script(build_parser({}), "zsh")
    assert text.splitlines()[2] == "autoload -U +X bashcompinit && bashcompinit"
    assert function(text) == function(script(build_parser({}), "bash"))
    assert text.splitlines()[-1] == ("complete -o filenames -o default -F _hydrafusion_tailer "
                                     "hydrafusion-tailer")


def test_the_readme_says_how_to_load_it():
    readme = (ROOT / "README.md").read_text()
    for shell in ("bash", "zsh"):
        assert f"source <(hydrafusion-tailer completion {shell})" in readme
