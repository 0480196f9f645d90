"""A coding session: the ambiguous request, what it hides, and (history only) its resolved trace."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from capa_hf.schema.base import Record

ItemKind = Literal["convention", "task"]


class HiddenItem(Record):
    """Something Stage 1 removed or obscured, and how the user clarifies it.

    A *convention* item is the user's value on a dimension (list or tuple, ...): stable across
    the user's sessions, so history can resolve it. A *task* item is a task-specific keypoint.
    """

    id: str = Field(description="h1, h2, ... in priority order.")
    kind: ItemKind
    keypoint_id: str | None = Field(description="The task keypoint it hides (a convention item may have none).")
    dimension: str | None = Field(description="The convention dimension (convention items only).")
    mechanism: str
    obscured_as: str = Field(description="What the request says instead ('' when removed).")
    clarification: str = Field(min_length=1, description="The user's answer, in persona voice.")
    resolvable_from_history: bool = Field(
        description="The user's value was stated in an earlier history session of the same cell.")
    revealed_in: tuple[str, ...] = Field(
        default=(), description="History session ids of the same cell where the user stated this value.")

    @model_validator(mode="after")
    def _kind(self) -> "HiddenItem":
        if self.kind == "convention" and not self.dimension:
            raise ValueError("a convention item needs its dimension")
        if self.kind == "task" and (self.dimension or not self.keypoint_id):
            raise ValueError("a task item needs a keypoint and no dimension")
        if self.resolvable_from_history != bool(self.revealed_in):
            raise ValueError("resolvable_from_history must match revealed_in")
        return self


class Turn(Record):
    role: Literal["user", "assistant"]
    content: str


class GeneratorInfo(Record):
    """How the session was made, so a reader can rebuild it."""

    pipeline_version: str
    realizer: str = Field(description="Who wrote the surface text: 'template' or an engine spec.")
    assistant: str = Field(description="Who played the assistant in Stage 2.")
    user: str = Field(description="Simulated-user implementation, e.g. 'scripted'.")
    seed: int
    attempt: int = Field(description="Stage 3 regeneration attempt that was accepted (0 = first).")
    fallback: bool = Field(default=False, description="True when the reference assistant stepped in.")


class Session(Record):
    session_id: str
    cell_id: str
    position: int = Field(ge=1, le=10)
    split: Literal["history", "heldout"]
    role: str = Field(description="The position's role in the cell design (see capa_hf.schema.cell.ROLE_DOC).")
    persona_id: str
    mechanisms: tuple[str, str]
    patterns: dict[str, str]
    task_id: str
    variant_id: str = Field(description="The task under this user's conventions (config `variants`).")
    entry_point: str
    initial_request: str
    hidden_items: tuple[HiddenItem, ...] = Field(min_length=1)
    turns: tuple[Turn, ...] = Field(description="The resolved public trace; empty for held-out sessions.")
    resolved: bool = Field(description="Stage 2 resolved the session with the reference assistant.")
    assistant_turns: int = Field(description="Assistant turns of the Stage 2 trace (shipped for history only).")
    difficulty: str | None = None
    generator: GeneratorInfo
