"""The variants of a task: every combination of the values of the dimensions it exercises."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cached_property
from itertools import product
from typing import Mapping

from capa_hf.schema.convention import Dimension, VariantSource
from capa_hf.variants.specialize import specialize

HUMANEVAL_KEY = "humaneval"


def variant_key(values: Mapping[str, str]) -> str:
    """`empty_input=raise+tie_break=first`; a task that exercises nothing has the key `humaneval`."""
    return "+".join(f"{d}={values[d]}" for d in sorted(values)) or HUMANEVAL_KEY


def variant_id(task_id: str, values: Mapping[str, str]) -> str:
    return f"{task_id}@{variant_key(values)}"


@dataclass(frozen=True)
class Variant:
    task_id: str
    values: tuple[tuple[str, str], ...]      # (dimension, value), sorted by dimension
    humaneval: bool                          # every value is HumanEval's own
    source: VariantSource
    constants: tuple[tuple[str, str], ...]   # (constant name, dimension id) of every dimension there is

    @property
    def key(self) -> str:
        return variant_key(dict(self.values))

    @property
    def id(self) -> str:
        return f"{self.task_id}@{self.key}"

    def values_dict(self) -> dict[str, str]:
        return dict(self.values)

    def constant_values(self) -> dict[str, str]:
        by_dim = {d: c for c, d in self.constants}
        return {by_dim[d]: v for d, v in self.values}

    @cached_property
    def reference(self) -> str:
        return specialize(self.source.reference, self.constant_values(), dict(self.constants))

    def misreading(self, keypoint_id: str) -> str:
        return specialize(self.source.misreadings[keypoint_id], self.constant_values(), dict(self.constants))

    def with_value(self, dimension: str, value: str) -> "Variant":
        vals = dict(self.values)
        vals[dimension] = value
        he = all(self.source.dimensions[d] == v for d, v in vals.items())
        return Variant(self.task_id, tuple(sorted(vals.items())), he, self.source, self.constants)


def constants_of(dimensions: Mapping[str, Dimension]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((d.constant, d.id) for d in dimensions.values()))


def task_variants(source: VariantSource, dimensions: Mapping[str, Dimension]) -> list[Variant]:
    """All variants of a task, HumanEval's own first, then in a fixed order."""
    dims = sorted(source.dimensions)
    for d in dims:
        if d not in dimensions:
            raise KeyError(f"{source.task_id}: unknown dimension {d!r}; known: {sorted(dimensions)}")
        if source.dimensions[d] not in dimensions[d].value_ids():
            raise KeyError(f"{source.task_id}: dimensions.{d} is {source.dimensions[d]!r}; "
                           f"expected one of {dimensions[d].value_ids()}")
    consts = constants_of(dimensions)
    out = []
    for combo in product(*(dimensions[d].value_ids() for d in dims)):
        values = tuple(zip(dims, combo))
        he = all(source.dimensions[d] == v for d, v in values)
        out.append(Variant(source.task_id, values, he, source, consts))
    out.sort(key=lambda v: (not v.humaneval, v.key))
    return out


def humaneval_variant(variants: list[Variant]) -> Variant:
    return next(v for v in variants if v.humaneval)


def parse_call(text: str) -> tuple[tuple, dict]:
    """`"[1, 2], 3"` -> ((([1, 2], 3)), {}); keyword arguments are allowed: `"[1], k=2"`."""
    try:
        call = ast.parse(f"f({text})", mode="eval").body
    except SyntaxError as exc:
        raise ValueError(f"boundary input {text!r} is not a Python argument list: {exc.msg}") from None
    assert isinstance(call, ast.Call)
    try:
        args = tuple(ast.literal_eval(a) for a in call.args)
        kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    except ValueError:
        raise ValueError(f"boundary input {text!r} must hold only literals") from None
    if any(k is None for k in kwargs):
        raise ValueError(f"boundary input {text!r}: **kwargs is not allowed")
    return args, kwargs
