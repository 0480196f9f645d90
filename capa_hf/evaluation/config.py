"""What `capa eval` runs: one frozen, validated record, written to the run's config.json.

Two runs with the same `EvalConfig` are the same run: a rerun resumes it, and a different
config in the same folder is refused. Each field's description is also the help text of its
`capa eval` flag (evaluation/eval_cli.py), and its default the flag's default, so the two never
drift apart. A bad value is refused with a `CapaError` naming the flag and what was expected.

    config = EvalConfig(model="reference:asker", cells=("C01",), limit=2)
    config.replace(max_turns=4)          # a validated copy with other values
    config.to_dict()                     # config.json's `run` block
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from capa_hf.defaults import (CONDITION, EVAL_MAX_TOKENS, GREEDY, JUDGE, MAX_ERROR_SHARE, MAX_TURNS, SPLIT,
                              STOP_AFTER_FENCE, USER)
from capa_hf.errors import CapaError
from capa_hf.evaluation.conditions import HISTORY_STOPS


def _field(default: Any = ..., *, flag: str | None = None, expects: str | None = None, **kw) -> Any:
    """A field with its description; `flag` when the command-line flag is not `--<name>`, and
    `expects` for the error message of a value out of range."""
    extra = {k: v for k, v in (("flag", flag), ("expects", expects)) if v is not None}
    if "default_factory" in kw:
        return Field(json_schema_extra=extra or None, **kw)
    return Field(default, json_schema_extra=extra or None, **kw)


class EvalConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    model: str = _field(min_length=1, expects="a runners engine spec",
                        description="the model under test, as a runners engine spec: llamacpp, vllm:Qwen/Qwen3-8B, "
                                    "openai:<model>@<url>, or reference:asker (no model; capa list engines)")
    condition: str = _field(CONDITION, min_length=1, expects="a condition name",
                            description="what the model sees before each request (capa list conditions)")
    dataset: str | None = _field(None, description="the dataset: a local folder or a Hub id "
                                                   "(default: the committed dist/capa)")
    revision: str | None = _field(None, description="the Hub revision or tag of --dataset, e.g. v0.2.0")
    split: str = _field(SPLIT, min_length=1, expects="a split name",
                        description="the sessions to play: heldout, or history")
    cells: tuple[str, ...] | None = _field(None, description="only the sessions of these cells, e.g. C01 C07 "
                                                             "(default: all cells)")
    limit: int | None = _field(None, ge=1, expects="an integer >= 1",
                               description="play at most this many sessions (default: all of them)")
    seed: int = _field(0, description="the seed of the model's sampling, the simulated user and the conditions")
    samples: int = _field(1, ge=1, expects="an integer >= 1",
                          description="independent trials of each session (pass^k)")
    max_turns: int = _field(MAX_TURNS, ge=1, expects="an integer >= 1",
                            description="assistant turns per session; an unsolved session counts as this many")
    max_tokens: int = _field(EVAL_MAX_TOKENS, ge=1, expects="an integer >= 1",
                             description="the model's reply budget per turn, in tokens")
    temperature: float = _field(GREEDY, ge=0, expects="a number >= 0",
                                description="the model's sampling temperature (0: greedy)")
    top_p: float | None = _field(None, gt=0, le=1, expects="a number in (0, 1]",
                                 description="nucleus sampling: the probability mass kept (default: the model's own)")
    top_k: int | None = _field(None, ge=0, expects="an integer >= 0 (0: off)",
                               description="sample among the k likeliest tokens; 0 turns it off "
                                           "(default: the model's own)")
    min_p: float | None = _field(None, ge=0, le=1, expects="a number in [0, 1]",
                                 description="drop tokens below this share of the likeliest one's probability "
                                             "(default: the model's own)")
    user: str = _field(USER, min_length=1, expects="a simulated user",
                       description="the simulated user: scripted, or llm:<engine spec> (the paper's planner and "
                                   "expression agent; capa list users)")
    user_engine_args: dict[str, Any] = _field(default_factory=dict, flag="--user-engine-arg",
                                              description="options of the LLM user's engine")
    judge: str = _field(JUDGE, min_length=1, expects="a judge spec",
                        description="the judge of every submission, or veto:<judge> (a model may veto its passes, "
                                    "never grant one)")
    judge_model: str | None = _field(None, description="engine spec of a judge that asks a model (the veto's)")
    judge_engine_args: dict[str, Any] = _field(default_factory=dict, flag="--judge-engine-arg",
                                               description="options of the judge's engine")
    condition_args: dict[str, Any] = _field(default_factory=dict, flag="--condition-arg",
                                            description="options of the condition, only those it declares "
                                                        "(e.g. gate_model, memory_llm, memory_scope)")
    engine_args: dict[str, Any] = _field(default_factory=dict, flag="--engine-arg",
                                         description="options of the model's engine (e.g. tensor_parallel_size=4)")
    preset: str | None = _field(None, description="the model preset the run was set up from "
                                                  "(capa_hf/data/presets.yaml; capa list presets)")
    max_errors: int | None = _field(None, ge=0, expects="an integer >= 0",
                                    description="abort after more than this many sessions the engine cannot finish "
                                                f"(default: {MAX_ERROR_SHARE:.0%} of the sessions, at least 1)")

    def __init__(self, **data: Any):
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise config_error(exc) from None

    def replace(self, **changes: Any) -> EvalConfig:
        """A copy with `changes`, validated like a new config."""
        return type(self)(**{**{name: getattr(self, name) for name in type(self).model_fields}, **changes})

    def to_dict(self) -> dict:
        """config.json's `run` block: the fields in order, and the stops every run uses."""
        d = self.model_dump()
        d["cells"] = list(self.cells) if self.cells else None
        d["stop"] = list(HISTORY_STOPS)
        d["stop_after_fence"] = STOP_AFTER_FENCE
        return d


def _extra(name: str) -> dict:
    return EvalConfig.model_fields[name].json_schema_extra or {}


def flag_of(name: str) -> str:
    """The `capa eval` flag of a field: `--max-turns` for max_turns, `--engine-arg` for engine_args."""
    return _extra(name).get("flag") or "--" + name.replace("_", "-")


def field_doc(name: str) -> str:
    return EvalConfig.model_fields[name].description or ""


def field_default(name: str) -> Any:
    return EvalConfig.model_fields[name].get_default(call_default_factory=True)


def config_error(exc: ValidationError) -> CapaError:
    """One line for a refused config, naming each bad field's flag, what it expects and what it got."""
    parts = []
    for err in exc.errors():
        name = str(err["loc"][0]) if err["loc"] else ""
        if name not in EvalConfig.model_fields:
            parts.append(f"{name or 'config'}: {err['msg']}")
            continue
        expects = _extra(name).get("expects") or err["msg"].removeprefix("Input should be ").rstrip(".")
        parts.append(f"{flag_of(name)}: expected {expects}, got {err.get('input')!r}")
    return CapaError("; ".join(parts))
