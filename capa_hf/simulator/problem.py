"""What a session is judged against: the task under the user's conventions."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """The executable ground truth of one session.

    `test` is a `check(candidate)` source (the variant's regenerated tests, or HumanEval's own for
    a task that exercises no dimension); `prelude` is trusted helper source the test may use (the
    task's prompt); `reference` is the variant's reference solution (for an LLM judge's veto and
    for the reference assistant)."""

    task_id: str
    variant_id: str
    entry_point: str
    test: str
    prelude: str
    reference: str
