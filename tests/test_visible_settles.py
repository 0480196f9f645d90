"""A visible line must not settle a hidden item: the curated `settles` tags, the planner's use of
them, and the validate-content checks (capa_hf/variants/visible_settles.py)."""

import pytest

from capa_hf.content import load_content
from capa_hf.errors import CapaError
from capa_hf.generation.pipeline import World, plan_cells
from capa_hf.generation.stage1_plan import settlers
from capa_hf.schema.convention import VariantSource
from capa_hf.variants.visible_settles import (check_settles, data_type_problems, dimension_problems, keypoint_problems,
                                              result_part)


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


def _with_kp(tc, kid, **kw):
    return tc.model_copy(update={"keypoints": tuple(
        k.model_copy(update=kw) if k.id == kid else k for k in tc.keypoints)})


def _with_neutral(src, **lines):
    return src.model_copy(update={"neutral_plain": {**src.neutral_plain, **lines}})


@pytest.mark.parametrize("task,kp,vague,cue", [
    ("HumanEval/58", "kp_04", "Don't clutter it with repeats.", "clutter it with repeats"),
    ("HumanEval/7", "kp_02", "Keep the ones that have that bit in them.", "have that bit in them"),
    ("HumanEval/86", "kp_04", "Don't mess with the overall layout of the sentence.", "layout of the sentence"),
    ("HumanEval/133", "kp_02", "Total them up in the squared-ish way.", "squared-ish"),
    ("HumanEval/151", "kp_02", "Total up the odd-looking ones.", "odd-looking"),
    ("HumanEval/87", "kp_03", "Order them by row in the natural direction.", "in the natural direction"),
])
def test_a_stand_in_that_all_but_names_its_keypoint_is_refused(content, task, kp, vague, cue):
    tc, src = content.tasks[task], content.variants[task]
    assert keypoint_problems(tc, src) == []
    assert any(f"({cue!r})" in p for p in keypoint_problems(_with_kp(tc, kp, vague=vague), src))


def test_a_line_that_shows_the_result_kind_of_a_hidden_data_type_keypoint_is_refused(content):
    tc, src = content.tasks["HumanEval/3"], content.variants["HumanEval/3"]
    bad = _with_neutral(src, kp_04="When there are transactions and the balance never gets into trouble, return False.")
    assert any(p.startswith("kp_04 can show while kp_01 is hidden") for p in keypoint_problems(tc, bad))
    tagged = bad.model_copy(update={"settles": {**bad.settles, "kp_04": ("kp_01",)}})
    assert not any(p.startswith("kp_04") for p in keypoint_problems(tc, tagged))


@pytest.mark.parametrize("task,kp,line", [
    ("HumanEval/70", "kp_03", "An empty list returns an empty list."),
    ("HumanEval/88", "kp_04", "Leave the original list untouched and return a new one."),
])
def test_a_line_that_names_the_container_is_refused_while_the_container_is_hidden(content, task, kp, line):
    tc, src = content.tasks[task], content.variants[task]
    assert dimension_problems(tc, src) == []
    assert any(p.startswith(f"{kp} can show while container is hidden")
               for p in dimension_problems(tc, _with_neutral(src, **{kp: line})))


@pytest.mark.parametrize("task,tie,key,line", [
    ("HumanEval/116", "kp_03", "kp_02", "When two numbers have the same number of 1 bits, put the smaller value first."),
    ("HumanEval/149", "kp_04", "kp_03", "Strings with the same length are put in alphabetical order."),
])
def test_a_tie_break_line_that_names_the_main_sort_key_is_refused(content, task, tie, key, line):
    tc, src = content.tasks[task], content.variants[task]
    assert any(p.startswith(f"{tie} can show while {key} is hidden and breaks ties")
               for p in keypoint_problems(tc, _with_neutral(src, **{tie: line})))


def test_every_other_entry_left_alone_is_refused_while_another_rule_is_hidden(content):
    tc, src = content.tasks["HumanEval/142"], content.variants["HumanEval/142"]
    bad = _with_neutral(src, kp_04="Leave every other entry as it is, then return the sum of all entries.")
    assert any(p.startswith("kp_04 can show while kp_02 is hidden") for p in keypoint_problems(tc, bad))


def test_a_stated_sort_order_keeps_the_number_ordering_in_sight(plans):
    """HumanEval/19: 'from largest to smallest' orders digit words by number (settles kp_03: [kp_02]);
    kp_03 is the sort_order keypoint, in sight exactly when the order is stated."""
    w, all_plans = plans
    sessions = [p for p in all_plans.values() if p.task_id == "HumanEval/19"]
    stated = [p for p in sessions if "sort_order" in dict(p.stated)]
    assert stated
    for p in stated:
        assert "kp_02" not in {i.keypoint.id for i in p.items if i.kind == "task"}, p.session_id
