"""A visible line must not settle a hidden item: the curated `settles` tags, the planner's use of
them, and the validate-content checks (capa_hf/variants/visible_settles.py)."""

import pytest

from capa_hf.content import load_content
from capa_hf.errors import CapaError
from capa_hf.generation.pipeline import World, plan_cells
from capa_hf.generation.stage1_plan import settlers
from capa_hf.schema.convention import VariantSource
from capa_hf.variants.visible_settles import check_settles, data_type_problems, dimension_problems, result_part


@pytest.fixture(scope="module")
def content():
    return load_content()


@pytest.fixture(scope="module")
def plans(design0):
    w = World.load()
    return w, plan_cells(list(design0), w, 0)


def test_the_curated_content_passes_every_settles_check(content):
    assert check_settles(content.tasks, content.variants) == []


def test_a_tagged_keypoint_is_never_hidden_while_its_settler_is_in_sight(plans):
    w, all_plans = plans
    checked = 0
    for plan in all_plans.values():
        src = w.content.variants[plan.task_id]
        hidden = {i.keypoint.id for i in plan.items if i.kind == "task"}
        visible = {k.id for k, _ in plan.visible} | {"gist"}
        for kp in hidden:
            checked += 1
            assert not settlers(src, kp) & visible, (plan.session_id, kp)
    assert checked > 100


def test_a_tagged_gist_keeps_its_keypoint_out_of_every_hidden_set(plans):
    w, all_plans = plans
    src = w.content.variants["HumanEval/12"]
    assert "kp_01" in src.settles["gist"]
    sessions = [p for p in all_plans.values() if p.task_id == "HumanEval/12"]
    assert sessions
    assert all("kp_01" not in {i.keypoint.id for i in p.items if i.kind == "task"} for p in sessions)


def _source(**kw):
    base = dict(task_id="HumanEval/40", dimensions={"empty_input": "neutral"}, reference="def f(l): return False")
    return VariantSource(**{**base, **kw})


def test_a_dimension_settled_by_a_visible_line_is_stated_not_hidden(content, design0):
    from capa_hf.generation.stage1_plan import CellMemory, plan_session
    cell = next(c for c in design0 if "HumanEval/40" in c.task_ids and "empty_input" in c.profile)
    pos = cell.task_ids.index("HumanEval/40") + 1
    tc, src = content.tasks["HumanEval/40"], content.variants["HumanEval/40"]
    tagged = src.model_copy(update={"settles": {"kp_03": ("empty_input",)}})
    for s in (src, tagged):
        plan = plan_session(cell, pos, tc, s, content.mechanisms, CellMemory(), 0)
        if s is tagged:
            assert "empty_input" not in plan.hidden_dimensions()
            assert ("empty_input", cell.profile["empty_input"]) in plan.stated


def test_a_tag_names_the_gist_or_a_keypoint_and_another_target():
    with pytest.raises(Exception, match="settles.kp_03"):
        _source(settles={"kp_03": ["kp_03"]})
    with pytest.raises(Exception, match="settles.nouns"):
        _source(settles={"nouns": ["kp_01"]})
    assert _source(settles={"gist": ["kp_01", "empty_input"]}).settles == {"gist": ("kp_01", "empty_input")}


def test_a_rule_that_covers_the_empty_input_is_refused_unless_guarded_or_tagged(content):
    tc = content.tasks["HumanEval/151"]
    bad = _source(task_id="HumanEval/151", neutral_plain={"kp_04": "If nothing qualifies, return 0."},
                  convention_keypoints={"kp_04": "empty_input"})
    assert any("nothing qualifies" in p for p in dimension_problems(tc, bad))
    guarded = bad.model_copy(update={"neutral_plain": {"kp_04": "If a non-empty list has nothing that qualifies, return 0."}})
    assert not any(p.startswith("kp_04") for p in dimension_problems(tc, guarded))
    tagged = bad.model_copy(update={"settles": {"kp_04": ("empty_input",)}})
    assert not any(p.startswith("kp_04") for p in dimension_problems(tc, tagged))


def test_a_line_that_reads_as_one_case_or_tie_value_is_refused(content):
    tc = content.tasks["HumanEval/48"]
    src = _source(task_id="HumanEval/48", dimensions={"case": "sensitive"},
                  neutral_plain={"kp_03": "Compare the string exactly as given, without dropping spaces."})
    assert any("case is hidden" in p and "exactly as given" in p for p in dimension_problems(tc, src))


def test_a_data_type_stand_in_may_not_name_the_result_kind(content):
    tc = content.tasks["HumanEval/0"]
    src = content.variants["HumanEval/0"]
    kp = next(k for k in tc.keypoints if k.id == "kp_01")
    said = tc.model_copy(update={"keypoints": tuple(
        k.model_copy(update={"vague": "Feed it the readings and have it tell me yes or no."}) if k is kp else k
        for k in tc.keypoints)})
    assert any("'yes'" in p for p in data_type_problems(said, src))
    assert data_type_problems(tc, src) == []
    assert result_part("Give it a number and get the answer back.") == "get the answer back."
