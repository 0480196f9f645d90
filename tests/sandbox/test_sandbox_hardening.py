"""What a red-team pass got through (issue 16), each case as a test.

Several submissions here reach ctypes the way a hostile one can: the child's stack still
holds the zygote's frames, whose globals hold the sandbox's own ctypes wrappers. From there
any system call the seccomp filter allows is one call away, so these cases exercise the
kernel interfaces directly (SysV IPC, pipe sizes, memfd), not only what the stdlib offers.
"""
from __future__ import annotations

import json
import os
import random
import time

import pytest
from sandbox_testlib import CTYPES, PRIVILEGED, assert_nothing_left, needs_privilege, only

from sandbox import SandboxConfig

GENEROUS_S = 15.0   # a 1 s job must be decided well within this (boundedness, not speed)

# The child's replies, sent in two writes: all but the last byte, then (once the judge has
# drained the pipe, i.e. is waiting for the rest of that very reply) the last byte. In between
# the child knows, without any race, that the judge is reading its reply to call ``seq``.
WATCH = """
import json, os, struct, sys, time
def _drained():
    n = ct.c_int(0)
    while True:
        libc.ioctl(4, 0x541B, ct.byref(n))     # FIONREAD: bytes still in the reply pipe
        if n.value == 0:
            return
        time.sleep(0.0002)
_harness = sys._getframe(1).f_locals["self"]   # (module code runs in the child's Harness.load)
def watch_replies(on_read):
    def send(obj):
        body = json.dumps(obj, separators=(",", ":")).encode()
        frame = struct.pack(">I", len(body)) + body
        os.write(4, frame[:-1])
        _drained()
        on_read(_harness.seq)
        os.write(4, frame[-1:])
        _drained()
    _harness.chan.send = send
"""


def _six_asserts(expected) -> str:
    return "def check(candidate):\n" + "".join(f"    assert candidate({i + 1}) == {e!r}\n"
                                                for i, e in enumerate(expected))


# --- 1. a faked pass across jobs ---------------------------------------------------------

def test_cross_job_oracle_cannot_learn_a_hidden_test(pool_factory):
    """SysV shared memory kept what one job learnt for the next, and when the judge read each
    reply told the child how far the asserts got: with no task logic, this passed the hidden
    test below on its 5th job."""
    key = random.randrange(1 << 20, 1 << 30)
    oracle = CTYPES + WATCH + f"""
N = 6
shmid = libc.shmget({key}, 4096, 0o1666)   # IPC_CREAT | 0666
if shmid < 0:
    raise OSError(ct.get_errno(), "shmget")
mem = (ct.c_char * 4096).from_address(libc.shmat(shmid, None, 0))
last = ord(mem[N])                 # the last call the previous job's test made: its assert failed
if last:
    mem[last - 1] = b"F" if mem[last - 1] == b"T" else b"T"
else:
    mem[0:N] = b"T" * N
mem[N] = b"\\x00"

def seen(seq):
    if seq > ord(mem[N]):
        mem[N] = bytes([seq])
watch_replies(seen)

def f(x):
    return mem[x - 1] == b"T"
"""
    test = _six_asserts([False, False, True, False, True, False])
    p = pool_factory("oracle", SandboxConfig(), workers=2)
    try:
        statuses = [p.check(oracle, test, "f", timeout_s=5.0).status for _ in range(8)]
    finally:
        _remove_sysv(key)
    assert "passed" not in statuses, statuses
    assert "sandbox_error" not in statuses, statuses


def test_read_order_reveals_nothing_about_the_asserts(pool):
    """What a child can observe of when its replies are read is the same whether the first
    assert fails or none does: the judge reads a prefetched batch whole before asserting."""
    watcher = CTYPES + WATCH + """
watch_replies(lambda seq: print("read", seq, flush=True) if seq else None)
def f(x):
    return True
"""
    seen = {}
    for name, expected in (("fails_first", [False] * 6), ("passes", [True] * 6)):
        v = pool.check(watcher, _six_asserts(expected), "f", timeout_s=5.0)
        assert v.status == ("failed" if name == "fails_first" else "passed"), v
        seen[name] = [line for line in v.stdout.splitlines() if line.startswith("read")]
    assert seen["fails_first"] == seen["passes"] == [f"read {i}" for i in range(1, 7)]


IPC_MAKE = CTYPES + '''
def f(x):
    made = []
    shmid = libc.shmget({key}, 8 << 20, 0o1666)
    if shmid >= 0:
        addr = libc.shmat(shmid, None, 0)
        if addr not in (None, ct.c_void_p(-1).value):
            ct.memset(addr, 1, 8 << 20)        # resident, and detached again
            libc.shmdt(ct.c_void_p(addr))
        made.append("shm")
    if libc.msgget({key}, 0o1666) >= 0:
        made.append("msg")
    if libc.semget({key}, 1, 0o1666) >= 0:
        made.append("sem")
    print("made", made, flush=True)
    return x
'''
IPC_FIND = CTYPES + '''
def f(x):
    found = [name for name, ok in (("shm", libc.shmget({key}, 0, 0) >= 0), ("msg", libc.msgget({key}, 0) >= 0),
                                   ("sem", libc.semget({key}, 0, 0) >= 0)) if ok]
    print("found", found, flush=True)
    return x
'''
ID_TEST = "def check(candidate):\n    assert candidate(3) == 3\n"


def _host_sysv_keys() -> set[int]:
    keys = set()
    for kind in ("shm", "msg", "sem"):
        with open(f"/proc/sysvipc/{kind}") as f:
            keys |= {int(line.split()[0]) for line in f.read().splitlines()[1:] if line.strip()}
    return keys


def _remove_sysv(key: int) -> None:
    """Remove what a submission under the old code left in the host's IPC namespace."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    ipc_rmid = 0
    if (ident := libc.shmget(key, 0, 0)) >= 0:
        libc.shmctl(ident, ipc_rmid, None)
    if (ident := libc.msgget(key, 0)) >= 0:
        libc.msgctl(ident, ipc_rmid, None)
    if (ident := libc.semget(key, 0, 0)) >= 0:
        libc.semctl(ident, 0, ipc_rmid)


def _check_ipc_leaves_nothing(p) -> list[str]:
    key = random.randrange(1 << 20, 1 << 30)
    try:
        made = p.check(IPC_MAKE.replace("{key}", str(key)), ID_TEST, "f", memory_mb=64)
        assert made.status in ("passed", "blocked"), made
        assert key not in _host_sysv_keys(), "a SysV IPC object outlived its job on the host"
        for _ in range(3):   # (any worker)
            found = p.check(IPC_FIND.replace("{key}", str(key)), ID_TEST, "f")
            assert found.status == "passed" and "found []" in found.stdout, found
        return [line for line in made.stdout.splitlines() if line.startswith("made")]
    finally:
        _remove_sysv(key)


def test_sysv_ipc_objects_do_not_outlive_their_job(pool):
    """Full isolation: the objects are either refused (no memory cgroup here to bound them) or
    made in the child's own IPC namespace; either way nothing is left for another job."""
    made = _check_ipc_leaves_nothing(pool)
    if not (pool.layers.get("ipc_namespace") and pool.layers.get("memory_cgroup")):
        assert made == ["made []"], made


@needs_privilege
def test_ipc_namespace_alone_keeps_objects_private(pool_factory):
    """The IPC namespace layer on its own (no seccomp): the objects are made, in a namespace
    that dies with the child."""
    p = pool_factory("ipcns-only", only(ipc_namespace=True))
    assert _check_ipc_leaves_nothing(p) == ["made ['shm', 'msg', 'sem']"]
    assert p.layers["ipc_namespace"] is True


def test_memfd_cannot_hold_more_than_the_memory_limit(pool):
    body = ("import os\nfds = []\n"
            "for _ in range(12):\n"
            "    fd = os.memfd_create('hold')\n"
            "    os.write(fd, b'x' * (16 << 20))\n"
            "    fds.append(fd)\n"
            "return x")
    code = "def f(x):\n" + "".join(f"    {line}\n" for line in body.splitlines())
    v = pool.check(code, ID_TEST, "f", memory_mb=64)
    # memfd_create is denied in every mode (its inode numbers come from a counter that
    # outlives the child: see test_sandbox_channels.py)
    assert v.status == "blocked", v
    if not pool.layers.get("memory_cgroup"):
        assert any("RLIMIT_AS" in n for n in v.notes), v.notes


# --- 2. one job breaks its worker for good -------------------------------------------

@pytest.mark.parametrize("tmpfs", [True, False])
def test_a_deep_scratch_tree_does_not_break_the_worker(pool_factory, tmpfs):
    """200 (300) levels of directories, and (on the tmpfs) every inode used up: cleanup must
    not fail, and later jobs on the same worker must run."""
    p = pool_factory(f"deep-tree-{tmpfs}", SandboxConfig(scratch_tmpfs=tmpfs))
    fill = ("n = 0\ntry:\n    while True:\n        open(f'f{n}', 'w').close()\n        n += 1\n"
            "except OSError:\n    pass\n") if tmpfs and PRIVILEGED else ""
    code = ("import os\ndef f(x):\n    for _ in range(" + ("200" if tmpfs else "300") + "):\n"
            "        os.mkdir('d')\n        os.chdir('d')\n"
            + "".join(f"    {line}\n" for line in fill.splitlines()) + "    return x\n")
    before = p.worker_info()[0]["pid"]
    assert p.check(code, ID_TEST, "f").status == "passed"
    for _ in range(3):
        v = p.check("def f(x):\n    open('ok', 'w').write('1')\n    return x\n", ID_TEST, "f")
        assert v.status == "passed", v
    assert_nothing_left(p)
    assert p.worker_info()[0]["pid"] == before   # cleaned up, not replaced


def test_a_failed_spawn_replaces_the_worker(pool_factory):
    """If the zygote cannot make a child's scratch dir, the worker is replaced and the job
    retried: never a sandbox_error for every later job."""
    import os
    import shutil
    p = pool_factory("spawn-fails", only(seccomp=True), workers=1)
    info = p.worker_info()[0]
    # (the spare child may be making its own dir in there meanwhile: remove until it is gone;
    # a spare whose setup then fails is retried on a new worker as well)
    for _ in range(50):
        shutil.rmtree(info["scratch_base"], ignore_errors=True)
        if not os.path.exists(info["scratch_base"]):
            break
    assert not os.path.exists(info["scratch_base"])
    verdicts = [p.check("def f(x):\n    return x\n", ID_TEST, "f") for _ in range(3)]
    assert [v.status for v in verdicts] == ["passed"] * 3, verdicts
    assert p.worker_info()[0]["pid"] != info["pid"]


# --- 3. unbounded work on the trusted side ----------------------------------------------

def _forge(reply_expr: str) -> str:
    """A submission that answers its call with a reply frame it wrote itself."""
    return ("import json, os, struct\n"
            "def f(x):\n"
            f"    body = {reply_expr}\n"
            "    os.write(4, struct.pack('>I', len(body)) + body)\n"
            "    import time\n"
            "    time.sleep(30)\n")


def test_ints_that_hash_alike_are_refused_quickly(pool):
    forged = _forge("json.dumps({'ok': True, 'value': {'s': [{'x': format(k * (2 ** 61 - 1), 'x')} "
                    "for k in range(1, 60001)]}}).encode()")
    t0 = time.monotonic()
    v = pool.check(forged, "def check(candidate):\n    assert len(candidate(1)) == 3\n", "f", timeout_s=1.0)
    assert time.monotonic() - t0 < GENEROUS_S
    assert v.status == "failed" and v.failure.type == "HashFlood", v


def _peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024


def test_a_reply_that_would_blow_up_in_the_judge_is_refused(pool_factory):
    """31 MiB of ``[],`` is ten million lists: 1.77 GB in the judge once decoded."""
    p = pool_factory("bounded-replies", SandboxConfig())
    worker = p.worker_info()[0]["pid"]
    with open(f"/proc/{worker}/clear_refs", "w") as f:
        f.write("5")   # reset the peak RSS
    before = _peak_rss_mb(worker)
    forged = _forge("b'{\"ok\":true,\"value\":[' + b'[],' * (10 ** 7) + b'[]]}'")
    t0 = time.monotonic()
    v = p.check(forged, ID_TEST, "f", timeout_s=1.0, memory_mb=512)
    assert time.monotonic() - t0 < GENEROUS_S
    assert v.status == "error" and v.failure.type == "ResultTooLarge", v
    assert _peak_rss_mb(worker) - before < 300, "the judge built far more than the reply's bytes"


def test_compiling_a_pathological_submission_is_bounded_by_the_job(pool):
    code = 'X = f"' + "{1}" * 250_000 + '"\ndef f(x):\n    return x\n'   # quadratic to compile
    t0 = time.monotonic()
    v = pool.check(code, ID_TEST, "f", timeout_s=1.0)
    assert time.monotonic() - t0 < GENEROUS_S
    assert v.status == "timeout", v


def test_waiting_for_a_slow_import_counts_against_the_time_limit(pool):
    """The judge's batch of large arguments fills the pipe while the submission sleeps at
    import: that wait is the job's, not the 30 s setup budget's."""
    test = ("def check(candidate):\n    for i in range(300):\n"
            "        assert candidate('x' * 10000 + str(i)) == i\n")
    code = "import time\ntime.sleep(3)\ndef f(s):\n    return int(s[10000:])\n"
    t0 = time.monotonic()
    v = pool.check(code, test, "f", timeout_s=1.0)
    assert time.monotonic() - t0 < GENEROUS_S
    assert v.status == "timeout", v


# --- 4. wrong statuses ------------------------------------------------------------------

@pytest.mark.parametrize("test", [
    "def check(candidate):\n    for got in map(candidate, [1, 2, 3]):\n        assert got == 99\n",
    "def check(candidate):\n    assert all(r == 99 for r in map(candidate, [1, 2, 3]))\n",
    "def check(candidate):\n    for a, b in zip([1, 2], map(candidate, [1, 2])):\n        assert b == 99\n",
])
def test_stop_iteration_from_the_submission_cannot_end_the_tests_loop(pool, test):
    v = pool.check("def f(x):\n    raise StopIteration\n", test, "f")
    assert v.status == "error" and v.failure.type == "StopIteration", v


def test_an_unprintable_assertion_value_is_a_failure(pool):
    test = "def check(candidate):\n    r = candidate(1)\n    assert r == 1, r\n"
    v = pool.check("def f(x):\n    return 10 ** 5000\n", test, "f")
    assert v.status == "failed" and v.failure.type == "AssertionError", v
    assert "cannot be shown" in v.failure.message


def test_lone_surrogates_never_reach_the_verdict(pool):
    code = "import sys\ndef f(x):\n    sys.stderr.write('\\ud800 err\\n')\n    raise ValueError('bad \\ud800 value')\n"
    v = pool.check(code, ID_TEST, "f")
    assert v.status == "error" and v.failure.type == "ValueError"
    json.dumps(v.to_dict(), ensure_ascii=False).encode("utf-8")   # what the eval run does per record
    assert v.failure.message == "bad \ufffd value"


def test_the_child_is_sent_only_the_names_the_test_needs_from_it(pool):
    """The load request used to carry every identifier the test mentions."""
    code = ("import sys\nprint(sorted(sys._getframe(1).f_locals['msg']['names']))\n"
            "def helper(x):\n    return x\ndef f(x):\n    return x\n")
    test = ("import math\nHIDDEN_EXPECTED = 3\n"
            "def check(candidate):\n    assert candidate(math.floor(3.5)) == helper(HIDDEN_EXPECTED)\n")
    v = pool.check(code, test, "f")
    assert v.status == "passed", v
    assert v.stdout.strip() == "['f', 'helper']"


def test_recorded_calls_are_those_the_test_made_when_the_batch_was_read_whole(pool):
    v = pool.check("def f(x):\n    return x\n", _six_asserts([1, 2, 0, 4, 5, 6]), "f", record_calls=True)
    assert v.status == "failed"
    assert [c["args"] for c in v.decoded_calls()] == [(1,), (2,), (3,)]
