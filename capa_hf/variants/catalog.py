"""Every task variant the build can use, with its reference and committed tests.

Tasks that exercise no dimension have one variant, `<task>@humaneval`, judged by its
regenerated tests (HumanEval's inputs plus boundary inputs) when the task has a variants file,
else by HumanEval's own test.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Mapping

from capa_hf.errors import CapaError
from capa_hf.schema import Task
from capa_hf.schema.convention import Dimension, VariantSource
from capa_hf.simulator.problem import Problem
from capa_hf.variants.combos import Variant, task_variants, variant_key
from capa_hf.variants.store import read_tests, variant_tests_of


def cleaned_canonical(task: Task) -> str:
    """HumanEval's canonical solution as a compact program (docstrings and string statements out)."""
    import ast

    tree = ast.parse(task.prompt + task.canonical_solution)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            kept = [s for s in body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                                            and isinstance(s.value.value, str))]
            node.body = kept or [ast.Pass()]
    return ast.unparse(tree) + "\n"


@dataclass(frozen=True)
class VariantRecord:
    variant_id: str
    task_id: str
    values: dict
    humaneval: bool
    reference: str
    test: str

    def row(self) -> dict:
        return {"variant_id": self.variant_id, "task_id": self.task_id,
                "values": json.dumps(self.values, sort_keys=True), "humaneval": self.humaneval,
                "reference": self.reference, "test": self.test}


class VariantCatalog:
    def __init__(self, tasks: Mapping[str, Task], sources: Mapping[str, VariantSource],
                 dimensions: Mapping[str, Dimension]):
        self.tasks = tasks
        self.sources = sources
        self.dimensions = dimensions
        self._variants: dict[str, list[Variant]] = {}
        self._tests: dict[str, dict[str, str]] = {}

    def variants(self, task_id: str) -> list[Variant]:
        if task_id not in self._variants:
            src = self.sources.get(task_id)
            self._variants[task_id] = task_variants(src, self.dimensions) if src else []
        return self._variants[task_id]

    def tests(self, task_id: str) -> dict[str, str]:
        if task_id not in self._tests:
            record = read_tests(task_id) if task_id in self.sources else None
            if task_id in self.sources and record is None:
                raise CapaError(f"{task_id}: no regenerated tests; run `capa regen-tests --tasks {task_id}`")
            self._tests[task_id] = variant_tests_of(record) if record else {}
        return self._tests[task_id]

    def record(self, task_id: str, values: Mapping[str, str]) -> VariantRecord:
        task = self.tasks[task_id]
        key = variant_key(values)
        vid = f"{task_id}@{key}"
        src = self.sources.get(task_id)
        if src is None:
            return VariantRecord(vid, task_id, {}, True, cleaned_canonical(task), task.test)
        variant = next((v for v in self.variants(task_id) if v.key == key), None)
        if variant is None:
            raise CapaError(f"{task_id} has no variant {key!r}")
        test = self.tests(task_id).get(key)
        if test is None:
            raise CapaError(f"{vid}: no regenerated test; run `capa regen-tests --tasks {task_id}`")
        return VariantRecord(vid, task_id, dict(values), variant.humaneval, variant.reference, test)

    def problem(self, task_id: str, values: Mapping[str, str]) -> Problem:
        rec = self.record(task_id, values)
        task = self.tasks[task_id]
        return Problem(task_id=task_id, variant_id=rec.variant_id, entry_point=task.entry_point,
                       test=rec.test, prelude=task.prompt, reference=rec.reference)

    def all_records(self) -> list[VariantRecord]:
        out = []
        for task_id in self.tasks:
            vs = self.variants(task_id)
            if not vs:
                out.append(self.record(task_id, {}))
            out += [self.record(task_id, v.values_dict()) for v in vs]
        return out

    def variant(self, task_id: str, values: Mapping[str, str]) -> Variant | None:
        key = variant_key(values)
        return next((v for v in self.variants(task_id) if v.key == key), None)
