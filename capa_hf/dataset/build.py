"""`capa build`: generate the sessions and write the dataset folder, byte-identical per seed."""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from runners.engine import EngineError, engine_label

from capa_hf.content import load_content
from capa_hf.dataset.card import render_card
from capa_hf.dataset.features import LAYOUT
from capa_hf.dataset.rows import cell_row, dimension_row, mechanism_row, persona_row, session_row, task_row
from capa_hf.dataset.stats import dataset_stats
from capa_hf.errors import CapaError
from capa_hf.generation.empty_results import empty_kinds
from capa_hf.generation.pipeline import generate
from capa_hf.humaneval import load_tasks
from capa_hf.specs import llm_spec
from capa_hf.variants.catalog import VariantCatalog
from capa_hf.version import PIPELINE_VERSION

MANIFEST = "capa_manifest.json"
# held-out (session, task keypoint) pairs kept visible because the visible text refutes the
# keypoint's misreading: known only at build time, so the manifest carries it to `capa validate`
REFUSED_FACT = "heldout_task_keypoints_refused_by_visible_examples"


def arrow_table(rows: list[dict], features) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=features.arrow_schema)


def write_parquet(table: pa.Table, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    pq.write_table(table, tmp, compression="zstd", write_statistics=False)
    tmp.replace(path)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build_dataset(out: Path, seed: int = 0, version: str | None = None, engine=None, cache=None,
                  progress: bool = True, realizer=None, consistency=None) -> dict:
    """`realizer` (default: the template realizer) writes the requests; `consistency` (an
    LLMConsistency) adds Stage 3's LLM check; both are recorded in the card and `generator`."""
    version = version or PIPELINE_VERSION
    t0 = time.perf_counter()
    content = load_content()
    tasks = load_tasks()
    cells, sessions, stats, _traces = generate(seed=seed, engine=engine, cache=cache, progress=progress,
                                               content=content, realizer=realizer, consistency=consistency)
    catalog = VariantCatalog(tasks, content.variants, content.dimensions)
    rows = {
        ("default", "history"): [session_row(s) for s in sessions if s.split == "history"],
        ("default", "heldout"): [session_row(s) for s in sessions if s.split == "heldout"],
        ("tasks", "train"): [task_row(t, content.tasks[tid], content.variants.get(tid)) for tid, t in tasks.items()],
        ("variants", "train"): [r.row() for r in catalog.all_records()],
        ("dimensions", "train"): [dimension_row(d) for d in content.dimensions.values()],
        ("personas", "train"): [persona_row(p) for p in content.personas.values()],
        ("mechanisms", "train"): [mechanism_row(m) for m in content.mechanisms.values()],
        ("cells", "train"): [cell_row(c) for c in cells],
    }
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    for (config, split), split_rows in rows.items():
        features, paths = LAYOUT[config]
        path = out / paths[split]
        table = arrow_table(split_rows, features)
        write_parquet(table, path)
        files[paths[split]] = {"config": config, "split": split, "rows": len(split_rows),
                               "bytes": path.stat().st_size, "num_bytes": table.nbytes, "sha256": sha256(path)}
    facts = dataset_stats(sessions, cells, {t: dict(s.dimensions) for t, s in content.variants.items()},
                          empty_kinds())
    facts[REFUSED_FACT] = stats.refused_by_examples
    assistant = "the reference assistant" if engine is None else \
        f"`{engine_label(engine)}` (reference fallback when unresolved)"
    writer = ("template realizer (curated keypoints, conventions, persona voice kits, discipline lexicons)"
              if realizer is None or realizer.name == "template" else
              f"requests written by `{realizer.name}` from the template's visible keypoints, persona and information "
              f"controls (the template's request on a last attempt, counted below)")
    checker = f", Stage 3 consistency checked by `{consistency.name}`" if consistency is not None else ""
    generation = (f"Version {version}, built by CAPA pipeline {PIPELINE_VERSION} with `capa build --seed {seed}`: "
                  f"{writer}, scripted simulated user, {assistant}, the sandbox running each variant's regenerated "
                  f"tests as the judge{checker}.")
    stage3 = "\n".join(f"- {line.strip()}" for line in stats.lines())
    (out / "README.md").write_text(render_card(version, files, generation, stage3, facts), encoding="utf-8")
    manifest = {"name": "capa", "version": version, "pipeline_version": PIPELINE_VERSION, "seed": seed,
                "stats": facts, "files": dict(sorted(files.items()))}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return {"out": str(out), "sessions": len(sessions), "seconds": round(time.perf_counter() - t0, 2),
            "stage3": stats.lines(), "version": version, "stats": facts}


def build_cli(args) -> int:
    from runners.options import parse_engine_args

    engine = cache = realizer = consistency = None
    Path(args.out).mkdir(parents=True, exist_ok=True)    # an --out that cannot be written fails now, not after the build
    realizer_spec = llm_spec("--realizer", args.realizer) if getattr(args, "realizer", None) else None
    consistency_spec = llm_spec("--consistency", args.consistency) if getattr(args, "consistency", None) else None
    try:
        assistant_args = parse_engine_args(getattr(args, "assistant_engine_arg", None) or [])
    except ValueError as exc:
        raise CapaError(f"--assistant-engine-arg: {exc}") from None
    if assistant_args and not args.assistant:
        raise CapaError("--assistant-engine-arg needs --assistant")
    if args.assistant or realizer_spec or consistency_spec:
        from runners import make_engine
        from runners.cache import CompletionCache

        engines: dict[str, object] = {}

        def engine_for(spec: str, options: dict):
            # one engine object per spec: a realizer or checker with the assistant's spec shares its engine
            if spec not in engines:
                try:
                    engines[spec] = make_engine(spec, **options)
                except (ValueError, TypeError, ImportError, EngineError) as exc:
                    raise CapaError(f"engine {spec!r}: {exc}") from None
            return engines[spec]

        cache = CompletionCache(args.cache or str(Path(args.out).with_suffix(".cache.sqlite")))
        engine = engine_for(args.assistant, assistant_args) if args.assistant else None
        if realizer_spec:
            from capa_hf.generation.stage1_llm import LLMRealizer

            realizer = LLMRealizer(engine_for(realizer_spec, {}), realizer_spec, cache=cache, progress=not args.quiet)
        if consistency_spec:
            from capa_hf.generation.stage3_llm import LLMConsistency

            consistency = LLMConsistency(engine_for(consistency_spec, {}), consistency_spec, cache=cache,
                                         seed=args.seed, progress=not args.quiet)
    info = build_dataset(Path(args.out), seed=args.seed, version=args.version, engine=engine, cache=cache,
                         progress=not args.quiet, realizer=realizer, consistency=consistency)
    for line in info["stage3"]:
        print(line)
    for key, value in info["stats"].items():
        print(f"{key}: {value}")
    print(f"built {info['sessions']} sessions (version {info['version']}) into {info['out']} "
          f"in {info['seconds']} s", file=sys.stderr)
    return 0
