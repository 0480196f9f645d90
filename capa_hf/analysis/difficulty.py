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

import json
from collections import Counter
from pathlib import Path
from typing import Mapping

from capa_hf.analysis.results import Run, as_runs, sessions_df
from capa_hf.defaults import MAX_TURNS
from capa_hf.errors import CapaError

LEVELS = ("simple", "moderate", "complex")
FORMAT = "capa-difficulty-labels/1"
FILENAME = "difficulty.json"
RULE = (f"turns to first success under no history (mean over trials; unsolved = {MAX_TURNS}, the full budget): "
        "<= 2 simple, <= 4 moderate, otherwise complex")


def difficulty_label(turns: float | None) -> str:
    """`turns`: turns to first success (None for unsolved)."""
    if turns is None or turns != turns:   # None or NaN: unsolved
        return "complex"
    if turns <= 2:
        return "simple"
    return "moderate" if turns <= 4 else "complex"


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


def write_labels(labels: dict, out_dir: str | Path) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / FILENAME
    path.write_text(json.dumps(labels, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    return path


def read_labels(path: str | Path) -> dict:
    """A labels file written by `capa label-difficulty` (a folder holding one is accepted too)."""
    p = Path(path)
    if p.is_dir():
        p = p / FILENAME
    if not p.is_file():
        raise CapaError(f"--difficulty {path}: no such labels file (expected the difficulty.json that "
                        "`capa label-difficulty` writes)")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CapaError(f"{p}: not valid JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CapaError(f"{p}: not a difficulty labels file (expected format {FORMAT!r})")
    bad = sorted({v for v in data.get("labels", {}).values()} - set(LEVELS))
    if bad or not isinstance(data.get("source"), dict):
        raise CapaError(f"{p}: labels must be one of {LEVELS} and name their source run; found {bad or 'no source'}")
    return data


def check_labels_match(labels: Mapping, dataset_version: str | None, dataset_sha: str | None, where: str) -> None:
    """Refuse labels made on another dataset than the one `where` uses."""
    src = labels.get("source", {})
    if src.get("dataset_manifest_sha256") != dataset_sha or src.get("dataset_version") != dataset_version:
        raise CapaError(f"difficulty labels from run {src.get('run')!r} were made on dataset "
                        f"{src.get('dataset_version')} (manifest {str(src.get('dataset_manifest_sha256'))[:12]}), "
                        f"but {where} uses {dataset_version} (manifest {str(dataset_sha)[:12]})")


def counts_line(labels: Mapping) -> str:
    n = max(sum(labels["counts"].values()), 1)
    return ", ".join(f"{labels['counts'][lv]} {lv} ({100 * labels['counts'][lv] / n:.1f}%)" for lv in LEVELS)
