"""`capa report RUN... --out DIR`: report.md, report.json and PNG plots from finished runs.

Builds every table its runs allow (tables.py) and says which ones it left out and what they
need. Refuses runs made on different dataset versions, and pairs of runs over different
sessions, naming them (runset.py).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from capa_hf.analysis import plots
from capa_hf.analysis.markdown import section
from capa_hf.analysis.results import as_runs, labels_source_text
from capa_hf.analysis.runset import RunSet
from capa_hf.analysis.tables import Table, build_tables
from capa_hf.errors import CapaError
from capa_hf.evaluation.difficulty_labels import read_labels

NEEDS = {
    "main": "a `none` and a `same-user` run of one model on the held-out split",
    "difficulty": "a `same-user` run and difficulty labels (`capa label-difficulty NONE_RUN --out DIR`, then "
                  "--difficulty DIR/difficulty.json)",
    "identity": "a `none` run and a `shuffled` or `conflicting` run of one model",
    "memory": "a `same-user` run and a `mem0`, `amem` or `gate` run of one model",
    "mechanisms": "a run on the held-out split",
    "item_kind": "a run on the held-out split",
    "blank": "a `capa blank-control` run",
    "split": "`none` runs of one model on both splits (`capa eval --split history`)",
    "trials": "a run with --samples K >= 2",
}


def dataset_facts(rs: RunSet, dataset: str | None) -> tuple[dict | None, str | None]:
    """The dataset's oracle bound and cells, if the runs' dataset loads and is the same version."""
    if not rs.capa_runs:
        return None, None
    first = rs.capa_runs[0]
    source = dataset or first.config.get("dataset_source")
    try:
        from capa_hf.dataset.load import load_capa
        from capa_hf.dataset.stats import dataset_stats

        data = load_capa(source)
    except CapaError as exc:
        return None, f"dataset {source} did not load ({exc}); the oracle bound and the balance figure are left out"
    if data.manifest_sha256 != first.dataset_sha:
        return None, (f"dataset {source} is version {data.version} (manifest {str(data.manifest_sha256)[:12]}), "
                      f"not the runs' {first.dataset_version}; the dataset's oracle bound and balance figure are "
                      "left out")
    stats = dataset_stats(list(data.history.values()) + list(data.heldout.values()))
    return {"source": source, "version": data.version, "oracle_ft_es": stats["oracle_ft_es"],
            "cells": [(c.persona_id, tuple(c.mechanisms)) for c in data.cells.values()]}, None


def _labels_counts(rs: RunSet) -> tuple[dict | None, str]:
    labels = rs.labels or next((r.config["difficulty"] for r in rs.capa_runs if r.config.get("difficulty")), None)
    return (labels["counts"], str(labels["source"].get("run", ""))) if labels else (None, "")


def write_plots(rs: RunSet, tables: dict[str, Table], facts: dict | None, out: Path) -> dict[str, str]:
    made: dict[str, Path] = {}
    for key in ("main", "identity", "memory"):
        if key in tables:
            made[key] = plots.condition_bars(tables[key], out / f"{key}.png")
    if "difficulty" in tables:
        made["difficulty"] = plots.level_bars(tables["difficulty"], "difficulty", out / "difficulty.png")
    if "mechanisms" in tables:
        made["mechanisms"] = plots.level_bars(tables["mechanisms"], "mechanism", out / "mechanisms.png")
    counts, source = _labels_counts(rs)
    split = tables["split"].rows[0] if "split" in tables else None
    if facts or split or counts:
        figure = plots.dataset_figure(facts["cells"] if facts else [], split, counts, out / "dataset.png", source)
        if figure is not None:
            made["dataset"] = figure
    return {k: p.name for k, p in made.items()}


def dataset_caption(rs: RunSet, tables: dict[str, Table], facts: dict | None) -> str:
    counts, _ = _labels_counts(rs)
    split = tables["split"].rows[0] if "split" in tables else None
    return plots.dataset_caption(facts["cells"] if facts else [], split, counts)


def _plain(obj: Any) -> Any:
    """JSON-safe: NaN becomes null, tuples lists, numpy scalars Python numbers."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, (str, bytes)):
        obj = obj.item()
    if isinstance(obj, float) and math.isnan(obj):
        return None
    return obj


def render(rs: RunSet, tables: list[Table], plot_files: dict[str, str], notes: list[str],
           dataset_text: str = "") -> str:
    built = {t.key for t in tables}
    missing = [f"- {k}: needs {v}" for k, v in NEEDS.items() if k not in built]
    head = ["# CAPA report", "", f"{len(rs.runs)} runs; tables: {', '.join(t.key for t in tables)}."]
    if missing:
        head += ["", "Tables left out, and what they need:", *missing]
    if notes:
        head += ["", *[f"Note: {n}" for n in notes]]
    described = {r.name: r.describe() for r in rs.runs}
    body = [section(t, plot_files.get(t.key), described) for t in tables]
    if "dataset" in plot_files:
        body.append(f"## Dataset balance and difficulty\n\n{dataset_text}\n\n"
                    f"![Dataset balance and difficulty]({plot_files['dataset']})\n")
    elif dataset_text:
        body.append(f"## Dataset balance and difficulty\n\n{dataset_text}\n")
    return "\n".join(head) + "\n\n" + "\n".join(body)


def build_report(runs: list[str | Path], out: str | Path | None = None, difficulty: str | Path | None = None,
                 allow_partial: bool = False, dataset: str | None = None, progress: bool = True) -> dict:
    """Read the runs, build the tables they allow, and (with `out`) write report.md, report.json
    and the plots. Returns {"markdown", "json", "files"}."""
    if not runs:
        raise CapaError("capa report needs at least one run folder")
    labels = read_labels(difficulty) if difficulty else None
    rs = RunSet(as_runs(runs, allow_partial, progress=progress), labels)
    facts, note = dataset_facts(rs, dataset)
    tables = build_tables(rs, facts["oracle_ft_es"] if facts else None, progress=progress)
    notes = [note] if note else []
    if allow_partial:
        notes.append("--allow-partial: half-written runs are reported over the sessions they finished")
    by_key = {t.key: t for t in tables}
    files: list[str] = []
    plot_files: dict[str, str] = {}
    if out is not None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        plot_files = write_plots(rs, by_key, facts, out)
    dataset_text = dataset_caption(rs, by_key, facts) if plot_files.get("dataset") or facts else ""
    markdown = render(rs, tables, plot_files, notes, dataset_text if out is not None else "")
    report = _plain({"runs": [r.describe() for r in rs.runs], "tables": {t.key: t.to_dict() for t in tables},
                     "plots": plot_files, "notes": notes, "difficulty_source": labels_source_text(labels),
                     "dataset": {k: v for k, v in (facts or {}).items() if k != "cells"} or None})
    if out is not None:
        (out / "report.md").write_text(markdown, encoding="utf-8")
        (out / "report.json").write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        files = ["report.md", "report.json", *plot_files.values()]
    return {"markdown": markdown, "json": report, "files": files}


def report_cli(args) -> int:
    result = build_report(args.runs, out=getattr(args, "out", None), difficulty=getattr(args, "difficulty", None),
                          allow_partial=getattr(args, "allow_partial", False), dataset=getattr(args, "dataset", None),
                          progress=not getattr(args, "no_progress", False))
    print(result["markdown"])
    if result["files"]:
        print(f"wrote {', '.join(str(Path(args.out) / f) for f in result['files'])}", file=sys.stderr)
    return 0
