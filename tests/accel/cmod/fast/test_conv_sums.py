"""``conv_sums``: a convolution's exact sums of products, through the integer engine with
packed weights (large convolutions) or BLAS, against an int64 reference written from
the definition of the convolution (zero-based output pixel, kernel tap, channel)."""

from __future__ import annotations

import numpy as np
import pytest

from accel.cmod.csc import ConvGeometry, im2col, im2col_rows
from accel.cmod.fast import gemm
from accel.cmod.fast.paths import ROWS_MIN_CHANNELS, conv_sums


def _reference(x: np.ndarray, w: np.ndarray, geo: ConvGeometry) -> np.ndarray:
    """int64 ``[K, out_h*out_w]``, one kernel tap at a time over a padded int64 frame."""
    c, h, wd = x.shape
    k = w.shape[0]
    top, left = geo.pad_top, geo.pad_left
    frame_h = max(h + top, (geo.out_h - 1) * geo.stride_y + (geo.r - 1) * geo.dil_y + 1)
    frame_w = max(wd + left, (geo.out_w - 1) * geo.stride_x + (geo.s - 1) * geo.dil_x + 1)
    frame = np.full((c, frame_h, frame_w), geo.pad_value, dtype=np.int64)
    frame[:, top:top + h, left:left + wd] = x
    out = np.zeros((k, geo.out_h, geo.out_w), dtype=np.int64)
    for i in range(geo.r):
        for j in range(geo.s):
            ys, xs = i * geo.dil_y, j * geo.dil_x
            tap = frame[:, ys:ys + (geo.out_h - 1) * geo.stride_y + 1:geo.stride_y,
                        xs:xs + (geo.out_w - 1) * geo.stride_x + 1:geo.stride_x]
            out += np.einsum("kc,chw->khw", w[:, :, i, j].astype(np.int64), tap)
    return out.reshape(k, -1)


CASES = [  # c, k, h, w, r, s, stride, dilation, pad, pad value
    (64, 64, 32, 32, 3, 3, 1, 1, 1, 0),
    (72, 40, 20, 18, 3, 3, 2, 1, 1, -7),      # channels off the atom, a non-zero pad value
    (64, 24, 16, 16, 5, 3, 1, 2, 2, 127),
    (32, 24, 16, 16, 5, 3, 1, 2, 2, 127),     # few channels: patches per run
    (96, 64, 28, 28, 1, 1, 1, 1, 0, 0),       # 1x1: the frame's pixels are the patches
    (72, 16, 30, 30, 1, 1, 2, 1, 0, 0),
    (8, 8, 6, 6, 3, 3, 1, 1, 1, 3),           # small: BLAS
]


@pytest.mark.parametrize("c,k,h,w,r,s,stride,dil,pad,pad_value", CASES)
def test_conv_sums_match_the_definition(c, k, h, w, r, s, stride, dil, pad, pad_value):
    rng = np.random.default_rng(c * k + h)
    out_h = (h + 2 * pad - (r - 1) * dil - 1) // stride + 1
    out_w = (w + 2 * pad - (s - 1) * dil - 1) // stride + 1
    geo = ConvGeometry(r=r, s=s, c=c, k=k, out_h=out_h, out_w=out_w, stride_y=stride,
                       stride_x=stride, dil_y=dil, dil_x=dil, pad_top=pad, pad_left=pad,
                       pad_value=pad_value)
    x = rng.integers(-128, 128, (c, h, w)).astype(np.int8)
    x[:, : h // 3] = -128                      # a block of extremes: products of 2**14
    wt = rng.integers(-128, 128, (k, c, r, s)).astype(np.int8)
    wt[: k // 2, :, 0, 0] = -128
    weights = gemm.Weights(wt.reshape(k, -1), (k, c, r, s))
    got = conv_sums(weights, x, geo)
    want = _reference(x, wt, geo)
    np.testing.assert_array_equal(got, want)
    large = (k * c * r * s * out_h * out_w >= gemm.INT_ENGINE_MIN_MACS and r * s > 1
             and c >= ROWS_MIN_CHANNELS)
    assert (weights._taps_last is not None) == (large and gemm.int_engine() is not None)


def test_rows_are_the_columns_transposed_in_tap_order():
    """im2col_rows holds im2col's patches, its taps reordered (R, S, C)."""
    rng = np.random.default_rng(4)
    geo = ConvGeometry(r=3, s=2, c=5, k=1, out_h=4, out_w=3, stride_y=2, stride_x=1,
                       dil_y=1, dil_x=2, pad_top=1, pad_left=2, pad_value=-3)
    x = rng.integers(-128, 128, (5, 7, 4)).astype(np.int8)
    cols = im2col(x, geo).reshape(5, 3, 2, -1)             # [C, R, S, N]
    rows = im2col_rows(x, geo).reshape(-1, 3, 2, 5)        # [N, R, S, C]
    np.testing.assert_array_equal(rows, cols.transpose(3, 1, 2, 0))


def test_offset_rows_are_the_rows_plus_128():
    rng = np.random.default_rng(5)
    geo = ConvGeometry(r=3, s=3, c=4, k=1, out_h=3, out_w=3, stride_y=1, stride_x=1,
                       dil_y=1, dil_x=1, pad_top=1, pad_left=1, pad_value=-128)
    x = rng.integers(-128, 128, (4, 3, 3)).astype(np.int8)
    rows = im2col_rows(x, geo).astype(np.int16)
    offset = im2col_rows(x, geo, offset=True)
    assert offset.dtype == np.uint8
    np.testing.assert_array_equal(offset.astype(np.int16), rows + 128)
    assert offset[0, 0] == 0                   # the pad value -128 at a corner tap


@pytest.mark.parametrize("stray", [False, True])
def test_block_of_a_depthwise_layer(stray):
    """8 kernels each reading only its own channel sum their taps per channel
    (``Weights.diagonal``); one stray weight off the diagonal sends them to the GEMM. The
    sums equal the definition's either way."""
    rng = np.random.default_rng(11)
    geo = ConvGeometry(r=3, s=3, c=8, k=8, out_h=13, out_w=17, stride_y=2, stride_x=2,
                       dil_y=1, dil_x=1, pad_top=1, pad_left=0, pad_value=-5)
    x = rng.integers(-128, 128, (8, 26, 35)).astype(np.int8)
    wt = np.zeros((8, 8, 3, 3), dtype=np.int8)
    for ch in range(8):
        wt[ch, ch] = rng.integers(-128, 128, (3, 3))
    wt[0, 0] = -128                            # products of 2**14
    if stray:
        wt[2, 5, 1, 1] = 1
    weights = gemm.Weights(wt.reshape(8, -1), (8, 8, 3, 3))
    np.testing.assert_array_equal(conv_sums(weights, x, geo), _reference(x, wt, geo))
    assert (weights.diagonal is None) == stray
    if not stray:
        np.testing.assert_array_equal(weights.diagonal, wt[np.arange(8), np.arange(8)]
                                      .reshape(8, 9))
