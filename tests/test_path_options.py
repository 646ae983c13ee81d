"""tailer/path_options.py's walk up to the nearest folder that exists: what scrub makes for
its copy (and removes when stopped), where run's checkpoint would be made."""

from __future__ import annotations

import os
from pathlib import Path

from tailer.path_options import missing_folders, nearest_existing


def test_the_missing_folders_are_listed_innermost_first(tmp_path):
    path = tmp_path / "a" / "b" / "c"
    assert missing_folders(path) == [path, path.parent, path.parent.parent]
    assert nearest_existing(path) == tmp_path


def test_a_path_that_exists_misses_nothing(tmp_path):
    assert missing_folders(tmp_path) == []
    assert nearest_existing(tmp_path) == tmp_path


def test_a_file_or_a_dangling_link_on_the_way_is_where_the_walk_stops(tmp_path):
    # Something is there, though no folder: the caller refuses it, rather than making
    # folders through it.
    (tmp_path / "file").write_text("")
    os.symlink(tmp_path / "nowhere", tmp_path / "link")
    assert nearest_existing(tmp_path / "file" / "x" / "y") == tmp_path / "file"
    assert missing_folders(tmp_path / "link" / "x") == [tmp_path / "link" / "x"]


def test_a_relative_path_stops_at_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert missing_folders(Path("a/b")) == [Path("a/b"), Path("a")]
    assert nearest_existing(Path("a/b")) == Path(".")


def test_the_root_ends_the_walk():
    assert nearest_existing(Path("/")) == Path("/")
