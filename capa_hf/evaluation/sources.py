"""Task sources: where a run's sessions come from, one registered thing each.

A source offers one or more splits; `--split` picks the source that offers it. It loads what it
needs and gives the run its `Target`s (everything one session needs: the problem the judge
decides against, the first request, the simulated user's brief, the facts its record carries)
and its identity for config.json. Built in: `capa` (the dataset's `heldout` and `history`
splits, evaluation/capa_source.py) and `humaneval` (the blank control's `humaneval` split:
HumanEval's 164 tasks with their full prompt, evaluation/humaneval_source.py).

    @register_source("mine")
    class MySource:
        splits = ("mine",)
        def __init__(self, config, data=None): ...
        def identity(self) -> dict: ...         # dataset_source, dataset_version, dataset_manifest_sha256
        def targets(self) -> list[Target]: ...
        data = None                             # what a history condition reads (a LoadedDataset), if any
        reads_dataset = False                   # True: `capa eval` checks --dataset against its manifest first
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from capa_hf.errors import CapaError
from capa_hf.registry import Registry
from capa_hf.simulator.brief import UserBrief
from capa_hf.simulator.problem import Problem


@dataclass(frozen=True)
class Target:
    """One session to play, as its source describes it."""

    session_id: str
    problem: Problem
    initial_request: str
    brief: UserBrief
    facts: dict = field(default_factory=dict)    # cell_id, persona_id, mechanisms, task_id, role, item kinds ...
    session: Any = None                          # the dataset's Session, read by history conditions
    affinity: str | None = None                  # keeps a user's conversations on one replica


class TaskSource(Protocol):
    splits: tuple[str, ...]
    data: Any

    def identity(self) -> dict: ...

    def targets(self) -> list[Target]: ...


SOURCES: Registry = Registry("task source", "capa.task_sources",
                             builtins=("capa_hf.evaluation.capa_source", "capa_hf.evaluation.humaneval_source"))
register_source = SOURCES.register


def source_for_split(split: str):
    """The registered source class that offers `split`."""
    offers = {s: name for name in SOURCES.names() for s in getattr(SOURCES.get(name), "splits", ())}
    if split not in offers:
        raise CapaError(f"--split {split!r}: expected one of {', '.join(sorted(offers))} "
                        f"(offered by the task sources {', '.join(SOURCES.names())})")
    return SOURCES.get(offers[split])
