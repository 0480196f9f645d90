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
    kind: ItemKind = Field(description="'convention' (a user's standing value) or 'task' (a task keypoint).")
    keypoint_id: str | None = Field(description="The task keypoint it hides (a convention item may have none).")
    dimension: str | None = Field(description="The convention dimension (convention items only).")
    mechanism: str = Field(description="The ambiguity mechanism that hides it.")
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
    role: Literal["user", "assistant"] = Field(description="Who spoke: user or assistant.")
    content: str = Field(description="What was said.")


class GeneratorInfo(Record):
    """How the session was made, so a reader can rebuild it."""

    pipeline_version: str = Field(description="The pipeline version that built the session.")
    realizer: str = Field(description="Who wrote the surface text: 'template' or an engine spec.")
    assistant: str = Field(description="Who played the assistant in Stage 2.")
    user: str = Field(description="Simulated-user implementation, e.g. 'scripted'.")
    seed: int = Field(description="The build's seed.")
    attempt: int = Field(description="Stage 3 regeneration attempt that was accepted (0 = first).")
    fallback: bool = Field(default=False, description="True when the reference assistant stepped in.")


class Session(Record):
    session_id: str = Field(description="<cell>-<position>, e.g. C01-06.")
    cell_id: str = Field(description="The user cell.")
    position: int = Field(ge=1, le=10, description="1-5 history, 6-10 held-out.")
    split: Literal["history", "heldout"] = Field(description="history or heldout.")
    role: str = Field(description="The position's role in the cell design (see capa_hf.schema.cell.ROLE_DOC).")
    persona_id: str = Field(description="The cell's persona.")
    mechanisms: tuple[str, str] = Field(description="The cell's two ambiguity mechanisms.")
    patterns: dict[str, str] = Field(description="Mechanism -> the resolution pattern this user follows.")
    task_id: str = Field(description="The HumanEval task.")
    variant_id: str = Field(description="The task under this user's conventions (config `variants`).")
    entry_point: str = Field(description="The function the tests call.")
    initial_request: str = Field(description="The user's ambiguous first message.")
    hidden_items: tuple[HiddenItem, ...] = Field(
        min_length=1, description="What the request leaves out or obscures, in priority order.")
    turns: tuple[Turn, ...] = Field(description="The resolved public trace; empty for held-out sessions.")
    resolved: bool = Field(description="Stage 2 resolved the session with the reference assistant.")
    assistant_turns: int = Field(description="Assistant turns of the Stage 2 trace (shipped for history only).")
    difficulty: str | None = Field(
        None, description="simple, moderate or complex once labelled from a no-history run; None until then.")
    generator: GeneratorInfo = Field(description="Who and what produced the session.")
