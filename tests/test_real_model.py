"""The real embedded model (llama.cpp, Qwen2.5-Coder-0.5B) on one held-out session. Slow; CI runs it."""

import json

import pytest

from capa_hf.evaluation.config import EvalConfig
from capa_hf.evaluation.run import run_eval


@pytest.mark.slow
def test_embedded_model_plays_one_session(tmp_path, capa_data):
    from runners import make_engine

    engine = make_engine("llamacpp")
    cfg = EvalConfig(model="llamacpp", condition="same-user", cells=("C01",), limit=1, max_turns=3,
                     max_tokens=256)
    summary = run_eval(cfg, tmp_path / "run", engine=engine, progress=False, data=capa_data)
    rec = json.loads((tmp_path / "run" / "sessions.jsonl").read_text().splitlines()[0])
    assert summary["n_sessions"] == 1 and summary["n_incomplete"] == 0
    assert 1 <= rec["assistant_turns"] <= 3
    assert all(u["prompt_tokens"] > 0 for u in rec["usage"])
    assert any(u["completion_tokens"] > 0 for u in rec["usage"])
    assert rec["turns"][0]["content"] == capa_data.heldout[rec["session_id"]].initial_request
    assert all(t["content"].strip() for t in rec["turns"] if t["role"] == "user")
    for sub in rec["submissions"]:
        assert sub["verdict"]["status"] in {"passed", "failed", "error", "timeout", "memory", "blocked"}
    # a rerun of the same config with the first run's completion cache reproduces every reply
    (tmp_path / "run2").mkdir()
    (tmp_path / "run2" / "cache.sqlite").write_bytes((tmp_path / "run" / "cache.sqlite").read_bytes())
    summary2 = run_eval(cfg, tmp_path / "run2", engine=engine, progress=False, data=capa_data)
    rec2 = json.loads((tmp_path / "run2" / "sessions.jsonl").read_text().splitlines()[0])
    assert rec2["turns"] == rec["turns"] and summary2["overall"] == summary["overall"]
    assert all(u["from_cache"] for u in rec2["usage"])
