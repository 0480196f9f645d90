"""Personas (the user profile pi), their voice kits and the discipline lexicons they speak in."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from capa_hf.schema.base import Record, no_blank

StyleKind = Literal["lowercase", "filler", "aside", "pasted_comment", "rules_markdown"]


class StyleMove(Record):
    """A small surface habit applied to the persona's requests."""

    kind: StyleKind
    variants: tuple[str, ...] = ()

    @field_validator("variants")
    @classmethod
    def _no_blank_variants(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return no_blank(v)


class VoiceKit(Record):
    """Reusable fragments in the persona's voice; the generator picks among them by seed."""

    openers: tuple[str, ...] = Field(min_length=4)
    closers: tuple[str, ...] = Field(min_length=4)
    clarification_wraps: tuple[str, ...] = Field(min_length=4)
    failure_reactions: tuple[str, ...] = Field(min_length=4)
    style_moves: tuple[StyleMove, ...] = Field(min_length=1)

    @field_validator("clarification_wraps")
    @classmethod
    def _wraps_have_slot(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for w in v:
            if "{text}" not in w:
                raise ValueError(f"clarification wrap lacks the {{text}} slot: {w!r}")
        return v

    @field_validator("openers", "closers", "failure_reactions")
    @classmethod
    def _no_blank(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return no_blank(v)


class Traits(Record):
    expertise: str = Field(min_length=1)
    background: str = Field(min_length=1)
    tone: str = Field(min_length=1)
    verbosity: Literal["terse", "moderate", "verbose"]
    security_awareness: str = Field(min_length=1)
    emotional_state: str = Field(min_length=1)
    failure_style: str = Field(min_length=1)


class Persona(Record):
    """A user profile: traits that shape wording, independent of the ambiguity mechanisms."""

    id: str = Field(pattern=r"^P\d{2}$")
    name: str = Field(min_length=1)
    summary: str = Field(min_length=1)
    traits: Traits
    discipline: str = Field(min_length=1, description="Lexicon id used by domain-cognitive polysemy.")
    voice: VoiceKit


class Term(Record):
    sg: str = Field(min_length=1)
    pl: str = Field(min_length=1)


class Lexicon(Record):
    """Established nouns of one discipline for common CS entities."""

    id: str = Field(pattern=r"^[a-z_]+$")
    name: str
    description: str
    terms: dict[str, tuple[Term, ...]]
