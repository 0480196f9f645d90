"""Pool behaviour: ordering, concurrency, worker loss, the module-level helpers."""
from __future__ import annotations

import os
import signal
import threading
import time

import pytest

import sandbox
from sandbox import CheckJob, SandboxPool, Verdict

ID = "def f(x):\n    return x\n"
SLOW_ID = "import time\ndef f(x):\n    time.sleep(x / 100)\n    return x\n"


def test_check_many_keeps_input_order(pool):
    xs = [7, 0, 5, 1, 9, 3, 2, 8]
    jobs = [CheckJob(SLOW_ID, f"def check(candidate):\n    assert candidate({x}) == {x if x != 5 else -1}\n", "f")
            for x in xs]
    verdicts = pool.check_many(jobs)
    assert [v.status for v in verdicts] == ["failed" if x == 5 else "passed" for x in xs]
    assert pool.check_many([]) == []


def test_concurrent_checks_from_threads(pool):
    results = []

    def go(i):
        results.append((i, pool.check(ID, f"def check(candidate):\n    assert candidate({i}) == {i}\n", "f")))

    threads = [threading.Thread(target=go, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(i for i, _ in results) == list(range(8))
    assert all(v.passed for _, v in results)


def test_bad_arguments_raise(pool):
    with pytest.raises(ValueError):
        pool.check(ID, "def check(c): pass", "")
    with pytest.raises(ValueError):
        pool.check(ID, "def check(c): pass", "f", timeout_s=0)
    with pytest.raises(ValueError):
        pool.check(ID, "def check(c): pass", "f", memory_mb=-1)
    with pytest.raises(TypeError):
        pool.check(None, "def check(c): pass", "f")


def test_broken_tests_are_sandbox_errors(pool):
    assert pool.check(ID, "def check(candidate:\n", "f").status == "sandbox_error"
    assert pool.check(ID, "x = 1\n", "f").status == "sandbox_error"
    v = pool.check(ID, "import nonexistent_module_xyz\ndef check(c):\n    pass\n", "f")
    assert v.status == "sandbox_error"


def test_a_killed_worker_is_replaced_transparently():
    with SandboxPool(workers=1) as p:
        test = "def check(candidate):\n    assert candidate(1) == 1\n"
        old = p.worker_info()[0]["pid"]
        os.kill(old, signal.SIGKILL)
        time.sleep(0.1)
        assert p.check(ID, test, "f").status == "passed"
        assert p.worker_info()[0]["pid"] != old


def test_worker_killed_mid_job_is_retried():
    with SandboxPool(workers=1) as p:
        old = p.worker_info()[0]["pid"]
        threading.Timer(0.3, os.kill, (old, signal.SIGKILL)).start()
        v = p.check(SLOW_ID, "def check(candidate):\n    assert candidate(80) == 80\n", "f")
        assert v.status == "passed"
        assert p.worker_info()[0]["pid"] != old


def test_a_killed_zygote_is_replaced_transparently():
    with SandboxPool(workers=1) as p:
        z = p.worker_info()[0]["zygote_pid"]
        os.kill(z, signal.SIGKILL)
        time.sleep(0.1)
        v = p.check(ID, "def check(candidate):\n    assert candidate(1) == 1\n", "f")
        assert v.status == "passed"
        assert p.worker_info()[0]["zygote_pid"] != z


def test_closed_pool_refuses_work_and_cleans_up():
    p = SandboxPool(workers=1)
    info = p.worker_info()[0]
    p.close()
    with pytest.raises(RuntimeError):
        p.check(ID, "def check(c): pass", "f")
    assert not os.path.exists(info["scratch_base"])
    for pid in (info["pid"], info["zygote_pid"]):
        assert not os.path.exists(f"/proc/{pid}") or "Z" in open(f"/proc/{pid}/status").read().split("State:")[1][:4]


def test_module_level_helpers_use_a_shared_pool():
    v = sandbox.check(ID, "def check(candidate):\n    assert candidate(2) == 2\n", "f")
    assert isinstance(v, Verdict) and v.passed
    assert sandbox.run("print(1)\n").stdout == "1\n"
    assert sandbox.default_pool() is sandbox.default_pool()


def test_prestarted_child_is_used_and_nothing_else_is_left(pool_factory):
    from sandbox_testlib import assert_nothing_left

    from sandbox import SandboxConfig
    p = pool_factory("prestart", SandboxConfig(prestart_child=True))
    before = p.worker_info(live=True)[0]["spare_pid"]
    assert before is not None
    v = p.check("import os\ndef f(x):\n    print(os.getpid())\n    return x\n",
                "def check(candidate):\n    assert candidate(1) == 1\n", "f")
    assert v.status == "passed"
    after = p.worker_info(live=True)[0]["spare_pid"]
    assert after is not None and after != before     # the spare ran the job; a new one waits
    assert_nothing_left(p)


def test_without_prestart_no_child_waits_and_nothing_is_left(pool_factory):
    from sandbox_testlib import assert_nothing_left, zygote_children

    from sandbox import SandboxConfig
    p = pool_factory("no-prestart", SandboxConfig(prestart_child=False))
    assert p.check(ID, "def check(candidate):\n    assert candidate(1) == 1\n", "f").passed
    info = p.worker_info(live=True)[0]
    assert info["spare_pid"] is None and zygote_children(info["zygote_pid"]) == []
    assert_nothing_left(p)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_each_worker_chain_runs_on_one_cpu():
    from sandbox import SandboxConfig
    allowed = os.sched_getaffinity(0)
    with SandboxPool(workers=2) as p:
        infos = p.worker_info(live=True)
        pinned = [os.sched_getaffinity(i["pid"]) for i in infos]
        assert all(len(s) == 1 and s <= allowed for s in pinned)
        assert pinned[0] != pinned[1]                         # round robin over the allowed CPUs
        for i, cpus in zip(infos, pinned):                    # the zygote and its spare child follow
            assert os.sched_getaffinity(i["zygote_pid"]) == cpus
            assert os.sched_getaffinity(i["spare_pid"]) == cpus
    with SandboxPool(workers=1, config=SandboxConfig(pin_workers=False)) as p:
        assert os.sched_getaffinity(p.worker_info()[0]["pid"]) == allowed
