"""The sums of a batch of depthwise convolutions, computed channel by channel.

A depthwise layer reaches a small NVDLA as block convolutions whose kernels each
read one input channel (the other weights are zero).  Their exact sums need
only those taps: ``out[n, y, x] = sum(taps[n, i, j] * plane[n, y*sy + i*dy,
x*sx + j*dx])`` over the kernel, where ``plane`` is channel ``n`` in its padded
frame (the frame :func:`accel.cmod.csc.im2col` builds: ``pad_value`` around the
input, the input clipped to the rows and columns the windows reach).  A loop
compiled by numba computes them from the int8 cube, with no im2col and no
GEMM of ``R * S`` terms per output.  int32 holds them: at most ``R * S``
products of magnitude 2**14.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from accel.cmod.csc import ConvGeometry

#: longest kernel (R * S taps) whose sums int32 holds with room to spare
MAX_TAPS = 1 << 16


@njit(cache=True, nogil=True)
def _sums(x, taps, r, s, sy, sx, dy, dx, pad_top, pad_left, pad_value, out_h, out_w, out):
    n, h, w = x.shape
    frame_h = (out_h - 1) * sy + (r - 1) * dy + 1
    frame_w = (out_w - 1) * sx + (s - 1) * dx + 1
    plane = np.empty((frame_h, frame_w), dtype=np.int32)
    acc = np.empty((out_h, out_w), dtype=np.int32)
    for ch in range(n):
        plane[:, :] = pad_value
        for y in range(h):
            fy = y + pad_top
            if fy < frame_h:
                for xx in range(min(w, frame_w - pad_left)):
                    plane[fy, xx + pad_left] = x[ch, y, xx]
        acc[:, :] = 0
        for i in range(r):
            for j in range(s):
                t = np.int32(taps[ch, i * s + j])
                for oy in range(out_h):
                    line = plane[oy * sy + i * dy]
                    a = acc[oy]
                    x0 = j * dx
                    for ox in range(out_w):
                        a[ox] += t * line[x0 + ox * sx]
        out[ch] = acc.reshape(out_h * out_w)


def depthwise_sums(x: np.ndarray, taps: np.ndarray, geo: ConvGeometry) -> np.ndarray:
    """int32 ``[N, out_h * out_w]``: channel ``n`` of the int8 cube ``x[N, H, W]``
    convolved with its own ``taps[n]`` (int8 ``[N, R * S]``, row-major over the kernel)
    in the geometry ``geo`` (strides, dilation, padding with ``geo.pad_value``)."""
    if geo.r * geo.s > MAX_TAPS or geo.pad_top < 0 or geo.pad_left < 0:
        raise ValueError(f"depthwise_sums: a {geo.r}x{geo.s} kernel padded by "
                         f"({geo.pad_top}, {geo.pad_left}) is outside what it computes")
    n = x.shape[0]
    out = np.empty((n, geo.out_h * geo.out_w), dtype=np.int32)
    _sums(np.ascontiguousarray(x), np.ascontiguousarray(taps).reshape(n, geo.r * geo.s),
          geo.r, geo.s, geo.stride_y, geo.stride_x, geo.dil_y, geo.dil_x, geo.pad_top,
          geo.pad_left, geo.pad_value, geo.out_h, geo.out_w, out)
    return out
