"""The balanced cell design: 60 users = 10 personas x 15 mechanism pairs, 10 tasks each.

Constraints (all asserted in tests/test_design.py):
- each persona in exactly 6 cells, each unordered mechanism pair in exactly 4 cells;
- each persona meets every mechanism exactly twice (a consequence of the construction);
- each cell has 10 distinct tasks; over the 600 sessions each task is used 3 or 4 times.

Construction: the 15 pairs of 6 mechanisms split into 5 perfect matchings (a 1-factorization
of K6). Laying the matchings end to end and walking that cycle of 15 pairs in blocks of 6 gives
each persona two whole matchings, so 6 distinct pairs covering each mechanism twice, and each
pair lands in 60/15 = 4 cells. Tasks fill the 600 slots from a seeded permutation repeated, cell c
taking slots c, c+60, ..., c+540; two copies of a task are 164 slots apart and lcm(60, 164) > 600,
so no cell repeats a task.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from itertools import combinations

from capa_hf.schema import Cell
from capa_hf.schema.cell import SESSIONS_PER_CELL

N_CELLS = 60
CELLS_PER_PERSONA = 6


def one_factorization(items: Sequence[str]) -> list[list[tuple[str, str]]]:
    """Round-robin 1-factorization of the complete graph on an even number of items."""
    n = len(items)
    if n % 2:
        raise ValueError(f"need an even number of mechanisms, got {n}")
    fixed, rest = items[0], list(items[1:])
    rounds = []
    for r in range(n - 1):
        rot = rest[r:] + rest[:r]
        pairs = [(fixed, rot[0])] + [(rot[i], rot[-i]) for i in range(1, n // 2)]
        rounds.append([tuple(sorted(p)) for p in pairs])
    return rounds


def pair_cycle(mechanisms: Sequence[str], rng: random.Random) -> list[tuple[str, str]]:
    mechs = list(mechanisms)
    rng.shuffle(mechs)
    rounds = one_factorization(mechs)
    rng.shuffle(rounds)
    for r in rounds:
        rng.shuffle(r)
    return [p for r in rounds for p in r]


def task_slots(task_ids: Sequence[str], n_slots: int, rng: random.Random) -> list[str]:
    perm = list(task_ids)
    rng.shuffle(perm)
    reps = -(-n_slots // len(perm))
    return (perm * reps)[:n_slots]


def make_design(
    persona_ids: Sequence[str],
    mechanism_ids: Sequence[str],
    task_ids: Sequence[str],
    seed: int = 0,
    patterns: dict[str, Sequence[str]] | None = None,
) -> list[Cell]:
    """A pure function of its inputs: the same seed gives the same 60 cells."""
    if len(persona_ids) != 10 or len(set(persona_ids)) != 10:
        raise ValueError(f"need 10 distinct personas, got {list(persona_ids)}")
    if len(mechanism_ids) != 6 or len(set(mechanism_ids)) != 6:
        raise ValueError(f"need 6 distinct mechanisms, got {list(mechanism_ids)}")
    if len(set(task_ids)) < SESSIONS_PER_CELL * 2:
        raise ValueError(f"need at least {SESSIONS_PER_CELL * 2} distinct tasks, got {len(set(task_ids))}")
    rng = random.Random(f"capa-design-{seed}")
    personas = sorted(persona_ids)
    cycle = pair_cycle(sorted(mechanism_ids), rng)
    assert len(cycle) == len(list(combinations(mechanism_ids, 2)))
    slots = task_slots(sorted(task_ids, key=_task_order), N_CELLS * SESSIONS_PER_CELL, rng)
    cells = []
    for c in range(N_CELLS):
        persona = personas[c // CELLS_PER_PERSONA]
        pair = cycle[c % len(cycle)]
        tasks = tuple(slots[c + N_CELLS * j] for j in range(SESSIONS_PER_CELL))
        chosen = {}
        for m in pair:
            options = list((patterns or {}).get(m, ()))
            if options:
                chosen[m] = options[rng.randrange(len(options))]
        cells.append(Cell(cell_id=f"C{c + 1:02d}", persona_id=persona, mechanisms=pair,
                          task_ids=tasks, patterns=chosen))
    return cells


def _task_order(task_id: str):
    head, _, num = task_id.partition("/")
    return (head, int(num)) if num.isdigit() else (head, 0)


def default_design(seed: int = 0) -> list[Cell]:
    """The design over the shipped personas, mechanisms and all 164 HumanEval tasks."""
    from capa_hf.content import load_mechanisms, load_personas
    from capa_hf.humaneval import load_tasks

    mechs = load_mechanisms()
    return make_design(
        list(load_personas()), list(mechs), list(load_tasks()), seed=seed,
        patterns={m.id: [p.id for p in m.patterns] for m in mechs.values()},
    )
