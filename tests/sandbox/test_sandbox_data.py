"""Plain-data codec, wire frames and the Verdict type (no processes involved)."""
from __future__ import annotations

import collections
import enum
import json
import math

import pytest

from sandbox import Failure, Verdict
from sandbox.plaindata import DecodeError, Unsupported, decode, encode
from sandbox.protocol import FrameBuffer, ProtocolError, encode_frame


def roundtrip(v):
    return decode(json.loads(json.dumps(encode(v), allow_nan=True)))


@pytest.mark.parametrize("value", [
    None, True, False, 0, -7, 2 ** 200, -(2 ** 70), 1.5, -0.0, float("inf"), "", "héllo\u2028", b"\x00\xff",
    [1, [2, [3]]], (1, (2,)), {"a": 1, 2: "b", (1, 2): [3]}, {1, 2, 3}, frozenset({"x"}), {"s": {1}},
])
def test_roundtrip_plain_values(value):
    out = roundtrip(value)
    assert out == value and type(out) is type(value)


def test_nan_roundtrips():
    assert math.isnan(roundtrip(float("nan")))


def test_bool_and_int_stay_distinct():
    assert roundtrip([True, 1]) == [True, 1]
    assert [type(x) for x in roundtrip([True, 1])] == [bool, int]


def test_subclasses_become_plain_types():
    class Color(enum.IntEnum):
        RED = 3

    P = collections.namedtuple("P", "x y")
    assert type(roundtrip(Color.RED)) is int and roundtrip(Color.RED) == 3
    assert roundtrip(P(1, 2)) == (1, 2) and type(roundtrip(P(1, 2))) is tuple
    assert type(roundtrip(collections.Counter("aab"))) is dict
    assert type(roundtrip(collections.OrderedDict(a=1))) is dict

    class Liar(int):
        def __eq__(self, other):
            return True
        __hash__ = int.__hash__

    assert roundtrip(Liar(5)) == 5 and roundtrip(Liar(5)) != 6


@pytest.mark.parametrize("value", [object(), lambda: 1, iter([1]), {1: object()}, [range(3)]])
def test_unsupported_values_are_rejected(value):
    with pytest.raises(Unsupported, match="unsupported return type"):
        encode(value)


def test_cycles_and_deep_nesting_are_rejected():
    a = []
    a.append(a)
    with pytest.raises(Unsupported):
        encode(a)
    deep = []
    for _ in range(500):
        deep = [deep]
    with pytest.raises(Unsupported):
        encode(deep)


@pytest.mark.parametrize("wire", [
    {"zz": []}, {"t": 1}, {"s": [[1]]}, {"d": [[1]]}, {"d": [[[1], 2]]}, {"b": "not base64!"},
    {"x": "zz"}, 2 ** 60, {"a": 1, "b": 2}, {"x": ""},
])
def test_decode_rejects_malformed_wire_values(wire):
    with pytest.raises(DecodeError):
        decode(wire)


def test_frames():
    fb = FrameBuffer(1000)
    data = encode_frame({"a": [1, 2]}) + encode_frame("x")
    fb.feed(data[:5])
    with pytest.raises(LookupError):
        fb.pop()
    fb.feed(data[5:])
    assert fb.pop() == {"a": [1, 2]} and fb.pop() == "x"
    fb.feed(b"\x00\x00\x00\x03{x}")
    with pytest.raises(ProtocolError):
        fb.pop()
    big = FrameBuffer(10)
    big.feed(encode_frame("x" * 100))
    with pytest.raises(ProtocolError):
        big.pop()


def test_verdict_roundtrip_and_validation():
    v = Verdict("failed", Failure("AssertionError", "boom", "assert candidate(1) == 2"), "out", "err", 0.5,
                {"seccomp": True})
    d = v.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert Verdict.from_dict(d) == v
    assert not v.passed and Verdict("passed").passed
    with pytest.raises(ValueError):
        Verdict("maybe")
