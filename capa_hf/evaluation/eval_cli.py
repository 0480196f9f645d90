"""The `capa eval` command line: options, presets, and what they resolve to."""

from __future__ import annotations

import sys
from pathlib import Path

from capa_hf.defaults import JUDGE
from capa_hf.errors import CapaError
from capa_hf.specs import llm_spec


def _doc(name: str, note: str = "") -> str:
    """A config field's description as help text (argparse formats help with %), with `note`."""
    from capa_hf.evaluation.config import field_doc

    return (field_doc(name) + note).replace("%", "%%")


def _preset_doc(name: str) -> str:
    """The help of a flag a preset may set: the flag's own default is None (not given), so the
    help names the config's default."""
    from capa_hf.evaluation.config import field_default

    return _doc(name, f" (default: {field_default(name)}, unless a preset sets it)")


def add_eval_arguments(e) -> None:
    """The flags of `capa eval`: a config field's flag takes its help and default from the field."""
    from capa_hf.evaluation.config import field_default as default

    e.add_argument("--model", "--engine", dest="model", default=None,
                   help=_doc("model", "; or given by --preset"))
    e.add_argument("--preset", default=None, help=_doc("preset", ", e.g. qwen3-8b-think"))
    e.add_argument("--engine-arg", action="append", default=[], metavar="KEY=VALUE",
                   help=_doc("engine_args", "; repeatable, typed: int, float, bool, JSON"))
    from capa_hf.evaluation.conditions import known_conditions
    from capa_hf.simulator.protocols import known_judges

    e.add_argument("--condition", default=default("condition"),
                   help=_doc("condition", f"; one of {' | '.join(known_conditions())}"))
    e.add_argument("--gate-model", default=None, metavar="SPEC",
                   help="gate condition: the gate's engine spec (condition option gate_model; "
                        "default: the model under test)")
    e.add_argument("--memory-llm", default=None, metavar="SPEC",
                   help="mem0/amem: openai:<model>@<url>, a URL, or llamacpp[:<model>] (condition option "
                        "memory_llm; default: the embedded model, served by llama.cpp's server for the run)")
    e.add_argument("--condition-arg", action="append", default=[], metavar="KEY=VALUE",
                   help=_doc("condition_args", "; repeatable, typed like --engine-arg"))
    e.add_argument("--dataset", default=default("dataset"), help=_doc("dataset"))
    e.add_argument("--revision", default=default("revision"), help=_doc("revision"))
    e.add_argument("--split", default=default("split"), help=_doc("split"))
    e.add_argument("--cells", nargs="*", default=default("cells"), help=_doc("cells"))
    e.add_argument("--limit", type=int, default=default("limit"), help=_doc("limit"))
    e.add_argument("--seed", type=int, default=default("seed"), help=_doc("seed"))
    e.add_argument("--samples", type=int, default=default("samples"), help=_doc("samples"))
    e.add_argument("--max-turns", type=int, default=default("max_turns"), help=_doc("max_turns"))
    e.add_argument("--max-tokens", type=int, default=None, help=_preset_doc("max_tokens"))
    e.add_argument("--temperature", type=float, default=None, help=_preset_doc("temperature"))
    e.add_argument("--top-p", type=float, default=None, help=_doc("top_p"))
    e.add_argument("--top-k", type=int, default=None, help=_doc("top_k"))
    e.add_argument("--min-p", type=float, default=None, help=_doc("min_p"))
    e.add_argument("--max-errors", type=int, default=default("max_errors"), help=_doc("max_errors"))
    e.add_argument("--user", default=default("user"), help=_doc("user"))
    e.add_argument("--user-engine-arg", action="append", default=[], metavar="KEY=VALUE",
                   help=_doc("user_engine_args", "; repeatable, typed like --engine-arg"))
    e.add_argument("--judge", default=default("judge"),
                   help=_doc("judge", f"; one of {', '.join(known_judges())}"))
    e.add_argument("--judge-model", default=default("judge_model"), metavar="SPEC",
                   help=_doc("judge_model", " (--judge veto:sandbox)"))
    e.add_argument("--judge-engine-arg", "--veto-engine-arg", dest="judge_engine_arg", action="append", default=[],
                   metavar="KEY=VALUE", help=_doc("judge_engine_args", "; repeatable, typed like --engine-arg"))
    e.add_argument("--veto", default=None, metavar="llm:SPEC",
                   help="the same as --judge veto:<judge> --judge-model SPEC: after a pass, an LLM compares the "
                        "code with the reference and may veto the pass (never grant one)")
    e.add_argument("--difficulty", default=None, metavar="FILE",
                   help="difficulty labels (capa label-difficulty): recorded in config.json, grouped in the summary")
    e.add_argument("--rescore", default=None, metavar="RUN",
                   help="re-extract and re-judge the recorded replies of the finished run RUN with the current "
                        "rule and sandbox, without calling any model; writes the run --out")
    e.add_argument("--out", required=True, help="the run folder: config.json, sessions.jsonl, summary.json and "
                                                "summary.md; a rerun with the same config resumes it")
    e.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def add_run_folder_arguments(e) -> None:
    """How `capa eval` treats its dataset and an earlier run in --out (not part of the run's config)."""
    e.add_argument("--allow-modified", action="store_true",
                   help="run on a local dataset whose files differ from its capa_manifest.json (refused by "
                        "default); config.json records the hash of the files as they are")
    e.add_argument("--overwrite", action="store_true",
                   help="delete the run already in --out and start over (by default a rerun resumes it)")


def config_from_args(args):
    """An EvalConfig from the parsed flags: explicit flags > preset > defaults."""
    from runners.options import parse_engine_args

    from capa_hf.evaluation.config import EvalConfig
    from capa_hf.presets import apply_preset, resolve_preset

    parsed = {}
    for flag in ("engine_arg", "user_engine_arg", "judge_engine_arg"):
        try:
            parsed[flag] = parse_engine_args(getattr(args, flag, None) or [])
        except ValueError as exc:
            raise CapaError(f"--{flag.replace('_', '-')}: {exc}") from None
    engine_args = parsed["engine_arg"]
    preset = resolve_preset(args.preset) if args.preset else None
    resolved = apply_preset(preset, model=args.model, engine_args=engine_args,
                            sampling={"temperature": args.temperature, "top_p": args.top_p, "top_k": args.top_k,
                                      "min_p": args.min_p}, max_tokens=args.max_tokens)
    if not resolved.model:
        raise CapaError("--model is required (or a --preset that names one)")
    s = resolved.sampling
    judge, judge_model = judge_from_args(args)
    # a value neither the flags nor the preset set is left to the config's default
    given = {k: v for k, v in (("max_tokens", resolved.max_tokens), ("temperature", s.get("temperature")))
             if v is not None}
    config = EvalConfig(model=resolved.model, condition=args.condition, condition_args=condition_args_from(args),
                        dataset=args.dataset, revision=args.revision,
                        split=args.split, cells=tuple(args.cells) if args.cells else None, limit=args.limit,
                        seed=args.seed, samples=args.samples, max_turns=args.max_turns, **given,
                        top_p=s.get("top_p"), top_k=s.get("top_k"), min_p=s.get("min_p"), user=args.user,
                        user_engine_args=parsed["user_engine_arg"], judge=judge,
                        judge_model=judge_model, judge_engine_args=parsed["judge_engine_arg"],
                        engine_args=dict(resolved.engine),
                        preset=resolved.preset, max_errors=args.max_errors)
    if preset is not None:         # everything the preset sets, then what the flags changed
        for line in preset.describe_lines() + resolved.describe_lines():
            print(line, file=sys.stderr)
    return config


def judge_from_args(args) -> tuple[str, str | None]:
    """The judge spec and its model: --judge and --judge-model, or --veto llm:SPEC, which is
    --judge veto:<--judge> --judge-model SPEC (a --judge that is already a veto is kept)."""
    from capa_hf.simulator.protocols import judge_engine_role, judge_spec

    judge, model, veto = getattr(args, "judge", JUDGE), getattr(args, "judge_model", None), getattr(args, "veto", None)
    if veto is not None:
        if model is not None:
            raise CapaError("--veto llm:SPEC is --judge veto:<judge> --judge-model SPEC; give --veto or --judge-model, "
                            "not both")
        model = llm_spec("--veto", veto)
        if judge_engine_role(judge) != "veto":
            judge = f"veto:{judge}"
    return judge_spec(judge), model


def condition_args_from(args) -> dict:
    """--condition-arg KEY=VALUE pairs, with --gate-model and --memory-llm as gate_model and memory_llm."""
    from runners.options import parse_engine_args

    try:
        out = parse_engine_args(getattr(args, "condition_arg", None) or [])
    except ValueError as exc:
        raise CapaError(f"--condition-arg: {exc}") from None
    for flag, key in (("gate_model", "gate_model"), ("memory_llm", "memory_llm")):
        if getattr(args, flag, None):
            out[key] = getattr(args, flag)
    return out


def eval_cli(args) -> int:
    from capa_hf.evaluation.records import RESULTS
    from capa_hf.evaluation.run import run_eval
    from capa_hf.evaluation.summary_md import summary_markdown

    if getattr(args, "rescore", None):
        from capa_hf.evaluation.rescore import rescore_cli

        return rescore_cli(args)
    config = config_from_args(args)
    labels = None
    if getattr(args, "difficulty", None):
        from capa_hf.evaluation.difficulty_labels import read_labels

        labels = read_labels(args.difficulty)
    summary = run_eval(config, Path(args.out), progress=not args.no_progress, difficulty=labels,
                       allow_modified=getattr(args, "allow_modified", False),
                       overwrite=getattr(args, "overwrite", False))
    print(summary_markdown(summary))
    print(f"wrote {args.out}/summary.json and {args.out}/{RESULTS}", file=sys.stderr)
    return 1 if summary.get("n_incomplete") else 0
