"""int8 PDP pooling and SDP X1 element-wise reference: hand-computed edge cases.

Expected values are worked out by hand from NVDLA_FACTS section 3 (PDP average:
window sum x floor(65536/kw) >> 16 rounded half away from zero, then
x floor(65536/kh) >> 16 rounded again; max/min ignore padding).
"""

from __future__ import annotations

import numpy as np
import pytest

from accel.golden.int8_ref import eltwise_int8, pdp_reciprocal, pool2d_int8


def _x(rows):
    return np.array(rows, dtype=np.int8)[None, None]


def test_reciprocals_are_the_firmware_table():
    assert [pdp_reciprocal(k) for k in range(1, 9)] == \
        [0x10000, 0x8000, 0x5555, 0x4000, 0x3333, 0x2AAA, 0x2492, 0x2000]
    with pytest.raises(ValueError, match="kernel size 9"):
        pdp_reciprocal(9)


@pytest.mark.parametrize("total, want", [
    (1, 1),     # 1*0x8000>>16 = 0.5 -> 1; 1*0x8000>>16 = 0.5 -> 1 (one rounding: 0.25 -> 0)
    (-1, -1),   # halves away from zero on the negative side too
    (5, 2),     # 2.5 -> 3; 1.5 -> 2 (one rounding: 1.25 -> 1)
    (-5, -2),
    (6, 2),     # 3; 1.5 -> 2
    (4, 1),     # exact
])
def test_avg_2x2_rounds_twice(total, want):
    # a 2x2 window whose values sum to `total`
    x = _x([[total, 0], [0, 0]])
    assert pool2d_int8(x, "avg", 2, stride=2).item() == want


@pytest.mark.parametrize("total, want", [
    (9, 1),     # 9*21845=196605 -> 2.99998 -> 3; 3*21845=65535 -> 0.99998 -> 1
    (4, 0),     # 1.333 -> 1; 0.333 -> 0
    (5, 1),     # 1.667 -> 2; 0.667 -> 1
    (25, 3),    # 8.333 -> 8; 2.667 -> 3
    (-25, -3),
    (20, 2),    # 6.667 -> 7; 2.333 -> 2
])
def test_avg_3x3_with_reciprocal_0x5555(total, want):
    x = np.zeros((3, 3), dtype=np.int64)
    x[1, 1] = total if abs(total) <= 127 else 0
    assert pool2d_int8(_x(x), "avg", 3).item() == want


def test_avg_counts_padding_with_pad_value():
    # 1x1 input, 3x3 window with one cell of padding on every side: 8 padded cells.
    x = _x([[9]])
    assert pool2d_int8(x, "avg", 3, pads=(1, 1, 1, 1)).item() == 1          # 9/9
    # pad_value 2: sum 9 + 8*2 = 25 -> 8.333 -> 8 -> 2.667 -> 3
    assert pool2d_int8(x, "avg", 3, pads=(1, 1, 1, 1), pad_value=2).item() == 3
    # padding zeros dilute the average: sum 9 over 9 cells of which 8 padded
    x = _x([[100]])
    assert pool2d_int8(x, "avg", 3, pads=(1, 1, 1, 1)).item() == 11          # 33.33->33, 11


def test_max_and_min_ignore_padding():
    x = _x([[-5, -7], [-9, -6]])
    y = pool2d_int8(x, "max", 2, stride=1, pads=(1, 1, 1, 1))
    # each output sees only real cells; padded zeros must not win the max
    assert y[0, 0].tolist() == [[-5, -5, -7], [-5, -5, -6], [-9, -6, -6]]
    x = _x([[5, 7], [9, 6]])
    y = pool2d_int8(x, "min", 2, stride=1, pads=(1, 1, 1, 1))
    assert y[0, 0].tolist() == [[5, 5, 7], [5, 5, 6], [9, 6, 6]]


def test_max_pool_stride_and_saturated_extremes():
    x = _x([[-128, 127, 0, 1], [3, 4, -128, -128]])
    assert pool2d_int8(x, "max", (2, 2), stride=2)[0, 0].tolist() == [[127, 1]]
    assert pool2d_int8(x, "min", (2, 2), stride=2)[0, 0].tolist() == [[-128, -128]]
    assert pool2d_int8(x, "avg", (2, 2), stride=2)[0, 0].tolist() == [[2, -64]]  # 6/4 -> 2 (1.5)


def test_avg_result_saturates_to_int8():
    # pad_value 127*2 per padded cell pushes the mean past 127
    x = _x([[127]])
    assert pool2d_int8(x, "avg", 2, pads=(0, 0, 1, 1), pad_value=300).item() == 127


def test_pool_rejects_hardware_limits():
    x = _x([[1] * 10] * 10)
    with pytest.raises(ValueError, match="kernel size 9"):
        pool2d_int8(x, "avg", 9)
    with pytest.raises(ValueError, match="stride"):
        pool2d_int8(x, "avg", 2, stride=17)
    # max and min are window extrema of any size (the DLA composes large windows)
    assert pool2d_int8(x, "max", 9, stride=17).shape == (1, 1, 1, 1)
    with pytest.raises(ValueError, match="kind 'mean'"):
        pool2d_int8(x, "mean", 2)
    with pytest.raises(TypeError, match="integer"):
        pool2d_int8(x.astype(np.float32), "max", 2)


def test_eltwise_sum_wider_than_int8_then_converter():
    a = np.array([100, -100, 127, 3, -3], dtype=np.int8)
    b = np.array([100, -100, 127, 2, -2], dtype=np.int8)
    # plain sum saturates at the int8 output
    assert eltwise_int8(a, b, "sum").tolist() == [127, -128, 127, 5, -5]
    # halving in the X1 truncate keeps the 33-bit sum: 200/2, -200/2, 254/2, 2.5->3, -2.5->-3
    assert eltwise_int8(a, b, "sum", mul_shift=1).tolist() == [100, -100, 127, 3, -3]
    # the same halving in the output converter
    assert eltwise_int8(a, b, "sum", cvt_shift=1).tolist() == [100, -100, 127, 3, -3]


def test_eltwise_operand_shift_max_min_relu():
    a = np.array([10, -10, 0, 5], dtype=np.int8)
    b = np.array([3, -3, -1, 2], dtype=np.int8)
    # b << 2 = [12, -12, -4, 8]
    assert eltwise_int8(a, b, "max", alu_shift=2).tolist() == [12, -10, 0, 8]
    assert eltwise_int8(a, b, "min", alu_shift=2).tolist() == [10, -12, -4, 5]
    assert eltwise_int8(a, b, "sum", alu_shift=2, relu=True).tolist() == [22, 0, 0, 13]
    # multiplier 3 with shift 2: (a+b)*3/4 -> [9.75, -9.75, -0.75, 5.25] -> [10, -10, -1, 5]
    assert eltwise_int8(a, b, "sum", mul=3, mul_shift=2).tolist() == [10, -10, -1, 5]
    # converter offset: (s - 4) for s = a + b = [13, -13, -1, 7]
    assert eltwise_int8(a, b, "sum", cvt_offset=4).tolist() == [9, -17, -5, 3]


def test_eltwise_errors_name_the_value():
    a = np.zeros(3, np.int8)
    with pytest.raises(ValueError, match="'sub'"):
        eltwise_int8(a, a, "sub")
    with pytest.raises(ValueError, match="shape"):
        eltwise_int8(a, np.zeros(4, np.int8), "sum")
    with pytest.raises(ValueError, match="alu_shift"):
        eltwise_int8(a, a, "sum", alu_shift=64)
