"""Shared pydantic configuration: strict about unknown fields, immutable records."""

from pydantic import BaseModel, ConfigDict


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=False)


def no_blank(values: tuple[str, ...]) -> tuple[str, ...]:
    """Validator body shared by the records: every entry must have visible text."""
    if any(not v.strip() for v in values):
        raise ValueError("entries must not be blank")
    return values
