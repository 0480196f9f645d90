"""The runs of one report: which runs may be compared, and the checks that refuse the rest.

Runs are grouped by *setting* (the run config without its condition and session selection:
same model, sampling, budget, user and judge). Within a setting each (condition, split) slot
holds one run. Two runs are paired only when they were made on the same dataset version and
manifest and over the same sessions; otherwise the report refuses, naming the runs and what
differs.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import pandas as pd

from capa_hf.analysis.results import Run, sessions_df
from capa_hf.defaults import BLANK_CONDITION, SPLIT
from capa_hf.errors import CapaError
from capa_hf.evaluation.difficulty_labels import check_labels_match

@dataclass
class RunSet:
    runs: list[Run]
    labels: dict | None = None            # a labels file given to the report (else each run's own)
    frame: pd.DataFrame = field(init=False, repr=False)

    def __post_init__(self) -> None:
        check_same_dataset(self.capa_runs)
        check_unique_slots(self.runs)
        if self.labels is not None and self.capa_runs:
            first = self.capa_runs[0]
            check_labels_match(self.labels, first.dataset_version, first.dataset_sha, f"run {first.name}")
        self.frame = sessions_df(self.runs, difficulty=self.labels)

    @property
    def capa_runs(self) -> list[Run]:
        return [r for r in self.runs if r.condition != BLANK_CONDITION]

    @property
    def blank_runs(self) -> list[Run]:
        return [r for r in self.runs if r.condition == BLANK_CONDITION]

    def settings(self) -> list[str]:
        seen: dict[str, None] = {}
        for r in self.capa_runs:
            seen.setdefault(r.setting, None)
        return list(seen)

    def model_label(self, setting: str) -> str:
        """The model name, with the setting hash where two settings share a model name."""
        models = {r.setting: r.model for r in self.capa_runs}
        name = models[setting]
        clash = sum(1 for m in models.values() if m == name) > 1
        return f"{name} #{setting}" if clash else name

    def slot(self, setting: str, condition: str, split: str = SPLIT) -> Run | None:
        for r in self.capa_runs:
            if (r.setting, r.condition, r.split) == (setting, condition, split):
                return r
        return None

    def frame_of(self, run: Run) -> pd.DataFrame:
        return self.frame[self.frame["run"] == run.name]

    def labels_of(self, run: Run) -> dict | None:
        return self.labels if self.labels is not None else run.config.get("difficulty")


def check_same_dataset(runs: list[Run]) -> None:
    """All CAPA runs of a report come from one dataset version and manifest."""
    by: dict[tuple, list[str]] = defaultdict(list)
    for r in runs:
        by[(r.dataset_version, r.dataset_sha)].append(r.name)
    if len(by) > 1:
        parts = "; ".join(f"dataset {v} (manifest {str(s)[:12]}): {', '.join(names)}" for (v, s), names in by.items())
        raise CapaError(f"refusing to compare runs made on different dataset versions: {parts}. "
                        "Report each dataset version separately, or rerun on one version.")


def check_unique_slots(runs: list[Run]) -> None:
    slots: dict[tuple, list[str]] = defaultdict(list)
    for r in runs:
        slots[(r.setting, r.condition, r.split)].append(r.name)
    for (setting, condition, split), names in slots.items():
        if len(names) > 1:
            raise CapaError(f"runs {', '.join(names)} are the same model setting ({setting}), condition {condition!r} "
                            f"and split {split!r}; a report takes one run per slot (for repeats use --samples K)")


def check_pairable(a: Run, b: Run, fa: pd.DataFrame, fb: pd.DataFrame) -> None:
    """Refuse to pair runs made on different dataset versions or over different sessions."""
    if (a.dataset_version, a.dataset_sha) != (b.dataset_version, b.dataset_sha):
        raise CapaError(f"refusing to pair runs {a.name} (dataset {a.dataset_version}, manifest "
                        f"{str(a.dataset_sha)[:12]}) and {b.name} (dataset {b.dataset_version}, manifest "
                        f"{str(b.dataset_sha)[:12]}): they were made on different dataset versions")
    if a.max_turns != b.max_turns:
        raise CapaError(f"refusing to pair runs {a.name} ({a.max_turns} turns) and {b.name} ({b.max_turns} turns): "
                        "different turn budgets")
    sa, sb = set(fa["session_id"]), set(fb["session_id"])
    if sa != sb:
        only_a, only_b = sorted(sa - sb), sorted(sb - sa)
        raise CapaError(f"refusing to pair runs {a.name} ({len(sa)} sessions) and {b.name} ({len(sb)} sessions): "
                        f"different session sets; only in {a.name}: {only_a[:5]}{' ...' if len(only_a) > 5 else ''}; "
                        f"only in {b.name}: {only_b[:5]}{' ...' if len(only_b) > 5 else ''}. "
                        "Evaluate both on the same --cells/--limit (and finish incomplete sessions).")
