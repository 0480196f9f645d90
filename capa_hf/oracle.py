"""The oracle bound: the FT-ES of an assistant that applies every convention the user stated in
the cell's history and asks about nothing else.

Such an assistant solves a held-out session at turn 1 exactly when every hidden item of the
session is resolvable from history (the variant's reference is then determined, and it passes its
tests by construction: `capa validate-content` checks that). `capa validate` prints the bound
over the dataset, `capa report` over a run's sessions, `make demo` over one cell.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping


def fully_resolvable(session: Any) -> bool:
    """Whether every hidden item of `session` (a Session, or a session row as a dict) is resolvable
    from the cell's history."""
    items = session["hidden_items"] if isinstance(session, Mapping) else session.hidden_items
    return all(h["resolvable_from_history"] if isinstance(h, Mapping) else h.resolvable_from_history
               for h in items)


def oracle_bound(sessions: Iterable[Any]) -> float:
    """The oracle's FT-ES over `sessions` (Sessions, session rows, or flags already computed by
    `fully_resolvable`, one per session); 0.0 for no sessions."""
    flags = [bool(s) if not hasattr(s, "hidden_items") and not isinstance(s, Mapping) else fully_resolvable(s)
             for s in sessions]
    return sum(flags) / len(flags) if flags else 0.0
