"""`capa eval`: play sessions with the model under test and write a resumable run.

A run folder holds:
- config.json      what was run (model, engine settings, condition, selection, seed, dataset
                   version and manifest hash, versions)
- sessions.jsonl   one line per finished session and trial: transcript, submissions with
                   verdicts, first-success turn, tokens, timings (appended as each one ends);
                   `incomplete: true` lines are engine failures, retried by a rerun
- cache.sqlite     the completion cache, so a killed run replays finished model calls
- summary.json / summary.md   ES, FT-ES and TTC with bootstrap 95% intervals
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from runners.engine import EngineError
from runners.types import Sampling

from capa_hf.content import load_user_lines
from capa_hf.dataset.load import LoadedDataset, load_capa
from capa_hf.defaults import STOP_AFTER_FENCE
from capa_hf.errors import CapaError
from capa_hf.evaluation.conditions import HISTORY_STOPS, ConditionEnv, get_condition
from capa_hf.evaluation.config import EvalConfig
from capa_hf.evaluation.metrics import summarize
from capa_hf.evaluation.records import (RESULTS, append, complete, outcome_record, prepare_out, read_records,
                                        record_key, rewrite, store_contexts)
from capa_hf.evaluation.summary_md import summary_markdown
from capa_hf.prompts import prompt_text
from capa_hf.schema import Session
from capa_hf.simulator.cast import cast_episode
from capa_hf.simulator.protocols import judge_factory, user_factory
from capa_hf.simulator.users import UserBrief
from capa_hf.version import PIPELINE_VERSION

MAX_ERROR_SHARE = 0.05


class TooManyErrors(CapaError):
    """The engine failed on more sessions than --max-errors allows."""


def select_targets(data: LoadedDataset, cells: tuple[str, ...] | None, limit: int | None,
                   split: str = "heldout") -> list[Session]:
    if split not in ("heldout", "history"):
        raise CapaError(f"--split {split!r}: expected heldout or history")
    pool = data.heldout if split == "heldout" else data.history
    targets = sorted(pool.values(), key=lambda s: (s.cell_id, s.position))
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


def _make_engine(spec: str, options: dict):
    from runners import make_engine

    try:
        return make_engine(spec, **options)
    except (ValueError, TypeError) as exc:
        hint = ("; for a first run without a model, try --model reference:asker"
                if spec.strip() == "scripted" else "")
        raise CapaError(f"--model {spec!r}: {exc}{hint}") from None


def model_engine(config: EvalConfig, data: LoadedDataset):
    """The engine under test: a runners engine, or a reference policy (`reference:asker`, no model)."""
    from capa_hf.evaluation.reference_policy import is_reference, reference_engine

    if is_reference(config.model):
        return reference_engine(config.model, data, dict(config.engine_args))
    return _make_engine(config.model, dict(config.engine_args))


def brief(target: Session, data: LoadedDataset, user_lines: dict) -> UserBrief:
    return UserBrief(session_id=target.session_id, hidden_items=target.hidden_items,
                     keypoints={k.id: k for k in data.contents[target.task_id].keypoints},
                     dimensions=data.dimensions, persona=data.personas[target.persona_id], user_lines=user_lines,
                     reference=data.problem(target).reference, task_prompt=data.tasks[target.task_id].prompt,
                     initial_request=target.initial_request)


def session_facts(t: Session, config: EvalConfig, context: dict) -> dict:
    """What a record carries besides the episode: who, what, and which context it saw."""
    return {"session_id": t.session_id, "cell_id": t.cell_id, "persona_id": t.persona_id,
            "mechanisms": list(t.mechanisms), "task_id": t.task_id, "role": t.role,
            "item_kinds": sorted({h.kind for h in t.hidden_items}),
            "fully_resolvable": all(h.resolvable_from_history for h in t.hidden_items),
            "condition": config.condition, "context_sources": context["sources"],
            "context_chars": len(context["text"]),
            **{k: v for k, v in context.items() if k not in ("text", "sources")}}


def role_engines(config: EvalConfig, skip: set[str] = frozenset()) -> dict:
    """Engines for the other model roles of an episode: an LLM simulated user (`user`), an LLM
    veto (`veto`). Each is its own engine, batched by the driver in its own role."""
    out = {}
    if config.user.startswith("llm:") and "user" not in skip:
        out["user"] = _make_engine(config.user[4:], dict(config.user_engine_args))
    if config.veto and not config.veto.startswith("llm:"):
        raise CapaError(f"--veto {config.veto!r}: expected llm:<engine spec>")
    if config.veto and "veto" not in skip:
        out["veto"] = _make_engine(config.veto[4:], dict(config.veto_engine_args))
    return out


def user_options(config: EvalConfig) -> dict:
    """What the simulated user's factory gets besides the session brief."""
    return {"role": "user", "seed": config.seed} if config.user.startswith("llm:") else {}


def make_judge(config: EvalConfig):
    """The configured judge, wrapped by the LLM veto when `config.veto` is set."""
    judge = judge_factory(config.judge)()
    if config.veto:
        from capa_hf.simulator.veto import VetoJudge

        judge = VetoJudge(judge, seed=config.seed)
    return judge


def run_config(config: EvalConfig, engine: Any, data: LoadedDataset, n_targets: int,
               difficulty: dict | None = None) -> dict:
    describe = engine.describe() if hasattr(engine, "describe") else {"engine": getattr(engine, "name", "?")}
    return {"run": config.to_dict(), "engine": describe, "pipeline_version": PIPELINE_VERSION,
            "dataset_source": data.source, "dataset_version": data.version,
            "dataset_manifest_sha256": data.manifest_sha256, "n_targets": n_targets,
            **({"difficulty": difficulty} if difficulty else {})}


def run_eval(config: EvalConfig, out: Path, engine: Any = None, progress: bool = True,
             data: LoadedDataset | None = None, difficulty: dict | None = None,
             role_engine_overrides: dict | None = None) -> dict:
    """Run (or resume) an evaluation. `engine` overrides building one from `config.model`;
    `difficulty` (a `capa label-difficulty` labels file) is recorded in config.json and the
    summary groups by it;
    `role_engine_overrides` ({"user": ..., "veto": ...}) the engines of the other roles (an
    engine object shared by several roles is batched once)."""
    if config.samples < 1:
        raise CapaError(f"--samples must be >= 1, got {config.samples}")
    user_factory(config.user)                      # refuses an unknown user before any work
    for flag, value in (("--user", config.user), ("--veto", config.veto or "")):
        if value.split(":", 1)[0] == "llm" and not value[4:].strip():
            raise CapaError(f"{flag} {value!r}: expected llm:<engine spec>, e.g. llm:llamacpp")
    if config.veto and not config.veto.startswith("llm:"):
        raise CapaError(f"--veto {config.veto!r}: expected llm:<engine spec>")
    judge = make_judge(config)
    condition = get_condition(config.condition, seed=config.seed)
    data = data or load_capa(config.dataset, revision=config.revision)
    targets = select_targets(data, config.cells, config.limit, config.split)
    if difficulty is not None:
        from capa_hf.analysis.difficulty import check_labels_match

        check_labels_match(difficulty, data.version, data.manifest_sha256, f"dataset {data.source}")
    engine = engine or model_engine(config, data)
    prepare_out(out, run_config(config, engine, data, len(targets), difficulty))
    results_path = out / RESULTS
    earlier = read_records(results_path)
    if results_path.is_file():
        rewrite(results_path, earlier)
    done = complete(earlier)
    user_lines = load_user_lines()
    base_prompt = prompt_text("assistant_system")
    sampling = Sampling(temperature=config.temperature, max_tokens=config.max_tokens, seed=config.seed,
                        stop=HISTORY_STOPS, stop_after_fence=STOP_AFTER_FENCE)
    sampling = _extra_sampling(sampling, config)
    jobs = [(t, trial) for t in targets for trial in range(config.samples)
            if f"{t.session_id}#{trial}" not in done]
    budget = config.max_errors if config.max_errors is not None else max(1, math.ceil(MAX_ERROR_SHARE * len(jobs)))

    from runners.cache import CompletionCache
    from runners.driver import run_episodes
    from runners.usage import RunStats

    stats = RunStats()
    t0 = time.perf_counter()
    incomplete = []
    meta = {f"{t.session_id}#{trial}": (t, trial) for t, trial in jobs}
    overrides = dict(role_engine_overrides or {})
    engines = {"assistant": engine, **role_engines(config, skip=set(overrides)), **overrides}
    try:
        with CompletionCache(str(out / "cache.sqlite")) as cache, open(results_path, "a", encoding="utf-8") as fh:
            env = ConditionEnv(out=out, cache=cache, assistant=engine, make_engine=_make_engine, seed=config.seed,
                               progress=progress, options=dict(config.condition_args))
            contexts = condition.contexts(targets, data, env)
            systems = {t.session_id: base_prompt + ("\n\n" + contexts[t.session_id]["text"]
                                                    if contexts[t.session_id]["text"] else "") for t in targets}
            digests = store_contexts(out, systems.values())      # what the model saw, once per text

            def factory(target: Session, trial: int):
                return cast_episode(brief(target, data, user_lines), data.problem(target), target.initial_request,
                                    systems[target.session_id], judge, sampling=sampling, user=config.user,
                                    user_options=user_options(config), max_turns=config.max_turns,
                                    trial=trial, affinity=target.cell_id)

            def on_done(key: str, outcome) -> None:
                t, trial = meta[key]
                facts = {**session_facts(t, config, contexts[t.session_id]),
                         "context_sha256": digests[systems[t.session_id]]}
                rec = outcome_record(facts, outcome, trial)
                append(fh, rec)
                if rec.get("incomplete"):
                    incomplete.append(rec)
                    if len(incomplete) > budget:
                        raise TooManyErrors(f"{len(incomplete)} sessions could not be finished by the engine "
                                            f"(limit --max-errors {budget}); last error: "
                                            f"{_error_text(rec)[:300]}. Finished sessions are saved in {results_path}; "
                                            "rerun the same command to retry the rest.")

            try:
                run_episodes([(f"{t.session_id}#{trial}", factory(t, trial)) for t, trial in jobs],
                             engines=engines, cache=cache, abort_on_failed_batch=True,
                             progress=f"eval {config.condition}" if progress else False, on_done=on_done,
                             stats=stats)
            except EngineError as exc:
                raise CapaError(f"{config.model}: {exc}. Finished sessions are saved in {results_path}; "
                                "rerun the same command once the engine serves requests again.") from None
    finally:
        sandbox_info = judge.describe()
        judge.close()
    return write_summary(out, config, targets, stats, time.perf_counter() - t0, len(done), sandbox_info,
                         difficulty)


def _extra_sampling(sampling: Sampling, config: EvalConfig) -> Sampling:
    """top_p / top_k / min_p when set (None leaves them to the model's generation config)."""
    extra = {k: getattr(config, k) for k in ("top_p", "top_k", "min_p") if getattr(config, k) is not None}
    if not extra:
        return sampling
    try:
        return replace(sampling, **extra)
    except TypeError as exc:
        raise CapaError(f"this runners version does not take {sorted(extra)}: {exc}") from None


def _error_text(rec: dict) -> str:
    err = rec.get("error") or {}
    text = str(err.get("error") if isinstance(err, dict) else err)
    if text.startswith("Traceback"):   # an episode that raised: its last line says what happened
        lines = [line for line in text.strip().splitlines() if line.strip()]
        text = lines[-1] if lines else text
    return text


def write_summary(out: Path, config: EvalConfig, targets: list[Session], stats, wall_s: float, resumed: int,
                  sandbox_info, difficulty: dict | None = None) -> dict:
    import json

    wanted = {f"{t.session_id}#{k}" for t in targets for k in range(config.samples)}
    latest = {k: r for k, r in read_records(out / RESULTS).items() if k in wanted}
    scored = [r for r in latest.values() if not r.get("incomplete")]
    broken = [r for r in latest.values() if r.get("incomplete")]
    if difficulty:   # the labels annotate the records in memory: sessions.jsonl stays as played
        scored = [{**r, "difficulty": difficulty["labels"].get(r["session_id"])} for r in scored]
    summary = {"config": config.to_dict(), "n_sessions": len(scored), "n_incomplete": len(broken),
               "incomplete": [{"session": record_key(r), "error": _error_text(r)[:300]} for r in broken],
               "wall_s": round(wall_s, 2), "resumed": resumed, "usage": stats.to_dict(), "sandbox": sandbox_info,
               **({"difficulty_source": difficulty["source"]} if difficulty else {}),
               **summarize(scored, max_turns=config.max_turns, seed=config.seed), **llm_role_summary(config, scored)}
    from capa_hf.evaluation.conditions.stats import condition_stats

    counts = condition_stats(list(latest.values()))      # the gate's verdicts, a memory system's counts
    if counts:
        summary["condition_stats"] = counts
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    (out / "summary.md").write_text(summary_markdown(summary), encoding="utf-8")
    return summary


def llm_role_summary(config: EvalConfig, scored: list[dict]) -> dict:
    """The LLM user's fallbacks per 100 turns; the veto's counts and reasons, with ES, FT-ES and
    TTC as scored (vetoes count as fails) and as they would be without the vetoes."""
    out: dict = {}
    if config.user.startswith("llm:"):
        from capa_hf.simulator.llm_user import fallback_counts

        out["llm_user"] = fallback_counts(scored)
    if config.veto:
        from capa_hf.evaluation.metrics import metric_block
        from capa_hf.simulator.veto import veto_counts, without_vetoes

        out["veto"] = {**veto_counts(scored),
                       "with_vetoes": metric_block(scored, config.max_turns, seed=config.seed),
                       "without_vetoes": metric_block(without_vetoes(scored), config.max_turns, seed=config.seed)}
    return out
