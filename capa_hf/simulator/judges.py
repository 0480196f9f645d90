"""The judge: runs a submission against the task's hidden tests in the sandbox.

Execution decides. (An optional LLM assessment of agreement with the reference could veto a
pass, never grant one; it would wrap this class and is not part of the offline default.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from capa_hf.schema import Task
from capa_hf.simulator.extraction import Submission


@dataclass
class SandboxJudge:
    timeout_s: float = 10.0
    memory_mb: int = 1024
    workers: int | None = None
    _pool: object | None = field(default=None, repr=False)

    @property
    def pool(self):
        if self._pool is None:
            from sandbox import SandboxPool

            self._pool = SandboxPool(workers=self.workers)
        return self._pool

    def judge(self, submission: Submission, task: Task) -> dict:
        # The task's prompt is the trusted prelude: tests such as HumanEval/32 (`poly`) and /38
        # (`encode_cyclic`) call helpers that the prompt defines and the user never mentions.
        verdict = self.pool.check(submission.code, task.test, submission.candidate,
                                  timeout_s=self.timeout_s, memory_mb=self.memory_mb, prelude=task.prompt)
        return verdict.to_dict()

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
