"""One bounded cache for everything the speed layer keeps between operations.

Each kept thing (a decoded op, a weight matrix in the GEMM engine's form, a compiled
SDP pass, ...) is derived from register values or memory contents and is correct
only while they hold; the caller says how to tell (``valid``) and how to derive it
again (``make``).  The number of entries is bounded: a long-running process that
loads loadable after loadable keeps the most recently used ones, and what the
cache keeps can be read off :attr:`BoundedCache.hits` and :attr:`BoundedCache.misses`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class BoundedCache(Generic[V]):
    """At most ``size`` entries, the least recently used one evicted first.

    >>> c = BoundedCache("squares", 2)
    >>> [c.get(n, lambda n=n: n * n) for n in (2, 3, 2, 4)]
    [4, 9, 4, 16]
    >>> sorted(c.keys()), c.hits, c.misses     # 3 was the least recently used
    ([2, 4], 1, 3)
    """

    def __init__(self, name: str, size: int) -> None:
        if size < 1:
            raise ValueError(f"cache {name!r}: size {size} must be at least 1")
        self.name, self.size = name, size
        self.hits = self.misses = 0
        self._entries: OrderedDict[Hashable, V] = OrderedDict()

    def get(self, key: Hashable, make: Callable[[], V],
            valid: Callable[[V], bool] | None = None) -> V:
        """The entry of ``key`` if there is one and ``valid(entry)`` holds (or no ``valid``
        is given), else ``make()``, kept as the entry of ``key``."""
        entries = self._entries
        entry = entries.get(key, _MISSING)
        if entry is not _MISSING and (valid is None or valid(entry)):
            self.hits += 1
            entries.move_to_end(key)
            return entry
        self.misses += 1
        entry = make()
        entries[key] = entry
        entries.move_to_end(key)
        if len(entries) > self.size:
            entries.popitem(last=False)
        return entry

    def keys(self) -> list[Hashable]:
        """The keys kept, least recently used first."""
        return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return (f"BoundedCache({self.name!r}, {len(self)}/{self.size} entries, "
                f"{self.hits} hits, {self.misses} misses)")


_MISSING = object()
