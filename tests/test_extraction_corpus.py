"""The style corpus (tests/data/extraction_corpus.yaml): replies written the way strong models
write them, each through the real extraction rule and the real sandbox against a HumanEval task,
each with the verdict a person would give it. One sandbox pool serves the whole module."""

from pathlib import Path

import pytest
import yaml

from capa_hf.humaneval import load_tasks
from capa_hf.simulator.extraction import extract_submission
from capa_hf.simulator.judges import SandboxJudge
from capa_hf.simulator.problem import Problem

CORPUS = yaml.safe_load((Path(__file__).parent / "data" / "extraction_corpus.yaml").read_text(encoding="utf-8"))
REQUIRED_STYLES = ("re.compile", "set(...)", "comprehension", "str.maketrans", "lru_cache", "static method",
                   "dataclass", "Enum", "nested", "__future__", "__main__", "doctest", "prints",
                   "helpers in one block", "followed by a pytest block", "renamed", "the sandbox lacks",
                   "while True", "input()", "sys.exit")


def problem_of(task_id: str) -> Problem:
    task = load_tasks()[task_id]
    return Problem(task_id=task_id, variant_id=task_id, entry_point=task.entry_point, test=task.test,
                   prelude=task.prompt, reference=task.prompt + task.canonical_solution)


@pytest.fixture(scope="module")
def judge():
    with SandboxJudge(workers=1) as j:
        yield j


def test_corpus_covers_every_style_the_issue_names():
    styles = " | ".join(case["style"] for case in CORPUS) + " | " + " | ".join(case["reply"] for case in CORPUS)
    assert [s for s in REQUIRED_STYLES if s not in styles] == []
    assert len({c["id"] for c in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("case", CORPUS, ids=[c["id"] for c in CORPUS])
def test_corpus_case(case, judge):
    problem = problem_of(case["task"])
    sub = extract_submission(case["reply"], problem.entry_point)
    assert sub is not None, "the reply must be a submission"
    expect = case["expect"]
    for key in ("candidate", "binding", "block_rule"):
        if key in expect:
            assert getattr(sub, key) == expect[key], key
    for text in case.get("kept", []):
        assert text in sub.code, f"{text!r} must run"
    for text in case.get("not_kept", []):
        assert text not in sub.code, f"{text!r} must not run"
    for text in case.get("dropped", []):
        assert any(text in d for d in sub.dropped), f"{text!r} must be recorded as dropped"
    verdict = judge.run(sub, problem)
    failure = verdict.get("failure") or {}
    assert verdict["status"] == expect["status"], (verdict["status"], failure, sub.code)
    if "failure_type" in expect:
        assert failure.get("type") == expect["failure_type"]
    if "message" in expect:
        assert expect["message"] in failure.get("message", "")
