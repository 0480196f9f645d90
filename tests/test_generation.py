"""Stages 2 and 3: any engine can play the assistant, unresolved sessions fall back to the
reference assistant, and Stage 3 regenerates sessions that fail a check."""

from dataclasses import replace

import pytest
from runners.scripted import ScriptedEngine

from capa_hf.content import load_content
from capa_hf.design import default_design
from capa_hf.generation.pipeline import generate
from capa_hf.generation.realizer import TemplateRealizer
from capa_hf.generation.reference import reference_code
from capa_hf.humaneval import load_tasks


@pytest.fixture(scope="module")
def two_cells():
    return default_design(0)[:2]


def direct_solver(tasks, content):
    """Submits the reference code at once: knows the task from the request's gist."""
    def reply(messages):
        request = messages[1]["content"].lower()
        for tid, tc in content.tasks.items():
            if tc.gist.lower()[:40] in request:
                return f"```python\n{reference_code(tasks[tid])}\n```"
        return "```python\ndef nope():\n    return 0\n```"
    return ScriptedEngine(fn=reply, model="direct")


def test_engine_as_assistant_and_reference_fallback(two_cells):
    tasks, content = load_tasks(), load_content()
    wrong = ScriptedEngine(fn=lambda m: "```python\ndef nope(*a):\n    return None\n```", model="wrong")
    _, sessions, stats = generate(seed=0, engine=wrong, cells=two_cells, progress=False, content=content)
    assert len(sessions) == 20 and all(s.resolved for s in sessions)
    assert all(s.generator.fallback and s.generator.assistant == "reference" for s in sessions)
    assert stats.fallbacks == 20

    _, sessions, stats = generate(seed=0, engine=direct_solver(tasks, content), cells=two_cells,
                                  progress=False, content=content)
    solved_direct = [s for s in sessions if not s.generator.fallback]
    assert solved_direct, "the direct solver should resolve sessions whose gist it recognises"
    for s in solved_direct:
        assert s.generator.assistant == "scripted:direct" and s.assistant_turns == 1
    assert stats.fallbacks == len(sessions) - len(solved_direct)


class LeakyFirstAttempt(TemplateRealizer):
    """Pastes the first hidden keypoint's plain text into the request on attempt 0 only."""

    def realize(self, ctx):
        out = super().realize(ctx)
        if ctx.attempt == 0 and ctx.cell.cell_id == "C01" and ctx.session_id.endswith("S03"):
            kp = next(k for k in ctx.content.keypoints if k.id == out.hidden_items[0].keypoint_id)
            return replace(out, initial_request=out.initial_request + " " + kp.plain)
        return out


def test_stage3_regenerates_a_leaking_session_with_the_next_attempt(two_cells):
    _, sessions, stats = generate(seed=0, realizer=LeakyFirstAttempt(), cells=two_cells, progress=False)
    s = next(s for s in sessions if s.session_id == "C01-S03")
    assert s.generator.attempt == 1
    assert stats.checks["no_leak"] == 1 and stats.regenerated == 1
    assert all(x.generator.attempt == 0 for x in sessions if x.session_id != "C01-S03")


def test_reference_traces_ask_each_hidden_item_once_then_pass(two_cells):
    _, sessions, _ = generate(seed=0, cells=two_cells, progress=False)
    for s in sessions:
        assert s.assistant_turns == len(s.hidden_items) + 1
        users = [t.content for t in s.turns if t.role == "user"][1:]
        assert users == [h.clarification for h in s.hidden_items]
        assert "```python" in s.turns[-1].content and s.resolved
