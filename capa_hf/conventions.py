"""The convention dimensions of capa_hf/data/conventions.yaml, read and checked.

It sits below both the content loaders and the simulator: the scripted user states a convention
with the dimension's own `state` lines, and content checks everything else against them.
"""

from __future__ import annotations

from pathlib import Path

from capa_hf.data_files import parse_record, read_yaml
from capa_hf.errors import DataFileError
from capa_hf.paths import DATA_DIR
from capa_hf.schema.convention import Dimension


def load_dimensions(path: Path | None = None) -> dict[str, Dimension]:
    path = path or DATA_DIR / "conventions.yaml"
    raw = read_yaml(path)
    if not isinstance(raw, dict) or not isinstance(raw.get("dimensions"), list):
        raise DataFileError(path, "expected a top-level 'dimensions' list", field="dimensions")
    out: dict[str, Dimension] = {}
    constants: set[str] = set()
    for i, item in enumerate(raw["dimensions"]):
        dim = parse_record(Dimension, item, path, prefix=("dimensions", i))
        if dim.id in out:
            raise DataFileError(path, f"duplicate dimension id {dim.id!r}", field=f"dimensions.{i}.id")
        if dim.constant in constants:
            raise DataFileError(path, f"duplicate constant {dim.constant!r}", field=f"dimensions.{i}.constant")
        out[dim.id] = dim
        constants.add(dim.constant)
    return out
