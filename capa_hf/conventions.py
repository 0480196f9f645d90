"""The convention dimensions of capa_hf/data/conventions.yaml, read and checked.

It sits below both the content loaders and the simulator: the scripted user states a convention
with the dimension's own `state` lines, and content checks everything else against them.
"""

from __future__ import annotations

from pathlib import Path

from capa_hf.data_files import parse_record, read_yaml
from capa_hf.errors import DataFileError
from capa_hf.paths import DATA_DIR
from capa_hf.schema.convention import Dimension, VariantSource


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


def task_dimensions(dimensions: dict[str, Dimension], source: VariantSource | None) -> dict[str, Dimension]:
    """The dimensions as one task's user speaks of them: a value's state lines, and an operation's
    obscuring phrasings, replaced by the task's own (`state_lines`, `vague_lines` of its variants
    file) where it has them. A value the dimension does
    not have is an error naming the task."""
    if source is None or not (source.state_lines or source.vague_lines):
        return dimensions
    out = dict(dimensions)
    for dim, lines in source.vague_lines.items():
        out[dim] = out[dim].model_copy(update={"vague": {**out[dim].vague, **lines}})
    for dim, lines in source.state_lines.items():
        known = set(dimensions[dim].value_ids())
        odd = sorted(set(lines) - known)
        if odd:
            raise DataFileError(DATA_DIR / "variants" / f"{source.task_id.replace('/', '_')}.yaml",
                                f"state_lines.{dim} names {odd}, expected values of {sorted(known)}")
        values = tuple(v.model_copy(update={"state": tuple(lines[v.id])}) if v.id in lines else v
                       for v in out[dim].values)
        out[dim] = out[dim].model_copy(update={"values": values})
    return out
