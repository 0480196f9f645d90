import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from runners_testlib import chat_episode, echo

from runners import ChatRequest, ChatResult, CompletionCache, RunStats, Sampling, ScriptedEngine, run_episodes
from runners.cache import engine_key, request_key

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


def _episodes(n=6, turns=(1, 2, 3, 4)):
    return {f"e{i}": chat_episode(f"e{i}", turns[i % len(turns)]) for i in range(n)}


def test_key_depends_on_engine_model_messages_sampling():
    r = ChatRequest.from_messages([{"role": "user", "content": "x"}])
    base = request_key("e", "m", r)
    assert base == request_key("e", "m", ChatRequest.from_messages([{"role": "user", "content": "x"}]))
    assert base != request_key("e2", "m", r)
    assert base != request_key("e", "m2", r)
    assert base != request_key("e", "m", ChatRequest.from_messages([{"role": "user", "content": "y"}]))
    assert base != request_key("e", "m", ChatRequest(r.messages, Sampling(seed=1)))
    assert base != request_key("e", "m", r, {"enable_thinking": True})


def test_second_run_is_served_from_cache(cache_path):
    eng = ScriptedEngine(fn=echo)
    with CompletionCache(cache_path) as cache:
        first = run_episodes(_episodes(), {"assistant": eng}, cache=cache, progress=False)
    calls = eng.requests_served
    assert calls == sum(o.calls for o in first.values())

    eng2 = ScriptedEngine(fn=echo)
    stats = RunStats()
    with CompletionCache(cache_path) as cache:
        second = run_episodes(_episodes(), {"assistant": eng2}, cache=cache, progress=False, stats=stats)
    assert eng2.generate_calls == 0 and eng2.requests_served == 0
    assert stats.cache_hits == calls and stats.sent == 0
    for k in first:
        assert second[k].result == first[k].result
        assert second[k].usage.cache_hits == second[k].calls
        assert second[k].usage.completion_tokens == first[k].usage.completion_tokens


def test_error_results_are_not_cached(cache_path):
    eng = ScriptedEngine(table={"good": "fine"})
    reqs = [ChatRequest.from_messages([{"role": "user", "content": q}]) for q in ("good", "bad")]
    with CompletionCache(cache_path) as cache:
        results = eng.generate(reqs)
        assert results[1].finish_reason == "error"
        written = cache.put_many((engine_key(eng, r), eng.name, eng.model, r, res) for r, res in zip(reqs, results))
        assert written == 1 and len(cache) == 1
        assert engine_key(eng, reqs[0]) in cache and engine_key(eng, reqs[1]) not in cache
        hit = cache.get(engine_key(eng, reqs[0]))
        assert hit.cached and hit.text == "fine"


def test_cache_engine_settings_change_key(cache_path):
    class Thinking(ScriptedEngine):
        def __init__(self, on, **kw):
            super().__init__(**kw)
            self.on = on

        def cache_identity(self):
            return {"enable_thinking": self.on}

    r = ChatRequest.from_messages([{"role": "user", "content": "x"}])
    assert engine_key(Thinking(True, fn=echo), r) != engine_key(Thinking(False, fn=echo), r)


class FailingAfter(ScriptedEngine):
    """Raises (like a Ctrl-C) on its (k+1)-th generate call, before doing any work."""

    def __init__(self, k, exc=KeyboardInterrupt, **kw):
        super().__init__(**kw)
        self.k = k
        self.exc = exc

    def generate(self, requests):
        if self.generate_calls >= self.k:
            raise self.exc()
        return super().generate(requests)


@pytest.mark.parametrize("exc", [KeyboardInterrupt, RuntimeError])
def test_interrupted_run_resumes_without_duplicates(cache_path, exc):
    total = sum(o.calls for o in run_episodes(_episodes(), {"assistant": ScriptedEngine(fn=echo)},
                                              progress=False).values())
    eng1 = FailingAfter(2, exc, fn=echo)
    done1 = {}
    with CompletionCache(cache_path) as cache:
        with pytest.raises(exc):
            run_episodes(_episodes(), {"assistant": eng1}, cache=cache, progress=False,
                         on_done=lambda i, o: done1.setdefault(i, o))
    assert eng1.generate_calls == 2 and 0 < eng1.requests_served < total
    assert set(done1) == {"e0", "e1", "e4", "e5"}  # episodes of 1-2 turns finished before it

    eng2 = ScriptedEngine(fn=echo)
    with CompletionCache(cache_path) as cache:
        # the caller skips what on_done already recorded; the rest replays from the cache
        rest = {k: v for k, v in _episodes().items() if k not in done1}
        out = run_episodes(rest, {"assistant": eng2}, cache=cache, progress=False)
    assert all(o.ok for o in out.values())
    skipped_calls = sum(o.calls for o in done1.values())
    assert eng1.requests_served + eng2.requests_served == total
    assert sum(o.calls for o in out.values()) + skipped_calls == total


CHILD = textwrap.dedent("""
    import json, os, signal, sys
    sys.path[:0] = [{repo!r}, {here!r}]
    from runners import CompletionCache, ScriptedEngine, run_episodes
    from runners_testlib import chat_episode, echo

    log_path, cache_path, kill_after = sys.argv[1], sys.argv[2], int(sys.argv[3])

    class Logged(ScriptedEngine):
        def generate(self, requests):
            if kill_after >= 0 and self.generate_calls >= kill_after:
                os.kill(os.getpid(), signal.SIGKILL)   # die mid-run, no cleanup
            out = super().generate(requests)
            with open(log_path, "a") as fh:
                for r in requests:
                    fh.write(json.dumps(r.messages) + "\\n")
            return out

    eps = {{f"e{{i}}": chat_episode(f"e{{i}}", 1 + i % 4) for i in range(8)}}
    with CompletionCache(cache_path) as cache:
        out = run_episodes(eps, {{"assistant": Logged(fn=echo)}}, cache=cache, progress=False)
    print(json.dumps({{k: o.result for k, o in out.items()}}))
""")


def test_killed_subprocess_resumes_without_duplicates(tmp_path, cache_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(repo=str(REPO), here=str(HERE)))
    log = tmp_path / "calls.log"
    env = {**os.environ, "PYTHONPATH": ""}
    killed = subprocess.run([sys.executable, str(script), str(log), str(cache_path), "2"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    first = log.read_text().splitlines()
    resumed = subprocess.run([sys.executable, str(script), str(log), str(cache_path), "-1"], env=env,
                             capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    calls = log.read_text().splitlines()
    total = sum(1 + i % 4 for i in range(8))
    assert len(calls) == total and len(set(calls)) == total  # nothing lost, nothing sent twice
    assert 0 < len(first) < total
    results = json.loads(resumed.stdout)
    assert results["e3"]["replies"] == [f"echo: e3 turn {t}" for t in range(4)]


def test_concurrent_reader_sees_committed_batches(cache_path):
    eng = ScriptedEngine(fn=echo)
    reader = CompletionCache(cache_path)
    seen = []

    def on_done(eid, outcome):
        seen.append(len(reader))

    with CompletionCache(cache_path) as cache:
        run_episodes(_episodes(4, (1, 3)), {"assistant": eng}, cache=cache, progress=False, on_done=on_done)
    assert len(reader) == eng.requests_served
    assert seen[0] > 0  # batches were committed as they returned
    reader.close()


def test_cached_result_roundtrip_fields(cache_path):
    r = ChatRequest.from_messages([{"role": "user", "content": "x"}])
    res = ChatResult("t", "length", 3, 4, 2, 0.25)
    with CompletionCache(cache_path) as cache:
        assert cache.put("k", "e", "m", r, res)
        got = cache.get("k")
    assert (got.text, got.finish_reason, got.prompt_tokens, got.completion_tokens, got.cached_tokens) == \
        ("t", "length", 3, 4, 2)
    assert got.cached is True and res.cached is False
