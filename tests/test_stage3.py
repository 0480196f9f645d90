"""Stage 3 checks, each shown to refuse what it is for (an injected leak, a repeat, one mechanism)."""

from capa_hf.generation.stage3_checks import (check_leaks, check_mechanisms, check_repeats, convention_leaks,
                                              overlap, task_item_leaks)
from capa_hf.schema import Cell, HiddenItem, Keypoint

KP = Keypoint(id="kp_02", category="core_definition", description="d",
              original_text="closer to each other than\n    given threshold",
              plain="Two values are close when the absolute gap between them is strictly smaller than the threshold.",
              vague="Flag values basically on top of each other.", question="How close is close?")


def item(kind="task", **kw):
    base = dict(id="h1", kind=kind, keypoint_id="kp_02" if kind == "task" else None,
                dimension=None if kind == "task" else "container", mechanism="habitual_omission",
                obscured_as="Flag values basically on top of each other.", clarification="x",
                resolvable_from_history=False, revealed_in=())
    base.update(kw)
    return HiddenItem(**base)


def test_a_request_that_states_the_hidden_rule_is_refused():
    clean = "hey. Tell me if a list has two values near each other. Flag values basically on top of each other. thx"
    assert check_leaks(clean, (item(),), {"kp_02": KP}, {}, ["Tell me if a list has two values near each other."]).ok
    leaky = clean.replace("thx", "Close means the absolute gap between them is strictly smaller than the threshold. thx")
    res = check_leaks(leaky, (item(),), {"kp_02": KP}, {}, [])
    assert not res.ok and "h1:" in res.detail


def test_overlap_counts_distinctive_words_only():
    share, n = overlap(KP.plain, "the absolute gap between two values must be strictly smaller than the threshold")
    assert share >= 0.7 and n >= 3
    assert overlap(KP.plain, "return the list of numbers")[1] == 0


def test_a_quoted_literal_of_the_hidden_text_is_a_leak():
    kp = KP.model_copy(update={"original_text": "return 'Yes' if it works"})
    assert "literal 'Yes'" in task_item_leaks("so reply 'Yes' when it is fine", kp, "")
    assert task_item_leaks("so reply 'Yes' when it is fine", kp, "the visible part already says 'Yes'") == []


def test_a_convention_value_named_in_the_request_is_a_leak():
    conv = item("convention", obscured_as="Hand it back in our usual format.")
    req = "Sort these. Hand it back in our usual format. Return it as a tuple."
    res = check_leaks(req, (conv,), {}, {"container": "tuple"}, [])
    assert not res.ok and "tuple" in res.detail
    assert check_leaks(req.replace(" Return it as a tuple.", ""), (conv,), {}, {"container": "tuple"}, []).ok
    # a plain "list of numbers" does not give away a user who wants lists back
    assert convention_leaks("It takes a list of numbers.", "container", "list") == []


def test_repeated_sentences_are_refused():
    assert check_repeats("Do it. Then sort. Do it.").ok is False
    assert check_repeats("Do it. Then sort it. Done.").ok


def test_both_mechanisms_unless_the_plan_could_use_only_one():
    cell = Cell(cell_id="C01", persona_id="P01", mechanisms=("habitual_omission", "implicit_constraint"),
                task_ids=tuple(f"HumanEval/{i}" for i in range(10)))
    one = (item(),)
    assert not check_mechanisms(one, cell).ok
    assert check_mechanisms(one, cell, allow_single=True).ok
    assert check_mechanisms((item(), item(id="h2", mechanism="implicit_constraint")), cell).ok
    assert not check_mechanisms((item(mechanism="structural_logic"),), cell, allow_single=True).ok
