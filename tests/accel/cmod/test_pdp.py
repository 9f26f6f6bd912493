"""PDP pooling against hand-computed windows."""

from __future__ import annotations

import numpy as np

from accel.cmod.pdp import AVERAGE, MAX, MIN, pool

X = np.array([[[1, -2, 3],
               [4, 5, -6]]])  # C=1, H=2, W=3


def test_max_and_min_ignore_padding():
    # 2x2 windows, stride 1, one padded column on the left: window 0 = {pad,1,pad,4}
    out = pool(X, MAX, (2, 2), (1, 1), (0, 1), (1, 3))
    assert out.tolist() == [[[4, 5, 5]]]
    # all inputs negative-or-positive: min never sees a padded zero
    out = pool(-np.abs(X) - 1, MIN, (2, 2), (1, 1), (0, 1), (1, 3))
    assert out.tolist() == [[[-5, -6, -7]]]


def test_average_adds_pad_values_per_row_and_kernel_width_per_padded_row():
    pv = np.array([0, 10, 20, 30, 40, 50, 60, 70])
    # 3x3 window at output (0,0) with pad top 1, left 1 over the 2x3 input:
    # real rows 0,1 each have 1 padded column -> 2 * pv[1] = 20
    # 1 padded row -> kw * pv[1] = 30 ; real cells 1 - 2 + 4 + 5 = 8 ; total 58
    out = pool(X, AVERAGE, (3, 3), (1, 1), (1, 1), (1, 1), pv, (1 << 16, 1 << 16))
    assert out.tolist() == [[[58]]]


def test_average_reciprocals_round_twice_half_away_from_zero():
    x = np.array([[[-1, -2], [-3, -1]]])  # sum -7 over a 2x2 window
    # width: -7 * 0x8000 / 2**16 = -3.5 -> -4 ; height: -4 * 0x8000 / 2**16 = -2
    out = pool(x, AVERAGE, (2, 2), (1, 1), (0, 0), (1, 1), None, (0x8000, 0x8000))
    assert out.tolist() == [[[-2]]]
    # one rounding of -7/4 = -1.75 would give -2 as well; -5 shows the double rounding:
    x = np.array([[[-1, -1], [-2, -1]]])  # -5: -2.5 -> -3, then -1.5 -> -2 (single: -1)
    out = pool(x, AVERAGE, (2, 2), (1, 1), (0, 0), (1, 1), None, (0x8000, 0x8000))
    assert out.tolist() == [[[-2]]]


def test_average_three_wide_uses_floor_reciprocal():
    x = np.full((1, 3, 3), 100)
    # 900 * 0x5555 / 2**16 = 299.995 -> 300 ; 300 * 0x5555 / 2**16 = 99.998 -> 100
    out = pool(x, AVERAGE, (3, 3), (1, 1), (0, 0), (1, 1), None, (0x5555, 0x5555))
    assert out.tolist() == [[[100]]]


def _pdp_split_regs(split_num, win, wout, pad_left=1, pad_right=1, method=MAX):
    from accel.cmod.csb import make_register_file
    from accel.regs import UNITS

    regs = make_register_file()["NVDLA_PDP"]
    r = UNITS["NVDLA_PDP"].registers
    regs.write(r["D_OPERATION_MODE_CFG"], method | (split_num << 8))
    regs.write(r["D_POOLING_PADDING_CFG"], pad_left | (pad_right << 8))
    regs.write(r["D_PARTIAL_WIDTH_IN"], (win[0] - 1) | ((win[2] - 1) << 10) | ((win[1] - 1) << 20))
    regs.write(r["D_PARTIAL_WIDTH_OUT"],
               (wout[0] - 1) | ((wout[2] - 1) << 10) | ((wout[1] - 1) << 20))
    return regs.group(0)


def test_split_width_slices_overlap_and_pad_only_at_the_cube_edges():
    from accel.cmod.pdp import split_plan

    # 3-wide max, stride 1, pad 1 | 1 over 6 columns, split 2 + 2 + 2 in, 1 + 2 + 3 out:
    # slice 0 reads [0, 2) with the left pad, slice 1 [0, 4) (2 overlap columns),
    # slice 2 [2, 6) with the right pad
    g = _pdp_split_regs(2, (2, 2, 2), (1, 2, 3))
    assert split_plan(g, 3, 1, 6, 6) == [(0, 2, 1, 0, 1), (0, 4, 0, 1, 2), (2, 4, 0, 3, 3)]


def test_split_output_widths_must_cover_the_output_cube():
    import pytest

    from accel.cmod.errors import ConfigError
    from accel.cmod.pdp import split_plan

    g = _pdp_split_regs(2, (2, 2, 2), (1, 2, 2))
    with pytest.raises(ConfigError, match="D_PARTIAL_WIDTH_OUT"):
        split_plan(g, 3, 1, 6, 6)
    g = _pdp_split_regs(2, (2, 2, 9), (1, 2, 3))  # last slice runs past column 6
    with pytest.raises(ConfigError, match="outside the 6-wide input cube"):
        split_plan(g, 3, 1, 6, 6)
