"""CACC: 34-bit saturation, clip-truncate rounding and int32 saturation count."""

from __future__ import annotations

import numpy as np

from accel.cmod.cacc import accumulate, clip_truncate, fits_int32


def test_round_half_away_from_zero_on_negative_halves():
    # hand-computed: -5/2 = -2.5 -> -3, -6/4 = -1.5 -> -2, -7/4 = -1.75 -> -2, -1/2 -> -1
    out, sat = clip_truncate(np.array([-5, -6, -7, -1, 5, 6, 1]), np.array([1, 2, 2, 1, 1, 2, 1]))
    assert out.tolist() == [-3, -2, -2, -1, 3, 2, 1]
    assert sat == 0


def test_truncate_zero_is_identity():
    x = np.array([-(2**31), 2**31 - 1, 0, -1])
    out, sat = clip_truncate(x, 0)
    assert out.tolist() == x.tolist() and sat == 0


def test_34_bit_saturation_of_partial_sums():
    x = np.array([2**33, 2**33 - 1, -(2**33) - 5, 2**40])
    assert accumulate(x).tolist() == [2**33 - 1, 2**33 - 1, -(2**33), 2**33 - 1]


def test_int32_saturation_is_counted():
    acc = accumulate(np.array([2**33 - 1, -(2**33), 2**32, 3]))
    out, sat = clip_truncate(acc.copy(), 1)  # clip_truncate works in place
    # (2**33-1)/2 = 2**32 - 0.5 -> 2**32 > int32 max; -(2**32) < int32 min; 2**31 > max
    assert out.tolist() == [2**31 - 1, -(2**31), 2**31 - 1, 2]
    assert sat == 3
    out, sat = clip_truncate(acc, 16)
    assert out.tolist() == [131072, -131072, 65536, 0] and sat == 0


def test_sums_of_few_products_never_saturate_int32():
    # 131071 products of (-128) * (-128) = 2**14 sum to 2**31 - 2**14: within int32, the
    # count can be skipped; 131072 of them reach 2**31 and must be counted
    assert fits_int32(131071) and not fits_int32(131072) and not fits_int32(None)
    out, sat = clip_truncate(np.array([131072 * 2**14]), 0, terms=131072)
    assert out.tolist() == [2**31 - 1] and sat == 1
    out, sat = clip_truncate(np.array([131071 * 2**14, -131071 * 2**14]), 0, terms=131071)
    assert out.tolist() == [131071 * 2**14, -131071 * 2**14] and sat == 0
