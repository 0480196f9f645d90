"""The typed record of one played session and trial: a line of a run's sessions.jsonl.

`SessionRecord.from_dict(line)` reads a line written by any CAPA version (a field it does not
know, such as a condition's own `gate` or `memory` entry, is kept as it is); `to_dict()` gives
the same dict back, key for key, so typed and untyped readers see one format. Readers use
attributes (`rec.solved`, `rec.submissions[0].verdict.status`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Record(BaseModel):
    # extra="allow": fields a later version or a plug-in adds survive a round trip
    model_config = ConfigDict(extra="allow")

    def to_dict(self) -> dict:
        return self.model_dump(mode="json", exclude_unset=True)

    @classmethod
    def from_dict(cls, data: dict):
        return cls.model_validate(data)


class Failure(_Record):
    type: str = Field(description="What failed: an exception type, 'AssertionError', 'Timeout' ...")
    message: str = Field("", description="The failure's message (may be empty).")
    line: str | None = Field(None, description="The failing line of the test or the code, when known.")


class VetoInfo(_Record):
    vetoed: bool = Field(description="Whether the LLM veto turned this pass into `vetoed`.")
    valid: bool = Field(True, description="False when the veto gave no usable answer (the pass stands).")
    reason: str = Field("", description="The veto's reason, in its words.")


class Verdict(_Record):
    status: str = Field(description="'passed', a sandbox status (failed, error, timeout, ...) or 'vetoed'.")
    failure: Failure | None = Field(None, description="What failed, for a status other than passed.")
    stdout: str = Field("", description="The run's standard output (capped).")
    stderr: str = Field("", description="The run's standard error (capped).")
    wall_s: float = Field(0.0, description="Seconds the sandbox took for this submission.")
    layers: dict[str, bool] = Field(default_factory=dict, description="Isolation layers active for this run.")
    sandbox_status: str | None = Field(None, description="The sandbox's own status when a veto changed `status`.")
    veto: VetoInfo | None = Field(None, description="The LLM veto's judgement of a pass, when a veto ran.")


class SubmissionRecord(_Record):
    turn: int = Field(description="The assistant turn (1-based) whose reply held the code.")
    code: str = Field(description="The code that ran: the candidate and what it needs, demo code dropped.")
    candidate: str | None = Field(None, description="The function the tests' `candidate` was bound to.")
    binding: str | None = Field(None, description="Which extraction rule bound it (entry point, root function).")
    dropped: list[str] = Field(default_factory=list, description="Top-level statements dropped before the run.")
    verdict: Verdict = Field(description="The judge's verdict.")


class TurnRecord(_Record):
    role: Literal["user", "assistant", "system"] = Field(description="Who spoke.")
    content: str = Field(description="What was said, as the other side saw it.")


class TurnUsage(_Record):
    prompt_tokens: int = Field(0, description="Tokens of the prompt of this assistant turn.")
    completion_tokens: int = Field(0, description="Tokens of the reply.")
    cached_tokens: int = Field(0, description="Prompt tokens served from the engine's prefix cache.")
    latency_s: float = Field(0.0, description="Seconds the engine took for this reply.")
    finish_reason: str = Field("stop", description="Why the reply ended: stop, length, error ...")
    from_cache: bool = Field(False, description="Whether the reply came from the completion cache.")


class SessionRecord(_Record):
    session_id: str = Field(description="The session (a dataset session id, or a HumanEval task id).")
    trial: int = Field(0, description="Which of the run's --samples trials (0-based).")
    cell_id: str | None = Field(None, description="The user cell; None for the blank control.")
    persona_id: str | None = Field(None, description="The persona; None for the blank control.")
    mechanisms: list[str] = Field(default_factory=list, description="The cell's two ambiguity mechanisms.")
    task_id: str | None = Field(None, description="The HumanEval task.")
    variant_id: str | None = Field(None, description="The task variant whose tests judged the submissions.")
    role: str | None = Field(None, description="The session's role in the cell design (learn, reuse, ...).")
    item_kinds: list[str] = Field(default_factory=list, description="Kinds of its hidden items (convention, task).")
    fully_resolvable: bool | None = Field(None, description="Whether the cell's history resolves every hidden item.")
    condition: str | None = Field(None, description="The condition the session was played under.")
    context_sources: list[str] = Field(default_factory=list, description="History sessions the context drew on.")
    context_chars: int = Field(0, description="Length of the condition's context in the system message.")
    turns: list[TurnRecord] = Field(default_factory=list, description="The public transcript, request first.")
    turn_kinds: list[str] = Field(default_factory=list, description="Per assistant turn: submission, "
                                  "clarification, empty, cut_off, cut_off_thinking.")
    assistant_turns: int = Field(0, description="Assistant turns played.")
    submissions: list[SubmissionRecord] = Field(default_factory=list, description="Every submission, in order.")
    success_turn: int | None = Field(None, description="The turn of the first passing submission; None if unsolved.")
    solved: bool = Field(False, description="Whether a submission passed within the turn budget.")
    revealed: list[str] = Field(default_factory=list, description="Hidden items the user revealed, in order.")
    user_log: list[dict[str, Any]] = Field(default_factory=list, description="The LLM user's per-turn log.")
    usage: list[TurnUsage] = Field(default_factory=list, description="Token usage per assistant turn.")
    timing: dict[str, float] = Field(default_factory=dict, description="wall_s and judge_s of the episode.")
    incomplete: bool = Field(False, description="True when the engine failed: not scored, retried by a rerun.")
    error: dict[str, Any] | None = Field(None, description="The engine's error of an incomplete session.")
