"""The sandbox checks behind `capa validate-content` for task variants and misreadings.

Refusals (each an error naming the task, the variant and what failed):
- the committed regenerated tests are missing or stale (their sources changed since);
- HumanEval agreement: the canonical solution fails the regenerated tests of HumanEval's own
  variant, or the reference at HumanEval's values fails HumanEval's own test;
- a variant's reference fails its own tests;
- a value's tests are passed by the reference of another value of the same dimension (the
  dimension would not be test-relevant);
- a misreading passes the tests of some variant (the session's tests, i.e. the regenerated
  ones: boundary inputs may be added to tell a misreading apart); the keypoint is then refused
  and may not be hidden.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping

from capa_hf.defaults import SANDBOX_LIMITS
from capa_hf.schema import Task, TaskContent
from capa_hf.schema.convention import Dimension, VariantSource
from capa_hf.variants.combos import Variant, humaneval_variant, task_variants
from capa_hf.variants.regenerate import source_sha256
from capa_hf.variants.specialize import SpecializeError
from capa_hf.variants.store import read_tests, variant_tests_of


@dataclass
class VariantReport:
    errors: list[str] = field(default_factory=list)
    tasks_with_dimensions: int = 0
    dimension_tasks: Counter = field(default_factory=Counter)
    n_variants: int = 0
    n_misreadings: int = 0
    refused_keypoints: list[str] = field(default_factory=list)     # misreading passed
    hideable_keypoints: int = 0
    unhideable_keypoints: int = 0                                   # no misreading, or listed not_hideable
    jobs: int = 0

    def lines(self) -> list[str]:
        dims = ", ".join(f"{d} {n}" for d, n in sorted(self.dimension_tasks.items()))
        return [f"variants: {self.tasks_with_dimensions} tasks exercise a dimension; {self.n_variants} variants",
                f"  tasks per dimension: {dims}",
                f"misreadings: {self.n_misreadings}; refused keypoints: {len(self.refused_keypoints)}; "
                f"hideable task keypoints: {self.hideable_keypoints}; not hideable: {self.unhideable_keypoints}",
                f"sandbox jobs: {self.jobs}"]


@dataclass(frozen=True)
class _Job:
    task_id: str
    what: str            # human-readable description for the error
    code: str
    test: str
    want_pass: bool
    refusal_of: str | None = None   # keypoint id when this job verifies a misreading


def _where(tid: str) -> str:
    return f"variants/{tid.replace('/', '_')}.yaml"


def _check_ids(tid: str, src: VariantSource, content: TaskContent, report: VariantReport) -> None:
    kp_ids = {k.id for k in content.keypoints}
    for field_name in ("convention_keypoints", "neutral_plain", "misreadings", "asks", "not_hideable"):
        for kp in getattr(src, field_name):
            if kp not in kp_ids:
                report.errors.append(f"{_where(tid)}: {field_name}.{kp} names no keypoint of {tid}")
    both = set(src.not_hideable) & set(src.misreadings)
    if both:
        report.errors.append(f"{_where(tid)}: {sorted(both)} have a misreading and are listed as not_hideable")
    loose = [k for k in sorted(kp_ids) if k not in src.convention_keypoints and k not in src.misreadings
             and k not in src.not_hideable]
    if loose:
        report.errors.append(f"{_where(tid)}: task keypoints {loose} need a misreading or a not_hideable reason")


def _own_jobs(task: Task, src: VariantSource, variants: list[Variant], tests: dict[str, str]) -> list[_Job]:
    tid = task.task_id
    he = humaneval_variant(variants)
    jobs = [
        _Job(tid, "the canonical solution against HumanEval's own test", task.prompt + task.canonical_solution,
             task.test, True),
        _Job(tid, f"the canonical solution against the regenerated tests of {he.key}",
             task.prompt + task.canonical_solution, tests[he.key], True),
        _Job(tid, f"the reference at HumanEval's values ({he.key}) against HumanEval's own test", he.reference,
             task.test, True),
    ]
    for v in variants:
        jobs.append(_Job(tid, f"the reference of {v.key} against its own tests", v.reference, tests[v.key], True))
    return jobs


def _cross_jobs(task: Task, variants: list[Variant], dims: Mapping[str, Dimension],
                tests: dict[str, str]) -> list[_Job]:
    out = []
    for v in variants:
        for d, value in v.values:
            for other in dims[d].value_ids():
                if other != value:
                    w = v.with_value(d, other)
                    out.append(_Job(task.task_id, f"the reference of {w.key} against the tests of {v.key} "
                                                  f"({d}={other} must fail {d}={value})", w.reference,
                                    tests[v.key], False))
    return out


def _misreading_jobs(task: Task, src: VariantSource, variants: list[Variant], tests: dict[str, str]) -> list[_Job]:
    out = []
    for kp in sorted(src.misreadings):
        for v in variants:
            out.append(_Job(task.task_id, f"misreading {kp} under {v.key} against its tests", v.misreading(kp),
                            tests[v.key], False, kp))
    return out


def verify_variants(sources: Mapping[str, VariantSource], tasks: Mapping[str, Task],
                    contents: Mapping[str, TaskContent], dims: Mapping[str, Dimension], pool,
                    tests_folder=None) -> VariantReport:
    """`tests_folder`: where the regenerated tests are (default: the committed ones)."""
    from sandbox import CheckJob

    report = VariantReport()
    jobs: list[_Job] = []
    for tid, src in sources.items():
        task = tasks[tid]
        content = contents.get(tid)
        if content is None:
            report.errors.append(f"{_where(tid)}: {tid} has no keypoint file")
            continue
        _check_ids(tid, src, content, report)
        record = read_tests(tid, tests_folder)
        if record is None:
            report.errors.append(f"{_where(tid)}: no regenerated tests; run `capa regen-tests --tasks {tid}`")
            continue
        if record.get("source_sha256") != source_sha256(src, task, dims):
            report.errors.append(f"{_where(tid)}: regenerated tests are stale; run `capa regen-tests --tasks {tid}`")
            continue
        tests = variant_tests_of(record)
        try:
            variants = task_variants(src, dims)
            missing = [v.key for v in variants if v.key not in tests]
            if missing:
                report.errors.append(f"{_where(tid)}: no regenerated tests for {missing}")
                continue
            jobs += _own_jobs(task, src, variants, tests)
            jobs += _cross_jobs(task, variants, dims, tests)
            jobs += _misreading_jobs(task, src, variants, tests)
        except (KeyError, SpecializeError) as exc:
            report.errors.append(f"{_where(tid)}: {str(exc).strip(chr(39))}")
            continue
        if src.dimensions:
            report.tasks_with_dimensions += 1
            report.dimension_tasks.update(list(src.dimensions))
        report.n_variants += len(variants)
        report.n_misreadings += len(src.misreadings)
        task_kps = [k.id for k in content.keypoints if k.id not in src.convention_keypoints]
        hideable = [k for k in task_kps if k in src.misreadings]
        report.hideable_keypoints += len(hideable)
        report.unhideable_keypoints += len(task_kps) - len(hideable)
    verdicts = pool.check_many([CheckJob(j.code, j.test, tasks[j.task_id].entry_point, timeout_s=SANDBOX_LIMITS.timeout_s,
                                         prelude=tasks[j.task_id].prompt) for j in jobs])
    report.jobs = len(jobs)
    refused = set()
    for j, v in zip(jobs, verdicts):
        if v.status == "sandbox_error":
            report.errors.append(f"{_where(j.task_id)}: sandbox error while running {j.what}: {v.failure}")
        elif v.passed != j.want_pass:
            if j.refusal_of is not None:
                refused.add((j.task_id, j.refusal_of))
                report.errors.append(f"{_where(j.task_id)}: {j.what} passed; a misreading must fail the tests "
                                     f"(rewrite it, or list {j.refusal_of} under not_hideable)")
            elif j.want_pass:
                report.errors.append(f"{_where(j.task_id)}: {j.what} did not pass ({v.status}: {v.failure})")
            else:
                report.errors.append(f"{_where(j.task_id)}: {j.what} passed; the dimension is not test-relevant "
                                     "(add boundary inputs that tell the values apart)")
    report.refused_keypoints = sorted(f"{t}:{k}" for t, k in refused)
    return report
