"""A persistent mapping: an immutable dict whose `set` and `delete` return a new mapping sharing most of the old one.

A meter state is an immutable value, and a linked meter holds thousands of open rounds: copying them all at every
operation made an operation's cost grow with their number. Here a mapping is a base dict, never changed once
built and shared by every mapping derived from it, and an overlay of the changes since (a value, or a key deleted),
copied at each change. When the overlay grows past about the square root of the base, the two are merged into a new
base: a change costs that square root, and the merge, spread over the changes before it, as much again.

It iterates in insertion order as a dict does (a value replaced keeps its place; a key deleted and set again goes
last), so what is written from it (a snapshot) is what a dict gave.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterable, Iterator, Mapping, ValuesView
from math import isqrt
from typing import Any, Generic, TypeVar, cast, overload

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")

_GONE: Any = object()  # in the overlay: a key of the base deleted
_MISSING: Any = object()
MIN_OVERLAY = 16  # an overlay this long is never merged: a small mapping is copied whole, as a dict would be


class PersistentMap(Mapping[K, V], Generic[K, V]):
    __slots__ = ("_base", "_len", "_over")

    _base: dict[K, V]
    _over: dict[K, V]  # key -> its value, or _GONE: a key of the base deleted
    _len: int

    def __init__(self, items: Mapping[K, V] | Iterable[tuple[K, V]] = ()) -> None:
        self._base = dict(items)
        self._over = {}
        self._len = len(self._base)

    def _derive(self, base: dict[K, V], over: dict[K, V], n: int) -> PersistentMap[K, V]:
        """A new mapping of this one's type (a subclass adds what it keeps beside the items)."""
        new = object.__new__(type(self))
        new._base, new._over, new._len = base, over, n
        if len(over) > max(MIN_OVERLAY, isqrt(len(base))):
            new._base, new._over = new._merged(), {}
        return new

    def _merged(self) -> dict[K, V]:
        d = dict(self._base)
        for k, v in self._over.items():
            if v is _GONE:
                del d[k]
            else:
                d[k] = v
        return d

    # --- the changes: each returns a new mapping --------------------------------------------------

    def set(self, key: K, value: V) -> PersistentMap[K, V]:
        """This mapping with `key` set to `value` (replaced in its place, or added last)."""
        over = self._over
        was = over.get(key, _MISSING)
        if was is _GONE:  # a key of the base deleted, set again: it goes last, as in a dict
            return self._derive({**self._merged(), key: value}, {}, self._len + 1)
        added = was is _MISSING and key not in self._base
        return self._derive(self._base, {**over, key: value}, self._len + added)

    def delete(self, key: K) -> PersistentMap[K, V]:
        """This mapping without `key`; KeyError if it has none."""
        over = self._over
        was = over.get(key, _MISSING)
        if was is _GONE or (was is _MISSING and key not in self._base):
            raise KeyError(key)
        new_over = dict(over)
        if key in self._base:
            new_over[key] = _GONE
        else:
            del new_over[key]
        return self._derive(self._base, new_over, self._len - 1)

    # --- Mapping ------------------------------------------------------------------------------------

    def __getitem__(self, key: K) -> V:
        v = self._over.get(key, _MISSING)
        if v is _MISSING:
            return self._base[key]
        if v is _GONE:
            raise KeyError(key)
        return cast("V", v)

    @overload
    def get(self, key: K, /) -> V | None: ...

    @overload
    def get(self, key: K, /, default: V | T) -> V | T: ...

    def get(self, key: K, /, default: Any = None) -> Any:
        v = self._over.get(key, _MISSING)
        if v is _MISSING:
            return self._base.get(key, default)
        return default if v is _GONE else v

    def __contains__(self, key: object) -> bool:
        v = self._over.get(key, _MISSING)  # type: ignore[arg-type]
        if v is _MISSING:
            return key in self._base
        return v is not _GONE

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[K]:
        for k, _ in self._items():
            yield k

    def _items(self) -> Iterator[tuple[K, V]]:
        over = self._over
        if not over:
            yield from self._base.items()
            return
        base = self._base
        for k, v in base.items():
            w = over.get(k, _MISSING)
            if w is _MISSING:
                yield k, v
            elif w is not _GONE:
                yield k, w
        for k, w in over.items():
            if k not in base:
                yield k, w

    def items(self) -> ItemsView[K, V]:
        return _Items(self)

    def values(self) -> ValuesView[V]:
        return _Values(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict(self._items())!r})"


class _Items(ItemsView[K, V]):
    _mapping: PersistentMap[K, V]

    def __iter__(self) -> Iterator[tuple[K, V]]:
        return self._mapping._items()


class _Values(ValuesView[V]):
    _mapping: PersistentMap[Any, V]

    def __iter__(self) -> Iterator[V]:
        return (v for _, v in self._mapping._items())


__all__ = ["PersistentMap"]
