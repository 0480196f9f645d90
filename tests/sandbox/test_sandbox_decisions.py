"""Pure parts of the trusted side, without processes: bounded decoding, reply budgets, the
verdict mapping (outcome.decide), rebuilt exceptions, text cleaning, the cgroup helpers."""
from __future__ import annotations

import json
import os
import signal
import time

import pytest

from sandbox import Failure, cgroups
from sandbox.outcome import Happened, decide
from sandbox.plaindata import DecodeLimit, DecodeTimeout, HashFlood, decode, encode
from sandbox.protocol import FrameBuffer, TooLarge, encode_frame, exc_record, json_values_bound
from sandbox.remote import RemoteError, remote_exception, safe_str
from sandbox.verdict import clean_text

P61 = 2 ** 61 - 1   # every multiple hashes to 0


@pytest.mark.parametrize("make", [lambda k: k * P61, lambda k: frozenset([k * P61]), lambda k: (k * P61,)])
def test_values_that_hash_alike_are_refused_before_a_set_is_built(make):
    wire = encode({make(k) for k in range(1, 10)} | {make(k) for k in range(10, 1000)})
    t0 = time.monotonic()
    with pytest.raises(HashFlood):
        decode(wire, DecodeLimit())
    assert time.monotonic() - t0 < 1.0
    assert len(decode(wire)) == 999   # (without a limit, as the child decodes the judge's values)


def test_ordinary_values_pass_the_flood_check():
    values = [(i, str(i)) for i in range(5000)] + [(1, "1")] * 5000 + [10 ** 20 + i for i in range(5000)]
    assert decode(encode(values), DecodeLimit()) == values


def test_decoding_stops_at_the_deadline():
    with pytest.raises(DecodeTimeout):
        decode(encode([[i] for i in range(20000)]), DecodeLimit(deadline=time.monotonic() - 1))


@pytest.mark.parametrize("value", [[], [[], [1, [2]]], {"a": [1, 2], "b,c": {"d": None}}, ["x,y:[{", 1.5, None]])
def test_json_values_bound_is_an_upper_bound(value):
    data = json.dumps(value).encode()
    exact = 0

    def count(v):
        nonlocal exact
        exact += 1
        for x in (v if isinstance(v, list) else [y for kv in v.items() for y in kv] if isinstance(v, dict) else []):
            count(x)
    count(value)
    assert exact <= json_values_bound(data, 0) <= json_values_bound(data, 10 ** 9)


def test_commas_in_strings_do_not_count_once_counted_exactly():
    data = json.dumps(["," * 1000]).encode()
    assert json_values_bound(data, 10 ** 6) > 1000
    assert json_values_bound(data, 10) <= 3


def test_frame_buffer_bounds_a_jobs_replies_together():
    fb = FrameBuffer(1000, total_bytes=1500, total_values=100)
    fb.feed(encode_frame("x" * 800))
    assert fb.pop() == "x" * 800
    fb.feed(encode_frame("y" * 800))
    with pytest.raises(TooLarge):
        fb.pop()
    fb = FrameBuffer(1000, total_values=100)
    fb.feed(encode_frame([[]] * 40) + encode_frame([[]] * 40))
    fb.pop()
    with pytest.raises(TooLarge):
        fb.pop()


def test_clean_text_replaces_lone_surrogates_only():
    assert clean_text("a\ud800b\U0001F600") == "a\ufffdb\U0001F600"
    assert clean_text("plain") == "plain"
    assert Failure("E\ud800", "m\udfff", "l\ud800").to_dict() == {"type": "E\ufffd", "message": "m\ufffd",
                                                                     "line": "l\ufffd"}


def test_safe_str_never_raises():
    assert "cannot be shown" in safe_str(10 ** 5000)
    deep = []
    for _ in range(100000):
        deep = [deep]
    assert "cannot be shown" in safe_str(deep)
    assert safe_str("x" * 5000) == "x" * 2000


def test_stop_iteration_is_rebuilt_as_a_runtime_error():
    e = remote_exception({"type": "StopIteration", "message": "", "errno": None, "line": None, "lineno": None})
    assert isinstance(e, RuntimeError) and isinstance(e, RemoteError) and not isinstance(e, StopIteration)
    assert e.remote["type"] == "StopIteration"


def _exc(name, message="m", errno=None):
    return exc_record(name, message, errno=errno)


@pytest.mark.parametrize("happened,status,ftype", [
    (Happened(), "passed", None),
    (Happened(setup_error="x", exc=_exc("ValueError")), "sandbox_error", "SandboxError"),
    (Happened(timed_out=True, time_limit_s=1), "timeout", "Timeout"),
    (Happened(exc=_exc("MemoryError", "")), "memory", "MemoryError"),
    (Happened(exc=_exc("PermissionError", errno=1)), "blocked", "PermissionError"),
    (Happened(exc=_exc("SystemExit", "")), "error", "SystemExit"),
    (Happened(exc=_exc("AssertionError")), "error", "AssertionError"),   # the submission's own assert
    (Happened(exc=_exc("ResultTooLarge")), "error", "ResultTooLarge"),
    (Happened(rejected=Failure("HashFlood", "m")), "failed", "HashFlood"),
    (Happened(test_failure=Failure("AssertionError", "m")), "failed", "AssertionError"),
    (Happened(protocol="forged"), "error", "ProtocolError"),
    (Happened(died=True, exit_status=signal.SIGSYS), "blocked", "Blocked"),
    (Happened(died=True, exit_status=signal.SIGKILL, oom_killed=True), "memory", "MemoryError"),
    (Happened(died=True, exit_status=signal.SIGKILL, cpu_s=3.9, cpu_limit_s=4), "timeout", "Timeout"),
    (Happened(died=True, exit_status=3 << 8), "error", "ProcessExited"),
    (Happened(run_program=True, exit_status=0), "passed", None),
    (Happened(run_program=True, exit_status=1 << 8, exc=_exc("AssertionError")), "failed", "AssertionError"),
    (Happened(run_program=True, exit_status=2 << 8), "failed", "ExitStatus"),
    (Happened(run_program=True, ready=False), "sandbox_error", "SandboxError"),
])
def test_decide_maps_what_happened_to_one_status(happened, status, ftype):
    got, failure = decide(happened)
    assert got == status and (failure.type if failure else None) == ftype


def test_forbidden_actions_override_all_but_our_own_faults():
    status, failure = decide(Happened(exc=_exc("ValueError"), forbidden=("socket()",), line="assert f(1)"))
    assert status == "blocked" and "socket()" in failure.message and "(then: error)" in failure.message
    assert failure.line == "assert f(1)"
    assert decide(Happened(setup_error="ours", forbidden=("socket()",)))[0] == "sandbox_error"


def test_cgroup_dir_is_found_from_proc(tmp_path):
    mountinfo = ("25 1 0:22 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n"
                 "26 1 0:23 / /proc rw - proc proc rw\n")
    assert cgroups.own_cgroup_dir("0::/user.slice/job\n", mountinfo) == "/sys/fs/cgroup/user.slice/job"
    nested = "30 1 0:22 /ctr /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
    assert cgroups.own_cgroup_dir("0::/ctr/inner\n", nested) == "/sys/fs/cgroup/inner"
    assert cgroups.own_cgroup_dir("4:memory:/x\n", mountinfo) is None
    assert cgroups.parse_oom_kills("low 0\nhigh 0\nmax 3\noom 2\noom_kill 2\n") == 2


def test_cgroup_group_is_refused_with_a_reason(tmp_path):
    group, why = cgroups.open_group(True, str(tmp_path / "missing"), "capa-sandbox-x")
    assert group is None and "missing" in why
    group, why = cgroups.open_group(False, str(tmp_path), "capa-sandbox-x")
    assert group is None and "switched off" in why


def test_memory_group_writes_the_limit_and_counts_oom_kills(tmp_path):
    (tmp_path / "memory.events").write_text("oom 1\noom_kill 1\n")
    g = cgroups.MemoryGroup(str(tmp_path))
    g.set_limit(64)
    assert int((tmp_path / "memory.max").read_text()) == (64 + cgroups.SLACK_MB) << 20
    assert g.oom_kills() == 1
    (tmp_path / "memory.events").write_text("oom 2\noom_kill 2\n")
    assert g.oom_kills() == 2
    os.close(g._events)
