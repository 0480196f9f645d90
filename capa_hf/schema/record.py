"""The typed record of one played session and trial: a line of a run's sessions.jsonl.

The episode returns a `SessionRecord`, `evaluation/records.py` writes and reads them, and every
reader (metrics, summaries, analysis frames, the viewer, rescoring, the veto's and the
conditions' counts) uses attributes: `rec.solved`, `rec.incomplete`,
`rec.submissions[0].verdict.status`.

`SessionRecord.from_dict(line)` reads a line written by any CAPA version and `to_dict()` gives
the same dict back, key for key and in the same key order, so a line that is read and written
again is byte for byte what it was (a field not given stays absent; a field a record does not
declare is kept). Fields a condition, a plug-in or the generation pipeline add (the gate's `gate`
and `digest`, a memory system's `memory`, generation's `fallback` and `consistency`) are not
declared here: read them with `rec.extra("gate")`, set them with `rec.add_extra("gate", value)`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_serializer, model_validator


class _Record(BaseModel):
    # extra="allow": fields a later version or a plug-in adds survive a round trip
    model_config = ConfigDict(extra="allow")
    _order: tuple[str, ...] = PrivateAttr(default=())    # the keys as read, so a rewrite keeps them in order

    @model_validator(mode="wrap")
    @classmethod
    def _keep_key_order(cls, data: Any, handler):
        rec = handler(data)
        if type(data) is dict and rec.__pydantic_private__ is not None:
            rec.__pydantic_private__["_order"] = tuple(data)     # (not rec._order =: attribute access is slow)
        return rec

    @model_serializer(mode="wrap")
    def _in_key_order(self, handler):
        out = handler(self)
        private = self.__pydantic_private__         # (read directly: attribute access is slow here)
        order = private.get("_order") if private else None
        if not order or type(out) is not dict or tuple(out) == order:
            return out
        first = {k: out[k] for k in order if k in out}
        return {**first, **{k: v for k, v in out.items() if k not in first}}

    def to_dict(self) -> dict:
        """The record as its sessions.jsonl line holds it: the fields it was given, in their order."""
        return self.model_dump(mode="json", exclude_unset=True)

    @classmethod
    def from_dict(cls, data: dict):
        """The record of a sessions.jsonl line (a pydantic ValidationError names a malformed field)."""
        return cls.model_validate(data)

    def extra(self, name: str, default: Any = None) -> Any:
        """A field this model does not declare (a condition's `gate`, a memory system's `memory`),
        or `default` when the record has none."""
        return (self.model_extra or {}).get(name, default)

    def add_extra(self, name: str, value: Any) -> None:
        """Set a field this model does not declare; it is written after the declared ones."""
        if name in type(self).model_fields:
            raise ValueError(f"{name!r} is a declared field of {type(self).__name__}; set the attribute")
        setattr(self, name, value)


class Failure(_Record):
    type: str = Field(description="What failed: an exception type, 'AssertionError', 'Timeout' ...")
    message: str = Field("", description="The failure's message (may be empty).")
    line: str | None = Field(None, description="The failing line of the test or the code, when known.")


class VetoInfo(_Record):
    vetoed: bool = Field(description="Whether the LLM veto turned this pass into `vetoed`.")
    valid: bool = Field(True, description="False when the veto gave no usable answer (the pass stands).")
    reason: str = Field("", description="The veto's reason, in its words.")
    attempts: list[dict[str, Any]] = Field(default_factory=list, description="Each answer of the veto model "
                                           "({text, error}): a second one after an unusable answer.")


class Verdict(_Record):
    status: str = Field(description="'passed', a sandbox status (failed, error, timeout, ...) or 'vetoed'.")
    failure: Failure | None = Field(None, description="What failed, for a status other than passed.")
    stdout: str = Field("", description="The run's standard output (capped).")
    stderr: str = Field("", description="The run's standard error (capped).")
    wall_s: float = Field(0.0, description="Seconds the sandbox took for this submission.")
    layers: dict[str, bool] = Field(default_factory=dict, description="Isolation layers active for this run.")
    notes: list[str] = Field(default_factory=list, description="The sandbox's notes on this run (a layer "
                                                                "it could not set up, and why).")
    failing_value: str | None = Field(None, description="A failed run's signature of what the candidate gave "
                                                        "in its last call (the scripted user compares it).")
    sandbox_status: str | None = Field(None, description="The sandbox's own status when a veto changed `status`.")
    veto: VetoInfo | None = Field(None, description="The LLM veto's judgement of a pass, when a veto ran.")

    @property
    def passed(self) -> bool:
        """Whether this verdict is a pass (a vetoed pass is not)."""
        return self.status == "passed"


class SubmissionRecord(_Record):
    turn: int = Field(description="The assistant turn (1-based) whose reply held the code.")
    code: str = Field(description="The code that ran: the candidate and what it needs, demo code dropped.")
    candidate: str | None = Field(None, description="The function the tests' `candidate` was bound to.")
    binding: str | None = Field(None, description="Which extraction rule bound it (entry point, root function).")
    dropped: list[str] = Field(default_factory=list, description="Top-level statements dropped before the run.")
    rule: str | None = Field(None, description="The version of the extraction rule that made this submission.")
    block_rule: str | None = Field(None, description="How the code's blocks were chosen: one_block, "
                                                     "candidate_block, merged_blocks or unparsable.")
    blocks: list[int] = Field(default_factory=list, description="The reply's Python blocks whose statements "
                                                                 "run, numbered from 0.")
    set_aside: list[dict[str, Any]] = Field(default_factory=list, description="Blocks left out of the run "
                                                                               "(tests, unparsable), with why.")
    verdict: Verdict = Field(description="The judge's verdict.")
    previous_status: str | None = Field(None, description="A rescored run's: the status this turn had as "
                                                          "recorded (None when it was no submission then).")


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


class RescoreChange(_Record):
    turn: int = Field(description="The assistant turn whose verdict changed.")
    was: str | None = Field(description="Its status as recorded (None: no submission then).")
    now: str | None = Field(description="Its status now (None: no longer a submission).")


class RescoreInfo(_Record):
    rule: str = Field(description="The extraction rule the replies were extracted with again.")
    outcome: str = Field(description="unchanged, solved_earlier, newly_solved or pass_lost.")
    previous_success_turn: int | None = Field(description="The first passing turn as recorded.")
    changed_turns: list[int] = Field(default_factory=list, description="Turns whose status changed.")
    changes: list[RescoreChange] = Field(default_factory=list, description="Each changed turn, was and now.")
    code_changed_turns: list[int] = Field(default_factory=list, description="Turns whose code that runs changed.")
    played_turns: int = Field(description="Assistant turns of the recorded session.")
    truncated: bool = Field(description="Whether turns after a new, earlier pass were dropped.")
    dropped_turns: int = Field(description="How many were dropped.")
    cut_short: bool = Field(description="A recorded pass now fails and fewer turns than the budget were played: "
                                        "scored unsolved, a bound from below.")
    feedback_differs: list[int] = Field(default_factory=list, description="Failing turns that now fail "
                                        "differently: the later user turns answered the old failure.")


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
    context_sha256: str | None = Field(None, description="The digest of the system message the model saw "
                                                         "(its text is in the run's contexts.jsonl).")
    turns: list[TurnRecord] = Field(default_factory=list, description="The public transcript, request first.")
    turn_kinds: list[str] = Field(default_factory=list, description="Per assistant turn: submission, "
                                  "clarification, empty, cut_off, cut_off_thinking.")
    assistant_turns: int = Field(0, description="Assistant turns played.")
    submissions: list[SubmissionRecord] = Field(default_factory=list, description="Every submission, in order.")
    success_turn: int | None = Field(None, description="The turn of the first passing submission; None if unsolved.")
    solved: bool = Field(False, description="Whether a submission passed within the turn budget.")
    revealed: list[str] = Field(default_factory=list, description="Hidden items the user revealed, in order.")
    user_log: list[dict[str, Any]] = Field(default_factory=list, description="The simulated user's per-turn log "
                                           "(the scripted user's basis, the LLM user's planner and expression).")
    usage: list[TurnUsage] = Field(default_factory=list, description="Token usage per assistant turn.")
    timing: dict[str, float] = Field(default_factory=dict, description="wall_s and judge_s of the episode.")
    incomplete: bool = Field(False, description="True when the engine failed: not scored, retried by a rerun.")
    error: dict[str, Any] | None = Field(None, description="The engine's error of an incomplete session.")
    rescore: RescoreInfo | None = Field(None, description="A rescored run's: what rescoring changed.")
    difficulty: str | None = Field(None, description="The session's difficulty label, set in memory when a run "
                                                     "is summarised with labels (never written to sessions.jsonl).")

    @property
    def key(self) -> str:
        """`session_id#trial`: one record per key in a run (the latest line wins)."""
        return f"{self.session_id}#{self.trial}"

    def assistant_replies(self) -> list[str]:
        """The assistant's replies, in order."""
        return [t.content for t in self.turns if t.role == "assistant"]

    def error_text(self) -> str:
        """The engine's error as text ('' for a complete record)."""
        return "" if not self.error else str(self.error.get("error", self.error))
