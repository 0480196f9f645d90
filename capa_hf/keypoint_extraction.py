"""`capa extract-keypoints`: draft keypoint YAML for new tasks with a model, then validate it.

The source is a JSONL file of HumanEval-style records (`task_id`, `prompt`, optionally
`entry_point`). For each task a model drafts `{"gist", "keypoints": [...]}` in the schema of the
curated files under `capa_hf/data/keypoints/` (`capa_hf/prompts/extract_keypoints_*.md`). A draft
is written only when it validates:
- every keypoint passes the `Keypoint` schema (id kp_NN, category, every text field non-blank),
  ids are unique, and there are 2-8 of them;
- `original_text` is verbatim from the prompt. A span that matches only up to whitespace (the
  docstring's line breaks and indentation) is replaced by the prompt's own characters and
  listed as repaired; anything else is refused;
- `original_text` never comes from an example: no `>>>` line, no line of a doctest's output, no
  line of an "Example(s):" block, no example call with `==>`, `=>`, `➞` or `==`;
- `original_text` is not just the function's name, and `vague` repeats none of its literals.
A draft that fails is sent back once with its problems named; a second failure is listed in
`extraction_report.json` with the reasons. Drafts are for curation: a person reviews them
(and `capa validate-content` checks them) before they enter the benchmark.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from runners.driver import Call
from runners.types import Sampling

from capa_hf.defaults import EXTRACTION_MAX_TOKENS, GREEDY
from capa_hf.errors import CapaError
from capa_hf.generation.llm_calls import run_jobs
from capa_hf.llm_json import ask_json
from capa_hf.prompts import fill, prompt_text
from capa_hf.schema import Keypoint
from capa_hf.text_literals import repeated_literals

MIN_KEYPOINTS, MAX_KEYPOINTS = 2, 8
ROLE = "extractor"
REPORT = "extraction_report.json"
FIELDS = ("id", "category", "description", "original_text", "plain", "vague", "question")
_EXAMPLE_HEADER = re.compile(r"^\s*(for\s+)?(an?\s+)?examples?\s*:?\s*$", re.I)
_EXAMPLE_CALL = re.compile(r"^[A-Za-z_][\w.]*\s*\(.*\)\s*(==>|=>|➞|==|->\s*\S)")


@dataclass(frozen=True)
class SourceTask:
    task_id: str
    prompt: str
    entry_point: str


def read_source(path: Path) -> list[SourceTask]:
    if not path.is_file():
        raise CapaError(f"--source {path}: no such file (expected a JSONL file of task records)")
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CapaError(f"{path}:{n}: not a JSON line ({exc.msg})") from None
        if not isinstance(row, dict) or not isinstance(row.get("task_id"), str) or not isinstance(row.get("prompt"), str):
            raise CapaError(f"{path}:{n}: expected an object with string fields task_id and prompt")
        entry = row.get("entry_point") or _last_def(row["prompt"])
        if not entry:
            raise CapaError(f"{path}:{n}: {row['task_id']}: no entry_point and no `def` in the prompt")
        out.append(SourceTask(row["task_id"], row["prompt"], entry))
    if len({t.task_id for t in out}) != len(out):
        raise CapaError(f"{path}: task ids repeat")
    return out


def _last_def(prompt: str) -> str | None:
    names = re.findall(r"(?m)^\s*def\s+([A-Za-z_]\w*)\s*\(", prompt)
    return names[-1] if names else None


def example_spans(prompt: str) -> list[tuple[int, int]]:
    """Character spans of the prompt's example lines: doctests with their outputs, lines of an
    "Example(s):" block, and example calls with an arrow or `==`."""
    spans, pos, mode = [], 0, None
    for line in prompt.splitlines(keepends=True):
        s = line.strip()
        start, end = pos, pos + len(line)
        pos = end
        if not s or s.startswith('"""') or s.startswith("'''"):
            mode = None
            continue
        if s.startswith(">>>"):
            mode = "doctest"
        elif _EXAMPLE_HEADER.match(s):
            mode = "block"
        elif mode is None and not _EXAMPLE_CALL.match(s):
            continue
        spans.append((start, end))
    return spans


def locate(original: str, prompt: str) -> tuple[int, int, str] | None:
    """(start, end, the prompt's verbatim text) of `original`, exactly or up to whitespace."""
    i = prompt.find(original)
    if i >= 0:
        return i, i + len(original), original
    words = original.split()
    if not words:
        return None
    m = re.search(r"\s+".join(re.escape(w) for w in words), prompt)
    return (m.start(), m.end(), m.group(0)) if m else None


def check_draft(value: dict, task: SourceTask) -> tuple[dict | None, list[str], list[str]]:
    """(the draft as it will be written, or None; problems; repairs)."""
    problems, repairs = [], []
    gist = value.get("gist")
    if not isinstance(gist, str) or not gist.strip():
        problems.append('"gist" must be a non-empty string')
    kps = value.get("keypoints")
    if not isinstance(kps, list):
        return None, problems + ['"keypoints" must be a list'], repairs
    if not MIN_KEYPOINTS <= len(kps) <= MAX_KEYPOINTS:
        problems.append(f"{len(kps)} keypoints (expected {MIN_KEYPOINTS}-{MAX_KEYPOINTS})")
    examples = example_spans(task.prompt)
    out, ids = [], []
    for n, kp in enumerate(kps, 1):
        where = kp.get("id", f"keypoint {n}") if isinstance(kp, dict) else f"keypoint {n}"
        if not isinstance(kp, dict):
            problems.append(f"{where}: not an object")
            continue
        missing = [f for f in FIELDS if f not in kp]
        if missing:
            problems.append(f"{where}: missing {', '.join(missing)}")
            continue
        try:
            rec = Keypoint(**{f: kp[f] for f in FIELDS})
        except ValidationError as exc:
            problems.append(f"{where}: " + "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()))
            continue
        ids.append(rec.id)
        found = locate(rec.original_text, task.prompt)
        if found is None:
            problems.append(f"{where}: original_text is not verbatim in the prompt: {rec.original_text[:80]!r}")
            continue
        start, end, verbatim = found
        if verbatim != rec.original_text:
            repairs.append(f"{where}: original_text re-copied from the prompt (whitespace)")
            rec = rec.model_copy(update={"original_text": verbatim})
        if ">>>" in verbatim or any(start < e and s < end for s, e in examples):
            problems.append(f"{where}: original_text comes from an example or doctest line: {verbatim[:80]!r}")
        if verbatim.strip() == task.entry_point:
            problems.append(f"{where}: the function name itself is not a keypoint")
        rep = repeated_literals(rec.original_text, rec.vague)
        if rep:
            problems.append(f"{where}: vague repeats literal(s) {rep} of original_text")
        out.append({f: getattr(rec, f) for f in FIELDS})
    if len(set(ids)) != len(ids):
        problems.append(f"keypoint ids repeat: {ids}")
    if problems:
        return None, problems, repairs
    return {"task_id": task.task_id, "gist": " ".join(gist.split()), "keypoints": out}, problems, repairs


def extraction_messages(task: SourceTask) -> list[dict]:
    turn = fill("extract_keypoints_task", task_id=task.task_id, entry_point=task.entry_point, prompt=task.prompt.rstrip())
    return [{"role": "system", "content": prompt_text("extract_keypoints_system")}, {"role": "user", "content": turn}]


def _job(task: SourceTask, max_tokens: int):
    call = Call(ROLE, extraction_messages(task), Sampling(temperature=GREEDY, max_tokens=max_tokens, seed=0))

    def validate(value: dict) -> str | None:
        _, problems, _ = check_draft(value, task)
        return "; ".join(problems) or None

    def job():
        answer = yield from ask_json(call, validate, f"keypoints of {task.task_id}")
        if answer.ok:
            draft, _, repairs = check_draft(answer.value, task)
            return {"draft": draft, "repairs": repairs, "attempts": answer.attempts}
        return {"draft": None, "problems": answer.attempts[-1]["error"], "attempts": answer.attempts}
    return job


def draft_file(task_id: str, out: Path) -> Path:
    return out / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', task_id)}.yaml"


def write_draft(draft: dict, path: Path) -> None:
    text = yaml.safe_dump(draft, sort_keys=False, allow_unicode=True, width=110)
    path.write_text(text, encoding="utf-8")


def extract_keypoints(tasks: list[SourceTask], engine: Any, out: Path, cache=None, max_tokens: int = EXTRACTION_MAX_TOKENS,
                      progress: bool = True, engine_name: str = "") -> dict:
    """Draft, validate and write; returns the report (also written to out/extraction_report.json)."""
    out.mkdir(parents=True, exist_ok=True)
    results = run_jobs([(t.task_id, _job(t, max_tokens)) for t in tasks], engine, ROLE, cache=cache,
                       progress="extract keypoints" if progress else False)
    report: dict = {"engine": engine_name, "written": [], "kept_existing": [], "refused": [], "repaired": {}}
    for t in tasks:
        res = results[t.task_id]
        if res["draft"] is None:
            report["refused"].append({"task_id": t.task_id, "reason": res["problems"],
                                      "reply": res["attempts"][-1]["text"][:2000]})
            continue
        if res["repairs"]:
            report["repaired"][t.task_id] = res["repairs"]
        path = draft_file(t.task_id, out)
        if path.exists():
            report["kept_existing"].append(str(path))
            continue
        write_draft(res["draft"], path)
        report["written"].append(str(path))
    (out / REPORT).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return report


def extract_cli(args) -> int:
    import sys

    from runners import EngineError, make_engine
    from runners.options import parse_engine_args

    try:
        options = parse_engine_args(args.engine_arg)
    except ValueError as exc:
        raise CapaError(f"--engine-arg: {exc}") from None
    tasks = read_source(Path(args.source))
    if args.limit is not None:
        tasks = tasks[:args.limit]
    try:
        engine = make_engine(args.engine, **options)
    except (ValueError, TypeError, ImportError, EngineError) as exc:
        raise CapaError(f"--model {args.engine!r}: {exc}") from None
    cache = None
    if args.cache:
        from runners.cache import CompletionCache

        cache = CompletionCache(args.cache)
    report = extract_keypoints(tasks, engine, Path(args.out), cache=cache, max_tokens=args.max_tokens,
                               progress=not args.no_progress, engine_name=args.engine)
    for r in report["refused"]:
        print(f"refused {r['task_id']}: {r['reason']}")
    for tid, rep in report["repaired"].items():
        print(f"repaired {tid}: {'; '.join(rep)}")
    for path in report["kept_existing"]:
        print(f"kept existing {path} (not overwritten)")
    print(f"{len(report['written'])} drafts written, {len(report['refused'])} refused, of {len(tasks)} tasks; "
          f"report in {Path(args.out) / REPORT}", file=sys.stderr)
    return 1 if report["refused"] else 0
