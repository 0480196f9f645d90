"""`capa validate`: refuse a dataset folder whose files, card and contents disagree.

It also prints what the dataset measures: held-out sessions by role and item kind, how many are
fully resolvable from history, and the oracle bound (capa_hf/oracle.py).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

import pyarrow.parquet as pq

from capa_hf.dataset.build import MANIFEST, REFUSED_FACT, sha256
from capa_hf.dataset.card import read_card_header
from capa_hf.dataset.features import LAYOUT
from capa_hf.dataset.stats import dataset_stats, history_positions_ok
from capa_hf.defaults import CELLS_PER_PERSONA, HISTORY_SIZE, MIN_CONVENTION_ONLY_SHARE, N_CELLS
from capa_hf.errors import CapaError


@dataclass
class ValidationReport:
    path: Path
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    facts: dict = field(default_factory=dict)
    build_facts: dict = field(default_factory=dict)    # facts only the build knows (from the manifest)

    @property
    def ok(self) -> bool:
        return not self.errors

    def summary(self) -> str:
        lines = [f"{self.path}: " + ("OK" if self.ok else f"{len(self.errors)} problem(s)")]
        lines += [f"  - {n}" for n in self.notes]
        lines += [f"  - {k.replace('_', ' ')}: {v}" for k, v in self.facts.items()]
        lines += [f"  ERROR {e}" for e in self.errors]
        return "\n".join(lines)


def _read_table(path: Path, report: ValidationReport):
    try:
        return pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for corrupt files
        report.errors.append(f"{path}: not a readable parquet file ({type(exc).__name__}: {exc})")
        return None


def check_files(folder: Path, report: ValidationReport) -> dict:
    tables = {}
    manifest_path = folder / MANIFEST
    manifest = {}
    if manifest_path.is_file():
        whole = json.loads(manifest_path.read_text())
        manifest = whole.get("files", {})
        report.build_facts = {k: v for k, v in whole.get("stats", {}).items() if k == REFUSED_FACT}
    else:
        report.errors.append(f"{manifest_path}: missing manifest")
    for config, (features, files) in LAYOUT.items():
        for split, rel in files.items():
            path = folder / rel
            if not path.is_file():
                report.errors.append(f"{path}: missing ({config}/{split})")
                continue
            entry = manifest.get(rel)
            if entry and entry.get("sha256") != sha256(path):
                report.errors.append(f"{path}: content differs from the build manifest (edited or corrupt)")
            table = _read_table(path, report)
            if table is None:
                continue
            if table.schema.remove_metadata() != features.arrow_schema.remove_metadata():
                report.errors.append(f"{path}: schema differs from the {config} features")
            tables[(config, split)] = table
    return tables


def check_card(folder: Path, tables: dict, report: ValidationReport) -> None:
    card = folder / "README.md"
    if not card.is_file():
        report.errors.append(f"{card}: missing dataset card")
        return
    try:
        header = read_card_header(card.read_text(encoding="utf-8"), str(card))
    except CapaError as exc:
        report.errors.append(str(exc))
        return
    infos = {i.get("config_name"): i for i in header.get("dataset_info", [])}
    for (config, split), table in tables.items():
        splits = {s["name"]: s for s in infos.get(config, {}).get("splits", [])}
        declared = splits.get(split, {}).get("num_examples")
        if declared != table.num_rows:
            report.errors.append(f"{card}: declares {declared} rows for {config}/{split}, "
                                 f"but {LAYOUT[config][1][split]} has {table.num_rows}")
    declared_files = {(c["config_name"], d["split"]): d["path"] for c in header.get("configs", [])
                      for d in c.get("data_files", [])}
    for config, (_, files) in LAYOUT.items():
        for split, rel in files.items():
            if declared_files.get((config, split)) != rel:
                report.errors.append(f"{card}: configs entry for {config}/{split} does not point at {rel}")


def check_balance(cells: dict[str, list], report: ValidationReport) -> None:
    personas = Counter(rs[0]["persona_id"] for rs in cells.values())
    pairs = Counter(tuple(sorted(rs[0]["mechanisms"])) for rs in cells.values())
    if len(cells) != N_CELLS or set(personas.values()) != {CELLS_PER_PERSONA} or set(pairs.values()) != {4} \
            or len(pairs) != 15:
        report.errors.append(f"cell balance broken: {len(cells)} cells, persona counts {sorted(set(personas.values()))}, "
                             f"{len(pairs)} pairs with counts {sorted(set(pairs.values()))}")
    mechs = {m for p in pairs for m in p}
    if len(mechs) == 6 and set(pairs) != set(combinations(sorted(mechs), 2)):
        report.errors.append("not every mechanism pair is present")


def check_sessions(tables: dict, report: ValidationReport) -> None:
    if ("default", "history") not in tables or ("default", "heldout") not in tables:
        return
    rows = tables[("default", "history")].to_pylist() + tables[("default", "heldout")].to_pylist()
    cells: dict[str, list] = {}
    for r in rows:
        cells.setdefault(r["cell_id"], []).append(r)
    report.notes.append(f"{tables[('default', 'history')].num_rows} history + "
                        f"{tables[('default', 'heldout')].num_rows} held-out sessions in {len(cells)} cells")
    check_balance(cells, report)
    variants = set(tables[("variants", "train")].column("variant_id").to_pylist()) \
        if ("variants", "train") in tables else None
    for cid, rs in sorted(cells.items()):
        positions = sorted(r["position"] for r in rs)
        if positions != list(range(1, 11)):
            report.errors.append(f"cell {cid}: positions {positions}, expected 1-10")
        if len({r["task_id"] for r in rs}) != len(rs):
            report.errors.append(f"cell {cid}: a task repeats inside the cell")
        for r in rs:
            want = "history" if r["position"] <= HISTORY_SIZE else "heldout"
            if r["split"] != want:
                report.errors.append(f"{r['session_id']}: split {r['split']} at position {r['position']}")
            if not r["resolved"]:
                report.errors.append(f"{r['session_id']}: Stage 2 did not resolve it")
            if not r["hidden_items"]:
                report.errors.append(f"{r['session_id']}: no hidden items")
            if r["split"] == "heldout" and r["turns"]:
                report.errors.append(f"{r['session_id']}: a held-out row carries a trace (an answer key)")
            if variants is not None and r["variant_id"] not in variants:
                report.errors.append(f"{r['session_id']}: variant {r['variant_id']} is not in the variants config")
            for h in r["hidden_items"]:
                if h["clarification"] and h["clarification"] in r["initial_request"]:
                    report.errors.append(f"{r['session_id']}: hidden item {h['id']} leaks into the request")
    report.errors += [f"revealed_in must name earlier history sessions of the same cell: {p}"
                      for p in history_positions_ok(rows)[:20]]
    hist_tasks = {r["task_id"] for r in rows if r["split"] == "history"}
    shared = sorted({r["task_id"] for r in rows if r["split"] == "heldout"} & hist_tasks)
    if shared:
        report.errors.append(f"{len(shared)} held-out tasks also appear in history sessions, e.g. {shared[:3]}")
    uses = Counter(r["task_id"] for r in rows)
    if uses and not set(uses.values()) <= {3, 4}:
        report.errors.append(f"task use counts {sorted(set(uses.values()))}, expected 3 or 4")
    he_values = {}
    if ("tasks", "train") in tables:
        he_values = {t["task_id"]: {d["dimension"]: d["humaneval_value"] for d in t["dimensions"]}
                     for t in tables[("tasks", "train")].to_pylist()}
    from capa_hf.generation.empty_results import empty_kinds

    report.facts = {**dataset_stats(rows, humaneval_values=he_values, empty_kinds=empty_kinds()),
                    **report.build_facts}
    share = report.facts["heldout_by_role"].get("convention_only", 0) / max(report.facts["heldout_sessions"], 1)
    if share < MIN_CONVENTION_ONLY_SHARE:
        report.errors.append(f"only {share:.0%} of held-out sessions hide conventions alone "
                             f"(expected at least {MIN_CONVENTION_ONLY_SHARE:.0%})")


def check_review(folder: Path, tables: dict, report: ValidationReport) -> None:
    """The blind review's counts, when docs/review/results/<version>.yaml exists for this version."""
    from capa_hf.dataset.review import load_review, review_counts, review_file

    manifest = folder / MANIFEST
    if not manifest.is_file() or ("default", "heldout") not in tables or ("default", "history") not in tables:
        return
    version = json.loads(manifest.read_text()).get("version", "?")
    path = review_file(version)
    if not path.is_file():
        report.notes.append(f"blind review: none for version {version} ({path.name} under docs/review/results/; "
                            "rubric: docs/review/rubric.md)")
        return
    try:
        review = load_review(path)
    except CapaError as exc:
        report.errors.append(str(exc))
        return
    if review.dataset_version != version:
        report.errors.append(f"{path}: reviews version {review.dataset_version}, the folder is {version}")
        return
    ids = {s: set(tables[("default", s)].column("session_id").to_pylist()) for s in ("heldout", "history")}
    report.facts["blind_review"] = review_counts(review, ids["heldout"], ids["history"])


def validate_folder(folder: Path) -> ValidationReport:
    report = ValidationReport(folder)
    if not folder.is_dir():
        report.errors.append(f"{folder}: not a folder")
        return report
    tables = check_files(folder, report)
    check_card(folder, tables, report)
    check_sessions(tables, report)
    check_review(folder, tables, report)
    return report
