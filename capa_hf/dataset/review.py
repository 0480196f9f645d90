"""The blind review's results file (docs/review/results/<version>.yaml; rubric: docs/review/rubric.md).

`load_review` reads and validates one file; `review_counts` gives the counts the rubric's targets
are about, and says whether the review covers every held-out and history session of its version.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from capa_hf.data_files import load_record
from capa_hf.paths import REPO_DIR
from capa_hf.schema.base import Record

REVIEW_DIR = REPO_DIR / "docs" / "review" / "results"
TARGETS = {"settled_share": 0.03, "garbled": 0, "awkward_share": 0.10, "off_question": 0}


class Settled(Record):
    item: str = Field(pattern=r"^h\d+$")
    quote: str = Field(min_length=1)


class HeldoutReview(Record):
    reviewer: str = Field(min_length=1)
    settled: tuple[Settled, ...] = ()
    fluency: Literal["fluent", "awkward", "garbled"]
    fluency_quote: str = ""
    persona_holds: bool
    persona_quote: str = ""
    note: str = ""                      # anything else the reviewer saw, quoted


class OffQuote(Record):
    question: str = Field(min_length=1)
    answer: str = Field(min_length=1)


class HistoryReview(Record):
    reviewer: str = Field(min_length=1)
    answers_question_asked: bool
    off_quotes: tuple[OffQuote, ...] = ()
    habit_own: bool
    persona_holds: bool
    persona_quote: str = ""
    back_reference: Literal["yes", "no", "none"]
    note: str = ""                      # anything else the reviewer saw (garbled words, fillers), quoted


class ReviewResults(Record):
    dataset_version: str = Field(pattern=r"^\d+\.\d+\.\d+$")
    manifest_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    reviewers: tuple[str, ...] = Field(min_length=1)
    agreement_seed: int
    note: str = ""                      # how the review was done, where it departs from the rubric
    agreement: dict[str, str] = Field(default_factory=dict)   # e.g. {"settled": "29/30"}: the overlap's
    heldout: dict[str, HeldoutReview] = Field(default_factory=dict)
    history: dict[str, HistoryReview] = Field(default_factory=dict)


def review_file(version: str, folder: Path | None = None) -> Path:
    return (folder or REVIEW_DIR) / f"{version}.yaml"


def load_review(path: Path) -> ReviewResults:
    return load_record(ReviewResults, path)


def review_counts(review: ReviewResults, heldout_ids: set[str], history_ids: set[str]) -> dict:
    """The rubric's counts; `complete` is False unless every session of the version is reviewed."""
    held = [r for sid, r in review.heldout.items() if sid in heldout_ids]
    hist = [r for sid, r in review.history.items() if sid in history_ids]
    n = max(len(held), 1)
    counts = {
        "complete": set(review.heldout) >= heldout_ids and set(review.history) >= history_ids,
        "unknown_sessions": sorted((set(review.heldout) - heldout_ids) | (set(review.history) - history_ids)),
        "heldout_reviewed": len(held),
        "history_reviewed": len(hist),
        "settled": sum(1 for r in held if r.settled),
        "garbled": sum(1 for r in held if r.fluency == "garbled"),
        "awkward": sum(1 for r in held if r.fluency == "awkward"),
        "persona_breaks": sum(1 for r in held if not r.persona_holds) + sum(1 for r in hist if not r.persona_holds),
        "off_question": sum(1 for r in hist if not r.answers_question_asked),
        "habit_not_own": sum(1 for r in hist if not r.habit_own),
        "dangling_back_reference": sum(1 for r in hist if r.back_reference == "no"),
    }
    counts["meets_targets"] = bool(
        counts["complete"] and counts["settled"] / n <= TARGETS["settled_share"]
        and counts["garbled"] <= TARGETS["garbled"] and counts["awkward"] / n <= TARGETS["awkward_share"]
        and counts["off_question"] <= TARGETS["off_question"])
    return counts
