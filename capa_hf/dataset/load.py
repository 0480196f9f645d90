"""Loading a built dataset (a local folder or a Hub id) into typed records for evaluation."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from capa_hf.dataset.locate import check_local, check_parquet_footers, load_error, local_cache_dir, one_line
from capa_hf.dataset.rows import cell_from_row, persona_from_row, session_from_row, task_from_row
from capa_hf.errors import CapaError
from capa_hf.paths import DEFAULT_DATASET_DIR
from capa_hf.schema import Cell, Persona, Session, Task, TaskContent
from capa_hf.simulator.problem import Problem


@dataclass(frozen=True)
class DimensionInfo:
    """What evaluation needs of a dimension (the simulated user matches questions against it)."""

    id: str
    name: str
    summary: str
    questions: tuple[str, ...]


@dataclass(frozen=True)
class LoadedDataset:
    source: str
    history: dict[str, Session]
    heldout: dict[str, Session]
    tasks: dict[str, Task]
    contents: dict[str, TaskContent]
    personas: dict[str, Persona]
    variants: dict[str, dict] = field(default_factory=dict)     # variant_id -> row
    cells: dict[str, Cell] = field(default_factory=dict)
    dimensions: dict[str, DimensionInfo] = field(default_factory=dict)
    version: str | None = None
    manifest_sha256: str | None = None
    revision: str | None = None

    def cell_history(self, cell_id: str) -> list[Session]:
        return sorted((s for s in self.history.values() if s.cell_id == cell_id), key=lambda s: s.position)

    def problem(self, session: Session) -> Problem:
        row = self.variants.get(session.variant_id)
        if row is None:
            raise CapaError(f"{self.source}: session {session.session_id} names variant {session.variant_id!r}, "
                            "which the dataset's `variants` config does not have")
        task = self.tasks[session.task_id]
        return Problem(task_id=task.task_id, variant_id=session.variant_id, entry_point=task.entry_point,
                       test=row["test"], prelude=task.prompt, reference=row["reference"])

    def values_of(self, session: Session) -> dict[str, str]:
        return json.loads(self.variants[session.variant_id]["values"])


def _manifest(src: str, local: bool, revision: str | None) -> tuple[str | None, str | None]:
    import hashlib

    try:
        if local:
            path = Path(src) / "capa_manifest.json"
        else:
            from huggingface_hub import hf_hub_download

            path = Path(hf_hub_download(src, "capa_manifest.json", repo_type="dataset", revision=revision))
        raw = path.read_bytes()
    except Exception:   # a dataset without a manifest still loads; its version is unknown
        return None, None
    return json.loads(raw).get("version"), hashlib.sha256(raw).hexdigest()


def load_capa(source: str | Path | None = None, revision: str | None = None) -> LoadedDataset:
    """Load sessions, tasks, variants, personas and cells with `datasets` (offline for local folders).

    `datasets`' own progress bars stay off while it reads (a first read of a folder would print
    seven of them; CAPA's commands say what they load)."""
    import datasets

    was_on = not datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()
    try:
        return _load(source, revision)
    finally:
        if was_on:
            datasets.enable_progress_bars()


def _load(source: str | Path | None, revision: str | None) -> LoadedDataset:
    from datasets import load_dataset

    src = str(source or DEFAULT_DATASET_DIR)
    local = check_local(src)
    if local and not (Path(src) / "README.md").is_file():
        raise CapaError(f"{src}: not a CAPA dataset folder (no README.md card with configs)")
    if local and revision:
        raise CapaError(f"--revision {revision!r} applies to a Hub dataset, but {src} is a local folder")
    if local:
        check_parquet_footers(src)
    kwargs = {"cache_dir": local_cache_dir(src)} if local else {"revision": revision}
    try:
        sessions = load_dataset(src, **kwargs)
    except Exception as exc:
        raise load_error(src, local, f"{src}: could not load the dataset ({one_line(exc)})") from exc
    if "heldout" not in sessions:
        raise CapaError(f"{src}: has no 'heldout' split (found {sorted(sessions)}); "
                        "expected a CAPA dataset with history and heldout splits")
    if "history" not in sessions:
        raise CapaError(f"{src}: has no 'history' split (found {sorted(sessions)})")

    def config(name: str):
        try:
            return load_dataset(src, name, split="train", **kwargs)
        except Exception as exc:
            raise load_error(src, local, f"{src}: has no usable {name!r} config ({one_line(exc)}); "
                                         "a CAPA v0.2 dataset ships tasks, variants, personas and cells") from exc

    tasks, contents = {}, {}
    for row in config("tasks"):
        t, c = task_from_row(row)
        tasks[t.task_id], contents[t.task_id] = t, c
    version, sha = _manifest(src, local, revision)
    return LoadedDataset(
        source=src,
        history={r["session_id"]: session_from_row(r) for r in sessions["history"]},
        heldout={r["session_id"]: session_from_row(r) for r in sessions["heldout"]},
        tasks=tasks, contents=contents,
        personas={r["id"]: persona_from_row(r) for r in config("personas")},
        variants={r["variant_id"]: dict(r) for r in config("variants")},
        cells={r["cell_id"]: cell_from_row(r) for r in config("cells")},
        dimensions={r["id"]: DimensionInfo(r["id"], r["name"], r["summary"], tuple(r["questions"]))
                    for r in config("dimensions")},
        version=version, manifest_sha256=sha, revision=revision,
    )
