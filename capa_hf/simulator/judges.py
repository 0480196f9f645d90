"""Judges: decide a submission against the session's `Problem`.

`SandboxJudge` (registered as `sandbox`) runs the submission against the problem's hidden tests
in the sandbox; execution decides. An LLM assessment of functional agreement with the reference
may wrap it to veto a pass, never to grant one (`veto.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from capa_hf.defaults import SANDBOX_LIMITS
from capa_hf.simulator.extraction import Submission
from capa_hf.simulator.problem import Problem
from capa_hf.simulator.protocols import register_judge


def with_failing_value(verdict) -> dict:
    """The verdict as a dict, without the recorded calls; a failed one keeps the signature of what
    the candidate gave in its last call (`failing_value`), which the scripted user compares with
    the failure ties (capa_hf/simulator/value_signature.py)."""
    from capa_hf.simulator.value_signature import raised_signature, signature

    d = verdict.to_dict()
    calls = d.pop("calls", None)
    if d["status"] != "passed" and calls:
        try:
            last = verdict.decoded_calls()[-1]
            d["failing_value"] = (raised_signature(last["raised"]["type"]) if "raised" in last
                                  else signature(last["value"]))
        except Exception:  # a value the recording cannot rebuild: no signature, the ties still apply
            pass
    return d


@dataclass
class SandboxJudge:
    timeout_s: float = SANDBOX_LIMITS.timeout_s
    memory_mb: int = SANDBOX_LIMITS.memory_mb
    workers: int | None = None
    name: str = "sandbox"
    _pool: object | None = field(default=None, repr=False)

    @property
    def pool(self):
        if self._pool is None:
            from sandbox import SandboxPool

            self._pool = SandboxPool(workers=self.workers)
        return self._pool

    def run(self, submission: Submission, problem: Problem) -> dict:
        # The task's prompt is the trusted prelude: tests such as HumanEval/32 (`poly`) and /38
        # (`encode_cyclic`) call helpers that the prompt defines and the user never mentions.
        # The submission's chosen function is only the tests' `candidate`: a reply whose root
        # function is named `poly` never replaces the prelude's `poly`.
        verdict = self.pool.check(submission.code, problem.test, problem.entry_point,
                                  timeout_s=self.timeout_s, memory_mb=self.memory_mb, prelude=problem.prelude,
                                  candidate=submission.candidate, record_calls=True)
        return with_failing_value(verdict)

    def judge(self, submission: Submission, problem: Problem):
        return self.run(submission, problem)
        yield  # pragma: no cover - a judge is a generator; this one never calls a model

    def describe(self) -> dict | None:
        """Which isolation the verdicts ran under (None if nothing was judged): results obtained
        without root, say, say so in their summary."""
        if self._pool is None:
            return None
        info = self._pool.worker_info()
        return {"layers": sorted(k for k, v in self._pool.layers.items() if v),
                "notes": sorted({n for w in info for n in w.get("notes", [])}),
                "workers": self._pool.size, "timeout_s": self.timeout_s, "memory_mb": self.memory_mb}

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@register_judge("sandbox")
def make_sandbox_judge(**options) -> SandboxJudge:
    return SandboxJudge(**options)
