"""Call prefetching: predict the calls a test will make, so the child can answer them in one go.

Running the test in the trusted judge costs one round trip to the sandboxed
child per candidate call. To save most of them, the judge first runs the
test in *discovery* mode: asserts are stripped (an AST rewrite, cached per
test) and every sandboxed function returns a ``Probe``, a value that says
yes to every comparison. The calls recorded this way (name + plain-data
arguments) are sent to the child as one batch right after the submission;
the child runs them in order and streams back one reply per call, stopping
at the first exception.

The real, trusted run then consumes the streamed replies, checking each
call's arguments against the prediction. A prediction is only a hint: if the
real run asks for a call that differs from the predicted one at the same
position, the child has already run calls the real test never made, so the
judge throws that child away and redoes the job with plain one-call-at-a-time
round trips (``Diverged``). Discovery stops early (and the rest of the run
uses round trips) when an argument is not plain data (e.g. it depends on a
result) or after a call, size or time budget.

The judge reads a batch's replies whole (``Prefetched``) before the test runs any
assert: the order and the moment in which the child's replies are read then depend on
nothing the test does, so a child that watches its reply pipe (say, shrunk to one page,
with padded replies) learns nothing about which asserts held.

Predictions are cached per test (``predict``): discovery only depends on the test, the
prelude, the entry point and which helpers come from the submission -- never on the
submission -- so the same test checked against many submissions (pass@k) predicts its
calls once. Tests that use ``random`` are not cached. A prediction that turns out wrong
for one submission is kept: whether and what a job prefetches depends on its test alone,
never on what earlier submissions returned (a child can tell a batch from single calls,
so anything else would let one job signal the next).
"""
from __future__ import annotations

import ast
import random
import signal
import types
from functools import lru_cache

from dataclasses import dataclass, field

from . import plaindata
from .protocol import dumps, encode_request
from .remote import Abort

MAX_CALLS = 2000
MAX_BYTES = 2 * 1024 * 1024
TIME_BUDGET_S = 0.05


class StopDiscovery(BaseException):
    pass


class Diverged(BaseException):
    """The real run asked for a different call than the one prefetched at that position."""


class Probe:
    """Stand-in result during discovery: agrees with everything, so the test keeps going."""

    __slots__ = ()

    def __eq__(self, other): return True
    def __ne__(self, other): return True
    def __lt__(self, other): return True
    def __le__(self, other): return True
    def __gt__(self, other): return True
    def __ge__(self, other): return True
    def __bool__(self): return True
    def __len__(self): return 0
    def __iter__(self): return iter(())
    def __contains__(self, item): return True
    def __getitem__(self, key): return PROBE
    def __getattr__(self, name): return PROBE
    def __call__(self, *a, **k): return PROBE
    def __int__(self): return 0
    def __float__(self): return 0.0
    def __index__(self): return 0
    def __hash__(self): return 0
    def __repr__(self): return "<probe>"
    def __format__(self, spec): return "<probe>"
    def __round__(self, n=None): return PROBE
    def __abs__(self): return PROBE
    def __neg__(self): return PROBE
    def __pos__(self): return PROBE
    def __invert__(self): return PROBE


def _binop(self, other):
    return PROBE


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor", "lshift",
              "rshift", "matmul", "divmod"):
    setattr(Probe, f"__{_name}__", _binop)
    setattr(Probe, f"__r{_name}__", _binop)

PROBE = Probe()


def _strip_asserts(stmts: list) -> None:
    """Replace every ``assert cond`` by the bare expression ``cond``, in place.

    Asserts are statements, so only statement lists are walked (not every expression
    node, as ast.NodeTransformer would); the new node takes the assert's location, so no
    fix_missing_locations pass is needed.
    """
    for i, node in enumerate(stmts):
        if type(node) is ast.Assert:
            stmts[i] = ast.copy_location(ast.Expr(value=node.test), node)
            continue
        for field in ("body", "orelse", "finalbody"):
            sub = getattr(node, field, None)
            if type(sub) is list:
                _strip_asserts(sub)
        for part in getattr(node, "handlers", None) or getattr(node, "cases", None) or ():
            _strip_asserts(part.body)


@lru_cache(maxsize=512)
def discovery_code(test: str, filename: str) -> types.CodeType:
    tree = ast.parse(test, filename)
    _strip_asserts(tree.body)
    return compile(tree, filename, "exec", dont_inherit=True)


def call_key(name: str, wire_args, wire_kwargs) -> str:
    return dumps([name, wire_args, wire_kwargs])


class _Recorder:
    def __init__(self):
        self.calls: list[dict] = []
        self.keys: list[str] = []
        self.size = 0

    def stub(self, name: str):
        rec = self

        def record(*args, **kwargs):
            try:
                wa = plaindata.encode(list(args))
                wk = plaindata.encode(dict(kwargs))
            except plaindata.Unsupported:
                raise StopDiscovery() from None
            key = call_key(name, wa, wk)
            rec.size += len(key)
            if len(rec.calls) >= MAX_CALLS or rec.size > MAX_BYTES:
                raise StopDiscovery()
            rec.calls.append({"name": name, "args": wa, "kwargs": wk})
            rec.keys.append(key)
            return PROBE

        record.__name__ = name
        return record


def _alarm(signum, frame):
    raise StopDiscovery()


def discover(test: str, filename: str, prelude_code, entry: str, remote_names, base_ns: dict,
             keep_random_state: bool = True, alias: str | None = None):
    """Run the test with asserts stripped and recording stubs; return (calls, keys).

    ``entry``: the submission's function that ``check`` receives as its candidate; ``alias``:
    the name the test also reads it under (the dataset's entry point), if any.

    ``keep_random_state``: restore the judge's ``random`` state afterwards, so that the real
    run draws the same numbers (needed only when the test uses ``random``).
    """
    try:
        code = discovery_code(test, filename)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return [], []
    rec = _Recorder()
    ns = dict(base_ns)
    state = random.getstate() if keep_random_state else None
    old = signal.getsignal(signal.SIGALRM)
    try:
        try:
            signal.signal(signal.SIGALRM, _alarm)
            signal.setitimer(signal.ITIMER_REAL, TIME_BUDGET_S)
            if prelude_code is not None:
                exec(prelude_code, ns)
            exec(code, ns)
            candidate = rec.stub(entry)
            if alias is not None:
                ns[alias] = candidate
            for name in remote_names:
                if name not in ns:   # (never a name the test or prelude defines)
                    ns[name] = candidate if name == entry else rec.stub(name)
            check = ns.get("check")
            if callable(check):
                check(candidate)
        except BaseException:
            pass
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except StopDiscovery:  # an alarm that landed inside the finally clause
        pass
    try:
        signal.signal(signal.SIGALRM, old)
    except StopDiscovery:
        signal.signal(signal.SIGALRM, old)
    if state is not None:
        random.setstate(state)
    return rec.calls, rec.keys


_PREDICTIONS: dict[tuple, tuple[bytes, list[str]]] = {}
_PREDICTIONS_MAX = 512


@dataclass(frozen=True)
class Plan:
    """The predicted calls of one run: the encoded batch request (b"" for none) and their keys."""
    frame: bytes
    keys: list[str]
    cache_key: tuple | None = None


def _remember(key: tuple, value: tuple[bytes, list[str]]) -> None:
    if len(_PREDICTIONS) >= _PREDICTIONS_MAX:
        _PREDICTIONS.pop(next(iter(_PREDICTIONS)))
    _PREDICTIONS[key] = value


def predict(test: str, filename: str, prelude: str | None, prelude_code, entry: str, alias: str | None,
            wanted: list[str], uses_random: bool, base_ns: dict) -> Plan:
    key = None if uses_random else (test, prelude, entry, alias, tuple(wanted))
    if key is not None and key in _PREDICTIONS:
        hit = _PREDICTIONS[key]
        return Plan(hit[0], hit[1], key)
    calls, keys = discover(test, filename, prelude_code, entry, wanted, base_ns, keep_random_state=uses_random,
                           alias=alias)
    frame = encode_request({"op": "batch", "calls": calls}) if calls else b""
    if key is not None:
        _remember(key, (frame, keys))
    return Plan(frame, keys, key)


@dataclass
class Prefetched:
    """The replies to a prefetched batch, read whole before the test starts.

    ``replies[i]`` answers predicted call i (the child stops a batch at the first call that
    does not return normally). ``stop``: when reading ended early -- the time limit, the
    child gone, a reply refused -- what happened, to be raised when the test gets to the
    call that has no reply, and only then (an earlier assert may fail first).
    """
    keys: list[str]
    replies: list = field(default_factory=list)
    stop: dict | None = None

    def take(self, i: int, key: str):
        """The reply for the test's call ``i`` (key ``key``), or None when it must be a round
        trip. Raises Diverged when the test asks for another call than predicted, and the
        stop (an Abort) when the test reaches the call reading ended at."""
        if i >= len(self.keys):
            return None
        if i < len(self.replies) or (i == len(self.replies) and self.stop is not None):
            if key != self.keys[i]:
                raise Diverged()
            if i < len(self.replies):
                return self.replies[i]
            raise Abort(**self.stop)
        return None   # the batch ended at a call that raised: the child serves round trips again
