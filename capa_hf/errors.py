"""Errors raised on bad input. Each names the input and what was expected."""

from __future__ import annotations

from pathlib import Path


class CapaError(Exception):
    """Base class for errors a user can fix by changing their input."""


class DataFileError(CapaError):
    """A data file is missing, unparsable, or has an invalid field."""

    def __init__(self, path: Path | str, message: str, field: str | None = None):
        self.path = str(path)
        self.field = field
        where = f"{self.path}" + (f" [field {field}]" if field else "")
        super().__init__(f"{where}: {message}")
