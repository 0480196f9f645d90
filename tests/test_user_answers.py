"""The scripted user answers the question that was asked, and the failure that happened."""

import pytest

from capa_hf.content import load_content, load_user_lines
from capa_hf.evaluation.capa_source import brief
from capa_hf.generation.stage2_dialogue import code_reply
from capa_hf.schema.record import SessionRecord
from capa_hf.simulator.extraction import extract_submission
from capa_hf.simulator.judges import SandboxJudge
from capa_hf.simulator.users import scripted_user
from capa_hf.simulator.value_signature import signature
from capa_hf.simulator.verdicts import verdict_kind
from tests.test_scripted_user import say as respond

# C25-S08 (HumanEval/163, persona P05): h1 = kp_02 (which even numbers), h2 = kp_03 (bounds in
# either order), h3 = the bounds convention (inclusive), h4 = the container convention (tuple).
SESSION = "C25-S08"
ISSUE_QUESTIONS = [
    "Do the ends of the range count, so an even digit equal to a or b is included?",
    "If a or b is itself one of 2, 4, 6 or 8, should it be included?",
]


@pytest.fixture(scope="module")
def c25(capa_data):
    s = capa_data.heldout[SESSION]
    assert [(h.id, h.dimension or h.keypoint_id) for h in s.hidden_items] == [
        ("h1", "kp_02"), ("h2", "kp_03"), ("h3", "bounds"), ("h4", "container")]
    return s, capa_data


def fresh_user(c25):
    s, data = c25
    return scripted_user(brief(s, data, load_user_lines()))


@pytest.mark.parametrize("question", ISSUE_QUESTIONS)
def test_the_issues_bounds_questions_reveal_the_bounds_convention(c25, question):
    user = fresh_user(c25)
    message = respond(user, question)
    assert user.revealed == ["h3"]
    assert "inclusive" in message
    assert user.log[-1]["basis"] == "question" and user.log[-1]["score"] > 1.0


def test_each_c25_item_answers_its_own_question(c25):
    user = fresh_user(c25)
    asked = {"h1": "Do you want every even number in the range, or only the single digits?",
             "h4": "Should the digits come back as a list or a tuple?",
             "h2": "What if a is bigger than b?",
             "h3": ISSUE_QUESTIONS[0]}
    for item, question in asked.items():
        respond(user, question)
        assert user.revealed[-1] == item, question
    assert [e["basis"] for e in user.log] == ["question"] * 4


def test_a_reply_without_a_question_falls_back_to_priority_and_says_so(c25):
    user = fresh_user(c25)
    respond(user, "Sure, I can do that.")
    assert user.revealed == ["h1"] and user.log[-1]["basis"] == "priority"


def _variant(c25, **values):
    from capa_hf.variants.catalog import VariantCatalog

    s, data = c25
    content = load_content()
    catalog = VariantCatalog(data.tasks, content.variants, content.dimensions)
    base = dict(kv.split("=") for kv in s.variant_id.split("@")[1].split("+"))
    return catalog.variant(s.task_id, {**base, **values})


def test_after_a_failure_the_user_reveals_the_item_tied_to_the_failing_assert(c25):
    """Code with strict bounds (the user's are inclusive) fails the first check; the failure tie
    and the wrong value name the bounds convention, not the next item by priority."""
    s, data = c25
    strict = _variant(c25, bounds="strict").reference
    problem = data.problem(s)
    reply = code_reply("Here it is.", strict)
    with SandboxJudge() as judge:
        verdict = judge.run(extract_submission(reply, problem.entry_point), problem)
    assert verdict["status"] == "failed"
    assert verdict["failure"]["line"] == "assert candidate(2, 10) == (8, 6, 4, 2)"
    assert verdict["failing_value"] == signature((8, 6, 4))
    user = fresh_user(c25)
    message = respond(user, reply, verdict)
    assert user.revealed == ["h3"]                   # h1 would be next by priority
    entry = user.log[-1]
    assert entry["basis"] == "failure_tie" and "bounds" in entry["tied"]
    assert entry["failing_line"] == "assert candidate(2, 10) == (8, 6, 4, 2)"
    assert "inclusive" in message


def test_the_wrong_value_decides_among_the_items_one_line_ties(c25):
    """One failing line ties bounds, container, kp_02 and sort_order; a list in place of the tuple
    is explained by the container convention alone."""
    line = "assert candidate(2, 10) == (8, 6, 4, 2)"
    user = fresh_user(c25)
    assert {"bounds", "container", "kp_02"} <= set(user.script.ties[line])
    verdict = {"status": "failed", "failure": {"type": "AssertionError", "message": "", "line": line},
               "failing_value": signature([8, 6, 4, 2])}
    respond(user, "```python\ndef generate_integers(a, b): ...\n```", verdict)
    assert user.revealed == ["h4"]
    every = {"status": "failed", "failure": {"type": "AssertionError", "message": "", "line": line},
             "failing_value": signature((10, 8, 6, 4, 2))}
    respond(user, "```python\ndef generate_integers(a, b): ...\n```", every)
    assert user.revealed == ["h4", "h1"]            # every even number: the kp_02 misreading


def test_a_failure_tied_to_nothing_hidden_quotes_the_check(c25):
    user = fresh_user(c25)
    line = "assert candidate(17, 89) == ()"
    for item in ("h4", "h1"):                        # both items this line ties are out already
        user.revealed.append(item)
    verdict = {"status": "failed", "failure": {"type": "AssertionError", "message": "", "line": line}}
    message = respond(user, "```python\ndef generate_integers(a, b): ...\n```", verdict)
    assert user.log[-1]["basis"] == "failing_check" and message.count(line) >= 1
    assert user.revealed == ["h4", "h1"]


INTERPRETER_WORDS = ("interpreter", "runtime", "syntax", "version", "newer", "recent releases", "library call",
                     "plainest python", "old-fashioned", "new stuff")


@pytest.fixture(scope="module")
def p10_user(capa_data):
    s = capa_data.heldout["C55-S06"]
    assert s.persona_id == "P10"    # the persona whose reactions blame the old interpreter
    return lambda: scripted_user(brief(s, capa_data, load_user_lines()))


def _reaction(user, verdict):
    return user.reaction(verdict)


def test_an_assertion_never_blames_the_interpreter(p10_user):
    line = "assert candidate([1, 2]) == [2, 1]"
    verdict = {"status": "failed", "failure": {"type": "AssertionError", "message": "", "line": line}}
    assert verdict_kind(verdict) == "assertion"
    seen = set()
    user = p10_user()
    for i in range(12):                       # every reaction this persona can give an assertion
        text = _reaction(user, verdict)
        user.said.append(text)
        seen.add(text)
        assert not any(w in text.lower() for w in INTERPRETER_WORDS), text
    assert len(seen) >= 3


def test_an_error_may_name_the_exception_and_may_blame_the_interpreter(p10_user):
    verdict = {"status": "error", "failure": {"type": "NameError", "message": "name 'f' is not defined",
                                              "line": "assert candidate([1, 2]) == [2, 1]"}}
    user = p10_user()
    texts = []
    for _ in range(12):
        texts.append(_reaction(user, verdict))
        user.said.append(texts[-1])
    assert any("NameError" in t for t in texts)
    assert any(any(w in t.lower() for w in INTERPRETER_WORDS) for t in texts)


def test_a_timeout_speaks_of_speed(p10_user):
    verdict = {"status": "timeout", "failure": {"type": "Timeout", "message": "time limit of 10 s exceeded",
                                                "line": None}}
    user = p10_user()
    for _ in range(6):
        text = _reaction(user, verdict)
        user.said.append(text)
        assert "slow" in text or "time limit" in text or "too long" in text, text
        assert "AssertionError" not in text


def test_humaneval_behaviour_breaking_a_stated_convention_is_pointed_out_again(capa_data):
    """C16-S09 states the inclusive limit plainly; HumanEval's own (strict) code fails on a value
    at the limit, and no hidden item explains that result: the user restates the limit."""
    from capa_hf.variants.combos import humaneval_variant

    s = capa_data.heldout["C16-S09"]
    assert "bounds" not in {h.dimension for h in s.hidden_items}
    content = load_content()
    from capa_hf.variants.catalog import VariantCatalog

    he = humaneval_variant(VariantCatalog(capa_data.tasks, content.variants, content.dimensions).variants(s.task_id))
    problem = capa_data.problem(s)
    reply = code_reply("Here it is.", he.reference)
    with SandboxJudge() as judge:
        verdict = judge.run(extract_submission(reply, problem.entry_point), problem)
    user = scripted_user(brief(s, capa_data, load_user_lines()))
    message = respond(user, reply, verdict)
    assert user.log[-1]["kind"] == "restate" and user.log[-1]["item"] == "bounds"
    assert user.revealed == [] and user.restated == ["bounds"]
    assert user.script.stated["bounds"] in message


def test_the_summary_gives_the_shares_of_the_users_reasons():
    from capa_hf.evaluation.summary_md import user_reasoning_line
    from capa_hf.simulator.scripted_user import reasoning_shares

    log = [{"basis": "question", "verdict": None}, {"basis": "priority", "verdict": None},
           {"basis": "failure_tie", "verdict": "assertion"}, {"basis": "failing_check", "verdict": "assertion"}]
    records = [SessionRecord(session_id=f"S{i}", user_log=entries) for i, entries in enumerate(
        [log, [{"basis": "question", "verdict": None}], [{"planner": {"fallback": False}}]])]  # an LLM user's: not counted
    shares = reasoning_shares(records)
    assert (shares["turns"], shares["question"], shares["failure_tie"], shares["priority"]) == (5, 2, 1, 1)
    assert shares["on_topic_share"] == round(2 / 3, 4) and shares["shares"]["failing_check"] == 0.2
    line = user_reasoning_line({"user_reasoning": shares})
    assert "answered a question 2 (40%)" in line and "tied to the failure 1 (20%)" in line
    assert "priority fallback 1 (20%)" in line and "on topic 67%" in line
    assert user_reasoning_line({"user_reasoning": reasoning_shares([])}) is None


def test_a_second_failure_in_a_session_is_reported_in_other_words(p10_user):
    """After a repair fails too, the user's report does not open like the first one: another
    reaction, and another wording of what happened, where the persona has one left."""
    import re

    user = p10_user()
    texts = []
    for line in ("assert candidate([1, 2]) == [2, 1]", "assert candidate([]) == []"):
        verdict = {"status": "failed", "failure": {"type": "AssertionError", "message": "", "line": line}}
        texts.append(_reaction(user, verdict))
        user.said.append(texts[-1])
    plain = [re.sub(r"`[^`]*`", "`...`", t) for t in texts]
    assert plain[0] != plain[1], texts
