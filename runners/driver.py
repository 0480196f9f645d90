"""Lock-step driver: runs many multi-turn episodes, batching their model calls.

An *episode* is plain sequential code written as a generator::

    def episode():
        reply = yield Call("assistant", [{"role": "user", "content": "hi"}], Sampling())
        reply2 = yield Call("judge", [...])
        return {"answer": reply.text, "verdict": reply2.text}

Each ``yield`` hands a :class:`Call` to the driver and receives the :class:`ChatResult`
back; the generator's ``return`` value is the episode's result.  The driver advances all
live episodes, collects their pending calls, looks them up in the completion cache, and
sends ONE batch per engine per step (roles that map to the same engine object share the
batch), ordered so that conversations with a common prefix are adjacent.  Episode code
never sees batching.  An episode that raises fails alone; the others go on.

If an engine itself raises (interrupt, endpoint down), the driver closes the live
episodes and re-raises: every batch already returned is in the cache and every finished
episode has gone through ``on_done``, so the caller can rerun and resume.  With
``abort_on_failed_batch=True`` a batch whose every result is an error counts as such an
engine failure (see :func:`run_episodes`).
"""

from __future__ import annotations

import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Generator, Iterable, Mapping, Sequence

from .cache import CompletionCache, engine_key
from .engine import EngineError, engine_label
from .types import ChatRequest, ChatResult, Sampling
from .usage import BatchRecord, RunStats, Usage


@dataclass
class Call:
    """A model call an episode asks for: which role's engine, the conversation, sampling.

    ``affinity``: an optional key (e.g. a benchmark cell id) that engines with several
    replicas use to keep related conversations on one replica (runners/affinity.py).  It is
    not part of the completion-cache key.
    """

    role: str
    messages: Sequence[Mapping[str, str]]
    sampling: Sampling = field(default_factory=Sampling)
    affinity: str | None = None


@dataclass
class EpisodeOutcome:
    id: str
    result: Any | None = None
    error: str | None = None   # traceback text if the episode raised
    calls: int = 0
    usage: Usage = field(default_factory=Usage)

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "result": self.result, "error": self.error, "calls": self.calls,
                "usage": self.usage.to_dict()}


Episode = Generator[Call, ChatResult, Any]
ABORT_MIN_BATCH = 2  # abort_on_failed_batch ignores batches smaller than this
EpisodeFactory = Callable[[], Episode]


class _Live:
    __slots__ = ("id", "gen", "request", "role", "outcome")

    def __init__(self, eid: str, gen: Episode) -> None:
        self.id = eid
        self.gen = gen
        self.request: ChatRequest | None = None
        self.role: str = ""
        self.outcome = EpisodeOutcome(id=eid)


def _normalize_episodes(episodes: Mapping[str, EpisodeFactory] | Iterable[tuple[str, EpisodeFactory]]
                        ) -> list[tuple[str, EpisodeFactory]]:
    items = list(episodes.items()) if isinstance(episodes, Mapping) else list(episodes)
    seen: set[str] = set()
    out = []
    for item in items:
        try:
            eid, factory = item
        except (TypeError, ValueError):
            raise ValueError(f"episodes must be (id, factory) pairs, got {item!r}") from None
        eid = str(eid)
        if eid in seen:
            raise ValueError(f"duplicate episode id {eid!r}")
        seen.add(eid)
        out.append((eid, factory))
    return out


class _Progress:
    def __init__(self, total: int, progress: bool | str) -> None:
        self.bar = None
        if not progress:
            return
        try:
            from tqdm.auto import tqdm
        except ImportError:  # progress is cosmetic
            return
        desc = progress if isinstance(progress, str) else "episodes"
        self.bar = tqdm(total=total, desc=desc, file=sys.stderr, dynamic_ncols=True, mininterval=0.5,
                        leave=True)

    def done(self, n: int = 1) -> None:
        if self.bar is not None:
            self.bar.update(n)

    def postfix(self, fields: dict[str, Any]) -> None:
        """Shown at once: a step can take minutes on a slow engine, long before an episode ends."""
        if self.bar is not None:
            self.bar.set_postfix(fields, refresh=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run_episodes(
    episodes: Mapping[str, EpisodeFactory] | Iterable[tuple[str, EpisodeFactory]],
    engines: Mapping[str, Any],
    cache: CompletionCache | None = None,
    progress: bool | str = True,
    on_done: Callable[[str, EpisodeOutcome], None] | None = None,
    max_batch: int | None = None,
    stats: RunStats | None = None,
    abort_on_failed_batch: bool = False,
) -> dict[str, EpisodeOutcome]:
    """Run every episode to completion; return ``{episode id: EpisodeOutcome}`` in input order.

    ``engines`` maps role -> engine.  ``max_batch`` caps the requests per ``generate`` call
    (a step's batch for one engine is then sent in several chunks).  Pass a
    :class:`RunStats` as ``stats`` to get calls, batches, tokens, cache hits and timings.

    ``abort_on_failed_batch``: when every result of one ``generate`` call of at least
    :data:`ABORT_MIN_BATCH` requests is an error (the endpoint rejects everything, a bad
    option, an outage), raise :class:`EngineError` naming the engine, the batch size and the
    first error instead of handing the errors to the episodes.  A smaller batch (a
    run's last straggler) is never taken as a whole-engine failure.  As with any engine
    exception, finished episodes have already gone through ``on_done`` and every earlier
    batch is in the cache, so a rerun resumes.
    """
    if max_batch is not None and max_batch < 1:
        raise ValueError(f"max_batch must be >= 1, got {max_batch}")
    if not engines:
        raise ValueError("run_episodes needs at least one engine (role -> engine)")
    items = _normalize_episodes(episodes)
    stats = stats if stats is not None else RunStats()
    stats.episodes += len(items)
    t_start = time.perf_counter()
    outcomes: dict[str, EpisodeOutcome] = {}
    live: dict[str, _Live] = {}
    bar = _Progress(len(items), progress)
    known_roles = sorted(engines)
    # the bar's live figures: turns of the main role answered (every call without an "assistant"
    # role), and the tokens per second the engines decoded (cache hits decode nothing)
    main_role = "assistant" if "assistant" in engines else None
    turns = decoded = 0

    def finish(ep: _Live, result: Any = None, error: str | None = None) -> None:
        live.pop(ep.id, None)
        ep.outcome.result = result
        ep.outcome.error = error
        ep.request = None
        outcomes[ep.id] = ep.outcome
        stats.finished += 1
        if error is not None:
            stats.failed += 1
        bar.done()
        if on_done is not None:
            on_done(ep.id, ep.outcome)

    def advance(ep: _Live, value: ChatResult | None, first: bool) -> None:
        """Send ``value`` into the episode and record its next call (or its end)."""
        pending_exc: BaseException | None = None
        while True:
            try:
                if pending_exc is not None:
                    exc, pending_exc = pending_exc, None
                    call = ep.gen.throw(exc)
                elif first:
                    first = False
                    call = next(ep.gen)
                else:
                    call = ep.gen.send(value)
            except StopIteration as stop:
                finish(ep, result=stop.value)
                return
            except Exception:
                finish(ep, error=traceback.format_exc())
                return
            # validate the call; a bad call is thrown back into the episode at its yield
            if not isinstance(call, Call):
                pending_exc = TypeError(f"episode {ep.id!r} yielded {type(call).__name__}; "
                                        "episodes must yield runners.Call objects")
                continue
            if call.role not in engines:
                pending_exc = KeyError(f"episode {ep.id!r} called role {call.role!r}, which has no engine; "
                                       f"roles with engines: {known_roles}")
                continue
            try:
                sampling = call.sampling if call.sampling is not None else Sampling()
                request = ChatRequest.from_messages(call.messages, sampling, affinity=call.affinity)
            except (ValueError, TypeError) as exc:
                pending_exc = exc
                continue
            ep.role = call.role
            ep.request = request
            ep.outcome.calls += 1
            stats.calls += 1
            return

    try:
        for eid, factory in items:
            try:
                gen = factory() if callable(factory) else factory
                if not hasattr(gen, "send"):
                    raise TypeError(f"episode factory for {eid!r} returned {type(gen).__name__}, "
                                    "not a generator")
            except Exception:
                ep = _Live(eid, iter(()))  # type: ignore[arg-type]
                live[eid] = ep
                finish(ep, error=traceback.format_exc())
                continue
            ep = _Live(eid, gen)
            live[eid] = ep
            advance(ep, None, first=True)

        while live:
            stats.steps += 1
            step = stats.steps
            # group pending calls by engine object (roles sharing an engine share a batch)
            groups: dict[int, tuple[Any, list[_Live]]] = {}
            for ep in live.values():
                engine = engines[ep.role]
                groups.setdefault(id(engine), (engine, []))[1].append(ep)
            for engine, eps in groups.values():
                turns += sum(1 for ep in eps if main_role is None or ep.role == main_role)
                decoded += _run_batch(engine, eps, cache, stats, step, max_batch, advance, abort_on_failed_batch)
            bar.postfix(progress_fields(turns, decoded, stats, len(live)))
    except BaseException:
        for ep in list(live.values()):
            try:
                ep.gen.close()
            except Exception:
                pass
        raise
    finally:
        stats.wall_s += time.perf_counter() - t_start
        bar.close()

    return {eid: outcomes[eid] for eid, _ in items}


def progress_fields(turns: int, decoded: int, stats: RunStats, live: int) -> dict[str, Any]:
    """The bar's postfix after a step: turns answered, decoding speed, live episodes, failures."""
    rate = decoded / stats.engine_s if stats.engine_s > 0 else 0.0
    return {"turns": turns, "tok/s": f"{rate:.1f}", "live": live, "failed": stats.failed, "hits": stats.cache_hits}


def _run_batch(engine: Any, eps: list[_Live], cache: CompletionCache | None, stats: RunStats, step: int,
               max_batch: int | None, advance: Callable[[_Live, ChatResult | None, bool], None],
               abort_on_failed_batch: bool = False) -> int:
    """Answer one step's calls for one engine (cache first); the completion tokens it decoded."""
    label = engine_label(engine)
    name = getattr(engine, "name", type(engine).__name__)
    model = getattr(engine, "model", "")
    requests = [ep.request for ep in eps]
    assert all(r is not None for r in requests)
    results: list[ChatResult | None] = [None] * len(eps)
    keys: list[str] = []
    if cache is not None:
        t0 = time.perf_counter()
        keys = [engine_key(engine, r) for r in requests]  # type: ignore[arg-type]
        hits = cache.get_many(keys)
        stats.cache_s += time.perf_counter() - t0
        for i, k in enumerate(keys):
            if k in hits:
                results[i] = hits[k]
    todo = [i for i, r in enumerate(results) if r is None]
    # conversations sharing a prefix go consecutively (prefix/KV caches reuse them)
    todo.sort(key=lambda i: requests[i].messages)  # type: ignore[union-attr]
    n_hits = len(eps) - len(todo)
    chunk = max_batch or max(1, len(todo))
    engine_s = 0.0
    for start in range(0, len(todo), chunk):
        idx = todo[start:start + chunk]
        batch = [requests[i] for i in idx]
        t0 = time.perf_counter()
        out = engine.generate(batch)
        dt = time.perf_counter() - t0
        engine_s += dt
        stats.batches += 1
        stats.sent += len(batch)
        if not isinstance(out, list) or len(out) != len(batch):
            got = len(out) if hasattr(out, "__len__") else type(out).__name__
            raise EngineError(f"engine {label} returned {got} results for a batch of {len(batch)}")
        for i, res in zip(idx, out):
            if not isinstance(res, ChatResult):
                res = ChatResult.failure(f"engine {label} returned {type(res).__name__}, not ChatResult")
            results[i] = res
        if abort_on_failed_batch and len(idx) >= ABORT_MIN_BATCH and not any(results[i].ok for i in idx):
            first = results[idx[0]].error or "finish_reason=error"  # type: ignore[union-attr]
            raise EngineError(f"every request of a batch of {len(idx)} to engine {label} failed; "
                              f"first error: {first}")
        if cache is not None:
            t1 = time.perf_counter()
            cache.put_many((keys[i], name, model, requests[i], results[i]) for i in idx)  # type: ignore[misc]
            stats.cache_s += time.perf_counter() - t1
    stats.engine_s += engine_s
    stats.cache_hits += n_hits
    stats.batch_log.append(BatchRecord(step=step, engine=label, roles=tuple(sorted({ep.role for ep in eps})),
                                       size=len(eps), sent=len(todo), cache_hits=n_hits, engine_s=engine_s))
    per = stats.per_engine.setdefault(label, Usage())
    decoded = sum(int(results[i].completion_tokens or 0) for i in todo)  # type: ignore[union-attr]
    for ep, res in zip(eps, results):
        assert res is not None
        ep.outcome.usage.add(res)
        per.add(res)
        stats.usage.add(res)
        advance(ep, res, False)
    return decoded
