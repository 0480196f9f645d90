"""`make demo`'s side-by-side runner: two condition runs in two processes, each with its own engine."""

from __future__ import annotations

import json

from capa_hf.demo import _config, side_by_side

REPLY = "```python\ndef f(x):\n    return x\n```\nThat is all."


def test_two_runs_side_by_side_each_with_its_own_engine(tmp_path, capsys):
    configs = {c: _config("scripted", c, "C01", 64, None) for c in ("none", "same-user")}
    configs = {c: type(cfg)(**{**cfg.__dict__, "engine_args": {"default": REPLY}}) for c, cfg in configs.items()}
    outs = {c: tmp_path / f"demo-C01-{c}" for c in configs}
    summaries = side_by_side(configs, outs, 0.0)
    assert set(summaries) == {"demo-C01-none", "demo-C01-same-user"}
    for c, out in outs.items():
        s = summaries[out.name]
        assert s["config"]["condition"] == c and s["overall"]["n"] == 5
        rows = [json.loads(line) for line in (out / "sessions.jsonl").read_text().splitlines()]
        assert len(rows) == 5 and all(r["condition"] == c for r in rows)
        # the reply ends where its code block closes: the prose after it is not in the transcript
        replies = [t["content"] for r in rows for t in r["turns"] if t["role"] == "assistant"]
        assert replies and all(t == REPLY[:REPLY.index("\nThat")] for t in replies)
    assert json.loads((outs["none"] / "config.json").read_text())["run"]["stop_after_fence"] == "def "
