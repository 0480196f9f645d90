"""PNG plots of the report's tables (matplotlib, Agg backend).

- condition_bars: grouped bars (models x conditions) for ES, FT-ES and TTC with 95% interval
  whiskers, each non-baseline bar labelled with its paired delta (main and identity tables)
- level_bars: the same by difficulty level or by mechanism
- dataset_figure: the dataset's balance and difficulty (paper Figure 4): cells per persona and
  mechanism, split comparability under no history, and the difficulty labels' counts

Every bar is labelled with its n (sessions). A panel with nothing to show is left out, and the
caption (`dataset_caption`) says so; the persona x mechanism heatmap is drawn only when its
counts differ (a uniform grid is one sentence, not a figure). Tick labels never overlap
(`plot_layout`).
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

from capa_hf.analysis.plot_layout import fit_tick_labels, wrap_label
from capa_hf.analysis.tables import Table

PANELS = (("ES", 100, "ES (%)"), ("FT-ES", 100, "FT-ES (%)"), ("TTC", 1, "TTC (turns, lower is better)"))
COLORS = ("#8c8c8c", "#dd8452", "#c44e52", "#4c72b0", "#55a868", "#8172b3", "#937860", "#da8bc3")


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _whiskers(rows: list[dict], key: str, scale: float) -> tuple[list[float], list[list[float]]]:
    vals = [r[key] * scale for r in rows]
    ci = [r.get(f"{key}_ci") or [r[key], r[key]] for r in rows]
    lo = [max(v - c[0] * scale, 0) if not math.isnan(c[0]) else 0 for v, c in zip(vals, ci)]
    hi = [max(c[1] * scale - v, 0) if not math.isnan(c[1]) else 0 for v, c in zip(vals, ci)]
    return vals, [lo, hi]


def grouped_bars(rows: list[dict], group_key: str, series_key: str, path: Path, title: str,
                 annotate_delta: bool = False) -> Path:
    """One panel per metric: x = distinct `group_key` values, one bar per `series_key` value."""
    plt = _pyplot()
    fig = grouped_figure(rows, group_key, series_key, title, annotate_delta)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def grouped_figure(rows: list[dict], group_key: str, series_key: str, title: str, annotate_delta: bool = False):
    plt = _pyplot()
    groups = list(dict.fromkeys(r[group_key] for r in rows))
    series = list(dict.fromkeys(r[series_key] for r in rows))
    width = 0.8 / max(len(series), 1)
    bars = len(groups) * max(len(series), 1)
    if bars <= 8:   # side by side; many bars: one metric per row
        fig, axes = plt.subplots(1, 3, figsize=(12, 4.2))
    else:
        fig, axes = plt.subplots(3, 1, figsize=(min(16, max(8, 0.45 * bars + 2)), 10))
    for ax, (metric, scale, label) in zip(axes, PANELS):
        for j, s in enumerate(series):
            part = [r for r in rows if r[series_key] == s and not _nan(r.get(metric))]
            xs = [groups.index(r[group_key]) + (j - (len(series) - 1) / 2) * width for r in part]
            vals, err = _whiskers(part, metric, scale)
            ax.bar(xs, vals, width * 0.95, yerr=err, capsize=3, color=COLORS[j % len(COLORS)], label=str(s))
            for x, r in zip(xs, part):      # n inside the bar's foot, where no whisker or delta goes
                if r.get("n") is not None:
                    ax.annotate(f"n={r['n']}", (x, 0), xytext=(0, 3), textcoords="offset points", rotation=90,
                                ha="center", va="bottom", fontsize=7, color="#1d2430")
            if annotate_delta:
                for x, v, e, r in zip(xs, vals, err[1], part):
                    d = r.get(f"d{metric}")
                    if not _nan(d):
                        ax.annotate(f"Δ{d * scale:+.1f}" if scale == 100 else f"Δ{d:+.2f}", (x, v + e),
                                    ha="center", va="bottom", fontsize=7, xytext=(0, 2), textcoords="offset points")
        ax.set_xticks(range(len(groups)), [wrap_label(_short(g, 40)) for g in groups], fontsize=8)
        ax.set_title(label, fontsize=10)
        if scale == 100:
            ax.set_ylim(0, 110)
        ax.margins(y=0.15)
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=min(len(series), 6), fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0.06 if bars <= 8 else 0.03, 1, 1))
    for ax in axes:
        fit_tick_labels(fig, ax)
    fig.tight_layout(rect=(0, 0.06 if bars <= 8 else 0.03, 1, 1))
    return fig


def _span(counts: list[int]) -> str:
    """'6' when all counts are 6, '5-7' otherwise."""
    if not counts:
        return "0"
    return str(counts[0]) if counts[0] == counts[-1] else f"{counts[0]}-{counts[-1]}"


def _nan(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _short(text: str, n: int = 28) -> str:
    text = str(text)
    return text if len(text) <= n else "..." + text[-(n - 3):]


def condition_bars(table: Table, path: Path) -> Path:
    rows = [r for r in table.rows if not _nan(r.get("ES"))]
    return grouped_bars(rows, "model", "condition", path, table.title, annotate_delta=True)


def level_bars(table: Table, level_key: str, path: Path) -> Path:
    rows = [{**r, "series": f"{r['model']} / {r['condition']}"} for r in table.rows]
    return grouped_bars(rows, level_key, "series", path, table.title)


def cell_grid(cells: list[tuple[str, tuple[str, str]]]) -> tuple[list[str], list[str], Counter]:
    personas = sorted({p for p, _ in cells})
    mechs = sorted({m for _, pair in cells for m in pair})
    return personas, mechs, Counter((p, m) for p, pair in cells for m in pair)


def dataset_panels(cells, split: dict | None, counts: dict | None) -> tuple[list[str], dict[str, str]]:
    """The panels with something to show, and for each one left out, why (for the caption)."""
    personas, mechs, grid = cell_grid(cells)
    values = [grid[(p, m)] for p in personas for m in mechs]
    shown, left = [], {}
    if not cells:
        left["cells"] = "no dataset facts (pass --dataset)"
    elif min(values) == max(values):
        left["cells"] = (f"every persona x mechanism pair holds {values[0]} cell(s), so its heatmap would show "
                         "nothing")
    else:
        shown.append("cells")
    if split:
        shown.append("split")
    else:
        left["split"] = "no no-history run on the history split (capa eval --condition none --split history)"
    if counts:
        shown.append("difficulty")
    else:
        left["difficulty"] = "no difficulty labels (capa label-difficulty RUN --out DIR)"
    return shown, left


PANEL_TEXT = {"cells": "cells per persona and mechanism (each cell counts for both of its mechanisms)",
              "split": "split comparability under no history", "difficulty": "counts of the difficulty labels"}


def dataset_caption(cells, split: dict | None, counts: dict | None) -> str:
    shown, left = dataset_panels(cells, split, counts)
    parts = [f"({chr(97 + i)}) {PANEL_TEXT[k]}" for i, k in enumerate(shown)]
    text = ", ".join(parts) + "." if parts else "No figure: no panel has data."
    if cells:
        per_persona = sorted(Counter(p for p, _ in cells).values())
        per_mech = sorted(Counter(m for _, pair in cells for m in pair).values())
        per_pair = sorted(Counter(tuple(sorted(pair)) for _, pair in cells).values())
        text += (f" Balance: {len(cells)} cells; each persona in {_span(per_persona)} cells, each mechanism in "
                 f"{_span(per_mech)}, each of {len(per_pair)} mechanism pairs in {_span(per_pair)}.")
    if left:
        text += " Left out: " + "; ".join(f"{PANEL_TEXT[k]}, because {why}" for k, why in left.items()) + "."
    return text


def _heatmap(fig, ax, cells) -> None:
    personas, mechs, grid = cell_grid(cells)
    values = [[grid[(p, m)] for m in mechs] for p in personas]
    top = max(max(row) for row in values)
    image = ax.imshow(values, cmap="Blues", aspect="auto", vmin=0, vmax=top)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="cells", ticks=range(0, top + 1))
    ax.set_xticks(range(len(mechs)), [wrap_label(m) for m in mechs], fontsize=7)
    ax.set_yticks(range(len(personas)), personas, fontsize=7)
    for i, row in enumerate(values):
        for j, v in enumerate(row):
            ax.text(j, i, str(v), ha="center", va="center", fontsize=7, color="white" if v > top / 2 else "black")
    ax.set_title("cells per persona and mechanism", fontsize=9)


def _split_panel(ax, split: dict) -> None:
    bars = ax.bar(["history", "held-out"], [100 * split["ES_history"], 100 * split["ES_heldout"]],
                  color=[COLORS[0], COLORS[3]])
    ns = (split.get("n_history"), split.get("n_heldout"))
    for b, t, n in zip(bars, (split["turns_history"], split["turns_heldout"]), ns):
        ax.annotate(f"{t:.2f} turns", (b.get_x() + b.get_width() / 2, b.get_height()), ha="center",
                    va="bottom", fontsize=8)
        if n is not None:
            ax.annotate(f"n={n}", (b.get_x() + b.get_width() / 2, 0), xytext=(0, 3), textcoords="offset points",
                        ha="center", va="bottom", fontsize=8, color="white")
    ax.set_ylim(0, 110)
    ax.set_ylabel("ES (%) under no history", fontsize=8)
    ax.set_title(f"splits: ΔES {100 * split['dES']:+.1f} pp, Δturns {split['dturns']:+.2f}\n"
                 f"(cell medians {100 * split['cell_median_dES']:+.1f}, {split['cell_median_dturns']:+.2f})",
                 fontsize=9)


def _difficulty_panel(ax, counts: dict, source: str) -> None:
    total = max(sum(counts.values()), 1)
    bars = ax.bar(list(counts), list(counts.values()), color=[COLORS[4], COLORS[1], COLORS[2]][:len(counts)])
    for b, v in zip(bars, counts.values()):
        ax.annotate(f"n={v} ({100 * v / total:.1f}%)", (b.get_x() + b.get_width() / 2, v), ha="center",
                    va="bottom", fontsize=8)
    ax.set_title(f"difficulty labels{(' from ' + source) if source else ''}", fontsize=9)
    ax.margins(y=0.15)


def dataset_figure(cells: list[tuple[str, tuple[str, str]]], split: dict | None, counts: dict | None,
                   path: Path, source: str = "") -> Path | None:
    """`cells`: (persona, mechanism pair) per cell; `split`: a split table row; `counts`:
    difficulty label -> sessions. Only the panels with data are drawn (None when none has)."""
    fig = dataset_figure_of(cells, split, counts, source)
    if fig is None:
        return None
    fig.savefig(path, dpi=120)
    _pyplot().close(fig)
    return path


def dataset_figure_of(cells, split: dict | None, counts: dict | None, source: str = ""):
    shown, _ = dataset_panels(cells, split, counts)
    if not shown:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(shown), figsize=(5 * len(shown) + 0.5, 4.4), squeeze=False)
    for i, (ax, key) in enumerate(zip(axes[0], shown)):
        if key == "cells":
            _heatmap(fig, ax, cells)
        elif key == "split":
            _split_panel(ax, split)
        else:
            _difficulty_panel(ax, counts, source)
        ax.set_title(f"({chr(97 + i)}) " + ax.get_title(), fontsize=9)
    fig.tight_layout()
    for ax in axes[0]:
        fit_tick_labels(fig, ax)
    fig.tight_layout()
    return fig
