"""Every command reads a session log the same way (tailer/turns/session_log.py): `run --once`,
`report`, `report --watch`'s first pass, `doctor`, `scrub` and the demo, on one hostile state
folder, count the same turns and the same damage and name the same problems in the same
words.

The folder holds a session folder that cannot be read, a log that cannot be read, a FIFO
where a log would be (never opened: it may block), a log rewritten between two runs of the
daemon, damaged and oversized lines; a folder that vanishes as it is read is its own test,
in this process. Modes deny nothing to root, which runs these tests here, so the commands
run as `nobody`.
"""

import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from sessiongen import START, SessionWriter
from tailer.copilot import problems
from tailer.turns import session_log
from tailer.turns.sessions import Tailer
from tailer.outputs.exposition import Registry
from tailer.copilot.files import find_logs
from tailer.copilot.lines import NotARegularFile
from tailer.outputs.metrics import Metrics
from tailer.report.read import Selection, SessionReader
from report_helpers import wanted_turns
from tailerproc import ROOT, tailer_env

DENIED = PermissionError(13, "Permission denied")
EXPECTED_PROBLEMS = sorted([problems.folder_problem("s-folder", DENIED),
                            problems.log_problem("s-log", DENIED),
                            problems.log_problem("s-fifo", NotARegularFile())])
EXPECTED_TURNS = 7  # s-good 2, s-damaged 2, s-rewritten 3 once rewritten
EXPECTED_DAMAGE = {"invalid_json": 1, "oversized": 1}
PROBLEM = re.compile(r"session \S+: (?:cannot read its (?:folder|log): [^\n]*"
                     r"|its log is not a regular file; skipped)")


def nobody():
    """How to run a command as `nobody` (None when this user is not root), and the Python
    that user can run: this one may live where only root may enter (/root/.pyenv)."""
    if os.geteuid() != 0:
        return None, sys.executable
    try:
        user = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user `nobody` to run the commands as, and root reads any file")

    def become():
        os.setgroups([])
        os.setgid(user.pw_gid)
        os.setuid(user.pw_uid)
    for python in (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"):
        try:
            check = subprocess.run([python, "-c", "import sys; assert sys.version_info >= (3, 11)"],
                                   preexec_fn=become, capture_output=True, timeout=30)
        except OSError:
            continue
        if check.returncode == 0:
            break
    else:
        pytest.skip("no Python 3.11 that `nobody` may run, and root reads any file")
    # The commands run from this checkout and keep their outputs in the temporary folder:
    # a folder above either that is closed to other users (a checkout under /root, a /tmp
    # made 0700) is this machine's setup, not a finding.
    reach = subprocess.run([python, "-c", "import os, sys, tailer; "
                            "sys.exit(not os.access(sys.argv[1], os.W_OK | os.X_OK))",
                            tempfile.gettempdir()],
                           cwd=ROOT, preexec_fn=become, capture_output=True, timeout=30)
    if reach.returncode != 0:
        pytest.skip(f"`nobody` cannot reach {ROOT} or {tempfile.gettempdir()} here, and root reads any file")
    return (become, user), python


def run(how, *args: str) -> subprocess.CompletedProcess:
    (become, python) = how
    env = tailer_env()
    env["HOME"] = env["XDG_STATE_HOME"] = tempfile.gettempdir()
    return subprocess.run([python, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120, preexec_fn=become)


def writer(session_id: str, *turns: str) -> SessionWriter:
    session = SessionWriter(session_id, START)
    for pattern in turns:
        if pattern == "single":
            session.single("gpt-5.6-sol")
        elif pattern == "cascade":
            session.cascade("mai-code-1.1-flash", "gpt-5.6-sol")
        else:
            session.critique("mai-code-1.1-flash", ["gpt-5.6-sol", "claude-opus-5"])
    return session


def damaged_lines() -> list[str]:
    """A fusion line cut short, and one too long to read (8 MB and more)."""
    return ['{"type":"session.fusion_completed","data":{"fusionId":"fusion-cut',
            '{"type":"session.fusion_completed","data":{"fusionId":"fusion-big","x":"'
            + "y" * (9 << 20) + '"}}']


def write(folder: Path, lines: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "events.jsonl").write_text("".join(f"{line}\n" for line in lines))


def reserialized(lines: list[str]) -> list[str]:
    """The same events in other bytes, as a CLI that rewrote its log would leave them."""
    return [json.dumps(json.loads(line), separators=(", ", ": ")) for line in lines]


def samples(text: str, name: str) -> dict[str, float]:
    found = {}
    for line in text.splitlines():
        match = re.fullmatch(rf"{name}(?:\{{(.*)\}})? (\S+)", line)
        if match:
            found[match.group(1) or ""] = float(match.group(2))
    return found


def doctor_rows(out: str, heading: str) -> list[list[str]]:
    block = out.split(f"\n{heading}\n", 1)[1].split("\n\n", 1)[0]
    return [row.split() for row in block.splitlines() if row.strip() != "none"]


@pytest.fixture
def hostile():
    """A state folder and a place for outputs, both the user's, in a folder anyone may enter."""
    (user, python) = nobody()
    top = Path(tempfile.mkdtemp(prefix="tailer-hostile-"))
    os.chmod(top, 0o755)
    state = top / "state"
    writer("s-good", "single", "cascade").write(state)
    damaged = writer("s-damaged", "single", "cascade").lines()
    write(state / "s-damaged", damaged[:len(damaged) // 2 + 1] + damaged_lines()
          + damaged[len(damaged) // 2 + 1:])
    writer("s-folder", "single").write(state)
    writer("s-log", "single").write(state)
    (state / "s-fifo").mkdir()
    os.mkfifo(state / "s-fifo" / "events.jsonl")
    rewritten = writer("s-rewritten", "single", "cascade", "critique")
    before = writer("s-rewritten", "single", "cascade").lines()
    write(state / "s-rewritten", before)
    (top / "out").mkdir()
    if user is not None:
        for path in [top, *top.rglob("*")]:
            os.chown(path, user[1].pw_uid, user[1].pw_gid)
    os.chmod(state / "s-folder", 0)
    os.chmod(state / "s-log" / "events.jsonl", 0)
    yield (user and user[0], python), state, top / "out", rewritten.lines()
    os.chmod(state / "s-folder", 0o755)
    shutil.rmtree(top)


def test_every_command_counts_the_same_turns_and_damage_and_names_the_same_problems(hostile):
    become, state, out, rewritten = hostile
    checkpoint, textfile = out / "checkpoint.json", out / "metrics.prom"
    once = ("-m", "tailer", "run", "--once", "--from-start", "--state-dir", str(state),
            "--otlp-endpoint", "none", "--metrics-address", "none", "--checkpoint",
            str(checkpoint), "--textfile", str(textfile))
    first = run(become, *once)
    assert first.returncode == 0, first.stderr
    write(state / "s-rewritten", reserialized(rewritten))
    daemon = run(become, *once)
    assert daemon.returncode == 0, daemon.stderr
    assert "session s-rewritten: its log was rewritten or replaced" in daemon.stderr
    metrics = textfile.read_text()
    report = run(become, "-m", "tailer", "report", "--format", "json", "--state-dir", str(state))
    doctor = run(become, "-m", "tailer", "doctor", "--state-dir", str(state))
    scrub = run(become, "-m", "tailer", "scrub", str(state), str(out / "scrubbed"))
    scrubbed = run(become, "-m", "tailer", "report", "--format", "json", "--state-dir",
                   str(out / "scrubbed"))
    probe = run(become, str(ROOT / "tests" / "read_every_way.py"), str(state), str(out / "demo"))
    for result in (report, scrub, scrubbed, probe):
        assert result.returncode == 0, result.stderr
    assert doctor.returncode == 1, doctor.stderr  # damaged lines are drift
    figures, read = json.loads(report.stdout), json.loads(probe.stdout)

    turns = {
        "run --once": sum(samples(metrics, "hydrafusion_turns_total").values()),
        "report": len([t for t in figures["turns"] if t["kind"] == "fusion"]),
        "report --watch": len(read["watch"]["turns"]),
        "doctor": int(re.search(r"turns \(distinct fusion ids\) +(\d+)", doctor.stdout).group(1)),
        "scrub": len([t for t in json.loads(scrubbed.stdout)["turns"] if t["kind"] == "fusion"]),
        "demo": read["demo"]["turns"],
    }
    assert turns == dict.fromkeys(turns, EXPECTED_TURNS)

    damage = {
        "run --once": {re.search(r'reason="(\w+)"', labels).group(1): value for labels, value
                       in samples(metrics, "hydrafusion_tailer_malformed_lines_total").items()
                       if value},
        "doctor": {reason: int(count) for reason, count
                   in doctor_rows(doctor.stdout, "Malformed lines (reason, lines)")},
    }
    assert damage == dict.fromkeys(damage, EXPECTED_DAMAGE)
    damaged = {
        "report": figures["skipped"]["damaged_lines"],
        "report --watch": read["watch"]["damaged"],
        "scrub": int(re.search(r"\((\d+) damaged\)", scrub.stdout).group(1)),
    }
    assert damaged == dict.fromkeys(damaged, sum(EXPECTED_DAMAGE.values()))
    unreadable = {"report": figures["skipped"]["unreadable_logs"],
                  "report --watch": read["watch"]["unreadable"],
                  "doctor": int(re.search(r"unreadable logs +(\d+)", doctor.stdout).group(1))}
    assert unreadable == dict.fromkeys(unreadable, len(EXPECTED_PROBLEMS))

    problems = {
        "run --once": daemon.stderr,
        "report": report.stderr,
        "report --watch": "\n".join(read["watch"]["problems"]),
        "doctor": doctor.stdout,
        "scrub": scrub.stderr,
        "demo": "\n".join(read["demo"]["problems"]),
    }
    named = {command: sorted(set(PROBLEM.findall(text))) for command, text in problems.items()}
    assert named == dict.fromkeys(named, EXPECTED_PROBLEMS)


def test_a_folder_that_vanishes_as_it_is_read_ends_its_session_quietly(tmp_path, monkeypatch,
                                                                        caplog):
    """Its session ends, with no problem named and no damage counted, for every reader."""
    state = tmp_path / "state"
    writer("s-good", "single", "cascade").write(state)
    writer("s-vanishing", "single").write(state)
    real_read = session_log.LineReader.read

    def vanishing(reader):
        if reader.path.parent.name == "s-vanishing" and reader.path.exists():
            shutil.rmtree(reader.path.parent)
        return real_read(reader)

    logs, unreadable = find_logs(state)
    assert set(logs) == {"s-good", "s-vanishing"} and not unreadable
    monkeypatch.setattr(session_log.LineReader, "read", vanishing)
    reader = SessionReader()
    turns = list(wanted_turns(logs, Selection(), reader))
    assert len(turns) == 2 and reader.skipped() == {"damaged_lines": 0, "unreadable_logs": 0}

    writer("s-vanishing", "single").write(state)
    metrics = Metrics(Registry())
    tailer = Tailer(state, metrics=metrics, from_start=True, idle_timeout_s=1e9)
    try:
        assert len(tailer.poll().turns) == 2
    finally:
        tailer.close()
    assert not PROBLEM.search(caplog.text) and "skipped line" not in caplog.text


# Paths under a folder the user may not enter: Path.is_dir() and Path.exists() raise
# PermissionError there, which no command may show as a traceback.
CLOSED_PATHS = [
    ("--state-dir", ("report", "--state-dir", "{closed}/state")),
    ("--state-dir", ("report", "--state-dir", "{closed}/state", "--format", "json")),
    ("--html", ("report", "--state-dir", "{fixtures}", "--html", "{closed}/page.html")),
    ("--html", ("report", "--demo", "--html", "{closed}/page.html")),
    ("--state-dir", ("run", "--once", "--state-dir", "{closed}/state", "--otlp-endpoint", "none",
                     "--metrics-address", "none", "--checkpoint", "{open}/a.json")),
    ("--checkpoint", ("run", "--once", "--state-dir", "{fixtures}", "--otlp-endpoint", "none",
                      "--metrics-address", "none", "--checkpoint", "{closed}/cp.json")),
    ("--textfile", ("run", "--once", "--state-dir", "{fixtures}", "--otlp-endpoint", "none",
                    "--metrics-address", "none", "--checkpoint", "{open}/b.json",
                    "--textfile", "{closed}/t.prom")),
    ("--checkpoint", ("demo", "--once", "--otlp-endpoint", "none", "--metrics-address", "none",
                      "--checkpoint", "{closed}/cp.json")),
    ("--state-dir", ("doctor", "--state-dir", "{closed}/state")),
]


@pytest.mark.parametrize("option, args", CLOSED_PATHS, ids=[" ".join(a[:1] + (o,)) for o, a in CLOSED_PATHS])
def test_a_path_under_a_closed_folder_is_refused_in_one_line(tmp_path, option, args):
    (user, python) = nobody()
    top = Path(tempfile.mkdtemp(prefix="tailer-closed-"))
    try:
        os.chmod(top, 0o755)
        (top / "closed" / "state").mkdir(parents=True)
        (top / "open").mkdir()
        if user is not None:
            os.chown(top / "open", user[1].pw_uid, user[1].pw_gid)
        os.chmod(top / "closed", 0)
        fixtures = ROOT / "fixtures"
        words = [word.format(closed=top / "closed", open=top / "open", fixtures=fixtures)
                 for word in args]
        done = run((user and user[0], python), "-m", "tailer", *words)
    finally:
        os.chmod(top / "closed", 0o755)
        shutil.rmtree(top)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert f"{option} {top}/closed/" in line and "Permission denied" in line, line


def test_a_log_reached_through_two_folders_is_one_session_for_every_reader(tmp_path):
    """A link to a session's folder and a hard link of its log (two names of one file) are
    that session, read once: the report and the daemon count its turns once."""
    state = tmp_path / "state"
    writer("s-good", "single", "cascade").write(state)
    (state / "a-link").symlink_to("s-good")
    (state / "z-hard").mkdir()
    os.link(state / "s-good" / "events.jsonl", state / "z-hard" / "events.jsonl")
    logs, unreadable = find_logs(state)
    assert list(logs) == ["s-good"] and not unreadable
    assert len(list(wanted_turns(logs, Selection(), SessionReader()))) == 2
    tailer = Tailer(state, metrics=Metrics(Registry()), from_start=True, idle_timeout_s=1e9)
    try:
        assert [turn.session_id for turn in tailer.poll().turns] == ["s-good", "s-good"]
    finally:
        tailer.close()
    report = subprocess.run([sys.executable, "-m", "tailer", "report", "--state-dir", str(state),
                             "--format", "json", "--no-cache"], capture_output=True, text=True,
                            env=tailer_env(), cwd=ROOT, timeout=60)
    assert report.returncode == 0, report.stderr
    assert [row["session_id"] for row in json.loads(report.stdout)["turns"]] == ["s-good", "s-good"]
