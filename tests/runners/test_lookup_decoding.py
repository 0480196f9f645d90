"""Prompt-lookup drafts: the pure lookup, and greedy decoding with drafts on the real embedded model."""

from __future__ import annotations

import numpy as np
import pytest

from runners.lookup_decoding import LookupStats, lookup_draft


def _ids(*xs):
    return np.array(xs, dtype=np.intc)


def test_draft_is_what_followed_the_end_of_the_context_earlier():
    ids = _ids(1, 2, 3, 4, 5, 6, 7, 9, 1, 2, 3, 4)
    assert lookup_draft(ids, 3, min_ngram=3).tolist() == [5, 6, 7]
    assert lookup_draft(ids, 10, min_ngram=3).tolist() == [5, 6, 7, 9, 1, 2, 3, 4]  # runs to the end
    assert lookup_draft(ids, 0, min_ngram=3).tolist() == []


def test_longest_match_wins_then_the_most_recent():
    # "8 3 4" occurs late but matches 2 tokens; "2 3 4" early matches 3
    ids = _ids(2, 3, 4, 50, 51, 8, 3, 4, 60, 61, 2, 3, 4)
    assert lookup_draft(ids, 2, min_ngram=2).tolist() == [50, 51]
    # two equal matches: the later one's continuation
    ids = _ids(7, 8, 9, 1, 7, 8, 9, 2, 7, 8, 9)
    assert lookup_draft(ids, 1, min_ngram=3).tolist() == [2]


def test_no_draft_below_the_minimum_match():
    ids = _ids(1, 2, 30, 40, 5, 2)       # only "2" recurs
    assert lookup_draft(ids, 4, min_ngram=2).tolist() == []
    assert lookup_draft(ids, 4, min_ngram=1).tolist() == [30, 40, 5, 2]
    assert lookup_draft(_ids(3, 3), 4, min_ngram=2).tolist() == []   # too short to hold a match
    with pytest.raises(ValueError):
        lookup_draft(ids, 4, min_ngram=0)


# -- the real model -----------------------------------------------------------------------------

CODE = ("def merge_counts(first, second):\n    merged = dict(first)\n    for key, value in second.items():\n"
        "        if key in merged:\n            merged[key] += value\n        else:\n            merged[key] = value\n"
        "    return merged\n")
ASK = [{"role": "user", "content": "Here is my function:\n```python\n" + CODE + "```\nRename it to combine_counts. "
        "Keep the body exactly as it is and give back the whole function in a code block."}]


@pytest.fixture(scope="module")
def engine():
    pytest.importorskip("llama_cpp")
    from runners import make_engine
    eng = make_engine("llamacpp", state_cache_mb=0, lookup_draft=0)
    yield eng
    eng.close()


def _prompt(eng, messages=ASK):
    from runners import ChatRequest, Sampling
    return eng.prompt_tokens(ChatRequest.from_messages(messages, Sampling()))


def _plain(llm, tokens, max_tokens, stop):
    llm.reset()
    out = llm.create_completion(prompt=tokens, max_tokens=max_tokens, temperature=0.0, top_p=1.0, top_k=0,
                                min_p=0.0, repeat_penalty=1.0, seed=0, stop=stop)
    return out["choices"][0]["text"], out["usage"]["completion_tokens"], out["choices"][0]["finish_reason"]


@pytest.mark.slow
def test_without_drafts_it_is_llama_cpps_own_greedy_decoding(engine):
    from runners.lookup_decoding import greedy_lookup_decode
    llm, tokens = engine.llm, _prompt(engine)
    for max_tokens, stop in ((120, ["<|im_end|>"]), (6, ["<|im_end|>"]), (120, ["<|im_end|>", "total"])):
        text, n, finish = _plain(llm, tokens, max_tokens, stop)
        llm.reset()
        got = greedy_lookup_decode(llm, tokens, max_tokens=max_tokens, stop=stop, n_draft=0)
        assert (got.text, len(got.tokens), got.finish_reason) == (text, n, finish), (max_tokens, stop)
    assert finish == "stop" and "total" not in got.text    # the stop string cut the text


@pytest.mark.slow
def test_drafts_keep_the_greedy_reply_in_fewer_steps_and_a_consistent_cache(engine):
    from runners.lookup_decoding import greedy_lookup_decode
    llm, tokens = engine.llm, _prompt(engine)
    text, n, _ = _plain(llm, tokens, 160, ["<|im_end|>"])
    assert "combine_counts" in text and "merged[key] += value" in text      # the reply copies the code
    stats = LookupStats()
    llm.reset()
    got = greedy_lookup_decode(llm, tokens, max_tokens=160, stop=["<|im_end|>"], stats=stats)
    assert got.text == text and len(got.tokens) == n
    assert stats.emitted == n and stats.accepted > n // 2 and stats.steps < n // 2
    # the KV cache holds the prompt and the reply, no rejected draft tokens
    held = [int(t) for t in llm.input_ids[: llm.n_tokens]]
    assert held == (tokens + got.tokens)[: llm.n_tokens] and llm.n_tokens >= len(tokens) + n - 1

    # the next turn reuses that cache and still decodes what a cold start decodes
    follow = ASK + [{"role": "assistant", "content": text},
                    {"role": "user", "content": "Now return it once more, unchanged, in a code block."}]
    tokens2 = _prompt(engine, follow)
    warm = greedy_lookup_decode(llm, tokens2, max_tokens=160, stop=["<|im_end|>"])
    llm.reset()
    cold = greedy_lookup_decode(llm, tokens2, max_tokens=160, stop=["<|im_end|>"])
    assert warm.text == cold.text and "combine_counts" in warm.text


@pytest.mark.slow
def test_engine_uses_drafts_for_greedy_requests_only():
    pytest.importorskip("llama_cpp")
    from runners import ChatRequest, Sampling, make_engine
    eng = make_engine("llamacpp", state_cache_mb=0)
    try:
        assert eng.describe()["lookup_draft"] == 16 and eng.cache_identity()["lookup_draft"] == 16
        greedy = eng.generate([ChatRequest.from_messages(ASK, Sampling(max_tokens=120, stop_after_fence="def "))])[0]
        assert greedy.ok and greedy.text.endswith("```") and "combine_counts" in greedy.text
        used = eng.lookup_stats.steps
        assert 0 < used < greedy.completion_tokens
        sampled = eng.generate([ChatRequest.from_messages(ASK, Sampling(max_tokens=40, temperature=0.7, seed=3))])[0]
        assert sampled.ok and sampled.completion_tokens > 0
        assert eng.lookup_stats.steps == used          # sampling goes through llama.cpp's own sampler
    finally:
        eng.close()
    with pytest.raises(ValueError, match="lookup_draft"):
        make_engine("llamacpp", lookup_draft=-1)
