"""What `capa eval` runs: one frozen record, written to the run's config.json.

Two runs with the same `EvalConfig` are the same run: a rerun resumes it, and a different
config in the same folder is refused.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from capa_hf.defaults import EVAL_MAX_TOKENS, GREEDY, JUDGE, MAX_TURNS, SPLIT, STOP_AFTER_FENCE, USER
from capa_hf.evaluation.conditions import HISTORY_STOPS


@dataclass(frozen=True)
class EvalConfig:
    model: str
    condition: str
    dataset: str | None = None
    revision: str | None = None
    split: str = SPLIT
    cells: tuple[str, ...] | None = None
    limit: int | None = None
    seed: int = 0
    samples: int = 1
    max_turns: int = MAX_TURNS
    max_tokens: int = EVAL_MAX_TOKENS
    temperature: float = GREEDY
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    user: str = USER                        # or llm:<engine spec>
    user_engine_args: dict = field(default_factory=dict)
    judge: str = JUDGE                      # a judge spec, e.g. veto:sandbox (an LLM may veto a pass, never grant one)
    judge_model: str | None = None          # engine spec of a judge that asks a model (the veto's)
    judge_engine_args: dict = field(default_factory=dict)
    condition_args: dict = field(default_factory=dict)   # e.g. gate_model, memory_llm
    engine_args: dict = field(default_factory=dict)
    preset: str | None = None
    max_errors: int | None = None          # None: 5% of the sessions (at least 1)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["cells"] = list(self.cells) if self.cells else None
        d["stop"] = list(HISTORY_STOPS)
        d["stop_after_fence"] = STOP_AFTER_FENCE
        return d
