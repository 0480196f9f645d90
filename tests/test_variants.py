"""Task variants: specialization, test rendering, regeneration by differential execution, and
the refusals of `capa validate-content` (each shown to fire on a mutated source)."""

import ast
import math

import pytest

from capa_hf.content import load_content, load_dimensions
from capa_hf.humaneval import load_tasks
from capa_hf.variants.combos import parse_call, task_variants, variant_key
from capa_hf.variants.regenerate import regenerate
from capa_hf.variants.render import Expectation, literal, render_check
from capa_hf.variants.specialize import SpecializeError, specialize
from capa_hf.variants.store import variant_tests_of, write_tests
from capa_hf.variants.verify import verify_variants

REF = '''def f(xs):
    if not xs:
        if EMPTY_INPUT == "raise":
            raise ValueError("empty")
        if EMPTY_INPUT == "none":
            return None
    out = sorted(xs, reverse=SORT_ORDER == "descending")
    return tuple(out) if CONTAINER == "tuple" else out
'''
CONSTS = {"EMPTY_INPUT": "empty_input", "SORT_ORDER": "sort_order", "CONTAINER": "container"}


def test_specialize_folds_constants_and_drops_dead_branches():
    code = specialize(REF, {"EMPTY_INPUT": "raise", "SORT_ORDER": "ascending", "CONTAINER": "list"}, CONSTS)
    assert "EMPTY_INPUT" not in code and "None" not in code and "tuple" not in code
    assert "raise ValueError('empty')" in code and "reverse=False" in code
    neutral = specialize(REF, {"EMPTY_INPUT": "neutral", "SORT_ORDER": "descending", "CONTAINER": "tuple"}, CONSTS)
    assert "if not xs" not in neutral                      # the guard emptied by folding is gone
    ns = {}
    exec(neutral, ns)
    assert ns["f"]([1, 3, 2]) == (3, 2, 1) and ns["f"]([]) == ()


def test_specialize_refuses_assigned_or_undeclared_constants():
    with pytest.raises(SpecializeError, match="assigns"):
        specialize("CONTAINER = 'x'\ndef f():\n    return CONTAINER\n", {"CONTAINER": "list"}, CONSTS)
    with pytest.raises(SpecializeError, match="does not declare"):
        specialize(REF, {"CONTAINER": "list", "SORT_ORDER": "ascending"}, CONSTS)
    with pytest.raises(SpecializeError, match="does not parse"):
        specialize("def f(:\n", {}, CONSTS)


@pytest.mark.parametrize("value", [[1, (2,)], (1, [2.5, -0.0]), {"a": {1, 2}}, frozenset({3}), b"\x00x",
                                   float("inf"), -float("inf"), "it's", None, True, (), set()])
def test_literals_evaluate_back_to_the_same_type_and_value(value):
    back = eval(literal(value))
    assert back == value and type(back) is type(value)


def test_nan_and_tolerance_in_a_rendered_check():
    assert math.isnan(eval(literal(float("nan"))))
    src = render_check("t", [Expectation((1,), {}, value=0.5), Expectation((2,), {}, raises="ValueError")], 1e-6)
    ns = {}
    exec(src, ns)

    def good(x):
        if x == 2:
            raise ValueError
        return 0.5 + 1e-9
    ns["check"](good)                                     # within HumanEval's tolerance
    with pytest.raises(AssertionError, match="should raise ValueError"):
        ns["check"](lambda x: 0.5)
    with pytest.raises(AssertionError):
        ns["check"](lambda x: 0.6)


def test_parse_call_reads_argument_lists_and_names_bad_ones():
    assert parse_call("[1, 2], 3") == (([1, 2], 3), {})
    assert parse_call("'a', k=(1,)") == (("a",), {"k": (1,)})
    with pytest.raises(ValueError, match="only literals"):
        parse_call("foo()")
    with pytest.raises(ValueError, match="not a Python argument list"):
        parse_call("[1,")


@pytest.fixture(scope="module")
def pool():
    from sandbox import SandboxPool

    with SandboxPool(workers=2) as p:
        yield p


def _check(source, tmp_path, pool):
    content = load_content()
    tasks = load_tasks()
    dims = load_dimensions()
    res = regenerate({source.task_id: source}, tasks, dims, pool)[source.task_id]
    assert not res.errors, res.errors
    write_tests(res.to_json(task_variants(source, dims)), tmp_path)
    return verify_variants({source.task_id: source}, tasks, content.tasks, dims, pool, tests_folder=tmp_path)


def test_the_shipped_source_passes_and_mutations_are_refused(tmp_path, pool):
    src = load_content().variants["HumanEval/34"]
    assert _check(src, tmp_path / "ok", pool).errors == []
    # a reference that ignores the sort direction: descending's tests equal ascending's
    lazy = src.model_copy(update={"reference": src.reference.replace("SORT_ORDER", '"ascending"')})
    errors = _check(lazy, tmp_path / "lazy", pool).errors
    assert any("sort_order=ascending must fail sort_order=descending" in e and "not test-relevant" in e
               for e in errors), errors
    # a reference that disagrees with HumanEval at HumanEval's own values
    wrong = src.model_copy(update={"reference": src.reference.replace("set(l)", "list(l)")})
    errors = _check(wrong, tmp_path / "wrong", pool).errors
    assert any("against HumanEval's own test did not pass" in e for e in errors), errors
    # a "misreading" that is in fact the reference is refused
    same = src.model_copy(update={"misreadings": {"kp_02": src.reference}})
    report = _check(same, tmp_path / "same", pool)
    assert report.refused_keypoints == ["HumanEval/34:kp_02"]
    assert any("a misreading must fail the tests" in e for e in report.errors)


INDEPENDENT = {
    # written differently from the curated references, from the variant's description alone
    ("HumanEval/34", "container=tuple+empty_input=neutral+sort_order=descending"):
        "def unique(l):\n    seen = []\n    for x in l:\n        if x not in seen:\n            seen.append(x)\n"
        "    seen.sort()\n    return tuple(reversed(seen))\n",
    ("HumanEval/8", "container=list+empty_input=raise"):
        "import math\ndef sum_product(numbers):\n    if len(numbers) == 0:\n        raise ValueError('nothing')\n"
        "    return [sum(numbers), math.prod(numbers)]\n",
    ("HumanEval/29", "case=insensitive+container=list+duplicates=drop"):
        "def filter_by_prefix(strings, prefix):\n    out = []\n    p = prefix.casefold()\n"
        "    for s in strings:\n        if s[:len(p)].casefold() == p and s not in out:\n            out.append(s)\n"
        "    return out\n",
}


@pytest.mark.parametrize("task_id,key", sorted(INDEPENDENT))
def test_an_independent_correct_implementation_passes_the_regenerated_tests(task_id, key, pool):
    from capa_hf.variants.store import read_tests

    task = load_tasks()[task_id]
    tests = variant_tests_of(read_tests(task_id))
    assert key in tests and variant_key(dict(p.split("=") for p in key.split("+"))) == key
    v = pool.check(INDEPENDENT[(task_id, key)], tests[key], task.entry_point, prelude=task.prompt)
    assert v.passed, (v.status, v.failure)
    # and the canonical HumanEval solution fails these tests (the variant differs from HumanEval)
    v = pool.check(task.prompt + task.canonical_solution, tests[key], task.entry_point, prelude=task.prompt)
    assert not v.passed


def test_rendered_tests_parse_and_define_check():
    from capa_hf.variants.store import TESTS_DIR, read_tests

    for path in sorted(TESTS_DIR.glob("HumanEval_*.json"))[:40]:
        record = read_tests("HumanEval/" + path.stem.split("_")[1])
        for v in record["variants"]:
            tree = ast.parse(v["test"])
            assert any(isinstance(n, ast.FunctionDef) and n.name == "check" for n in tree.body)


def test_sessions_needing_a_non_humaneval_value_fail_canonical_and_pass_the_reference(capa_data, pool):
    """25 random held-out sessions whose variant is not HumanEval's behaviour: HumanEval's canonical
    solution fails the session's tests and the variant's reference passes them."""
    import random

    need = [s for s in sorted(capa_data.heldout.values(), key=lambda s: s.session_id)
            if not capa_data.variants[s.variant_id]["humaneval"]]
    assert len(need) >= 200
    for s in random.Random(25).sample(need, 25):
        p, task = capa_data.problem(s), capa_data.tasks[s.task_id]
        canonical = pool.check(task.prompt + task.canonical_solution, p.test, p.entry_point, prelude=p.prelude)
        reference = pool.check(p.reference, p.test, p.entry_point, prelude=p.prelude)
        assert canonical.status == "failed", (s.session_id, s.variant_id, canonical.status)
        assert reference.passed, (s.session_id, s.variant_id, reference.status, reference.failure)
