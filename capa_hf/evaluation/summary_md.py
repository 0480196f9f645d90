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

GROUPS = (("per_persona", "Per persona"),
          ("per_mechanism", "Per mechanism (each session counts for both of its mechanisms)"),
          ("per_role", "Per role in the cell design"),
          ("per_item_kind", "Per kind of hidden items"),
          ("per_resolvable", "By whether the cell's history resolves every hidden item"),
          ("per_difficulty", "Per difficulty label (capa eval --difficulty)"))


def _sandbox_lines(summary: dict) -> list[str]:
    sb = summary.get("sandbox")
    if not sb:
        return []
    lines = ["", f"Sandbox: {', '.join(sb['layers'])}."]
    if sb.get("notes"):
        lines.append("Sandbox notes: " + "; ".join(sb["notes"]) + ".")
    return lines


def _incomplete_lines(summary: dict) -> list[str]:
    n = summary.get("n_incomplete", 0)
    if not n:
        return []
    first = summary["incomplete"][0]["error"] if summary.get("incomplete") else ""
    return ["", f"**{n} sessions incomplete** (engine errors, not scored; rerun the same command to retry them): "
                f"{first}"]


def _trial_lines(summary: dict) -> list[str]:
    t = summary.get("trials")
    if not t:
        return []
    ks = ", ".join(f"pass^{k} {100 * v:.1f}%" for k, v in t["pass_hat_k"].items())
    return ["", f"{t['trials']} trials per session: ES between-trial sd {100 * t['ES_between_trial_sd']:.1f} pp; {ks}."]


def _llm_role_lines(summary: dict) -> list[str]:
    lines = []
    u = summary.get("llm_user")
    if u and u.get("turns"):
        lines += ["", f"LLM user: {u['turns']} turns; fallbacks per 100 turns: planner "
                      f"{u['planner_fallbacks_per_100_turns']:.1f}, expression {u['expression_fallbacks_per_100_turns']:.1f}."]
    v = summary.get("veto")
    if v:
        lines += ["", f"Veto: {v['vetoed']} of {v['passes_assessed']} passes vetoed ({v['invalid_answers']} unusable "
                      f"answers); ES {fmt(v['with_vetoes'], 'ES', True)} with vetoes, "
                      f"{fmt(v['without_vetoes'], 'ES', True)} without."]
    return lines


def user_reasoning_line(summary: dict) -> str | None:
    """Why the scripted user said what it said, as shares of its turns (None without such turns)."""
    u = summary.get("user_reasoning")
    if not u or not u.get("turns"):
        return None
    pct = (lambda k: f"{100 * u['shares'][k]:.0f}%")
    on_topic = u.get("on_topic_share")
    return (f"Scripted user, {u['turns']} turns: answered a question {u['question']} ({pct('question')}), "
            f"tied to the failure {u['failure_tie']} ({pct('failure_tie')}), quoted the failing check "
            f"{u['failing_check']} ({pct('failing_check')}), priority fallback {u['priority']} "
            f"({pct('priority')}), nothing left {u['nothing_left']} ({pct('nothing_left')}); on topic "
            + (f"{100 * on_topic:.0f}% of the turns after a reply that was not a failed submission."
               if on_topic is not None else "n/a."))


def _user_lines(summary: dict) -> list[str]:
    line = user_reasoning_line(summary)
    return ["", line] if line else []


def _difficulty_lines(summary: dict) -> list[str]:
    src = summary.get("difficulty_source")
    if not src:
        return []
    return ["", f"Difficulty labels from run {src.get('run')} ({src.get('model')}, {src.get('condition')}, "
                f"config {str(src.get('config_hash'))[:12]})."]


def summary_markdown(summary: dict) -> str:
    cfg = summary["config"]
    lines = [f"# {cfg['model']} / condition `{cfg['condition']}`", "",
             f"{summary['n_sessions']} scored {cfg.get('split', 'heldout')} sessions, "
             f"wall {summary['wall_s']} s (resumed {summary['resumed']}).",
             *_incomplete_lines(summary), *_sandbox_lines(summary), *_trial_lines(summary),
             *_llm_role_lines(summary), *_user_lines(summary), *_difficulty_lines(summary), "", HEADER,
             row("overall", summary["overall"])]
    for key, title in GROUPS:
        if summary.get(key):
            lines += ["", f"## {title}", "", HEADER]
            lines += [row(k, v) for k, v in summary[key].items()]
    lines += _condition_lines(summary)
    return "\n".join(lines) + "\n"


def _condition_lines(summary: dict) -> list[str]:
    """The gate's verdicts and a memory system's counts (`condition_stats`), one line each."""
    stats = summary.get("condition_stats") or {}
    lines = []
    if "gate" in stats:
        g = stats["gate"]
        lines.append(f"Gate: sufficient {g['sufficient']}/{g['sessions']} ({100 * g['sufficient_rate']:.0f}%), "
                     f"unresolved {g['unresolved']}, fallbacks to raw history {g['fallbacks']}, retried {g['retried']}.")
    if "memory" in stats:
        m = stats["memory"]
        skip = {"system", "llm", "cells"}
        counts = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in m.items() if k not in skip)
        lines.append(f"Memory ({m['system']}, memory LLM {(m.get('llm') or {}).get('model')}): {m['cells']} cells; {counts}.")
    return ["", "## Condition", "", *lines] if lines else []
