"""Session-level intervals: per-run cluster bootstrap, paired bootstrap and the paired
sign-flip permutation test. Pure functions over numpy arrays and session frames.

Per-run intervals resample sessions (all trials of a session together) with exactly the draws
of `capa_hf.evaluation.metrics.bootstrap_ci`, so a run's interval here equals the one in its
summary.json. A paired comparison takes the same sessions under two conditions, forms one
difference per session (each side averaged over its trials) and resamples those differences:
what varies between sessions cancels, so a paired interval can exclude 0 while the two per-run
intervals overlap.
"""

from __future__ import annotations

import itertools
import random
from functools import lru_cache

import numpy as np
import pandas as pd

from capa_hf.defaults import BOOTSTRAP_RESAMPLES, CONFIDENCE

ALPHA = 1 - CONFIDENCE
PERMUTATIONS = 20000
EXACT_MAX = 16            # up to this many non-zero differences the permutation test is exact

# metric name -> (session frame column, sign of a paired delta). A delta is treatment minus
# baseline, except TTC: baseline minus treatment, so that a positive delta is always better.
METRICS = {"ES": ("solved", 1.0), "FT-ES": ("first_turn", 1.0), "TTC": ("ttc", -1.0)}


@lru_cache(maxsize=16)
def bootstrap_indices(k: int, n: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> np.ndarray:
    """`n` resamples of `k` cluster indices, drawn in the order metrics.bootstrap_ci draws them."""
    rng = random.Random(seed)
    out = np.array([[rng.randrange(k) for _ in range(k)] for _ in range(n)], dtype=np.int64).reshape(n, k)
    out.setflags(write=False)
    return out


def percentile_interval(values: np.ndarray, alpha: float = ALPHA) -> tuple[float, float]:
    """metrics.bootstrap_ci's percentile rule on the resampled statistics."""
    v = np.sort(values)
    n = len(v)
    return float(v[int((alpha / 2) * (n - 1))]), float(v[int((1 - alpha / 2) * (n - 1))])


def cluster_interval(sums: np.ndarray, counts: np.ndarray, n_boot: int = BOOTSTRAP_RESAMPLES, seed: int = 0,
                     alpha: float = ALPHA) -> tuple[float, float]:
    """Bootstrap interval of sum/count over resampled clusters (a session's trials are one cluster)."""
    if len(sums) == 0:
        return float("nan"), float("nan")
    idx = bootstrap_indices(len(sums), n_boot, seed)
    return percentile_interval(sums[idx].sum(axis=1) / counts[idx].sum(axis=1), alpha)


def metric_summary(frame: pd.DataFrame, n_boot: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> dict:
    """ES, FT-ES and TTC of a session frame (rows in their run's order) with 95% intervals."""
    g = frame.groupby("session_id", sort=False)
    counts = g.size().to_numpy(dtype=float)
    out: dict = {"n": int(len(frame)), "sessions": int(len(counts))}
    for name, (col, _) in METRICS.items():
        sums = g[col].sum().to_numpy(dtype=float)
        out[name] = float(sums.sum() / counts.sum()) if len(counts) else float("nan")
        out[f"{name}_ci"] = list(cluster_interval(sums, counts, n_boot, seed))
    return out


def sign_flip_p(d: np.ndarray, n_perm: int = PERMUTATIONS, seed: int = 0, exact_max: int = EXACT_MAX) -> float:
    """Two-sided p-value of mean(d) = 0 under random sign flips of the paired differences.
    Exact (all 2^m sign patterns of the m non-zero differences) when m <= exact_max, else
    Monte Carlo with the add-one correction."""
    nz = np.asarray(d, dtype=float)
    nz = nz[nz != 0]
    m = len(nz)
    if m == 0:
        return 1.0
    observed = abs(nz.sum()) - 1e-12
    if m <= exact_max:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=m)))
        return float(np.mean(np.abs(signs @ nz) >= observed))
    rng = np.random.default_rng(seed)
    signs = rng.choice((1.0, -1.0), size=(n_perm, m))
    return float((1 + np.sum(np.abs(signs @ nz) >= observed)) / (1 + n_perm))


def paired_delta(baseline: np.ndarray, treatment: np.ndarray, sign: float = 1.0, n_boot: int = BOOTSTRAP_RESAMPLES,
                 seed: int = 0, n_perm: int = PERMUTATIONS) -> dict:
    """sign * (treatment - baseline), session by session: its mean, paired bootstrap interval
    and sign-flip p-value. The two arrays hold one value per session, in the same order."""
    base, treat = np.asarray(baseline, dtype=float), np.asarray(treatment, dtype=float)
    if base.shape != treat.shape:
        raise ValueError(f"paired arrays differ in length: {base.shape} vs {treat.shape}")
    d = sign * (treat - base)
    if len(d) == 0:
        return {"delta": float("nan"), "ci": [float("nan"), float("nan")], "p": float("nan"), "pairs": 0}
    idx = bootstrap_indices(len(d), n_boot, seed)
    return {"delta": float(d.mean()), "ci": list(percentile_interval(d[idx].mean(axis=1))),
            "p": sign_flip_p(d, n_perm, seed), "pairs": int(len(d))}


def session_means(frame: pd.DataFrame, column: str) -> pd.Series:
    """One value per session: the column's mean over the session's trials."""
    return frame.groupby("session_id", sort=True)[column].mean().astype(float)


def paired_metrics(base: pd.DataFrame, treat: pd.DataFrame, n_boot: int = BOOTSTRAP_RESAMPLES,
                   seed: int = 0) -> dict:
    """Paired deltas of ES, FT-ES and TTC between two frames over the same sessions (the caller
    checks that the session sets agree)."""
    out = {}
    for name, (col, sign) in METRICS.items():
        a, b = session_means(base, col), session_means(treat, col)
        b = b.reindex(a.index)
        out[name] = paired_delta(a.to_numpy(), b.to_numpy(), sign, n_boot, seed)
    return out
