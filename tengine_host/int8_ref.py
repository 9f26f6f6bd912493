"""Independent int8 reference for NVDLA convolution / fully-connected layers.

Plain NCHW numpy with int64 arithmetic, written from the pipeline description
(NVDLA_FACTS section 3) and deliberately NOT sharing code with ``accel.arith``
or the cmodel: it is the "CPU golden" the compiled accelerator op must match
bit for bit.  Given the parameters the compiler chose::

    acc = sum_{c,r,s} x * w            (padding holds pad_value), saturated to 34 bits
    a1  = sat32(round(acc / 2**clip_truncate))                 CACC clip-truncate
    a2  = a1 + (bias[k] << bias_shift)                         SDP X1 ALU (33-bit, exact)
    a3  = a2 * mul[k]                                          SDP X1 MUL (if given)
    a4  = sat32(round(a3 / 2**mul_shift))                      X1 truncate, also without MUL
    a5  = max(a4, 0) if relu else a4
    a6  = sat17(round((a5 - cvt_offset) * cvt_scale / 2**cvt_shift))   output converter
    out = sat8(a6)

``round`` is round half away from zero throughout.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def round_shift(x: np.ndarray, n: int) -> np.ndarray:
    """``x / 2**n`` rounded half away from zero, on int64 (``n >= 0``).

    >>> round_shift(np.array([3, -3, 5, -5, 4]), 1).tolist()
    [2, -2, 3, -3, 2]
    """
    x = np.asarray(x, dtype=np.int64)
    if n < 0:
        raise ValueError(f"shift must be >= 0, got {n}")
    if n == 0:
        return x
    mag = (np.abs(x) + (1 << (n - 1))) >> n
    return np.where(x < 0, -mag, mag)


def saturate(x: np.ndarray, bits: int) -> np.ndarray:
    """Clamp to the signed ``bits``-bit range."""
    return np.clip(x, -(1 << (bits - 1)), (1 << (bits - 1)) - 1)


def _pair(v: int | Sequence[int], what: str) -> tuple[int, int]:
    if isinstance(v, (int, np.integer)):
        return int(v), int(v)
    if len(v) != 2:
        raise ValueError(f"{what} must be an int or a pair, got {v!r}")
    return int(v[0]), int(v[1])


def _check_int(a: np.ndarray, lo: int, hi: int, what: str) -> np.ndarray:
    a = np.asarray(a)
    if not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"{what} must be an integer array, got dtype {a.dtype}")
    if a.size and (a.min() < lo or a.max() > hi):
        raise ValueError(f"{what} values must lie in [{lo}, {hi}], got [{a.min()}, {a.max()}]")
    return a.astype(np.int64)


def accumulate(x: np.ndarray, w: np.ndarray, *, stride, pads, dilation, group: int = 1,
               pad_value: int = 0) -> np.ndarray:
    """Exact int64 convolution sums [N, K, OH, OW] of int8 ``x`` and ``w`` (before CACC).

    ``pads`` are ONNX-ordered ``(top, left, bottom, right)``.  One shifted-window
    product per kernel tap (R*S steps), each a tensordot over input channels.
    """
    x = _check_int(x, -128, 127, "x")
    w = _check_int(w, -128, 127, "w")
    sh, sw = _pair(stride, "stride")
    dh, dw = _pair(dilation, "dilation")
    top, left, bottom, right = (int(p) for p in pads)
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    if c != cg * group or k % group:
        raise ValueError(f"x has {c} channels, w {w.shape} with group {group} needs "
                         f"{cg * group} and K divisible by {group}")
    xp = np.full((n, c, h + top + bottom, wd + left + right), pad_value, dtype=np.int64)
    xp[:, :, top:top + h, left:left + wd] = x
    oh = (h + top + bottom - dh * (r - 1) - 1) // sh + 1
    ow = (wd + left + right - dw * (s - 1) - 1) // sw + 1
    kg = k // group
    acc = np.zeros((n, k, oh, ow), dtype=np.int64)
    for g in range(group):
        xg = xp[:, g * cg:(g + 1) * cg]
        wg = w[g * kg:(g + 1) * kg]
        for i in range(r):
            for j in range(s):
                win = xg[:, :, i * dh:i * dh + (oh - 1) * sh + 1:sh,
                         j * dw:j * dw + (ow - 1) * sw + 1:sw]
                # [N, Cg, OH, OW] x [Kg, Cg] -> [N, Kg, OH, OW]
                acc[:, g * kg:(g + 1) * kg] += np.einsum("nchw,kc->nkhw", win, wg[:, :, i, j])
    return acc


def sdp_int8(acc: np.ndarray, *, clip_truncate: int, bias: np.ndarray | None, bias_shift: int,
             mul: np.ndarray | None, mul_shift: int, relu: bool, cvt_offset: int,
             cvt_scale: int, cvt_shift: int) -> np.ndarray:
    """CACC truncate + SDP X1 (bias, multiplier, truncate, ReLU) + output converter.

    ``acc`` is [N, K, ...] with K on axis 1; returns int8 of the same shape.
    """
    if not 0 <= clip_truncate <= 16:
        raise ValueError(f"clip_truncate must be in [0, 16] (CACC), got {clip_truncate}")
    if not 0 <= bias_shift <= 63 or not 0 <= mul_shift <= 63 or not 0 <= cvt_shift <= 63:
        raise ValueError(f"shifts must be in [0, 63], got bias_shift={bias_shift}, "
                         f"mul_shift={mul_shift}, cvt_shift={cvt_shift}")
    k = acc.shape[1]
    per_k = (1, k) + (1,) * (acc.ndim - 2)
    acc = saturate(np.asarray(acc, dtype=np.int64), 34)
    a = saturate(round_shift(acc, clip_truncate), 32)
    if bias is not None:
        b = _check_int(bias, -32768, 32767, "bias").reshape(-1)
        if b.size != k:
            raise ValueError(f"bias has {b.size} entries, expected K={k}")
        # The ALU operand is int16 << shift, itself saturated to 32 bits; the sum is 33 bits.
        a = a + saturate(b << bias_shift, 32).reshape(per_k)
    if mul is not None:
        m = _check_int(mul, -32768, 32767, "mul").reshape(-1)
        if m.size != k:
            raise ValueError(f"mul has {m.size} entries, expected K={k}")
        a = a * m.reshape(per_k)
    a = saturate(round_shift(a, mul_shift), 32)
    if relu:
        a = np.maximum(a, 0)
    if not -32768 <= cvt_scale <= 32767:
        raise ValueError(f"cvt_scale must be int16, got {cvt_scale}")
    a = saturate(round_shift((a - int(cvt_offset)) * int(cvt_scale), cvt_shift), 17)
    return saturate(a, 8).astype(np.int8)


def conv2d_int8(x: np.ndarray, w: np.ndarray, *, stride: int | Sequence[int] = 1,
                pads: Sequence[int] = (0, 0, 0, 0), dilation: int | Sequence[int] = 1,
                group: int = 1, pad_value: int = 0, clip_truncate: int = 0,
                bias: np.ndarray | None = None, bias_shift: int = 0,
                mul: np.ndarray | None = None, mul_shift: int = 0, relu: bool = False,
                cvt_offset: int = 0, cvt_scale: int = 1, cvt_shift: int = 0) -> np.ndarray:
    """int8 convolution through NVDLA's CACC + SDP pipeline (see the module docstring).

    Parameters
    ----------
    x : int8 array [N, C, H, W]
    w : int8 array [K, C/group, R, S]
    stride, dilation : int or (h, w)
    pads : (top, left, bottom, right), ONNX order
    group : int
    pad_value : int
        Value of padded input positions (NVDLA's ``pad_val``: ``-offset * scale``).
    clip_truncate, bias, bias_shift, mul, mul_shift, relu, cvt_offset, cvt_scale, cvt_shift
        The CACC / SDP X1 / output-converter parameters.

    Returns
    -------
    int8 array [N, K, OH, OW]
    """
    acc = accumulate(x, w, stride=stride, pads=pads, dilation=dilation, group=group,
                     pad_value=pad_value)
    return sdp_int8(acc, clip_truncate=clip_truncate, bias=bias, bias_shift=bias_shift, mul=mul,
                    mul_shift=mul_shift, relu=relu, cvt_offset=cvt_offset,
                    cvt_scale=cvt_scale, cvt_shift=cvt_shift)


def fc_int8(x: np.ndarray, w: np.ndarray, **params) -> np.ndarray:
    """Fully connected (Gemm) as a 1x1 conv over the flattened input.

    ``x`` is int8 [N, ...] (flattened to [N, C]); ``w`` is int8 [K, C];
    ``params`` are :func:`conv2d_int8`'s SDP keywords.  Returns int8 [N, K].
    """
    x = np.asarray(x).reshape(np.shape(x)[0], -1)
    w = np.asarray(w)
    if w.ndim != 2 or w.shape[1] != x.shape[1]:
        raise ValueError(f"fc weights must be [K, {x.shape[1]}], got {w.shape}")
    y = conv2d_int8(x[:, :, None, None], w[:, :, None, None], **params)
    return y[:, :, 0, 0]
