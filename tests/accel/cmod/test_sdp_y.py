"""SDP Y (EW) stage and its LUT against hand-computed cases."""

from __future__ import annotations

import numpy as np

from accel.cmod.csb import make_register_file
from accel.cmod.lut import LutRam
from accel.cmod.sdp_y import lookup, y_stage
from accel.config import get_preset
from accel.regs import UNITS


def _sdp(**values):
    regs = make_register_file()["NVDLA_SDP"]
    for name, value in values.items():
        regs.write(UNITS["NVDLA_SDP"].registers[name], value)
    return regs.group(0)


def _ram(le=None, lo=None) -> LutRam:
    ram = LutRam()
    if le is not None:
        ram.le[:] = le
    if lo is not None:
        ram.lo[:] = lo
    return ram


def _lookup(x, ram, **regs):
    base = {"S_LUT_CFG": 1, "S_LUT_LO_START": 1000}  # LE linear; LO underflows below 1000
    out, counts = lookup(np.array(x, dtype=np.int64), ram, _sdp(**{**base, **regs}))
    return out.tolist(), counts


def test_linear_hit_interpolates_with_35_bit_fraction():
    # select 2: x = 9 -> index 2, fraction 1/4: 20 * 3/4 + 30 * 1/4 = 22.5 -> 23
    out, counts = _lookup([9], _ram(le=np.arange(65) * 10), S_LUT_INFO=2 << 8)
    assert out == [23]
    assert counts == {"uflow": 0, "oflow": 0, "le_hit": 1, "lo_hit": 0, "hybrid": 0}


def test_underflow_extrapolates_with_signed_slope_shift():
    ram = _ram(le=np.full(65, 7))
    # x = -4 <= start 0: 7 + (-4 * 3) / 2 = 1
    assert _lookup([-4], ram, S_LUT_LE_SLOPE_SCALE=3, S_LUT_LE_SLOPE_SHIFT=1)[0] == [1]
    # shift field 31 is -1: 7 + (-4 * 3) * 2 = -17
    assert _lookup([-4], ram, S_LUT_LE_SLOPE_SCALE=3, S_LUT_LE_SLOPE_SHIFT=31)[0] == [-17]


def test_exponential_index_fraction_and_underflow_bias():
    ram = _ram(le=np.arange(65) * 64)
    # offset 2, x = 12: log2 = 3 -> index 1, fraction (12 - 8) / 8: 64 + 32
    assert _lookup([12], ram, S_LUT_CFG=0, S_LUT_INFO=2)[0] == [96]
    # x = 3: log2 = 1 < 2 -> underflow; 0 + (3 - (start 0 + bias 2**2)) * 8 = -8
    assert _lookup([3], ram, S_LUT_CFG=0, S_LUT_INFO=2, S_LUT_LE_SLOPE_SCALE=8)[0] == [-8]


def test_priority_between_two_hits_and_hybrid_counter():
    ram = _ram(le=np.full(65, 11), lo=np.full(257, 22))
    out, counts = _lookup([5], ram, S_LUT_LO_START=0)
    assert out == [11] and counts["le_hit"] == 1 and counts["lo_hit"] == 1
    assert counts["hybrid"] == (1 - 2) & 0xFFFFFFFF  # total - uflow - oflow - le - lo
    assert _lookup([5], ram, S_LUT_LO_START=0, S_LUT_CFG=1 | 0x40)[0] == [22]


def test_y_multiplies_before_the_alu():
    # EW: MUL (reg 3, truncate 1) then ALU SUM (reg 5), LUT bypassed:
    # (10 * 3) / 2 + 5 = 20; ALU first would give (10 + 5) * 3 / 2 = 22.5 -> 23
    g = _sdp(D_DP_EW_CFG=(2 << 2) | 0x40, D_DP_EW_MUL_SRC_VALUE=3, D_DP_EW_TRUNCATE_VALUE=1,
             D_DP_EW_ALU_SRC_VALUE=5)
    x = np.array([[[10, -10]]], dtype=np.int64)
    out, counts = y_stage(x, g, None, None, get_preset("nv_large"), LutRam())
    assert out.tolist() == [[[20, -10]]] and counts is None  # -30 / 2 = -15, + 5


def test_y_prelu_passes_non_negative_and_eql():
    g = _sdp(D_DP_EW_CFG=(3 << 2) | 0x20 | 0x40, D_DP_EW_MUL_SRC_VALUE=2,
             D_DP_EW_ALU_SRC_VALUE=7)
    x = np.array([[[7, -3, 0]]], dtype=np.int64)
    out, _ = y_stage(x, g, None, None, get_preset("nv_large"), LutRam())
    # PReLU: 7 -> 7, -3 -> -6, 0 -> 0; EQL with 7: equal -> 0, else 1
    assert out.tolist() == [[[0, 1, 1]]]
