"""bench/gpu_check.py without a GPU: its arithmetic, and a whole run against the fake vLLM."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from runners import ChatRequest, ChatResult, make_engine

REPO = Path(__file__).resolve().parent.parent.parent


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", REPO / "bench" / "gpu_check.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = mod  # dataclasses look their module up while the file runs
    try:
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.modules.pop("gpu_check", None)


def test_counters_delta_and_hit_rate(gpu_check):
    per_replica = [{"vllm:prefix_cache_queries": 100, "vllm:prefix_cache_hits": 30, "name": "x"},
                   {"vllm:prefix_cache_queries": 50, "vllm:prefix_cache_hits": 20}]
    total = gpu_check.counters(per_replica)
    assert total == {"vllm:prefix_cache_queries": 150, "vllm:prefix_cache_hits": 50}
    after = {"vllm:prefix_cache_queries": 350, "vllm:prefix_cache_hits": 200}
    d = gpu_check.delta(total, after)
    assert d == {"vllm:prefix_cache_queries": 200, "vllm:prefix_cache_hits": 150}
    assert gpu_check.hit_rate(d) == 0.75 and gpu_check.hit_rate({}) is None
    assert gpu_check.counters(None) == {} and gpu_check.ratio(1, 0) is None


def _phase(gpu_check, name, tokens, seconds, wall, hits=0, queries=0):
    req = ChatRequest.from_messages([{"role": "user", "content": "q"}])
    res = ChatResult("a", "stop", prompt_tokens=10, completion_tokens=tokens, cached_tokens=hits // 10)
    return gpu_check.Phase(name, [gpu_check.Batch([req], [res], seconds)], wall,
                           {"vllm:prefix_cache_queries": queries, "vllm:prefix_cache_hits": hits}, 1)


def test_report_on_hand_made_phases(gpu_check):
    none = _phase(gpu_check, "none", 900, 1.0, 10.0)
    same = _phase(gpu_check, "same-user", 900, 1.0, 12.0, hits=600, queries=1000)
    raw = _phase(gpu_check, "raw", 1800, 1.9, 1.9)
    rep = gpu_check.report("m", ["C01"], {"vllm_version": "x"}, none, same, raw)
    assert rep["capa_tokens_per_s"] == 900.0 and rep["raw_tokens_per_s"] == round(1800 / 1.9, 2)
    assert rep["throughput_ratio"] == round(900 / (1800 / 1.9), 4) and rep["throughput_ok"] is True
    assert rep["same_user_prefix_cache_hit_rate"] == 0.6
    assert rep["wall_ratio_same_user_to_none"] == 1.2 and rep["wall_ratio_ok"] is True
    slow = gpu_check.report("m", ["C01"], {}, none, _phase(gpu_check, "s", 900, 1.0, 14.0), raw)
    assert slow["wall_ratio_ok"] is False
    text = gpu_check.format_report(rep)
    assert "ratio 0.950 (target >= 0.9: ok)" in text and "hit rate 0.600" in text and "ratio 1.200" in text
    json.dumps(rep)


def test_whole_check_against_the_fake_vllm(gpu_check, fake_vllm, tmp_path):
    engine = make_engine("vllm:m")
    out = tmp_path / "out"
    rc = gpu_check.main(["--model", "m", "--cells", "C01", "--limit", "2", "--out", str(out), "--max-tokens", "64",
                         "--max-turns", "2"], engine=engine)
    assert rc in (0, 1)
    rep = json.loads((out / "gpu_check.json").read_text())
    ph = rep["phases"]
    assert ph["none"]["sessions"] == ph["same-user"]["sessions"] == 2
    assert 2 <= ph["none"]["requests"] <= 4   # at most 2 turns a session
    # the raw replay sent exactly the batches CAPA sent, with the same outputs' lengths
    capa_requests = ph["none"]["requests"] + ph["same-user"]["requests"]
    assert ph["raw_llm_chat"]["requests"] == capa_requests > 0
    assert ph["raw_llm_chat"]["completion_tokens"] == ph["none"]["completion_tokens"] + ph["same-user"]["completion_tokens"]
    assert rep["same_user_prefix_cache_hit_rate"] is not None and rep["throughput_ratio"] is not None
    assert not (out / "runs").exists()  # run folders were temporary
    assert rep["engine"]["engine"] == "vllm"


def test_data_parallel_is_refused(gpu_check, capsys):
    assert gpu_check.main(["--model", "m", "--engine-arg", "data_parallel_size=2"]) == 2
    assert "data_parallel_size must be 1" in capsys.readouterr().err
