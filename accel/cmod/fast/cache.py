"""One bounded cache for everything the speed layer keeps between operations.

Each kept thing (a decoded op, a weight matrix in the GEMM engine's form, a compiled
SDP pass, ...) is derived from register values or memory contents and is correct
only while they hold.  :meth:`BoundedCache.get` takes how to tell (``valid``) and how
to derive it again (``make``); the paths run once per simulated operation use the
two halves it is made of, :meth:`~BoundedCache.lookup` and :meth:`~BoundedCache.put`,
with their check written inline (a callable per lookup costs more than the lookup).
The number of entries is bounded: a long-running process that loads loadable after
loadable keeps the most recently used ones, and what the cache keeps can be read off
:attr:`BoundedCache.hits` and :attr:`BoundedCache.misses`.
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
        self.lookups = self.misses = 0
        self._entries: OrderedDict[Hashable, V] = OrderedDict()

    @property
    def hits(self) -> int:
        """Lookups answered by an entry kept (and still valid: a stale entry found
        is replaced by :meth:`put`, which counts a miss)."""
        return self.lookups - self.misses

    def lookup(self, key: Hashable) -> V | None:
        """The entry of ``key``, now the most recently used, or None; the caller checks
        that it still holds and :meth:`put` s a new one if not."""
        self.lookups += 1
        entries = self._entries
        entry = entries.get(key)
        if entry is not None:
            entries.move_to_end(key)
        return entry

    def put(self, key: Hashable, entry: V) -> V:
        """Keep ``entry`` (not None) as the entry of ``key`` after a :meth:`lookup` that
        found none or a stale one; returns it."""
        if entry is None:
            raise TypeError(f"cache {self.name!r}: None cannot be kept (it means 'no entry')")
        self.misses += 1
        entries = self._entries
        entries[key] = entry
        entries.move_to_end(key)
        if len(entries) > self.size:
            entries.popitem(last=False)
        return entry

    def get(self, key: Hashable, make: Callable[[], V],
            valid: Callable[[V], bool] | None = None) -> V:
        """The entry of ``key`` if there is one and ``valid(entry)`` holds (or no ``valid``
        is given), else ``make()``, kept as the entry of ``key``."""
        entry = self.lookup(key)
        if entry is not None and (valid is None or valid(entry)):
            return entry
        return self.put(key, make())

    def keys(self) -> list[Hashable]:
        """The keys kept, least recently used first."""
        return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return (f"BoundedCache({self.name!r}, {len(self)}/{self.size} entries, "
                f"{self.hits} hits, {self.misses} misses)")
