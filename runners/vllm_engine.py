"""Offline vLLM engine: one ``LLM`` created once, one ``LLM.chat`` call per batch.

What this adapter relies on in vLLM (read from its source; checked defensively):

* ``LLM(model=..., tensor_parallel_size=..., max_model_len=..., gpu_memory_utilization=...,
  seed=..., enable_prefix_caching=..., disable_log_stats=...)``.  ``LLM`` turns
  ``disable_log_stats`` on unless told otherwise, and prefix-cache counters need it off, so
  we pass ``disable_log_stats=False``.  Prefix caching is on by default; we say so
  explicitly.
* ``LLM.chat(messages: list[list[dict]], sampling_params: list[SamplingParams], use_tqdm=...,
  chat_template_kwargs=...)`` returns one ``RequestOutput`` per conversation, in order,
  with ``.outputs[0].text / .finish_reason / .token_ids``, ``.prompt_token_ids`` and
  ``.num_cached_tokens`` (prefix-cache hits, V1 engine).
* Passing our own ``SamplingParams`` drops the model's ``generation_config.json`` defaults
  (``LLM.get_default_sampling_params`` is only used when none are given), so we read them
  (``model_config.get_diff_sampling_param()``, falling back to comparing
  ``LLM.get_default_sampling_params()`` with ``SamplingParams()``) and merge explicitly:
  generation_config defaults first, then our :class:`Sampling` fields (temperature, top_p,
  max_tokens, seed, stop), which always win.  ``max_tokens`` is always set (vLLM's own
  default is 16).  The merged values are exposed by :meth:`VllmEngine.describe`.
* One conversation longer than ``max_model_len`` makes vLLM raise for the whole batch, so
  each prompt is measured first with the engine's tokenizer (``apply_chat_template``) and
  an over-long one ends as a ``length`` result without being sent; ``max_tokens`` is capped
  to the room left.  Should ``chat`` still raise, the batch is retried one request at a
  time so that only the bad request fails.
* Thinking models (Qwen3): ``enable_thinking`` goes to the template through
  ``chat_template_kwargs`` and only the answer after ``</think>`` is kept.  Llama 3.x
  templates print today's date unless ``date_string`` is given; we pin it (recorded in
  ``describe()``).

``data_parallel_size > 1`` runs that many independent replicas in worker processes
(spawned, each with ``CUDA_VISIBLE_DEVICES`` set to its own ``tensor_parallel_size`` GPUs);
a batch is split across them with conversations kept on the same replica from turn to turn
(sticky by their first messages) so each replica's prefix cache stays useful.  This is
replica-style data parallelism suited to dense models; it does not use vLLM's internal DP
coordination (needed only for MoE expert parallelism).
"""

from __future__ import annotations

import atexit
import hashlib
import importlib
import inspect
import math
import multiprocessing as mp
import os
import time
import traceback
from typing import Any, Mapping, Sequence

from .engine import EngineError
from .types import ChatRequest, ChatResult, Sampling, strip_thinking

DEFAULT_DATE_STRING = "26 Jul 2024"  # the fallback date written in Llama 3.1's own template

# SamplingParams fields that generation_config.json may set (vLLM's get_diff_sampling_param)
_GEN_CONFIG_KEYS = ("repetition_penalty", "temperature", "top_k", "top_p", "min_p", "max_tokens",
                    "presence_penalty", "frequency_penalty")


def _import_vllm(module_name: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        raise ImportError(f"the vllm engine needs the '{module_name}' package (pip install vllm; "
                          f"it needs a CUDA GPU): {exc}") from exc


def _model_config(llm: Any) -> Any:
    eng = getattr(llm, "llm_engine", None)
    for getter in (lambda: eng.get_model_config(), lambda: eng.model_config, lambda: llm.model_config):
        try:
            mc = getter()
        except Exception:
            continue
        if mc is not None:
            return mc
    return None


def _generation_defaults(llm: Any, model_config: Any, sampling_params_cls: Any) -> dict[str, Any]:
    """The model's generation_config sampling defaults as a plain dict."""
    fn = getattr(model_config, "get_diff_sampling_param", None)
    if callable(fn):
        try:
            d = fn() or {}
            return {k: d[k] for k in d if k in _GEN_CONFIG_KEYS}
        except Exception:
            pass
    getter = getattr(llm, "get_default_sampling_params", None)
    if callable(getter):
        try:
            sp, base = getter(), sampling_params_cls()
            return {k: getattr(sp, k) for k in _GEN_CONFIG_KEYS
                    if hasattr(sp, k) and getattr(sp, k) != getattr(base, k, None)}
        except Exception:
            pass
    return {}


def _token_ids(encoded: Any) -> list[int]:
    """apply_chat_template(tokenize=True) returns a list, or a BatchEncoding/dict in newer transformers."""
    if isinstance(encoded, Mapping) or hasattr(encoded, "input_ids"):
        encoded = encoded["input_ids"] if isinstance(encoded, Mapping) else encoded.input_ids
    if hasattr(encoded, "tolist"):
        encoded = encoded.tolist()
    encoded = list(encoded)
    if encoded and isinstance(encoded[0], (list, tuple)):
        encoded = list(encoded[0])
    return encoded


class _VllmCore:
    """Runs inside the process that owns the GPU(s): the main one, or a DP worker."""

    def __init__(self, model: str, llm_kwargs: dict[str, Any], chat_template_kwargs: dict[str, Any],
                 enable_thinking: bool | None, strip: bool, use_tqdm: bool, vllm_module: str = "vllm",
                 llm_factory: Any = None) -> None:
        vllm = _import_vllm(vllm_module)
        self.vllm = vllm
        self.SamplingParams = vllm.SamplingParams
        factory = llm_factory or vllm.LLM
        self.llm = factory(model=model, **llm_kwargs)
        self.chat_template_kwargs = dict(chat_template_kwargs)
        self.enable_thinking = enable_thinking
        self.strip = strip
        self.use_tqdm = use_tqdm
        self.tokenizer = self.llm.get_tokenizer()
        self.model_config = _model_config(self.llm)
        mml = llm_kwargs.get("max_model_len") or getattr(self.model_config, "max_model_len", None)
        self.max_model_len = int(mml) if mml else None
        self.defaults = _generation_defaults(self.llm, self.model_config, self.SamplingParams)
        try:
            params = inspect.signature(self.llm.chat).parameters
            self._chat_accepts_kwargs = "chat_template_kwargs" in params or any(
                p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        except (TypeError, ValueError):
            self._chat_accepts_kwargs = True
        if self.chat_template_kwargs and not self._chat_accepts_kwargs:
            raise EngineError("this vLLM's LLM.chat() takes no chat_template_kwargs "
                              "(needed for enable_thinking / date_string); upgrade vllm")

    # -- settings ------------------------------------------------------------------------
    def merged_sampling(self, s: Sampling, prompt_len: int | None = None) -> dict[str, Any]:
        merged = dict(self.defaults)
        max_tokens = s.max_tokens
        if self.max_model_len and prompt_len is not None:
            max_tokens = max(1, min(max_tokens, self.max_model_len - prompt_len))
        merged.update(temperature=float(s.temperature), top_p=float(s.top_p), max_tokens=int(max_tokens),
                      seed=s.seed)
        if s.stop:
            merged["stop"] = list(s.stop)
        return merged

    def prompt_len(self, messages: list[dict[str, str]]) -> int | None:
        try:
            enc = self.tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True,
                                                     **self.chat_template_kwargs)
            return len(_token_ids(enc))
        except Exception:
            return None  # unknown: let vLLM check it (a failure then falls back to one-by-one)

    def info(self) -> dict[str, Any]:
        return {"max_model_len": self.max_model_len, "generation_config_defaults": dict(self.defaults),
                "vllm_version": getattr(self.vllm, "__version__", None)}

    # -- generation ----------------------------------------------------------------------
    def _chat(self, convs: list[list[dict[str, str]]], params: list[Any]) -> list[Any]:
        kwargs: dict[str, Any] = {"sampling_params": params, "use_tqdm": self.use_tqdm}
        if self.chat_template_kwargs:
            kwargs["chat_template_kwargs"] = dict(self.chat_template_kwargs)
        outs = self.llm.chat(convs, **kwargs)
        if len(outs) != len(convs):
            raise EngineError(f"vLLM returned {len(outs)} outputs for {len(convs)} conversations")
        return list(outs)

    def _parse(self, out: Any, n_prompt: int | None, latency: float) -> dict[str, Any]:
        comp = out.outputs[0]
        text = getattr(comp, "text", "") or ""
        reason = getattr(comp, "finish_reason", None)
        token_ids = getattr(comp, "token_ids", None)
        prompt_ids = getattr(out, "prompt_token_ids", None)
        cached = getattr(out, "num_cached_tokens", None) or 0
        finish = {"stop": "stop", "length": "length"}.get(str(reason), None)
        if self.strip:
            text, _ = strip_thinking(text, expect_thinking=bool(self.enable_thinking))
        res = ChatResult(text=text, finish_reason=finish or "error",
                         prompt_tokens=len(prompt_ids) if prompt_ids is not None else int(n_prompt or 0),
                         completion_tokens=len(token_ids) if token_ids is not None else 0,
                         cached_tokens=int(cached), latency_s=latency)
        if finish is None:
            res.error = f"vLLM finished with reason {reason!r}"
        return res.to_dict()

    def generate(self, items: Sequence[tuple[list[dict[str, str]], dict[str, Any]]]) -> list[dict[str, Any]]:
        """``items``: (messages, Sampling as dict) pairs -> ChatResult dicts, in order."""
        t0 = time.perf_counter()
        results: list[dict[str, Any] | None] = [None] * len(items)
        send: list[int] = []
        params: list[Any] = []
        lens: list[int | None] = []
        for i, (msgs, sdict) in enumerate(items):
            s = Sampling.from_dict(sdict)
            n = self.prompt_len(msgs)
            lens.append(n)
            if n is not None and self.max_model_len and n >= self.max_model_len:
                results[i] = ChatResult(text="", finish_reason="length", prompt_tokens=n,
                                        latency_s=0.0).to_dict()
                continue
            try:
                params.append(self.SamplingParams(**self.merged_sampling(s, n)))
            except Exception as exc:
                results[i] = ChatResult.failure(f"invalid sampling parameters: {exc}").to_dict()
                continue
            send.append(i)
        if send:
            convs = [items[i][0] for i in send]
            try:
                outs = self._chat(convs, params)
                latency = time.perf_counter() - t0
                for i, out in zip(send, outs):
                    results[i] = self._parse(out, lens[i], latency)
            except Exception:
                # one bad request must not sink the batch: retry one at a time
                for i, p in zip(send, params):
                    t1 = time.perf_counter()
                    try:
                        out = self._chat([items[i][0]], [p])[0]
                        results[i] = self._parse(out, lens[i], time.perf_counter() - t1)
                    except Exception as exc:
                        results[i] = ChatResult.failure(f"vLLM failed on this request: {type(exc).__name__}: "
                                                        f"{exc}", prompt_tokens=lens[i] or 0,
                                                        latency_s=time.perf_counter() - t1).to_dict()
        return results  # type: ignore[return-value]

    def metrics(self) -> dict[str, Any]:
        getter = getattr(self.llm, "get_metrics", None)
        if not callable(getter):
            return {}
        try:
            out: dict[str, Any] = {}
            for m in getter():
                name = getattr(m, "name", None)
                value = getattr(m, "value", None)
                if name is not None and isinstance(value, (int, float)):
                    out[name] = out.get(name, 0) + value
            return out
        except Exception:
            return {}


# -- data-parallel replicas ----------------------------------------------------------------

def _worker_main(conn: Any, devices: str | None, core_args: dict[str, Any]) -> None:
    if devices is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = devices
    try:
        core = _VllmCore(**core_args)
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


def _visible_devices(n_needed: int) -> list[str]:
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None and env.strip():
        devs = [d.strip() for d in env.split(",") if d.strip()]
    else:
        devs = [str(i) for i in range(n_needed)]
    if len(devs) < n_needed:
        raise EngineError(f"data_parallel_size x tensor_parallel_size needs {n_needed} GPUs, "
                          f"CUDA_VISIBLE_DEVICES lists {len(devs)}: {devs}")
    return devs


class _ReplicaPool:
    def __init__(self, dp: int, tp: int, core_args: dict[str, Any]) -> None:
        devs = _visible_devices(dp * tp)
        ctx = mp.get_context("spawn")
        self.workers: list[tuple[Any, Any]] = []
        self.info: dict[str, Any] = {}
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
                self.info = payload
        except BaseException:
            self.close()
            raise

    def _recv(self, r: int) -> tuple[str, Any]:
        proc, conn = self.workers[r]
        while not conn.poll(1.0):
            if not proc.is_alive():
                raise EngineError(f"vLLM data-parallel replica {r} died (exit code {proc.exitcode})")
        return conn.recv()

    def assign(self, items: Sequence[tuple[list[dict[str, str]], dict[str, Any]]]) -> list[int]:
        """Sticky replica per conversation (hash of its first messages), with a load cap."""
        n = len(self.workers)
        cap = max(1, math.ceil(len(items) / n * 1.25))
        load = [0] * n
        out = []
        for msgs, _ in items:
            head = "\x1e".join(f"{m['role']}\x1f{m['content']}" for m in msgs[:2])
            r = int.from_bytes(hashlib.blake2b(head.encode(), digest_size=4).digest(), "big") % n
            if load[r] >= cap:
                r = min(range(n), key=lambda k: load[k])
            load[r] += 1
            out.append(r)
        return out

    def generate(self, items: Sequence[tuple[list[dict[str, str]], dict[str, Any]]]) -> list[dict[str, Any]]:
        where = self.assign(items)
        shards: list[list[int]] = [[] for _ in self.workers]
        for i, r in enumerate(where):
            shards[r].append(i)
        for r, idx in enumerate(shards):
            if idx:
                self.workers[r][1].send(("generate", [items[i] for i in idx]))
        results: list[dict[str, Any] | None] = [None] * len(items)
        for r, idx in enumerate(shards):
            if not idx:
                continue
            status, payload = self._recv(r)
            if status != "ok":
                raise EngineError(f"vLLM data-parallel replica {r} failed:\n{payload}")
            for i, res in zip(idx, payload):
                results[i] = res
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


# -- the engine ------------------------------------------------------------------------------

class VllmEngine:
    name = "vllm"

    def __init__(
        self,
        model: str,
        *,
        tensor_parallel_size: int = 1,
        data_parallel_size: int = 1,
        max_model_len: int | None = None,
        enable_thinking: bool | None = None,
        gpu_memory_utilization: float = 0.9,
        date_string: str | None = DEFAULT_DATE_STRING,
        llama_date_string: str | None = None,
        seed: int = 0,
        dtype: str = "auto",
        enable_prefix_caching: bool = True,
        strip_thinking: bool = True,
        use_tqdm: bool = False,
        llm_kwargs: Mapping[str, Any] | None = None,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        vllm_module: str = "vllm",
        llm_factory: Any = None,
    ) -> None:
        if not model:
            raise ValueError("the vllm engine needs a model: 'vllm:<hf model id or path>'")
        if tensor_parallel_size < 1 or data_parallel_size < 1:
            raise ValueError("tensor_parallel_size and data_parallel_size must be >= 1")
        self.model = model
        self.enable_thinking = enable_thinking
        self.strip_thinking = strip_thinking
        self.date_string = llama_date_string or date_string
        self.tensor_parallel_size = int(tensor_parallel_size)
        self.data_parallel_size = int(data_parallel_size)
        kwargs: dict[str, Any] = {
            "tensor_parallel_size": self.tensor_parallel_size,
            "gpu_memory_utilization": gpu_memory_utilization,
            "seed": seed,
            "dtype": dtype,
            "enable_prefix_caching": enable_prefix_caching,
            "disable_log_stats": False,  # prefix-cache counters need stats on
        }
        if max_model_len is not None:
            kwargs["max_model_len"] = int(max_model_len)
        kwargs.update(dict(llm_kwargs or {}))
        self.llm_kwargs = kwargs
        ctk: dict[str, Any] = {}
        if self.date_string:
            ctk["date_string"] = self.date_string
        if enable_thinking is not None:
            ctk["enable_thinking"] = bool(enable_thinking)
        ctk.update(dict(chat_template_kwargs or {}))
        self.chat_template_kwargs = ctk
        core_args = dict(model=model, llm_kwargs=kwargs, chat_template_kwargs=ctk, enable_thinking=enable_thinking,
                         strip=strip_thinking, use_tqdm=use_tqdm, vllm_module=vllm_module)
        self._core: _VllmCore | None = None
        self._pool: _ReplicaPool | None = None
        if self.data_parallel_size > 1:
            if llm_factory is not None:
                core_args["llm_factory"] = llm_factory  # must be picklable (module-level)
            self._pool = _ReplicaPool(self.data_parallel_size, self.tensor_parallel_size, core_args)
            info = self._pool.info
        else:
            self._core = _VllmCore(llm_factory=llm_factory, **core_args)
            info = self._core.info()
        self.max_model_len = info.get("max_model_len")
        self.generation_defaults: dict[str, Any] = dict(info.get("generation_config_defaults") or {})
        self.vllm_version = info.get("vllm_version")

    # -- description ---------------------------------------------------------------------
    def merged_sampling(self, sampling: Sampling) -> dict[str, Any]:
        """The SamplingParams values used for ``sampling`` (before capping max_tokens to the room left)."""
        merged = dict(self.generation_defaults)
        merged.update(temperature=float(sampling.temperature), top_p=float(sampling.top_p),
                      max_tokens=int(sampling.max_tokens), seed=sampling.seed)
        if sampling.stop:
            merged["stop"] = list(sampling.stop)
        return merged

    def describe(self) -> dict[str, Any]:
        return {
            "engine": self.name, "model": self.model, "vllm_version": self.vllm_version,
            "tensor_parallel_size": self.tensor_parallel_size, "data_parallel_size": self.data_parallel_size,
            "max_model_len": self.max_model_len, "llm_kwargs": dict(self.llm_kwargs),
            "chat_template_kwargs": dict(self.chat_template_kwargs), "enable_thinking": self.enable_thinking,
            "strip_thinking": self.strip_thinking, "generation_config_defaults": dict(self.generation_defaults),
            "merged_sampling_default": self.merged_sampling(Sampling()),
            "sampling_merge": "generation_config defaults, then Sampling(temperature, top_p, max_tokens, seed, "
                              "stop); max_tokens capped to max_model_len - prompt length",
        }

    def cache_identity(self) -> dict[str, Any]:
        return {"chat_template_kwargs": dict(self.chat_template_kwargs), "strip_thinking": self.strip_thinking,
                "generation_config_defaults": dict(self.generation_defaults), "max_model_len": self.max_model_len}

    def metrics(self) -> Any:
        if self._pool is not None:
            return self._pool.metrics()
        assert self._core is not None
        return self._core.metrics()

    # -- generation ----------------------------------------------------------------------
    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        if not requests:
            return []
        items = [(r.message_dicts(), r.sampling.to_dict()) for r in requests]
        if self._pool is not None:
            raw = self._pool.generate(items)
        else:
            assert self._core is not None
            raw = self._core.generate(items)
        return [ChatResult.from_dict(d) for d in raw]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        self._core = None
