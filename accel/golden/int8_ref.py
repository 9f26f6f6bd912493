"""Independent int8 reference for the ops NVDLA runs: convolution / fully-connected
(CACC + SDP), max / min / average pooling (PDP) and element-wise sum / max / min
(SDP X1 per-element).

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

``round`` is round half away from zero throughout.  Pooling and element-wise
ops are described at :func:`pool2d_int8` and :func:`eltwise_int8`.

Zero points need nothing more than these parameters: an input zero point
``z_in`` is the ``pad_value`` (a padded tap reads the code of 0) and is in the
bias the compiler chose (``-z_in`` times each kernel's weight sum), an output
zero point ``z_out`` is ``cvt_offset = -z_out`` of the identity converter; SDP
programs take theirs off in an ALU operand and add them in the converter's
offset, average pooling pads with ``z_in``.
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
    # half away from zero: a negative value takes one less before the floor shift
    return (x + ((1 << (n - 1)) - (x < 0))) >> n


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
    product per kernel tap (R*S steps), each a contraction over the input channels
    of every group at once.
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
    # the padded input, in the type its contraction below takes
    xp = np.full((n, c, h + top + bottom, wd + left + right), pad_value,
                 dtype=np.int64 if cg == 1 else np.float64)
    xp[:, :, top:top + h, left:left + wd] = x
    oh = (h + top + bottom - dh * (r - 1) - 1) // sh + 1
    ow = (wd + left + right - dw * (s - 1) - 1) // sw + 1
    kg = k // group
    taps = [(i * dh, j * dw) for i in range(r) for j in range(s)]

    def window(a: np.ndarray, y: int, x: int) -> np.ndarray:    # [..., OH, OW] at a tap
        return a[..., y:y + (oh - 1) * sh + 1:sh, x:x + (ow - 1) * sw + 1:sw]

    # all groups at once: x as [N, G, Cg, H, W], w as [G, Kg, Cg, R, S]
    if cg == 1:         # depthwise: a product per channel, nothing for BLAS to contract
        xg = xp.reshape(n, group, *xp.shape[2:])
        wg = w.reshape(group, kg, r * s)
        acc = np.zeros((n, group, kg, oh, ow), dtype=np.int64)
        for t, (y, x0) in enumerate(taps):
            acc += np.einsum("nghw,gk->ngkhw", window(xg, y, x0), wg[..., t])
        return acc.reshape(n, k, oh, ow)
    # Each product is at most 2**14 in magnitude, so float64 (exact to 2**53) holds every
    # sum exactly for any channel count below 2**39: the contractions run on BLAS.
    xg = xp.reshape(n, group, cg, *xp.shape[2:])
    # per tap [G, Kg, Cg], contiguous (matmul calls BLAS only on contiguous matrices)
    wt = np.ascontiguousarray(w.astype(np.float64).reshape(group, kg, cg, r * s)
                              .transpose(3, 0, 1, 2))
    acc = np.zeros((n, group, kg, oh * ow), dtype=np.float64)
    for t, (y, x0) in enumerate(taps):
        # [G, Kg, Cg] @ [N, G, Cg, OH*OW] -> [N, G, Kg, OH*OW]
        acc += np.matmul(wt[t], window(xg, y, x0).reshape(n, group, cg, oh * ow))
    return acc.reshape(n, k, oh, ow).astype(np.int64)


def sdp_int8(acc: np.ndarray, *, clip_truncate: int, bias: np.ndarray | None, bias_shift: int,
             mul: np.ndarray | None, mul_shift: int, relu: bool, cvt_offset: int,
             cvt_scale: int, cvt_shift: int, clip_max: int | None = None) -> np.ndarray:
    """CACC truncate + SDP X1 (bias, multiplier, truncate, ReLU) + X2 minimum + converter.

    ``clip_max`` (int16, optional) is X2's ALU MIN with a per-layer operand: the
    upper bound of a capped ReLU such as ReLU6, in output units.

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
    if clip_max is not None:
        a = np.minimum(a, int(_check_int(np.asarray(clip_max), -32768, 32767, "clip_max")))
    if not -32768 <= cvt_scale <= 32767:
        raise ValueError(f"cvt_scale must be int16, got {cvt_scale}")
    a = saturate(round_shift((a - int(cvt_offset)) * int(cvt_scale), cvt_shift), 17)
    return saturate(a, 8).astype(np.int8)


def conv2d_int8(x: np.ndarray, w: np.ndarray, *, stride: int | Sequence[int] = 1,
                pads: Sequence[int] = (0, 0, 0, 0), dilation: int | Sequence[int] = 1,
                group: int = 1, pad_value: int = 0, clip_truncate: int = 0,
                bias: np.ndarray | None = None, bias_shift: int = 0,
                mul: np.ndarray | None = None, mul_shift: int = 0, relu: bool = False,
                cvt_offset: int = 0, cvt_scale: int = 1, cvt_shift: int = 0,
                clip_max: int | None = None) -> np.ndarray:
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
                    cvt_scale=cvt_scale, cvt_shift=cvt_shift, clip_max=clip_max)


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


# --------------------------------------------------------------------------- PDP pooling

#: PDP kernel sizes and strides (NVDLA_FACTS section 3: kernel 1..8, stride 1..16).
PDP_MAX_KERNEL = 8
PDP_MAX_STRIDE = 16
POOL_KINDS = ("max", "min", "avg")


def pdp_reciprocal(k: int) -> int:
    """The firmware's 16.16 kernel reciprocal ``floor(65536 / k)`` (0x5555 for k=3)."""
    if not 1 <= k <= PDP_MAX_KERNEL:
        raise ValueError(f"pooling kernel size {k} outside 1..{PDP_MAX_KERNEL}")
    return 65536 // k


def pool2d_int8(x: np.ndarray, kind: str, kernel: int | Sequence[int], *,
                stride: int | Sequence[int] = 1, pads: Sequence[int] = (0, 0, 0, 0),
                pad_value: int = 0) -> np.ndarray:
    """int8 max / min / average pooling as NVDLA's PDP computes it.

    Parameters
    ----------
    x : int8 array [N, C, H, W]
    kind : {"max", "min", "avg"}
    kernel, stride : int or (h, w)
        For averages kernel 1..8 and stride 1..16 (the PDP's register ranges);
        max and min take any window.
    pads : (top, left, bottom, right)
        ONNX order.  Max and min ignore padded positions.
    pad_value : int
        What one padded cell adds to an average's window sum (the firmware's
        ``-offset * scale``; 0 for symmetric quantization).  The PDP always
        counts padding in the average (no exclusive padding).

    Returns
    -------
    int8 array [N, C, OH, OW]
        Average: the window sum (saturated to 32 bits) times
        ``floor(65536/kw)``, rounded half away from zero after ``>> 16``, then
        times ``floor(65536/kh)``, rounded again; then saturated to int8.
    """
    if kind not in POOL_KINDS:
        raise ValueError(f"pooling kind {kind!r} not in {', '.join(POOL_KINDS)}")
    x = _check_int(x, -128, 127, "x")
    kh, kw = _pair(kernel, "kernel")
    sh, sw = _pair(stride, "stride")
    if kind == "avg":   # max and min are plain window extrema, of any size
        recip_h, recip_w = pdp_reciprocal(kh), pdp_reciprocal(kw)
        if not (1 <= sh <= PDP_MAX_STRIDE and 1 <= sw <= PDP_MAX_STRIDE):
            raise ValueError(f"pooling stride {(sh, sw)} outside 1..{PDP_MAX_STRIDE}")
    top, left, bottom, right = (int(p) for p in pads)
    n, c, h, w = x.shape
    oh = (h + top + bottom - kh) // sh + 1
    ow = (w + left + right - kw) // sw + 1
    if oh < 1 or ow < 1:
        raise ValueError(f"pooling {kh}x{kw} over {h}x{w} with pads {tuple(pads)} is empty")
    # Padded cells hold a value that can never win a max (min), or pad_value for averages.
    fill = {"max": -(1 << 40), "min": 1 << 40, "avg": int(pad_value)}[kind]
    xp = np.full((n, c, h + top + bottom, w + left + right), fill, dtype=np.int64)
    xp[:, :, top:top + h, left:left + w] = x
    taps = [xp[:, :, i:i + (oh - 1) * sh + 1:sh, j:j + (ow - 1) * sw + 1:sw]
            for i in range(kh) for j in range(kw)]
    if kind == "max":
        return np.max(taps, axis=0).astype(np.int8)
    if kind == "min":
        return np.min(taps, axis=0).astype(np.int8)
    total = saturate(np.sum(taps, axis=0), 32)
    avg = round_shift(round_shift(total * recip_w, 16) * recip_h, 16)
    return saturate(avg, 8).astype(np.int8)


# ----------------------------------------------------------------- SDP X1 element-wise

ELTWISE_OPS = ("sum", "max", "min")


def eltwise_int8(a: np.ndarray, b: np.ndarray, op: str, *, alu_shift: int = 0,
                 mul: int = 1, mul_shift: int = 0, relu: bool = False, cvt_offset: int = 0,
                 cvt_scale: int = 1, cvt_shift: int = 0) -> np.ndarray:
    """Element-wise ``a op b`` of two int8 tensors as SDP X1 computes it per element.

    ``a`` is the main input (read by the SDP's M-RDMA), ``b`` the per-element
    ALU operand (B-RDMA).  NVDLA's compiler gives both inputs one scale first,
    so the ALU works on the raw integers::

        op  = sat32(b << alu_shift)
        s   = a + op | max(a, op) | min(a, op)            33 bits, not saturated
        t   = sat32(round(s * mul / 2**mul_shift))         X1 MUL + truncate
        t   = max(t, 0) if relu
        out = sat8(sat17(round((t - cvt_offset) * cvt_scale / 2**cvt_shift)))

    ``a`` and ``b`` must have the same shape.
    """
    if op not in ELTWISE_OPS:
        raise ValueError(f"eltwise op {op!r} not in {', '.join(ELTWISE_OPS)}")
    a = _check_int(a, -128, 127, "a")
    b = _check_int(b, -128, 127, "b")
    if a.shape != b.shape:
        raise ValueError(f"eltwise operands differ in shape: {a.shape} vs {b.shape}")
    for name, v in (("alu_shift", alu_shift), ("mul_shift", mul_shift), ("cvt_shift", cvt_shift)):
        if not 0 <= v <= 63:
            raise ValueError(f"{name} must be in [0, 63], got {v}")
    for name, v in (("mul", mul), ("cvt_scale", cvt_scale)):
        if not -32768 <= v <= 32767:
            raise ValueError(f"{name} must be int16, got {v}")
    operand = saturate(b << alu_shift, 32)
    if op == "sum":
        s = a + operand
    elif op == "max":
        s = np.maximum(a, operand)
    else:
        s = np.minimum(a, operand)
    t = saturate(round_shift(s * int(mul), mul_shift), 32)
    if relu:
        t = np.maximum(t, 0)
    t = saturate(round_shift((t - int(cvt_offset)) * int(cvt_scale), cvt_shift), 17)
    return saturate(t, 8).astype(np.int8)


# ----------------------------------------------------------------- SDP programs

def _operand_values(op, x_shape: tuple[int, ...], inputs: Sequence[np.ndarray]) -> np.ndarray:
    """The int64 values of one SDP operand, broadcastable against ``x`` [N, C, H, W]."""
    c = x_shape[1]
    if op.mode == "layer":
        return np.int64(op.value)
    if op.const is not None:
        v = np.asarray(op.const, dtype=np.int64)
    else:
        v = _check_int(inputs[op.source], -128, 127, f"operand input {op.source}")
        v = v.reshape(v.shape[1:]) if v.ndim == 4 else v
    if op.mode == "kernel":
        v = v.reshape(-1)
        if v.size != c:
            raise ValueError(f"per-kernel operand has {v.size} values, the data {c} channels")
        return v.reshape(1, c, 1, 1)
    if v.shape != tuple(x_shape[1:]):
        raise ValueError(f"per-element operand of shape {v.shape}, the data is {x_shape[1:]}")
    return v[None]


def x_stage_int8(x: np.ndarray, stage, inputs: Sequence[np.ndarray] = ()) -> np.ndarray:
    """One SDP X stage (BS or BN) on int64 data [N, C, H, W]::

        x = x op sat32(alu << alu_shift)            sum | max | min, not saturated
        x = sat32(round(x * mul / 2**truncate))     also without a multiplier;
                                                    PReLU: x >= 0 passes unchanged
        x = max(x, 0) if relu
    """
    x = np.asarray(x, dtype=np.int64)
    if stage.alu_op is not None:
        operand = saturate(np.left_shift(_operand_values(stage.alu, x.shape, inputs),
                                         min(stage.alu_shift, 40)), 32)
        if stage.alu_op == "sum":
            x = x + operand
        elif stage.alu_op == "max":
            x = np.maximum(x, operand)
        elif stage.alu_op == "min":
            x = np.minimum(x, operand)
        else:
            raise ValueError(f"ALU operation {stage.alu_op!r} not in sum, max, min")
    if stage.mul is None:
        x = saturate(round_shift(x, stage.truncate), 32)
    else:
        prod = saturate(round_shift(x * _operand_values(stage.mul, x.shape, inputs),
                                    stage.truncate), 32)
        x = np.where(x < 0, prod, saturate(x, 32)) if stage.prelu else prod
    return np.maximum(x, 0) if stage.relu else x


def _signed(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _slope(dx: np.ndarray, slope) -> np.ndarray:
    """``round(dx * scale / 2**shift)`` with the 5-bit signed shift (negative: left)."""
    shift = _signed(slope.shifter, 5)
    prod = dx * int(slope.scale)
    if shift >= 0:
        return round_shift(prod, shift)
    return prod * (1 << -shift)


def sdp_lut_int8(x: np.ndarray, lut) -> np.ndarray:
    """The SDP Y stage's lookup table on 32-bit ``x`` for a ``dla_lut_param`` (read by
    attribute) whose linear-only (LO) table is the one in use.

    With the LO table's start ``a`` and end ``e`` (the SDP's 32-bit registers,
    signed), index select ``k`` >= 0 and entries ``T[0..256]``, ``d = x - a``:

    * ``d <= 0``: underflow, ``T[0] + round((x - a) * scale_u / 2**shift_u)``;
    * ``d >> k >= 256``: overflow, ``T[256] + round((x - e) * scale_o / 2**shift_o)``;
    * else ``i = d >> k``, ``r = d mod 2**k``:
      ``round((T[i] * (2**k - r) + T[i + 1] * r) / 2**k)``,

    the sum saturated to 32 bits.  The LE table must never be chosen: linear,
    its start at the int32 maximum (every value underflows it) and the LO table
    holding all three priorities - other tables raise ValueError.
    """
    x = np.asarray(x, dtype=np.int64)
    if not (lut.method == 1 and _signed(lut.linear_exp_start, 32) == (1 << 31) - 1
            and lut.hybrid_priority == lut.underflow_priority == lut.overflow_priority == 1):
        raise ValueError("only LO-table lookups are modelled: the LE table must be linear "
                         "with start 2**31 - 1 and every priority must be LO")
    k = _signed(lut.linear_only_offset, 8)
    if not 0 <= k <= 31:
        raise ValueError(f"LO index select {k} outside 0..31")
    table = np.asarray(lut.linear_only_table, dtype=np.int64)
    start = _signed(lut.linear_only_start, 32)
    end = _signed(lut.linear_only_end, 32)
    d = x - start
    under = d <= 0
    idx = np.where(under, 0, d) >> k
    over = ~under & (idx >= 256)
    hit = ~under & ~over
    i = np.where(hit, idx, 0)
    r = np.where(hit, d - (i << k), 0)
    y = round_shift(table[i] * ((1 << k) - r) + table[np.minimum(i + 1, 256)] * r, k)
    y = np.where(under, table[0] + _slope(x - start, lut.linear_only_underflow_slope), y)
    y = np.where(over, table[256] + _slope(x - end, lut.linear_only_overflow_slope), y)
    return saturate(y, 32)


def sdp_program_int8(x: np.ndarray, program, inputs: Sequence[np.ndarray] = (),
                     lut_eval=None) -> np.ndarray:
    """An SDP program (``accel.compiler.program.SdpProgram``, read by attribute) on
    32-bit data ``x`` [N, C, H, W]: X1, X2, the optional LUT, then the converter
    ``sat8(sat17(round((x - offset) * scale / 2**shift)))``.

    ``inputs`` are the node's int8 inputs, which operands name by index; the
    program's lookup table is evaluated by :func:`sdp_lut_int8`, or by
    ``lut_eval(x) -> x`` when given.
    """
    x = np.asarray(x, dtype=np.int64)
    for stage in (program.x1, program.x2):
        if stage is not None:
            x = x_stage_int8(x, stage, inputs)
    if program.lut is not None:
        x = np.asarray(lut_eval(x) if lut_eval is not None else sdp_lut_int8(x, program.lut),
                       dtype=np.int64)
    cvt = program.cvt
    x = saturate(round_shift((x - int(cvt.offset)) * int(cvt.scale), cvt.shift), 17)
    return saturate(x, 8).astype(np.int8)


def conv_program_int8(x: np.ndarray, w: np.ndarray, program, *, stride=1,
                      pads: Sequence[int] = (0, 0, 0, 0), dilation=1, group: int = 1,
                      pad_value: int = 0, clip_truncate: int = 0,
                      inputs: Sequence[np.ndarray] = (), lut_eval=None) -> np.ndarray:
    """Convolution through CACC and an SDP program: exact sums saturated to 34 bits,
    ``sat32(round(acc / 2**clip_truncate))``, then :func:`sdp_program_int8`."""
    if not 0 <= clip_truncate <= 16:
        raise ValueError(f"clip_truncate must be in [0, 16] (CACC), got {clip_truncate}")
    acc = accumulate(x, w, stride=stride, pads=pads, dilation=dilation, group=group,
                     pad_value=pad_value)
    a = saturate(round_shift(saturate(acc, 34), clip_truncate), 32)
    return sdp_program_int8(a, program, inputs, lut_eval)
