"""`statusline --install` and `--uninstall`: the CLI's `statusLine` setting, changed safely.

The setting is `statusLine.command` in `$COPILOT_HOME/settings.json` (else
~/.copilot/settings.json). The CLI refuses a settings file that is not valid JSON, so the
file is changed only when it parses as a JSON object, and only that one key: every other key
and value stays as it was (their order too), and so does the rest of `statusLine`
(`padding`, `refreshInterval`). A command already set is kept by running it after ours
(`--then`), and `--uninstall` puts it back; without one, `--uninstall` removes the key (and
`statusLine` if that leaves it empty). Run again with options, `--install` puts them in place
of those installed, the command run after ours kept; without any, it keeps those installed.

Before the change, the file as it was is copied to `settings.json.hydrafusion-backup`; the
new file is written beside it and renamed over it (tailer/atomic_file.py), flushed to disk
first, with the mode the old one had. The CLI saves the file too (/settings): found saved by
another since it was read, just before the rename, it is read and changed again. The
temporary files a run killed before its rename left are removed by the next run
(atomic_file.remove_killed_saves, once KILLED_SAVE_AGE_S old). A file
that is not a regular file of this user's (a symbolic link, a FIFO, another user's file) is
refused without being opened for reading, as are one that does not parse, one nested too
deeply for json, one over MAX_SETTINGS_BYTES, and one whose `statusLine` is not an object:
each with one line saying why, and nothing written. One the user made read-only (no write
permission for its owner) is refused so too when it would be changed: the rename would
replace it all the same.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import sys
from pathlib import Path

from ..atomic_file import remove_killed_saves, replace_file
from ..printable import printable

MAX_SETTINGS_BYTES = 1 << 20
ATTEMPTS = 5
KILLED_SAVE_AGE_S = 60
BACKUP_SUFFIX = ".hydrafusion-backup"
SUBCOMMAND = "statusline"
SCRIPT = "hydrafusion-tailer"
LAUNCHER = "from tailer.commands.launch import main"


def launch_code(root: str) -> str:
    """What the installed command runs with `-S -P -c`: the tailer from `root`, the folder
    that held it at --install. Without `-m`'s runpy, the script pip writes (it imports `re`)
    and site (every .pth file of site-packages), each some 6 ms or more of every refresh
    (bench/benchmark.py, measure_statusline); the tailer needs nothing site sets up. When
    `root` no longer holds the tailer (a venv rebuilt), site finds it as it would have
    without -S. `root` leads sys.path only while the tailer is found: a site-packages folder
    ahead of the standard library could shadow it."""
    return (f"import sys; sys.path.insert(0, {json.dumps(root)})\n"  # a Python literal, no ' for the shell
            f"try: {LAUNCHER}\n"
            f"except ImportError: import site; site.main(); {LAUNCHER}\n"
            "del sys.path[0]; sys.exit(main())")


class SettingsError(Exception):
    """The settings cannot be changed; the message is one line, for the user."""


def settings_path(environ: dict[str, str]) -> Path:
    home = environ.get("COPILOT_HOME")
    if home:
        return Path(home, "settings.json")
    try:
        return Path.home() / ".copilot" / "settings.json"
    except RuntimeError:  # $HOME unset, and a uid the user database does not know (a container's)
        raise SettingsError("no home folder to find the CLI's settings in: set COPILOT_HOME; "
                            "nothing changed") from None


def our_command(options: list[str]) -> str:
    """The command the CLI is to run: this Python, started on launch_code. The CLI runs it
    through /bin/sh, as a command that is no file."""
    return shlex.join(command_words(options))


def command_words(options: list[str]) -> list[str]:
    root = str(Path(__file__).resolve().parents[2])
    return [sys.executable, "-S", "-P", "-c", launch_code(root), SUBCOMMAND, *options]


def is_ours(command: object) -> bool:
    """Whether a status line command runs ours: as `our_command` makes it, or as a user
    would write it (`hydrafusion-tailer statusline`, `python3 -m tailer statusline`)."""
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    return any(word == SUBCOMMAND and (_launches(words[index - 1])
                                       or os.path.basename(words[index - 1]) == SCRIPT
                                       or words[index - 2:index] == ["-m", "tailer"])
               for index, word in enumerate(words) if index)


def _launches(code: str) -> bool:
    """Whether `-c` code is one our_command wrote: this version's, or an older one."""
    return code.startswith("import sys") and LAUNCHER in code


def _older_form(command: str) -> list[str] | None:
    """The options of a command an older version's our_command wrote (another Python's,
    another folder's, another shape), to write again as this one's; None for any other."""
    words = shlex.split(command)
    for index, word in enumerate(words):
        if word == SUBCOMMAND and index and _launches(words[index - 1]):
            options = words[index + 1:]
            return None if our_command(options) == command else options
    return None


class _ChangedMeanwhile(Exception):
    """The file is no longer the one read: someone saved it while we changed it."""


def install(path: Path, options: list[str]) -> str:
    """Set ours as the status line command (keeping one already set as --then); the line to
    print. Raises SettingsError."""
    _remove_killed_saves(path)
    return _again_if_changed(path, _install, path, options)


def uninstall(path: Path) -> str:
    """Remove ours, putting back the command it ran with --then; the line to print."""
    _remove_killed_saves(path)
    return _again_if_changed(path, _uninstall, path)


def _remove_killed_saves(path: Path) -> None:
    """The new file (or backup) of a run killed before its rename would stay beside the
    settings for good: nothing else ever removes it. Only this user's regular files
    KILLED_SAVE_AGE_S old, since a younger one may be the save of another run under way."""
    for saved in (path, _backup(path)):
        remove_killed_saves(saved, older_than_s=KILLED_SAVE_AGE_S)


def _again_if_changed(path: Path, change, *args) -> str:
    """`change(*args)`, from a new read of the file each time it finds the file saved by
    another meanwhile (the CLI saves it from /settings; another --install): that save is
    never written over."""
    for _ in range(ATTEMPTS):
        try:
            return change(*args)
        except _ChangedMeanwhile:
            continue
    raise SettingsError(f"{_shown(path)} kept changing while it was changed; nothing changed: "
                        "run again")


def _install(path: Path, options: list[str]) -> str:
    settings, original, mode = _load(path)
    if settings.get("statusLine") is None:  # absent, or null as the CLI reads it: none set
        settings["statusLine"] = {}
    status_line = settings["statusLine"]
    if not isinstance(status_line, dict):
        raise SettingsError(f"{_shown(path)}: statusLine is not an object; nothing changed")
    existing = status_line.get("command")
    if is_ours(existing):
        if options:
            # They take the place of those installed; the command ours runs after it
            # stays, for --uninstall to put back.
            wrapped = _wrapped(existing)
            kept = ["--then", wrapped] if wrapped is not None and "--then" not in options else []
            command, what = our_command([*options, *kept]), "the options given"
            if wrapped is not None and not kept and command != existing:
                raise SettingsError(f"{_shown(path)}: the HydraFusion status line runs the "
                                    "command it had after ours already (--then): leave out --then")
        else:
            older = _older_form(existing)
            command = existing if older is None else our_command(older)
            what = "this version's command"
        if command == existing:
            return f"{_shown(path)}: the HydraFusion status line is installed already; nothing changed"
        status_line["command"] = command
        _save(path, settings, original, mode)
        return f"{_shown(path)}: HydraFusion status line updated to {what}; " \
               f"backup in {_shown(_backup(path))}"
    if existing is not None and not (isinstance(existing, str) and existing.strip()):
        raise SettingsError(f"{_shown(path)}: statusLine.command is not a command; nothing changed")
    if existing and "--then" in options:
        raise SettingsError(f"{_shown(path)}: statusLine.command is set already and will run "
                            "after ours as --then: leave out --then")
    status_line["command"] = our_command([*options, *(["--then", existing] if existing else [])])
    _save(path, settings, original, mode)
    kept = " (the command it had runs after ours)" if existing else ""
    return f"{_shown(path)}: HydraFusion status line installed{kept}; backup in {_shown(_backup(path))}"


def _uninstall(path: Path) -> str:
    settings, original, mode = _load(path, missing_ok=False)
    status_line = settings.get("statusLine")
    if not isinstance(status_line, dict) or not is_ours(status_line.get("command")):
        return f"{_shown(path)}: no HydraFusion status line installed; nothing changed"
    wrapped = _wrapped(status_line["command"])
    if wrapped:
        status_line["command"] = wrapped
    else:
        del status_line["command"]
        if not status_line:
            del settings["statusLine"]
    _save(path, settings, original, mode)
    put_back = "; the command it wrapped is back" if wrapped else ""
    return f"{_shown(path)}: HydraFusion status line removed{put_back}; backup in {_shown(_backup(path))}"


def _wrapped(command: str) -> str | None:
    """The command ours runs with --then, if any."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    for index, word in enumerate(words):
        if word == "--then" and index + 1 < len(words):
            return words[index + 1]
        if word.startswith("--then="):
            return word.partition("=")[2]
    return None


def _load(path: Path, missing_ok: bool = True) -> tuple[dict, bytes | None, int]:
    """The settings, the file's bytes (None: no file yet) and its mode; SettingsError when
    the file is not one to change."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        if missing_ok:
            return {}, None, 0o600
        raise SettingsError(f"{_shown(path)} does not exist; nothing changed") from None
    except OSError as error:
        raise SettingsError(f"{_shown(path)}: {error.strerror}; nothing changed") from None
    if stat.S_ISLNK(found.st_mode):
        raise SettingsError(f"{_shown(path)} is a symbolic link: add the setting to the file it "
                            "points to by hand (docs/STATUSLINE.md); nothing changed")
    if not stat.S_ISREG(found.st_mode):
        raise SettingsError(f"{_shown(path)} is not a regular file; nothing changed")
    if found.st_uid != os.geteuid():
        raise SettingsError(f"{_shown(path)} belongs to another user; nothing changed")
    if found.st_size > MAX_SETTINGS_BYTES:
        raise SettingsError(f"{_shown(path)} is over {MAX_SETTINGS_BYTES >> 20} MB; nothing changed")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        with open(fd, "rb") as handle:
            if os.fstat(handle.fileno()).st_ino != found.st_ino:
                raise SettingsError(f"{_shown(path)} changed while read; nothing changed")
            original = handle.read(MAX_SETTINGS_BYTES + 1)
    except OSError as error:
        raise SettingsError(f"{_shown(path)}: {error.strerror}; nothing changed") from None
    try:
        settings = json.loads(original, parse_constant=_not_json) if original.strip() else {}
    except ValueError:
        raise SettingsError(f"{_shown(path)} is not valid JSON (the CLI refuses it too): fix "
                            "it first; nothing changed") from None
    except RecursionError:  # valid JSON (the CLI reads it), past Python's recursion limit
        raise SettingsError(f"{_shown(path)} is nested too deeply to read (some thousand "
                            "levels of [ ] or { }): add the setting by hand "
                            "(docs/STATUSLINE.md); nothing changed") from None
    if not isinstance(settings, dict):
        raise SettingsError(f"{_shown(path)} is not a JSON object; nothing changed")
    return settings, original, stat.S_IMODE(found.st_mode)


def _not_json(constant: str) -> float:
    """json reads NaN and Infinity, which are no JSON: the CLI refuses such a file."""
    raise ValueError(f"{constant} is not JSON")


def _save(path: Path, settings: dict, original: bytes | None, mode: int) -> None:
    if not mode & stat.S_IWUSR:
        # The rename would replace it all the same (the folder is writable): the user
        # who took away their own write permission asked for it to stay as it is.
        raise SettingsError(f"{_shown(path)} is read-only: make it writable (chmod u+w) to "
                            "let the status line be changed; nothing changed")
    try:
        # A number past 1e308 (valid JSON, which the CLI reads) loads as inf: json would
        # write it back as Infinity, and the CLI would refuse the whole file.
        written = json.dumps(settings, indent=2, ensure_ascii=False, allow_nan=False)
    except ValueError:
        raise SettingsError(f"{_shown(path)} holds a number too large to write back (over "
                            "1e308): fix it first; nothing changed") from None
    try:
        text = (written + "\n").encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: the file's `\ud800`, or bytes of --then's
        raise SettingsError(f"{_shown(path)}: the settings would hold text that is not UTF-8 "
                            "(a lone \\uD800-\\uDFFF escape in the file, or a --then that is "
                            "not UTF-8); nothing changed") from None
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if original is not None:
            replace_file(_backup(path), lambda handle: handle.write(original), durable=True, mode=mode)
        # Flushed to disk by _write_if_unchanged, before its check rather than after it.
        replace_file(path, lambda handle: _write_if_unchanged(handle, text, path, original),
                     durable=False, mode=mode)
    except OSError as error:
        raise SettingsError(f"{_shown(path)} cannot be written ({error.strerror}); nothing "
                            "changed") from None


def _write_if_unchanged(handle, text: bytes, path: Path, original: bytes | None) -> None:
    """Write the new file, flushed to disk, then check the old one is still the one read
    (raising _ChangedMeanwhile): last, so that only the rename is left after the check."""
    handle.write(text)
    handle.flush()
    os.fsync(handle.fileno())
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        if original is None:
            return
        raise _ChangedMeanwhile() from None
    except OSError:  # a symbolic link put there: the next read refuses it
        raise _ChangedMeanwhile() from None
    with open(fd, "rb") as now:
        if now.read(MAX_SETTINGS_BYTES + 1) != original:
            raise _ChangedMeanwhile()


def _backup(path: Path) -> Path:
    return path.with_name(path.name + BACKUP_SUFFIX)


def _shown(path: Path) -> str:
    """A path the user gave or owns, in a message to that user (never in the status line)."""
    return printable(str(path))
