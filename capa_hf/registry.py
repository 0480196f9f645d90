"""One registry for every swappable part: conditions, simulated users, judges, task sources.

A registry maps a name to a factory. Its entries come from three places, in this order of
precedence (a later one never replaces an earlier one silently):

1. **Built-ins**: modules named by the registry, imported by name the first time a name is
   looked up; each registers its parts with ``@REGISTRY.register("name")``. The registry does not
   import them itself, so a part's module may import the registry without a circle.
2. **Plug-ins**: ``importlib.metadata`` entry points in the registry's group, e.g. in a plug-in
   package's ``pyproject.toml``::

       [project.entry-points."capa.conditions"]
       mine = "my_pkg.my_condition:make_mine"

   CAPA's own ``pyproject.toml`` declares the groups, with its built-in parts in them; an entry
   point that names a built-in part with another target is refused as registered twice.

3. **Direct calls** to ``register`` (a test, a notebook).

An unknown name is refused with the known ones.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Callable, Generic, Iterable, TypeVar

from capa_hf.errors import CapaError

F = TypeVar("F", bound=Callable)


class Registry(Generic[F]):
    def __init__(self, kind: str, group: str, builtins: Iterable[str] = (), hint: str = ""):
        self.kind = kind                  # "condition", "simulated user", ... (for messages)
        self.group = group                # the entry-point group of plug-ins
        self.builtins = tuple(builtins)   # modules that register the shipped parts
        self.hint = hint                  # added to the message for an unknown name
        self._parts: dict[str, F] = {}
        self._loaded = False

    def register(self, name: str, factory: F | None = None):
        """``@registry.register("name")`` on a factory, or ``registry.register("name", factory)``."""
        def deco(fn: F) -> F:
            if not isinstance(name, str) or not name or ":" in name:
                raise CapaError(f"a {self.kind} name must be a non-empty string without ':', got {name!r}")
            old = self._parts.get(name)
            if old is not None and old is not fn and _qualname(old) != _qualname(fn):
                raise CapaError(f"{self.kind} {name!r} is registered twice: {_qualname(old)} and {_qualname(fn)}")
            self._parts[name] = fn
            return fn
        return deco(factory) if factory is not None else deco

    def unregister(self, name: str) -> None:
        self._parts.pop(name, None)

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        for module in self.builtins:
            importlib.import_module(module)
        for ep in entry_points(group=self.group):
            if ep.name in self._parts and _target(self._parts[ep.name]) == ep.value.replace(" ", ""):
                continue          # CAPA's own parts are declared as entry points too (pyproject.toml)
            try:
                factory = ep.load()
            except Exception as exc:  # a broken plug-in names itself, not a bare traceback
                raise CapaError(f"{self.kind} plug-in {ep.name!r} ({ep.value}, entry point group "
                                f"{self.group!r}) failed to load: {exc}") from exc
            self.register(ep.name, factory)

    def names(self) -> list[str]:
        self._load()
        return sorted(self._parts)

    def __contains__(self, name: str) -> bool:
        self._load()
        return name in self._parts

    def get(self, name: str) -> F:
        """The factory registered under ``name``; for a spec ``kind:argument`` the part of ``kind``."""
        self._load()
        kind = name.split(":", 1)[0] if isinstance(name, str) else name
        if kind not in self._parts:
            raise CapaError(f"unknown {self.kind} {name!r}; expected one of {', '.join(self.names())}"
                            + (f" ({self.hint})" if self.hint else ""))
        return self._parts[kind]


def _target(fn) -> str:
    """`fn` written as an entry point's value, `module:qualname`."""
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', '?')}"


def _qualname(fn) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
