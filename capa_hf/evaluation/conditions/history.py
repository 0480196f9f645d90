"""History conditions: what the model under test sees before the new request.

A condition is tiny: given the held-out targets and the dataset, it returns the text that goes
into the system message of each target's conversation. Register new ones (memory systems,
gates) with `@register("name")`; the episode never changes.
"""

from __future__ import annotations

from typing import Callable, Protocol, Sequence

from capa_hf.dataset.load import LoadedDataset
from capa_hf.errors import CapaError
from capa_hf.generation.seeding import rng_for
from capa_hf.prompts import fill, prompt_text
from capa_hf.schema import Session

HISTORY_SIZE = 5


class Condition(Protocol):
    name: str

    def contexts(self, targets: Sequence[Session], data: LoadedDataset) -> dict[str, dict]:
        """session_id -> {"text": context for the system message, "sources": [session ids]}."""


_REGISTRY: dict[str, Callable[..., Condition]] = {}


def register(name: str):
    def deco(factory):
        _REGISTRY[name] = factory
        return factory
    return deco


def known_conditions() -> list[str]:
    return sorted(_REGISTRY)


def get_condition(name: str, seed: int = 0) -> Condition:
    if name not in _REGISTRY:
        raise CapaError(f"unknown condition {name!r}; expected one of {', '.join(known_conditions())}")
    return _REGISTRY[name](seed=seed)


# Stop sequences for the model under test: a reply ends where it would start to write the next
# turn of a rendered history (small models continue transcripts they were shown).
HISTORY_STOPS = ("<user>", "</assistant>", "<session")


def render_dialogue(session: Session) -> str:
    return "\n".join(f"<{t.role}>\n{t.content}\n</{t.role}>" for t in session.turns)


def render_history(sessions: Sequence[Session]) -> str:
    """The same rendering for same-user and shuffled histories (and any future source)."""
    parts = [prompt_text("history_header")]
    for i, s in enumerate(sessions, 1):
        parts.append(fill("history_session", index=str(i), dialogue=render_dialogue(s)))
    parts.append(prompt_text("history_footer"))
    return "\n\n".join(parts)


@register("none")
class NoHistory:
    name = "none"

    def __init__(self, seed: int = 0):
        self.seed = seed

    def contexts(self, targets, data):
        return {t.session_id: {"text": "", "sources": []} for t in targets}


@register("same-user")
class SameUser:
    """The cell's five resolved history sessions, in order; identical for every target of a cell."""

    name = "same-user"

    def __init__(self, seed: int = 0):
        self.seed = seed

    def contexts(self, targets, data):
        out = {}
        for t in targets:
            hist = data.cell_history(t.cell_id)
            if len(hist) != HISTORY_SIZE:
                raise CapaError(f"cell {t.cell_id} has {len(hist)} history sessions, expected {HISTORY_SIZE}")
            out[t.session_id] = {"text": render_history(hist), "sources": [s.session_id for s in hist]}
        return out


@register("shuffled")
class Shuffled:
    """Five history sessions of other users (another persona and another mechanism pair), chosen by
    seed per cell, never on a task the cell is evaluated on, and sized like the cell's own history."""

    name = "shuffled"

    def __init__(self, seed: int = 0):
        self.seed = seed

    def pick(self, cell_id: str, data: LoadedDataset, avoid_tasks: set[str]) -> list[Session]:
        own = data.cell_history(cell_id)
        budget = len(render_history(own))
        me = own[0]
        pool = [s for s in data.history.values()
                if s.cell_id != cell_id and s.persona_id != me.persona_id
                and set(s.mechanisms) != set(me.mechanisms) and s.task_id not in avoid_tasks]
        pool.sort(key=lambda s: s.session_id)
        rng_for(self.seed, "shuffled", cell_id).shuffle(pool)
        chosen, used_tasks = [], set()
        for s in pool:
            if s.task_id not in used_tasks and len(render_history(chosen + [s])) <= budget * 1.15:
                chosen.append(s)
                used_tasks.add(s.task_id)
                if len(chosen) == HISTORY_SIZE:
                    break
        if len(chosen) < HISTORY_SIZE:  # budget too tight: fill with the shortest eligible sessions
            for s in sorted(pool, key=lambda s: (len(render_dialogue(s)), s.session_id)):
                if s not in chosen and s.task_id not in used_tasks:
                    chosen.append(s)
                    used_tasks.add(s.task_id)
                    if len(chosen) == HISTORY_SIZE:
                        break
        return chosen

    def contexts(self, targets, data):
        out = {}
        by_cell: dict[str, list[Session]] = {}
        for t in targets:
            by_cell.setdefault(t.cell_id, []).append(t)
        for cell_id, ts in by_cell.items():
            avoid = {s.task_id for s in data.heldout.values() if s.cell_id == cell_id}
            hist = self.pick(cell_id, data, avoid)
            text = render_history(hist)
            for t in ts:
                out[t.session_id] = {"text": text, "sources": [s.session_id for s in hist]}
        return out
