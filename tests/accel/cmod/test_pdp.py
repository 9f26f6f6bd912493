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
