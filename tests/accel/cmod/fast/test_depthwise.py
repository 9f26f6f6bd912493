"""``depthwise_sums`` against a plain reference: im2col of one channel and an int64
product, for random geometries (strides, dilation, padding with a non-zero value,
windows that stop short of the input) and extreme operands."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accel.cmod.csc import ConvGeometry
from accel.cmod.fast.depthwise import depthwise_sums


def _reference(x: np.ndarray, taps: np.ndarray, geo: ConvGeometry) -> np.ndarray:
    """Each output written out from its definition, int64."""
    n = x.shape[0]
    out = np.zeros((n, geo.out_h, geo.out_w), dtype=np.int64)
    h, w = x.shape[1:]
    for ch in range(n):
        for oy in range(geo.out_h):
            for ox in range(geo.out_w):
                total = 0
                for i in range(geo.r):
                    for j in range(geo.s):
                        y = oy * geo.stride_y + i * geo.dil_y - geo.pad_top
                        xx = ox * geo.stride_x + j * geo.dil_x - geo.pad_left
                        inside = 0 <= y < h and 0 <= xx < w
                        v = int(x[ch, y, xx]) if inside else geo.pad_value
                        total += int(taps[ch, i * geo.s + j]) * v
                out[ch, oy, ox] = total
    return out.reshape(n, -1)


def _geometry(r, s, out_h, out_w, sy, sx, dy, dx, top, left, pad_value) -> ConvGeometry:
    return ConvGeometry(r=r, s=s, c=1, k=1, out_h=out_h, out_w=out_w, stride_y=sy,
                        stride_x=sx, dil_y=dy, dil_x=dx, pad_top=top, pad_left=left,
                        pad_value=pad_value)


@settings(max_examples=120, deadline=None)
@given(r=st.integers(1, 4), s=st.integers(1, 4), out_h=st.integers(1, 6),
       out_w=st.integers(1, 6), sy=st.integers(1, 3), sx=st.integers(1, 3),
       dy=st.integers(1, 2), dx=st.integers(1, 2), top=st.integers(0, 3),
       left=st.integers(0, 3), extra_h=st.integers(-2, 2), extra_w=st.integers(-2, 2),
       pad_value=st.integers(-128, 127), extremes=st.booleans(), seed=st.integers(0, 2**31),
       channels_last=st.booleans())
def test_matches_the_definition(r, s, out_h, out_w, sy, sx, dy, dx, top, left, extra_h,
                                extra_w, pad_value, extremes, seed, channels_last):
    geo = _geometry(r, s, out_h, out_w, sy, sx, dy, dx, top, left, pad_value)
    # an input as tall as the windows need without padding, give or take (short inputs
    # leave the bottom/right of the frame to the pad value; long ones are cut off)
    h = max(1, (out_h - 1) * sy + (r - 1) * dy + 1 - top + extra_h)
    w = max(1, (out_w - 1) * sx + (s - 1) * dx + 1 - left + extra_w)
    rng = np.random.default_rng(seed)
    values = np.array([-128, 127]) if extremes else np.arange(-128, 128)
    x = rng.choice(values, (3, h, w)).astype(np.int8)
    taps = rng.choice(values, (3, r * s)).astype(np.int8)
    np.testing.assert_array_equal(depthwise_sums(x, taps, geo, channels_last),
                                  _reference(x, taps, geo))



@settings(max_examples=80, deadline=None)
@given(out_h=st.integers(1, 7), out_w=st.integers(1, 40), sy=st.integers(1, 3),
       sx=st.integers(1, 3), dy=st.integers(1, 2), dx=st.integers(1, 2),
       top=st.integers(0, 2), left=st.integers(0, 2), extra=st.integers(-2, 2),
       n=st.integers(1, 70), pad_value=st.integers(-128, 127), extremes=st.booleans(),
       seed=st.integers(0, 2**31), channels_last=st.booleans())
def test_3x3_kernels_match_the_definition(out_h, out_w, sy, sx, dy, dx, top, left, extra, n,
                                          pad_value, extremes, seed, channels_last):
    """The 3x3 kernel's own loops (all nine taps in one pass), with rows and channel counts
    long enough for their vector bodies."""
    geo = _geometry(3, 3, out_h, out_w, sy, sx, dy, dx, top, left, pad_value)
    h = max(1, (out_h - 1) * sy + 2 * dy + 1 - top + extra)
    w = max(1, (out_w - 1) * sx + 2 * dx + 1 - left + extra)
    rng = np.random.default_rng(seed)
    values = np.array([-128, 127]) if extremes else np.arange(-128, 128)
    x = rng.choice(values, (n, h, w)).astype(np.int8)
    taps = rng.choice(values, (n, 9)).astype(np.int8)
    np.testing.assert_array_equal(depthwise_sums(x, taps, geo, channels_last),
                                  _reference(x, taps, geo))

def test_hand_computed_corner():
    """A 3x3 all-ones kernel on a 2x2 input of 10s, padded by 1 with -1: the top-left output
    covers 4 input values and 5 pad positions: 40 - 5 = 35."""
    geo = _geometry(3, 3, 2, 2, 1, 1, 1, 1, 1, 1, -1)
    x = np.full((1, 2, 2), 10, dtype=np.int8)
    for channels_last in (False, True):
        got = depthwise_sums(x, np.ones((1, 9), dtype=np.int8), geo, channels_last)
        assert got.tolist() == [[35, 35, 35, 35]]


def test_largest_sums_fit():
    """(-128) * (-128) at every tap of an 11x11 kernel: 121 * 2**14."""
    geo = _geometry(11, 11, 1, 1, 1, 1, 1, 1, 0, 0, 0)
    x = np.full((2, 11, 11), -128, dtype=np.int8)
    for channels_last in (False, True):
        got = depthwise_sums(x, np.full((2, 121), -128, dtype=np.int8), geo, channels_last)
        assert (got == 121 * 16384).all()


def test_negative_padding_and_pad_values_past_int8_are_refused():
    with pytest.raises(ValueError, match="padded by"):
        depthwise_sums(np.zeros((1, 2, 2), np.int8), np.zeros((1, 1), np.int8),
                       _geometry(1, 1, 1, 1, 1, 1, 1, 1, -1, 0, 0))
    for pad_value in (-129, 128):
        with pytest.raises(ValueError, match=f"with {pad_value} is outside"):
            depthwise_sums(np.zeros((1, 2, 2), np.int8), np.zeros((1, 9), np.int8),
                           _geometry(3, 3, 2, 2, 1, 1, 1, 1, 1, 1, pad_value))


@pytest.mark.parametrize("stride", [1, 2, 3])
@pytest.mark.parametrize("width", [64, 67])
@pytest.mark.parametrize("left", [0, 1, 2])
def test_rows_long_enough_for_vector_loops(stride, width, left):
    """Rows of 64 and 67 columns: the frame's copy loops (stride 2 from byte pairs, odd
    widths padded to whole pairs) run their vector bodies, not only their remainders."""
    out_w = (width + 2 * left - 3) // stride + 1
    geo = _geometry(3, 3, 5, out_w, stride, stride, 1, 1, left, left, -7)
    rng = np.random.default_rng(width * 10 + stride + left)
    h = (5 - 1) * stride + 3 - left
    x = rng.integers(-128, 128, (2, h, width), dtype=np.int8)
    taps = rng.integers(-128, 128, (2, 9), dtype=np.int8)
    for channels_last in (False, True):
        np.testing.assert_array_equal(depthwise_sums(x, taps, geo, channels_last),
                                      _reference(x, taps, geo))
