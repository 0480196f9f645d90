"""The clarification planner of the scripted user: which ONE thing to reveal next, and why.

Pure and deterministic. Each plan records its basis, so a run can say how often the user
answered on topic:
- `question`: the assistant asked a question and it matched a hidden item (question_match.py:
  curated vocabularies, not word overlap alone); the plan carries the score;
- `failure_tie`: a submission failed at a test line that tells a still-hidden item apart (its
  misreading, or its other convention value, fails that line; recorded at build time);
- `failure_tie` with kind `restate`: the failing line is best explained by a convention the request
  stated plainly, which the user points out again (once);
- `failing_check`: a submission failed where no hidden item is tied, so the user quotes the check;
- `priority`: nothing better; the next hidden item in priority order;
- `nothing_left`: every hidden item is out.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from typing import Mapping, Sequence

from capa_hf.simulator.question_match import (MATCH_THRESHOLD, ItemTerms, Vocabulary, best_match, item_terms,
                                              question_parts, scores)
from capa_hf.simulator.value_signature import agreement

BASES = ("question", "failure_tie", "failing_check", "priority", "nothing_left")


@dataclass(frozen=True)
class PlannerItem:
    """What the planner knows about a hidden item: its priority order, its texts and cues, and
    the names the failure ties use for it (a dimension id, a keypoint id)."""

    id: str
    question: str
    plain: str
    original_text: str
    cues: tuple[str, ...] = ()
    texts: tuple[str, ...] = ()
    refs: tuple[str, ...] = ()
    convention: bool = False

    def match_text(self) -> str:
        return " ".join((self.question, self.plain, self.original_text, *self.texts))

    def terms(self, vocab: Vocabulary) -> ItemTerms:
        return item_terms(self.id, (self.question, self.plain, self.original_text, *self.texts), self.cues, vocab)


@dataclass(frozen=True)
class Plan:
    kind: str            # "item" | "restate" (item_id: a stated dimension) | "failing_check" | "nothing_left"
    item_id: str | None = None
    score: float = 0.0
    reason: str = ""
    basis: str = "priority"
    parts: tuple[str, ...] = ()  # a question in several parts: the item of each part, in order

    def item_ids(self) -> tuple[str, ...]:
        """Every item this plan reveals: the one of each part of the question, in the question's
        order (the main item among them), or the main item alone."""
        if self.kind != "item" or not self.item_id:
            return ()
        return self.parts or (self.item_id,)

    def to_dict(self) -> dict:
        out = {"kind": self.kind, "item": self.item_id, "basis": self.basis, "score": self.score,
               "reason": self.reason}
        return {**out, "parts": list(self.parts)} if self.parts else out


def plan_next(
    items: Sequence[PlannerItem],
    revealed: frozenset[str],
    assistant_reply: str,
    after_failure: bool,
    has_failing_line: bool,
    vocab: Vocabulary | None = None,
    tied: Mapping[str, Sequence[str | None]] | None = None,
    got: str | None = None,
    expected: str | None = None,
    threshold: float = MATCH_THRESHOLD,
    stated: Sequence[str] = (),
) -> Plan:
    """Pure. After a failure: a hidden item tied to the failing line, else the failing check
    itself, else (no line to quote) the next item by priority. Otherwise: the item the question
    is about, else the next item by priority.

    `tied` maps each ref (dimension id, keypoint id) whose alternative fails the failing line to
    the signatures of what its alternatives give there; `got` is the signature of what the
    submission gave, `expected` what the line expects. Among tied items, the one whose
    alternative best explains the wrong value wins (value_signature.agreement), then a convention
    item before a task item, then priority. `stated` lists conventions the request stated plainly
    (not yet pointed out again): one that explains the wrong value better than every hidden item
    is restated instead."""
    pending = [it for it in items if it.id not in revealed]
    if after_failure and tied:
        restate = _restate(pending, tied, got, expected, stated)
        if restate is not None:
            return restate
    if not pending:
        if after_failure and has_failing_line:
            return Plan("failing_check", reason="every hidden item is already revealed", basis="failing_check")
        return Plan("nothing_left", reason="every hidden item is already revealed", basis="nothing_left")
    if after_failure:
        tied = tied or {}
        ranked = []
        for i, it in enumerate(pending):
            hit = [r for r in it.refs if r in tied]
            if hit:
                best = max(_explains(got, tied[r], expected) for r in hit)
                ranked.append((best, it.convention, -i, it, hit))
        if ranked:   # equal explanations: a standing convention before a task detail, then priority
            best, _, _, it, hit = max(ranked, key=lambda r: r[:3])
            return Plan("item", it.id, float(best), reason=f"the failing check tells {', '.join(hit)} apart",
                        basis="failure_tie")
        if has_failing_line:
            return Plan("failing_check", reason="no hidden item is tied to the failing check", basis="failing_check")
        return Plan("item", pending[0].id, reason="the failure names no check", basis="priority")
    vocab = vocab or Vocabulary()
    pending_terms = [it.terms(vocab) for it in pending]
    best, score = best_match(assistant_reply, pending_terms, vocab, threshold)
    if best is not None:
        parts = _part_items(assistant_reply, pending_terms, best, vocab, threshold)
        return Plan("item", best, score, reason="the question matches this item", basis="question",
                    parts=parts)
    return Plan("item", pending[0].id, score, reason="no hidden item matches the question", basis="priority")


MAX_PARTS = 4     # a reply with more question parts is matched on its first MAX_PARTS


def _part_items(reply: str, pending: Sequence[ItemTerms], best: str, vocab: Vocabulary,
                 threshold: float) -> tuple[str, ...]:
    """The items that the parts of a several-part question ("Which positions count, odd or
    even, and is indexing 0-based?") are about: each part gets at most one item and each item at
    most one part, a part's item reaching the threshold on that part; of these assignments, the
    one with the whole question's best item and the highest total score wins (the first on a tie).
    The items in the parts' order; () when only the best item is asked about."""
    parts = question_parts(reply)[:MAX_PARTS]
    if len(parts) < 2:
        return ()
    table = [{i: sc for sc, i in scores(p, pending, vocab) if sc >= threshold} for p in parts]
    best_total, best_pick = -1.0, ()
    for pick in product(*[[None, *row] for row in table]):
        chosen = [i for i in pick if i is not None]
        if best not in chosen or len(set(chosen)) < len(chosen):
            continue
        total = sum(row[i] for row, i in zip(table, pick) if i is not None)
        if total > best_total:
            best_total, best_pick = total, tuple(i for i in pick if i is not None)
    return best_pick if len(best_pick) > 1 else ()


def _restate(pending: Sequence[PlannerItem], tied: Mapping[str, Sequence[str | None]], got: str | None,
             expected: str | None, stated: Sequence[str]) -> Plan | None:
    """A stated convention tied to the failing line that explains the wrong value better than
    any tied hidden item, else None."""
    best_stated = max(((_explains(got, tied[d], expected), -i, d) for i, d in enumerate(stated) if d in tied),
                      default=None)
    if best_stated is None or best_stated[0] == 0:
        return None
    hidden = max((_explains(got, tied[r], expected) for it in pending for r in it.refs if r in tied), default=-1)
    if best_stated[0] <= hidden:
        return None
    d = best_stated[2]
    return Plan("restate", d, float(best_stated[0]), reason=f"the failing check tells the stated {d} apart",
                basis="failure_tie")


def _explains(got: str | None, alternatives, expected: str | None) -> int:
    """The best agreement of the wrong value with any of a ref's alternatives (one signature, or
    a list of them: a dimension with three values has two alternatives)."""
    sigs = alternatives if isinstance(alternatives, (list, tuple)) else [alternatives]
    return max((agreement(got, a, expected) for a in sigs), default=0)
