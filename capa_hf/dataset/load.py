"""Loading a built dataset (a local folder or a Hub id) into typed records for evaluation."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from capa_hf.dataset.rows import persona_from_row, session_from_row, task_from_row
from capa_hf.errors import CapaError
from capa_hf.paths import DEFAULT_DATASET_DIR
from capa_hf.schema import Persona, Session, Task, TaskContent


@dataclass(frozen=True)
class LoadedDataset:
    source: str
    history: dict[str, Session]
    heldout: dict[str, Session]
    tasks: dict[str, Task]
    contents: dict[str, TaskContent]
    personas: dict[str, Persona]

    def cell_history(self, cell_id: str) -> list[Session]:
        return sorted((s for s in self.history.values() if s.cell_id == cell_id), key=lambda s: s.position)


def load_capa(source: str | Path | None = None, revision: str | None = None) -> LoadedDataset:
    """Load sessions, tasks and personas with `datasets` (offline for local folders)."""
    from datasets import load_dataset

    src = str(source or DEFAULT_DATASET_DIR)
    local = Path(src).exists()
    if local and not (Path(src) / "README.md").is_file():
        raise CapaError(f"{src}: not a CAPA dataset folder (no README.md card with configs)")
    kwargs = {} if local else {"revision": revision}
    try:
        sessions = load_dataset(src, **kwargs)
    except Exception as exc:
        raise CapaError(f"{src}: could not load the dataset ({type(exc).__name__}: {exc})") from exc
    if "heldout" not in sessions:
        raise CapaError(f"{src}: has no 'heldout' split (found {sorted(sessions)}); "
                        "expected a CAPA dataset with history and heldout splits")
    if "history" not in sessions:
        raise CapaError(f"{src}: has no 'history' split (found {sorted(sessions)})")
    tasks_ds = load_dataset(src, "tasks", split="train", **kwargs)
    personas_ds = load_dataset(src, "personas", split="train", **kwargs)
    tasks, contents = {}, {}
    for row in tasks_ds:
        t, c = task_from_row(row)
        tasks[t.task_id], contents[t.task_id] = t, c
    return LoadedDataset(
        source=src,
        history={r["session_id"]: session_from_row(r) for r in sessions["history"]},
        heldout={r["session_id"]: session_from_row(r) for r in sessions["heldout"]},
        tasks=tasks, contents=contents,
        personas={r["id"]: persona_from_row(r) for r in personas_ds},
    )
