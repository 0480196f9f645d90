"""Stage 1: information controls and the template realizer."""

import re

import pytest

from capa_hf.content import load_content
from capa_hf.design import default_design
from capa_hf.generation.consistency import check_leaks, check_mechanisms, check_voice
from capa_hf.generation.controls import plan_controls
from capa_hf.generation.pipeline import stage1
from capa_hf.generation.realizer import TemplateRealizer, casual_case
from capa_hf.humaneval import load_tasks


@pytest.fixture(scope="module")
def world():
    return load_content(), load_tasks(), default_design(0)


def test_every_session_hides_something_from_each_mechanism(world):
    content, tasks, cells = world
    for cell in cells:
        for tid in cell.task_ids:
            plan = plan_controls(content.tasks[tid], [content.mechanisms[m] for m in cell.mechanisms], cell.patterns)
            assert plan.actions, (cell.cell_id, tid)                      # C_req is not a subset of C_L
            assert {a.mechanism.id for a in plan.actions} == set(cell.mechanisms)
            assert len(plan.actions) + len(plan.visible) == len(content.tasks[tid].keypoints)


def test_pattern_decides_which_category_is_taken_first(world):
    content, _, _ = world
    slm = content.mechanisms["structural_logic"]
    tc = next(t for t in content.tasks.values()
              if {k.category for k in t.keypoints} >= {"boundary_condition", "logical_control"})
    edges = plan_controls(tc, [slm, content.mechanisms["context_defocus"]], {"structural_logic": "edges_blurred"})
    flow = plan_controls(tc, [slm, content.mechanisms["context_defocus"]], {"structural_logic": "flow_blurred"})
    cat = lambda plan: {a.keypoint.category for a in plan.actions if a.mechanism.id == "structural_logic"}
    assert cat(edges) == {"boundary_condition"} and cat(flow) == {"logical_control"}


def test_requests_keep_voice_hide_items_and_are_deterministic(world):
    content, tasks, cells = world
    realizer = TemplateRealizer()
    for cell in cells[::7]:
        persona = content.personas[cell.persona_id]
        for pos in (1, 6):
            d = stage1(cell, pos, tasks[cell.task_ids[pos - 1]], content, realizer, seed=0, attempt=0)
            again = stage1(cell, pos, tasks[cell.task_ids[pos - 1]], content, realizer, seed=0, attempt=0)
            assert d.realization == again.realization
            kps = {k.id: k for k in content.tasks[d.task.task_id].keypoints}
            hidden = {h.keypoint_id for h in d.realization.hidden_items}
            visible = [content.tasks[d.task.task_id].gist] + [k.plain for k in kps.values() if k.id not in hidden]
            req = d.realization.initial_request
            assert check_voice(req, persona).ok
            assert check_mechanisms(d.realization.hidden_items, cell).ok
            assert check_leaks(req, d.realization.hidden_items, kps, visible).ok
            if "_" in d.task.entry_point:  # the request never names the function (plain words may occur)
                assert d.task.entry_point not in req


def test_a_cell_keeps_its_phrase_family_across_sessions(world):
    content, tasks, cells = world
    cell = next(c for c in cells if "habitual_omission" in c.mechanisms)
    families = set()
    for pos in range(1, 11):
        d = stage1(cell, pos, tasks[cell.task_ids[pos - 1]], content, TemplateRealizer(), seed=0, attempt=0)
        for h in d.realization.hidden_items:
            if h.mechanism == "habitual_omission":
                cat = next(k.category for k in content.tasks[d.task.task_id].keypoints if k.id == h.keypoint_id)
                families.add((cat, h.obscured_as))
    by_cat = {}
    for cat, phrase in families:
        by_cat.setdefault(cat, set()).add(phrase)
    assert all(len(v) == 1 for v in by_cat.values()), by_cat


def test_another_attempt_changes_the_surface_not_the_plan(world):
    content, tasks, cells = world
    cell = cells[3]
    a = stage1(cell, 2, tasks[cell.task_ids[1]], content, TemplateRealizer(), seed=0, attempt=0)
    b = stage1(cell, 2, tasks[cell.task_ids[1]], content, TemplateRealizer(), seed=0, attempt=3)
    assert [h.keypoint_id for h in a.realization.hidden_items] == [h.keypoint_id for h in b.realization.hidden_items]


def test_casual_case_keeps_literals():
    assert casual_case("Return 'Yes' or \"No\" and True. Hello") == "return 'Yes' or \"No\" and True. hello"


def test_domain_cognitive_users_speak_field_nouns_and_gloss_them(world):
    from capa_hf.generation.realizer import RequestContext, cell_mapping

    content, tasks, cells = world
    with_noun = total = 0
    for cell in (c for c in cells if "domain_cognitive" in c.mechanisms):
        for pos in range(1, 11):
            d = stage1(cell, pos, tasks[cell.task_ids[pos - 1]], content, TemplateRealizer(), seed=0, attempt=0)
            persona = content.personas[cell.persona_id]
            mapping = cell_mapping(RequestContext(session_id=d.session_id, cell=cell, persona=persona,
                                                  lexicon=content.lexicons[persona.discipline],
                                                  content=content.tasks[d.task.task_id], plan=None,
                                                  controls=content.controls, seed=0))
            tc = content.tasks[d.task.task_id]
            hidden_ids = {h.keypoint_id for h in d.realization.hidden_items}
            spoken = [tc.gist] + [k.plain for k in tc.keypoints if k.id not in hidden_ids] + [
                k.vague for k in tc.keypoints
                if any(h.keypoint_id == k.id and h.mechanism == "domain_cognitive" for h in d.realization.hidden_items)]
            used = {(noun, entity) for text in spoken for noun, entity in mapping.swap(text)[1]}
            for noun, entity in used:  # every field noun in the request is a swap the user will explain
                req = d.realization.initial_request.lower()
                assert noun.lower() in req or mapping.nouns[entity][1].lower() in req, (d.session_id, noun)
            used = {noun for noun, _ in used}
            total += 1
            with_noun += bool(used)
            dcp = [h for h in d.realization.hidden_items if h.mechanism == "domain_cognitive"][0]
            for noun in used:
                assert f'"{noun}"' in dcp.clarification, (d.session_id, noun)
    assert total == 200 and with_noun / total >= 0.95
