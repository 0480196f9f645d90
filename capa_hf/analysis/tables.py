"""The report's tables, each computed with pandas from the runs' session frame.

A table is built only when its runs are there, and names the runs it uses. Rows hold plain
numbers (intervals as [lo, hi]); markdown.py formats them.

- main         none vs same-user, per model, with paired deltas (paper Table 1)
- difficulty   same-user by difficulty label (Table 2)
- identity     none, shuffled, conflicting, same-user (Table 3)
- memory       raw same-user, mem0, amem, gate (Tables 4-5)
- mechanisms   per-mechanism marginals (Table 8)
- item_kind    fully resolvable from history or not, by kind of hidden items, the oracle bound
- blank        the blank control on HumanEval (Table 6)
- split        history vs held-out under no history (Appendix A)
- trials       mean over trials, between-trial sd, pass^k
- rescore      a `capa eval --rescore` run against the run it re-scored
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from capa_hf.analysis.paired import METRICS, metric_summary, paired_metrics
from capa_hf.analysis.results import Run, labels_source_text
from capa_hf.analysis.runset import RunSet, check_pairable
from capa_hf.defaults import BLANK_CONDITION
from capa_hf.evaluation.conditions.base import condition_rank, family_of
from capa_hf.evaluation.difficulty_labels import LEVELS, RULE
from capa_hf.evaluation.metrics import pass_hat_k
from capa_hf.oracle import oracle_bound

VALUE_COLUMNS = [("n", "n", "int"), ("ES", "ES %", "pct"), ("FT-ES", "FT-ES %", "pct"), ("TTC", "TTC", "turns")]
DELTA_COLUMNS = [("dES", "ΔES pp", "dpct"), ("dFT-ES", "ΔFT-ES pp", "dpct"), ("dTTC", "ΔTTC turns", "dturns")]


@dataclass
class Table:
    key: str
    title: str
    caption: str
    columns: list[tuple[str, str, str]]     # (row key, header, format kind)
    rows: list[dict]
    runs: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"title": self.title, "caption": self.caption, "runs": self.runs,
                "columns": [c[0] for c in self.columns], "rows": self.rows}


def values_row(frame: pd.DataFrame, **labels) -> dict:
    m = metric_summary(frame)
    return {**labels, "n": m["sessions"], **{k: m[k] for k in m if k.startswith(tuple(METRICS))}}


def delta_fields(base: tuple[Run, pd.DataFrame], treat: tuple[Run, pd.DataFrame]) -> dict:
    check_pairable(base[0], treat[0], base[1], treat[1])
    out = {}
    for name, d in paired_metrics(base[1], treat[1]).items():
        out[f"d{name}"], out[f"d{name}_ci"], out[f"d{name}_p"] = d["delta"], d["ci"], d["p"]
    return out


def condition_table(rs: RunSet, key: str, title: str, caption: str, conditions: tuple[str, ...], baseline: str,
                    needs: tuple[str, ...], extra_pairs: tuple[tuple[str, str], ...] = ()) -> Table | None:
    """Rows per (model, condition) with values; every non-baseline row also gets its paired
    delta against the baseline run of the same model; `extra_pairs` add delta-only rows."""
    rows, used = [], []
    for setting in rs.settings():
        present = {c: r for c in conditions if (r := rs.slot(setting, c))}
        if baseline not in present or not any(c in present for c in needs):
            continue
        model = rs.model_label(setting)
        base = (present[baseline], rs.frame_of(present[baseline]))
        for cond in sorted(present, key=condition_rank):
            run = present[cond]
            frame = rs.frame_of(run)
            row = values_row(frame, model=model, condition=cond)
            if cond != baseline:
                row.update(delta_fields(base, (run, frame)))
            rows.append(row)
            used.append(run.name)
        for lo, hi in extra_pairs:
            if lo in present and hi in present:
                pair = delta_fields((present[lo], rs.frame_of(present[lo])), (present[hi], rs.frame_of(present[hi])))
                rows.append({"model": model, "condition": f"{hi} vs {lo}", **pair})
    if not rows:
        return None
    cols = [("model", "model", "text"), ("condition", "condition", "text"), *VALUE_COLUMNS, *DELTA_COLUMNS]
    return Table(key, title, caption, cols, rows, used)


DELTA_NOTE = ("Δ: paired over the same sessions against {base} (ES and FT-ES: condition minus {base}; TTC: {base} "
              "minus condition, so positive is better), with a paired bootstrap 95% interval over sessions and a "
              "paired sign-flip permutation p-value. Values: 95% bootstrap intervals over sessions.")


# The paper's comparison tables: a family of conditions (each condition declares its family and
# baseline, evaluation/conditions/base.py) -> the table's title.
FAMILIES = {"main": "Main results: {shown}",
            "identity": "User identity: {shown}",
            "memory": "Memory and gating: {shown}"}


def family_table(rs: RunSet, family: str) -> Table | None:
    f = family_of(family)
    caption = DELTA_NOTE.format(base=f["baseline"])
    if f["pairs"]:
        caption += " Rows `X vs Y` pair X with Y: " + ", ".join(f"{hi} vs {lo}" for lo, hi in f["pairs"]) + "."
    return condition_table(rs, family, FAMILIES[family].format(shown=", ".join(f["shown"])), caption, f["shown"],
                           f["baseline"], f["members"], extra_pairs=tuple((lo, hi) for lo, hi in f["pairs"]))


def main_table(rs: RunSet) -> Table | None:
    return family_table(rs, "main")


def identity_table(rs: RunSet) -> Table | None:
    return family_table(rs, "identity")


def memory_table(rs: RunSet) -> Table | None:
    return family_table(rs, "memory")


def _heldout_runs(rs: RunSet, condition: str | None = None) -> list[Run]:
    return sorted((r for r in rs.capa_runs if r.split == "heldout" and condition in (None, r.condition)),
                  key=lambda r: (rs.settings().index(r.setting), condition_rank(r.condition)))


def difficulty_table(rs: RunSet) -> Table | None:
    rows, used, sources, unlabeled = [], [], set(), 0
    for run in _heldout_runs(rs, "same-user"):
        labels = rs.labels_of(run)
        if not labels:
            continue
        frame = rs.frame_of(run)
        unlabeled += int(frame.drop_duplicates("session_id")["difficulty"].isna().sum())
        sources.add(labels_source_text(labels))
        for level in LEVELS:
            part = frame[frame["difficulty"] == level]
            if len(part):
                rows.append(values_row(part, model=rs.model_label(run.setting), condition=run.condition,
                                       difficulty=level))
        used.append(run.name)
    if not rows:
        return None
    caption = (f"Same-user history by difficulty label. Labels: {RULE}; from {'; '.join(sorted(sources))}."
               + (f" {unlabeled} sessions without a label are left out." if unlabeled else ""))
    cols = [("model", "model", "text"), ("condition", "condition", "text"), ("difficulty", "difficulty", "text"),
            *VALUE_COLUMNS]
    return Table("difficulty", "Results by difficulty (RQ1)", caption, cols, rows, used)


def mechanism_table(rs: RunSet) -> Table | None:
    rows, used = [], []
    for run in _heldout_runs(rs):
        exploded = rs.frame_of(run).explode("mechanisms")
        for mech, part in exploded.groupby("mechanisms", sort=True):
            rows.append(values_row(part, model=rs.model_label(run.setting), condition=run.condition, mechanism=mech))
        used.append(run.name)
    if not rows:
        return None
    caption = ("Per-mechanism marginals: every session has two mechanisms and is counted for both, so the rows of "
               "one run overlap and their n add up to twice the sessions. Marginal associations, not effects of "
               "isolated mechanisms.")
    cols = [("model", "model", "text"), ("condition", "condition", "text"), ("mechanism", "mechanism", "text"),
            *VALUE_COLUMNS]
    return Table("mechanisms", "Per ambiguity mechanism", caption, cols, rows, used)


def item_kind_table(rs: RunSet, dataset_oracle: float | None = None) -> Table | None:
    rows, used = [], []
    for run in _heldout_runs(rs):
        frame = rs.frame_of(run)
        if frame["fully_resolvable"].isna().all():
            continue
        model = rs.model_label(run.setting)
        resolvable = frame["fully_resolvable"].map({True: "fully resolvable from history",
                                                    False: "not fully resolvable"})
        for group, part in frame.groupby(resolvable, sort=True):
            rows.append(values_row(part, model=model, condition=run.condition, group=group))
        for group, part in frame.groupby("item_kind", sort=True):
            rows.append(values_row(part, model=model, condition=run.condition, group=group))
        once = frame.drop_duplicates("session_id")
        rows.append({"model": model, "condition": run.condition, "group": "oracle bound (these sessions)",
                     "n": int(len(once)), "FT-ES": oracle_bound(once["fully_resolvable"].astype(bool))})
        used.append(run.name)
    if not rows:
        return None
    caption = ("Sessions whose hidden items are all resolvable from the cell's history, and by kind of hidden "
               "items. The oracle bound is the FT-ES of an assistant that applies every convention shown in "
               "history and asks nothing else: the share of fully resolvable sessions.")
    if dataset_oracle is not None:
        caption += f" Over the dataset's whole held-out split (as `capa validate` prints it): {100 * dataset_oracle:.1f}%."
    cols = [("model", "model", "text"), ("condition", "condition", "text"), ("group", "sessions", "text"),
            *VALUE_COLUMNS]
    return Table("item_kind", "By kind of hidden items, and the oracle bound", caption, cols, rows, used)


def blank_table(rs: RunSet) -> Table | None:
    rows = [{**values_row(rs.frame_of(r), model=r.model), "submissions": float(rs.frame_of(r)["submissions"].mean())}
            for r in rs.blank_runs]
    if not rows:
        return None
    caption = ("The original HumanEval tasks with their full prompt, no persona and no hidden items; after each "
               "failing submission the model gets the failing check or error, up to the turn budget.")
    cols = [("model", "model", "text"), *VALUE_COLUMNS, ("submissions", "submissions/task", "num")]
    return Table("blank", "Blank control on HumanEval", caption, cols, rows, [r.name for r in rs.blank_runs])


def split_table(rs: RunSet) -> Table | None:
    rows, used = [], []
    for setting in rs.settings():
        held, hist = rs.slot(setting, "none", "heldout"), rs.slot(setting, "none", "history")
        if not (held and hist):
            continue
        fh, fy = rs.frame_of(held), rs.frame_of(hist)
        by_cell = pd.DataFrame({"held": fh.groupby("cell_id")["solved"].mean(), "hist": fy.groupby("cell_id")["solved"].mean(),
                                "held_t": fh.groupby("cell_id")["ttc"].mean(), "hist_t": fy.groupby("cell_id")["ttc"].mean()}).dropna()
        rows.append({"model": rs.model_label(setting), "n_history": int(fy["session_id"].nunique()),
                     "n_heldout": int(fh["session_id"].nunique()),
                     "ES_history": float(fy["solved"].mean()), "ES_heldout": float(fh["solved"].mean()),
                     "dES": float(fh["solved"].mean() - fy["solved"].mean()),
                     "turns_history": float(fy["ttc"].mean()), "turns_heldout": float(fh["ttc"].mean()),
                     "dturns": float(fh["ttc"].mean() - fy["ttc"].mean()), "cells": int(len(by_cell)),
                     "cell_median_dES": float((by_cell["held"] - by_cell["hist"]).median()),
                     "cell_median_dturns": float((by_cell["held_t"] - by_cell["hist_t"]).median())})
        used += [hist.name, held.name]
    if not rows:
        return None
    caption = ("The same no-history setting on both splits: history cannot affect either, so differences measure "
               "how comparable the splits are. Δ is held-out minus history; turns count an unsolved session as the "
               "turn budget; the cell medians are over the cells evaluated on both splits.")
    cols = [("model", "model", "text"), ("n_history", "n history", "int"), ("n_heldout", "n held-out", "int"),
            ("ES_history", "ES history %", "pct"), ("ES_heldout", "ES held-out %", "pct"), ("dES", "ΔES pp", "dpct"),
            ("turns_history", "turns history", "turns"), ("turns_heldout", "turns held-out", "turns"),
            ("dturns", "Δturns", "dturns"), ("cells", "cells", "int"),
            ("cell_median_dES", "cell median ΔES pp", "dpct"), ("cell_median_dturns", "cell median Δturns", "dturns")]
    return Table("split", "Split comparability (no history on history and held-out sessions)", caption, cols, rows,
                 used)


def trials_table(rs: RunSet) -> Table | None:
    rows, used, kmax = [], [], 0
    for run in rs.runs:
        frame = rs.frame_of(run)
        per_session = frame.groupby("session_id")["trial"].nunique()
        k = int(per_session.min()) if len(per_session) else 0
        if k < 2:
            continue
        kmax = max(kmax, k)
        per_trial = frame.groupby("trial")[["solved", "first_turn", "ttc"]].mean()
        succ = frame.groupby("session_id")["solved"].agg(["sum", "size"])
        row = {"model": rs.model_label(run.setting) if run.condition != BLANK_CONDITION else run.model,
               "condition": run.condition, "n": int(len(per_session)), "trials": k}
        for name, (col, _) in METRICS.items():
            row[name], row[f"{name}_sd"] = float(per_trial[col].mean()), float(per_trial[col].std(ddof=1))
        pairs = list(zip(succ["sum"].astype(int), succ["size"].astype(int)))
        row.update({f"pass^{j}": pass_hat_k(pairs, j) for j in range(1, k + 1)})
        rows.append(row)
        used.append(run.name)
    if not rows:
        return None
    caption = ("Runs with several trials per session (--samples K): the mean over trials ± the between-trial "
               "standard deviation, and pass^k (the chance that k trials of a session all succeed).")
    cols = [("model", "model", "text"), ("condition", "condition", "text"), ("n", "n", "int"),
            ("trials", "trials", "int"), ("ES", "ES %", "pct_sd"), ("FT-ES", "FT-ES %", "pct_sd"),
            ("TTC", "TTC", "turns_sd"), *[(f"pass^{j}", f"pass^{j} %", "pct") for j in range(1, kmax + 1)]]
    return Table("trials", "Trials", caption, cols, rows, used)


def runs_table(rs: RunSet) -> Table:
    rows = [r.describe() for r in rs.runs]
    cols = [("run", "run", "text"), ("model", "model", "text"), ("condition", "condition", "text"),
            ("split", "split", "text"), ("dataset_version", "dataset", "text"), ("config_hash", "config hash", "text"),
            ("sessions", "sessions", "int"), ("trials", "trials", "int"), ("incomplete", "incomplete", "int")]
    return Table("runs", "Runs", "Every run this report reads. The config hash is sha256 of the run's config "
                 "(config.json `run`), first 12 hex digits.", cols, rows, [r.name for r in rs.runs])


def rescore_table(rs: RunSet) -> Table | None:
    """Each `capa eval --rescore` run against the run it re-scored, when both are in the report."""
    by_hash = {r.config_hash: r for r in rs.capa_runs}
    rows, used = [], []
    for new in rs.capa_runs:
        old = by_hash.get((new.run.get("rescored_from") or {}).get("config_hash"))
        if old is None:
            continue
        base = (old, rs.frame_of(old))
        rows.append(values_row(base[1], run=old.name, condition=old.condition, scoring="as recorded"))
        rows.append({**values_row(rs.frame_of(new), run=new.name, condition=new.condition,
                                  scoring=f"rescored ({new.run['rescored_from'].get('rule', '?')})"),
                     **delta_fields(base, (new, rs.frame_of(new)))})
        used += [old.name, new.name]
    if not rows:
        return None
    cols = [("run", "run", "text"), ("condition", "condition", "text"), ("scoring", "scoring", "text"),
            *VALUE_COLUMNS, *DELTA_COLUMNS]
    return Table("rescore", "Rescored runs against the runs they re-score",
                 "Δ: rescored minus as recorded (TTC: as recorded minus rescored, so positive is better), paired "
                 "over the same sessions, with a paired bootstrap 95% interval and a sign-flip permutation p-value. "
                 "A rescored session ends at the first turn whose recorded reply now passes; a recorded pass that "
                 "now fails counts as unsolved.",
                 cols, rows, used)


def build_tables(rs: RunSet, dataset_oracle: float | None = None, progress: bool = False) -> list[Table]:
    builders = [runs_table, main_table, difficulty_table, identity_table, memory_table, mechanism_table,
                lambda r: item_kind_table(r, dataset_oracle), blank_table, split_table, trials_table, rescore_table]
    if progress:
        from tqdm import tqdm

        builders = tqdm(builders, desc="tables", unit="table")
    return [t for b in builders if (t := b(rs)) is not None]
