"""The sums of a batch of depthwise convolutions, computed channel by channel.

A depthwise layer reaches a small NVDLA as block convolutions whose kernels each
read one input channel (the other weights are zero).  Their exact sums need
only those taps: ``out[n, y, x] = sum(taps[n, i, j] * plane[n, y*sy + i*dy,
x*sx + j*dx])`` over the kernel, where ``plane`` is channel ``n`` in its padded
frame (the frame :func:`accel.cmod.csc.im2col` builds: ``pad_value`` around the
input, the input clipped to the rows and columns the windows reach).  A loop
compiled by numba computes them from the int8 cube, with no im2col and no
GEMM of ``R * S`` terms per output; a 3x3 kernel, the one of nearly every
depthwise layer, in one pass over the outputs for all nine taps.  int32 holds
the sums: at most ``R * S`` products of magnitude 2**14.
"""

from __future__ import annotations

import sys

import numpy as np

from accel.cmod.csc import ConvGeometry
from accel.jit import njit

#: longest kernel (R * S taps) whose sums int32 holds with room to spare
MAX_TAPS = 1 << 16


@njit(inline="always")
def _frame(x, pairs, ch, sx, pad_top, pad_left, rows, width, phases):
    """Copy channel ``ch`` of ``x`` (its first ``rows`` rows and ``width`` columns) into
    its place in ``phases`` (int32), phase ``p`` holding frame columns ``p, p + sx, ...``.

    Each stride has its own loops, which compile to vector code: contiguous rows for
    stride 1; for stride 2, the rows of ``pairs`` when given (not empty: ``x`` as int16,
    little-endian, column ``2i`` in the low byte of ``pairs[..., i]`` and ``2i + 1`` in
    the high byte), where a strided byte loop moves one value at a time."""
    for p in range(sx):
        # frame column q * sx + p holds input column q * sx + p - pad_left
        q = max(0, (pad_left - p + sx - 1) // sx)
        xx = q * sx + p - pad_left
        count = max(0, (width - xx + sx - 1) // sx)
        if sx == 1:
            for y in range(rows):
                src = x[ch, y, xx:xx + count]
                dst = phases[p, y + pad_top, q:q + count]
                for m in range(count):
                    dst[m] = src[m]
        elif sx == 2 and pairs.shape[2]:
            first = xx // 2
            for y in range(rows):
                half = pairs[ch, y, first:first + count]
                dst = phases[p, y + pad_top, q:q + count]
                if xx % 2:
                    for m in range(count):
                        dst[m] = half[m] >> 8                # the high byte, sign-extended
                else:
                    for m in range(count):
                        dst[m] = np.int8(half[m] & 0xFF)     # the low byte, sign-extended
        else:
            for y in range(rows):
                src = x[ch, y]
                dst = phases[p, y + pad_top, q:q + count]
                for m in range(count):
                    dst[m] = src[xx + m * sx]


# A 3x3 kernel's own loops: all nine taps in one pass over the outputs, where the general
# loops make a pass per tap, each reading and writing the sums again.


@njit(inline="always")
def _line(phases, y, fx, sx, count):
    """``count`` values of frame row ``y`` from frame column ``fx`` on, every ``sx``-th
    (the row of phase ``fx % sx``, see :func:`_sums`)."""
    first = fx // sx
    return phases[fx % sx, y, first:first + count]


@njit(inline="always")
def _row3x3(a, phases, t, y, sx, dy, dx):
    """Output row ``a`` of a 3x3 kernel with taps ``t`` (row-major), whose first tap row
    is frame row ``y``."""
    n = a.shape[0]
    y1, y2 = y + dy, y + 2 * dy
    l0, l1, l2 = _line(phases, y, 0, sx, n), _line(phases, y, dx, sx, n), _line(
        phases, y, 2 * dx, sx, n)
    l3, l4, l5 = _line(phases, y1, 0, sx, n), _line(phases, y1, dx, sx, n), _line(
        phases, y1, 2 * dx, sx, n)
    l6, l7, l8 = _line(phases, y2, 0, sx, n), _line(phases, y2, dx, sx, n), _line(
        phases, y2, 2 * dx, sx, n)
    t0, t1, t2 = np.int32(t[0]), np.int32(t[1]), np.int32(t[2])
    t3, t4, t5 = np.int32(t[3]), np.int32(t[4]), np.int32(t[5])
    t6, t7, t8 = np.int32(t[6]), np.int32(t[7]), np.int32(t[8])
    for i in range(n):
        a[i] = (t0 * l0[i] + t1 * l1[i] + t2 * l2[i] + t3 * l3[i] + t4 * l4[i]
                + t5 * l5[i] + t6 * l6[i] + t7 * l7[i] + t8 * l8[i])


@njit(cache=True, nogil=True, error_model="numpy")
def _channels_last3x3(x, taps, sy, sx, dy, dx, pad_top, pad_left, pad_value, out_h, out_w,
                      out):
    """:func:`_sums_channels_last` of a 3x3 kernel."""
    h, w, n = x.shape
    t = taps.astype(np.int32)
    t0, t1, t2, t3, t4, t5, t6, t7, t8 = t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8]
    pad = np.full(n, pad_value, dtype=x.dtype)       # a pixel outside the input
    for oy in range(out_h):
        y0 = oy * sy - pad_top
        y1, y2 = y0 + dy, y0 + 2 * dy
        in0, in1, in2 = 0 <= y0 < h, 0 <= y1 < h, 0 <= y2 < h
        for ox in range(out_w):
            x0 = ox * sx - pad_left
            x1, x2 = x0 + dx, x0 + 2 * dx
            # (written out: an inlined helper returning the pixel or the pad row keeps the
            # channel loop from compiling to the same vector code, half as fast)
            left, mid, right = 0 <= x0 < w, 0 <= x1 < w, 0 <= x2 < w
            p0 = x[y0, x0] if in0 and left else pad
            p1 = x[y0, x1] if in0 and mid else pad
            p2 = x[y0, x2] if in0 and right else pad
            p3 = x[y1, x0] if in1 and left else pad
            p4 = x[y1, x1] if in1 and mid else pad
            p5 = x[y1, x2] if in1 and right else pad
            p6 = x[y2, x0] if in2 and left else pad
            p7 = x[y2, x1] if in2 and mid else pad
            p8 = x[y2, x2] if in2 and right else pad
            o = out[oy * out_w + ox]
            for c in range(n):
                o[c] = (t0[c] * np.int32(p0[c]) + t1[c] * np.int32(p1[c])
                        + t2[c] * np.int32(p2[c]) + t3[c] * np.int32(p3[c])
                        + t4[c] * np.int32(p4[c]) + t5[c] * np.int32(p5[c])
                        + t6[c] * np.int32(p6[c]) + t7[c] * np.int32(p7[c])
                        + t8[c] * np.int32(p8[c]))


@njit(cache=True, nogil=True, error_model="numpy")
def _sums(x, pairs, taps, r, s, sy, sx, dy, dx, pad_top, pad_left, pad_value, out_h, out_w,
          out):
    n, h, w = x.shape
    frame_h = (out_h - 1) * sy + (r - 1) * dy + 1
    frame_w = (out_w - 1) * sx + (s - 1) * dx + 1
    # the padded frame split by column into sx phases, phase p holding columns
    # p, p + sx, p + 2 sx, ...: an output row's taps then read consecutive values
    cols = -(-frame_w // sx)
    phases = np.empty((sx, frame_h, cols), dtype=np.int32)
    rows = min(h, frame_h - pad_top)         # input rows inside the frame
    width = min(w, frame_w - pad_left)       # input columns inside the frame
    for ch in range(n):
        phases[:, :, :] = pad_value
        _frame(x, pairs, ch, sx, pad_top, pad_left, rows, width, phases)
        for oy in range(out_h):       # a row's sums stay in cache over the taps
            a = out[ch, oy * out_w:(oy + 1) * out_w]
            if r == 3 and s == 3:
                _row3x3(a, phases, taps[ch], oy * sy, sx, dy, dx)
                continue
            a[:] = 0
            for i in range(r):
                for j in range(s):
                    t = np.int32(taps[ch, i * s + j])
                    fx = j * dx                      # frame column of output 0's tap
                    phase, first = fx % sx, fx // sx
                    line = phases[phase, oy * sy + i * dy, first:first + out_w]
                    for ox in range(out_w):
                        a[ox] += t * line[ox]


@njit(cache=True, nogil=True, error_model="numpy")
def _sums_channels_last(x, taps, r, s, sy, sx, dy, dx, pad_top, pad_left, pad_value,
                        out_h, out_w, out):
    """:func:`_sums` with the channels innermost (``x[H, W, N]``, ``taps[R*S, N]``,
    ``out[out_h*out_w, N]``): loops as long as the channels, for small planes."""
    if r == 3 and s == 3:
        _channels_last3x3(x, taps, sy, sx, dy, dx, pad_top, pad_left, pad_value, out_h, out_w,
                          out)
        return
    h, w, n = x.shape
    acc = np.empty(n, dtype=np.int32)
    for oy in range(out_h):
        for ox in range(out_w):
            acc[:] = 0
            for i in range(r):
                y = oy * sy + i * dy - pad_top
                for j in range(s):
                    xx = ox * sx + j * dx - pad_left
                    tap = taps[i * s + j]
                    if 0 <= y < h and 0 <= xx < w:
                        pixel = x[y, xx]
                        for c in range(n):
                            acc[c] += np.int32(tap[c]) * np.int32(pixel[c])
                    else:
                        for c in range(n):
                            acc[c] += np.int32(tap[c]) * pad_value
            out[oy * out_w + ox] = acc


#: output rows narrower than this, of at least :data:`CHANNELS_LAST_MIN` channels, run
#: channels innermost (:func:`_sums_channels_last`): the rows are too short for the row
#: loops to pay, the channels long enough (measured on mobilenet_v2's depthwise layers)
CHANNELS_LAST_WIDTH = 48
CHANNELS_LAST_MIN = 32
#: channels from which any rows run channels innermost, and from which strided ones do
#: (each output row's taps then read every other input value, which the row loops take
#: one at a time): 1.1-2.2x faster on the 3x3 layers of yolox_nano and mobilenet_v2 of
#: 64-144 channels at stride 1 and 16-144 at stride 2, 52 to 208 columns
CHANNELS_LAST_MANY = 64
CHANNELS_LAST_STRIDED = 16


def _check(geo: ConvGeometry) -> None:
    if (geo.r * geo.s > MAX_TAPS or geo.pad_top < 0 or geo.pad_left < 0
            or not -128 <= geo.pad_value <= 127):
        raise ValueError(f"depthwise_sums: a {geo.r}x{geo.s} kernel padded by "
                         f"({geo.pad_top}, {geo.pad_left}) with {geo.pad_value} is outside "
                         f"what it computes (int8 cubes, int8 pad values)")


def takes_channels_last(n: int, geo: ConvGeometry) -> bool:
    """Whether :func:`depthwise_sums` of ``n`` channels loops over them innermost: output
    rows narrower than :data:`CHANNELS_LAST_WIDTH` of at least :data:`CHANNELS_LAST_MIN`
    channels, any rows of :data:`CHANNELS_LAST_MANY`, strided ones of
    :data:`CHANNELS_LAST_STRIDED`."""
    if geo.stride_x > 1 and n >= CHANNELS_LAST_STRIDED:
        return True
    return n >= CHANNELS_LAST_MANY or (geo.out_w < CHANNELS_LAST_WIDTH
                                        and n >= CHANNELS_LAST_MIN)


def depthwise_sums_hwc(x: np.ndarray, taps: np.ndarray, geo: ConvGeometry) -> np.ndarray:
    """:func:`depthwise_sums` of the cube given channels last, ``x[H, W, N]`` (as a batch
    of cubes read as pixels holds it), the channels looped over innermost; the sums
    channels last too, int32 ``[out_h * out_w, N]``."""
    n = x.shape[2]
    _check(geo)
    out = np.empty((geo.out_h * geo.out_w, n), dtype=np.int32)
    _sums_channels_last(np.ascontiguousarray(x), np.ascontiguousarray(
        taps.reshape(n, geo.r * geo.s).T), geo.r, geo.s, geo.stride_y, geo.stride_x,
        geo.dil_y, geo.dil_x, geo.pad_top, geo.pad_left, geo.pad_value, geo.out_h,
        geo.out_w, out)
    return out


def depthwise_sums(x: np.ndarray, taps: np.ndarray, geo: ConvGeometry,
                   channels_last: bool | None = None) -> np.ndarray:
    """int32 ``[N, out_h * out_w]``: channel ``n`` of the int8 cube ``x[N, H, W]``
    convolved with its own ``taps[n]`` (int8 ``[N, R * S]``, row-major over the kernel)
    in the geometry ``geo`` (strides, dilation, padding with ``geo.pad_value``).

    ``channels_last``: loop over the channels innermost (None: as
    :func:`takes_channels_last` decides); the sums are the same either way."""
    _check(geo)
    n = x.shape[0]
    taps = taps.reshape(n, geo.r * geo.s)
    args = (geo.r, geo.s, geo.stride_y, geo.stride_x, geo.dil_y, geo.dil_x, geo.pad_top,
            geo.pad_left, geo.pad_value, geo.out_h, geo.out_w)
    if channels_last is None:
        channels_last = takes_channels_last(n, geo)
    if channels_last:
        return np.ascontiguousarray(depthwise_sums_hwc(x.transpose(1, 2, 0), taps, geo).T)
    out = np.empty((n, geo.out_h * geo.out_w), dtype=np.int32)
    x = np.ascontiguousarray(x)
    if geo.stride_x == 2 and sys.byteorder == "little":    # rows as byte pairs: _frame
        even = x if x.shape[2] % 2 == 0 else np.pad(x, ((0, 0), (0, 0), (0, 1)))
        pairs = even.view(np.int16)
    else:
        pairs = np.zeros((n, x.shape[1], 0), dtype=np.int16)   # none
    _sums(x, pairs, np.ascontiguousarray(taps), *args, out)
    return out
