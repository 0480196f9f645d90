"""The balanced cell design: 60 users = 10 personas x 15 mechanism pairs, 10 tasks each.

Constraints (all asserted in tests/test_design.py):
- each persona in exactly 6 cells, each unordered mechanism pair in exactly 4 cells, so each
  persona meets every mechanism exactly twice;
- each cell has 10 distinct tasks; over the 600 sessions each task is used 3 or 4 times;
- v0.2: held-out tasks never appear in any history session (no answer key for pooled data);
  every held-out task exercises a convention dimension that a history session of the same cell
  exercised; at least 40% of held-out sessions can hide only conventions shown in the cell's
  history, through both of its mechanisms; each value of a dimension is the profile value of a
  balanced share of the cells.

Construction. The 15 pairs of 6 mechanisms split into 5 perfect matchings (a 1-factorization of
K6); walking those end to end in blocks of 6 gives each persona two whole matchings. Profiles
deal each dimension's values round-robin over a seeded order of the cells. Tasks: those that
exercise no dimension can only be history; the held-out pool takes the tasks with the most
dimensions, the history pool the rest. Each pool's seeded permutation, repeated, fills its
300 slots with a stride of 60 (copies of a task are |pool| slots apart, never in one cell).
A seeded hill climb then swaps slots between cells (which keeps every use count), reorders a
cell's history and swaps which mechanism obscures which dimension, until the coverage targets
hold. Every step is a pure function of the inputs and the seed.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

from capa_hf.defaults import (CELLS_PER_PERSONA, CONVENTION_ONLY_SHARE, HISTORY_REUSE_SHARE, HISTORY_SIZE,
                              N_CELLS, SESSIONS_PER_CELL)
from capa_hf.errors import CapaError
from capa_hf.schema import Cell

N_SLOTS = N_CELLS * HISTORY_SIZE          # 300 per split
CLIMB_STEPS = 120000
MIN_SUPPORT = 6           # history-pool tasks that must share a dimension with a held-out task


class DesignError(CapaError, ValueError):
    """The inputs cannot satisfy the design's constraints."""


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


def balanced_profiles(dimensions: Mapping[str, Sequence[str]], rng: random.Random) -> list[dict[str, str]]:
    """One value per dimension per cell; each value in floor or ceil of 60/k cells."""
    profiles: list[dict[str, str]] = [{} for _ in range(N_CELLS)]
    for dim in sorted(dimensions):
        values = list(dimensions[dim])
        order = list(range(N_CELLS))
        rng.shuffle(order)
        for i, c in enumerate(order):
            profiles[c][dim] = values[i % len(values)]
    return profiles


def _task_order(task_id: str):
    head, _, num = task_id.partition("/")
    return (head, int(num)) if num.isdigit() else (head, 0)


def split_pools(task_dims: Mapping[str, frozenset], rng: random.Random) -> tuple[list[str], list[str]]:
    """(history pool, held-out pool). Held-out tasks must exercise a dimension."""
    with_dims = sorted((t for t in task_dims if task_dims[t]), key=_task_order)
    without = sorted((t for t in task_dims if not task_dims[t]), key=_task_order)
    need = math.ceil(N_SLOTS / 4)                      # a task is used at most 4 times
    if len(with_dims) < need or len(task_dims) - need < need:
        raise DesignError(f"{len(with_dims)} tasks exercise a dimension; the held-out pool needs at least {need} "
                          f"and the history pool {need} more tasks")
    rng.shuffle(with_dims)
    # the held-out pool takes the tasks with the most dimensions, preferring dimensions that many
    # tasks share (a history can then show them), and as few tasks as it can (each used 4 times),
    # so that the history pool keeps many tasks with dimensions to reveal conventions
    popularity = {d: sum(1 for t in with_dims if d in task_dims[t]) for t in with_dims for d in task_dims[t]}
    with_dims.sort(key=lambda t: (-len(task_dims[t]), -max(popularity[d] for d in task_dims[t])))
    held: list[str] = []
    for t in with_dims:      # a held-out task needs enough history tasks that share one of its dimensions
        if len(held) == need:
            break
        support = sum(1 for u in with_dims if u != t and u not in held and task_dims[u] & task_dims[t])
        if support >= MIN_SUPPORT:
            held.append(t)
    if len(held) < need:     # fill up with the best supported of the rest
        rest = sorted((t for t in with_dims if t not in held),
                      key=lambda t: -sum(1 for u in with_dims if u != t and u not in held and task_dims[u] & task_dims[t]))
        held += rest[:need - len(held)]
    rest = [t for t in with_dims if t not in held]
    hist = rest + without
    return sorted(hist, key=_task_order), sorted(held, key=_task_order)


def pool_slots(pool: Sequence[str], task_dims: Mapping[str, frozenset], rng: random.Random) -> list[str]:
    """300 slots; the tasks met first in the permutation get the 4th use (tasks with dimensions first)."""
    perm = list(pool)
    rng.shuffle(perm)
    perm.sort(key=lambda t: -min(len(task_dims[t]), 1))
    reps = -(-N_SLOTS // len(perm))
    return (perm * reps)[:N_SLOTS]


@dataclass
class _State:
    """The mutable part of the design during the climb."""

    hist: list[list[str]]            # per cell, 5 history task ids in position order
    held: list[list[str]]            # per cell, 5 held-out task ids
    mech_of: list[dict[str, str]]    # per cell, dimension -> mechanism
    mechanisms: list[tuple[str, str]]
    dims: Mapping[str, frozenset]

    def revealed(self, c: int, upto: int = HISTORY_SIZE) -> frozenset:
        out: set = set()
        for t in self.hist[c][:upto]:
            out |= self.dims[t]
        return frozenset(out)

    def both(self, c: int, dims: frozenset) -> bool:
        return {self.mech_of[c][d] for d in dims} == set(self.mechanisms[c])

    def reuse_kind(self, c: int, k: int) -> str | None:
        """'strict' when every dimension of history task k was shown earlier in the cell and they
        span both mechanisms; 'single' when they were shown but use one mechanism; else None."""
        d = self.dims[self.hist[c][k]]
        if k == 0 or not d or not d <= self.revealed(c, k):
            return None
        return "strict" if self.both(c, d) else "single"

    def conv_kind(self, c: int, t: str) -> str | None:
        shown = self.dims[t] & self.revealed(c)
        if not shown:
            return None
        return "strict" if self.both(c, shown) else "single"

    def cell_score(self, c: int) -> tuple[int, int, int, int, int]:
        """(uncovered held-out, convention-only strict, ... single, reuse strict, ... single)."""
        held = [self.conv_kind(c, t) for t in self.held[c]]
        reuse = [self.reuse_kind(c, k) for k in range(HISTORY_SIZE)]
        return (held.count(None), held.count("strict"), held.count("single"),
                reuse.count("strict"), reuse.count("single"))


def _total(scores: list[tuple], target_co: int, target_ru: int) -> float:
    unc, co_s, co_1, ru_s, ru_1 = (sum(s[i] for s in scores) for i in range(5))
    return (-1000.0 * unc + 10.0 * min(co_s, target_co) + 4.0 * min(co_s + co_1, target_co)
            + 10.0 * min(ru_s, target_ru) + 4.0 * min(ru_s + ru_1, target_ru))


def _propose(state: _State, rng: random.Random):
    """A random move: (cells it touches, a function that undoes it), or None when not applicable."""
    move = rng.randrange(4)
    a, b = rng.randrange(N_CELLS), rng.randrange(N_CELLS)
    if move in (0, 1):                          # swap a slot between two cells of the same split
        rows = state.hist if move == 0 else state.held
        i, j = rng.randrange(HISTORY_SIZE), rng.randrange(HISTORY_SIZE)
        ta, tb = rows[a][i], rows[b][j]
        if a == b or tb in state.hist[a] + state.held[a] or ta in state.hist[b] + state.held[b]:
            return None
        rows[a][i], rows[b][j] = tb, ta

        def undo():
            rows[a][i], rows[b][j] = ta, tb
        return (a, b), undo
    if move == 2:                               # reorder a cell's history
        i, j = rng.randrange(HISTORY_SIZE), rng.randrange(HISTORY_SIZE)
        if i == j:
            return None
        h = state.hist[a]
        h[i], h[j] = h[j], h[i]

        def undo():
            h[i], h[j] = h[j], h[i]
        return (a,), undo
    m = state.mech_of[a]                        # swap which mechanism obscures two dimensions
    d1, d2 = rng.sample(sorted(m), 2)
    if m[d1] == m[d2]:
        return None
    m[d1], m[d2] = m[d2], m[d1]

    def undo():
        m[d1], m[d2] = m[d2], m[d1]
    return (a,), undo


def climb(state: _State, rng: random.Random, steps: int = CLIMB_STEPS) -> list[tuple[int, int, int]]:
    """Seeded hill climb (moves that do not lower the score are kept)."""
    target_co = math.ceil(CONVENTION_ONLY_SHARE * N_SLOTS) + 10
    target_ru = math.ceil(HISTORY_REUSE_SHARE * N_SLOTS) + 6
    scores = [state.cell_score(c) for c in range(N_CELLS)]
    best = _total(scores, target_co, target_ru)
    for _ in range(steps):
        proposal = _propose(state, rng)
        if proposal is None:
            continue
        touched, undo = proposal
        old = {c: scores[c] for c in touched}
        for c in touched:
            scores[c] = state.cell_score(c)
        new = _total(scores, target_co, target_ru)
        if new >= best:
            best = new
        else:
            undo()
            for c, s in old.items():
                scores[c] = s
    return scores


def _uncovered(state: _State, cells) -> int:
    return sum(state.cell_score(c)[0] for c in cells)


def _try_swap(state: _State, rows_a, i, rows_b, j, a: int, b: int) -> bool:
    """Swap rows_a[i] (cell a) with rows_b[j] (cell b) if that lowers the uncovered count."""
    ta, tb = rows_a[i], rows_b[j]
    if a == b or tb in state.hist[a] + state.held[a] or ta in state.hist[b] + state.held[b]:
        return False
    before = _uncovered(state, (a, b))
    rows_a[i], rows_b[j] = tb, ta
    if _uncovered(state, (a, b)) < before:
        return True
    rows_a[i], rows_b[j] = ta, tb
    return False


def repair_coverage(state: _State) -> None:
    """Fix what the climb left uncovered, deterministically: swap the uncovered held-out task
    with another cell's, or bring a history task that shows one of its dimensions into the
    cell (use counts stay as they are)."""
    for c in range(N_CELLS):
        for i in range(HISTORY_SIZE):
            if state.conv_kind(c, state.held[c][i]) is not None:
                continue
            done = any(_try_swap(state, state.held[c], i, state.held[c2], j, c, c2)
                       for c2 in range(N_CELLS) for j in range(HISTORY_SIZE))
            if not done:
                any(_try_swap(state, state.hist[c], k, state.hist[c2], k2, c, c2)
                    for k in range(HISTORY_SIZE) for c2 in range(N_CELLS) for k2 in range(HISTORY_SIZE))


def _teaches(state: _State, c: int, t: str, profile: Mapping[str, str] | None,
             humaneval_values: Mapping[str, Mapping[str, str]] | None) -> bool:
    """Whether a convention-only session of task t in cell c needs the history: a dimension the
    history showed takes a value other than HumanEval's (the task's defaults then fail)."""
    if profile is None or humaneval_values is None:
        return False
    he = humaneval_values.get(t, {})
    return any(profile[d] != he.get(d, profile[d]) for d in state.dims[t] & state.revealed(c))


def assign_roles(state: _State, rng: random.Random, profiles: Sequence[Mapping[str, str]] | None = None,
                 humaneval_values: Mapping[str, Mapping[str, str]] | None = None) -> list[list[str]]:
    """Per cell, the role of each of the 10 positions (see capa_hf.schema.cell.ROLE_DOC).

    Convention-only candidates that need the history (`_teaches`, when `profiles` and
    `humaneval_values` are given) come first; within each group, candidates whose conventions
    span both mechanisms come before single-mechanism ones, which fill up to the targets only
    when there are not enough of the first kind."""
    conv = {"strict": [], "single": []}
    reuse = {"strict": [], "single": []}
    for c in range(N_CELLS):
        for i, t in enumerate(state.held[c]):
            kind = state.conv_kind(c, t)
            if kind:
                conv[kind].append((c, i))
        for k in range(HISTORY_SIZE):
            kind = state.reuse_kind(c, k)
            if kind:
                reuse[kind].append((c, k))
    for lists in (conv, reuse):
        for v in lists.values():
            rng.shuffle(v)
    ranked = conv["strict"] + conv["single"]
    if profiles is not None and humaneval_values is not None:
        teach = {(c, i) for c, i in ranked if _teaches(state, c, state.held[c][i], profiles[c], humaneval_values)}
        ranked = [x for x in ranked if x in teach] + [x for x in ranked if x not in teach]
    conv_set = set(ranked[:math.ceil(CONVENTION_ONLY_SHARE * N_SLOTS)])
    reuse_set = set((reuse["strict"] + reuse["single"])[:math.ceil(HISTORY_REUSE_SHARE * N_SLOTS)])
    return [["reuse" if (c, k) in reuse_set else "learn" for k in range(HISTORY_SIZE)]
            + ["convention_only" if (c, i) in conv_set else "mixed" for i in range(HISTORY_SIZE)]
            for c in range(N_CELLS)]


def make_design(
    persona_ids: Sequence[str],
    mechanism_ids: Sequence[str],
    task_dims: Mapping[str, frozenset],
    dimensions: Mapping[str, Sequence[str]],
    seed: int = 0,
    patterns: Mapping[str, Sequence[str]] | None = None,
    humaneval_values: Mapping[str, Mapping[str, str]] | None = None,
    steps: int = CLIMB_STEPS,
) -> list[Cell]:
    """A pure function of its inputs: the same seed gives the same 60 cells. `steps` is the hill
    climb's length (the shipped design uses CLIMB_STEPS; fewer give a rougher, still valid design
    where the coverage repair can fix what the climb left).

    `task_dims` maps every task id to the dimensions it exercises; `dimensions` maps every
    dimension to its value ids. `humaneval_values` (task id -> dimension -> HumanEval's value)
    lets convention-only roles go first to sessions that need the history (see assign_roles).
    """
    if len(persona_ids) != 10 or len(set(persona_ids)) != 10:
        raise DesignError(f"need 10 distinct personas, got {list(persona_ids)}")
    if len(mechanism_ids) != 6 or len(set(mechanism_ids)) != 6:
        raise DesignError(f"need 6 distinct mechanisms, got {list(mechanism_ids)}")
    unknown = sorted({d for ds in task_dims.values() for d in ds} - set(dimensions))
    if unknown:
        raise DesignError(f"tasks name unknown dimensions {unknown}")
    rng = random.Random(f"capa-design-{seed}")
    personas = sorted(persona_ids)
    cycle = pair_cycle(sorted(mechanism_ids), rng)
    assert len(cycle) == len(list(combinations(mechanism_ids, 2)))
    mechanisms = [cycle[c % len(cycle)] for c in range(N_CELLS)]
    profiles = balanced_profiles(dimensions, rng)
    hist_pool, held_pool = split_pools(task_dims, rng)
    hist_slots = pool_slots(hist_pool, task_dims, rng)
    held_slots = pool_slots(held_pool, task_dims, rng)
    mech_of = []
    for c in range(N_CELLS):
        dims = sorted(dimensions)
        rng.shuffle(dims)
        mech_of.append({d: mechanisms[c][i % 2] for i, d in enumerate(dims)})
    state = _State(hist=[[hist_slots[c + N_CELLS * j] for j in range(HISTORY_SIZE)] for c in range(N_CELLS)],
                   held=[[held_slots[c + N_CELLS * j] for j in range(HISTORY_SIZE)] for c in range(N_CELLS)],
                   mech_of=mech_of, mechanisms=mechanisms, dims=task_dims)
    if steps < 0:
        raise DesignError(f"steps must be >= 0, got {steps}")
    climb(state, rng, steps)
    repair_coverage(state)                      # the coverage constraint is hard
    uncovered = [(f"C{c + 1:02d}", t) for c in range(N_CELLS) for t in state.held[c] if state.conv_kind(c, t) is None]
    if uncovered:
        raise DesignError(f"{len(uncovered)} held-out sessions exercise no dimension of their cell's history, "
                          f"e.g. {uncovered[:3]}")
    roles = assign_roles(state, rng, profiles, humaneval_values)
    cells = []
    for c in range(N_CELLS):
        chosen = {}
        for m in mechanisms[c]:
            options = list((patterns or {}).get(m, ()))
            if options:
                chosen[m] = options[rng.randrange(len(options))]
        cells.append(Cell(cell_id=f"C{c + 1:02d}", persona_id=personas[c // CELLS_PER_PERSONA],
                          mechanisms=mechanisms[c], task_ids=tuple(state.hist[c] + state.held[c]),
                          patterns=chosen, profile=profiles[c], dimension_mechanisms=state.mech_of[c],
                          roles=tuple(roles[c])))
    return cells


def design_stats(cells: Sequence[Cell], task_dims: Mapping[str, frozenset]) -> dict:
    """What the design achieved, for tests and `capa design`."""
    held_total = sum(SESSIONS_PER_CELL - HISTORY_SIZE for _ in cells)
    covered = conv = reuse = 0
    for cell in cells:
        rev: set = set()
        for t in cell.task_ids[:HISTORY_SIZE]:
            rev |= task_dims[t]
        covered += sum(1 for t in cell.task_ids[HISTORY_SIZE:] if task_dims[t] & rev)
        conv += sum(1 for r in cell.roles if r == "convention_only")
        reuse += sum(1 for r in cell.roles if r == "reuse")
    hist_tasks = {t for c in cells for t in c.task_ids[:HISTORY_SIZE]}
    held_tasks = {t for c in cells for t in c.task_ids[HISTORY_SIZE:]}
    return {"heldout_covered": covered, "heldout_total": held_total, "convention_only": conv,
            "reuse": reuse, "history_total": len(cells) * HISTORY_SIZE,
            "shared_tasks": len(hist_tasks & held_tasks)}


def default_design(seed: int = 0) -> list[Cell]:
    """The design over the shipped personas, mechanisms, dimensions and all 164 HumanEval tasks."""
    from capa_hf.content import load_content
    from capa_hf.humaneval import load_tasks

    content = load_content()
    return make_design(
        list(content.personas), list(content.mechanisms), task_dimensions(content, list(load_tasks())),
        {d.id: d.value_ids() for d in content.dimensions.values()}, seed=seed,
        patterns={m.id: [p.id for p in m.patterns] for m in content.mechanisms.values()},
        humaneval_values={t: dict(s.dimensions) for t, s in content.variants.items()},
    )


def task_dimensions(content, task_ids: Sequence[str]) -> dict[str, frozenset]:
    return {t: frozenset(content.variants[t].dimensions) if t in content.variants else frozenset()
            for t in task_ids}
