"""tailer/stdout_gone.py: a command whose reader went away ends with its own exit code,
silently, where Python's flush at exit would print `Exception ignored ...` and exit 120."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from tailerproc import ROOT, tailer_env

WRITER = textwrap.dedent("""
    import os, sys
    from tailer.stdout_gone import stdout_to_devnull

    try:
        sys.stdout.write("more than the reader wanted\\n" * 1000)
        sys.stdout.flush()
    except BrokenPipeError:
        stdout_to_devnull()
    print("dropped too")
    {after}
    sys.exit(3)
""")


def _written_into_a_closed_pipe(after: str = "") -> subprocess.CompletedProcess:
    reader, writer = os.pipe()
    os.close(reader)
    try:
        return subprocess.run([sys.executable, "-c", WRITER.format(after=after)], cwd=ROOT,
                              env=tailer_env(), stdout=writer, stderr=subprocess.PIPE,
                              timeout=60)
    finally:
        os.close(writer)


def test_the_command_ends_with_its_own_code_and_says_nothing():
    done = _written_into_a_closed_pipe()
    assert (done.returncode, done.stderr) == (3, b"")


def test_stdout_is_devnull_and_no_descriptor_is_left_open():
    # The descriptors a fresh interpreter has open, besides stdin, stdout and stderr, are
    # the same before and after: the one opened on /dev/null is closed once duplicated.
    after = textwrap.dedent("""
        null = os.stat(os.devnull)
        out = os.fstat(1)
        assert (out.st_dev, out.st_ino) == (null.st_dev, null.st_ino)
        sys.stderr.write(" ".join(sorted(os.listdir("/proc/self/fd"), key=int)))
    """)
    done = _written_into_a_closed_pipe(after)
    assert done.returncode == 3, done.stderr
    assert done.stderr.split()[:3] == [b"0", b"1", b"2"]
    assert len(done.stderr.split()) <= 4  # the listing's own descriptor
