"""`capa eval`: pick a run's targets, cast their episodes, and hand them to the run loop.

A run folder holds:
- config.json      what was run (model, engine settings, condition, selection, seed), on what
                   (dataset version, the manifest hash computed from its files, whether they match
                   the build's), and how (`provenance`: times, command line, git commit, versions)
- sessions.jsonl   one line per finished session and trial: transcript, submissions with
                   verdicts, first-success turn, tokens, timings (appended as each one ends);
                   `incomplete: true` lines are engine failures, retried by a rerun
- cache.sqlite     the completion cache, so a killed run replays finished model calls
- summary.json / summary.md   ES, FT-ES and TTC with bootstrap 95% intervals

The sessions come from the task source that offers `--split` (evaluation/sources.py), their
context from the condition, the user and the judge from their registries; resume, cache, error
budget, records and summary are the run loop's (evaluation/runner.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runners.engine import describe_engine

from capa_hf.errors import CapaError
from capa_hf.evaluation.conditions import ConditionEnv, check_condition_options, get_condition
from capa_hf.evaluation.config import EvalConfig
from capa_hf.evaluation.metrics import metric_block
from capa_hf.evaluation.provenance import dataset_check, run_provenance
from capa_hf.evaluation.runner import TooManyErrors, build_engine, run_sessions, sampling_for
from capa_hf.evaluation.sources import source_for_split
from capa_hf.paths import DEFAULT_DATASET_DIR
from capa_hf.prompts import prompt_text
from capa_hf.schema.record import SessionRecord
from capa_hf.specs import llm_spec
from capa_hf.simulator.cast import cast_episode
from capa_hf.simulator.protocols import build_judge, judge_engine_role, judge_factory, judge_spec, user_factory
from capa_hf.version import PIPELINE_VERSION

__all__ = ["EvalConfig", "TooManyErrors", "run_eval"]


def user_engine_role(config: EvalConfig) -> str | None:
    """The driver role of the simulated user's own engine, when its factory declares one."""
    return getattr(user_factory(config.user), "engine_role", None)


def role_engines(config: EvalConfig, skip: set[str] = frozenset()) -> dict:
    """Engines for the other model roles of an episode: the simulated user's and the judge's, when
    their factories declare an engine role (the LLM user: `user`; the veto: `veto`). Each is its
    own engine, batched by the driver in its own role."""
    out = {}
    role = user_engine_role(config)
    if role and role not in skip:
        out[role] = build_engine(llm_spec("--user", config.user), dict(config.user_engine_args), "--user")
    role = judge_engine_role(config.judge)
    if role and role not in skip:
        out[role] = build_engine(config.judge_model, dict(config.judge_engine_args), "--judge-model")
    return out


def user_options(config: EvalConfig) -> dict:
    """What the simulated user's factory gets besides the session brief."""
    role = user_engine_role(config)
    return {"role": role, "seed": config.seed} if role else {}


def check_judge(config: EvalConfig) -> None:
    """A judge that asks a model has one (--judge-model), and only such a judge has one."""
    spec = judge_spec(config.judge)
    if judge_engine_role(spec) and not config.judge_model:
        raise CapaError(f"--judge {config.judge}: this judge asks a model; give --judge-model <engine spec> "
                        "(or --veto llm:<engine spec>)")
    if config.judge_model and not judge_engine_role(spec):
        raise CapaError(f"--judge-model {config.judge_model}: the judge {config.judge!r} asks no model "
                        "(a veto is --judge veto:sandbox)")


def model_engine(config: EvalConfig, data: Any):
    """The engine under test: a runners engine, or a reference policy (`reference:asker`, no model)."""
    from capa_hf.evaluation.reference_policy import is_reference, reference_engine

    if is_reference(config.model):
        return reference_engine(config.model, data, dict(config.engine_args))
    return build_engine(config.model, dict(config.engine_args))


def run_config(config: EvalConfig, engine: Any, identity: dict, n_targets: int,
               difficulty: dict | None = None) -> dict:
    return {"run": config.to_dict(), "engine": describe_engine(engine), "pipeline_version": PIPELINE_VERSION,
            **identity, "n_targets": n_targets, **({"difficulty": difficulty} if difficulty else {})}


def run_eval(config: EvalConfig, out: Path, engine: Any = None, progress: bool = True,
             data: Any = None, difficulty: dict | None = None,
             role_engine_overrides: dict | None = None, allow_modified: bool = False,
             overwrite: bool = False) -> dict:
    """Run (or resume) an evaluation. `engine` overrides building one from `config.model`; `data`
    a dataset already loaded for the task source; `difficulty` (a `capa label-difficulty` labels
    file) is recorded in config.json and the summary groups by it; `role_engine_overrides`
    ({"user": ..., "veto": ...}) the engines of the other roles (an engine object shared by several
    roles is batched once). A local dataset that differs from its manifest is refused unless
    `allow_modified`; `overwrite` deletes an earlier run in `out` first."""
    user_factory(config.user)                      # refuses an unknown user before any work
    if user_engine_role(config):
        llm_spec("--user", config.user)
    check_judge(config)
    condition = get_condition(config.condition, seed=config.seed)
    check_condition_options(config.condition, config.condition_args)
    source_cls = source_for_split(config.split)
    # the dataset's files against its manifest, before loading it (a source that reads --dataset says so)
    checked = dataset_check(config.dataset or str(DEFAULT_DATASET_DIR), allow_modified) \
        if data is None and getattr(source_cls, "reads_dataset", False) else None
    source = source_cls(config, data=data)
    targets = source.targets()
    if checked is None:
        checked = dataset_check(getattr(source.data, "source", None), allow_modified)
    identity = {**source.identity(), **checked}
    if difficulty is not None:
        from capa_hf.evaluation.difficulty_labels import check_labels_match

        check_labels_match(difficulty, identity["dataset_version"], identity["dataset_manifest_sha256"],
                           f"dataset {identity['dataset_source']}")
    judge = build_judge(config.judge, seed=config.seed)
    engine = engine or model_engine(config, source.data)
    overrides = dict(role_engine_overrides or {})
    engines = {"assistant": engine, **role_engines(config, skip=set(overrides)), **overrides}
    base_prompt = prompt_text("assistant_system")
    sampling = sampling_for(config)
    options = user_options(config)

    def contexts(cache):
        env = ConditionEnv(out=out, cache=cache, assistant=engine, make_engine=build_engine, seed=config.seed,
                           progress=progress, options=dict(config.condition_args))
        return condition.contexts([t.session if t.session is not None else t for t in targets], source.data, env)

    def system_prompt(context: dict) -> str:
        return base_prompt + ("\n\n" + context["text"] if context["text"] else "")

    def make_episode(target, trial: int, context: dict):
        return cast_episode(target.brief, target.problem, target.initial_request, system_prompt(context), judge,
                            sampling=sampling, user=config.user, user_options=options,
                            max_turns=config.max_turns, trial=trial, affinity=target.affinity)

    info = {**run_config(config, engine, identity, len(targets), difficulty),
            "provenance": run_provenance([config.model, config.user, config.judge_model])}
    return run_sessions(out, config, targets, make_episode, run_info=info, engines=engines, judge=judge,
                        contexts=contexts, system_prompt=system_prompt, progress=progress, difficulty=difficulty,
                        summary_extra=lambda scored, latest: part_counts(config, condition, scored, latest),
                        overwrite=overwrite)


def part_counts(config: EvalConfig, condition: Any, scored: list[SessionRecord], latest: list[SessionRecord]) -> dict:
    """The counts the run's parts declare: the simulated user's (the LLM user's fallbacks per 100
    turns), the judge's (`summary_counts(scored, score)`, `score` giving ES, FT-ES and TTC of
    records: the veto's counts and reasons, scored with and without the vetoes), and the
    condition's (`condition_stats`: the gate's verdicts, a memory system's counts), over every
    record, incomplete ones included."""
    out: dict = dict(getattr(user_factory(config.user), "summary_counts", lambda scored: {})(scored))
    judge_counts = getattr(judge_factory(config.judge), "summary_counts", None)
    if judge_counts:
        out.update(judge_counts(scored, lambda records: metric_block(records, config.max_turns, seed=config.seed)))
    counts = getattr(condition, "summary_counts", lambda records: {})(latest)
    if counts:
        out["condition_stats"] = counts
    return out
