"""Markdown for the report's tables: one formatter per column kind. Pure."""

from __future__ import annotations

import math
from typing import Any

from capa_hf.analysis.tables import Table


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _num(v: float, scale: float, digits: int, signed: bool = False) -> str:
    return f"{v * scale:{'+' if signed else ''}.{digits}f}"


def _interval(row: dict, key: str, scale: float, digits: int, signed: bool = False) -> str:
    ci = row.get(f"{key}_ci")
    if not ci or any(_missing(x) for x in ci):
        return ""
    return f" [{_num(ci[0], scale, digits, signed)}, {_num(ci[1], scale, digits, signed)}]"


def p_text(p: float | None) -> str:
    if _missing(p):
        return ""
    return ", p<0.001" if p < 0.001 else f", p={p:.3f}"


KINDS = {  # kind -> (scale, digits, signed, with sd)
    "pct": (100, 1, False, False), "turns": (1, 2, False, False), "dpct": (100, 1, True, False),
    "dturns": (1, 2, True, False), "num": (1, 2, False, False), "pct_sd": (100, 1, False, True),
    "turns_sd": (1, 2, False, True),
}


def cell(row: dict, key: str, kind: str) -> str:
    v = row.get(key)
    if _missing(v):
        return ""
    if kind == "text":
        return str(v)
    if kind == "int":
        return str(int(v))
    scale, digits, signed, sd = KINDS[kind]
    text = _num(v, scale, digits, signed)
    if sd:
        s = row.get(f"{key}_sd")
        return text + ("" if _missing(s) else f" ± {_num(s, scale, digits)}")
    return text + _interval(row, key, scale, digits, signed) + p_text(row.get(f"{key}_p"))


def table_markdown(table: Table) -> str:
    head = "| " + " | ".join(h for _, h, _ in table.columns) + " |"
    rule = "|" + "---|" * len(table.columns)
    body = ["| " + " | ".join(cell(r, k, kind) for k, _, kind in table.columns) + " |" for r in table.rows]
    return "\n".join([head, rule, *body])


def run_text(d: dict) -> str:
    """A run as every table names it: model, condition, split, dataset version, config hash."""
    return (f"`{d['run']}` ({d['model']}, {d['condition']}, {d['split']}, dataset {d['dataset_version']}, "
            f"config {d['config_hash']})")


def section(table: Table, plot: str | None = None, runs: dict[str, dict] | None = None) -> str:
    parts = [f"## {table.title}", "", table_markdown(table), "", table.caption]
    if table.key != "runs":
        named = [run_text(runs[r]) if runs and r in runs else f"`{r}`" for r in table.runs]
        parts += ["", "Runs: " + "; ".join(named) + "."]
    if plot:
        parts += ["", f"![{table.title}]({plot})"]
    return "\n".join(parts) + "\n"
