"""Facts about a built dataset, from its session rows. Pure; used by the build (card, manifest)
and by `capa validate` (which reads the rows back from parquet).

The **oracle FT-ES** (`capa_hf.oracle.oracle_bound` over the held-out rows) is the FT-ES of an assistant that applies every convention the user stated
in the cell's history and asks about nothing else: it solves a held-out session at turn 1 exactly
when every hidden item is resolvable from history (the variant's reference is then determined,
and it passes its tests by construction: `capa validate-content` checks that). It is not an upper
bound: some of those sessions also pass with HumanEval's defaults and no history at all. The
sessions that **need history** are the fully resolvable ones whose variant has a value other
than HumanEval's: they fail under HumanEval's defaults and pass with the user's conventions.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Iterable, Mapping

from capa_hf.defaults import HISTORY_SIZE
from capa_hf.oracle import fully_resolvable, oracle_bound


def _dims_of_variant(variant_id: str) -> dict[str, str]:
    key = variant_id.split("@", 1)[1] if "@" in variant_id else "humaneval"
    if key == "humaneval":
        return {}
    return dict(part.split("=", 1) for part in key.split("+"))


def needs_history(row: Mapping, humaneval_values: Mapping[str, Mapping]) -> bool:
    """Fully resolvable from history, and a hidden convention's value is not HumanEval's: the
    session fails under HumanEval's defaults and passes with the conventions the history showed."""
    values = _dims_of_variant(row["variant_id"])
    he = humaneval_values.get(row["task_id"], {})
    return fully_resolvable(row) and any(
        h["kind"] == "convention" and values.get(h["dimension"], he.get(h["dimension"])) != he.get(h["dimension"])
        for h in row["hidden_items"])


def trace_turns(row: Mapping) -> int:
    return sum(1 for t in row["turns"] if t["role"] == "assistant")


def failed_attempts(row: Mapping) -> int:
    """Code submissions in the trace that were not the last (each one failed: the trace goes on)."""
    return max(sum(1 for t in row["turns"] if t["role"] == "assistant" and "```" in t["content"]) - 1, 0)


def failed_first(row: Mapping) -> bool:
    """The trace's first assistant turn submitted code that did not pass (a guess, then repair)."""
    turns = [t["content"] for t in row["turns"] if t["role"] == "assistant"]
    return len(turns) > 1 and "```" in turns[0]


def neutral_by_kind(held: list[Mapping], empty_kinds: Mapping[str, str]) -> dict[str, int]:
    """Held-out hidden empty_input=neutral items, by the return kind of the task's empty result."""
    c: Counter = Counter()
    for r in held:
        if _dims_of_variant(r["variant_id"]).get("empty_input") == "neutral":
            c.update(empty_kinds.get(r["task_id"], "unknown") for h in r["hidden_items"]
                     if h["kind"] == "convention" and h["dimension"] == "empty_input")
    return dict(sorted(c.items()))


def dataset_stats(sessions: Iterable, cells: Iterable = (), humaneval_values: Mapping[str, Mapping] | None = None,
                  empty_kinds: Mapping[str, str] | None = None) -> dict:
    """`sessions`: Session records or session rows (dicts); `empty_kinds`: task id -> the return
    kind of its natural empty result (capa_hf.generation.empty_results)."""
    rows = [s if isinstance(s, Mapping) else s.model_dump(mode="json") for s in sessions]
    held = [r for r in rows if r["split"] == "heldout"]
    hist = [r for r in rows if r["split"] == "history"]
    items = [h for r in held for h in r["hidden_items"]]
    kinds = Counter(h["kind"] for h in items)
    resolvable_items = sum(1 for h in items if h["resolvable_from_history"])
    full = sum(1 for r in held if fully_resolvable(r))
    roles = Counter(r["role"] for r in held)
    def non_humaneval(r) -> bool:
        return humaneval_values is not None and any(
            humaneval_values.get(r["task_id"], {}).get(d) != v for d, v in _dims_of_variant(r["variant_id"]).items())

    non_he = sum(1 for r in held if non_humaneval(r))
    hist_turns = Counter(trace_turns(r) for r in hist)
    out = {
        "heldout_sessions": len(held),
        "heldout_by_role": dict(sorted(roles.items())),
        "heldout_items_by_kind": dict(sorted(kinds.items())),
        "heldout_items_resolvable_share": round(resolvable_items / max(len(items), 1), 4),
        "heldout_fully_resolvable": full,
        "oracle_ft_es": round(oracle_bound(held), 4),
        "heldout_with_task_items": sum(1 for r in held if any(h["kind"] == "task" for h in r["hidden_items"])),
        "history_turn_histogram": {str(k): v for k, v in sorted(hist_turns.items())},
        "history_turn1_share": round(hist_turns.get(1, 0) / max(len(hist), 1), 4),
        "history_failed_first_share": round(sum(1 for r in hist if failed_first(r)) / max(len(hist), 1), 4),
        "history_two_failed_attempts": sum(1 for r in hist if failed_attempts(r) >= 2),
    }
    if humaneval_values is not None:
        out["heldout_needing_non_humaneval_value"] = non_he
        out["heldout_needing_history"] = sum(1 for r in held if needs_history(r, humaneval_values))
    if empty_kinds is not None:
        out["heldout_neutral_items_by_return_kind"] = neutral_by_kind(held, empty_kinds)
    return out


def opener_shares(rows: Iterable[Mapping], words: int = 4) -> Counter:
    """How often each `words`-word opening starts an assistant turn of the history traces."""
    c: Counter = Counter()
    for r in rows:
        for t in r["turns"]:
            if t["role"] == "assistant":
                c[" ".join(re.findall(r"\S+", t["content"].lower())[:words])] += 1
    return c


def boilerplate_share(requests: list[str], min_requests: int = 5) -> float:
    """Share of request sentences that recur (normalized) in at least `min_requests` requests."""
    from capa_hf.generation.stage3_checks import norm, sentences

    per = [[norm(s) for s in sentences(r) if norm(s)] for r in requests]
    seen_in: Counter = Counter()
    for ss in per:
        for s in set(ss):
            seen_in[s] += 1
    total = sum(len(ss) for ss in per)
    common = sum(1 for ss in per for s in ss if seen_in[s] >= min_requests)
    return round(common / max(total, 1), 4)


def history_positions_ok(rows: Iterable[Mapping]) -> list[str]:
    """revealed_in must name only earlier history sessions of the same cell."""
    problems = []
    by_id = {r["session_id"]: r for r in rows}
    for r in by_id.values():
        for h in r["hidden_items"]:
            for sid in h["revealed_in"]:
                src = by_id.get(sid)
                if src is None or src["cell_id"] != r["cell_id"] or src["position"] > HISTORY_SIZE \
                        or src["position"] >= r["position"]:
                    problems.append(f"{r['session_id']}:{h['id']} revealed_in {sid}")
    return problems
