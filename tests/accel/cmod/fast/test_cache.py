"""The speed layer's one cache (:class:`accel.cmod.fast.cache.BoundedCache`)."""

from __future__ import annotations

import pytest

from accel.cmod.fast.cache import BoundedCache


def test_keeps_at_most_size_entries_evicting_the_least_recently_used():
    cache = BoundedCache("t", 3)
    made = []

    def make(key):
        made.append(key)
        return key * 10

    for key in (1, 2, 3, 1, 4):      # 1 is used again before 4 comes: 2 goes
        assert cache.get(key, lambda key=key: make(key)) == key * 10
    assert made == [1, 2, 3, 4]
    assert cache.keys() == [3, 1, 4] and len(cache) == 3
    assert (cache.hits, cache.misses) == (1, 4)
    assert cache.get(2, lambda: make(2)) == 20        # made again after its eviction
    assert made == [1, 2, 3, 4, 2] and cache.keys() == [1, 4, 2]


def test_an_entry_that_is_no_longer_valid_is_made_again():
    cache = BoundedCache("t", 2)
    version = [0]

    def make():
        return (version[0], f"v{version[0]}")

    def current(entry):
        return entry[0] == version[0]

    assert cache.get("k", make, current) == (0, "v0")
    assert cache.get("k", make, current) == (0, "v0")
    version[0] = 1
    assert cache.get("k", make, current) == (1, "v1")
    assert (cache.hits, cache.misses, len(cache)) == (1, 2, 1)


def test_size_must_be_positive():
    with pytest.raises(ValueError, match=r"cache 'plans': size 0 must be at least 1"):
        BoundedCache("plans", 0)


def test_repr_tells_the_counts():
    cache = BoundedCache("plans", 4)
    cache.get(1, lambda: 1)
    cache.get(1, lambda: 1)
    assert repr(cache) == "BoundedCache('plans', 1/4 entries, 1 hits, 1 misses)"


def test_lookup_and_put_count_a_stale_entry_as_a_miss():
    cache = BoundedCache("t", 2)
    assert cache.lookup("k") is None
    cache.put("k", (0, "v0"))
    hit = cache.lookup("k")
    assert hit == (0, "v0")
    cache.put("k", (1, "v1"))                         # the caller found it stale
    assert cache.lookup("k") == (1, "v1")
    assert (cache.lookups, cache.hits, cache.misses) == (3, 1, 2)


def test_lookup_makes_the_entry_the_most_recently_used():
    cache = BoundedCache("t", 2)
    cache.put(1, "a")
    cache.put(2, "b")
    cache.lookup(1)
    cache.put(3, "c")                                 # 2 is the least recently used
    assert cache.keys() == [1, 3]


def test_none_cannot_be_kept():
    with pytest.raises(TypeError, match=r"cache 'plans': None cannot be kept"):
        BoundedCache("plans", 2).put("k", None)
