"""Reading YAML data files into validated records, with errors that name the file and field."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from capa_hf.errors import DataFileError

M = TypeVar("M", bound=BaseModel)


def read_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataFileError(path, "file not found") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise DataFileError(path, f"not valid YAML: {exc}") from None


def field_path(loc: tuple) -> str:
    return ".".join(str(p) for p in loc) or "<root>"


def parse_record(model: type[M], raw: Any, path: Path, prefix: tuple = ()) -> M:
    """Validate `raw` as `model`; on failure name the file and the first bad field."""
    if not isinstance(raw, dict):
        raise DataFileError(path, f"expected a mapping for {model.__name__}, got {type(raw).__name__}",
                            field=field_path(prefix) if prefix else None)
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = field_path(prefix + tuple(err["loc"]))
        more = f" (and {len(exc.errors()) - 1} more problems)" if len(exc.errors()) > 1 else ""
        raise DataFileError(path, f"{err['msg']}{more}", field=field) from None


def load_record(model: type[M], path: Path) -> M:
    return parse_record(model, read_yaml(path), path)
