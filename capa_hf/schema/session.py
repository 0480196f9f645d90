"""A coding session: the ambiguous request, what it hides, and its resolved public trace."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from capa_hf.schema.base import Record


class HiddenItem(Record):
    """A keypoint that Stage 1 removed or obscured, and how the user clarifies it."""

    id: str = Field(description="h1, h2, ... in priority order.")
    keypoint_id: str
    mechanism: str
    obscured_as: str = Field(description="What the request says instead ('' when removed).")
    clarification: str = Field(min_length=1, description="The user's answer, in persona voice.")


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
    persona_id: str
    mechanisms: tuple[str, str]
    patterns: dict[str, str]
    task_id: str
    entry_point: str
    initial_request: str
    hidden_items: tuple[HiddenItem, ...] = Field(min_length=1)
    turns: tuple[Turn, ...]
    resolved: bool
    assistant_turns: int
    difficulty: str | None = None
    generator: GeneratorInfo
