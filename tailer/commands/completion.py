"""`hydrafusion-tailer completion bash|zsh`: a shell completion script made from the parser.

The script is written from the argparse parser itself, so a new command or option completes
as soon as it is added, with no dependency (argcomplete and the like run Python on every
Tab). Each command completes its options; an option with choices completes them; an option
that takes a path, and scrub's SRC and DST, complete file names. zsh runs the same function
through its bash compatibility (bashcompinit).

File names are left to the shell's own completion (bash: `compopt -o default` with no
words of ours; zsh: `complete -o default`, its `_default`), which offers every name as it
is and quotes it as it must: a list of names made by `compgen -f` and split into words
would split a name with a space or a newline and glob one with a `*`.
"""

from __future__ import annotations

import argparse
import shlex

from ..path_options import user_path

SHELLS = ("bash", "zsh")
FUNCTION = "_hydrafusion_tailer"
# No words of ours: the shell completes a file name itself (see the module docstring). zsh
# has no compopt; its bashcompinit does the same for a command registered with -o default.
FILE_NAMES = "COMPREPLY=(); [[ $BASH_VERSION ]] && compopt -o default"
DEFAULT = {"bash": "", "zsh": "-o default "}


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    commands = _commands(parser)
    lines = [f"# {parser.prog} completion for {shell}, made by `{parser.prog} completion {shell}`"]
    if shell == "zsh":
        # bashcompinit's `complete` registers through compinit's compdef: a ~/.zshrc that
        # never ran compinit (no framework, `zsh -f`) would get an error and no completion.
        lines += ["(( $+functions[compdef] )) || { autoload -U +X compinit && compinit -i }",
                  "autoload -U +X bashcompinit && bashcompinit"]
    lines += [
        f"{FUNCTION}() {{",
        '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"',
        '    local command="" i',
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        f'        case "${{COMP_WORDS[i]}}" in {"|".join(commands)}) '
        'command="${COMP_WORDS[i]}"; break;; esac',
        "    done",
        '    case "$command $prev" in',
    ]
    paths = []
    for name, sub in commands.items():
        for action in _options(sub):
            flags = "|".join(f'"{name} {flag}"' for flag in action.option_strings)
            if action.choices:
                words = shlex.quote(" ".join(map(str, action.choices)))
                lines.append(f'        {flags}) COMPREPLY=($(compgen -W {words} -- "$cur"))'
                             "; return;;")
            elif action.type is user_path:
                paths.append(flags)
    if paths:
        lines.append(f'        {"|".join(paths)})')
        lines.append(f"            {FILE_NAMES}; return;;")
    lines += ["    esac", '    local words', '    case "$command" in']
    for name, sub in commands.items():
        words = " ".join(flag for action in _options(sub) for flag in action.option_strings)
        files = any(action.type is user_path for action in _positionals(sub))
        choices = " ".join(str(choice) for action in _positionals(sub)
                           for choice in action.choices or ())
        lines.append(f"        {name}) words={shlex.quote(f'{words} {choices}'.strip())}")
        if files:
            lines.append(f"            [[ $cur != -* ]] && {{ {FILE_NAMES}; return; }}")
        lines.append("            ;;")
    top = " ".join([*commands,
                    *(flag for action in _options(parser) for flag in action.option_strings)])
    lines += [
        f"        *) words={shlex.quote(top)};;",
        "    esac",
        '    COMPREPLY=($(compgen -W "$words" -- "$cur"))',
        "}",
        f"complete -o filenames {DEFAULT[shell]}-F {FUNCTION} {parser.prog}",
    ]
    return "\n".join(lines) + "\n"


# argparse has no public way to walk a parser; its actions are the one description of what
# the command line takes, so the script reads them rather than a copy that could drift.
def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [action for action in parser._actions
            if action.option_strings and action.help != argparse.SUPPRESS]


def _positionals(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [action for action in parser._actions
            if not action.option_strings and not isinstance(action, argparse._SubParsersAction)]
