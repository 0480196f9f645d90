"""Offline vLLM engine: one ``LLM`` created once, one ``LLM.chat`` call per batch.

What this adapter relies on in vLLM, read from its source: ``vllm/entrypoints/llm.py`` at
vllm-project/vllm commit 10fdb8f0 (a main-branch snapshot whose deprecation notes name v0.16 as
a coming release), and recent ``vllm/sampling_params.py`` and ``vllm/engine/arg_utils.py``
versions from the same line (their exact commits were not recorded by the source index; an
older v0.7-era ``arg_utils.py`` was compared for the names that stayed).
tests/runners/fake_vllm.py mirrors these signatures:

* ``LLM(model, *, tensor_parallel_size, dtype, seed, gpu_memory_utilization, ...,
  **kwargs)``: ``**kwargs`` go to ``EngineArgs`` (a dataclass: an unknown name is a
  TypeError).  ``LLM`` turns ``disable_log_stats`` on unless told otherwise, and the
  prefix-cache counters need it off, so we pass ``disable_log_stats=False``.
  ``LLM(data_parallel_size>1)`` raises for single-process use, so data parallelism runs
  as separate replicas (runners/vllm_replicas.py) and refuses MoE models.
* ``LLM.chat(messages, sampling_params, use_tqdm, lora_request, chat_template,
  chat_template_content_format, add_generation_prompt, continue_final_message, tools,
  chat_template_kwargs, tokenization_kwargs, mm_processor_kwargs)``, no ``**kwargs``;
  returns one ``RequestOutput`` per conversation, in order, with ``.outputs[0].text /
  .finish_reason / .token_ids``, ``.prompt_token_ids`` and ``.num_cached_tokens``.  An
  ``LLM.chat`` without ``chat_template_kwargs`` (old vLLM) is refused: upgrade vllm.
* ``SamplingParams`` is a msgspec Struct (unknown field: TypeError) with ``temperature,
  top_p, top_k (0 or -1 = off), min_p, seed, stop, max_tokens`` (default 16).
* Passing our own ``SamplingParams`` drops the model's ``generation_config.json``
  defaults, so we read them (``model_config.get_diff_sampling_param()``, else
  ``LLM.get_default_sampling_params()`` against ``SamplingParams()``) and merge them once,
  in :func:`merge_sampling`: generation_config first, then every :class:`Sampling` field
  that is set (not None).  ``max_tokens`` is always ours, capped to the room left.
* One conversation longer than ``max_model_len`` makes vLLM raise for the whole batch, so
  each prompt is measured first (``tokenizer.apply_chat_template``); an over-long one ends
  as a ``length`` result without being sent.  Should ``chat`` still raise, the batch is
  retried one request at a time so only the bad request fails (an ``error`` result).
* Thinking (Qwen3): ``enable_thinking`` goes to the template through
  ``chat_template_kwargs``.  Thinking is *on* when it is True, or None with a template that
  knows a think block (Qwen3 thinks by default).  Then stop strings are not sent to vLLM
  (they would fire inside the thinking) and are applied to the answer after ``</think>``
  (runners/thinking.py); only the answer is returned; a reply cut inside the thinking
  (``<think>`` never closed) is ``cut_in_thinking``.  For models whose template opens the
  think block itself (the reply has only ``</think>``), say ``enable_thinking=True``.  Llama 3.x templates print today's date unless ``date_string`` is
  given; we pin it (recorded in ``describe()``).
* ``seed`` is per request (``SamplingParams.seed``): distinct seeds, independent samples.
"""

from __future__ import annotations

import importlib
import inspect
import time
from typing import Any, Mapping, Sequence

from .affinity import affinity_key
from .engine import EngineError
from .thinking import split_reply, template_thinks
from .types import ChatRequest, ChatResult, Sampling
from .vllm_config import (DEFAULT_DATE_STRING, LLM_OPTIONS, MIN_VLLM, experts_in_config, generation_defaults,
                          merge_sampling, model_config_of, moe_refusal, read_hf_config, token_ids,
                          version_tuple)

def _import_vllm(module_name: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        raise ImportError(f"the vllm engine needs the '{module_name}' package (pip install vllm; "
                          f"it needs a CUDA GPU): {exc}") from exc


class VllmCore:
    """Runs inside the process that owns the GPU(s): the main one, or a DP worker."""

    def __init__(self, model: str, llm_kwargs: dict[str, Any], chat_template_kwargs: dict[str, Any],
                 enable_thinking: bool | None, strip: bool, keep_thinking: bool, use_tqdm: bool,
                 vllm_module: str = "vllm", llm_factory: Any = None) -> None:
        vllm = _import_vllm(vllm_module)
        self.vllm = vllm
        self.version = getattr(vllm, "__version__", None)
        vt = version_tuple(self.version)
        if vt is not None and vt < MIN_VLLM:
            raise EngineError(f"vllm {self.version} is too old for this adapter (needs >= "
                              f"{'.'.join(map(str, MIN_VLLM))}); upgrade vllm: pip install -U vllm")
        self.SamplingParams = vllm.SamplingParams
        try:
            self.SamplingParams(temperature=0.5, top_p=0.9, top_k=-1, min_p=0.0, seed=0, stop=["x"], max_tokens=1)
        except TypeError as exc:
            raise EngineError(f"this vLLM's SamplingParams lacks a field the adapter uses ({exc}); upgrade vllm")
        try:
            self.llm = (llm_factory or vllm.LLM)(model=model, **llm_kwargs)
        except TypeError as exc:
            raise EngineError(f"vllm.LLM refused an option ({exc}); check the engine options / llm_kwargs "
                              f"against vllm {self.version}") from exc
        self.chat_template_kwargs = dict(chat_template_kwargs)
        self.strip = strip
        self.keep_thinking = keep_thinking
        self.use_tqdm = use_tqdm
        self.tokenizer = self.llm.get_tokenizer()
        self.thinking_on = enable_thinking is True or (
            enable_thinking is None and template_thinks(getattr(self.tokenizer, "chat_template", None)))
        # a reply without any think marker counts as cut inside the thinking only when the user
        # said thinking is on (templates that open <think> themselves); a template that merely
        # mentions <think> may belong to a model that answers directly
        self.expect_thinking = enable_thinking is True
        self.model_config = model_config_of(self.llm)
        mml = llm_kwargs.get("max_model_len") or getattr(self.model_config, "max_model_len", None)
        self.max_model_len = int(mml) if mml else None
        self.defaults = generation_defaults(self.llm, self.model_config, self.SamplingParams)
        hf = getattr(self.model_config, "hf_config", None)
        self.n_experts = experts_in_config(hf.to_dict() if hasattr(hf, "to_dict") else hf)
        try:
            params = inspect.signature(self.llm.chat).parameters
            accepts = "chat_template_kwargs" in params or any(
                p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        except (TypeError, ValueError):
            accepts = True
        if self.chat_template_kwargs and not accepts:
            raise EngineError(f"this vLLM's LLM.chat() (vllm {self.version}) takes no chat_template_kwargs "
                              "(needed for enable_thinking / date_string); upgrade vllm: pip install -U vllm")

    def prompt_len(self, messages: list[dict[str, str]]) -> int | None:
        try:
            enc = self.tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True,
                                                     **self.chat_template_kwargs)
            return len(token_ids(enc))
        except Exception:
            return None  # unknown: let vLLM check it (a failure then falls back to one-by-one)

    def info(self) -> dict[str, Any]:
        return {"max_model_len": self.max_model_len, "generation_config_defaults": dict(self.defaults),
                "vllm_version": self.version, "thinking_on": self.thinking_on, "n_experts": self.n_experts}

    def _chat(self, convs: list[list[dict[str, str]]], params: list[Any]) -> list[Any]:
        kwargs: dict[str, Any] = {"sampling_params": params, "use_tqdm": self.use_tqdm}
        if self.chat_template_kwargs:
            kwargs["chat_template_kwargs"] = dict(self.chat_template_kwargs)
        outs = self.llm.chat(convs, **kwargs)
        if len(outs) != len(convs):
            raise EngineError(f"vLLM returned {len(outs)} outputs for {len(convs)} conversations")
        return list(outs)

    def _parse(self, out: Any, s: Sampling, n_prompt: int | None, latency: float) -> dict[str, Any]:
        comp = out.outputs[0]
        reason = getattr(comp, "finish_reason", None)
        out_ids = getattr(comp, "token_ids", None)
        prompt_ids = getattr(out, "prompt_token_ids", None)
        n_prompt = len(prompt_ids) if prompt_ids is not None else int(n_prompt or 0)
        finish = {"stop": "stop", "length": "length"}.get(str(reason))
        if finish is None:
            return ChatResult.failure(f"vLLM finished with reason {reason!r}", prompt_tokens=n_prompt,
                                      latency_s=latency).to_dict()
        rep = split_reply(getattr(comp, "text", "") or "", finish, stop=s.stop, strip=self.strip,
                          stop_after_fence=s.stop_after_fence,
                          expect_thinking=self.expect_thinking)
        return ChatResult(text=rep.text, finish_reason=rep.finish_reason, prompt_tokens=n_prompt,
                          completion_tokens=len(out_ids) if out_ids is not None else 0,
                          cached_tokens=int(getattr(out, "num_cached_tokens", None) or 0), latency_s=latency,
                          cut_in_thinking=rep.cut_in_thinking,
                          thinking=rep.thinking if self.keep_thinking and rep.thinking else None).to_dict()

    def generate(self, items: Sequence[tuple[list[dict[str, str]], dict[str, Any]]]) -> list[dict[str, Any]]:
        """``items``: (messages, Sampling as dict) pairs -> ChatResult dicts, in order."""
        t0 = time.perf_counter()
        results: list[dict[str, Any] | None] = [None] * len(items)
        send: list[int] = []
        params: list[Any] = []
        lens: list[int | None] = []
        samplings = [Sampling.from_dict(sdict) for _, sdict in items]
        for i, ((msgs, _), s) in enumerate(zip(items, samplings)):
            n = self.prompt_len(msgs)
            lens.append(n)
            if n is not None and self.max_model_len and n >= self.max_model_len:
                results[i] = ChatResult(text="", finish_reason="length", prompt_tokens=n).to_dict()
                continue
            room = self.max_model_len - n if (self.max_model_len and n is not None) else None
            try:
                params.append(self.SamplingParams(**merge_sampling(self.defaults, s, room=room,
                                                                   send_stop=not self.thinking_on)))
            except Exception as exc:
                results[i] = ChatResult.failure(f"invalid sampling parameters: {exc}").to_dict()
                continue
            send.append(i)
        if send:
            try:
                outs = self._chat([items[i][0] for i in send], params)
                latency = time.perf_counter() - t0
                for i, out in zip(send, outs):
                    results[i] = self._parse(out, samplings[i], lens[i], latency)
            except Exception:
                # one bad request must not sink the batch: retry one at a time
                for i, p in zip(send, params):
                    t1 = time.perf_counter()
                    try:
                        out = self._chat([items[i][0]], [p])[0]
                        results[i] = self._parse(out, samplings[i], lens[i], time.perf_counter() - t1)
                    except Exception as exc:
                        results[i] = ChatResult.failure(f"vLLM failed on this request: {type(exc).__name__}: "
                                                        f"{exc}", prompt_tokens=lens[i] or 0,
                                                        latency_s=time.perf_counter() - t1).to_dict()
        return results  # type: ignore[return-value]

    def metrics(self) -> dict[str, Any]:
        """vLLM's counters summed by name (e.g. ``vllm:prefix_cache_queries`` / ``_hits``, in tokens)."""
        getter = getattr(self.llm, "get_metrics", None)
        if not callable(getter):
            return {}
        try:
            out: dict[str, Any] = {}
            for m in getter():
                name, value = getattr(m, "name", None), getattr(m, "value", None)
                if name is not None and isinstance(value, (int, float)):
                    out[name] = out.get(name, 0) + value
            return out
        except Exception:
            return {}


class VllmEngine:
    name = "vllm"

    def __init__(
        self,
        model: str,
        *,
        tensor_parallel_size: int = 1,
        data_parallel_size: int = 1,
        max_model_len: int | None = None,
        gpu_memory_utilization: float = 0.9,
        enable_thinking: bool | None = None,
        date_string: str | None = DEFAULT_DATE_STRING,
        seed: int = 0,
        dtype: str = "auto",
        enable_prefix_caching: bool = True,
        strip_thinking: bool = True,
        keep_thinking: bool = False,
        use_tqdm: bool = False,
        llm_kwargs: Mapping[str, Any] | None = None,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        vllm_module: str = "vllm",
        llm_factory: Any = None,
        **engine_args: Any,
    ) -> None:
        if not model:
            raise ValueError("the vllm engine needs a model: 'vllm:<hf model id or path>'")
        unknown = sorted(set(engine_args) - set(LLM_OPTIONS))
        if unknown:
            raise ValueError(f"unknown vllm engine option(s) {unknown}; known: {sorted(vllm_options())} "
                             "(other vllm.LLM arguments go in llm_kwargs={...})")
        for key, v in (("tensor_parallel_size", tensor_parallel_size), ("data_parallel_size", data_parallel_size)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{key} must be an int >= 1, got {v!r}")
        if enable_thinking is not None and not isinstance(enable_thinking, bool):
            raise ValueError(f"enable_thinking must be true, false or None, got {enable_thinking!r}")
        self.model = model
        self.enable_thinking = enable_thinking
        self.strip_thinking = strip_thinking
        self.date_string = date_string
        self.tensor_parallel_size = tensor_parallel_size
        self.data_parallel_size = data_parallel_size
        kwargs: dict[str, Any] = {
            "tensor_parallel_size": tensor_parallel_size, "gpu_memory_utilization": gpu_memory_utilization,
            "seed": seed, "dtype": dtype, "enable_prefix_caching": enable_prefix_caching,
            "disable_log_stats": False,  # prefix-cache counters need stats on
        }
        if max_model_len is not None:
            kwargs["max_model_len"] = int(max_model_len)
        kwargs.update(engine_args)
        kwargs.update(dict(llm_kwargs or {}))
        if "data_parallel_size" in kwargs:
            raise ValueError("data_parallel_size is an engine option (separate replicas), not an llm_kwargs entry: "
                             "vllm.LLM(data_parallel_size>1) does not run in one process")
        self.llm_kwargs = kwargs
        ctk: dict[str, Any] = {}
        if date_string:
            ctk["date_string"] = date_string
        if enable_thinking is not None:
            ctk["enable_thinking"] = enable_thinking
        ctk.update(dict(chat_template_kwargs or {}))
        self.chat_template_kwargs = ctk
        core_args = dict(model=model, llm_kwargs=kwargs, chat_template_kwargs=ctk, enable_thinking=enable_thinking,
                         strip=strip_thinking, keep_thinking=keep_thinking, use_tqdm=use_tqdm,
                         vllm_module=vllm_module)
        self._core: VllmCore | None = None
        self._pool: Any = None
        if data_parallel_size > 1:
            n = experts_in_config(read_hf_config(model, kwargs.get("revision")))
            if n:
                raise ValueError(moe_refusal(model, n, data_parallel_size))
            from .vllm_replicas import ReplicaPool

            if llm_factory is not None:
                core_args["llm_factory"] = llm_factory  # must be picklable (module-level)
            self._pool = ReplicaPool(data_parallel_size, tensor_parallel_size, core_args)
            info = self._pool.info
            if info.get("n_experts"):  # config.json was not readable before loading
                self.close()
                raise ValueError(moe_refusal(model, info["n_experts"], data_parallel_size))
        else:
            self._core = VllmCore(llm_factory=llm_factory, **core_args)
            info = self._core.info()
        self.max_model_len = info.get("max_model_len")
        self.generation_defaults: dict[str, Any] = dict(info.get("generation_config_defaults") or {})
        self.vllm_version = info.get("vllm_version")
        self.thinking_on = bool(info.get("thinking_on"))

    def describe(self) -> dict[str, Any]:
        return {
            "engine": self.name, "model": self.model, "vllm_version": self.vllm_version,
            "tensor_parallel_size": self.tensor_parallel_size, "data_parallel_size": self.data_parallel_size,
            "max_model_len": self.max_model_len, "llm_kwargs": dict(self.llm_kwargs),
            "chat_template_kwargs": dict(self.chat_template_kwargs), "enable_thinking": self.enable_thinking,
            "thinking_on": self.thinking_on, "stops_sent_to_vllm": not self.thinking_on,
            "strip_thinking": self.strip_thinking, "generation_config_defaults": dict(self.generation_defaults),
            "merged_sampling_default": merge_sampling(self.generation_defaults, Sampling(),
                                                      send_stop=not self.thinking_on),
            "sampling_merge": "generation_config defaults, then every Sampling field that is set (not None); "
                              "max_tokens capped to max_model_len - prompt length",
        }

    def cache_identity(self) -> dict[str, Any]:
        return {"chat_template_kwargs": dict(self.chat_template_kwargs), "strip_thinking": self.strip_thinking,
                "generation_config_defaults": dict(self.generation_defaults), "max_model_len": self.max_model_len,
                "thinking_on": self.thinking_on}

    def metrics(self) -> Any:
        """One dict of vLLM counters, or a list of them (one per data-parallel replica)."""
        if self._pool is not None:
            return self._pool.metrics()
        assert self._core is not None
        return self._core.metrics()

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        if not requests:
            return []
        items = [(r.message_dicts(), r.sampling.to_dict()) for r in requests]
        if self._pool is not None:
            raw = self._pool.generate(items, [affinity_key(r) for r in requests])
        else:
            assert self._core is not None
            raw = self._core.generate(items)
        return [ChatResult.from_dict(d) for d in raw]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        self._core = None


def vllm_options() -> list[str]:
    """Every option name ``VllmEngine`` accepts (its own and the EngineArgs pass-throughs)."""
    own = [n for n, p in inspect.signature(VllmEngine.__init__).parameters.items()
           if n not in ("self", "model") and p.kind is not inspect.Parameter.VAR_KEYWORD]
    return sorted(set(own) | set(LLM_OPTIONS))
