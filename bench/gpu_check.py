"""GPU check of the vLLM evaluation path: CAPA through the runners adapter vs raw ``vllm.LLM.chat``.

On a machine with a CUDA GPU and vLLM (``pip install -e ".[vllm]"``), in the repo root::

    python bench/gpu_check.py --model Qwen/Qwen2.5-Coder-7B-Instruct
    python bench/gpu_check.py --model /models/Qwen3-8B --engine-arg enable_thinking=false
    python bench/gpu_check.py --model Qwen/Qwen3-32B --engine-arg tensor_parallel_size=2 \\
        --cells C01 C02 --max-tokens 512 --out bench-results/gpu_check

The same protocol runs on a CPU-only machine with vLLM's CPU build and the embedded model
(``make setup-vllm``; the README gives the figures)::

    .venv-vllm/bin/python bench/gpu_check.py --model qwen2.5-coder-0.5b --cells C01 --limit 2 \\
        --max-turns 3 --max-tokens 256 --engine-arg max_model_len=8192 --out bench-results/gpu_check-cpu

What it does, with ONE ``VllmEngine`` shared by every phase (one model load, a few minutes
for an 8B model on one GPU; the whole check is sized to stay under 10 minutes):

1. ``capa eval`` of the held-out sessions of ``--cells`` (default C01 C02) under ``none``,
   then under ``same-user`` (``run_eval`` with the shared engine), every ``generate`` call
   recorded: the batches, their results and their time.  The prefix cache is reset before
   each phase, so each starts cold.
2. The very same batches again, turn by turn, through raw ``LLM.chat`` with the same
   sampling values (generation_config merged, the same max_tokens), cache reset first.
3. It prints and writes (``--out``/gpu_check.json):
   * tokens/s of generated tokens inside the adapter's ``generate`` and inside raw
     ``LLM.chat``, and their ratio (target >= 0.90: the adapter costs under 10 %);
   * the prefix-cache hit rate of ``same-user`` from vLLM's counters
     (``vllm:prefix_cache_hits / vllm:prefix_cache_queries``), and from the results'
     ``cached_tokens / prompt_tokens`` as a cross-check;
   * the wall-time ratio of ``same-user`` to ``none`` (target <= 1.3: the history costs
     little once its prefix is cached).  Wall time includes the simulated user and the sandbox.

The run folders go to a fresh temporary directory (``--keep-runs`` keeps them under --out).
The exit status is 0 when both targets are met, 1 otherwise, 2 on bad input.
"""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from runners import ChatRequest, ChatResult  # noqa: E402

THROUGHPUT_TARGET = 0.90
WALL_RATIO_TARGET = 1.3
PREFIX_KEYS = ("vllm:prefix_cache_queries", "vllm:prefix_cache_hits")


# -- pure arithmetic -----------------------------------------------------------------------

def counters(metrics: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None) -> dict[str, float]:
    """vLLM counters as one dict; a list (one per data-parallel replica) is summed."""
    if not metrics:
        return {}
    parts = [metrics] if isinstance(metrics, Mapping) else list(metrics)
    out: dict[str, float] = {}
    for part in parts:
        for k, v in (part or {}).items():
            if isinstance(v, (int, float)):
                out[k] = out.get(k, 0) + v
    return out


def delta(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    return {k: after.get(k, 0) - before.get(k, 0) for k in after}


def ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def hit_rate(d: Mapping[str, float]) -> float | None:
    """Prefix-cache hits over queries (both counted in tokens by vLLM)."""
    return ratio(d.get("vllm:prefix_cache_hits", 0), d.get("vllm:prefix_cache_queries", 0))


@dataclass
class Batch:
    requests: list[ChatRequest]
    results: list[ChatResult]
    seconds: float


@dataclass
class Phase:
    name: str
    batches: list[Batch] = field(default_factory=list)
    wall_s: float = 0.0
    counters: dict[str, float] = field(default_factory=dict)
    sessions: int | None = None

    @property
    def seconds(self) -> float:
        return sum(b.seconds for b in self.batches)

    @property
    def completion_tokens(self) -> int:
        return sum(r.completion_tokens for b in self.batches for r in b.results)

    def summary(self) -> dict[str, Any]:
        prompt = sum(r.prompt_tokens for b in self.batches for r in b.results)
        cached = sum(r.cached_tokens for b in self.batches for r in b.results)
        return {"batches": len(self.batches), "requests": sum(len(b.requests) for b in self.batches),
                "sessions": self.sessions, "wall_s": round(self.wall_s, 3), "generate_s": round(self.seconds, 3),
                "completion_tokens": self.completion_tokens,
                "tokens_per_s": _round(ratio(self.completion_tokens, self.seconds)),
                "prefix_cache_hit_rate": _round(hit_rate(self.counters)),
                "cached_over_prompt_tokens": _round(ratio(cached, prompt)), "counters": self.counters}


def _round(x: float | None, n: int = 4) -> float | None:
    return None if x is None else round(x, n)


def report(model: str, cells: Sequence[str], engine_info: Mapping[str, Any], none: Phase, same: Phase,
           raw: Phase) -> dict[str, Any]:
    capa_tps = ratio(none.completion_tokens + same.completion_tokens, none.seconds + same.seconds)
    raw_tps = ratio(raw.completion_tokens, raw.seconds)
    tp_ratio = ratio(capa_tps or 0, raw_tps or 0)
    wall_ratio = ratio(same.wall_s, none.wall_s)
    return {
        "model": model, "cells": list(cells), "engine": dict(engine_info),
        "phases": {"none": none.summary(), "same-user": same.summary(), "raw_llm_chat": raw.summary()},
        "capa_tokens_per_s": _round(capa_tps, 2), "raw_tokens_per_s": _round(raw_tps, 2),
        "throughput_ratio": _round(tp_ratio), "throughput_target": THROUGHPUT_TARGET,
        "throughput_ok": tp_ratio is not None and tp_ratio >= THROUGHPUT_TARGET,
        "same_user_prefix_cache_hit_rate": _round(hit_rate(same.counters)),
        "wall_ratio_same_user_to_none": _round(wall_ratio), "wall_ratio_target": WALL_RATIO_TARGET,
        "wall_ratio_ok": wall_ratio is not None and wall_ratio <= WALL_RATIO_TARGET,
    }


def format_report(rep: Mapping[str, Any]) -> str:
    def f(x: Any, spec: str) -> str:
        return "n/a" if x is None else format(x, spec)

    ph = rep["phases"]
    ok = {True: "ok", False: "MISSED"}
    return "\n".join([
        f"GPU check: {rep['model']} on cells {' '.join(rep['cells'])} (vllm {rep['engine'].get('vllm_version')})",
        f"  tokens/s   CAPA {f(rep['capa_tokens_per_s'], '.1f')}   raw LLM.chat {f(rep['raw_tokens_per_s'], '.1f')}"
        f"   ratio {f(rep['throughput_ratio'], '.3f')} (target >= {rep['throughput_target']}: "
        f"{ok[rep['throughput_ok']]})",
        f"  same-user prefix-cache hit rate {f(rep['same_user_prefix_cache_hit_rate'], '.3f')}"
        f" (results: {f(ph['same-user']['cached_over_prompt_tokens'], '.3f')})",
        f"  wall time  none {ph['none']['wall_s']:.1f}s   same-user {ph['same-user']['wall_s']:.1f}s   ratio "
        f"{f(rep['wall_ratio_same_user_to_none'], '.3f')} (target <= {rep['wall_ratio_target']}: "
        f"{ok[rep['wall_ratio_ok']]})",
    ])


# -- recording and replay --------------------------------------------------------------------

class RecordingEngine:
    """Wraps an engine: same name, model, settings and cache key; records every batch."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.name, self.model = engine.name, engine.model
        self.batches: list[Batch] = []

    def describe(self) -> dict[str, Any]:
        return self.engine.describe()

    def cache_identity(self) -> dict[str, Any]:
        return self.engine.cache_identity()

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        t0 = time.perf_counter()
        out = self.engine.generate(requests)
        self.batches.append(Batch(list(requests), list(out), time.perf_counter() - t0))
        return out


def _core(engine: Any) -> Any:
    core = getattr(engine, "_core", None)
    if core is None:
        raise SystemExit("gpu_check runs one vLLM engine in this process: data_parallel_size must be 1")
    return core


def reset_prefix_cache(engine: Any) -> None:
    fn = getattr(_core(engine).llm, "reset_prefix_cache", None)
    if callable(fn):
        fn()


def replay_raw(engine: Any, batches: Sequence[Batch]) -> Phase:
    """The same batches through raw ``LLM.chat``: same conversations, same SamplingParams values."""
    from runners.vllm_config import merge_sampling

    core = _core(engine)
    phase = Phase("raw_llm_chat")
    before = counters(core.metrics())
    for b in batches:
        # requests CAPA never sent (over-long prompts) are left out, as vLLM would refuse them
        sent = [(q, r) for q, r in zip(b.requests, b.results) if r.ok and (r.completion_tokens or r.finish_reason != "length")]
        if not sent:
            continue
        convs = [q.message_dicts() for q, _ in sent]
        params = [core.SamplingParams(**merge_sampling(
            core.defaults, q.sampling, send_stop=not core.thinking_on,
            room=(core.max_model_len - r.prompt_tokens) if core.max_model_len and r.prompt_tokens else None))
            for q, r in sent]
        kwargs = {"chat_template_kwargs": dict(core.chat_template_kwargs)} if core.chat_template_kwargs else {}
        t0 = time.perf_counter()
        outs = core.llm.chat(convs, params, use_tqdm=False, **kwargs)
        dt = time.perf_counter() - t0
        results = [ChatResult(text="", finish_reason="stop", prompt_tokens=len(o.prompt_token_ids or []),
                              completion_tokens=len(o.outputs[0].token_ids), cached_tokens=o.num_cached_tokens or 0)
                   for o in outs]
        phase.batches.append(Batch([q for q, _ in sent], results, dt))
    phase.wall_s = phase.seconds
    phase.counters = delta(before, counters(core.metrics()))
    return phase


def run_phase(rec: RecordingEngine, condition: str, cells: Sequence[str], out: Path, max_tokens: int,
              limit: int | None, max_turns: int | None = None) -> Phase:
    from capa_hf.evaluation.run import EvalConfig, run_eval

    try:  # registers the sandbox judge where run_eval does not import it itself
        importlib.import_module("capa_hf.simulator.judges")
    except ImportError:
        pass
    turns = {} if max_turns is None else {"max_turns": max_turns}
    reset_prefix_cache(rec.engine)
    start = len(rec.batches)
    before = counters(rec.engine.metrics())
    t0 = time.perf_counter()
    summary = run_eval(EvalConfig(model=f"{rec.name}:{rec.model}", condition=condition, cells=tuple(cells),
                                  max_tokens=max_tokens, limit=limit, **turns), out / condition, engine=rec,
                       progress=False)
    phase = Phase(condition, rec.batches[start:], time.perf_counter() - t0,
                  delta(before, counters(rec.engine.metrics())), summary.get("n_sessions"))
    return phase


def run_check(model: str, cells: Sequence[str], out: Path, engine: Any, max_tokens: int = 512,
              limit: int | None = None, keep_runs: bool = False, max_turns: int | None = None) -> dict[str, Any]:
    rec = RecordingEngine(engine)
    runs = out / "runs" if keep_runs else Path(tempfile.mkdtemp(prefix="capa-gpu-check-"))
    try:
        none = run_phase(rec, "none", cells, runs, max_tokens, limit, max_turns)
        same = run_phase(rec, "same-user", cells, runs, max_tokens, limit, max_turns)
        reset_prefix_cache(engine)
        raw = replay_raw(engine, none.batches + same.batches)
    finally:
        if not keep_runs:
            shutil.rmtree(runs, ignore_errors=True)
    rep = report(model, cells, engine.describe(), none, same, raw)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_check.json").write_text(json.dumps(rep, indent=2, default=str) + "\n", encoding="utf-8")
    return rep


def main(argv: Sequence[str] | None = None, engine: Any = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="Hugging Face model id or local path (served with vLLM)")
    ap.add_argument("--cells", nargs="+", default=["C01", "C02"])
    ap.add_argument("--out", default="bench-results/gpu_check")
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--limit", type=int, default=None, help="at most this many sessions per condition")
    ap.add_argument("--max-turns", type=int, default=None, help="assistant turns per session (default: the eval's)")
    ap.add_argument("--engine-arg", action="append", default=[], metavar="KEY=VALUE",
                    help="vLLM engine option (repeatable), e.g. tensor_parallel_size=2")
    ap.add_argument("--keep-runs", action="store_true", help="keep the two run folders under --out/runs")
    args = ap.parse_args(argv)
    from runners import make_engine, parse_engine_args

    try:
        opts = parse_engine_args(args.engine_arg)
        if int(opts.get("data_parallel_size", 1)) != 1:
            raise ValueError("gpu_check measures one engine in this process: data_parallel_size must be 1")
        engine = engine or make_engine(f"vllm:{args.model}", **opts)
    except ValueError as exc:
        print(f"gpu_check: {exc}", file=sys.stderr)
        return 2
    try:
        rep = run_check(args.model, args.cells, Path(args.out), engine, max_tokens=args.max_tokens,
                        limit=args.limit, keep_runs=args.keep_runs, max_turns=args.max_turns)
    finally:
        engine.close()
    print(format_report(rep))
    print(f"wrote {Path(args.out) / 'gpu_check.json'}", file=sys.stderr)
    return 0 if rep["throughput_ok"] and rep["wall_ratio_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
