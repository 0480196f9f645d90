"""Personas (the user profile pi), their voice kits and the discipline lexicons they speak in."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from capa_hf.schema.base import Record, no_blank

StyleKind = Literal["lowercase", "filler", "aside", "pasted_comment", "rules_markdown"]


class StyleMove(Record):
    """A small surface habit applied to the persona's requests."""

    kind: StyleKind = Field(description="Which surface habit.")
    variants: tuple[str, ...] = Field((), description="The habit's phrasings, when it has any.")

    @field_validator("variants")
    @classmethod
    def _no_blank_variants(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return no_blank(v)


class VoiceKit(Record):
    """Reusable fragments in the persona's voice; the generator picks among them by seed."""

    openers: tuple[str, ...] = Field(min_length=4, description="How the persona starts a request.")
    closers: tuple[str, ...] = Field(min_length=4, description="How it ends one.")
    clarification_wraps: tuple[str, ...] = Field(min_length=4,
                                                 description="Frames around a clarification; each holds {text}.")
    failure_reactions: tuple[str, ...] = Field(min_length=4,
                                               description="What it says when code fails; may hold {error}.")
    style_moves: tuple[StyleMove, ...] = Field(min_length=1, description="Surface habits applied to its requests.")

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
    expertise: str = Field(min_length=1, description="How much programming the persona knows.")
    background: str = Field(min_length=1, description="Its field and work.")
    tone: str = Field(min_length=1, description="How it sounds.")
    verbosity: Literal["terse", "moderate", "verbose"] = Field(description="How long its messages are.")
    security_awareness: str = Field(min_length=1, description="How much it cares about safe code.")
    emotional_state: str = Field(min_length=1, description="Its mood at work.")
    failure_style: str = Field(min_length=1, description="How it reacts when code fails.")


class Persona(Record):
    """A user profile: traits that shape wording, independent of the ambiguity mechanisms."""

    id: str = Field(pattern=r"^P\d{2}$", description="P01..P10.")
    name: str = Field(min_length=1, description="A short name.")
    summary: str = Field(min_length=1, description="Who the persona is, in a few lines.")
    traits: Traits = Field(description="What shapes its wording.")
    discipline: str = Field(min_length=1, description="Lexicon id used by domain-cognitive polysemy.")
    voice: VoiceKit = Field(description="Reusable fragments in its voice.")


class Term(Record):
    sg: str = Field(min_length=1, description="The term in the singular.")
    pl: str = Field(min_length=1, description="The term in the plural.")


class Lexicon(Record):
    """Established nouns of one discipline for common CS entities."""

    id: str = Field(pattern=r"^[a-z_]+$", description="The lexicon's id (a persona's discipline).")
    name: str = Field(description="The discipline's name.")
    description: str = Field(description="What the discipline calls things.")
    terms: dict[str, tuple[Term, ...]] = Field(description="Entity slot -> the discipline's terms for it.")
