"""LUT lookup (int8 datapath) against hand-computed interpolations and extrapolations."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from accel.cmod.errors import ConfigError
from accel.cmod.lut import LutConfig, LutRam, convert, lookup_int

BASE = LutConfig(le_exponent=False, uflow_lo=False, oflow_lo=False, hybrid_lo=False,
                 le_index_offset=0, le_index_select=0, lo_index_select=0,
                 le_start=0, le_end=64, lo_start=0, lo_end=256,
                 le_uflow_scale=0, le_oflow_scale=0, lo_uflow_scale=0, lo_oflow_scale=0,
                 le_uflow_shift=0, le_oflow_shift=0, lo_uflow_shift=0, lo_oflow_shift=0)


def _ram(le=None, lo=None) -> LutRam:
    ram = LutRam()
    if le is not None:
        ram.le[:] = le
    if lo is not None:
        ram.lo[:] = lo
    return ram


def _lookup(x, ram, **kw):
    out, counts = lookup_int(np.array(x, dtype=np.int64), ram, dataclasses.replace(BASE, **kw))
    return out.tolist(), counts


def test_convert_rounds_half_away_and_saturates():
    assert convert(np.array([5, -5, 7, -7]), 1, 56).tolist() == [3, -3, 4, -4]
    assert convert(np.array([3]), -2, 56).tolist() == [12]  # a negative shift multiplies
    assert convert(np.array([40000, -40000]), 0, 16).tolist() == [32767, -32768]


def test_linear_interpolation_uses_a_16_bit_fraction_rounded_half_away():
    # index select 2: x = 9 -> index 2, fraction 1/4; 20 + 10/4 = 22.5 -> 23
    ram = _ram(le=np.arange(65) * 10, lo=np.zeros(257))
    # LO starts at 1000, so it underflows and LE is the only hit
    out, counts = _lookup([9], ram, le_index_select=2, le_end=256, lo_start=1000)
    assert out == [23] and counts["le_hit"] == 1
    ram = _ram(le=-np.arange(65) * 10)  # -20 - 2.5 -> -23
    assert _lookup([9], ram, le_index_select=2, le_end=256, lo_start=1000)[0] == [-23]


def test_zero_offset_from_start_is_an_underflow_not_a_hit():
    ram = _ram(le=np.arange(65) + 100)
    out, counts = _lookup([7], ram, le_start=7, le_uflow_scale=5, lo_start=7)
    assert out == [100] and counts["uflow"] == 1  # L[0] + 0 * slope


def test_underflow_and_overflow_slopes_with_signed_5_bit_shift():
    ram = _ram(le=np.arange(65) * 2)
    # x - start = -5, scale 3, shift 1: -15 / 2 = -7.5 -> -8
    assert _lookup([-5], ram, le_uflow_scale=3, le_uflow_shift=1)[0] == [-8]
    # shift -1 (field value 31) multiplies: -15 * 2 = -30
    assert _lookup([-5], ram, le_uflow_scale=3, le_uflow_shift=-1)[0] == [-30]
    # overflow: L[64] = 128, x - end = 100 - 64 = 36, scale -1, shift 2: -9 -> 119
    ram.lo[:] = 0
    out, counts = _lookup([300], ram, le_oflow_scale=-1, le_oflow_shift=2,
                          lo_end=256)
    assert counts["oflow"] == 1
    assert out == [128 + (-(300 - 64) // 4)]  # -59: exact, no rounding needed


def test_exponential_index_and_fraction():
    ram = _ram(le=np.arange(65) * 64)
    # offset 2, x = 12: log2 = 3 -> index 1; fraction (12 - 8) / 8 = 0.5 -> 64 + 32
    out, counts = _lookup([12], ram, le_exponent=True, le_index_offset=2, lo_start=1000)
    assert out == [96] and counts["le_hit"] == 1
    # x = 3: log2 = 1 -> index -1, underflow; L[0] + (3 - 0 - 2**2) * 8 = -8
    out, counts = _lookup([3], ram, le_exponent=True, le_index_offset=2, le_uflow_scale=8,
                          lo_start=1000)
    assert out == [-8] and counts["uflow"] == 1


def test_priorities_pick_the_table():
    ram = _ram(le=np.full(65, 11), lo=np.full(257, 22))
    assert _lookup([-1], ram)[0] == [11]  # both underflow, LE priority
    assert _lookup([-1], ram, uflow_lo=True)[0] == [22]
    assert _lookup([5], ram)[0] == [11]  # both hit: hybrid, LE
    out, counts = _lookup([5], ram, hybrid_lo=True)
    assert out == [22] and counts["hybrid"] == 1
    out, counts = _lookup([100], ram)  # LE overflows, LO hits: LO
    assert out == [22] and counts["lo_hit"] == 1


def test_lut_ram_port_increments_and_sticks_at_the_last_entry():
    ram = LutRam()
    ram.access_cfg((1 << 17) | 63)  # write, LE, address 63
    for v in (1, 2, 0xFFFF):
        ram.access_data_write(v)
    assert ram.le[63:].tolist() == [1, -1]  # 2 then 0xFFFF overwrite entry 64
    ram.access_cfg(1 << 16)  # read mode, LO, address 0
    ram.access_data_write(5)  # ignored in read mode
    assert ram.lo[0] == 0
    ram.access_cfg((1 << 17) | 300)  # write LE at an address past 64
    with pytest.raises(ConfigError, match="LUT_ADDR 300"):
        ram.access_data_write(1)


@pytest.mark.parametrize("table, start, count", [(0, 0, 65), (1, 0, 257), (0, 60, 9),
                                                 (1, 250, 3), (1, 256, 4), (0, 10, 0)])
def test_a_block_of_data_writes_is_the_writes_one_by_one(table, start, count):
    rng = np.random.default_rng(start + count)
    values = rng.integers(0, 1 << 32, count).tolist()     # high bits past the 16 ignored
    one, block = LutRam(), LutRam()
    for ram in (one, block):
        ram.access_cfg((1 << 17) | (table << 16) | start)
    for v in values:
        one.access_data_write(v)
    block.access_data_block(values)
    assert one.le.tolist() == block.le.tolist() and one.lo.tolist() == block.lo.tolist()
    assert one.addr == block.addr
    one.access_cfg(table << 16)                           # read mode: both ignore writes
    block.access_cfg(table << 16)
    block.access_data_block([7, 8])
    assert block.le.tolist() == one.le.tolist() and block.lo.tolist() == one.lo.tolist()
