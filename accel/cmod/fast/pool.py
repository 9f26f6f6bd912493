"""A PDP operation from memory as one compiled pass over its cube as memory holds it.

:meth:`accel.cmod.pdp.PdpPlan.execute` reads the input cube into planes, pools each
split-width slice with whole-array passes (max / min as two one-dimensional passes,
averages as a gathered ``[C, OH, KH, OW, KW]`` window cube) and writes the planes
back in NVDLA's channel packing.  :func:`pool_packed` computes the same from the
packed atoms themselves (int8 ``[S, H, W, atom]``, a pixel's channels side by side),
line by line (each window's combination over its columns, then over its rows), into
packed atoms: no planes, no window cube.  The arithmetic is the plain model's:
positions outside the input are neutral for max / min (a window wholly outside gives
the neutral value, which the int8 output saturates), and for averages add the pad
values
``(KH - rows outside) * PAD_VALUE[columns outside] + KW * PAD_VALUE[rows outside]``,
then the 32-bit saturation and the two 16.16 reciprocal multiplies, each rounded
(:func:`accel.arith.shift_round_int`).  ``tests/accel/cmod/fast/test_pool.py`` compares
the two on random operations, splits and pad values included.
"""

from __future__ import annotations

import numpy as np

from accel.arith import shift_round_int
from accel.cmod.pdp import AVERAGE, MAX
from accel.jit import njit

_shift_round = njit(inline="always")(shift_round_int)
_I16_LO, _I16_HI = -(1 << 15), (1 << 15) - 1
_I32_LO, _I32_HI = -(1 << 31), (1 << 31) - 1


@njit(inline="always")
def _combine(dst, src, method):
    """``dst`` combined with ``src`` (1-D, as long) element by element: summed for an
    average, else its extreme (one loop per method, which vectorizes)."""
    if method == AVERAGE:
        for q in range(dst.shape[0]):
            dst[q] += src[q]
    elif method == MAX:
        for q in range(dst.shape[0]):
            dst[q] = max(dst[q], np.int32(src[q]))
    else:
        for q in range(dst.shape[0]):
            dst[q] = min(dst[q], np.int32(src[q]))


@njit(inline="always")
def _covered(n_out, stride, pad, tap, size):
    """The outputs ``o`` whose window's tap ``tap`` reads an input inside ``0 .. size - 1``
    (``o * stride - pad + tap``), as ``(first, end)``."""
    first = 0 if tap >= pad else (pad - tap + stride - 1) // stride
    end = (size - 1 + pad - tap) // stride + 1 if size - 1 + pad - tap >= 0 else 0
    return first, max(min(end, n_out), first)


@njit(cache=True, nogil=True)
def _pool(x, atom, method, kh, kw, sh, sw, pt, pl, pv, rh, rw, out):
    """Pool ``x`` (int8 ``[S, H, W * atom]``, each line's pixels of ``atom`` lanes side by
    side) into ``out`` (int8 ``[S, OH, OW * atom]``): ``method``
    :data:`~accel.cmod.pdp.AVERAGE`, MAX or MIN, windows ``kh`` x ``kw`` at strides
    ``sh``, ``sw`` from ``-pt``, ``-pl``; ``pv``: int64 ``[8]``, the sum to add for n
    padded cells; ``rh``, ``rw``: the 16.16 reciprocals.  A window is the combination
    over its rows of each row's combination over the window's columns (``KH + KW``
    steps a window, not ``KH * KW``), each step one loop along a whole line.  False,
    ``out`` unfinished, at an average's window with more padded rows or columns than
    ``pv`` has values for (the plain model refuses it)."""
    surfaces, h = x.shape[0], x.shape[1]
    w = x.shape[2] // atom
    oh, ow = out.shape[1], out.shape[2] // atom
    rows_out = np.empty(oh, dtype=np.int64)        # padded rows of each output row
    cols_out = np.empty(ow, dtype=np.int64)
    for oy in range(oh):
        rows_out[oy] = kh - max(min(oy * sh - pt + kh, h) - max(oy * sh - pt, 0), 0)
    for ox in range(ow):
        cols_out[ox] = kw - max(min(ox * sw - pl + kw, w) - max(ox * sw - pl, 0), 0)
    if method == AVERAGE and max(rows_out.max(), cols_out.max()) >= pv.shape[0]:
        return False
    neutral = 0 if method == AVERAGE else (_I16_LO if method == MAX else _I16_HI)
    rows = np.empty((h, ow * atom), dtype=np.int32)   # each input row's windows' columns
    acc = np.empty(ow * atom, dtype=np.int32)
    for s in range(surfaces):
        for y in range(h):
            row, line = rows[y], x[s, y]
            row[:] = neutral
            for t in range(kw):
                first, end = _covered(ow, sw, pl, t, w)
                if sw == 1:
                    at = (t - pl) * atom
                    _combine(row[first * atom:end * atom],
                             line[first * atom + at:end * atom + at], method)
                else:
                    for ox in range(first, end):
                        at = (ox * sw - pl + t) * atom
                        _combine(row[ox * atom:(ox + 1) * atom], line[at:at + atom], method)
        for oy in range(oh):
            y0 = oy * sh - pt
            acc[:] = neutral
            for y in range(max(y0, 0), min(y0 + kh, h)):
                _combine(acc, rows[y], method)
            dst = out[s, oy]
            if method == AVERAGE:
                for ox in range(ow):
                    pad = (kh - rows_out[oy]) * pv[cols_out[ox]] + kw * pv[rows_out[oy]]
                    for q in range(ox * atom, (ox + 1) * atom):
                        v = min(max(np.int64(acc[q]) + pad, _I32_LO), _I32_HI)
                        v = _shift_round(_shift_round(v * rw, 16) * rh, 16)
                        dst[q] = min(max(v, -128), 127)
            else:
                for q in range(ow * atom):
                    dst[q] = min(max(acc[q], -128), 127)
    return True


def pool_packed(x: np.ndarray, plan) -> np.ndarray | None:
    """The output of the PDP operation ``plan`` (a :class:`~accel.cmod.pdp.PdpPlan`) from
    its input cube ``x`` (int8 ``[C_pad / atom, H, W, atom]``, channel-packed, any
    strides), channel-packed: int8 ``[C_pad / atom, OH, OW, atom]``, each split-width
    slice pooled from its own input columns; None for an average with a window of more
    padded rows or columns than pad values (left to the plain model, which names it)."""
    surfaces, h, _, atom = x.shape
    out = np.empty((surfaces, plan.oh, plan.ow, atom), dtype=np.int8)
    (kh, kw), (sh, sw) = plan.kernel, plan.stride
    rh, rw = plan.recip
    for in0, in_w, pad_left, out0, out_w in plan.splits:
        lines = np.ascontiguousarray(x[:, :, in0:in0 + in_w]).reshape(surfaces, h, -1)
        piece = np.empty((surfaces, plan.oh, out_w * atom), dtype=np.int8)
        if not _pool(lines, atom, plan.method, kh, kw, sh, sw, plan.pad_top, pad_left,
                     plan.pad_values, rh, rw, piece):
            return None
        out[:, :, out0:out0 + out_w] = piece.reshape(surfaces, plan.oh, out_w, atom)
    return out
