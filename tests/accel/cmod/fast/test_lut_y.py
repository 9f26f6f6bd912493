"""The speed layer's compiled Y LUT (``fast.lut_y``), directly and through its table
of the values around 0, gives the plain lookup's results and counters
(``sdp_y.lookup``, itself checked by hand in ``tests/accel/cmod/test_sdp_y.py``)
on values around every edge, for linear and exponential tables, positive, negative and
over-wide index selects, every priority and signed slope shifts."""

from __future__ import annotations

import numpy as np
import pytest

from accel.cmod.csb import make_register_file
from accel.cmod.fast import lut_y
from accel.cmod.lut import LutRam
from accel.cmod.sdp_y import lookup
from accel.regs import UNITS


def sdp_group(**values):
    """Group 0 of a fresh SDP register file holding ``values``."""
    regs = make_register_file()["NVDLA_SDP"]
    for name, value in values.items():
        regs.write(UNITS["NVDLA_SDP"].registers[name], value & 0xFFFFFFFF)
    return regs.group(0)


def _info(le_offset: int, le_select: int, lo_select: int) -> int:
    return (le_offset & 0xFF) | ((le_select & 0xFF) << 8) | ((lo_select & 0xFF) << 16)


CONFIGS = {
    # LE linear from -300 with select 3, LO linear from 100 with select 1, LO wins hybrids
    "linear": dict(S_LUT_CFG=1 | 0x40, S_LUT_INFO=_info(0, 3, 1), S_LUT_LE_START=-300,
                   S_LUT_LE_END=212, S_LUT_LO_START=100, S_LUT_LO_END=612),
    # negative selects: indexes shift left, no fraction; underflows to LO, overflows to LE
    "negative_select": dict(S_LUT_CFG=1 | 0x10, S_LUT_INFO=_info(0, -2, -1),
                            S_LUT_LE_START=-40, S_LUT_LO_START=-90),
    # selects past the 35-bit fraction, and an unsigned-looking start
    "wide_select": dict(S_LUT_CFG=1 | 0x20, S_LUT_INFO=_info(0, 40, 37),
                        S_LUT_LE_START=-(1 << 30), S_LUT_LO_START=-(1 << 31)),
    # exponential LE with a positive offset (the underflow bias) and LO linear
    "exponential": dict(S_LUT_CFG=0 | 0x70, S_LUT_INFO=_info(3, 0, 4), S_LUT_LE_START=-7,
                        S_LUT_LE_END=1 << 20, S_LUT_LO_START=0,
                        S_LUT_LO_END=1 << 12),
    # exponential LE with a negative offset
    "exponential_negative_offset": dict(S_LUT_CFG=0, S_LUT_INFO=_info(-3, 0, 6),
                                        S_LUT_LE_START=0, S_LUT_LO_START=-500),
}
SLOPES = dict(S_LUT_LE_SLOPE_SCALE=(-3 & 0xFFFF) | (5 << 16),
              S_LUT_LE_SLOPE_SHIFT=2 | (31 << 5),              # shifts 2 and -1
              S_LUT_LO_SLOPE_SCALE=7 | ((-11 & 0xFFFF) << 16),
              S_LUT_LO_SLOPE_SHIFT=29 | (30 << 5))             # shifts -3 and -2


def _values(rng, regs) -> np.ndarray:
    edges = [v for k, v in regs.items() if k.endswith(("_START", "_END"))] + [0]
    near = np.array([e + d for e in edges for d in range(-3, 4)] + [e * 2 for e in edges])
    powers = np.array([s * ((1 << k) + d) for k in range(36) for d in (-1, 0, 1)
                       for s in (1, -1)])
    wide = rng.integers(-(1 << 31), 1 << 31, 2000)
    small = rng.integers(-2000, 2000, 2000)
    return np.clip(np.concatenate([near, powers, wide, small]), -(1 << 31),
                   (1 << 31) - 1).astype(np.int64)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_compiled_lookup_is_the_plain_one(name):
    rng = np.random.default_rng(len(name))
    ram = LutRam()
    ram.le[:] = rng.integers(-32768, 32768, ram.le.size)
    ram.lo[:] = rng.integers(-32768, 32768, ram.lo.size)
    regs = {**CONFIGS[name], **SLOPES}
    g = sdp_group(**regs)
    x = _values(rng, regs).reshape(1, 1, -1)
    want, want_counts = lookup(x, ram, g)
    table = lut_y.y_table(ram, g)       # values inside its window and outside it
    for got, got_counts in (lut_y.lookup(x, ram, g), lut_y.lookup(x, ram, g, table)):
        assert got.shape == want.shape
        assert np.array_equal(got, want), np.flatnonzero(got != want)[:10]
        assert got_counts == want_counts
    window = np.arange(-lut_y.HALF, lut_y.HALF, dtype=np.int64)
    assert np.array_equal(table.values, lookup(window, ram, g)[0])
    if name in ("linear", "negative_select"):     # every kind of element is in the sample
        assert min(want_counts[k] for k in ("uflow", "oflow", "le_hit", "lo_hit")) > 0
