"""Loading the curated content: mechanisms, personas, lexicons, controls and task keypoints."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from capa_hf.data_files import load_record, parse_record, read_yaml
from capa_hf.errors import DataFileError
from capa_hf.paths import DATA_DIR
from capa_hf.schema import Lexicon, Mechanism, Persona, TaskContent
from capa_hf.conventions import load_dimensions  # noqa: F401  (re-exported: content's loaders, one place)
from capa_hf.schema.convention import Dimension, VariantSource


def load_mechanisms(path: Path | None = None) -> dict[str, Mechanism]:
    path = path or DATA_DIR / "mechanisms.yaml"
    raw = read_yaml(path)
    if not isinstance(raw, dict) or not isinstance(raw.get("mechanisms"), list):
        raise DataFileError(path, "expected a top-level 'mechanisms' list", field="mechanisms")
    out: dict[str, Mechanism] = {}
    for i, item in enumerate(raw["mechanisms"]):
        mech = parse_record(Mechanism, item, path, prefix=("mechanisms", i))
        if mech.id in out:
            raise DataFileError(path, f"duplicate mechanism id {mech.id!r}", field=f"mechanisms.{i}.id")
        out[mech.id] = mech
    if len(out) != 6:
        raise DataFileError(path, f"expected 6 mechanisms, found {len(out)}", field="mechanisms")
    return out


def _load_dir(model, folder: Path, expected_count: int | None = None) -> dict:
    if not folder.is_dir():
        raise DataFileError(folder, "folder not found")
    out = {}
    for path in sorted(folder.glob("*.yaml")):
        rec = load_record(model, path)
        if rec.id != path.stem:
            raise DataFileError(path, f"id {rec.id!r} does not match the file name", field="id")
        out[rec.id] = rec
    if expected_count is not None and len(out) != expected_count:
        raise DataFileError(folder, f"expected {expected_count} files, found {len(out)}")
    return out


def load_personas(folder: Path | None = None) -> dict[str, Persona]:
    return _load_dir(Persona, folder or DATA_DIR / "personas", expected_count=10)


def load_lexicons(folder: Path | None = None) -> dict[str, Lexicon]:
    return _load_dir(Lexicon, folder or DATA_DIR / "lexicons")


def task_file(folder: Path, task_id: str) -> Path:
    """A per-task data file: HumanEval/12 lives in `folder`/HumanEval_12.yaml."""
    return folder / f"{task_id.replace('/', '_')}.yaml"


def load_per_task(model, folder: Path) -> dict:
    """Every HumanEval_*.yaml record of `model` in `folder`, by task id; a file named for another
    task than the one it holds is refused."""
    out = {}
    for path in sorted(folder.glob("HumanEval_*.yaml")):
        rec = load_record(model, path)
        if task_file(folder, rec.task_id).name != path.name:
            raise DataFileError(path, f"task_id {rec.task_id!r} does not match the file name", field="task_id")
        out[rec.task_id] = rec
    return out


def keypoint_file(task_id: str, folder: Path | None = None) -> Path:
    return task_file(folder or DATA_DIR / "keypoints", task_id)


def load_task_contents(folder: Path | None = None) -> dict[str, TaskContent]:
    return load_per_task(TaskContent, folder or DATA_DIR / "keypoints")


def variant_file(task_id: str, folder: Path | None = None) -> Path:
    return (folder or DATA_DIR / "variants") / f"{task_id.replace('/', '_')}.yaml"


def load_variant_sources(folder: Path | None = None, dimensions: dict[str, Dimension] | None = None
                         ) -> dict[str, VariantSource]:
    """Every task's variant source, checked against the dimensions it names."""
    folder = folder or DATA_DIR / "variants"
    dims = dimensions if dimensions is not None else load_dimensions()
    out = {}
    for path in sorted(folder.glob("HumanEval_*.yaml")):
        rec = load_record(VariantSource, path)
        if variant_file(rec.task_id, folder).name != path.name:
            raise DataFileError(path, f"task_id {rec.task_id!r} does not match the file name", field="task_id")
        for d, v in rec.dimensions.items():
            if d not in dims:
                raise DataFileError(path, f"unknown dimension {d!r}; known: {', '.join(sorted(dims))}",
                                    field=f"dimensions.{d}")
            if v not in dims[d].value_ids():
                raise DataFileError(path, f"{v!r} is not a value of {d}; expected one of {dims[d].value_ids()}",
                                    field=f"dimensions.{d}")
        out[rec.task_id] = rec
    return dict(sorted(out.items(), key=lambda kv: int(kv[0].split("/")[1])))


def _load_lines(path: Path, keys: tuple[str, ...]) -> dict:
    raw = read_yaml(path)
    if not isinstance(raw, dict):
        raise DataFileError(path, "expected a mapping of phrase lists")
    for key in keys:
        if key not in raw or not raw[key]:
            raise DataFileError(path, "missing or empty", field=key)
    return raw


STAGE1_KEYS = ("lexicon_gloss",)
USER_KEYS = ("failing_check", "nothing_left")
ASSISTANT_KEYS = ("ask", "submit", "applied", "guess", "repair", "repair_again")


def load_stage1_phrases(path: Path | None = None) -> dict:
    """Stage 1 phrases that are no dimension's (capa_hf/data/stage1_phrases.yaml: the lexicon glosses)."""
    return _load_lines(path or DATA_DIR / "stage1_phrases.yaml", STAGE1_KEYS)


def load_user_lines(path: Path | None = None) -> dict:
    """The scripted simulated user's own lines (capa_hf/data/user_lines.yaml)."""
    return _load_lines(path or DATA_DIR / "user_lines.yaml", USER_KEYS)


def load_assistant_lines(path: Path | None = None) -> dict:
    """The reference assistant's lines in Stage 2 (capa_hf/data/assistant_lines.yaml)."""
    return _load_lines(path or DATA_DIR / "assistant_lines.yaml", ASSISTANT_KEYS)


def load_controls() -> dict:
    """Stage 1 phrases and the user's lines together (what v0.1 kept in one file)."""
    return {**load_stage1_phrases(), **load_user_lines()}


@dataclass(frozen=True)
class Content:
    """Everything curated, loaded once."""

    mechanisms: dict[str, Mechanism]
    personas: dict[str, Persona]
    lexicons: dict[str, Lexicon]
    tasks: dict  # task_id -> TaskContent
    controls: dict
    dimensions: dict  # dimension id -> Dimension
    variants: dict    # task_id -> VariantSource


@lru_cache(maxsize=1)
def load_content() -> Content:
    dimensions = load_dimensions()
    return Content(
        dimensions=dimensions,
        variants=load_variant_sources(dimensions=dimensions),
        mechanisms=load_mechanisms(),
        personas=load_personas(),
        lexicons=load_lexicons(),
        tasks=load_task_contents(),
        controls=load_controls(),
    )
