"""The LLM simulated user: planner + expression agent, played by scripted engines with fixed JSON.

Each test plays one `respond` by hand and checks what was sent, what was logged and what counts
as a fallback: a planner that answers garbage (retried once, then the scripted planner's
choice), an expression agent that pastes code or reveals another item (regenerated once, then
the scripted user's message for the same focus).
"""

import pytest
from runners.types import ChatResult

from capa_hf.llm_json import LLMCallError, first_json_object
from capa_hf.schema.record import SessionRecord
from capa_hf.simulator.fidelity import code_lines, message_checks
from capa_hf.simulator.llm_user import LLMUser, fallback_counts, make_llm_user
from capa_hf.simulator.planner import Plan
from capa_hf.simulator.protocols import user_factory
from tests.llm_fakes import drive, is_planner, plan_json, session_brief

QUESTION = "Before I write it: what exactly goes in, and what should come back?"


@pytest.fixture
def brief(capa_data):
    b = session_brief(capa_data)
    ids = [h.id for h in b.hidden_items]
    assert ids == ["h1", "h2", "h3"] and "three different positions" in b.hidden_items[1].clarification \
        and b.hidden_items[2].dimension == "empty_input", \
        "the pinned session C20-S08 changed; pick another with two task items and a convention item"
    return b


def scripted_answers(planner, expression):
    """An answer function: successive planner replies and expression replies from two lists."""
    planner, expression = list(planner), list(expression)

    def answer(call):
        return (planner if is_planner(call.messages) else expression).pop(0)
    return answer


def test_registered_and_options_checked(brief):
    assert user_factory("llm:llamacpp") is make_llm_user
    with pytest.raises(ValueError, match="unknown"):
        make_llm_user(brief, colour="blue")


def test_valid_plan_and_message_are_sent_as_written(brief):
    user = LLMUser(brief)
    msg = "Give it a plain list of whole numbers; it answers True or False, nothing fancier."
    out, calls = drive(user.respond(QUESTION, None), scripted_answers([plan_json("h1")], [msg]))
    assert out == msg and user.revealed == ["h1"]
    assert [c.role for c in calls] == ["user", "user"] and is_planner(calls[0].messages)
    planner_view = calls[0].messages[1]["content"]
    assert brief.reference.strip() in planner_view and brief.hidden_items[2].clarification in planner_view
    assert QUESTION in planner_view and brief.initial_request in planner_view
    expression_view = " ".join(m["content"] for m in calls[1].messages)
    assert brief.hidden_items[0].clarification in expression_view      # the focus, to convey
    assert brief.hidden_items[1].clarification not in expression_view  # never another item
    assert brief.reference.strip() not in expression_view              # nor the ground truth
    assert brief.persona.name in expression_view
    entry = user.log[0]
    assert entry["planner"]["json"]["focus"] == "h1" and not entry["planner"]["fallback"]
    assert entry["expression"]["source"] == "llm" and all(c["ok"] for c in entry["expression"]["attempts"][0]["checks"])


def test_planner_garbage_is_retried_once_then_replaced_by_the_scripted_choice(brief):
    user = LLMUser(brief)
    msg = "Plain list of whole numbers in, True or False out."
    out, calls = drive(user.respond(QUESTION, None),
                       scripted_answers(["sure! I think h1", "{not json"], [msg]))
    planner_calls = [c for c in calls if is_planner(c.messages)]
    assert len(planner_calls) == 2
    assert "I could not use that answer" in planner_calls[1].messages[-1]["content"]
    assert planner_calls[1].sampling.seed != planner_calls[0].sampling.seed
    entry = user.log[0]["planner"]
    assert entry["fallback"] and not entry["valid"] and entry["json"] is None
    assert entry["focus"] == entry["scripted_focus"] == "h1"     # the scripted planner matched the question
    assert out == msg and user.revealed == ["h1"]
    counts = fallback_counts([SessionRecord(session_id="S1", user_log=user.log)])
    assert counts["planner_fallbacks"] == 1 and counts["planner_fallbacks_per_100_turns"] == 100.0
    assert counts["expression_fallbacks"] == 0


@pytest.mark.parametrize("bad", [plan_json("h9"), plan_json("failing_test"), plan_json(None, need=True),
                                 '{"clarification_needed": "yes", "focus": "h2"}'])
def test_an_invalid_focus_counts_like_garbage(brief, bad):
    user = LLMUser(brief)
    drive(user.respond(QUESTION, None), scripted_answers([bad, bad], ["Whole numbers in, True or False out."]))
    assert user.log[0]["planner"]["fallback"]
    assert user.log[0]["planner"]["attempts"][0]["error"]


def test_a_valid_focus_is_used_even_when_clarification_needed_says_false(brief):
    user = LLMUser(brief)
    drive(user.respond(QUESTION, None), scripted_answers([plan_json("h2", need=False)], ["Three that sum to zero."]))
    assert not user.log[0]["planner"]["retried"] and user.log[0]["planner"]["focus"] == "h2"


def test_parroting_the_instructions_is_regenerated(brief):
    user = LLMUser(brief)
    parrot = "Write the message you send now, in your own words: True or False."
    out, _ = drive(user.respond(QUESTION, None), scripted_answers([plan_json("h1")], [parrot, "Integers in, True or False out."]))
    first = {c["name"]: c for c in user.log[0]["expression"]["attempts"][0]["checks"]}
    assert not first["no_prompt_echo"]["ok"] and "write the message you send now" in first["no_prompt_echo"]["detail"]
    assert out == "Integers in, True or False out."


def test_a_valid_second_answer_is_used(brief):
    user = LLMUser(brief)
    drive(user.respond(QUESTION, None), scripted_answers(["nope", plan_json("h3")],
                                                         ["An empty list is a caller bug to me, so raise ValueError."]))
    entry = user.log[0]["planner"]
    assert entry["retried"] and not entry["fallback"] and entry["focus"] == "h3" and user.revealed == ["h3"]


def test_pasted_code_is_regenerated_then_replaced_by_the_scripted_message(brief):
    user = LLMUser(brief)
    code = "```python\n" + brief.reference + "\n```"
    out, calls = drive(user.respond(QUESTION, None), scripted_answers([plan_json("h1")], [code, "Like this: " + code]))
    fallback = LLMUser(brief).fallback
    assert out == fallback.express(Plan("item", "h1"), None) == brief.hidden_items[0].clarification
    exp = user.log[0]["expression"]
    assert exp["fallback"] and exp["source"] == "scripted" and len(exp["attempts"]) == 2
    failed = {c["name"] for c in exp["attempts"][0]["checks"] if not c["ok"]}
    assert {"no_code_fence", "no_reference_line"} <= failed
    retry = [c for c in calls if not is_planner(c.messages)][1].messages
    assert retry[-2]["role"] == "assistant" and "cannot be sent" in retry[-1]["content"]
    assert user.revealed == ["h1"]
    assert fallback_counts([SessionRecord(session_id="S1", user_log=user.log)])[
        "expression_fallbacks_per_100_turns"] == 100.0


def test_leaking_another_item_is_regenerated_and_a_clean_retry_is_sent(brief):
    user = LLMUser(brief)
    leak = "It takes whole numbers and answers True or False. Also: " + brief.hidden_items[1].clarification
    clean = "It takes whole numbers and answers True or False, that's all."
    out, _ = drive(user.respond(QUESTION, None), scripted_answers([plan_json("h1")], [leak, clean]))
    assert out == clean and user.revealed == ["h1"]
    first = {c["name"]: c for c in user.log[0]["expression"]["attempts"][0]["checks"]}
    assert not first["no_other_item"]["ok"] and "h2" in first["no_other_item"]["detail"]
    assert not user.log[0]["expression"]["fallback"]


def test_leaking_twice_falls_back(brief):
    user = LLMUser(brief)
    leak = "Integers in, bool out. And if the list is empty, raise ValueError because an empty input is a caller bug."
    out, _ = drive(user.respond(QUESTION, None), scripted_answers([plan_json("h1")], [leak, leak + " Really."]))
    assert user.log[0]["expression"]["fallback"] and out == brief.hidden_items[0].clarification
    assert "h3" not in user.revealed


def test_after_a_failure_the_reaction_and_failing_check_flow_through(brief):
    user = LLMUser(brief)
    verdict = {"status": "failed", "failure": {"type": "AssertionError", "line": "assert candidate([1, 3, -2, 1]) is True"}}
    msg = "Still broken. This one fails: assert candidate([1, 3, -2, 1]) is True"
    out, calls = drive(user.respond("```python\ndef f(l):\n    return False\n```", verdict),
                       scripted_answers([plan_json("failing_test")], [msg]))
    assert out == msg and user.revealed == []
    convey = calls[1].messages[1]["content"]
    assert "failed your tests" in convey and "assert candidate([1, 3, -2, 1]) is True" in convey
    assert "its code failed the tests" in calls[0].messages[1]["content"]


def test_nothing_left_and_the_conversation_grows(brief):
    user = LLMUser(brief)
    drive(user.respond(QUESTION, None), scripted_answers([plan_json("h1")], ["Integers in, True or False out."]))
    drive(user.respond("Anything else?", None), scripted_answers([plan_json(None, need=False)], ["Nope, go ahead."]))
    assert user.said[-2:] == ["Integers in, True or False out.", "Nope, go ahead."]
    assert user.log[1]["planner"]["focus"] is None and user.revealed == ["h1"]


def test_engine_errors_raise_instead_of_falling_back(brief):
    user = LLMUser(brief)
    with pytest.raises(LLMCallError, match="planner: engine error: boom"):
        drive(user.respond(QUESTION, None), lambda call: ChatResult.failure("boom"))


def test_fidelity_checks_are_exact_on_their_own(brief):
    lines = code_lines(brief.reference)
    assert any(line.startswith("for i in range") for line in lines)
    assert not any('"""' in line for line in lines)
    kw = dict(reference=brief.reference, items=brief.hidden_items, focus="h1", revealed=[], said_before=[],
              persona=brief.persona)
    ok = message_checks("Just integers in and True or False out.", **kw)
    assert all(c.ok for c in ok)
    silent = message_checks("The code did not pass your tests.", **kw)
    assert [c.name for c in silent if not c.ok] == ["conveys_focus"]
    quoted = message_checks("Still failing: assert candidate([1]) is False", **{**kw, "focus": None},
                            failing="assert candidate([1]) is False")
    assert all(c.ok for c in quoted)
    assert not message_checks("Still failing.", **{**kw, "focus": None}, failing="assert candidate([1]) is False")[5].ok
    long = message_checks("True or False. " + "word " * 200, **kw)
    assert [c.name for c in long if not c.ok] == ["length"]
    pasted = message_checks("True or False, do it like for i in range(len(l)): obviously", **kw)
    assert [c.name for c in pasted if not c.ok] == ["no_reference_line"]
    # an item already revealed may be repeated; the focus may of course be said
    both = brief.hidden_items[0].clarification + " " + brief.hidden_items[1].clarification
    assert all(c.ok for c in message_checks(both, **{**kw, "revealed": ["h2"]}))
    assert [c.name for c in message_checks(both, **kw) if not c.ok] == ["no_other_item"]


def test_first_json_object():
    assert first_json_object('Here: ```json\n{"a": 1}\n```') == ({"a": 1}, None)
    assert first_json_object('noise {"a": {"b": 2}} tail')[0] == {"a": {"b": 2}}
    assert first_json_object("[1, 2]")[0] is None
    assert first_json_object("")[1] == "the reply is empty"
