"""The judge's veto: an LLM may veto a pass, never grant one.

Registered as the judge `veto`, which wraps another judge: `capa eval --judge veto:sandbox
--judge-model <engine spec>` (`--judge veto` wraps the default judge; `--veto llm:<engine spec>`
is the same run, spelled the old way). `VetoJudge` wraps the inner judge. A submission that fails there is returned as it
is, with no model call. After a pass, one call in the "veto" driver role asks whether the code
agrees in behaviour with the variant's reference (`capa_hf/prompts/veto_*.md`). A "no" turns the
verdict's status into `vetoed` (the session goes on as after a failure; the sandbox's own status
stays in `sandbox_status`). Every judged pass carries `veto: {"vetoed", "reason", "valid"}`. An
answer that is not usable JSON is asked for once more; if still unusable, the pass stands
(`valid: false`, counted): a veto must be an explicit judgement. An engine error raises, so the
session is recorded incomplete and retried by a rerun.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generator, Iterable

from runners.driver import Call
from runners.types import Sampling, derive_seed

from capa_hf.defaults import GREEDY, VETO_MAX_TOKENS
from capa_hf.llm_json import ask_json, reason_of, strict_bool
from capa_hf.prompts import fill, prompt_text
from capa_hf.schema.record import SessionRecord
from capa_hf.simulator.extraction import Submission
from capa_hf.simulator.problem import Problem
from capa_hf.simulator.protocols import Judge, register_judge

VETOED = "vetoed"
KEY = "functionally_equivalent"


def veto_messages(submission: Submission, problem: Problem) -> list[dict]:
    turn = fill("veto_turn", task=problem.prelude.strip() or "(not given)", reference=problem.reference.strip(),
                candidate=submission.candidate, code=submission.code.strip())
    return [{"role": "system", "content": prompt_text("veto_system")}, {"role": "user", "content": turn}]


@dataclass
class VetoJudge:
    inner: Judge
    role: str = "veto"
    seed: int | None = 0
    max_tokens: int = VETO_MAX_TOKENS
    name: str = "sandbox+veto"

    def judge(self, submission: Submission, problem: Problem) -> Generator[Call, Any, dict]:
        verdict = yield from self.inner.judge(submission, problem)
        if verdict.get("status") != "passed":
            return verdict
        seed = None if self.seed is None else derive_seed(self.seed, problem.variant_id, submission.code)
        call = Call(role=self.role, messages=veto_messages(submission, problem),
                    sampling=Sampling(temperature=GREEDY, max_tokens=self.max_tokens, seed=seed))
        answer = yield from ask_json(call, lambda v: strict_bool(v, KEY), f"veto of {problem.variant_id}")
        if not answer.ok:
            return {**verdict, "veto": {"vetoed": False, "valid": False, "reason": "no usable answer; the pass stands",
                                        "attempts": answer.attempts}}
        vetoed = answer.value[KEY] is False
        info = {"vetoed": vetoed, "valid": True, "reason": reason_of(answer.value), "attempts": answer.attempts}
        if not vetoed:
            return {**verdict, "veto": info}
        return {**verdict, "status": VETOED, "sandbox_status": "passed", "veto": info}

    def describe(self) -> dict | None:
        inner = self.inner.describe()
        return None if inner is None else dict(inner)

    def close(self) -> None:
        self.inner.close()


@register_judge("veto")
def make_veto_judge(inner: Judge, *, role: str = "veto", seed: int | None = 0) -> VetoJudge:
    """The veto around `inner` (the judge named after `veto:`), asking the model of driver role `role`."""
    return VetoJudge(inner, role=role, seed=seed, name=f"{getattr(inner, 'name', 'judge')}+veto")


def veto_summary(records: list[SessionRecord], score: Callable[[list[SessionRecord]], dict]) -> dict:
    """The summary's `veto` block: the veto's counts and reasons, and `score` (ES, FT-ES, TTC) of
    the records as scored (vetoes count as fails) and as they would be without the vetoes."""
    return {"veto": {**veto_counts(records), "with_vetoes": score(records),
                     "without_vetoes": score(without_vetoes(records))}}


make_veto_judge.wraps = True            # gets the judge named after its colon (default: the sandbox)
make_veto_judge.engine_role = "veto"    # its own engine (--judge-model), batched in this role
make_veto_judge.summary_counts = veto_summary


def without_vetoes(records: Iterable[SessionRecord]) -> list[SessionRecord]:
    """The records as they would be scored if no pass had been vetoed: a vetoed submission
    counts as the pass the sandbox gave it (the session would have ended there)."""
    out = []
    for rec in records:
        subs = [s.model_copy(update={"verdict": s.verdict.model_copy(update={"status": "passed"})})
                if s.verdict.status == VETOED else s for s in rec.submissions]
        out.append(rec.model_copy(update={"submissions": subs}))
    return out


def veto_counts(records: Iterable[SessionRecord]) -> dict:
    """How many passes the veto assessed, vetoed, and could not assess; the vetoes' reasons."""
    assessed = vetoed = invalid = 0
    reasons = []
    for rec in records:
        for s in rec.submissions:
            v = s.verdict.veto
            if v is None:
                continue
            assessed += 1
            invalid += not v.valid
            if v.vetoed:
                vetoed += 1
                reasons.append({"session": rec.session_id, "turn": s.turn, "reason": v.reason})
    return {"passes_assessed": assessed, "vetoed": vetoed, "invalid_answers": invalid, "vetoes": reasons}
