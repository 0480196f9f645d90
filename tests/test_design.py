"""The balanced cell design: every constraint of capa_hf/design.py, for several seeds."""

import random
from collections import Counter
from itertools import combinations

import pytest

from capa_hf.defaults import HISTORY_SIZE, MIN_CONVENTION_ONLY_SHARE
from capa_hf.design import DesignError, design_stats, make_design, one_factorization

PERSONAS = [f"P{i:02d}" for i in range(1, 11)]
MECHS = ["a", "b", "c", "d", "e", "f"]
TASKS = [f"HumanEval/{i}" for i in range(164)]
DIMS = {"container": ("list", "tuple"), "sort": ("asc", "desc"), "empty": ("neutral", "none", "raise"),
        "case": ("sensitive", "insensitive"), "ties": ("first", "last"), "bounds": ("strict", "inclusive"),
        "index": ("zero", "one"), "split": ("ws", "single"), "dups": ("keep", "drop")}


def synthetic_dims(seed: int) -> dict:
    """About three tasks in four exercise one to three dimensions, as the curated corpus does."""
    rng = random.Random(seed)
    names = sorted(DIMS)
    out = {}
    for t in TASKS:
        r = rng.random()
        n = 0 if r < 0.25 else 1 if r < 0.55 else 2 if r < 0.85 else 3
        out[t] = frozenset(rng.sample(names, n))
    return out


@pytest.fixture(scope="module", params=[0, 1, 7])
def world(request):
    dims = synthetic_dims(request.param)
    return make_design(PERSONAS, MECHS, dims, DIMS, seed=request.param), dims


def test_sixty_cells_with_ten_sessions(world):
    cells, _ = world
    assert len(cells) == 60 and len({c.cell_id for c in cells}) == 60
    assert all(len(c.task_ids) == 10 and len(set(c.task_ids)) == 10 for c in cells)


def test_each_persona_in_six_cells_each_pair_in_four(world):
    cells, _ = world
    assert Counter(c.persona_id for c in cells) == {p: 6 for p in PERSONAS}
    counts = Counter(c.mechanisms for c in cells)
    assert set(counts) == {tuple(sorted(p)) for p in combinations(MECHS, 2)} and set(counts.values()) == {4}


def test_persona_meets_each_mechanism_twice_with_distinct_pairs(world):
    cells, _ = world
    for p in PERSONAS:
        mine = [c.mechanisms for c in cells if c.persona_id == p]
        assert len(set(mine)) == 6
        assert Counter(m for pair in mine for m in pair) == {m: 2 for m in MECHS}


def test_tasks_used_three_or_four_times(world):
    cells, _ = world
    use = Counter(t for c in cells for t in c.task_ids)
    assert set(use.values()) <= {3, 4} and sum(use.values()) == 600


def test_heldout_tasks_never_appear_in_history(world):
    cells, _ = world
    hist = {t for c in cells for t in c.task_ids[:HISTORY_SIZE]}
    held = {t for c in cells for t in c.task_ids[HISTORY_SIZE:]}
    assert not hist & held


def test_every_heldout_task_exercises_a_dimension_its_history_exercised(world):
    cells, dims = world
    for c in cells:
        shown = set().union(*(dims[t] for t in c.task_ids[:HISTORY_SIZE]))
        for t in c.task_ids[HISTORY_SIZE:]:
            assert dims[t] & shown, (c.cell_id, t)


def test_profiles_are_balanced(world):
    cells, _ = world
    for dim, values in DIMS.items():
        counts = Counter(c.profile[dim] for c in cells)
        assert set(counts) == set(values)
        if len(values) == 2:
            assert all(24 <= n <= 36 for n in counts.values()), (dim, counts)
        else:
            assert all(n == 20 for n in counts.values()), (dim, counts)


def test_each_dimension_is_obscured_by_one_of_the_cells_mechanisms(world):
    cells, _ = world
    for c in cells:
        assert set(c.dimension_mechanisms) == set(DIMS)
        assert set(c.dimension_mechanisms.values()) == set(c.mechanisms)


def test_roles_meet_the_convention_only_share_and_are_sound(world):
    cells, dims = world
    stats = design_stats(cells, dims)
    assert stats["convention_only"] >= MIN_CONVENTION_ONLY_SHARE * stats["heldout_total"]
    for c in cells:
        shown = set().union(*(dims[t] for t in c.task_ids[:HISTORY_SIZE]))
        for pos, role in enumerate(c.roles, 1):
            t = c.task_ids[pos - 1]
            if role == "convention_only":
                assert dims[t] & shown
            if role == "reuse":       # every dimension of the task was exercised earlier in the cell
                earlier = set().union(*(dims[x] for x in c.task_ids[:pos - 1]))
                assert dims[t] and dims[t] <= earlier


SHORT_CLIMB = 2000   # a shorter hill climb than the shipped design's: the same pure function, 60x cheaper


def test_same_seed_same_design_other_seed_differs():
    dims = synthetic_dims(3)
    a = make_design(PERSONAS, MECHS, dims, DIMS, seed=3, steps=SHORT_CLIMB)
    assert a == make_design(PERSONAS, MECHS, dims, DIMS, seed=3, steps=SHORT_CLIMB)
    assert a != make_design(PERSONAS, MECHS, dims, DIMS, seed=4, steps=SHORT_CLIMB)
    assert a != make_design(PERSONAS, MECHS, dims, DIMS, seed=3, steps=SHORT_CLIMB + 1000)   # the climb moves
    with pytest.raises(DesignError, match="steps must be >= 0"):
        make_design(PERSONAS, MECHS, dims, DIMS, seed=3, steps=-1)


def test_too_few_tasks_with_dimensions_is_refused():
    dims = {t: (frozenset({"case"}) if i < 40 else frozenset()) for i, t in enumerate(TASKS)}
    with pytest.raises(DesignError, match="40 tasks exercise a dimension"):
        make_design(PERSONAS, MECHS, dims, DIMS)


def test_bad_inputs_are_named():
    dims = synthetic_dims(0)
    with pytest.raises(ValueError, match="10 distinct personas"):
        make_design(PERSONAS[:9], MECHS, dims, DIMS)
    with pytest.raises(ValueError, match="6 distinct mechanisms"):
        make_design(PERSONAS, MECHS[:5], dims, DIMS)
    with pytest.raises(DesignError, match="unknown dimensions"):
        make_design(PERSONAS, MECHS, {**dims, TASKS[0]: frozenset({"colour"})}, DIMS)


def test_one_factorization_covers_every_pair_once():
    rounds = one_factorization(MECHS)
    assert len(rounds) == 5
    pairs = [p for r in rounds for p in r]
    assert sorted(pairs) == sorted(tuple(sorted(p)) for p in combinations(MECHS, 2))
    for r in rounds:
        assert sorted(m for p in r for m in p) == sorted(MECHS)


def test_the_shipped_design_meets_every_constraint(design0):
    from capa_hf.content import load_content
    from capa_hf.design import task_dimensions
    from capa_hf.humaneval import load_tasks

    dims = task_dimensions(load_content(), list(load_tasks()))
    cells = list(design0)
    stats = design_stats(cells, dims)
    assert stats["heldout_covered"] == stats["heldout_total"] == 300
    assert stats["shared_tasks"] == 0
    assert stats["convention_only"] >= MIN_CONVENTION_ONLY_SHARE * 300
