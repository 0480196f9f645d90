"""The six ambiguity mechanisms and the resolution patterns a user keeps across sessions."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from capa_hf.schema.base import Record
from capa_hf.schema.task import Category

Operation = Literal["lexicon", "vague", "habitual", "operator", "deixis", "remove"]


class ResolutionPattern(Record):
    """How one user of this mechanism hides information and how it gets resolved.

    A cell fixes one pattern per mechanism for all 10 of its sessions, so that the resolved
    history is evidence for the held-out sessions.
    """

    id: str = Field(description="Pattern id, unique within its mechanism.")
    summary: str = Field(min_length=1, description="The recurring interpretation, in plain words.")
    categories: tuple[Category, ...] = Field(
        min_length=1, description="Keypoint categories this pattern acts on, in priority order."
    )


class Mechanism(Record):
    """An ambiguity mechanism: a recurring user-side cause of underspecified intent."""

    id: str = Field(pattern=r"^[a-z_]+$", description="The mechanism's id, e.g. 'habitual_omission'.")
    name: str = Field(description="Its name.")
    abbrev: str = Field(min_length=2, max_length=4, description="A short label for tables.")
    cause: str = Field(min_length=1, description="Why users of this kind leave information out.")
    information_control: str = Field(min_length=1, description="What Stage 1 removes or obscures.")
    operation: Operation = Field(description="How Stage 1 rewrites the keypoints it acts on.")
    max_items: int = Field(ge=1, le=4, description="Most keypoints this mechanism hides per session.")
    resolution: str = Field(min_length=1, description="How the ambiguity is resolved in dialogue.")
    patterns: tuple[ResolutionPattern, ...] = Field(
        min_length=1, description="How users of this kind resolve it, as recurring patterns.")
