"""A cell is one simulated user: a persona, a mechanism pair and ten tasks in order."""

from __future__ import annotations

from pydantic import Field, model_validator

from capa_hf.schema.base import Record

SESSIONS_PER_CELL = 10
HISTORY_SIZE = 5


class Cell(Record):
    cell_id: str = Field(pattern=r"^C\d{2}$")
    persona_id: str
    mechanisms: tuple[str, str] = Field(description="The unordered mechanism pair, sorted.")
    task_ids: tuple[str, ...] = Field(description="Positions 1-5 are history, 6-10 held-out.")
    patterns: dict[str, str] = Field(
        default_factory=dict, description="Resolution pattern id per mechanism, fixed for the cell."
    )

    @model_validator(mode="after")
    def _check(self) -> "Cell":
        if self.mechanisms[0] == self.mechanisms[1]:
            raise ValueError("a cell needs two distinct mechanisms")
        if len(self.task_ids) != SESSIONS_PER_CELL or len(set(self.task_ids)) != SESSIONS_PER_CELL:
            raise ValueError(f"a cell needs {SESSIONS_PER_CELL} distinct tasks")
        return self

    def split_of(self, position: int) -> str:
        return "history" if position <= HISTORY_SIZE else "heldout"
