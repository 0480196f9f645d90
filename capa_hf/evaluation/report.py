"""Side-by-side rows of run summaries (what `make demo` prints); `capa report` itself, with
paired intervals, every table of the paper and the plots, lives in `capa_hf.analysis.report`."""

from __future__ import annotations

from capa_hf.evaluation.summary_md import fmt


def comparison_table(runs: dict[str, dict]) -> str:
    """One markdown row per run summary (summary.json), with its per-run bootstrap intervals."""
    lines = ["| run | model | condition | n | ES % | FT-ES % | TTC | questions/session | wall s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, s in runs.items():
        o = s["overall"]
        lines.append(f"| {name} | {s['config']['model']} | {s['config']['condition']} | {o['n']} | "
                     f"{fmt(o, 'ES', True)} | {fmt(o, 'FT-ES', True)} | {fmt(o, 'TTC', False)} | "
                     f"{o['clarifications_per_session']:.2f} | {s['wall_s']} |")
    return "\n".join(lines) + "\n"

