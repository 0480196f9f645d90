"""run(): whole programs; passed iff the program exits with status 0."""
from __future__ import annotations

import pytest
from sandbox_testlib import assert_nothing_left


@pytest.mark.parametrize("program,status,ftype", [
    ("print('hello')\n", "passed", None),
    ("import sys\nsys.exit(0)\n", "passed", None),
    ("import sys\nsys.exit(3)\n", "failed", "ExitStatus"),
    ("assert 1 + 1 == 3, 'math'\n", "failed", "AssertionError"),
    ("raise KeyError('k')\n", "error", "KeyError"),
    ("def broken(:\n", "error", "SyntaxError"),
    ("b = bytearray(8 * 1024 ** 3)\n", "memory", "MemoryError"),
    ("import socket\nsocket.create_connection(('1.1.1.1', 80))\n", "blocked", "Blocked"),
    ("import os\nos.fork()\n", "blocked", "Blocked"),
    ("import os\nos._exit(0)\n", "passed", None),
    ("import os\nos._exit(5)\n", "failed", "ExitStatus"),
])
def test_run_statuses(clean, program, status, ftype):
    v = clean.run(program, timeout_s=5.0, memory_mb=256)
    assert v.status == status, v
    if ftype:
        assert v.failure.type == ftype


def test_run_timeout_and_output(clean):
    v = clean.run("import sys\nprint('before')\nsys.stdout.flush()\nwhile True:\n    pass\n", timeout_s=0.7)
    assert v.status == "timeout"
    assert v.stdout == "before\n"


def test_run_reports_the_failing_line_and_traceback(clean):
    v = clean.run("x = 1\ny = [][x]\n")
    assert v.status == "error" and v.failure.type == "IndexError"
    assert v.failure.line == "y = [][x]"
    assert "Traceback" in v.stderr


def test_run_waits_for_non_daemon_threads(clean):
    program = ("import threading, time\n"
               "def late():\n"
               "    time.sleep(0.2)\n"
               "    print('thread done', flush=True)\n"
               "threading.Thread(target=late).start()\n")
    v = clean.run(program)
    assert v.status == "passed" and v.stdout == "thread done\n"


def test_run_main_guard_runs(clean):
    v = clean.run("if __name__ == '__main__':\n    print('main')\n")
    assert v.stdout == "main\n"


def test_run_leaves_nothing(pool):
    pool.run("import threading, time\nthreading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n")
    assert_nothing_left(pool)
