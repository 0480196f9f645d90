"""Stages 2 and 3: any engine can play the assistant, unresolved sessions fall back to the
reference assistant, Stage 3 regenerates sessions that fail a check, and the reference traces
ask, apply, guess and repair as their plans say."""

from dataclasses import replace

import pytest
from runners.scripted import ScriptedEngine

from capa_hf.content import load_content
from capa_hf.generation.pipeline import generate
from capa_hf.generation.stage1_realize import TemplateRealizer


@pytest.fixture(scope="module")
def two_cells(design0):
    return list(design0[:2])


@pytest.fixture(scope="module")
def reference_build(two_cells):
    return generate(seed=0, cells=two_cells, progress=False)


def test_engine_as_assistant_and_reference_fallback(two_cells, reference_build):
    content = load_content()
    wrong = ScriptedEngine(fn=lambda m: "```python\ndef nope(*a):\n    return None\n```", model="wrong")
    _, sessions, stats, _ = generate(seed=0, engine=wrong, cells=two_cells, progress=False, content=content)
    assert len(sessions) == 20 and all(s.resolved for s in sessions)
    assert all(s.generator.fallback and s.generator.assistant == "reference" for s in sessions)
    assert stats.fallbacks == 20

    # an assistant that already knows every session's variant reference solves at turn 1
    _, ref_sessions, _, traces = reference_build
    final = {s.initial_request: traces[s.session_id].submissions[-1].code for s in ref_sessions}

    def reply(messages):
        return f"```python\n{final[messages[1]['content']]}\n```"
    _, sessions, stats, _ = generate(seed=0, engine=ScriptedEngine(fn=reply, model="oracle"), cells=two_cells,
                                     progress=False, content=content)
    assert stats.fallbacks == 0
    assert all(s.generator.assistant == "scripted:oracle" and s.assistant_turns == 1 for s in sessions)


class LeakyFirstAttempt(TemplateRealizer):
    """States the first hidden task item's fact in the request on attempt 0 of one session."""

    target = None

    def realize(self, ctx):
        out = super().realize(ctx)
        task_items = [h for h in out.hidden_items if h.kind == "task"]
        if ctx.attempt == 0 and ctx.session_id == self.target and task_items:
            kp = next(k for k in ctx.content.keypoints if k.id == task_items[0].keypoint_id)
            return replace(out, initial_request=out.initial_request + " " + kp.plain)
        return out


def test_stage3_regenerates_a_leaking_session_with_the_next_attempt(two_cells, reference_build):
    _, sessions, _, _ = reference_build
    target = next(s.session_id for s in sessions if any(h.kind == "task" for h in s.hidden_items))
    LeakyFirstAttempt.target = target
    _, sessions, stats, _ = generate(seed=0, realizer=LeakyFirstAttempt(), cells=two_cells, progress=False)
    s = next(s for s in sessions if s.session_id == target)
    assert s.generator.attempt == 1
    assert stats.checks["no_leak"] == 1 and stats.regenerated == 1
    assert all(x.generator.attempt == 0 for x in sessions if x.session_id != target)


def test_reference_traces_follow_their_plans(reference_build):
    from capa_hf.generation.pipeline import World, plan_cells
    from capa_hf.simulator.reply_lines import answered

    cells, sessions, _, traces = reference_build
    world = World.load()
    plans = plan_cells(cells, world, 0)
    for s in sessions:
        # an answer may drop its persona wrap's lead-in or tag (said once a session, one lead-in a turn)
        wraps = world.content.personas[s.persona_id].voice.clarification_wraps
        trace = traces[s.session_id]
        plan = plans[s.session_id]
        assert s.resolved and trace.submissions[-1].verdict.passed
        asked = [i for i in plan.items if not i.apply_unasked]
        users = [t.content for t in trace.turns if t.role == "user"][1:]
        kinds = trace.turn_kinds
        if plan.guess_first and asked:
            assert kinds[0] == "submission" and not trace.submissions[0].verdict.passed
        if not asked:
            assert kinds == ["submission"]                   # conventions known from history, applied at once
        else:
            # every asked item's clarification reaches the assistant exactly once (an applied one
            # may come up too when a question happens to match it better)
            applied = {h.id for h, i in zip(s.hidden_items, plan.items) if i.apply_unasked}
            for h in s.hidden_items:
                n = sum(answered(h.clarification, u, wraps) for u in users)
                assert n <= 1 and (n == 1 or h.id in applied), (s.session_id, h.id)
        assert "```python" in trace.turns[-1].content
        if s.split == "history":
            assert [t.content for t in s.turns] == [t.content for t in trace.turns]
        else:
            assert s.turns == ()


def test_a_seeded_share_of_history_sessions_repairs_twice(reference_build):
    """The history sessions drawn for a second repair (defaults.LONG_TRACE_SHARE of them, among
    those that can) submit two wrong attempts once every answer is in, each failing the variant's
    tests in the sandbox at a different check, and the next repair passes."""
    from capa_hf.defaults import HISTORY_SIZE, LONG_TRACE_SHARE
    from capa_hf.generation.pipeline import World, plan_cells

    cells, sessions, _, traces = reference_build
    plans = plan_cells(cells, World.load(), 0)
    history = [s for s in sessions if s.position <= HISTORY_SIZE]
    twice = [s for s in history if plans[s.session_id].second_repair]
    assert len(twice) == round(LONG_TRACE_SHARE * len(history)) > 0
    assert not any(p.second_repair for p in plans.values() if p.position > HISTORY_SIZE)
    for s in twice:
        trace = traces[s.session_id]
        verdicts = [sub.verdict for sub in trace.submissions]
        wrong = 2 + plans[s.session_id].guess_first
        assert len(verdicts) == wrong + 1 and not any(v.passed for v in verdicts[:-1]) and verdicts[-1].passed
        lines = [v.failure.line for v in verdicts[-3:-1]]
        assert lines[0] != lines[1], s.session_id
        # a question in several parts the user answered at once may leave 5
        assert 5 <= trace.assistant_turns <= 8, s.session_id
    assert sum(traces[s.session_id].assistant_turns >= 6 for s in twice) >= len(twice) - 1


def test_the_draw_of_second_repairs_is_seeded_and_takes_the_share():
    from capa_hf.generation.stage2_dialogue import long_traces

    sure = [f"C{i:02d}-S01" for i in range(15)]
    likely = [f"C{i:02d}-S02" for i in range(25)]
    a = long_traces(sure, likely, 100, seed=0)
    assert a == long_traces(list(reversed(sure)), list(reversed(likely)), 100, seed=0)
    assert len(a) == 22 and set(sure) <= a <= set(sure + likely)     # the sure ones first
    assert long_traces(sure, likely, 100, seed=1) != a
    assert long_traces(sure[:5], [], 100, seed=0) == set(sure[:5])    # fewer eligible: all of them
    assert len(long_traces(sure + likely, [], 100, seed=0) & set(sure)) < 15


def test_stage3_refuses_a_trace_whose_wrong_attempt_passed():
    from capa_hf.generation.stage3_checks import check_attempts

    assert check_attempts([False, False, True], 2).ok
    assert not check_attempts([False, True], 2).ok            # a scripted wrong attempt passed: the trace ended early
    assert not check_attempts([True, True], 1).ok
    assert not check_attempts([False, False], 1).ok           # the final code failed
    assert "2 scripted wrong attempt(s)" in check_attempts([True], 2).detail
