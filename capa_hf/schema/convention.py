"""Personal conventions (dataset v0.2): dimensions, their values, and per-task variant sources.

A *dimension* is a choice that recurs across tasks and that one user always makes the same way
(list or tuple, ascending or descending, ...). A cell's *profile* fixes one value per dimension.
A task's *variant source* says which dimensions the task exercises, which value HumanEval's own
behaviour corresponds to, and gives one parametrized reference that reads the dimension
constants; a *variant* is the task under one combination of values.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from capa_hf.schema.base import Record, no_blank

Operation = Literal["lexicon", "vague", "habitual", "operator", "deixis", "remove"]


class DimensionValue(Record):
    id: str = Field(pattern=r"^[a-z_]+$", description="The value's id, e.g. 'tuple' or 'descending'.")
    habit: tuple[str, ...] = Field(min_length=1, description="The value as the user's standing habit.")
    state: tuple[str, ...] = Field(min_length=1, description="The value stated plainly in a request.")
    applied: tuple[str, ...] = Field(
        default=(), description="How an assistant names it when applying it from earlier sessions "
                                "(a short phrase for the {recap} slot, e.g. 'a tuple as usual').")

    @field_validator("habit", "state", "applied")
    @classmethod
    def _texts(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return no_blank(v)


class Dimension(Record):
    id: str = Field(pattern=r"^[a-z_]+$", description="The dimension's id, e.g. 'container'.")
    name: str = Field(min_length=1, description="Its name in plain words.")
    constant: str = Field(pattern=r"^[A-Z][A-Z_]*$", description="Name a parametrized reference reads.")
    summary: str = Field(min_length=1, description="What the choice is about, in one line.")
    questions: tuple[str, ...] = Field(min_length=2, description="How an assistant asks about it.")
    vague: dict[Operation, tuple[str, ...]] = Field(
        description="Value-neutral obscured phrasings per Stage 1 operation ('remove' is silence).")
    values: tuple[DimensionValue, ...] = Field(min_length=2, max_length=3,
                                               description="The values a user may hold, HumanEval's marked.")

    @field_validator("questions")
    @classmethod
    def _questions(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return no_blank(v)

    @model_validator(mode="after")
    def _check(self) -> "Dimension":
        ids = [v.id for v in self.values]
        if len(set(ids)) != len(ids):
            raise ValueError(f"duplicate value ids {ids}")
        for op in ("lexicon", "vague", "habitual", "operator", "deixis"):
            forms = self.vague.get(op)
            if not forms or any(not f.strip() for f in forms):
                raise ValueError(f"vague.{op} needs at least one phrasing")
        return self

    def value_ids(self) -> tuple[str, ...]:
        return tuple(v.id for v in self.values)

    def value(self, value_id: str) -> DimensionValue:
        for v in self.values:
            if v.id == value_id:
                return v
        raise KeyError(f"dimension {self.id} has no value {value_id!r}; expected one of {self.value_ids()}")


class TaskNouns(Record):
    result: str = Field(default="the result", min_length=1,
                        description="How the task's phrases name what the function returns.")
    input: str = Field(default="the input", min_length=1, description="How they name its input.")


class VariantSource(Record):
    """Everything curated for one task beyond its keypoints (capa_hf/data/variants/<task>.yaml)."""

    task_id: str = Field(pattern=r"^HumanEval/\d+$", description="The HumanEval task these variants are of.")
    nouns: TaskNouns = Field(default_factory=TaskNouns, description="Nouns the phrase templates fill in.")
    float_tolerance: float | None = Field(
        default=None, gt=0, description="Absolute tolerance for float results, as HumanEval's own test "
                                        "uses for this task; None compares exactly.")
    dimensions: dict[str, str] = Field(
        default_factory=dict, description="Dimension id -> the value HumanEval's own behaviour corresponds to.")
    convention_keypoints: dict[str, str] = Field(
        default_factory=dict, description="Keypoint id -> dimension it is about; hidden only as that convention.")
    neutral_plain: dict[str, str] = Field(
        default_factory=dict, description="Keypoint id -> a plain line that states no dimension's value.")
    boundary_inputs: tuple[str, ...] = Field(
        default=(), description="Extra calls as Python argument lists, e.g. \"[], 3\".")
    reference: str = Field(min_length=1, description="Clean reference; may read the dimension constants.")
    misreadings: dict[str, str] = Field(
        default_factory=dict, description="Task keypoint id -> a plausible wrong reading (code) the tests refuse.")
    asks: dict[str, str] = Field(default_factory=dict, description="Keypoint id -> a second phrasing of its question.")
    not_hideable: dict[str, str] = Field(
        default_factory=dict, description="Keypoint id -> why it cannot be a hidden task item.")
    settles: dict[str, tuple[str, ...]] = Field(
        default_factory=dict, description="A visible source ('gist' or a keypoint id, whose visible line is "
                                          "meant) -> the keypoints and dimensions that line settles for a reader; "
                                          "Stage 1 hides none of them while the source is in sight.")
    state_lines: dict[str, dict[str, tuple[str, ...]]] = Field(
        default_factory=dict, description="Dimension id -> value id -> how this task's user states the value "
                                          "plainly, in place of the dimension's own state lines where those "
                                          "would be false for the task (the planets task has no limit, only "
                                          "two named ends).")
    vague_lines: dict[str, dict[Operation, tuple[str, ...]]] = Field(
        default_factory=dict, description="Dimension id -> operation -> how this task's user obscures the "
                                          "dimension, in place of the dimension's own phrasings of that "
                                          "operation where those name a thing the task has not (the planets "
                                          "task's ends are two named planets, not a limit).")
    humaneval_test: bool = Field(
        default=False, description="Judge by HumanEval's own test instead of regenerated ones: for a task "
                                   "that exercises no dimension and whose test is a property check (HumanEval/32).")

    @model_validator(mode="after")
    def _check(self) -> "VariantSource":
        for kp, dim in self.convention_keypoints.items():
            if dim not in self.dimensions:
                raise ValueError(f"convention_keypoints.{kp} names {dim!r}, which is not in dimensions")
        if self.humaneval_test and self.dimensions:
            raise ValueError("humaneval_test is only for a task that exercises no dimension")
        for src, targets in self.settles.items():
            if src != "gist" and not re.fullmatch(r"kp_\d{2}", src):
                raise ValueError(f"settles.{src}: a source is 'gist' or a keypoint id")
            odd = [t for t in targets if t not in self.dimensions and not re.fullmatch(r"kp_\d{2}", t)]
            if odd or src in targets:
                raise ValueError(f"settles.{src}: {odd or [src]} is neither another keypoint id nor one of "
                                 f"this task's dimensions")
        for dim, lines in self.state_lines.items():
            if dim not in self.dimensions:
                raise ValueError(f"state_lines.{dim}: not one of this task's dimensions")
            if not lines or any(not forms for forms in lines.values()):
                raise ValueError(f"state_lines.{dim}: expected value id -> at least one line")
        for dim, lines in self.vague_lines.items():
            if dim not in self.dimensions:
                raise ValueError(f"vague_lines.{dim}: not one of this task's dimensions")
            if not lines or any(not forms for forms in lines.values()):
                raise ValueError(f"vague_lines.{dim}: expected operation -> at least one line")
        both = set(self.convention_keypoints) & set(self.misreadings)
        if both:
            raise ValueError(f"keypoints {sorted(both)} are convention keypoints and cannot have misreadings")
        return self
