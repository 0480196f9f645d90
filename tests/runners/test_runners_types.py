import pytest

from runners import ChatRequest, ChatResult, Sampling, derive_seed, strip_thinking
from runners.thinking import split_reply, template_thinks


def test_sampling_defaults_are_greedy_and_leave_the_rest_to_the_model():
    s = Sampling()
    assert (s.temperature, s.max_tokens, s.seed, s.stop) == (0.0, 512, 0, ())
    assert (s.top_p, s.top_k, s.min_p) == (None, None, None)  # not set: generation_config decides
    assert s.overrides() == {"temperature": 0.0, "seed": 0}
    assert Sampling(temperature=None, seed=None).overrides() == {}


@pytest.mark.parametrize("kwargs, word", [
    ({"temperature": -1}, "temperature"), ({"temperature": float("nan")}, "temperature"),
    ({"top_p": 0}, "top_p"), ({"top_p": 1.5}, "top_p"), ({"max_tokens": 0}, "max_tokens"),
    ({"seed": 1.5}, "seed"), ({"seed": True}, "seed"), ({"stop": ("",)}, "stop"),
    ({"top_k": -1}, "top_k"), ({"top_k": 2.0}, "top_k"), ({"min_p": 1.1}, "min_p"), ({"min_p": "0"}, "min_p"),
])
def test_sampling_rejects_bad_values(kwargs, word):
    with pytest.raises(ValueError, match=word):
        Sampling(**kwargs)


def test_sampling_stop_list_becomes_tuple_and_roundtrips():
    s = Sampling(stop=["</s>", "\n\n"], top_k=20, min_p=0.0, top_p=0.95, temperature=0.6)
    assert s.stop == ("</s>", "\n\n")
    assert Sampling.from_dict(s.to_dict()) == s
    hash(s)
    with pytest.raises(ValueError, match="unknown Sampling field.*topk"):
        Sampling.from_dict({"topk": 3})


def test_derive_seed_is_stable_and_spreads():
    assert derive_seed(0, "C01-s3", 0, 1) == derive_seed(0, "C01-s3", 0, 1)
    seeds = {derive_seed(0, "C01-s3", trial, turn) for trial in range(4) for turn in range(8)}
    assert len(seeds) == 32 and all(0 <= x < 2 ** 31 for x in seeds)
    assert derive_seed(1, "C01-s3", 0, 1) != derive_seed(0, "C01-s3", 0, 1)
    assert derive_seed(0, "a", 1) != derive_seed(0, "a1")  # parts are kept apart


def test_chat_request_from_messages_and_back():
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    r = ChatRequest.from_messages(msgs, Sampling(max_tokens=5))
    assert r.messages == (("system", "be brief"), ("user", "hi"))
    assert r.message_dicts() == msgs
    assert r.last_user_message == "hi"
    hash(r)


def test_affinity_is_not_part_of_equality():
    msgs = [{"role": "user", "content": "hi"}]
    a = ChatRequest.from_messages(msgs, affinity="C01")
    assert a.affinity == "C01" and a == ChatRequest.from_messages(msgs) and hash(a) == hash(ChatRequest.from_messages(msgs))
    with pytest.raises(ValueError, match="affinity"):
        ChatRequest.from_messages(msgs, affinity=3)


@pytest.mark.parametrize("msgs, word", [
    ([], "at least one"),
    ([{"role": "user"}], "content"),
    ([{"content": "x"}], "role"),
    ([{"role": "user", "content": 3}], "content"),
    ([{"role": "user", "content": "x", "name": "bob"}], "name"),
    ("hello", "sequence"),
])
def test_chat_request_rejects_bad_messages(msgs, word):
    with pytest.raises(ValueError, match=word):
        ChatRequest.from_messages(msgs)


def test_chat_result_roundtrip():
    r = ChatResult("x", "stop", 1, 2, 0, 0.5)
    assert ChatResult.from_dict(r.to_dict()) == r
    cut = ChatResult("", "length", cut_in_thinking=True, thinking="hmm")
    assert ChatResult.from_dict(cut.to_dict()) == cut
    assert r.ok and not ChatResult.failure("boom").ok


def test_strip_thinking():
    assert strip_thinking("<think>a</think>\n\nanswer") == ("answer", True)
    assert strip_thinking("plain") == ("plain", False)
    assert strip_thinking("<think>never closed") == ("", True)
    assert strip_thinking("reasoning only, cut", expect_thinking=True) == ("", True)
    assert strip_thinking("x</think>y</think> z") == ("z", True)


@pytest.mark.parametrize("raw, finish, expect, want", [
    # (text, finish_reason, thinking, cut)
    ("<think>a <user> b</think>\n\nanswer\n<user> more", "stop", False, ("answer\n", "stop", "a <user> b", False)),
    ("<think>a</think>answer runs on", "length", False, ("answer runs on", "length", "a", False)),
    ("<think>still going", "length", False, ("", "length", "still going", True)),
    ("reasoning, template opened", "length", True, ("", "length", "reasoning, template opened", True)),
    ("reasoning</think>\n\nok</assistant>", "stop", True, ("ok", "stop", "reasoning", False)),
    ("plain answer <user> x", "length", False, ("plain answer ", "stop", "", False)),
    ("plain answer, no markers", "stop", True, ("plain answer, no markers", "stop", "", False)),
])
def test_split_reply(raw, finish, expect, want):
    rep = split_reply(raw, finish, stop=("<user>", "</assistant>"), expect_thinking=expect)
    assert (rep.text, rep.finish_reason, rep.thinking, rep.cut_in_thinking) == want


def test_split_reply_earliest_stop_and_no_strip():
    assert split_reply("x B y A z", "stop", stop=("A", "B")).text == "x "
    assert split_reply("<think>t</think>a", "stop", strip=False).text == "<think>t</think>a"
    assert template_thinks("{% if enable_thinking %}") and template_thinks("<think>") and not template_thinks(None)


FENCED = "Here it is:\n```python\ndef f(x):\n    return x\n```\nIt returns x. Also:\n```python\nprint(f(1))\n```\n"


def test_cut_after_fence_ends_at_the_first_closed_block_with_the_needle():
    from runners.thinking import cut_after_fence
    assert cut_after_fence(FENCED, "def ") == "Here it is:\n```python\ndef f(x):\n    return x\n```"
    # a block without the needle does not end the reply; the one after it does
    usage_first = "```python\nprint(1)\n```\nthen\n```\ndef g():\n    pass\n```\nbye"
    assert cut_after_fence(usage_first, "def ") == usage_first[:usage_first.index("bye") - 1]
    assert cut_after_fence("```python\ndef f(x):\n    return x\n", "def ") is None    # not closed yet
    assert cut_after_fence("no code at all", "def ") is None
    assert cut_after_fence(FENCED, None) is None


def test_split_reply_applies_stop_after_fence_after_the_stop_strings_and_thinking():
    rep = split_reply("<think>```python\ndef no():\n```</think>" + FENCED, "length", stop_after_fence="def ")
    assert rep.text.endswith("    return x\n```") and "It returns x" not in rep.text
    assert rep.finish_reason == "stop"                       # a finished block is a finished reply
    assert split_reply(FENCED, "stop").text == FENCED          # unset: nothing is cut
    rep = split_reply("```python\ndef f():\n<user> x\n```", "stop", stop=("<user>",), stop_after_fence="def ")
    assert rep.text == "```python\ndef f():\n"                # the stop string came first


def test_stop_after_fence_is_validated_and_only_keyed_when_set():
    with pytest.raises(ValueError, match="stop_after_fence"):
        Sampling(stop_after_fence="")
    assert "stop_after_fence" not in Sampling().to_dict()       # caches made before the field still hit
    s = Sampling(stop_after_fence="def ")
    assert s.to_dict()["stop_after_fence"] == "def " and Sampling.from_dict(s.to_dict()) == s


def test_the_scripted_engine_cuts_after_the_fence_like_real_engines():
    from runners import ScriptedEngine
    eng = ScriptedEngine(fn=lambda messages: FENCED, model="s")
    req = ChatRequest.from_messages([{"role": "user", "content": "q"}], Sampling(stop_after_fence="def "))
    assert eng.generate([req])[0].text == FENCED[:FENCED.index("\nIt returns")]
