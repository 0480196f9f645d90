import pytest
from runners_testlib import chat_episode, echo

from runners import Call, ChatResult, RunStats, Sampling, ScriptedEngine, run_episodes
from runners.types import ChatRequest


def test_batches_episodes_of_different_lengths():
    eng = ScriptedEngine(fn=echo)
    lengths = {"a": 1, "b": 2, "c": 3, "d": 5, "e": 3}
    stats = RunStats()
    out = run_episodes({k: chat_episode(k, n) for k, n in lengths.items()}, {"assistant": eng},
                       progress=False, stats=stats)
    # one batch per step; sizes shrink as episodes end
    assert eng.batch_sizes == [5, 4, 3, 1, 1]
    assert stats.batch_sizes() == [5, 4, 3, 1, 1]
    assert stats.steps == 5 and stats.batches == 5 and stats.calls == sum(lengths.values())
    assert list(out) == list(lengths)  # input order
    for k, n in lengths.items():
        o = out[k]
        assert o.ok and o.calls == n and o.usage.calls == n
        assert o.result["replies"] == [f"echo: {k} turn {t}" for t in range(n)]
    assert stats.finished == 5 and stats.failed == 0
    assert stats.usage.completion_tokens == sum(o.usage.completion_tokens for o in out.values()) > 0


def test_batch_is_ordered_by_shared_prefix():
    eng = ScriptedEngine(fn=echo)

    def ep(system, q):
        def f():
            yield Call("assistant", [{"role": "system", "content": system}, {"role": "user", "content": q}])
        return f

    eps = {"1": ep("B", "x"), "2": ep("A", "y"), "3": ep("B", "a"), "4": ep("A", "b")}
    run_episodes(eps, {"assistant": eng}, progress=False)
    systems = [r.messages[0][1] for r in eng.seen]
    assert systems == ["A", "A", "B", "B"]


def test_roles_sharing_an_engine_share_a_batch_and_other_engines_get_their_own():
    shared = ScriptedEngine(fn=echo)
    judge = ScriptedEngine(fn=lambda m: "verdict", model="judge")

    def ep(i):
        def f():
            a = yield Call("coder", [{"role": "user", "content": f"code {i}"}])
            b = yield Call("critic", [{"role": "user", "content": f"critique {a.text}"}])
            c = yield Call("judge", [{"role": "user", "content": b.text}])
            return c.text
        return f

    stats = RunStats()
    out = run_episodes({str(i): ep(i) for i in range(3)}, {"coder": shared, "critic": shared, "judge": judge},
                       progress=False, stats=stats)
    assert shared.batch_sizes == [3, 3] and judge.batch_sizes == [3]
    assert all(o.result == "verdict" for o in out.values())
    assert set(stats.per_engine) == {"scripted:scripted", "scripted:judge"}


def test_an_episode_that_raises_fails_alone():
    eng = ScriptedEngine(fn=echo)

    def bad():
        yield Call("assistant", [{"role": "user", "content": "first"}])
        raise RuntimeError("episode bug")

    def bad_at_start():
        raise ValueError("cannot even start")
        yield  # pragma: no cover

    eps = {"ok1": chat_episode("ok1", 3), "bad": bad, "start": bad_at_start, "ok2": chat_episode("ok2", 2)}
    done = []
    out = run_episodes(eps, {"assistant": eng}, progress=False, on_done=lambda i, o: done.append(i))
    assert out["ok1"].ok and out["ok2"].ok
    assert out["ok1"].result["replies"][-1] == "echo: ok1 turn 2"
    assert "RuntimeError: episode bug" in out["bad"].error and out["bad"].calls == 1
    assert "ValueError: cannot even start" in out["start"].error
    assert sorted(done) == sorted(eps)
    assert eng.batch_sizes == [3, 2, 1]


def test_bad_calls_are_thrown_into_the_episode():
    eng = ScriptedEngine(fn=echo)

    def unknown_role():
        yield Call("nobody", [{"role": "user", "content": "x"}])

    def bad_messages():
        yield Call("assistant", [{"role": "user"}])

    def not_a_call():
        yield "hello"

    def recovers():
        try:
            yield Call("nobody", [{"role": "user", "content": "x"}])
        except KeyError:
            r = yield Call("assistant", [{"role": "user", "content": "fallback"}])
            return r.text

    out = run_episodes({"r": unknown_role, "m": bad_messages, "c": not_a_call, "ok": recovers},
                       {"assistant": eng}, progress=False)
    assert "nobody" in out["r"].error and "assistant" in out["r"].error
    assert "content" in out["m"].error
    assert "runners.Call" in out["c"].error
    assert out["ok"].result == "echo: fallback"


def test_engine_error_results_reach_the_episode():
    eng = ScriptedEngine(table={"known": "yes"})

    def ep(q):
        def f():
            r = yield Call("assistant", [{"role": "user", "content": q}])
            return (r.finish_reason, r.text, r.error)
        return f

    out = run_episodes({"a": ep("known"), "b": ep("unknown")}, {"assistant": eng}, progress=False)
    assert out["a"].result == ("stop", "yes", None)
    assert out["b"].result[0] == "error" and "unknown" in out["b"].result[2]
    assert out["b"].usage.errors == 1


def test_max_batch_splits_a_step():
    eng = ScriptedEngine(fn=echo)
    out = run_episodes({str(i): chat_episode(str(i), 2) for i in range(5)}, {"assistant": eng},
                       progress=False, max_batch=2)
    assert eng.batch_sizes == [2, 2, 1, 2, 2, 1]
    assert all(o.ok for o in out.values())


def test_engine_exception_propagates_and_closes_live_episodes():
    closed = []

    class Boom(ScriptedEngine):
        def generate(self, requests):
            if self.generate_calls >= 1:
                raise KeyboardInterrupt
            return super().generate(requests)

    def ep():
        try:
            yield Call("assistant", [{"role": "user", "content": "1"}])
            yield Call("assistant", [{"role": "user", "content": "2"}])
        finally:
            closed.append(1)

    with pytest.raises(KeyboardInterrupt):
        run_episodes({"a": ep, "b": ep}, {"assistant": Boom(fn=echo)}, progress=False)
    assert closed == [1, 1]


def test_wrong_result_count_is_an_engine_error():
    class Short(ScriptedEngine):
        def generate(self, requests):
            return super().generate(requests)[:-1]

    from runners import EngineError
    with pytest.raises(EngineError, match="returned 1 results for a batch of 2"):
        run_episodes({"a": chat_episode("a", 1), "b": chat_episode("b", 1)}, {"assistant": Short(fn=echo)},
                     progress=False)


def test_input_validation():
    eng = ScriptedEngine(fn=echo)
    with pytest.raises(ValueError, match="duplicate episode id 'x'"):
        run_episodes([("x", chat_episode("x", 1)), ("x", chat_episode("x", 1))], {"assistant": eng},
                     progress=False)
    with pytest.raises(ValueError, match="at least one engine"):
        run_episodes({}, {}, progress=False)
    assert run_episodes({}, {"assistant": eng}, progress=False) == {}


def test_progress_bar_runs(capsys):
    eng = ScriptedEngine(fn=echo)
    out = run_episodes({str(i): chat_episode(str(i), 2) for i in range(3)}, {"assistant": eng},
                       progress="testing")
    assert all(o.ok for o in out.values())
    assert "testing" in capsys.readouterr().err


def test_scripted_engine_honours_max_tokens_stop_and_counts_tokens():
    eng = ScriptedEngine(fn=lambda m: "one two three four five")
    r1, r2, r3 = eng.generate([
        ChatRequest.from_messages([{"role": "user", "content": "a b"}], Sampling(max_tokens=3)),
        ChatRequest.from_messages([{"role": "user", "content": "a"}], Sampling(stop=(" three",))),
        ChatRequest.from_messages([{"role": "user", "content": "a"}]),
    ])
    assert (r1.text, r1.finish_reason, r1.completion_tokens, r1.prompt_tokens) == ("one two three", "length", 3, 3)
    assert (r2.text, r2.finish_reason) == ("one two", "stop")
    assert r3.completion_tokens == 5
    with pytest.raises(ValueError, match="fn=... or table="):
        ScriptedEngine()


def test_scripted_table_full_conversation_key():
    from runners.types import messages_json
    conv = [{"role": "user", "content": "q"}]
    eng = ScriptedEngine(table={messages_json([("user", "q")]): "full", "q": "last"})
    assert eng.generate([ChatRequest.from_messages(conv)])[0].text == "full"
    eng2 = ScriptedEngine(table={"q": "last"})
    assert eng2.generate([ChatRequest.from_messages(conv)])[0].text == "last"


def test_fn_returning_chat_result_and_raising():
    def fn(m):
        if m[-1]["content"] == "raise":
            raise RuntimeError("nope")
        return ChatResult("custom", "length", 1, 1, 0, 0.0)

    eng = ScriptedEngine(fn=fn)
    a, b = eng.generate([ChatRequest.from_messages([{"role": "user", "content": "x"}]),
                         ChatRequest.from_messages([{"role": "user", "content": "raise"}])])
    assert (a.text, a.finish_reason) == ("custom", "length")
    assert b.finish_reason == "error" and "nope" in b.error


def _failing(fail):
    """A scripted engine whose replies fail (error results) while ``fail(request)`` is true."""
    def reply(request):
        if fail(request):
            return ChatResult.failure("HTTP 400: rejected parameter (http://x/v1)")
        return "ok " + request.last_user_message
    return ScriptedEngine(request_fn=reply)


def test_abort_on_failed_batch_raises_and_keeps_what_finished(cache_path):
    from runners import CompletionCache, EngineError

    done = []
    state = {"down": False}
    eng = _failing(lambda r: state["down"])

    def ep(eid, turns):
        def f():
            out = []
            for t in range(turns):
                r = yield Call("assistant", [{"role": "user", "content": f"{eid} {t}"}])
                out.append(r.text)
                if eid == "short" and t == 0:
                    state["down"] = True  # the endpoint goes down after the first step
            return out
        return f

    eps = {"short": ep("short", 1), "a": ep("a", 3), "b": ep("b", 3)}
    with CompletionCache(cache_path) as cache:
        with pytest.raises(EngineError) as err:
            run_episodes(eps, {"assistant": eng}, cache=cache, progress=False,
                         on_done=lambda i, o: done.append(i), abort_on_failed_batch=True)
        msg = str(err.value)
        assert "batch of 2" in msg and "scripted:scripted" in msg and "HTTP 400: rejected parameter" in msg
        assert done == ["short"] and len(cache) == 3  # step 1 is cached, the errors are not
        # the endpoint is back: a rerun serves step 1 from the cache and completes the rest
        state["down"] = False
        stats = RunStats()
        out = run_episodes(eps, {"assistant": _failing(lambda r: False)}, cache=cache, progress=False,
                           stats=stats, abort_on_failed_batch=True)
    assert stats.cache_hits == 3 and out["a"].result == ["ok a 0", "ok a 1", "ok a 2"]


def test_abort_guard_is_off_by_default_and_ignores_single_failures():
    eng = _failing(lambda r: "bad" in r.last_user_message)
    eps = {"x": chat_episode("bad", 2), "y": chat_episode("fine", 2)}
    out = run_episodes(eps, {"assistant": eng}, progress=False, abort_on_failed_batch=True)
    assert out["x"].usage.errors == 2 and out["y"].usage.errors == 0  # a mixed batch never aborts
    solo = run_episodes({"x": chat_episode("bad", 1)}, {"assistant": eng}, progress=False,
                        abort_on_failed_batch=True)
    assert solo["x"].usage.errors == 1  # a batch of one is a request's own failure
    all_bad = {f"bad{i}": chat_episode(f"bad{i}", 1) for i in range(3)}
    off = run_episodes(all_bad, {"assistant": eng}, progress=False)
    assert all(o.usage.errors == 1 for o in off.values())


def test_call_affinity_reaches_the_request_but_not_the_cache_key():
    from runners.cache import engine_key

    seen = []
    eng = ScriptedEngine(request_fn=lambda r: seen.append(r.affinity) or "ok")

    def ep():
        yield Call("assistant", [{"role": "user", "content": "q"}], affinity="C03")
        yield Call("assistant", [{"role": "user", "content": "q"}])

    run_episodes({"e": ep}, {"assistant": eng}, progress=False)
    assert seen == ["C03", None]
    a, b = eng.seen
    assert engine_key(eng, a) == engine_key(eng, b)


def test_cache_keys_on_the_seed_so_trials_are_independent(cache_path):
    from runners import CompletionCache, derive_seed

    eng = ScriptedEngine(request_fn=lambda r: f"sample {r.sampling.seed}")

    def trial(k):
        def f():
            r = yield Call("assistant", [{"role": "user", "content": "same prompt"}],
                           Sampling(temperature=0.7, seed=derive_seed(0, "S1", k, 0)))
            return r.text
        return f

    with CompletionCache(cache_path) as cache:
        out = run_episodes({f"t{k}": trial(k) for k in range(4)}, {"assistant": eng}, cache=cache, progress=False)
        assert len({o.result for o in out.values()}) == 4 and len(cache) == 4


def test_the_progress_bar_shows_turns_and_speed_inside_a_long_episode(capsys):
    """The bar counts finished episodes; its postfix moves on every turn, before one ends."""
    eng = ScriptedEngine(fn=echo, per_token_s=0.001)
    seen = []
    run_episodes({"long": chat_episode("long", 3)}, {"assistant": eng},
                 progress="eval", on_done=lambda i, o: seen.append(capsys.readouterr().err))
    before_the_end = seen[0]          # what the bar showed before the episode's third turn ended it
    shown = [part for part in before_the_end.replace("\r", "\n").splitlines() if "turns=" in part]
    assert [s.split("turns=")[1].split(",")[0] for s in shown] == ["1", "2"]
    assert all(" 0/1 " in s for s in shown) and all("tok/s=" in s for s in shown)
    speed = float(shown[0].split("tok/s=")[1].split(",")[0])
    assert speed > 0


def test_progress_fields():
    from runners.driver import progress_fields

    stats = RunStats(engine_s=2.0, failed=1, cache_hits=4)
    assert progress_fields(7, 50, stats, live=3) == {"turns": 7, "tok/s": "25.0", "live": 3, "failed": 1, "hits": 4}
    assert progress_fields(0, 0, RunStats(), live=1)["tok/s"] == "0.0"
