"""The `capa` command line. Each subcommand is a thin edge over a pure module."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from capa_hf.defaults import DATASET_OUT, EXTRACTION_MAX_TOKENS, HISTORY_SIZE
from capa_hf.errors import CapaError


def _cmd_design(args) -> int:
    from capa_hf.content import load_content
    from capa_hf.design import default_design, design_stats, task_dimensions
    from capa_hf.humaneval import load_tasks

    cells = default_design(seed=args.seed)
    if args.json:
        print(json.dumps([c.model_dump() for c in cells], indent=1))
        return 0
    short = {"learn": "L", "reuse": "R", "convention_only": "C", "mixed": "M"}
    print(f"{'cell':4}  {'persona':7}  {'mechanism pair':45}  tasks (1-5 history | 6-10 held-out), roles")
    for c in cells:
        nums = [t.split("/")[1] for t in c.task_ids]
        pair = " + ".join(c.mechanisms)
        roles = "".join(short[r] for r in c.roles)
        print(f"{c.cell_id:4}  {c.persona_id:7}  {pair:45}  {' '.join(nums[:HISTORY_SIZE])} | {' '.join(nums[HISTORY_SIZE:])}  {roles}")
    stats = design_stats(cells, task_dimensions(load_content(), list(load_tasks())))
    print("roles: L learn, R reuse (history); C convention only, M mixed (held-out)")
    print(", ".join(f"{k.replace('_', ' ')} {v}" for k, v in stats.items()))
    return 0


def _cmd_validate_content(args) -> int:
    from capa_hf.validate_content import main as validate_main

    return validate_main(strict=not args.allow_missing, sandbox=not args.no_sandbox, tasks=args.tasks)


def _cmd_regen_tests(args) -> int:
    from capa_hf.variants.commands import regen_tests

    return regen_tests(args.tasks, check=args.check)


def _cmd_regen_ties(args) -> int:
    from capa_hf.variants.commands import regen_ties

    return regen_ties(args.tasks, check=args.check)


def _cmd_build(args) -> int:
    from capa_hf.dataset.build import build_cli

    return build_cli(args)


def _cmd_extract_keypoints(args) -> int:
    from capa_hf.keypoint_extraction import extract_cli

    return extract_cli(args)


def _cmd_validate(args) -> int:
    from capa_hf.dataset.validate import validate_folder

    report = validate_folder(Path(args.path))
    print(report.summary())
    return 0 if report.ok else 1


def _cmd_publish(args) -> int:
    from capa_hf.dataset.publish import publish

    publish(Path(args.path), repo_id=args.repo_id, version=args.version, private=args.private)
    return 0


def _cmd_eval(args) -> int:
    from capa_hf.evaluation.eval_cli import eval_cli

    return eval_cli(args)


def _cmd_report(args) -> int:
    from capa_hf.analysis.report import report_cli

    return report_cli(args)


def _cmd_label_difficulty(args) -> int:
    from capa_hf.analysis.difficulty import labels_from_run
    from capa_hf.evaluation.difficulty_labels import counts_line, write_labels

    labels = labels_from_run(args.run)
    path = write_labels(labels, args.out)
    print(f"{counts_line(labels)}; from {args.run} ({labels['source']['model']}, config "
          f"{labels['source']['config_hash'][:12]})")
    print(f"wrote {path}", file=sys.stderr)
    return 0


def _cmd_blank_control(args) -> int:
    from capa_hf.analysis.blank_control import blank_control_cli

    return blank_control_cli(args)


def _cmd_view(args) -> int:
    from capa_hf.view import view_cli

    return view_cli(args)


def _cmd_list(args) -> int:
    from capa_hf.listing import list_lines

    print("\n".join(list_lines(args.what)))
    return 0


def shown_default(action: argparse.Action) -> bool:
    """Whether `--help` should show an option's default: a value, not "not given" (None, an
    off switch, an empty list)."""
    d = action.default
    return not (d is None or d is False or d is argparse.SUPPRESS or (isinstance(d, (list, tuple)) and not d))


class DefaultsFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default, unless the help already says what it is."""

    def _get_help_string(self, action):
        text = action.help or ""
        if not shown_default(action) or "default" in text:
            return text
        return f"{text} (default: %(default)s)"


class CapaParser(argparse.ArgumentParser):
    """No abbreviated options (`--engine` is never taken for `--engine-arg`), help that shows
    each default, and a usage error in one line that names the command, then exit 2."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", DefaultsFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from capa_hf.version import PIPELINE_VERSION

    p = CapaParser(prog="capa", description="CAPA benchmark: build, evaluate, report.")
    p.add_argument("--version", action="version", version=f"capa {_package_version()} (dataset {PIPELINE_VERSION})")
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("design", help="print the balanced 60-cell design")
    d.add_argument("--seed", type=int, default=0, help="the seed of the design's assignment of tasks to cells")
    d.add_argument("--json", action="store_true", help="print the cells as JSON")
    d.set_defaults(func=_cmd_design)

    v = sub.add_parser("validate-content", help="check the curated keypoints, personas and lexicons")
    v.add_argument("--allow-missing", action="store_true", help="do not require all 164 tasks")
    v.add_argument("--no-sandbox", action="store_true",
                   help="skip running variants, references and misreadings in the sandbox")
    v.add_argument("--tasks", nargs="*", default=None,
                   help="run the sandbox checks only for these task ids or numbers")
    v.set_defaults(func=_cmd_validate_content)

    rg = sub.add_parser("regen-tests", help="regenerate the variant tests by differential execution (sandbox)")
    rg.add_argument("--tasks", nargs="*", default=None, help="task ids or numbers (default: all with variants)")
    rg.add_argument("--check", action="store_true", help="only check that the committed tests are current")
    rg.set_defaults(func=_cmd_regen_tests)

    rt = sub.add_parser("regen-ties", help="record which hidden items each variant-test line tells apart (sandbox)")
    rt.add_argument("--tasks", nargs="*", default=None, help="task ids or numbers (default: all with variants)")
    rt.add_argument("--check", action="store_true", help="only check that the committed ties are current")
    rt.set_defaults(func=_cmd_regen_ties)

    b = sub.add_parser("build", help="build the dataset (Stages 1-3) into a folder")
    b.add_argument("--out", default=DATASET_OUT, help="the folder the dataset is written to")
    b.add_argument("--seed", type=int, default=0, help="the seed of the design and of every stage")
    b.add_argument("--version", default=None, help="dataset version (default: the pipeline version)")
    b.add_argument("--assistant", default=None,
                   help="runners engine spec that plays the assistant in Stage 2 (default: reference)")
    b.add_argument("--assistant-engine-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="option of the --assistant engine, repeatable, typed (e.g. tensor_parallel_size=4)")
    b.add_argument("--realizer", default=None, help="llm:<engine spec>: a model writes the Stage 1 requests "
                                                    "(default: the template realizer)")
    b.add_argument("--consistency", default=None, help="llm:<engine spec>: a model checks each trace against its "
                                                       "cell and the cell's previous trace (Stage 3)")
    b.add_argument("--cache", default=None, help="completion cache for the build's engines (sqlite path)")
    b.add_argument("--quiet", action="store_true", help="no progress on stderr")
    b.set_defaults(func=_cmd_build)

    x = sub.add_parser("extract-keypoints", help="draft keypoint YAML for new tasks with a model, validated")
    x.add_argument("--model", "--engine", dest="engine", required=True,
                   help="runners engine spec, e.g. vllm:Qwen/Qwen3-8B or llamacpp (--engine is the older name)")
    x.add_argument("--engine-arg", action="append", default=[], metavar="KEY=VALUE", help="engine option, repeatable")
    x.add_argument("--source", required=True, help="JSONL of tasks: task_id, prompt, optional entry_point")
    x.add_argument("--out", required=True, help="folder for the drafts and extraction_report.json")
    x.add_argument("--limit", type=int, default=None, help="only the first N tasks")
    x.add_argument("--max-tokens", type=int, default=EXTRACTION_MAX_TOKENS, help="reply budget of one task's keypoints")
    x.add_argument("--cache", default=None, help="completion cache (sqlite path)")
    x.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    x.set_defaults(func=_cmd_extract_keypoints)

    val = sub.add_parser("validate", help="check a built dataset folder (parquet, card, balance)")
    val.add_argument("path", help="a dataset folder written by capa build")
    val.set_defaults(func=_cmd_validate)

    pub = sub.add_parser("publish", help="upload a built dataset folder to the Hub and tag it")
    pub.add_argument("path", nargs="?", default=DATASET_OUT, help="the dataset folder to upload")
    pub.add_argument("--repo-id", required=True, help="the Hub dataset repository, namespace/name")
    pub.add_argument("--version", required=True, help="the tag to give the upload, e.g. v0.2.1")
    pub.add_argument("--private", action="store_true", help="create the repository as private")
    pub.set_defaults(func=_cmd_publish)

    e = sub.add_parser("eval", help="evaluate a model on the held-out sessions")
    from capa_hf.evaluation.eval_cli import add_eval_arguments, add_run_folder_arguments

    add_eval_arguments(e)
    add_run_folder_arguments(e)
    e.set_defaults(func=_cmd_eval)

    r = sub.add_parser("report", help="the paper's tables with paired intervals, and plots, from finished runs")
    r.add_argument("runs", nargs="+", help="run folders of capa eval / capa blank-control")
    r.add_argument("--out", default=None, help="write report.md, report.json and the PNG plots here")
    r.add_argument("--difficulty", default=None, metavar="FILE", help="difficulty labels (capa label-difficulty)")
    r.add_argument("--dataset", default=None, help="the dataset for the oracle bound and balance figure "
                                                   "(default: the runs' own)")
    r.add_argument("--allow-partial", action="store_true", help="report half-written runs over what they finished")
    r.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    r.set_defaults(func=_cmd_report)

    ld = sub.add_parser("label-difficulty", help="difficulty labels from a no-history run (1-2 turns simple, "
                                                 "3-4 moderate, 5-8 or unsolved complex)")
    ld.add_argument("run", help="a finished capa eval --condition none run folder")
    ld.add_argument("--out", required=True, help="folder for difficulty.json")
    ld.set_defaults(func=_cmd_label_difficulty)

    bc = sub.add_parser("blank-control", help="the 164 HumanEval tasks with their full prompt and debugger feedback")
    from capa_hf.analysis.blank_control import add_blank_arguments

    add_blank_arguments(bc)
    bc.set_defaults(func=_cmd_blank_control)

    vw = sub.add_parser("view", help="a static HTML viewer of run transcripts (opens from disk, no server)")
    vw.add_argument("runs", nargs="+", help="run folders of capa eval / capa blank-control")
    vw.add_argument("--out", required=True, help="folder for index.html and its files")
    vw.add_argument("--dataset", default=None, help="the dataset for the sessions' hidden items "
                                                    "(default: each run's own)")
    vw.add_argument("--revision", default=None, help="Hub revision of --dataset")
    vw.set_defaults(func=_cmd_view)

    ls = sub.add_parser("list", help="the names a run can use: engines, presets, conditions or users")
    ls.add_argument("what", help="engines | presets | conditions | users")
    ls.set_defaults(func=_cmd_list)
    return p


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("capa-hf")
    except PackageNotFoundError:      # a checkout run without installing it
        from capa_hf.version import PIPELINE_VERSION

        return PIPELINE_VERSION


def one_line(text: object) -> str:
    return " ".join(str(text).split())


def os_error_line(exc: OSError, args) -> str:
    """An OSError as one line naming the path; on or under --out, say that --out must be writable."""
    path = exc.filename
    what = exc.strerror or type(exc).__name__
    if path is None:
        return one_line(f"{type(exc).__name__}: {exc}")
    out = getattr(args, "out", None)
    if out is not None:
        target, folder = Path(str(path)).absolute(), Path(str(out)).absolute()
        if target == folder or folder in target.parents:
            return (f"--out {out}: cannot write {path} ({what}); give a folder you can create and write, "
                    "or change its permissions")
    return f"{path}: {what}; check the path and its permissions"


def interrupt_line(args) -> str:
    """What Ctrl-C keeps: a run resumes from its finished sessions."""
    out = getattr(args, "out", None)
    if args.command in ("eval", "blank-control") and out and not getattr(args, "rescore", None):
        from capa_hf.evaluation.records import RESULTS, complete, read_records

        results = Path(out) / RESULTS
        finished = len(complete(read_records(results)))
        if finished:
            return (f"interrupted; {finished} finished session(s) are saved in {results}: "
                    "rerun the same command to resume")
        return "interrupted before any session finished; rerun the same command to start"
    return "interrupted; rerun the same command to start again"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    name = f"capa {args.command}"
    try:
        code = args.func(args)
        sys.stdout.flush()
        return code
    except CapaError as exc:
        print(f"{name}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # the reader went away (`capa design | head -1`): stop quietly, and keep Python's own
        # flush at exit from failing on the closed pipe
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        print(f"\n{name}: {interrupt_line(args)}", file=sys.stderr)
        return 130
    except OSError as exc:       # a folder that cannot be written, a path under a file
        print(f"{name}: error: {os_error_line(exc, args)}", file=sys.stderr)
        return 2
    except Exception as exc:
        from runners.engine import EngineError

        if isinstance(exc, EngineError):     # engine set-up: a model asset, a server that never came up
            print(f"{name}: error: {one_line(exc)}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
