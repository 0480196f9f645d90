"""`make demo`'s runner: the two condition runs, each with an engine of its own."""

from __future__ import annotations

import json

from capa_hf.demo import run_demo

REPLY = "```python\ndef f(x):\n    return x\n```\nThat is all."


def test_both_runs_each_with_a_fresh_engine_and_the_reply_cut_after_its_code(tmp_path, capa_data):
    summaries = run_demo("scripted", "C01", tmp_path, 64, engine_args={"default": REPLY}, data=capa_data,
                         progress=False)
    assert list(summaries) == ["demo-C01-none", "demo-C01-same-user"]
    for name, s in summaries.items():
        out = tmp_path / name
        assert s["overall"]["n"] == 5 and name.endswith(s["config"]["condition"])
        rows = [json.loads(line) for line in (out / "sessions.jsonl").read_text().splitlines()]
        assert len(rows) == 5
        # the reply ends where its code block closes: the prose after it is not in the transcript
        replies = [t["content"] for r in rows for t in r["turns"] if t["role"] == "assistant"]
        assert replies and all(t == REPLY[:REPLY.index("\nThat")] for t in replies)
        cfg = json.loads((out / "config.json").read_text())
        assert cfg["run"]["stop_after_fence"] == "def " and cfg["run"]["cells"] == ["C01"]
