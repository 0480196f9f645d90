"""Stage 1 text that teaches cleanly: habits in the user's own words, a student who speaks for
no team, and back references only where there is something to point back at."""

import re

import pytest

from capa_hf.defaults import HISTORY_SIZE
from capa_hf.generation.persona_voice import persona_voice


@pytest.fixture(scope="module")
def drafts(default_plans):
    from capa_hf.generation.pipeline import stage1
    from capa_hf.generation.stage1_realize import TemplateRealizer

    w, cells, plans, slots = default_plans
    out = []
    for cell in cells:
        for pos in range(1, 11):
            sid = f"{cell.cell_id}-S{pos:02d}"
            out.append((cell, stage1(cell, plans[sid], w, TemplateRealizer(), 0, 0, slots[sid])))
    return w, out


def test_quoting_wraps_are_recognized():
    v = persona_voice()
    assert v.reports_speech("i asked my friend and she said: {text}")
    assert v.reports_speech("Someone on the team said: {text}")
    assert v.reports_speech("From the runbook: {text}")
    assert not v.reports_speech("For the record: {text}")
    assert not v.reports_speech("oh! i forgot that part. {text}")


def test_a_habit_is_never_put_in_someone_elses_mouth(drafts):
    w, out = drafts
    voice = persona_voice()
    quoting = {pid: [wr.split("{text}")[0].strip() for wr in p.voice.clarification_wraps if voice.reports_speech(wr)]
               for pid, p in w.content.personas.items()}
    n = 0
    for cell, d in out:
        for h in d.realization.hidden_items:
            if h.kind == "convention":
                n += 1
                for prefix in quoting[cell.persona_id]:
                    assert not (prefix and h.clarification.lower().startswith(prefix.lower())), (d.session_id,
                                                                                               h.clarification)
    assert n > 300


def test_a_student_does_not_speak_for_a_team(drafts):
    _, out = drafts
    voice = persona_voice()
    solo = [(c, d) for c, d in out if c.persona_id in voice.solo]
    assert solo
    for cell, d in solo:
        for h in d.realization.hidden_items:
            if h.obscured_as and h.mechanism == "habitual_omission":
                assert not voice.speaks_for_group(h.obscured_as), (d.session_id, h.obscured_as)


def _matches(form: str, text: str) -> bool:
    pattern = re.escape(form.rstrip(".")).replace(re.escape("{result}"), ".+").replace(re.escape("{input}"), ".+")
    return re.fullmatch(pattern + r"\.?", text.strip(), flags=re.IGNORECASE | re.DOTALL) is not None


def test_back_references_only_after_the_point_came_up(drafts):
    w, out = drafts
    deixis = {m.id for m in w.content.mechanisms.values() if m.operation == "deixis"}
    checked = kept = 0
    for cell, d in out:
        for h in d.realization.hidden_items:
            if h.mechanism not in deixis or not h.obscured_as or h.kind != "convention":
                continue
            back = any(_matches(f, h.obscured_as) for f in w.content.dimensions[h.dimension].vague["deixis"])
            checked += 1
            kept += back
            if not h.revealed_in:
                assert not back, (d.session_id, h.obscured_as)
    assert checked > 50 and kept > 0
    assert HISTORY_SIZE == 5


def test_a_task_item_says_its_own_vague_line(drafts):
    """A task item's point belongs to its task alone: no appeal to a habit or an earlier session
    stands for it, only the line written for that keypoint (in field nouns under a lexicon swap)."""
    w, out = drafts
    lexicon = {m.id for m in w.content.mechanisms.values() if m.operation == "lexicon"}
    checked = 0
    for cell, d in out:
        kps = {k.id: k for k in w.content.tasks[d.plan.task_id].keypoints}
        for h in d.realization.hidden_items:
            if h.kind != "task" or not h.obscured_as:
                continue
            checked += 1
            if h.mechanism not in lexicon:
                assert h.obscured_as == kps[h.keypoint_id].vague, (d.session_id, h.obscured_as)
    assert checked > 100

