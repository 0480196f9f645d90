"""The difficulty labels file: its format, the rule, reading, writing and the dataset check.

`capa label-difficulty` (analysis/difficulty.py) computes labels from a finished no-history run;
`capa eval --difficulty` and `capa report --difficulty` read them here and refuse labels made on
another dataset. See analysis/difficulty.py for the rule in full.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping

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
