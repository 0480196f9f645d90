"""The report's plots: tick labels that never overlap, n on every bar, no empty panel, and a
heatmap only when it shows something."""

from __future__ import annotations

import pytest

from capa_hf.analysis import plots
from capa_hf.analysis.plot_layout import boxes_overlap, overlapping, text_boxes, wrap_label

MECHS = ["habitual_omission", "implicit_constraint", "structural_misalignment", "domain_polysemy",
         "system_boundary", "conversational_misalignment"]


def _rows(groups, series=("m / none", "m / same-user")):
    return [{"mechanism": g, "series": s, "n": 10 + i, "ES": 0.5, "ES_ci": [0.3, 0.7], "FT-ES": 0.0,
             "FT-ES_ci": [0.0, 0.0], "TTC": 4.0, "TTC_ci": [3.0, 5.0]}
            for i, g in enumerate(groups) for s in series]


@pytest.mark.parametrize("n_groups", [4, 6])
def test_tick_labels_never_overlap(n_groups):
    fig = plots.grouped_figure(_rows(MECHS[:n_groups]), "mechanism", "series", "per mechanism")
    for ax in fig.axes:
        labels = ax.get_xticklabels()
        assert [t.get_text() for t in labels] == [wrap_label(m) for m in MECHS[:n_groups]]
        assert overlapping(text_boxes(fig, labels)) == []
    plots._pyplot().close(fig)


def test_the_overlap_check_sees_an_overlap():
    assert boxes_overlap((0, 0, 10, 10), (9, 5, 20, 12)) and not boxes_overlap((0, 0, 10, 10), (12, 0, 20, 10))
    assert overlapping([(0, 0, 10, 10), (30, 0, 40, 10), (5, 5, 12, 12)]) == [(0, 2)]


def test_every_bar_shows_its_n():
    rows = _rows(MECHS[:4])
    fig = plots.grouped_figure(rows, "mechanism", "series", "per mechanism")
    for ax in fig.axes:
        ns = sorted(t.get_text() for t in ax.texts if t.get_text().startswith("n="))
        assert ns == sorted(f"n={r['n']}" for r in rows) and len(ax.patches) == len(rows)
    plots._pyplot().close(fig)


BALANCED = [(f"P{p:02d}", pair) for p in range(1, 4) for pair in (("a", "b"), ("a", "b"))]
UNEVEN = [("P01", ("a", "b")), ("P01", ("a", "c")), ("P02", ("b", "c"))]
SPLIT = {"ES_history": 0.5, "ES_heldout": 0.4, "turns_history": 4.0, "turns_heldout": 4.5, "dES": -0.1,
         "dturns": 0.5, "cell_median_dES": 0.0, "cell_median_dturns": 0.0, "n_history": 300, "n_heldout": 300}


def test_a_uniform_heatmap_is_left_out_and_the_caption_says_so():
    shown, left = plots.dataset_panels(BALANCED, None, {"simple": 3, "complex": 2})
    assert shown == ["difficulty"] and set(left) == {"cells", "split"}
    caption = plots.dataset_caption(BALANCED, None, {"simple": 3, "complex": 2})
    assert caption.startswith("(a) counts of the difficulty labels.")
    assert "every persona x mechanism pair holds 2 cell(s)" in caption and "no no-history run" in caption
    fig = plots.dataset_figure_of(BALANCED, None, {"simple": 3, "complex": 2})
    assert len(fig.axes) == 1 and fig.axes[0].get_title().startswith("(a) difficulty labels")
    assert sorted(t.get_text() for t in fig.axes[0].texts) == ["n=2 (40.0%)", "n=3 (60.0%)"]
    plots._pyplot().close(fig)


def test_an_uneven_heatmap_has_a_colour_bar_and_readable_digits():
    fig = plots.dataset_figure_of(UNEVEN, SPLIT, None)
    heat, split, bar = fig.axes          # the heatmap, the split panel, the colour bar
    assert bar.get_ylabel() == "cells" and heat.get_title().startswith("(a) cells per persona")
    colours = {t.get_text(): t.get_color() for t in heat.texts}
    assert colours["2"] == "white" and colours["1"] == "black"
    assert split.get_title().startswith("(b) splits") and {"n=300"} <= {t.get_text() for t in split.texts}
    plots._pyplot().close(fig)


def test_no_data_no_figure(tmp_path):
    assert plots.dataset_figure([], None, None, tmp_path / "d.png") is None and not (tmp_path / "d.png").exists()
    assert plots.dataset_caption([], None, None).startswith("No figure: no panel has data.")
