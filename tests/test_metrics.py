import itertools
import math

from capa_hf.evaluation.metrics import bootstrap_ci, es, first_success_turn, ft_es, summarize, ttc
from capa_hf.schema.record import SessionRecord

_ids = itertools.count()


def rec(*statuses, persona="P01", mechs=("a", "b")):
    """A record of its own session whose submissions have these (turn, status)."""
    subs = [{"turn": t, "code": "", "verdict": {"status": s}} for t, s in statuses]
    return SessionRecord.from_dict({"session_id": f"S{next(_ids)}", "submissions": subs, "persona_id": persona,
                                    "mechanisms": list(mechs), "turn_kinds": []})


def test_all_unsolved_gives_ttc_8_and_zero_rates():
    rs = [rec(), rec((2, "failed")), rec((8, "error"))]
    assert es(rs) == 0.0 and ft_es(rs) == 0.0 and ttc(rs) == 8.0


def test_solved_at_turn_one_counts_for_ft_es():
    rs = [rec((1, "passed")), rec((3, "passed"))]
    assert ft_es(rs) == 0.5 and es(rs) == 1.0 and ttc(rs) == 2.0


def test_second_passing_submission_is_ignored():
    r = rec((2, "failed"), (3, "passed"), (5, "passed"))
    assert first_success_turn(r) == 3
    assert ttc([r]) == 3.0


def test_success_beyond_budget_is_unsolved():
    r = rec((9, "passed"))
    assert es([r]) == 0.0 and ttc([r]) == 8.0


def test_bootstrap_interval_contains_point_and_is_deterministic():
    rs = [rec((1, "passed"))] * 6 + [rec()] * 4
    lo, hi = bootstrap_ci(rs, es, n=500, seed=1)
    assert lo <= 0.6 <= hi and 0.0 <= lo < hi <= 1.0
    assert bootstrap_ci(rs, es, n=500, seed=1) == (lo, hi)


def test_summary_groups_personas_and_counts_each_mechanism_of_a_pair():
    rs = [rec((1, "passed"), persona="P01", mechs=("a", "b")), rec(persona="P02", mechs=("b", "c"))]
    s = summarize(rs, n_boot=50)
    assert s["overall"]["n"] == 2
    assert set(s["per_persona"]) == {"P01", "P02"}
    assert s["per_mechanism"]["b"]["n"] == 2 and s["per_mechanism"]["a"]["n"] == 1
    assert s["per_mechanism"]["a"]["ES"]["value"] == 1.0 and s["per_mechanism"]["c"]["TTC"]["value"] == 8.0


def test_empty_records_give_nan_not_crash():
    assert math.isnan(es([]))
