"""Stage 1, part one: which keypoints each mechanism's information control acts on.

Pure and text-free: the plan says which keypoints are hidden and by which mechanism; a realizer
(realizer.py) then writes the surface text. C_req is not a subset of C_L: every plan hides at
least one keypoint per mechanism.
"""

from __future__ import annotations

from dataclasses import dataclass

from capa_hf.schema import Keypoint, Mechanism, TaskContent


@dataclass(frozen=True)
class ControlAction:
    keypoint: Keypoint
    mechanism: Mechanism


@dataclass(frozen=True)
class ControlPlan:
    task_id: str
    actions: tuple[ControlAction, ...]     # hidden keypoints, in keypoint priority order
    visible: tuple[Keypoint, ...]          # keypoints stated plainly in the request

    def hidden_ids(self) -> set[str]:
        return {a.keypoint.id for a in self.actions}

    def mechanism_of(self, keypoint_id: str) -> Mechanism | None:
        for a in self.actions:
            if a.keypoint.id == keypoint_id:
                return a.mechanism
        return None


def _pattern_categories(mechanism: Mechanism, pattern_id: str | None) -> tuple[str, ...]:
    for p in mechanism.patterns:
        if p.id == pattern_id:
            return p.categories
    return mechanism.patterns[0].categories


def plan_controls(content: TaskContent, mechanisms: list[Mechanism], patterns: dict[str, str]) -> ControlPlan:
    """Each mechanism takes up to `max_items` keypoints of the first category of its pattern that
    still has untaken keypoints; with none in any of its categories it takes the first untaken
    keypoint by priority, so both mechanisms are always visibly at work."""
    taken: dict[str, Mechanism] = {}
    for mech in sorted(mechanisms, key=lambda m: m.id):
        free = [k for k in content.keypoints if k.id not in taken]
        if not free:
            raise ValueError(f"{content.task_id}: no keypoint left for mechanism {mech.id}")
        chosen: list[Keypoint] = []
        for category in _pattern_categories(mech, patterns.get(mech.id)):
            chosen = [k for k in free if k.category == category][: mech.max_items]
            if chosen:
                break
        if not chosen:
            chosen = free[:1]
        for k in chosen:
            taken[k.id] = mech
    actions = tuple(ControlAction(k, taken[k.id]) for k in content.keypoints if k.id in taken)
    visible = tuple(k for k in content.keypoints if k.id not in taken)
    return ControlPlan(content.task_id, actions, visible)
