"""`neutral` only where it is knowable: the natural empty result, and who may hide it."""

import pytest

from capa_hf.defaults import HISTORY_SIZE
from capa_hf.errors import DataFileError
from capa_hf.generation.empty_results import empty_kinds, knowable, load_empty_results, result_kind


def test_result_kinds():
    assert [result_kind(r) for r in ([], (), {}, "", 0)] == [
        "empty container", "empty container", "empty container", "empty string", "zero"]
    assert [result_kind(r) for r in (False, True, -1, 1, (0, 1), "d41d8")] == [
        "bool", "bool", "sentinel", "sentinel", "other", "other"]
    assert knowable("zero") and not knowable("bool") and not knowable("sentinel")


def test_every_task_with_an_empty_input_dimension_has_a_recorded_empty_result():
    from capa_hf.content import load_content

    kinds = empty_kinds()
    with_dim = {t for t, s in load_content().variants.items() if "empty_input" in s.dimensions}
    assert with_dim == set(kinds)
    assert kinds["HumanEval/109"] == "bool" and kinds["HumanEval/135"] == "sentinel"
    assert kinds["HumanEval/34"] == "empty container"


def test_an_unreadable_result_is_named(tmp_path):
    path = tmp_path / "empty_results.yaml"
    path.write_text("tasks:\n  HumanEval/1:\n    call: \"''\"\n    result: \"[\"\n")
    with pytest.raises(DataFileError, match="tasks.HumanEval/1.result"):
        load_empty_results(path)


def test_recorded_results_hold_in_the_sandbox():
    from sandbox import SandboxPool

    from capa_hf.content import load_content
    from capa_hf.validate_content import check_empty_results

    with SandboxPool(workers=2) as pool:
        assert check_empty_results(load_content(), pool) == []


def test_heldout_plans_hide_an_unknowable_neutral_only_after_history_showed_that_kind():
    from capa_hf.design import default_design
    from capa_hf.generation.pipeline import World, plan_cells

    kinds = empty_kinds()
    cells = default_design(0)
    plans = plan_cells(cells, World.load(), 0)
    hidden_unknowable = 0
    for cell in cells:
        shown_kinds = set()
        for pos in range(1, 11):
            p = plans[f"{cell.cell_id}-S{pos:02d}"]
            kind = kinds.get(p.task_id)
            neutral = dict(p.values).get("empty_input") == "neutral"
            hides = any(i.dimension == "empty_input" for i in p.items)
            if pos <= HISTORY_SIZE:
                shows = any(i.dimension == "empty_input" and not i.apply_unasked for i in p.items) or any(
                    d == "empty_input" for d, _ in p.stated)
                if neutral and shows:
                    shown_kinds.add(kind)
            elif neutral and hides and not knowable(kind):
                hidden_unknowable += 1
                assert kind in shown_kinds, (p.session_id, kind, shown_kinds)
    assert hidden_unknowable > 0          # the history route is used, not only the knowable one
