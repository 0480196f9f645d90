from collections import Counter
from itertools import combinations

import pytest

from capa_hf.design import make_design, one_factorization

PERSONAS = [f"P{i:02d}" for i in range(1, 11)]
MECHS = ["a", "b", "c", "d", "e", "f"]
TASKS = [f"HumanEval/{i}" for i in range(164)]


@pytest.fixture(scope="module", params=[0, 1, 7])
def cells(request):
    return make_design(PERSONAS, MECHS, TASKS, seed=request.param)


def test_sixty_cells_with_ten_sessions(cells):
    assert len(cells) == 60
    assert len({c.cell_id for c in cells}) == 60
    assert all(len(c.task_ids) == 10 for c in cells)


def test_each_persona_in_six_cells(cells):
    assert Counter(c.persona_id for c in cells) == {p: 6 for p in PERSONAS}


def test_each_pair_in_four_cells(cells):
    counts = Counter(c.mechanisms for c in cells)
    assert set(counts) == {tuple(sorted(p)) for p in combinations(MECHS, 2)}
    assert set(counts.values()) == {4}


def test_persona_meets_each_mechanism_twice_with_distinct_pairs(cells):
    for p in PERSONAS:
        mine = [c.mechanisms for c in cells if c.persona_id == p]
        assert len(set(mine)) == 6
        assert Counter(m for pair in mine for m in pair) == {m: 2 for m in MECHS}


def test_tasks_spread_evenly_and_never_repeat_in_a_cell(cells):
    use = Counter(t for c in cells for t in c.task_ids)
    assert set(use) == set(TASKS)
    assert set(use.values()) <= {3, 4}
    assert sum(use.values()) == 600
    assert all(len(set(c.task_ids)) == 10 for c in cells)


def test_same_seed_same_design_other_seed_differs():
    a = make_design(PERSONAS, MECHS, TASKS, seed=3)
    b = make_design(PERSONAS, MECHS, TASKS, seed=3)
    c = make_design(PERSONAS, MECHS, TASKS, seed=4)
    assert a == b
    assert a != c


def test_patterns_are_fixed_per_cell_from_the_options():
    cells = make_design(PERSONAS, MECHS, TASKS, seed=0, patterns={m: ["x", "y"] for m in MECHS})
    for c in cells:
        assert set(c.patterns) == set(c.mechanisms)
        assert set(c.patterns.values()) <= {"x", "y"}
    assert {v for c in cells for v in c.patterns.values()} == {"x", "y"}


def test_one_factorization_covers_every_pair_once():
    rounds = one_factorization(MECHS)
    assert len(rounds) == 5
    for r in rounds:
        assert sorted(m for p in r for m in p) == MECHS
    assert sorted(p for r in rounds for p in r) == sorted(tuple(sorted(p)) for p in combinations(MECHS, 2))


@pytest.mark.parametrize("bad", [
    dict(persona_ids=PERSONAS[:9]),
    dict(mechanism_ids=MECHS[:5]),
    dict(task_ids=TASKS[:5]),
])
def test_bad_inputs_are_named(bad):
    kwargs = dict(persona_ids=PERSONAS, mechanism_ids=MECHS, task_ids=TASKS) | bad
    with pytest.raises(ValueError) as exc:
        make_design(**kwargs)
    assert any(w in str(exc.value) for w in ("personas", "mechanisms", "tasks"))
