"""The `capa` task source: the dataset's held-out (default) or history sessions."""

from __future__ import annotations

from capa_hf.content import load_user_lines
from capa_hf.dataset.load import LoadedDataset, load_capa
from capa_hf.errors import CapaError
from capa_hf.evaluation.sources import Target, register_source
from capa_hf.oracle import fully_resolvable
from capa_hf.schema import Session
from capa_hf.simulator.brief import UserBrief


def select_targets(data: LoadedDataset, cells: tuple[str, ...] | None, limit: int | None,
                   split: str) -> list[Session]:
    if split not in CapaSource.splits:
        raise CapaError(f"--split {split!r}: expected heldout or history")
    pool = data.heldout if split == "heldout" else data.history
    targets = sorted(pool.values(), key=lambda s: (s.cell_id, s.position))
    if cells:
        known = {s.cell_id for s in targets}
        unknown = [c for c in cells if c not in known]
        if unknown:
            raise CapaError(f"unknown cell id(s) {unknown}; the dataset has {min(known)}..{max(known)}")
        targets = [s for s in targets if s.cell_id in set(cells)]
    if limit is not None:
        if limit < 1:
            raise CapaError(f"--limit must be >= 1, got {limit}")
        targets = targets[:limit]
    return targets


def brief(target: Session, data: LoadedDataset, user_lines: dict) -> UserBrief:
    return UserBrief(session_id=target.session_id, hidden_items=target.hidden_items,
                     keypoints={k.id: k for k in data.contents[target.task_id].keypoints},
                     dimensions=data.dimensions, persona=data.personas[target.persona_id], user_lines=user_lines,
                     reference=data.problem(target).reference, task_prompt=data.tasks[target.task_id].prompt,
                     initial_request=target.initial_request, variant_id=target.variant_id)


def session_facts(t: Session) -> dict:
    """What a record carries of its session: who, and what."""
    return {"session_id": t.session_id, "cell_id": t.cell_id, "persona_id": t.persona_id,
            "mechanisms": list(t.mechanisms), "task_id": t.task_id, "role": t.role,
            "item_kinds": sorted({h.kind for h in t.hidden_items}), "fully_resolvable": fully_resolvable(t)}


@register_source("capa")
class CapaSource:
    splits = ("heldout", "history")
    reads_dataset = True     # `capa eval` checks --dataset against its manifest before loading it

    def __init__(self, config, data: LoadedDataset | None = None):
        self.config = config
        self.data = data or load_capa(config.dataset, revision=config.revision)

    def identity(self) -> dict:
        return {"dataset_source": self.data.source, "dataset_version": self.data.version,
                "dataset_manifest_sha256": self.data.manifest_sha256}

    def targets(self) -> list[Target]:
        c, data = self.config, self.data
        lines = load_user_lines()
        return [Target(session_id=s.session_id, problem=data.problem(s), initial_request=s.initial_request,
                       brief=brief(s, data, lines), facts=session_facts(s), session=s, affinity=s.cell_id)
                for s in select_targets(data, c.cells, c.limit, c.split)]
