"""`capa report`: compare runs side by side (markdown table) and plot them (PNG)."""

from __future__ import annotations

import json
from pathlib import Path

from capa_hf.errors import CapaError
from capa_hf.evaluation.summary_md import fmt


def load_summary(run: Path) -> dict:
    path = run / "summary.json"
    if not path.is_file():
        raise CapaError(f"{run}: no summary.json (is it a finished `capa eval` run folder?)")
    return json.loads(path.read_text())


def comparison_table(runs: dict[str, dict]) -> str:
    lines = ["| run | model | condition | n | ES % | FT-ES % | TTC | questions/session | wall s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, s in runs.items():
        o = s["overall"]
        lines.append(f"| {name} | {s['config']['model']} | {s['config']['condition']} | {o['n']} | "
                     f"{fmt(o, 'ES', True)} | {fmt(o, 'FT-ES', True)} | {fmt(o, 'TTC', False)} | "
                     f"{o['clarifications_per_session']:.2f} | {s['wall_s']} |")
    return "\n".join(lines) + "\n"


def plot(runs: dict[str, dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(runs)
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    for ax, metric, scale in zip(axes, ("ES", "FT-ES", "TTC"), (100, 100, 1)):
        vals = [runs[n]["overall"][metric]["value"] * scale for n in names]
        los = [runs[n]["overall"][metric]["ci95"][0] * scale for n in names]
        his = [runs[n]["overall"][metric]["ci95"][1] * scale for n in names]
        err = [[v - lo for v, lo in zip(vals, los)], [hi - v for v, hi in zip(vals, his)]]
        ax.bar(range(len(names)), vals, yerr=err, capsize=4, color="#4c72b0")
        ax.set_xticks(range(len(names)), names, rotation=20, ha="right", fontsize=8)
        ax.set_title(metric + (" (%)" if scale == 100 else " (turns, lower is better)"))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def report_cli(args) -> int:
    runs = {Path(r).name: load_summary(Path(r)) for r in args.runs}
    table = comparison_table(runs)
    print(table)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.md").write_text("# CAPA runs\n\n" + table, encoding="utf-8")
        plot(runs, out / "metrics.png")
        print(f"wrote {out}/report.md and {out}/metrics.png")
    return 0
