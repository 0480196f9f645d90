"""`capa eval`: play held-out sessions with the model under test and write a resumable run.

A run folder holds:
- config.json      what was run (model, engine settings, condition, selection, seed, versions)
- sessions.jsonl   one line per finished session: transcript, submissions with verdicts,
                   first-success turn, tokens, timings (appended as each session ends)
- cache.sqlite     the completion cache, so a killed run replays finished model calls
- summary.json / summary.md   ES, FT-ES and TTC with bootstrap 95% intervals
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runners.types import Sampling

from capa_hf.content import load_controls
from capa_hf.dataset.load import LoadedDataset, load_capa
from capa_hf.errors import CapaError
from capa_hf.evaluation.conditions import HISTORY_STOPS, get_condition
from capa_hf.evaluation.metrics import summarize
from capa_hf.evaluation.summary_md import summary_markdown
from capa_hf.prompts import prompt_text
from capa_hf.schema import Session
from capa_hf.simulator.episode import EpisodeSetup, session_episode
from capa_hf.simulator.judge import SandboxJudge
from capa_hf.simulator.users import scripted_user
from capa_hf.version import PIPELINE_VERSION

RESULTS = "sessions.jsonl"


@dataclass(frozen=True)
class EvalConfig:
    model: str
    condition: str
    dataset: str | None = None
    cells: tuple[str, ...] | None = None
    limit: int | None = None
    seed: int = 0
    max_turns: int = 8
    max_tokens: int = 768
    temperature: float = 0.0
    user: str = "scripted"

    def to_dict(self) -> dict:
        return {"stop": list(HISTORY_STOPS), "model": self.model, "condition": self.condition, "dataset": self.dataset,
                "cells": list(self.cells) if self.cells else None, "limit": self.limit, "seed": self.seed,
                "max_turns": self.max_turns, "max_tokens": self.max_tokens, "temperature": self.temperature,
                "user": self.user}


def select_targets(data: LoadedDataset, cells: tuple[str, ...] | None, limit: int | None) -> list[Session]:
    targets = sorted(data.heldout.values(), key=lambda s: (s.cell_id, s.position))
    if cells:
        known = {s.cell_id for s in targets}
        unknown = [c for c in cells if c not in known]
        if unknown:
            raise CapaError(f"unknown cell id(s) {unknown}; the dataset has {min(known)}..{max(known)}")
        targets = [s for s in targets if s.cell_id in set(cells)]
    if limit is not None:
        if limit < 1:
            raise CapaError(f"--limit must be >= 1, got {limit}")
        targets = targets[:limit]
    return targets


def read_done(path: Path) -> dict[str, dict]:
    """Finished sessions of an earlier, interrupted run. A torn last line is dropped."""
    done = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            done[rec["session_id"]] = rec
    return done


def prepare_out(out: Path, config: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    cfg_path = out / "config.json"
    if cfg_path.is_file():
        old = json.loads(cfg_path.read_text())
        if old.get("run") != config["run"]:
            raise CapaError(f"{out} holds a run with another config; use a new --out or delete it "
                            f"(differs in: {sorted(k for k in config['run'] if old.get('run', {}).get(k) != config['run'][k])})")
    cfg_path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


def _make_engine(spec: str):
    from runners import make_engine

    try:
        return make_engine(spec)
    except ValueError as exc:
        raise CapaError(f"--model {spec!r}: {exc}") from None


def run_eval(config: EvalConfig, out: Path, engine: Any = None, progress: bool = True,
             data: LoadedDataset | None = None) -> dict:
    """Run (or resume) an evaluation. `engine` overrides building one from `config.model`."""
    condition = get_condition(config.condition, seed=config.seed)
    data = data or load_capa(config.dataset)
    targets = select_targets(data, config.cells, config.limit)
    engine = engine or _make_engine(config.model)
    describe = engine.describe() if hasattr(engine, "describe") else {"engine": getattr(engine, "name", "?")}
    prepare_out(out, {"run": config.to_dict(), "engine": describe, "pipeline_version": PIPELINE_VERSION,
                      "dataset_source": data.source, "n_targets": len(targets)})
    results_path = out / RESULTS
    done = read_done(results_path)
    if results_path.is_file():  # drop a torn last line left by a killed run before appending
        results_path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in done.values()),
                                encoding="utf-8")
    todo = [t for t in targets if t.session_id not in done]
    contexts = condition.contexts(targets, data)
    controls = load_controls()
    base_prompt = prompt_text("assistant_system")
    sampling = Sampling(temperature=config.temperature, max_tokens=config.max_tokens, seed=config.seed,
                        stop=HISTORY_STOPS)
    from runners.cache import CompletionCache
    from runners.driver import run_episodes
    from runners.usage import RunStats

    stats = RunStats()
    t0 = time.perf_counter()
    with SandboxJudge() as judge, CompletionCache(str(out / "cache.sqlite")) as cache, \
            open(results_path, "a", encoding="utf-8") as fh:
        def factory(target: Session):
            ctx = contexts[target.session_id]
            system = base_prompt + ("\n\n" + ctx["text"] if ctx["text"] else "")
            kps = {k.id: k for k in data.contents[target.task_id].keypoints}
            user = scripted_user(target.session_id, target.hidden_items, kps,
                                 data.personas[target.persona_id], controls)
            setup = EpisodeSetup(session_id=target.session_id, task=data.tasks[target.task_id],
                                 initial_request=target.initial_request, system_prompt=system,
                                 max_turns=config.max_turns, sampling=sampling)
            return lambda: session_episode(setup, user, judge)

        meta = {t.session_id: t for t in todo}

        def on_done(sid: str, outcome) -> None:
            t = meta[sid]
            rec = {"session_id": sid, "cell_id": t.cell_id, "persona_id": t.persona_id,
                   "mechanisms": list(t.mechanisms), "task_id": t.task_id, "condition": config.condition,
                   "context_sources": contexts[sid]["sources"], "context_chars": len(contexts[sid]["text"])}
            if outcome.error:
                rec.update({"error": outcome.error, "submissions": [], "success_turn": None, "solved": False})
            else:
                rec.update(outcome.result)
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

        run_episodes([(t.session_id, factory(t)) for t in todo], engines={"assistant": engine},
                     cache=cache, progress=f"eval {config.condition}" if progress else False,
                     on_done=on_done, stats=stats)
        sandbox_info = judge.describe()
    wanted = {t.session_id for t in targets}
    records = [r for sid, r in read_done(results_path).items() if sid in wanted]
    summary = {"config": config.to_dict(), "n_sessions": len(records),
               "n_errors": sum(1 for r in records if r.get("error")),
               "wall_s": round(time.perf_counter() - t0, 2), "resumed": len(done),
               "usage": stats.to_dict(), "sandbox": sandbox_info,
               **summarize(records, max_turns=config.max_turns, seed=config.seed)}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    (out / "summary.md").write_text(summary_markdown(summary), encoding="utf-8")
    return summary


def eval_cli(args) -> int:
    config = EvalConfig(model=args.model, condition=args.condition, dataset=args.dataset,
                        cells=tuple(args.cells) if args.cells else None, limit=args.limit, seed=args.seed,
                        max_turns=args.max_turns, max_tokens=args.max_tokens, temperature=args.temperature,
                        user=args.user)
    if config.user != "scripted":
        raise CapaError(f"--user {config.user!r}: only the scripted simulated user ships offline")
    summary = run_eval(config, Path(args.out), progress=not args.no_progress)
    print(summary_markdown(summary))
    print(f"wrote {args.out}/summary.json and {args.out}/{RESULTS}", file=sys.stderr)
    return 0
