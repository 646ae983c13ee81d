"""tailer/commands/stops.py: a stop signal ends `report`, `doctor` and `scrub` as Ctrl-C
does, the first stop alone, never lost in a finalizer, held off a step that must be whole;
the demo's copy and a scrub cut short gone however they end.

A stop lands wherever Python next checks for signals, so these tests send it at each
moment in turn: a profile function counts the calls and returns of the command and sends
SIGHUP, SIGTERM and SIGINT at the k-th. Each run is in a child process (the handlers are
the process's), the runs for many k in one child to keep the test short.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap

import pytest

from tailerproc import ROOT, ctrl_c_quits, tailer_env

# Runs `hydrafusion-tailer ARGV` in this process again and again, sending the burst at the
# k-th call or return (counted from the start, or from report.main's return with
# "after-report"), for k = 1, 1 + stride, ...; "{work}" in ARGV is a new folder each run,
# also $TMPDIR. Prints each run's exit code, whether the burst came after the command had
# given the handlers back (`late`: this child's own handler took it), its stderr, and what
# it left: in the folder, and processes (the report's workers).
EACH_MOMENT = textwrap.dedent("""
    import io, json, os, signal, sys, tempfile
    from tailer.commands import launch
    from tailer.report import command

    argv, stride, after_report = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "after-report"
    late, moments, at, base, harness = [], [0], [0], tempfile.gettempdir(), os.getpid()

    def counting(frame, event, arg):
        if os.getpid() != harness:  # a worker forked from the report
            return
        moments[0] += 1
        if moments[0] == at[0]:
            for number in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
                os.kill(os.getpid(), number)

    real_main = command.main
    def main_then_count(*args, **kwargs):
        code = real_main(*args, **kwargs)
        sys.setprofile(counting)
        return code
    if after_report:
        command.main = main_then_count

    def children():  # the report's workers still running (reaped when they have ended)
        found = []
        for task in os.listdir(f"/proc/{harness}/task"):
            with open(f"/proc/{harness}/task/{task}/children") as listed:
                found += map(int, listed.read().split())
        return [pid for pid in found if os.waitpid(pid, os.WNOHANG) == (0, 0)]

    def run(k):
        moments[0], at[0] = 0, k
        late.clear()
        for number in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):  # a stopped run's stay
            signal.signal(number, lambda signum, frame: late.append(signum))
        work = tempfile.mkdtemp(dir=base)
        os.environ["TMPDIR"] = tempfile.tempdir = work
        sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
        try:
            if not after_report:
                sys.setprofile(counting)
            code = launch.main([part.replace("{work}", work) for part in argv])
        finally:
            sys.setprofile(None)
            stderr, sys.stdout, sys.stderr = sys.stderr.getvalue(), sys.__stdout__, sys.__stderr__
        left = sorted(os.path.relpath(os.path.join(folder, name), work)
                      for folder, folders, files in os.walk(work) for name in folders + files)
        left += [f"a worker: {pid}" for pid in children()]
        return {"k": k, "code": code, "late": bool(late), "stderr": stderr, "left": left,
                "moments": moments[0]}

    run(0)  # the first imports what the command needs: more moments than any run after
    clean = run(0)
    runs = [run(k) for k in range(1, clean["moments"] + 1, stride)]
    print(json.dumps([clean] + [run for run in runs if run["moments"] >= run["k"]]))
""")


def at_each_moment(argv: list[str], *, stride: int = 1, after_report: bool = False) -> tuple[dict, list[dict]]:
    """The run without a stop, and a run with the burst at each moment (EACH_MOMENT)."""
    child = subprocess.run(
        [sys.executable, "-c", EACH_MOMENT, json.dumps(argv), str(stride),
         "after-report" if after_report else "from-start"],
        cwd=ROOT, env=tailer_env(), capture_output=True, text=True, timeout=600, preexec_fn=ctrl_c_quits)
    assert child.returncode == 0, child.stderr[-3000:]
    clean, *runs = json.loads(child.stdout)
    assert clean["stderr"] == "" and clean["code"] == 0, clean
    assert {run["code"] for run in runs} == {0, 130}  # the stops came both in time and late
    return clean, runs


def test_a_stop_at_each_moment_of_the_demo_report_s_end_leaves_no_copy_and_no_traceback():
    """The moments a burst in tests/test_command_frictions.py met, once in many runs: a stop
    just before the copy's removal began (the signal mask it was held with came too late:
    Python ran the handler at the mask's first moment) and inside shutil.rmtree (which then
    closed a folder twice: EBADF, and a traceback). Every moment from report.main's return:
    the copy's removal and the handlers given back."""
    _, runs = at_each_moment(["report", "--demo"], after_report=True)
    assert len(runs) > 100
    for run in runs:
        assert run["stderr"] == "" and run["left"] == [], run
        assert run["code"] == 130 or (run["code"] == 0 and run["late"]), run


def test_a_stop_at_any_moment_of_doctor_ends_it_at_once_without_a_traceback():
    """Ctrl-C in doctor printed a traceback from wherever it was reading."""
    _, runs = at_each_moment(["doctor", "--state-dir", str(ROOT / "fixtures")], stride=1201)
    for run in runs:
        assert run["stderr"] == "" and run["left"] == [], run
        assert run["code"] == 130 or (run["code"] == 0 and run["late"]), run


def test_a_scrub_stopped_at_any_moment_leaves_nothing_and_one_not_stopped_is_whole():
    """A scrub cut short left the sessions written so far, a copy one might share taking it
    for whole (and Ctrl-C a traceback). Now it is whole or not there, with the folder made
    for it ("new/")."""
    clean, runs = at_each_moment(["scrub", str(ROOT / "fixtures"), "{work}/new/dst"], stride=2503)
    assert len(clean["left"]) > 2
    for run in runs:
        assert run["stderr"] == "", run
        if run["code"] == 130:
            assert run["left"] == [], run
        else:
            assert run["code"] == 0 and run["late"] and run["left"] == clean["left"], run


def test_a_stop_at_any_moment_of_a_report_with_workers_leaves_no_worker_and_no_traceback():
    """The workers start, read and are ended in the report's process; a stop that came just
    before their end came out of the signal mask that holds it, before any was killed."""
    argv = ["report", "--state-dir", str(ROOT / "fixtures"), "--jobs", "2", "--no-cache"]
    _, runs = at_each_moment(argv, stride=211)
    for run in runs:
        assert run["stderr"] == "" and run["left"] == [], run
        assert run["code"] == 130 or (run["code"] == 0 and run["late"]), run


def _in_a_child(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=tailer_env(),
                          capture_output=True, text=True, timeout=60, preexec_fn=ctrl_c_quits)


def test_a_stop_raised_in_a_finalizer_is_raised_again_after_it_and_nothing_is_printed():
    """Python drops what a finalizer raises ("Exception ignored in: <generator ...>"): the
    report went on to its end, the stop lost, a traceback on stderr."""
    child = _in_a_child("""
        import os, signal
        from tailer.commands import stops

        def closing():
            try:
                yield
            finally:
                os.kill(os.getpid(), signal.SIGTERM)
                len("a call: the handler runs here, in the generator's finalizer")

        with stops.as_interrupt():
            suspended = closing()
            next(suspended)
            try:
                del suspended
                for _ in range(1000):
                    len("calls")
                print("the stop was lost")
            except KeyboardInterrupt:
                print("stopped")
    """)
    assert (child.stdout, child.stderr) == ("stopped\n", "")


def test_only_the_first_stop_raises():
    """A closed terminal sends SIGHUP twice; a second KeyboardInterrupt would cut short the
    clean-up the first began. A burst at once: one stop; and none after the report."""
    child = _in_a_child("""
        import os, signal
        from tailer.commands import stops

        raised = 0
        with stops.as_interrupt():
            for burst in range(3):
                try:
                    for number in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                        os.kill(os.getpid(), number)
                    for _ in range(1000):
                        len("calls")
                except KeyboardInterrupt:
                    raised += 1
        os.kill(os.getpid(), signal.SIGHUP)  # as the report exits: ending already
        print(raised)
    """)
    assert (child.stdout, child.stderr, child.returncode) == ("1\n", "", 0)


def test_a_stop_during_a_held_step_is_raised_once_it_is_done():
    child = _in_a_child("""
        import os, signal
        from tailer.commands import stops

        done = []
        with stops.as_interrupt():
            try:
                with stops.held():
                    os.kill(os.getpid(), signal.SIGTERM)
                    for step in range(3):
                        len("calls")
                        done.append(step)
            except KeyboardInterrupt:
                print("stopped after", done)
    """)
    assert (child.stdout, child.stderr) == ("stopped after [0, 1, 2]\n", "")


def test_ctrl_c_as_a_command_starts_is_exit_130_without_a_traceback(tmp_path):
    """Ctrl-C before the command set its stops (its imports, its options read by argparse:
    most of a short report's time) ended it with a KeyboardInterrupt traceback. Ctrl-C at
    moments all through a report and `statusline --install`, each run importing the
    tailer's modules afresh, as a command starts: exit 130, or 0 once it was done."""
    child = _in_a_child(f"""
        import io, json, os, signal, sys

        def run(argv, k):
            moments = [0]

            def counting(frame, event, arg):
                moments[0] += 1
                if moments[0] == k:
                    os.kill(os.getpid(), signal.SIGINT)

            from tailer.commands import launch  # what `python -m tailer` imports before main

            signal.signal(signal.SIGINT, signal.default_int_handler)  # as Python starts a process

            sys.stdout = sys.stderr = io.StringIO()
            sys.setprofile(counting)
            try:
                code = launch.main(argv)
            except BaseException as error:
                code = repr(error)
            finally:
                sys.setprofile(None)
                sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
            for name in [name for name in sys.modules if name.startswith("tailer")]:
                del sys.modules[name]  # the next run imports them again
            return code, moments[0]

        os.environ["COPILOT_HOME"] = {json.dumps(str(tmp_path))}
        codes = []
        for argv in (["report", "--state-dir", {json.dumps(str(ROOT / "fixtures"))}, "--no-cache",
                      "--format", "csv"], ["statusline", "--install", "--width", "90"]):
            moments = run(argv, 0)[1]
            # From the second: the first is main's own call, before its first line.
            codes += [run(argv, k)[0] for k in range(2, moments, moments // 40)]
        print(json.dumps(codes))
    """)
    assert child.returncode == 0 and child.stderr == "", child.stderr[-3000:]
    codes = json.loads(child.stdout)
    assert set(codes) <= {0, 130} and codes.count(130) > 60, codes


def test_outside_a_report_the_stops_are_the_process_s_own_again():
    """A report that ended without a stop gives every handler and the unraisable hook back."""
    child = _in_a_child("""
        import signal, sys
        from tailer.commands import stops

        before = [signal.getsignal(number) for number in stops.STOP_SIGNALS], sys.unraisablehook
        with stops.as_interrupt():
            pass
        with stops.held():  # outside a report: nothing held, nothing raised
            pass
        after = [signal.getsignal(number) for number in stops.STOP_SIGNALS], sys.unraisablehook
        print(before == after)
    """)
    assert (child.stdout, child.stderr) == ("True\n", "")


@pytest.mark.parametrize("ignored", [signal.SIGHUP, signal.SIGINT], ids=["nohup", "a-background-job"])
def test_a_stop_ignored_from_the_start_stays_ignored(tmp_path, ignored):
    """`nohup hydrafusion-tailer report --html page.html &` and a terminal closed: the
    report ended on the SIGHUP that nohup is there to keep away (and a shell's background job,
    which ignores SIGINT, on the Ctrl-C meant for the job in front)."""
    process = subprocess.Popen([sys.executable, "-m", "tailer", "report", "--demo"], cwd=ROOT,
                               env=tailer_env(TMPDIR=str(tmp_path)), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, preexec_fn=lambda: signal.signal(ignored, signal.SIG_IGN))
    while process.poll() is None and not list(tmp_path.iterdir()):
        pass  # until the copy is being made
    process.send_signal(ignored)
    stdout, stderr = process.communicate(timeout=60)
    assert (process.returncode, stderr) == (0, b"") and b"turns" in stdout
    assert list(tmp_path.iterdir()) == []


def test_a_stop_as_a_temporary_file_is_made_leaves_no_temporary(tmp_path):
    """Python checks for signals as a call into C returns, so a stop can be raised as
    os.open returns, its descriptor never kept: the report's page (`.page.html.*.tmp`) and
    atomic_file's saves (the report's cache, the daemon's checkpoint) made the file before
    the `try` that removes it, and left it behind. Here the stop is raised there."""
    child = _in_a_child(f"""
        import os
        from pathlib import Path
        from tailer import atomic_file
        from tailer.commands import launch

        work, real_open = Path({str(tmp_path)!r}), os.open

        def open_then_stop(path, flags, *args, **kwargs):
            fd = real_open(path, flags, *args, **kwargs)
            if os.path.basename(path).startswith((".saved.json.", ".page.html.")):
                os.close(fd)
                raise KeyboardInterrupt
            return fd

        os.open = open_then_stop
        try:
            atomic_file.replace_file(work / "saved.json", lambda out: out.write(b"{{}}"), durable=True)
        except KeyboardInterrupt:
            print("stopped")
        print(launch.main(["report", "--demo", "--html", str(work / "page.html")]))
        print(sorted(path.name for path in work.iterdir()))
    """)
    assert (child.stdout, child.stderr) == ("stopped\n130\n[]\n", "")
