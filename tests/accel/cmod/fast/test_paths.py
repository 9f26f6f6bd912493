"""The seam between the plain model and its speed layer (:class:`accel.cmod.fast.FastPaths`)."""

from __future__ import annotations

from accel.cmod import Dla
from accel.cmod.fast import replay
from accel.cmod.fast.cache import BoundedCache
from accel.cmod.fast.paths import MAX_ENTRIES
from accel.config import get_preset
from accel.regs import lookup


def test_the_plain_model_has_no_speed_layer_and_takes_no_replays():
    plain = Dla(get_preset("nv_small"), fast=False)
    assert plain.fast is None
    events = [("w", lookup("NVDLA_SDP.D_CVT_SCALE_0").address, 1)]
    assert replay.prepare(plain, events) is None
    assert replay.run(plain, None, None) is False     # the firmware then runs in full


def test_the_fast_model_keeps_everything_in_bounded_caches():
    fast = Dla(get_preset("nv_small"))
    caches = fast.fast.caches()
    kept = [v for v in vars(fast.fast).values() if isinstance(v, BoundedCache)]
    assert len(caches) == len(kept) >= 8 and {id(c) for c in caches} == {id(c) for c in kept}
    assert all(c.size == MAX_ENTRIES for c in caches)
    assert len({c.name for c in caches}) == len(caches)
    # a recording prepared against the fast model replays (once learned: the same)
    events = [("w", lookup("NVDLA_SDP.D_CVT_SCALE_0").address, 1)]
    prepared = replay.prepare(fast, events)
    assert replay.run(fast, prepared, None) is True
    assert fast.read_reg("NVDLA_SDP.D_CVT_SCALE_0") == 1
