"""Hidden means hidden: a misreading that fails a visible sentence's stated example is refused."""

import pytest

from capa_hf.content import load_content
from capa_hf.data_files import parse_record
from capa_hf.errors import DataFileError
from capa_hf.generation.stage1_plan import CellMemory, plan_session
from capa_hf.humaneval import load_tasks
from capa_hf.variants.visible_examples import (ExampleCheck, KeypointExamples, check_examples,
                                               load_keypoint_examples)


@pytest.fixture(scope="module")
def pool():
    from sandbox import SandboxPool

    with SandboxPool(workers=2) as p:
        yield p


@pytest.fixture(scope="module")
def content():
    return load_content()


def test_an_example_must_be_a_python_expression_of_a_known_source(tmp_path):
    with pytest.raises(DataFileError, match="examples"):
        parse_record(KeypointExamples, {"task_id": "HumanEval/34", "examples": {"kp_02": ["candidate(["]}},
                     tmp_path / "HumanEval_34.yaml")
    with pytest.raises(DataFileError, match="neither 'gist' nor a keypoint id"):
        parse_record(KeypointExamples, {"task_id": "HumanEval/34", "examples": {"title": ["True"]}},
                     tmp_path / "HumanEval_34.yaml")


def test_the_count_misreading_of_unique_values_is_refused_by_the_collapsed_repeats_sentence(content, pool):
    # C10-S07 of v0.2: "each distinct value appears exactly once in the result" rules out len(set(l))
    tid = "HumanEval/34"
    ex = load_keypoint_examples()
    check = check_examples({tid: ex[tid]}, content.variants, load_tasks(), content.tasks, content.dimensions, pool)
    assert check.errors == []
    for values in ({"container": "tuple", "sort_order": "descending", "empty_input": "raise"},
                   {"container": "list", "sort_order": "ascending", "empty_input": "neutral"}):
        assert check.refused_by(tid, values, "kp_01") == {"kp_02"}
        assert check.refused_by(tid, values, "kp_02") == frozenset()   # kp_02's own example does not count


def test_an_example_the_reference_fails_is_a_content_error(content, pool):
    tid = "HumanEval/34"
    wrong = KeypointExamples(task_id=tid, examples={"kp_02": ("list(candidate([3, 1, 3])) == [3, 1]",)})
    check = check_examples({tid: wrong}, content.variants, load_tasks(), content.tasks, content.dimensions, pool)
    assert check.errors and all("keypoint_examples/HumanEval_34.yaml" in e and "kp_02" in e for e in check.errors)


def test_every_committed_example_holds_under_every_variant(content, pool):
    ex = load_keypoint_examples()
    assert len(ex) >= 30
    check = check_examples(ex, content.variants, load_tasks(), content.tasks, content.dimensions, pool)
    assert check.errors == []
    assert check.refused_pairs() > 0


def _plans(content, tid, check, n=200):
    """Plans of `tid` in every design cell position that takes task items, under `check`."""
    from capa_hf.design import default_design

    out = []
    for cell in default_design(0):
        for pos in (1, 6, 7):
            cell_t = cell.model_copy(update={"task_ids": tuple(tid if i == pos - 1 else t
                                                              for i, t in enumerate(cell.task_ids))})
            out.append(plan_session(cell_t, pos, content.tasks[tid], content.variants[tid], content.mechanisms,
                                    CellMemory(), 0, check))
    return out[:n]


def test_a_refused_keypoint_is_hidden_only_when_its_refuting_sentence_is_hidden_too(content):
    tid = "HumanEval/40"      # kp_02 (a triple, not a pair) is refuted by kp_03's "fewer than three numbers"
    refuse = ExampleCheck(refusals={(tid, f"empty_input={v}"): {"kp_02": frozenset({"kp_03"})}
                                    for v in ("neutral", "none", "raise")})
    free, guarded = _plans(content, tid, None), _plans(content, tid, refuse)
    hid = lambda p, k: any(i.kind == "task" and i.keypoint.id == k for i in p.items)   # noqa: E731
    assert any(hid(p, "kp_02") and not hid(p, "kp_03") for p in free)       # v0.2 hid it in plain sight
    assert not any(hid(p, "kp_02") and not hid(p, "kp_03") for p in guarded)
    assert any("kp_02" in p.refused for p in guarded)
    assert not any("kp_02" in p.refused for p in free)   # (kp_01, the bool result, is refused by a stated "return False")


def test_a_return_type_item_stays_visible_when_the_request_speaks_of_the_container(content):
    tid = "HumanEval/34"      # kp_01 (data_type) and a container dimension
    for p in _plans(content, tid, None):
        container_named = any(d == "container" for d, _ in p.stated) or any(
            i.dimension == "container" and i.mechanism.operation != "remove" for i in p.items)
        if container_named:
            assert not any(i.kind == "task" and i.keypoint.category == "data_type" for i in p.items), p.session_id
