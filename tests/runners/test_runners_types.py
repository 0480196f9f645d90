import pytest

from runners import ChatRequest, ChatResult, Sampling, strip_thinking


def test_sampling_defaults_are_greedy():
    s = Sampling()
    assert (s.temperature, s.top_p, s.max_tokens, s.seed, s.stop) == (0.0, 1.0, 512, 0, ())


@pytest.mark.parametrize("kwargs, word", [
    ({"temperature": -1}, "temperature"), ({"top_p": 0}, "top_p"), ({"max_tokens": 0}, "max_tokens"),
    ({"seed": 1.5}, "seed"), ({"stop": ("",)}, "stop"),
])
def test_sampling_rejects_bad_values(kwargs, word):
    with pytest.raises(ValueError, match=word):
        Sampling(**kwargs)


def test_sampling_stop_list_becomes_tuple_and_roundtrips():
    s = Sampling(stop=["</s>", "\n\n"])
    assert s.stop == ("</s>", "\n\n")
    assert Sampling.from_dict(s.to_dict()) == s
    hash(s)


def test_chat_request_from_messages_and_back():
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    r = ChatRequest.from_messages(msgs, Sampling(max_tokens=5))
    assert r.messages == (("system", "be brief"), ("user", "hi"))
    assert r.message_dicts() == msgs
    assert r.last_user_message == "hi"
    hash(r)


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
    assert r.ok and not ChatResult.failure("boom").ok


def test_strip_thinking():
    assert strip_thinking("<think>a</think>\n\nanswer") == ("answer", True)
    assert strip_thinking("plain") == ("plain", False)
    assert strip_thinking("<think>never closed") == ("", True)
    assert strip_thinking("reasoning only, cut", expect_thinking=True) == ("", True)
    assert strip_thinking("x</think>y</think> z") == ("z", True)
