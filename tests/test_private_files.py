"""tailer/private_files.py: a folder trusted only when this user alone writes it, files read
only when regular and never through a link or by blocking, saves whole, and a tidy that
removes only what it made and what killed saves left.

"Another user" is uid 65534 (nobody), given with os.chown: the tests run as root, as CI's
container does; elsewhere those tests are skipped.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tailer.atomic_file import temporary_of
from tailer.private_files import NotARegularFile, NotPrivate, PrivateFolder, another_users
from tailerproc import ROOT, tailer_env

NOBODY = 65534
MADE = re.compile(r"[0-9a-f]{16}\.json")
NAME = "0123456789abcdef.json"
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a folder to another user")


def private(folder: Path) -> Path:
    folder.mkdir(mode=0o700, parents=True)
    return folder


def test_a_missing_folder_is_made_private_or_not_there(tmp_path):
    with pytest.raises(FileNotFoundError):
        PrivateFolder(tmp_path / "a" / "b", make=False)
    with pytest.raises(FileNotFoundError):  # under a file: no such folder either
        (tmp_path / "file").write_text("")
        PrivateFolder(tmp_path / "file" / "b", make=False)
    with PrivateFolder(tmp_path / "a" / "b", make=True):
        pass
    assert stat.S_IMODE((tmp_path / "a" / "b").stat().st_mode) == 0o700


def test_a_folder_others_may_only_read_is_used_and_closed_to_them_when_written(tmp_path):
    folder = private(tmp_path / "f")
    os.chmod(folder, 0o755)
    with PrivateFolder(folder, make=False):
        pass
    assert stat.S_IMODE(folder.stat().st_mode) == 0o755  # reading changes nothing
    with PrivateFolder(folder, make=True):
        pass
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


@pytest.mark.parametrize("mode, left", [(0o500, 0o500), (0o555, 0o500), (0o550, 0o500),
                                        (0o711, 0o700), (0o300, 0o300)], ids=oct)
def test_a_folder_is_closed_to_others_and_never_given_a_permission_it_lacked(tmp_path, mode, left):
    """Writing closes the user's own folder to others and does nothing more: one the user
    made read-only stays read-only (the writes then fail, and say so), whichever caller."""
    for index, asked in enumerate(({"make": True}, {"make": False, "close_writable": True},
                                   {"make": True, "close_writable": True})):
        folder = private(tmp_path / f"f{index}")
        os.chmod(folder, mode)
        with PrivateFolder(folder, **asked):
            pass
        assert stat.S_IMODE(folder.stat().st_mode) == left, asked


@pytest.mark.parametrize("mode", [0o770, 0o730, 0o707, 0o777, 0o1777])
def test_a_folder_others_may_write_is_refused(tmp_path, mode):
    folder = private(tmp_path / "f")
    os.chmod(folder, mode)
    for make in (False, True):
        with pytest.raises(NotPrivate, match=f"may be written by others \\(mode {mode:o}; chmod 700 it\\)"):
            PrivateFolder(folder, make=make)
    assert stat.S_IMODE(folder.stat().st_mode) == mode  # refused, not mended behind the user's back


@as_root
def test_another_users_folder_is_refused(tmp_path):
    folder = private(tmp_path / "f")
    os.chown(folder, NOBODY, NOBODY)
    for make in (False, True):
        with pytest.raises(NotPrivate, match=f"belongs to another user \\(uid {NOBODY}\\)"):
            PrivateFolder(folder, make=make)


@as_root
def test_another_users_file_is_named_so_and_the_users_own_not(tmp_path):
    """another_users: the words every refusal of a file not ours says it in (the daemon's
    checkpoint lock too: tests/test_exactly_once.py)."""
    path = tmp_path / "f"
    path.write_text("")
    assert another_users(os.stat(path)) is None
    os.chown(path, NOBODY, NOBODY)
    assert another_users(os.stat(path)) == f"belongs to another user (uid {NOBODY})"


@pytest.mark.parametrize("mode, left", [(0o770, 0o700), (0o777, 0o700), (0o577, 0o500)], ids=oct)
def test_a_folder_of_the_users_own_others_may_write_is_closed_when_asked(tmp_path, mode, left):
    """close_writable: for the status line, which cannot say why it would refuse one."""
    folder = private(tmp_path / "f")
    os.chmod(folder, mode)
    with PrivateFolder(folder, make=False, close_writable=True):
        pass
    assert stat.S_IMODE(folder.stat().st_mode) == left


@as_root
def test_another_users_folder_is_refused_even_when_closing_is_asked(tmp_path):
    folder = private(tmp_path / "f")
    os.chown(folder, NOBODY, NOBODY)
    with pytest.raises(NotPrivate, match=f"belongs to another user \\(uid {NOBODY}\\)"):
        PrivateFolder(folder, make=True, close_writable=True)


def test_a_link_or_a_file_in_the_folders_place_is_refused(tmp_path):
    target = private(tmp_path / "mine")
    (tmp_path / "link").symlink_to(target)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "file").write_text("")
    for name, why in (("link", "is a symbolic link"), ("dangling", "is a symbolic link"),
                      ("file", "is not a folder")):
        for make in (False, True):
            with pytest.raises(NotPrivate, match=why):
                PrivateFolder(tmp_path / name, make=make)
    assert not (tmp_path / "nowhere").exists()


def special_files(folder: Path) -> dict[str, object]:
    """A FIFO, a socket, a folder and links (to a file, to a FIFO, dangling) in `folder`,
    by name; what holds the socket open."""
    os.mkfifo(folder / "fifo")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(folder / "socket"))
    (folder / "folder").mkdir()
    (folder / "target").write_bytes(b"planted")
    (folder / "link").symlink_to(folder / "target")
    (folder / "fifo-link").symlink_to(folder / "fifo")
    (folder / "dangling").symlink_to(folder / "nowhere")
    return {"socket": server}


def test_only_a_regular_file_is_read_and_nothing_else_is_opened(tmp_path):
    """A FIFO would block an open for reading until a writer came: read() returns at once
    (the test would hang otherwise), as it does for a socket, a folder and every link."""
    folder = private(tmp_path / "f")
    held = special_files(folder)
    (folder / "file").write_bytes(b"mine")
    with PrivateFolder(folder, make=False) as private_folder:
        for name in ("fifo", "socket", "folder", "link", "fifo-link", "dangling"):
            with pytest.raises(NotARegularFile):
                private_folder.read(name)
        with pytest.raises(FileNotFoundError):
            private_folder.read("missing")
        with private_folder.read("file") as handle:
            assert handle.read() == b"mine"
    held["socket"].close()


def test_a_file_others_may_write_or_another_users_is_not_read(tmp_path):
    """In a folder that was open to others (closed since), or where root left one: what
    another user wrote is never read."""
    folder = private(tmp_path / "f")
    for name, mode in (("group", 0o620), ("world", 0o602)):
        (folder / name).write_bytes(b"planted")
        os.chmod(folder / name, mode)
    names = ["group", "world"]
    if os.geteuid() == 0:
        (folder / "theirs").write_bytes(b"planted")
        os.chmod(folder / "theirs", 0o600)
        os.chown(folder / "theirs", NOBODY, NOBODY)
        names.append("theirs")
    with PrivateFolder(folder, make=False) as private_folder:
        for name in names:
            with pytest.raises(NotARegularFile):
                private_folder.read(name)


def test_a_file_is_replaced_whole_and_private_whatever_was_at_its_name(tmp_path):
    folder = private(tmp_path / "f")
    special_files(folder)["socket"].close()
    with PrivateFolder(folder, make=False) as private_folder:
        for name in ("fifo", "socket", "link", "fifo-link", "dangling"):
            private_folder.replace(name, lambda out: out.write(b"new"))
            assert (folder / name).read_bytes() == b"new" and not (folder / name).is_symlink()
            assert stat.S_IMODE((folder / name).stat().st_mode) == 0o600
    assert (folder / "target").read_bytes() == b"planted"  # a link is replaced, never written through
    assert sorted(os.listdir(folder)) == sorted(["fifo", "socket", "folder", "target", "link",
                                                 "fifo-link", "dangling"])


def test_a_folder_swapped_after_the_check_is_not_written_through(tmp_path):
    folder = private(tmp_path / "f")
    elsewhere = private(tmp_path / "elsewhere")
    with PrivateFolder(folder, make=False) as private_folder:
        folder.rename(tmp_path / "moved")
        folder.symlink_to(elsewhere)
        private_folder.replace(NAME, lambda out: out.write(b"new"))
    assert os.listdir(elsewhere) == []
    assert (tmp_path / "moved" / NAME).read_bytes() == b"new"


def test_tidy_removes_only_what_it_made_beyond_the_newest(tmp_path):
    folder = private(tmp_path / "f")
    theirs = ["notes.json", "0123.json", f"{NAME}.bak", "0123456789ABCDEF.json",
              ".notes.json.abc123.tmp", "x0123456789abcdef.json"]
    for name in theirs:
        (folder / name).write_text("the user's")
    ours = [f"{number:016x}.json" for number in range(6)]
    for age, name in enumerate(ours):
        (folder / name).write_text("{}")
        os.utime(folder / name, ns=(10**18 - age * 10**9,) * 2)  # the first is the newest
    (folder / f"{1:016x}.json.link").symlink_to(folder / "notes.json")
    with PrivateFolder(folder, make=False) as private_folder:
        private_folder.tidy(MADE, 4)
    assert sorted(os.listdir(folder)) == sorted([*theirs, *ours[:4], f"{1:016x}.json.link"])


SAVE_AND_DIE = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from tailer.private_files import PrivateFolder

    def write(out):
        out.write(b"half a file")
        out.flush()
        if sys.argv[3] == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        print("writing", flush=True)
        sys.stdin.readline()  # until the test lets it finish
        out.write(b" and the rest")

    with PrivateFolder(Path(sys.argv[1]), make=True) as folder:
        folder.replace(sys.argv[2], write)
""")


def save_in_a_process(folder: Path, name: str, how: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", SAVE_AND_DIE, str(folder), name, how], cwd=ROOT,
                            env=tailer_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def temporaries(folder: Path) -> list[str]:
    return [name for name in os.listdir(folder) if temporary_of(name) is not None]


def test_tidy_removes_what_a_killed_save_left_and_never_a_running_saves_file(tmp_path):
    folder = private(tmp_path / "f")
    killed = save_in_a_process(folder, NAME, "die")
    assert killed.wait(timeout=60) == -signal.SIGKILL
    (left,) = temporaries(folder)
    assert temporary_of(left) == NAME and (folder / left).read_bytes() == b"half a file"
    running = save_in_a_process(folder, NAME, "wait")
    try:
        assert running.stdout.readline() == "writing\n"
        with PrivateFolder(folder, make=False) as private_folder:
            private_folder.tidy(MADE, 4)  # a save runs: nothing of a save is removed
            assert len(temporaries(folder)) == 2
            private_folder.replace(NAME, lambda out: out.write(b"another save"))  # not blocked
            assert len(temporaries(folder)) == 2
    finally:
        running.stdin.write("\n")
        running.stdin.close()
    assert running.wait(timeout=60) == 0
    assert (folder / NAME).read_bytes() == b"half a file and the rest"  # the last to finish wins
    with PrivateFolder(folder, make=False) as private_folder:
        private_folder.tidy(MADE, 4)
    assert temporaries(folder) == [] and os.listdir(folder) == [NAME]



def test_a_stop_just_after_a_file_is_opened_stays_a_stop_and_closes_it_once(tmp_path, monkeypatch):
    """As copilot/lines.open_regular (tests/test_lines.py): the file object alone closes the
    descriptor once `open` returned, so a stop then is a KeyboardInterrupt, never EBADF."""
    import tailer.private_files as private_files

    folder = private(tmp_path / "f")
    (folder / NAME).write_bytes(b"mine")
    real_open = open

    def stopped_open(*args, **kwargs):
        real_open(*args, **kwargs)
        raise KeyboardInterrupt
    with PrivateFolder(folder, make=False) as private_folder:
        monkeypatch.setattr(private_files, "open", stopped_open, raising=False)
        before = sorted(os.listdir("/proc/self/fd"))
        with pytest.raises(KeyboardInterrupt):
            private_folder.read(NAME)
        assert sorted(os.listdir("/proc/self/fd")) == before
