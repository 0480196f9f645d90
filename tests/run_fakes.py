"""Hand-made run folders for the analysis tests: config.json and sessions.jsonl as `capa eval`
writes them, with records whose outcome is chosen by the test."""

from __future__ import annotations

import json
from pathlib import Path

from capa_hf.evaluation.config import EvalConfig
from capa_hf.schema.record import SessionRecord

DATASET = ("0.2.0", "a" * 64)


def record(session_id: str, success_turn: int | None, trial: int = 0, cell: str = "C01",
           mechanisms=("habitual_omission", "implicit_constraint"), resolvable: bool = True,
           kinds=("convention",), max_turns: int = 8, incomplete: bool = False) -> dict:
    """A session record whose first passing submission is at `success_turn` (None: unsolved,
    every turn a failing submission)."""
    last = success_turn or max_turns
    subs = [{"turn": t, "code": "def f(): pass", "verdict": {"status": "passed" if t == success_turn else "failed",
                                                               "failure": None if t == success_turn else
                                                               {"type": "AssertionError", "message": "",
                                                                "line": "assert candidate(1) == 2"}}}
            for t in range(1, last + 1)]
    turns = [{"role": "user", "content": "request"}]
    for t in range(1, last + 1):
        turns += [{"role": "assistant", "content": f"reply {t}"}]
        if t < last:
            turns += [{"role": "user", "content": f"user {t}"}]
    rec = {"session_id": session_id, "trial": trial, "cell_id": cell, "persona_id": "P01",
           "mechanisms": list(mechanisms), "task_id": "HumanEval/0", "role": "convention_only",
           "item_kinds": list(kinds), "fully_resolvable": resolvable, "condition": "?", "turns": turns,
           "turn_kinds": ["submission"] * last, "submissions": subs, "success_turn": success_turn,
           "solved": success_turn is not None,
           "usage": [{"prompt_tokens": 10, "completion_tokens": 5, "cached_tokens": 0, "latency_s": 0.1,
                      "finish_reason": "stop", "from_cache": False}] * last,
           "timing": {"wall_s": 0.5, "judge_s": 0.1}}
    if incomplete:
        rec.update({"incomplete": True, "error": {"error": "HTTP 500"}, "solved": False, "success_turn": None,
                    "submissions": []})
    return rec


def typed(records: list[dict]) -> list[SessionRecord]:
    """The hand-made records as the run's readers get them."""
    return [SessionRecord.from_dict(r) for r in records]


def write_run(path: Path, condition: str, records: list[dict], model: str = "scripted", dataset=DATASET,
              n_targets: int | None = None, samples: int = 1, split: str = "heldout", **config) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    cfg = EvalConfig(model=model, condition=condition, samples=samples, split=split, **config)
    for r in records:
        r["condition"] = condition
    n = n_targets if n_targets is not None else len({r["session_id"] for r in records})
    (path / "config.json").write_text(json.dumps({
        "run": cfg.to_dict(), "engine": {"engine": "scripted"}, "dataset_source": "dist/capa",
        "dataset_version": dataset[0], "dataset_manifest_sha256": dataset[1], "n_targets": n}))
    (path / "sessions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return path
