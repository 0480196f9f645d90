"""PNG plots of the report's tables (matplotlib, Agg backend).

- condition_bars: grouped bars (models x conditions) for ES, FT-ES and TTC with 95% interval
  whiskers, each non-baseline bar labelled with its paired delta (main and identity tables)
- level_bars: the same by difficulty level or by mechanism
- dataset_figure: the dataset's balance and difficulty (paper Figure 4): cells per persona and
  mechanism, split comparability under no history, and the difficulty labels' counts
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

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
            if annotate_delta:
                for x, v, e, r in zip(xs, vals, err[1], part):
                    d = r.get(f"d{metric}")
                    if not _nan(d):
                        ax.annotate(f"Δ{d * scale:+.1f}" if scale == 100 else f"Δ{d:+.2f}", (x, v + e),
                                    ha="center", va="bottom", fontsize=7, xytext=(0, 2), textcoords="offset points")
        ax.set_xticks(range(len(groups)), [_short(g) for g in groups], fontsize=8)
        ax.set_title(label, fontsize=10)
        if scale == 100:
            ax.set_ylim(0, 110)
        ax.margins(y=0.15)
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=min(len(series), 6), fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0.06 if bars <= 8 else 0.03, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


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


def dataset_figure(cells: list[tuple[str, tuple[str, str]]], split: dict | None, counts: dict | None,
                   path: Path, source: str = "") -> Path:
    """`cells`: (persona, mechanism pair) per cell; `split`: a split table row; `counts`:
    difficulty label -> sessions."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
    personas = sorted({p for p, _ in cells})
    mechs = sorted({m for _, pair in cells for m in pair})
    grid = Counter((p, m) for p, pair in cells for m in pair)
    ax = axes[0]
    if cells:
        ax.imshow([[grid[(p, m)] for m in mechs] for p in personas], cmap="Blues", aspect="auto", vmin=0)
        ax.set_xticks(range(len(mechs)), [m.replace("_", " ") for m in mechs], rotation=30, ha="right", fontsize=7)
        ax.set_yticks(range(len(personas)), personas, fontsize=7)
        for i, p in enumerate(personas):
            for j, m in enumerate(mechs):
                ax.text(j, i, str(grid[(p, m)]), ha="center", va="center", fontsize=7)
    per_persona = sorted(Counter(p for p, _ in cells).values())
    per_mech = sorted(Counter(m for _, pair in cells for m in pair).values())
    per_pair = sorted(Counter(tuple(sorted(pair)) for _, pair in cells).values())
    ax.set_title(f"(a) {len(cells)} cells: persona x mechanism; each persona in {_span(per_persona)} cells,\n"
                 f"each mechanism in {_span(per_mech)}, each of {len(per_pair)} pairs in {_span(per_pair)}", fontsize=9)
    ax = axes[1]
    if split:
        bars = ax.bar(["history", "held-out"], [100 * split["ES_history"], 100 * split["ES_heldout"]],
                      color=[COLORS[0], COLORS[3]])
        for b, t in zip(bars, (split["turns_history"], split["turns_heldout"])):
            ax.annotate(f"{t:.2f} turns", (b.get_x() + b.get_width() / 2, b.get_height()), ha="center",
                        va="bottom", fontsize=8)
        ax.set_ylim(0, 110)
        ax.set_ylabel("ES (%) under no history", fontsize=8)
        ax.set_title(f"(b) splits: ΔES {100 * split['dES']:+.1f} pp, Δturns {split['dturns']:+.2f} "
                     f"(cell medians {100 * split['cell_median_dES']:+.1f}, {split['cell_median_dturns']:+.2f})",
                     fontsize=9)
    else:
        ax.text(0.5, 0.5, "no no-history run on the history split\n(capa eval --condition none --split history)",
                ha="center", va="center", fontsize=8, transform=ax.transAxes)
        ax.set_title("(b) split comparability", fontsize=9)
    ax = axes[2]
    if counts:
        total = max(sum(counts.values()), 1)
        bars = ax.bar(list(counts), list(counts.values()), color=[COLORS[4], COLORS[1], COLORS[2]])
        for b, v in zip(bars, counts.values()):
            ax.annotate(f"{v} ({100 * v / total:.1f}%)", (b.get_x() + b.get_width() / 2, v), ha="center",
                        va="bottom", fontsize=8)
        ax.set_title(f"(c) difficulty labels{(' from ' + source) if source else ''}", fontsize=9)
        ax.margins(y=0.15)
    else:
        ax.text(0.5, 0.5, "no difficulty labels\n(capa label-difficulty RUN --out DIR)", ha="center", va="center",
                fontsize=8, transform=ax.transAxes)
        ax.set_title("(c) difficulty", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
