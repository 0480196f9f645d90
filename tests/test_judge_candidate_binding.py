"""A reply's chosen function is the tests' `candidate` only: through CAPA's own extraction and
`SandboxJudge`, a reply whose function is named like a helper of the test or the prompt
(`poly`, `_close`, `encode_shift`, `encode_cyclic`) cannot replace that helper and fake a pass."""
from __future__ import annotations

import pytest

from capa_hf.evaluation.humaneval_source import blank_problem
from capa_hf.dataset.load import load_capa
from capa_hf.humaneval import load_tasks
from capa_hf.simulator.extraction import extract_submission
from capa_hf.simulator.judges import SandboxJudge
from capa_hf.simulator.problem import Problem


@pytest.fixture(scope="module")
def judge():
    with SandboxJudge(workers=1) as j:
        yield j


@pytest.fixture(scope="module")
def dataset():
    return load_capa()


def _variant_problem(ds, variant_id: str) -> Problem:
    """The committed dataset's problem for ``variant_id``, as the evaluator builds it."""
    session = next((s for s in list(ds.history.values()) + list(ds.heldout.values())
                    if s.variant_id == variant_id), None)
    if session is not None:
        return ds.problem(session)
    row, task = ds.variants[variant_id], ds.tasks[variant_id.split("@")[0]]
    return Problem(task_id=task.task_id, variant_id=variant_id, entry_point=task.entry_point,
                   test=row["test"], prelude=task.prompt, reference=row["reference"])


def _verdict(judge, problem: Problem, reply_code: str) -> tuple[str, dict]:
    sub = extract_submission(f"```python\n{reply_code}```", problem.entry_point)
    return sub.candidate, judge.run(sub, problem)


@pytest.mark.parametrize("variant_id, cheat, helper", [
    ("HumanEval/32@humaneval", "def poly(*a):\n    return 0.0\n", "poly"),
    ("HumanEval/2@humaneval", "def _close(*a):\n    return True\n", "_close"),
    ("HumanEval/4@humaneval", "def _close(*a):\n    return True\n", "_close"),
])
def test_a_reply_named_like_a_test_helper_fails_the_committed_variant_test(judge, dataset, variant_id, cheat,
                                                                           helper):
    problem = _variant_problem(dataset, variant_id)
    assert f"{helper}(" in problem.test   # the test itself calls the helper the reply is named like
    candidate, verdict = _verdict(judge, problem, cheat)
    assert candidate == helper            # the extraction chose the reply's root function
    assert verdict["status"] == "failed", verdict
    # the same problem, judged the same way, passes its reference
    assert judge.run(extract_submission(f"```python\n{problem.reference}```", problem.entry_point),
                     problem)["status"] == "passed"


@pytest.mark.parametrize("task_id, cheat", [
    ("HumanEval/50", "def encode_shift(s: str):\n    return s\n"),
    ("HumanEval/38", "def encode_cyclic(s: str):\n    return s\n"),
])
def test_an_identity_prompt_helper_fails_with_the_prompt_as_prelude(judge, task_id, cheat):
    task = load_tasks()[task_id]
    problem = blank_problem(task)   # HumanEval's own test, which calls the prompt's helper
    candidate, verdict = _verdict(judge, problem, cheat)
    assert candidate != task.entry_point
    assert verdict["status"] == "failed", verdict
    # a correct reply under another name is still the candidate, and passes
    ok = (task.prompt + task.canonical_solution).replace(f"def {task.entry_point}(", "def my_decoder(")
    candidate, verdict = _verdict(judge, problem, ok)
    assert candidate == "my_decoder" and verdict["status"] == "passed", verdict
