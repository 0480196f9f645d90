"""Nothing one child does reaches the next job in the same worker: its stdin, its scratch
tmpfs's inode numbers, the kernel's inode counters, the prefetching of later jobs."""
from __future__ import annotations

import pytest

from sandbox import SandboxConfig
from sandbox_testlib import PRIVILEGED, needs_privilege

ECHO_TEST = "def check(candidate):\n    candidate(0)\n"


@pytest.fixture(scope="module")
def one(pool_factory):
    """One worker, so that consecutive jobs run in the same worker, one child after another."""
    return pool_factory("channels-one-worker", SandboxConfig(), workers=1)


def _returned(pool, body: str, test: str = ECHO_TEST):
    code = "def f(x):\n" + "".join(f"    {line}\n" for line in body.splitlines())
    v = pool.check(code, test, "f", record_calls=True)
    assert v.calls, v
    return v.decoded_calls()[0].get("value", v.calls[0].get("raised")), v


def test_stdin_flags_and_owner_signal_do_not_reach_the_next_job(one):
    probe = ("import os\nflags = [os.get_blocking(0)]\n"
             "try:\n    import fcntl\n    flags.append(fcntl.fcntl(0, fcntl.F_GETSIG))\n"
             "    fcntl.fcntl(0, fcntl.F_SETSIG, 42)\nexcept ImportError:\n    flags.append(0)\n"
             "os.set_blocking(0, False)\nreturn flags")
    first, _ = _returned(one, probe)
    second, _ = _returned(one, probe)
    assert first == second == [True, 0]


@needs_privilege
def test_the_scratch_tmpfs_inode_numbers_do_not_depend_on_earlier_jobs(one):
    # 300 files made and deleted by one job must not shift the numbers the next one sees
    probe = ("import os\nopen('probe', 'w').close()\nseen = (os.stat('/').st_ino, os.stat('probe').st_ino)\n"
             "for i in range(300):\n    open(f'f{i}', 'w').close()\n    os.unlink(f'f{i}')\n"
             "os.unlink('probe')\nreturn seen")
    first, _ = _returned(one, probe)
    second, _ = _returned(one, probe)
    third, _ = _returned(one, "import os\nreturn os.stat('/').st_ino")
    assert first == second and third == first[0]


@pytest.mark.parametrize("what", ["import os\nos.pipe()", "import socket\nsocket.socketpair()",
                                  "import os\nos.memfd_create('m')"])
def test_objects_numbered_by_a_kernel_wide_counter_are_denied(one, what):
    # each pipe (socket, message queue, memfd) takes an inode number from a counter shared with
    # the next child's pipes: a child that makes N of them shifts what the next one reads by N
    _, v = _returned(one, what + "\nreturn 1")
    assert v.status == "blocked", v


def test_a_diverging_job_does_not_change_how_later_jobs_are_prefetched(one):
    # The prediction assumes the first result is 5 (the stand-in agrees with everything);
    # a submission that returns something else makes the real run diverge. A later job must
    # still get its calls the same way (in one batch), whatever an earlier job returned.
    test = ("def check(candidate):\n    if candidate(1) == 5:\n        assert candidate(2) == 0\n"
            "    else:\n        assert candidate(3) == 0\n")
    probe = ("import sys\ndef f(x):\n    op = sys._getframe(2).f_locals.get('op')\n"
             "    return 5 if x == 1 else op\n")

    def op_seen():
        v = one.check(probe, test, "f", record_calls=True)
        return [c.get("value") for c in v.calls]

    before = op_seen()
    diverge = one.check("def f(x):\n    return 4 if x == 1 else 0\n", test, "f")
    assert diverge.status == "passed", diverge
    assert op_seen() == before == [5, "batch"]


@pytest.mark.parametrize("what", ["import os\nos.fstat(1)", "import os\nos.stat(4)", "import os\nos.dup(3)",
                                  "import os, fcntl\nfcntl.fcntl(2, fcntl.F_DUPFD, 10)"])
def test_the_childs_own_pipes_cannot_be_stated(one, what):
    # their inode numbers and times would say how many pipes the worker made before (a rerun's
    # extra child after a diverging job) and when (the end of the previous job)
    _, v = _returned(one, what + "\nreturn 1")
    assert v.status == "blocked", v
    printed = one.check("def f(x):\n    print('still prints')\n    return x\n", ECHO_TEST, "f")
    assert printed.status == "passed" and printed.stdout == "still prints\n", printed
