"""Visible examples: what a request's plain sentences state, as checks a misreading must pass.

A hidden task keypoint is verified by a curated misreading: code that follows the visible request
but reads the hidden point another way. That only holds if the misreading agrees with everything
the request states. The visible sentences' stated examples make this mechanical: each task's
`capa_hf/data/keypoint_examples/<task>.yaml` gives, per visible source (`gist` or a keypoint id,
whose visible line is its dimension-neutral line when it has one, else its plain line), Python
expressions over `candidate` that the sentence states, for example `candidate('') == 0` for "a
string without any uppercase letter gives 0".

`check_examples` runs, in the sandbox, under every variant of the task:
- each example against the variant's reference (it must pass: a visible sentence the session's own
  tests contradict is a content error);
- each misreading against the examples of every other source. A misreading that fails one is
  *refused* under that variant whenever that source is visible: Stage 1 does not hide the keypoint
  in such a session (`stage1_plan`), and an item with no surviving misreading is not hidden there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from pydantic import Field, field_validator

from capa_hf.content import load_per_task, task_file
from capa_hf.paths import DATA_DIR
from capa_hf.schema.base import Record, no_blank
from capa_hf.variants.combos import task_variants, variant_key

GIST = "gist"
JOB_TIMEOUT_S = 10.0


class KeypointExamples(Record):
    task_id: str = Field(pattern=r"^HumanEval/\d+$")
    examples: dict[str, tuple[str, ...]] = Field(
        description="'gist' or a keypoint id -> Python expressions over `candidate` its visible line states.")

    @field_validator("examples")
    @classmethod
    def _exprs(cls, v: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        for key, exprs in v.items():
            if key != GIST and not key.startswith("kp_"):
                raise ValueError(f"{key!r} is neither 'gist' nor a keypoint id")
            if not exprs:
                raise ValueError(f"{key} has no examples")
            no_blank(exprs)
            for e in exprs:
                try:
                    compile(e, f"<{key}>", "eval")
                except SyntaxError as exc:
                    raise ValueError(f"{key}: {e!r} is not a Python expression ({exc.msg})") from None
        return v


def examples_file(task_id: str, folder: Path | None = None) -> Path:
    return task_file(folder or DATA_DIR / "keypoint_examples", task_id)


def load_keypoint_examples(folder: Path | None = None) -> dict[str, KeypointExamples]:
    return load_per_task(KeypointExamples, folder or DATA_DIR / "keypoint_examples")


def example_test(exprs: tuple[str, ...]) -> str:
    """A HumanEval-style check for the stated examples."""
    lines = ["def check(candidate):"]
    lines += [f"    assert {e}, {e!r}" for e in exprs]
    return "\n".join(lines) + "\n"


@dataclass
class ExampleCheck:
    """(task id, variant key) -> hidden keypoint -> the visible sources whose examples its misreading fails."""

    refusals: dict[tuple[str, str], dict[str, frozenset[str]]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    jobs: int = 0

    def refused_by(self, task_id: str, values: Mapping[str, str], keypoint_id: str) -> frozenset[str]:
        return self.refusals.get((task_id, variant_key(dict(values))), {}).get(keypoint_id, frozenset())

    def refused_pairs(self) -> int:
        """(task, variant, keypoint) triples whose misreading some visible source refutes."""
        return sum(len(kps) for kps in self.refusals.values())

    def lines(self) -> list[str]:
        kps = {(t, k) for (t, _), m in self.refusals.items() for k in m}
        return [f"visible examples: {self.jobs} sandbox jobs; misreadings refused by a visible example: "
                f"{len(kps)} task keypoints, {self.refused_pairs()} (task, variant, keypoint) combinations"]


@dataclass(frozen=True)
class _Job:
    task_id: str
    variant: str
    source: str              # gist or keypoint id whose examples are checked
    misreading: str | None   # the keypoint whose misreading runs; None: the variant's reference
    code: str
    test: str


def _where(task_id: str) -> str:
    return f"keypoint_examples/{task_id.replace('/', '_')}.yaml"


def check_examples(examples: Mapping[str, KeypointExamples], sources: Mapping, tasks: Mapping, contents: Mapping,
                   dims: Mapping, pool, references: bool = True) -> ExampleCheck:
    """Run every stated example against every other keypoint's misreading, and with `references`
    against every variant's reference too (`capa validate-content` does; the build relies on it).
    A (code, test) pair that several variants share runs once."""
    from sandbox import CheckJob

    out = ExampleCheck()
    jobs: list[_Job] = []
    for tid, ex in examples.items():
        src, content = sources.get(tid), contents.get(tid)
        if src is None or content is None or tid not in tasks:
            out.errors.append(f"{_where(tid)}: {tid} has no variants file, keypoint file or HumanEval task")
            continue
        kp_ids = {k.id for k in content.keypoints}
        unknown = sorted(k for k in ex.examples if k != GIST and k not in kp_ids)
        if unknown:
            out.errors.append(f"{_where(tid)}: {unknown} name no keypoint of {tid}")
            continue
        for v in task_variants(src, dims):
            for source, exprs in sorted(ex.examples.items()):
                test = example_test(exprs)
                if references:
                    jobs.append(_Job(tid, v.key, source, None, v.reference, test))
                jobs += [_Job(tid, v.key, source, kp, v.misreading(kp), test)
                         for kp in sorted(src.misreadings) if kp != source]
    unique = list(dict.fromkeys((j.task_id, j.code, j.test) for j in jobs))
    ran = pool.check_many([CheckJob(code, test, tasks[tid].entry_point, timeout_s=JOB_TIMEOUT_S,
                                    prelude=tasks[tid].prompt) for tid, code, test in unique])
    by_key = dict(zip(unique, ran))
    verdicts = [by_key[(j.task_id, j.code, j.test)] for j in jobs]
    out.jobs = len(unique)
    refused: dict[tuple[str, str], dict[str, set[str]]] = {}
    for j, v in zip(jobs, verdicts):
        if v.status == "sandbox_error":
            out.errors.append(f"{_where(j.task_id)}: sandbox error on {j.source} under {j.variant}: {v.failure}")
        elif j.misreading is None and not v.passed:
            out.errors.append(f"{_where(j.task_id)}: the reference of {j.variant} fails the examples of {j.source} "
                              f"({v.failure}); the visible line must hold under every variant")
        elif j.misreading is not None and not v.passed:
            refused.setdefault((j.task_id, j.variant), {}).setdefault(j.misreading, set()).add(j.source)
    out.refusals = {k: {kp: frozenset(s) for kp, s in sorted(m.items())} for k, m in sorted(refused.items())}
    return out
