"""The raw-history conditions: none, same-user, shuffled, conflicting.

Every history is rendered the same way (`render_history`), so the conditions differ only in
which five sessions they show. `same-user` is identical for every target of a cell, so prefix
caching applies. `shuffled` and `conflicting` are chosen per cell by seed, sized like the cell's
own history (within 115%), on distinct tasks, never on one of the cell's held-out tasks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from capa_hf.dataset.load import LoadedDataset
from capa_hf.defaults import HISTORY_SIZE
from capa_hf.errors import CapaError
from capa_hf.evaluation.conditions.base import register, render_dialogue, render_history
from capa_hf.schema import Session
from capa_hf.seeding import rng_for

SIZE_SLACK = 1.15


def by_cell(targets: Sequence[Session]) -> dict[str, list[Session]]:
    out: dict[str, list[Session]] = {}
    for t in targets:
        out.setdefault(t.cell_id, []).append(t)
    return out


def own_history(cell_id: str, data: LoadedDataset) -> list[Session]:
    hist = data.cell_history(cell_id)
    if len(hist) != HISTORY_SIZE:
        raise CapaError(f"cell {cell_id} has {len(hist)} history sessions, expected {HISTORY_SIZE}")
    return hist


def sized_pick(pool: list[Session], budget: int) -> list[Session]:
    """Up to five sessions on distinct tasks within the size budget; then the shortest eligible."""
    chosen, used = [], set()
    # room is kept for the sessions still to come, at the pool's shortest, so that the five fit
    # the budget together (a long early pick would otherwise push the last ones over it)
    shortest = min((len(render_dialogue(s)) for s in pool), default=0)
    for s in pool:
        room = (HISTORY_SIZE - len(chosen) - 1) * shortest
        if s.task_id not in used and len(render_history(chosen + [s])) + room <= budget * SIZE_SLACK:
            chosen.append(s)
            used.add(s.task_id)
            if len(chosen) == HISTORY_SIZE:
                return chosen
    # then the shortest eligible ones (for every condition: the pool's own order, say the
    # conflicting one's, already had its say in the pass above, and the size must stay near the budget)
    rest = sorted(pool, key=lambda s: (len(render_dialogue(s)), s.session_id))
    for s in rest:
        if s not in chosen and s.task_id not in used:
            chosen.append(s)
            used.add(s.task_id)
            if len(chosen) == HISTORY_SIZE:
                break
    return chosen


class _PerCell:
    """A condition whose context is the same for every target of a cell."""

    name = ""

    def __init__(self, seed: int = 0):
        self.seed = seed

    def pick(self, cell_id: str, data: LoadedDataset) -> list[Session]:
        raise NotImplementedError

    def contexts(self, targets, data, env=None):
        out = {}
        for cell_id, ts in by_cell(targets).items():
            hist = self.pick(cell_id, data)
            text = render_history(hist) if hist else ""
            for t in ts:
                out[t.session_id] = {"text": text, "sources": [s.session_id for s in hist]}
        return out


@register("none")
class NoHistory(_PerCell):
    name = "none"
    order = 0                    # where the report lists it (see base.py: what a condition declares)

    def pick(self, cell_id, data):
        return []


@register("same-user")
class SameUser(_PerCell):
    """The cell's five resolved history sessions, in order."""

    name = "same-user"
    order, family, baseline = 3, "main", "none"

    def pick(self, cell_id, data):
        return own_history(cell_id, data)


def _heldout_tasks(cell_id: str, data: LoadedDataset) -> set[str]:
    return {s.task_id for s in data.heldout.values() if s.cell_id == cell_id}


def _other_history(cell_id: str, data: LoadedDataset, keep: Callable[[Session], bool]) -> list[Session]:
    avoid = _heldout_tasks(cell_id, data)
    pool = [s for s in data.history.values() if s.cell_id != cell_id and s.task_id not in avoid and keep(s)]
    return sorted(pool, key=lambda s: s.session_id)


@register("shuffled")
class Shuffled(_PerCell):
    """Five history sessions of other users (another persona and another mechanism pair)."""

    name = "shuffled"
    order, family, baseline, paired_with = 1, "identity", "none", "same-user"

    def pick(self, cell_id, data):
        own = own_history(cell_id, data)
        me = own[0]
        pool = _other_history(cell_id, data, lambda s: s.persona_id != me.persona_id
                              and set(s.mechanisms) != set(me.mechanisms))
        rng_for(self.seed, "shuffled", cell_id).shuffle(pool)
        return sized_pick(pool, len(render_history(own)))


def conflicts(session: Session, target_profile: dict[str, str], dims: set[str], data: LoadedDataset) -> int:
    """How many of `dims` this history session's variant sets against the target's values, or -1
    when it agrees with the target on any of them (it would then show the right value)."""
    values = data.values_of(session)
    shared = [d for d in dims if d in values]
    if any(values[d] == target_profile.get(d) for d in shared):
        return -1
    return len(shared)


@register("conflicting")
class Conflicting(_PerCell):
    """Five history sessions of other users whose conventions differ from the target's on the
    dimensions the target's held-out tasks exercise: each one shows a *wrong* value for the
    target on every such dimension it touches, and as many of them as possible touch one."""

    name = "conflicting"
    order, family, baseline, paired_with = 2, "identity", "none", "same-user"

    def dims(self, cell_id: str, data: LoadedDataset) -> set[str]:
        return {d for s in data.heldout.values() if s.cell_id == cell_id for d in data.values_of(s)}

    def pick(self, cell_id, data):
        own = own_history(cell_id, data)
        cell = data.cells.get(cell_id)
        if cell is None:
            raise CapaError(f"{data.source}: no cells config entry for {cell_id} (the conflicting condition "
                            "needs the users' convention profiles)")
        dims = self.dims(cell_id, data)
        pool = _other_history(cell_id, data, lambda s: conflicts(s, cell.profile, dims, data) >= 0)
        rng_for(self.seed, "conflicting", cell_id).shuffle(pool)
        pool.sort(key=lambda s: -min(conflicts(s, cell.profile, dims, data), 2))   # stable: seeded within ties
        return sized_pick(pool, len(render_history(own)))
