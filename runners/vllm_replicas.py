"""Data-parallel replicas for the vLLM engine: one worker process per replica.

``VllmEngine(data_parallel_size=N)`` starts N spawned workers, each with
``CUDA_VISIBLE_DEVICES`` set to its own ``tensor_parallel_size`` GPUs and its own
``vllm.LLM``.  A batch is split across them by :class:`runners.affinity.StickyAssigner`
(the request's ``affinity`` key, else its first messages), so a conversation, or a
benchmark cell, stays on one replica from turn to turn and that replica's prefix cache
stays useful.  This is replica-style data parallelism for dense models; vLLM's own
data-parallel mode (needed for MoE expert parallelism) is not used, and ``VllmEngine``
refuses MoE models with ``data_parallel_size > 1``.
"""

from __future__ import annotations

import atexit
import multiprocessing as mp
import os
import traceback
from typing import Any, Sequence

from .affinity import StickyAssigner
from .engine import EngineError
from .vllm_core import VllmCore

Item = tuple[list[dict[str, str]], dict[str, Any]]  # (messages, Sampling.to_dict())


def _worker_main(conn: Any, devices: str | None, core_args: dict[str, Any]) -> None:
    if devices is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = devices
    try:
        core = VllmCore(**core_args)
        conn.send(("ready", core.info()))
    except BaseException:
        conn.send(("error", traceback.format_exc()))
        return
    while True:
        try:
            cmd, payload = conn.recv()
        except EOFError:
            return
        if cmd == "close":
            return
        try:
            if cmd == "generate":
                conn.send(("ok", core.generate(payload)))
            elif cmd == "metrics":
                conn.send(("ok", core.metrics()))
            else:
                conn.send(("error", f"unknown command {cmd!r}"))
        except BaseException:
            conn.send(("error", traceback.format_exc()))


def visible_devices(n_needed: int) -> list[str]:
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None and env.strip():
        devs = [d.strip() for d in env.split(",") if d.strip()]
    else:
        devs = [str(i) for i in range(n_needed)]
    if len(devs) < n_needed:
        raise EngineError(f"data_parallel_size x tensor_parallel_size needs {n_needed} GPUs, "
                          f"CUDA_VISIBLE_DEVICES lists {len(devs)}: {devs}")
    return devs


class ReplicaPool:
    def __init__(self, dp: int, tp: int, core_args: dict[str, Any]) -> None:
        devs = visible_devices(dp * tp)
        ctx = mp.get_context("spawn")
        self.workers: list[tuple[Any, Any]] = []
        self.infos: list[dict[str, Any]] = []
        self.assigner = StickyAssigner(dp)
        try:
            for r in range(dp):
                parent, child = ctx.Pipe()
                devices = ",".join(devs[r * tp:(r + 1) * tp])
                # not daemonic: vLLM starts its own processes (engine core, TP workers)
                proc = ctx.Process(target=_worker_main, args=(child, devices, core_args), daemon=False,
                                   name=f"vllm-dp{r}")
                proc.start()
                child.close()
                self.workers.append((proc, parent))
            atexit.register(self.close)
            for r in range(len(self.workers)):
                status, payload = self._recv(r)
                if status != "ready":
                    raise EngineError(f"vLLM data-parallel replica {r} failed to start:\n{payload}")
                self.infos.append(payload)
        except BaseException:
            self.close()
            raise

    @property
    def info(self) -> dict[str, Any]:
        return self.infos[0] if self.infos else {}

    def _recv(self, r: int) -> tuple[str, Any]:
        proc, conn = self.workers[r]
        while not conn.poll(1.0):
            if not proc.is_alive():
                raise EngineError(f"vLLM data-parallel replica {r} died (exit code {proc.exitcode})")
        return conn.recv()

    def generate(self, items: Sequence[Item], keys: Sequence[str]) -> list[dict[str, Any]]:
        """``keys``: one affinity key per item (see runners.affinity)."""
        shards: list[list[int]] = [[] for _ in self.workers]
        for i, key in enumerate(keys):
            shards[self.assigner.replica(key)].append(i)
        for r, idx in enumerate(shards):
            if idx:
                self.workers[r][1].send(("generate", [items[i] for i in idx]))
        results: list[dict[str, Any] | None] = [None] * len(items)
        failed: list[str] = []
        for r, idx in enumerate(shards):  # read every replica's answer before raising
            if not idx:
                continue
            status, payload = self._recv(r)
            if status != "ok":
                failed.append(f"vLLM data-parallel replica {r} failed:\n{payload}")
                continue
            for i, res in zip(idx, payload):
                results[i] = res
        if failed:
            raise EngineError("\n".join(failed))
        return results  # type: ignore[return-value]

    def metrics(self) -> list[dict[str, Any]]:
        out = []
        for r, (_, conn) in enumerate(self.workers):
            conn.send(("metrics", None))
            status, payload = self._recv(r)
            out.append(payload if status == "ok" else {})
        return out

    def close(self) -> None:
        for _, conn in self.workers:
            try:
                conn.send(("close", None))
            except Exception:
                pass
        for proc, _ in self.workers:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)
        self.workers = []
