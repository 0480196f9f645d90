"""Driver overhead benchmark for ``runners``.

Runs 64 scripted episodes of 8 turns through the lock-step driver, then sends the very same
batches (same requests, same order) straight to a fresh engine's ``generate``, and reports
the driver's overhead as a ratio measured in the same process:

    overhead = (driver wall time - direct engine wall time) / direct engine wall time

The scripted engine does a fixed amount of work per generated token (a sleep of
``--per-token-us`` microseconds per token, 100 us by default = 10k tokens/s, the order of a
batched GPU server) so the ratio means something.  The run is repeated (``--repeats``) and
the median taken.  A second figure adds the sqlite completion cache (writes per batch),
and a third replays the run from the cache.  Target: driver overhead <= 5 %.

    python bench/bench_runners.py [--episodes 64 --turns 8 --per-token-us 100 --repeats 3]

Writes bench-results/runners.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from runners import Call, CompletionCache, RunStats, Sampling, ScriptedEngine, run_episodes  # noqa: E402

WORDS = ("def return value list index loop sort merge key dict test case error fix patch line "
         "branch commit function class method string number result check").split()


def reply(messages: list[dict]) -> str:
    """A deterministic 20-60 word reply derived from the conversation."""
    h = hashlib.blake2b(messages[-1]["content"].encode(), digest_size=8).digest()
    n = 20 + h[0] % 41
    return " ".join(WORDS[(h[i % 8] + i) % len(WORDS)] for i in range(n))


def make_episode(i: int, turns: int):
    def episode():
        msgs = [{"role": "system", "content": "You are a careful coding assistant. " * 8}]
        lengths = []
        for t in range(turns):
            msgs.append({"role": "user", "content": f"task {i} step {t}: please revise the function {i * 31 + t}"})
            res = yield Call("assistant", list(msgs), Sampling(max_tokens=256))
            msgs.append({"role": "assistant", "content": res.text})
            lengths.append(res.completion_tokens)
        return sum(lengths)
    return episode


def engine(per_token_s: float) -> ScriptedEngine:
    return ScriptedEngine(fn=reply, per_token_s=per_token_s)


def run_driver(n: int, turns: int, per_token_s: float, cache: CompletionCache | None = None):
    eng = engine(per_token_s)
    stats = RunStats()
    eps = {f"ep{i}": make_episode(i, turns) for i in range(n)}
    t0 = time.perf_counter()
    out = run_episodes(eps, {"assistant": eng}, cache=cache, progress=False, stats=stats)
    wall = time.perf_counter() - t0
    assert all(o.ok for o in out.values()), [o.error for o in out.values() if not o.ok][:1]
    # the batches the engine received, to replay them directly
    batches, k = [], 0
    for size in eng.batch_sizes:
        batches.append(eng.seen[k:k + size])
        k += size
    return wall, stats, batches


def run_direct(batches, per_token_s: float) -> float:
    eng = engine(per_token_s)
    t0 = time.perf_counter()
    for b in batches:
        eng.generate(b)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--episodes", type=int, default=64)
    ap.add_argument("--turns", type=int, default=8)
    ap.add_argument("--per-token-us", type=float, default=100.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "bench-results" / "runners.json"))
    args = ap.parse_args(argv)
    pts = args.per_token_us / 1e6

    rows = []
    for _ in range(args.repeats):
        d_wall, stats, batches = run_driver(args.episodes, args.turns, pts)
        direct = run_direct(batches, pts)
        with tempfile.TemporaryDirectory() as tmp:
            with CompletionCache(Path(tmp) / "c.sqlite") as cache:
                c_wall, c_stats, _ = run_driver(args.episodes, args.turns, pts, cache)
                r_wall, r_stats, _ = run_driver(args.episodes, args.turns, pts, cache)
                assert r_stats.sent == 0
        rows.append({"driver_s": d_wall, "direct_s": direct, "driver_cache_s": c_wall, "replay_s": r_wall,
                     "calls": stats.calls, "batches": stats.batches, "tokens": stats.usage.completion_tokens})

    med = {k: statistics.median(r[k] for r in rows) for k in ("driver_s", "direct_s", "driver_cache_s", "replay_s")}
    overheads = [(r["driver_s"] - r["direct_s"]) / r["direct_s"] for r in rows]
    cache_overheads = [(r["driver_cache_s"] - r["direct_s"]) / r["direct_s"] for r in rows]
    result = {
        "benchmark": "runners driver overhead",
        "episodes": args.episodes, "turns": args.turns, "per_token_us": args.per_token_us,
        "calls": rows[0]["calls"], "batches": rows[0]["batches"], "completion_tokens": rows[0]["tokens"],
        "repeats": args.repeats,
        "direct_engine_s": round(med["direct_s"], 4),
        "driver_s": round(med["driver_s"], 4),
        "driver_overhead_ratio": round(statistics.median(overheads), 4),
        "driver_with_cache_s": round(med["driver_cache_s"], 4),
        "driver_with_cache_overhead_ratio": round(statistics.median(cache_overheads), 4),
        "cache_replay_s": round(med["replay_s"], 4),
        "target_overhead_ratio": 0.05,
        "runs": [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()} for r in rows],
    }
    result["pass"] = result["driver_overhead_ratio"] <= result["target_overhead_ratio"]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{args.episodes} episodes x {args.turns} turns = {result['calls']} calls in {result['batches']} batches, "
          f"{result['completion_tokens']} tokens at {args.per_token_us:g} us/token")
    print(f"direct engine {result['direct_engine_s']:.3f}s | driver {result['driver_s']:.3f}s "
          f"-> overhead {100 * result['driver_overhead_ratio']:.2f}% (target <= 5%)")
    print(f"driver + sqlite cache {result['driver_with_cache_s']:.3f}s "
          f"-> overhead {100 * result['driver_with_cache_overhead_ratio']:.2f}% | "
          f"replay from cache {result['cache_replay_s']:.3f}s")
    print(f"wrote {out}")
    return result


if __name__ == "__main__":
    main()
