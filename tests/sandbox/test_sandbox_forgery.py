"""Statuses a submission cannot forge, and the trusted side's bounds (round 3 of the red team):
a sandbox_error only from our own setup, an Abort that the test swallows still decides,
BaseExceptions stay BaseExceptions, a silent and bounded compiler, hash floods of floats and
set elements refused and recorded as refused, a fresh random stream per job."""
from __future__ import annotations

import os

import pytest

from sandbox import SandboxConfig, SandboxPool
from sandbox_testlib import CTYPES

ID_TEST = "def check(candidate):\n    assert candidate(1) == 1\n"
# a test that catches everything around its call: whatever ends the job must still decide it
SWALLOW_TEST = ("def check(candidate):\n    try:\n        candidate(1)\n    except:\n        pass\n"
                "    assert True\n")
CATCH_EXCEPTION_TEST = ("def check(candidate):\n    try:\n        candidate(1)\n    except Exception:\n"
                        "        pass\n")


def _fn(body: str, pre: str = "") -> str:
    return pre + "def f(x):\n" + "".join(f"    {line}\n" for line in body.splitlines())


@pytest.mark.parametrize("where", ["call", "load"])
def test_an_exception_named_like_our_setup_error_is_the_submissions_error(pool, where):
    cls = "class SandboxSetupError(Exception):\n    pass\n"
    code = cls + ("raise SandboxSetupError('fake')\ndef f(x):\n    return x\n" if where == "load"
                  else _fn("raise SandboxSetupError('fake')"))
    v = pool.check(code, ID_TEST, "f")
    assert v.status == "error" and v.failure.type == "SandboxSetupError", v


def test_a_program_raising_our_setup_errors_name_is_its_own_failure(pool):
    v = pool.run("class SandboxSetupError(Exception):\n    pass\nraise SandboxSetupError('fake')\n")
    assert v.status == "error" and v.failure.type == "SandboxSetupError", v


def test_a_forged_setup_failure_frame_is_the_submissions_doing(pool):
    # written straight onto the reply pipe at import time, in the harness's own format
    forged = ('import os, json\nbody = json.dumps({"ok": False, "exc": {"type": "SandboxSetupError", '
              '"message": "forged"}}).encode()\nos.write(4, len(body).to_bytes(4, "big") + body)\n'
              'def f(x):\n    return x\n')
    assert pool.check(forged, ID_TEST, "f").status != "sandbox_error"


@pytest.mark.parametrize("body, status", [
    ("import time\ntime.sleep(30)", "timeout"),
    ("import os\nos._exit(3)", "error"),
    ("raise SystemExit(0)", "error"),
])
def test_an_abort_the_test_swallows_still_decides(pool, body, status):
    v = pool.check(_fn(body + "\nreturn x"), SWALLOW_TEST, "f", timeout_s=1.0)
    assert v.status == status, v


def test_a_base_exception_subclass_is_not_caught_as_an_exception(pool):
    code = _fn("raise Stop('not an Exception')", pre="class Stop(BaseException):\n    pass\n")
    v = pool.check(code, CATCH_EXCEPTION_TEST, "f")
    assert v.status == "error" and v.failure.type == "Stop", v
    # a real Exception subclass is the test's to catch
    code = _fn("raise Oops('an Exception')", pre="class Oops(ValueError):\n    pass\n")
    assert pool.check(code, CATCH_EXCEPTION_TEST, "f").status == "passed"


def test_sync_and_syncfs_are_denied(pool):
    import pyseccomp as sc
    nrs = [sc.resolve_syscall(sc.Arch.NATIVE, n) for n in ("sync", "syncfs")]
    code = CTYPES + _fn(f"out = []\nfor n in {nrs}:\n    r = libc.syscall(n, 0)\n"
                        "    out.append((r, ct.get_errno()))\nreturn out")
    v = pool.check(code, "def check(candidate):\n    candidate(1)\n", "f", record_calls=True)
    assert v.decoded_calls()[0]["value"] == [(-1, 1), (-1, 1)], v   # EPERM


def test_the_compile_helper_runs_under_the_seccomp_filter_with_its_stderr_on_dev_null(pool):
    long_source = "x = 1\n" * 1000 + "def f(x):\n    return x\n"   # past the in-worker size: the helper
    assert pool.check(long_source, ID_TEST, "f").status == "passed"
    for info in pool.worker_info():
        pid = info["compile_helper_pid"]
        with open(f"/proc/{pid}/status") as fh:
            status = dict(line.split(":", 1) for line in fh.read().splitlines() if ":" in line)
        assert status["Seccomp"].strip() == "2"
        assert os.readlink(f"/proc/{pid}/fd/2") == "/dev/null"


@pytest.mark.parametrize("size", ["short", "long"])
def test_compiling_is_silent(capfd, size):
    # 3000 comparisons with `is` to a literal: 3000 SyntaxWarnings, none on the evaluator's stderr
    lines = "".join(f"s{i} = x is {i}\n" for i in range(3000 if size == "long" else 100))
    code = "x = 0\n" + lines + "def f(x):\n    return x\n"
    assert (len(code) > 4096) == (size == "long")
    with SandboxPool(workers=1, config=SandboxConfig()) as p:
        assert p.check(code, ID_TEST, "f").status == "passed"
    assert "Warning" not in capfd.readouterr().err


def test_the_compile_cache_is_bounded_by_bytes():
    from sandbox import compile_helper as ch

    helper = ch.CompileHelper()
    try:
        # each source is ~6 KiB and compiles to ~0.9 MiB of constants ('a' * 4000 + '...' is folded)
        for i in range(40):
            src = "".join(f"s{j} = 'a' * 4000 + '{i}_{j}'\n" for j in range(220))
            assert ch.compile_here(src)[0] is not None
            helper.compile(src, 10.0, 256)
        total = sum(len(k) + len(v.bytecode or b"") for k, v in helper._cache.items())
        assert total <= ch.CACHE_BYTES and helper._cache_bytes == total
        assert len(helper._cache) < 40
    finally:
        helper.stop()


def _float_flood() -> str:
    # 2.0 ** k and 2.0 ** (k + 61) hash alike (hash is taken modulo 2 ** 61 - 1): 34 distinct floats
    return "return [2.0 ** k for k in range(-1070, 1020) if k % 61 == 5]"


@pytest.mark.parametrize("wrap", ["{}", "set({})", "dict.fromkeys({}, 0)"])
def test_floats_that_share_a_hash_are_refused(pool, wrap):
    body = f"vals = [2.0 ** k for k in range(-1070, 1020) if k % 61 == 5]\nreturn {wrap.format('vals')}"
    v = pool.check(_fn(body), "def check(candidate):\n    assert candidate(0) is not None\n", "f")
    assert v.status == "failed" and v.failure.type == "HashFlood", v


def test_a_refused_reply_is_recorded_as_refused(pool):
    # 40,000 big ints that share a hash: refused, and not kept as a value to decode later
    body = "p = (1 << 61) - 1\nreturn [p * k + 7 for k in range(1, 40001)]"
    v = pool.check(_fn(body), "def check(candidate):\n    assert candidate(0) is not None\n", "f",
                   record_calls=True)
    assert v.status == "failed" and v.failure.type == "HashFlood", v
    assert "value" not in v.calls[0] and v.calls[0]["refused"]["type"] == "HashFlood"
    assert v.decoded_calls()[0]["refused"]["type"] == "HashFlood"


def test_decoded_calls_refuse_a_hash_flood_in_a_recorded_value():
    from sandbox import Verdict, plaindata

    p = (1 << 61) - 1
    flood = {"s": [{"x": format(p * k + 7, "x")} for k in range(1, 100)]}
    v = Verdict(status="passed", calls=[{"args": [0], "kwargs": {"d": []}, "value": flood}])
    with pytest.raises(plaindata.HashFlood):
        v.decoded_calls()


def test_each_job_draws_from_a_fresh_random_stream(pool_factory):
    # A test that seeds the judge's random, then one that draws from it: the second job's
    # arguments must not follow from the first job's seed.
    import random

    p = pool_factory("fresh-random", SandboxConfig(), workers=1)
    seed_test = "import random\ndef check(candidate):\n    random.seed(1234)\n    candidate(random.random())\n"
    draw_test = "import random\ndef check(candidate):\n    candidate(random.random())\n"
    echo = "def f(x):\n    return x\n"
    p.check(echo, seed_test, "f")
    drawn = p.check(echo, draw_test, "f", record_calls=True).decoded_calls()[0]["args"][0]
    r = random.Random(1234)
    assert drawn not in [r.random() for _ in range(5)]


def test_a_submissions_traceback_shows_no_host_paths(pool):
    import sandbox

    v = pool.check(_fn("return 1 // 0"), ID_TEST, "f")
    assert v.status == "error" and "ZeroDivisionError" in v.stderr, v
    assert 'File "<submission>", line 2' in v.stderr
    assert os.path.dirname(sandbox.__file__) not in v.stderr, v.stderr
