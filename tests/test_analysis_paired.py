"""Paired intervals and the sign-flip permutation test on hand-made paired records."""

import numpy as np
import pytest

from capa_hf.analysis.paired import (bootstrap_indices, metric_summary, paired_delta, paired_metrics,
                                     sign_flip_p)
from capa_hf.analysis.results import sessions_df
from capa_hf.evaluation.metrics import bootstrap_ci, es, ft_es, ttc
from tests.run_fakes import record, typed, write_run


def paired_runs(tmp_path, n=40, improved=6):
    """Baseline: every even session solved at turn 1, the rest unsolved. Treatment: the same,
    plus `improved` of the unsolved sessions solved at turn 1. Both runs see the same sessions."""
    base = [record(f"S{i:02d}", 1 if i % 2 == 0 else None) for i in range(n)]
    odd = [i for i in range(n) if i % 2]
    treat = [record(f"S{i:02d}", 1 if i % 2 == 0 or i in odd[:improved] else None) for i in range(n)]
    return (write_run(tmp_path / "none", "none", base), write_run(tmp_path / "same", "same-user", treat))


def test_paired_interval_excludes_zero_where_per_run_intervals_overlap(tmp_path):
    a, b = paired_runs(tmp_path)
    df = sessions_df([a, b])
    fa, fb = df[df["run"] == "none"], df[df["run"] == "same"]
    ma, mb = metric_summary(fa), metric_summary(fb)
    assert (ma["ES"], mb["ES"]) == (0.5, 0.65)
    # the per-run intervals overlap ...
    assert ma["ES_ci"][1] > mb["ES_ci"][0]
    # ... but the paired one, over the same sessions, excludes 0
    d = paired_metrics(fa, fb)
    assert d["ES"]["delta"] == pytest.approx(0.15)
    assert d["ES"]["ci"][0] > 0 and d["ES"]["ci"][1] <= 0.3
    assert d["FT-ES"]["delta"] == pytest.approx(0.15)
    # TTC: baseline minus treatment, 6 sessions go from 8 to 1 turn
    assert d["TTC"]["delta"] == pytest.approx(6 * 7 / 40) and d["TTC"]["ci"][0] > 0
    # six improvements and no losses: the exact p-value is 2 / 2^6
    assert d["ES"]["p"] == pytest.approx(2 / 64)


def test_per_run_intervals_equal_those_of_the_run_summary(tmp_path):
    recs = [record(f"S{i}", t) for i, t in enumerate([1, 2, None, 3, 1, None, 5, 1, 2, 8])]
    df = sessions_df(write_run(tmp_path / "r", "none", recs))
    m = metric_summary(df)
    for name, fn in (("ES", es), ("FT-ES", ft_es), ("TTC", ttc)):
        assert m[name] == pytest.approx(fn(typed(recs)))
        assert m[f"{name}_ci"] == pytest.approx(list(bootstrap_ci(typed(recs), fn)))


def test_trials_are_averaged_per_session_before_pairing(tmp_path):
    base = [record("A", None, trial=0), record("A", 1, trial=1), record("B", 1, trial=0), record("B", 1, trial=1)]
    treat = [record("A", 1, trial=0), record("A", 1, trial=1), record("B", 1, trial=0), record("B", None, trial=1)]
    df = sessions_df([write_run(tmp_path / "a", "none", base, samples=2),
                      write_run(tmp_path / "b", "same-user", treat, samples=2)])
    d = paired_metrics(df[df["run"] == "a"], df[df["run"] == "b"])
    assert d["ES"]["delta"] == pytest.approx(0.0) and d["ES"]["pairs"] == 2
    assert d["ES"]["p"] == 1.0     # +0.5 and -0.5: every sign pattern is as extreme


def test_sign_flip_p_exact_cases():
    assert sign_flip_p(np.zeros(10)) == 1.0
    assert sign_flip_p(np.array([1.0] * 5)) == pytest.approx(2 / 32)
    assert sign_flip_p(np.array([1.0, -1.0])) == 1.0
    # zeros do not count: the same as the 3 non-zero differences alone
    assert sign_flip_p(np.array([0, 0, 1.0, 1.0, 1.0])) == pytest.approx(2 / 8)
    # |sum| >= 3 for 2+1+1+1, 2+1+1-1 (3 ways) and their negatives: 8 of 16 patterns
    assert sign_flip_p(np.array([2.0, 1.0, 1.0, -1.0])) == pytest.approx(8 / 16)


def test_sign_flip_p_monte_carlo_when_many_differences():
    d = np.array([1.0] * 30 + [-1.0] * 2)
    p = sign_flip_p(d, n_perm=5000, seed=1)
    assert 0 < p < 0.001
    balanced = sign_flip_p(np.array([1.0, -1.0] * 20), n_perm=5000, seed=1)
    assert balanced > 0.5


def test_paired_delta_refuses_unequal_lengths_and_handles_empty():
    with pytest.raises(ValueError, match="differ in length"):
        paired_delta(np.zeros(3), np.zeros(4))
    assert paired_delta(np.zeros(0), np.zeros(0))["pairs"] == 0


def test_bootstrap_indices_follow_metrics_draw_order():
    import random

    rng = random.Random(7)
    expected = [[rng.randrange(5) for _ in range(5)] for _ in range(3)]
    assert bootstrap_indices(5, 3, 7).tolist() == expected
