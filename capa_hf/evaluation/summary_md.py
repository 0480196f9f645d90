"""Markdown renderings of run summaries."""

from __future__ import annotations


def fmt(block: dict, name: str, pct: bool) -> str:
    m = block[name]
    lo, hi = m["ci95"]
    if pct:
        return f"{100 * m['value']:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"
    return f"{m['value']:.2f} [{lo:.2f}, {hi:.2f}]"


def row(label: str, block: dict) -> str:
    return (f"| {label} | {block['n']} | {fmt(block, 'ES', True)} | {fmt(block, 'FT-ES', True)} | "
            f"{fmt(block, 'TTC', False)} | {block['clarifications_per_session']:.2f} |")


HEADER = ("| | n | ES % [95% CI] | FT-ES % [95% CI] | TTC [95% CI] | questions/session |\n"
          "|---|---|---|---|---|---|")


def _sandbox_lines(summary: dict) -> list[str]:
    sb = summary.get("sandbox")
    if not sb:
        return []
    lines = ["", f"Sandbox: {', '.join(sb['layers'])}."]
    if sb.get("notes"):
        lines.append("Sandbox notes: " + "; ".join(sb["notes"]) + ".")
    return lines


def summary_markdown(summary: dict) -> str:
    cfg = summary["config"]
    lines = [f"# {cfg['model']} / condition `{cfg['condition']}`", "",
             f"{summary['n_sessions']} held-out sessions, {summary['n_errors']} episode errors, "
             f"wall {summary['wall_s']} s (resumed {summary['resumed']}).", *_sandbox_lines(summary), "", HEADER,
             row("overall", summary["overall"]), "", "## Per persona", "", HEADER]
    lines += [row(k, v) for k, v in summary["per_persona"].items()]
    lines += ["", "## Per mechanism (each session counts for both of its mechanisms)", "", HEADER]
    lines += [row(k, v) for k, v in summary["per_mechanism"].items()]
    return "\n".join(lines) + "\n"
