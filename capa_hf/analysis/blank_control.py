"""`capa blank-control --model SPEC --out RUN`: the 164 HumanEval tasks without ambiguity (paper
Table 6), as a configuration of `capa eval`.

The blank control is `capa eval` with the `humaneval` split (task source
evaluation/humaneval_source.py: each task's full original prompt as the request, no persona, no
hidden item, the sandbox on HumanEval's own tests with the prompt as trusted prelude), the
`blank-control` condition (no context) and the `debugger` user (simulator/debugger_user.py: it
answers a failing submission with the concrete failing check or error). The budget is the
evaluation's assistant turns (a reply without code counts as a turn); run folder, resume,
completion cache and engine-error handling are the run loop's. Records use the task id as
session id and `blank-control` as condition.
"""

from __future__ import annotations

from pathlib import Path

from capa_hf.defaults import BLANK_CONDITION, BLANK_SPLIT, BLANK_USER, JUDGE, MAX_ERROR_SHARE
from capa_hf.evaluation.config import EvalConfig


def blank_config(config: EvalConfig) -> EvalConfig:
    """`config` as the blank control: its split, condition and user; no dataset, cells or veto."""
    return config.replace(condition=BLANK_CONDITION, split=BLANK_SPLIT, dataset=None, revision=None, cells=None,
                          user=BLANK_USER, judge=JUDGE, judge_model=None, judge_engine_args={}, condition_args={})


def add_blank_arguments(p) -> None:
    """The flags of `capa blank-control`: defaults from EvalConfig's fields, as `capa eval`'s."""
    from capa_hf.evaluation.config import field_default as default

    p.add_argument("--model", default=None, help="runners engine spec, e.g. llamacpp, vllm:Qwen/Qwen3-8B; "
                                                 "or given by --preset (capa list engines)")
    p.add_argument("--preset", default=None, help="a model preset (capa_hf/data/presets.yaml; capa list presets)")
    p.add_argument("--engine-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="engine option, repeatable, typed: int, float, bool, JSON")
    p.add_argument("--max-tokens", type=int, default=None,
                   help=f"reply budget per turn (default: {default('max_tokens')}, unless a preset sets it)")
    p.add_argument("--temperature", type=float, default=None,
                   help=f"sampling temperature (default: {default('temperature')}, greedy, unless a preset sets it)")
    p.add_argument("--seed", type=int, default=default("seed"), help="the seed of the model's sampling")
    p.add_argument("--samples", type=int, default=default("samples"), help="independent trials per task (pass^k)")
    p.add_argument("--max-turns", type=int, default=default("max_turns"),
                   help="assistant turns per task; an unsolved task counts as this many")
    p.add_argument("--limit", type=int, default=default("limit"), help="only the first N tasks (default: all 164)")
    p.add_argument("--max-errors", type=int, default=default("max_errors"),
                   help=f"abort after more than this many tasks the engine cannot finish "
                        f"(default: {MAX_ERROR_SHARE:.0%} of the tasks, at least 1)".replace("%", "%%"))
    p.add_argument("--out", required=True, help="the run folder; a rerun with the same config resumes it")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.set_defaults(top_p=None, top_k=None, min_p=None, condition=BLANK_CONDITION, dataset=None, revision=None,
                   split=BLANK_SPLIT, cells=None, user=BLANK_USER)


def blank_control_cli(args) -> int:
    from capa_hf.evaluation.eval_cli import config_from_args
    from capa_hf.evaluation.run import run_eval
    from capa_hf.evaluation.summary_md import summary_markdown

    summary = run_eval(blank_config(config_from_args(args)), Path(args.out), progress=not args.no_progress)
    print(summary_markdown(summary))
    return 1 if summary.get("n_incomplete") else 0
