"""Difficulty labels from a no-history run (the paper's fixed partition, RQ1).

A session's label comes from its turns to first success under the `none` condition: 1-2 is
simple, 3-4 moderate, 5-8 or unsolved complex. With several trials, the turns are averaged
over trials first, an unsolved trial counting as the protocol's full budget (8 turns, whatever
the run's own --max-turns: a run cut at 3 turns must not call its unsolved sessions moderate),
then cut at 2 and 4.

`capa label-difficulty RUN --out DIR` writes DIR/difficulty.json: the labels, the rule, and
the source run (model, config hash, dataset version and manifest), which every table, summary
and frame that uses the labels names. `capa eval` and `capa report` take it as --difficulty.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from capa_hf.analysis.results import Run, as_runs, sessions_df
from capa_hf.defaults import MAX_TURNS
from capa_hf.errors import CapaError
from capa_hf.evaluation.difficulty_labels import FORMAT, LEVELS, RULE, difficulty_label


def labels_from_run(run: Run | str | Path) -> dict:
    """The labels file content for a finished `none` run."""
    (run,) = as_runs([run])
    if run.condition != "none":
        raise CapaError(f"{run.path}: condition {run.condition!r}; difficulty labels come from a no-history "
                        "run (capa eval --condition none)")
    df = sessions_df([run])
    if df.empty:
        raise CapaError(f"{run.path}: no scored sessions to label")
    turns = df["success_turn"].astype("Float64").fillna(float(MAX_TURNS)).groupby(df["session_id"], sort=True).mean()
    labels = {sid: difficulty_label(t) for sid, t in turns.items()}
    counts = Counter(labels.values())
    return {
        "format": FORMAT, "rule": RULE,
        "source": {"run": run.name, "path": str(run.path), "model": run.model, "condition": run.condition,
                   "split": run.split, "config_hash": run.config_hash, "dataset_version": run.dataset_version,
                   "dataset_manifest_sha256": run.dataset_sha, "max_turns": run.max_turns,
                   "trials": run.samples},
        "counts": {lv: counts.get(lv, 0) for lv in LEVELS},
        "labels": labels,
        "turns": {sid: float(t) for sid, t in turns.items()},
    }
