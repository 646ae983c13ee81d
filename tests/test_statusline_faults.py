"""`statusline` faults found by probing it as a broken machine or a hostile user would,
beyond those tests/test_statusline.py feeds it: each test here failed before its fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tailer.statusline import settings


@pytest.mark.parametrize("option", ["--install", "--uninstall"])
def test_settings_the_cli_saves_while_install_writes_them_are_not_lost(tmp_path, monkeypatch, option):
    """The CLI saves settings.json itself (/settings, /statusline): a save of its between
    our read of the file and our rename over it was lost without a word."""
    path = tmp_path / "settings.json"
    path.write_text('{"model": "auto"}' if option == "--install" else json.dumps(
        {"model": "auto", "statusLine": {"command": settings.our_command([])}}))
    real, edited = settings.replace_file, []

    def cli_saves_meanwhile(target, *args, **kwargs):
        if not edited:
            saved = json.loads(path.read_text())
            saved["theme"] = "dark"
            path.write_text(json.dumps(saved))
            edited.append(target)
        return real(target, *args, **kwargs)

    monkeypatch.setattr(settings, "replace_file", cli_saves_meanwhile)
    if option == "--install":
        settings.install(Path(path), [])
    else:
        settings.uninstall(Path(path))
    after = json.loads(path.read_text())
    assert after["theme"] == "dark" and after["model"] == "auto"
    assert settings.is_ours(after.get("statusLine", {}).get("command")) == (option == "--install")
