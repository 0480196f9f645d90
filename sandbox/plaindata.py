"""Plain-data codec for values crossing the sandbox boundary.

Only plain data crosses: None, bool, int, float (nan/inf included), str, bytes,
list, tuple, dict, set, frozenset. Subclasses of these (Counter, OrderedDict,
namedtuple, IntEnum ...) are converted to the base type through the base type's
own slots, so overridden ``__eq__``/``__iter__`` never reach the judge. Anything
else is rejected with ``Unsupported('unsupported return type X')``.

Encoding on the wire (JSON): None/bool/str/float and small ints are themselves,
lists are JSON arrays, and every other type is a one-key object:
``{"t": [...]}`` tuple, ``{"s": [...]}`` set, ``{"f": [...]}`` frozenset,
``{"b": "<base64>"}`` bytes, ``{"d": [[k, v], ...]}`` dict, ``{"x": "<hex>"}`` big int.
``decode`` validates strictly: it is what the trusted side runs on untrusted input.
"""
from __future__ import annotations

import base64
import time

MAX_DEPTH = 200
_SMALL_INT = 1 << 53


class Unsupported(Exception):
    pass


def _int(v: int):
    if -_SMALL_INT < v < _SMALL_INT:
        return v
    return {"x": format(v, "x") if v >= 0 else "-" + format(-v, "x")}


def encode(obj, _depth: int = 0):
    if _depth > MAX_DEPTH:
        raise Unsupported("value nested too deeply")
    t = type(obj)
    if obj is None or t is bool or t is str:
        return obj
    if t is int:
        return _int(obj)
    if t is float:
        return obj
    if t is list:
        return [encode(x, _depth + 1) for x in list.__iter__(obj)]
    if t is tuple:
        return {"t": [encode(x, _depth + 1) for x in tuple.__iter__(obj)]}
    if t is dict:
        return {"d": [[encode(k, _depth + 1), encode(v, _depth + 1)] for k, v in dict.items(obj)]}
    if t is set:
        return {"s": [encode(x, _depth + 1) for x in set.__iter__(obj)]}
    if t is frozenset:
        return {"f": [encode(x, _depth + 1) for x in frozenset.__iter__(obj)]}
    if t is bytes:
        return {"b": base64.b64encode(obj).decode("ascii")}
    # Subclasses of plain types: convert through the base type's own slots.
    try:
        if issubclass(t, int):
            return _int(int.__index__(obj))
        if issubclass(t, float):
            return float.__float__(obj)
        if issubclass(t, str):
            return str.__str__(obj)
        if issubclass(t, bytes):
            return {"b": base64.b64encode(bytes.__bytes__(obj)).decode("ascii")}
        if issubclass(t, dict):
            return {"d": [[encode(k, _depth + 1), encode(v, _depth + 1)] for k, v in dict.items(obj)]}
        if issubclass(t, list):
            return [encode(x, _depth + 1) for x in list.__iter__(obj)]
        if issubclass(t, tuple):
            return {"t": [encode(x, _depth + 1) for x in tuple.__iter__(obj)]}
        if issubclass(t, frozenset):
            return {"f": [encode(x, _depth + 1) for x in frozenset.__iter__(obj)]}
        if issubclass(t, set):
            return {"s": [encode(x, _depth + 1) for x in set.__iter__(obj)]}
    except Unsupported:
        raise
    except RecursionError:
        raise Unsupported("value nested too deeply") from None
    except Exception as e:  # a hostile subclass can make the base slots raise
        raise Unsupported(f"unsupported return type {_type_name(t)} ({type(e).__name__})") from None
    raise Unsupported(f"unsupported return type {_type_name(t)}")


def _type_name(t) -> str:
    try:
        mod = type.__getattribute__(t, "__module__")
        name = type.__getattribute__(t, "__qualname__")
        return name if mod in ("builtins", None) else f"{mod}.{name}"
    except Exception:
        return "<unknown type>"


class DecodeError(Exception):
    pass


class DecodeTimeout(DecodeError):
    """Rebuilding the value ran past its deadline."""


class HashFlood(DecodeError):
    """Too many distinct values with one hash (a set or dict of them would take quadratic time)."""


MAX_SAME_HASH = 8   # distinct values per hash, beyond the first, that a job's replies may hold


class DecodeLimit:
    """Bounds on rebuilding untrusted values in the judge; one per job, across all its replies.

    * ``deadline`` (time.monotonic()): checked every 4096 values.
    * hash flooding: ints sent in hex form, floats, tuples and frozensets (the values whose
      hashes a submission can choose), and every set element and dict key whatever its type,
      are hashed as they are rebuilt; once more than ``MAX_SAME_HASH`` distinct ones share a
      hash, the reply is refused. (Small ints hash to themselves; str and bytes hashes use
      the worker's per-process secret, which the children share, being forked from it: a
      child can compute them, so as set elements and dict keys they are counted too.) Sets
      and dicts built from what passes, here or by the test, stay linear in size (up to a
      constant).
    """

    __slots__ = ("deadline", "ticks", "_first", "_clashes")

    def __init__(self, deadline: float | None = None):
        self.deadline = deadline
        self.ticks = 0
        self._first: dict[int, object] = {}
        self._clashes: dict[int, int] = {}

    def tick(self) -> None:
        self.ticks += 1
        if not self.ticks & 4095 and self.deadline is not None and time.monotonic() > self.deadline:
            raise DecodeTimeout("the time limit ran out while rebuilding a result")

    def seen(self, value):
        h = hash(value)
        first = self._first.setdefault(h, value)
        if first is not value and first != value:
            n = self._clashes.get(h, 0) + 1
            if n > MAX_SAME_HASH:
                raise HashFlood(f"more than {MAX_SAME_HASH + 1} distinct values with the same hash")
            self._clashes[h] = n
        return value


def decode(obj, limit: DecodeLimit | None = None):
    """Strictly rebuild plain data from its wire form; raise DecodeError on anything unexpected.

    ``limit``: for untrusted input in a trusted process (see DecodeLimit).
    """
    return _decode(obj, 0, limit)


def _decode(obj, _depth: int, lim: DecodeLimit | None):
    if _depth > MAX_DEPTH + 1:
        raise DecodeError("value nested too deeply")
    t = type(obj)
    if obj is None or t is bool or t is str:
        return obj
    if t is float:   # (floats' hashes are the submission's to choose: 2.0 ** k and 2.0 ** (k + 61) collide)
        return obj if lim is None else lim.seen(obj)
    if lim is not None:
        lim.tick()
    if t is int:
        if -_SMALL_INT < obj < _SMALL_INT:
            return obj
        raise DecodeError("large int not in hex form")
    d = _depth + 1
    if t is list:
        return [_decode(x, d, lim) for x in obj]
    if t is dict and len(obj) == 1:
        (tag, val), = obj.items()
        try:
            if tag == "t" and type(val) is list:
                v = tuple([_decode(x, d, lim) for x in val])
                return v if lim is None else lim.seen(v)
            if tag == "s" and type(val) is list:
                items = [_decode(x, d, lim) for x in val]
                if lim is not None:
                    for x in items:
                        lim.seen(x)
                return set(items)
            if tag == "f" and type(val) is list:
                items = [_decode(x, d, lim) for x in val]
                if lim is not None:
                    for x in items:
                        lim.seen(x)
                v = frozenset(items)
                return v if lim is None else lim.seen(v)
            if tag == "b" and type(val) is str:
                return base64.b64decode(val.encode("ascii"), validate=True)
            if tag == "x" and type(val) is str and 0 < len(val) <= 1_000_000:
                v = int(val, 16)
                return v if lim is None else lim.seen(v)
            if tag == "d" and type(val) is list:
                out = {}
                for pair in val:
                    if type(pair) is not list or len(pair) != 2:
                        raise DecodeError("bad dict entry")
                    k = _decode(pair[0], d, lim)
                    out[k if lim is None else lim.seen(k)] = _decode(pair[1], d, lim)
                return out
        except DecodeError:
            raise
        except (TypeError, ValueError) as e:  # unhashable set element / dict key, bad base64
            raise DecodeError(f"bad {tag!r} value: {type(e).__name__}") from None
    raise DecodeError(f"unexpected wire value of type {t.__name__}")
