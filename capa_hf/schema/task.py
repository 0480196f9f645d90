"""HumanEval tasks and the keypoints (C_req) that a correct implementation depends on."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from capa_hf.schema.base import Record

Category = Literal["data_type", "core_definition", "logical_control", "boundary_condition"]
CATEGORIES: tuple[str, ...] = ("data_type", "core_definition", "logical_control", "boundary_condition")


class Keypoint(Record):
    """One piece of required information, taken verbatim from the task's signature or docstring."""

    id: str = Field(pattern=r"^kp_\d{2}$", description="Stable id inside the task, e.g. kp_01.")
    category: Category = Field(description="Which kind of constraint this is.")
    description: str = Field(min_length=1, description="Neutral statement of the constraint.")
    original_text: str = Field(min_length=1, description="Verbatim span of the HumanEval prompt.")
    plain: str = Field(min_length=1, description="The fact as the user states it when clarifying.")
    vague: str = Field(min_length=1, description="An obscured phrasing with several legal readings.")
    question: str = Field(min_length=1, description="What an attentive assistant asks to pin it down.")

    @field_validator("description", "original_text", "plain", "vague", "question")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be blank")
        return v


class TaskContent(Record):
    """Curated content for one task: its gist and its keypoints, in priority order."""

    task_id: str = Field(pattern=r"^HumanEval/\d+$", description="The HumanEval task.")
    gist: str = Field(min_length=1, description="One line on what the function is for.")
    keypoints: tuple[Keypoint, ...] = Field(min_length=2, max_length=8, description="The required information C_req.")

    @field_validator("keypoints")
    @classmethod
    def _unique_ids(cls, kps: tuple[Keypoint, ...]) -> tuple[Keypoint, ...]:
        ids = [k.id for k in kps]
        if len(set(ids)) != len(ids):
            raise ValueError(f"duplicate keypoint ids: {ids}")
        return kps


class Task(Record):
    """A HumanEval task with its executable ground truth and (when loaded) its curated content."""

    task_id: str = Field(description="HumanEval/<n>.")
    prompt: str = Field(description="HumanEval's prompt: signature and docstring.")
    entry_point: str = Field(description="The function the tests call.")
    canonical_solution: str = Field(description="HumanEval's reference body.")
    test: str = Field(description="HumanEval's check(candidate).")
    content: TaskContent | None = Field(None, description="The curated keypoints, when loaded.")

    @property
    def index(self) -> int:
        return int(self.task_id.split("/")[1])

    @property
    def reference_code(self) -> str:
        return self.prompt + self.canonical_solution
