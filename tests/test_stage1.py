"""Stage 1: session plans (conventions and task items) and the template realizer."""

import re
from collections import Counter

import pytest

from capa_hf.defaults import HISTORY_SIZE
from capa_hf.generation.pipeline import World, plan_cells, stage1, voice_slots
from capa_hf.generation.stage1_lexicon import fix_articles, wants_an
from capa_hf.generation.stage1_realize import TemplateRealizer, casual_case
from capa_hf.generation.stage3_checks import check_leaks, check_mechanisms, check_repeats, check_voice, sentences


@pytest.fixture(scope="module")
def world(design0):
    w = World.load()
    cells = list(design0)
    return w, cells, plan_cells(cells, w, 0)


def test_every_plan_follows_its_role(world):
    w, cells, plans = world
    for cell in cells:
        for pos in range(1, 11):
            plan = plans[f"{cell.cell_id}-S{pos:02d}"]
            kinds = Counter(i.kind for i in plan.items)
            assert plan.items, plan.session_id                          # C_req is not a subset of C_L
            assert plan.role == cell.roles[pos - 1]
            if plan.role in ("convention_only", "reuse"):
                assert kinds["task"] == 0
                assert all(i.revealed_in for i in plan.items)         # everything was shown earlier
            if plan.role == "reuse":
                assert all(i.apply_unasked for i in plan.items)
            for i in plan.items:
                assert i.mechanism.id in cell.mechanisms
                if i.kind == "convention":
                    assert i.mechanism.id == cell.dimension_mechanisms[i.dimension]
                    assert i.value == cell.profile[i.dimension]
                else:   # only verified keypoints, never one about a dimension
                    src = w.content.variants[plan.task_id]
                    assert i.keypoint.id in src.misreadings and i.keypoint.id not in src.convention_keypoints
            if not plan.single_mechanism:
                assert {i.mechanism.id for i in plan.items} == set(cell.mechanisms)
            # every dimension the task exercises is either hidden or stated
            exercised = set(w.content.variants[plan.task_id].dimensions)
            assert plan.hidden_dimensions() | {d for d, _ in plan.stated} == exercised


def test_revealed_in_names_earlier_history_sessions_that_stated_the_value(world):
    _, cells, plans = world
    for cell in cells:
        for pos in range(1, 11):
            for item in plans[f"{cell.cell_id}-S{pos:02d}"].items:
                for sid in item.revealed_in:
                    src = plans[sid]
                    assert sid.startswith(cell.cell_id) and src.position <= HISTORY_SIZE and src.position < pos
                    stated = {d for d, _ in src.stated} | {i.dimension for i in src.items
                                                           if i.kind == "convention" and not i.apply_unasked}
                    assert item.dimension in stated


def test_some_history_sessions_guess_first(world):
    _, _, plans = world
    history = [p for p in plans.values() if p.position <= HISTORY_SIZE]
    share = sum(p.guess_first for p in history) / len(history)
    assert 0.1 <= share <= 0.3


def test_requests_keep_voice_hide_items_and_are_deterministic(world):
    w, cells, plans = world
    realizer = TemplateRealizer()
    slots = voice_slots(cells)
    for cell in cells[::6]:
        persona = w.content.personas[cell.persona_id]
        for pos in (1, 4, 6, 9):
            sid = f"{cell.cell_id}-S{pos:02d}"
            d = stage1(cell, plans[sid], w, realizer, seed=0, attempt=0, slot=slots[sid])
            again = stage1(cell, plans[sid], w, realizer, seed=0, attempt=0, slot=slots[sid])
            assert d.realization == again.realization
            req = d.realization.initial_request
            tc = w.content.tasks[d.plan.task_id]
            visible = [tc.gist] + [line for _, line in d.plan.visible]
            assert check_voice(req, persona).ok
            assert check_mechanisms(d.realization.hidden_items, cell, allow_single=d.plan.single_mechanism).ok
            assert check_repeats(req).ok
            kps = {k.id: k for k in tc.keypoints}
            assert check_leaks(req, d.realization.hidden_items, kps, dict(d.plan.values), visible).ok
            for h in d.realization.hidden_items:
                assert h.clarification not in req
            if "_" in d.problem.entry_point:   # the request never names the function
                assert d.problem.entry_point not in req


def test_openers_are_dealt_without_replacement_within_a_persona(world):
    w, cells, plans = world
    realizer = TemplateRealizer()
    slots = voice_slots(cells)
    persona = cells[0].persona_id
    openers = []
    for cell in (c for c in cells if c.persona_id == persona):
        for pos in range(1, 11):
            sid = f"{cell.cell_id}-S{pos:02d}"
            openers.append(stage1(cell, plans[sid], w, realizer, 0, 0, slots[sid]).realization.opener)
    n = len(w.content.personas[persona].voice.openers)
    assert max(Counter(openers).values()) <= -(-len(openers) // n)


@pytest.mark.parametrize("text,want", [
    ("returns an pixel size", "returns a pixel size"),
    ("a enrollment log and a MD5 digest", "an enrollment log and an MD5 digest"),
    ("An user and a hour", "A user and an hour"),
    ("a 'apple', an \"banana\"", "an 'apple', a \"banana\""),
])
def test_articles_agree_with_the_next_word(text, want):
    assert fix_articles(text) == want


def test_articles_agree_after_a_lexicon_swap(world):
    w, _, _ = world
    from capa_hf.generation.stage1_lexicon import Mapping

    mapping = Mapping("test", {"list": ("enrollment log", "enrollment logs"), "integer": ("pixel size", "pixel sizes")})
    swapped, _ = mapping.swap("It takes a list and returns an integer.")
    assert swapped == "It takes a enrollment log and returns an pixel size."   # what the swap alone gives
    assert fix_articles(swapped) == "It takes an enrollment log and returns a pixel size."
    assert wants_an("SQL") and not wants_an("URL")


def test_casual_case_keeps_literals():
    assert casual_case("Return True or 'Yes' for ValueError cases") == "return True or 'Yes' for ValueError cases"


def test_every_sentence_of_a_request_is_unique(world):
    w, cells, plans = world
    realizer = TemplateRealizer()
    slots = voice_slots(cells)
    for cell in cells[::5]:
        for pos in range(1, 11):
            sid = f"{cell.cell_id}-S{pos:02d}"
            req = stage1(cell, plans[sid], w, realizer, 0, 0, slots[sid]).realization.initial_request
            keys = [re.sub(r"\W+", " ", s.lower()).strip() for s in sentences(req)]
            keys = [k for k in keys if len(k) > 3]
            assert len(keys) == len(set(keys)), req


def test_a_stated_neutral_empty_value_keeps_the_return_type_in_sight():
    """"If the list is empty, return False" names a bool result: a session that states the neutral
    empty-input value does not hide its task's data_type keypoint (0.3.1 review: C08-S06)."""
    from capa_hf.generation.stage1_plan import names_container
    assert names_container([], [("empty_input", "neutral")])
    assert not names_container([], [("empty_input", "raise"), ("case", "sensitive")])
    assert names_container([], [("container", "list")])
