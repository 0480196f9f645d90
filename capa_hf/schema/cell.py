"""A cell is one simulated user: a persona, a mechanism pair, a convention profile, ten tasks."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from capa_hf.defaults import HISTORY_SIZE, SESSIONS_PER_CELL
from capa_hf.schema.base import Record

Role = Literal["learn", "reuse", "convention_only", "mixed"]
ROLE_DOC = {
    "learn": "history: the user's conventions for the task's dimensions are hidden and resolved in dialogue",
    "reuse": "history: every hidden item is a convention shown in an earlier session; the assistant applies it",
    "convention_only": "held-out: every hidden item is a convention shown in the cell's history",
    "mixed": "held-out: conventions shown in history plus task items (and conventions not shown before)",
}


class Cell(Record):
    cell_id: str = Field(pattern=r"^C\d{2}$", description="C01..C60.")
    persona_id: str = Field(description="The cell's persona (P01..P10).")
    mechanisms: tuple[str, str] = Field(description="The unordered mechanism pair, sorted.")
    task_ids: tuple[str, ...] = Field(description="Positions 1-5 are history, 6-10 held-out.")
    patterns: dict[str, str] = Field(
        default_factory=dict, description="Resolution pattern id per mechanism, fixed for the cell.")
    profile: dict[str, str] = Field(
        default_factory=dict, description="The user's value on every convention dimension.")
    dimension_mechanisms: dict[str, str] = Field(
        default_factory=dict, description="Which of the cell's two mechanisms obscures each dimension.")
    roles: tuple[Role, ...] = Field(default=(), description="Each position's role in the design (ROLE_DOC).")

    @model_validator(mode="after")
    def _check(self) -> "Cell":
        if self.mechanisms[0] == self.mechanisms[1]:
            raise ValueError("a cell needs two distinct mechanisms")
        if len(self.task_ids) != SESSIONS_PER_CELL or len(set(self.task_ids)) != SESSIONS_PER_CELL:
            raise ValueError(f"a cell needs {SESSIONS_PER_CELL} distinct tasks")
        bad = {d: m for d, m in self.dimension_mechanisms.items() if m not in self.mechanisms}
        if bad:
            raise ValueError(f"dimension_mechanisms name mechanisms outside the cell's pair: {bad}")
        if self.roles and len(self.roles) != SESSIONS_PER_CELL:
            raise ValueError(f"roles needs {SESSIONS_PER_CELL} entries, got {len(self.roles)}")
        for i, r in enumerate(self.roles, 1):
            if (i <= HISTORY_SIZE) != (r in ("learn", "reuse")):
                raise ValueError(f"position {i} cannot have role {r!r}")
        return self

    def split_of(self, position: int) -> str:
        return "history" if position <= HISTORY_SIZE else "heldout"

    def role_of(self, position: int) -> str | None:
        return self.roles[position - 1] if self.roles else None
