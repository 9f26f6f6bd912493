"""NVDLA quantization arithmetic for a convolution / FC followed by SDP.

The int8 pipeline of one layer (NVDLA_FACTS.md sections 3 and 5)::

    acc = sum x_q * w_q                       CMAC + CACC (34-bit saturating)
    a1  = sat32(round(acc / 2**clip_truncate))          CACC clip-truncate
    a2  = a1 + (bias16[k] << bias_shift)      SDP X1 ALU (SUM, per-kernel operand)
    a3  = a2 * mul16[k]                       SDP X1 MUL (per-kernel operand)
    a4  = sat32(round(a3 / 2**mul_shift))     SDP X1 truncate
    a5  = max(a4, 0) if relu                  SDP X1 ReLU
    a6  = min(a5, clip_max)                   SDP X2 ALU MIN, per-layer operand (ReLU6 ...)
    q   = sat8(sat17(round((a6 - off) * cvt_scale / 2**cvt_shift)))   output converter

This is the compiler's PER_FILTER scheme: per-output-channel weight scales
``S_w[k]`` make the rescale ``S_in * S_w[k] / S_out`` differ per channel, so it
lives in X1's per-kernel multiplier with one common truncate, and the output
converter is the identity.  Rounding is half away from zero everywhere (the
hardware's rule), also when the compiler quantizes weights and biases.

**Zero points.**  An input with zero point ``z_in`` holds ``x_q = v + z_in``
(``v`` the symmetric code), so ``acc = sum w_q * v + z_in * W[k]`` with
``W[k]`` the sum of channel ``k``'s int8 weights: the bias absorbs
``-z_in * W[k]`` (in accumulator units after the clip truncate, rounded once
with the float bias, then held as ``int16 << shift`` like any bias), and the
padding holds ``z_in`` (CDMA/CSC pad value) so that a padded tap adds
``z_in * w`` like every other.  An output zero point ``z_out`` is the
converter's offset: the identity converter computes ``x - offset``, so
``offset = -z_out`` adds it after ReLU and the X2 cap, exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from accel.arith import shift_round

INT16_MAX = (1 << 15) - 1
MAX_SHIFT = 63          # 6-bit shift fields (BS_MUL_SHIFT_VALUE, BS_ALU_SHIFT_VALUE)
MAX_CLIP_TRUNCATE = 16  # CACC D_CLIP_CFG documented range
SCALE_FLOOR = 2.0 ** -8  # smallest per-channel weight scale, relative to the layer's largest


def round_half_away(x: np.ndarray) -> np.ndarray:
    """Round a float array to the nearest integer, halves away from zero."""
    x = np.asarray(x, dtype=np.float64)
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def activation_scale(amax: float) -> float:
    """Symmetric per-tensor int8 scale for a tensor whose |max| is ``amax``."""
    amax = float(amax)
    return amax / 127.0 if amax > 0 else 1.0 / 127.0


@dataclass(frozen=True)
class ConvQuant:
    """Everything the hardware needs to reproduce one quantized conv/FC layer."""

    weight: np.ndarray        # int8 [K, C, R, S]
    weight_scale: np.ndarray  # float64 [K]
    in_scale: float
    out_scale: float
    clip_truncate: int
    bias: np.ndarray | None   # int16 [K]
    bias_shift: int
    mul: np.ndarray           # int16 [K]
    mul_shift: int
    relu: bool
    clip_max: int | None = None  # X2 MIN operand in output units (capped ReLU), None: off
    cvt_offset: int = 0          # -(output zero point)
    cvt_scale: int = 1
    cvt_shift: int = 0
    pad_value: int = 0           # the input zero point: what a padded tap reads

    def reference_kwargs(self) -> dict:
        """Keyword arguments for ``accel.golden.int8_ref.conv2d_int8``."""
        return dict(clip_truncate=self.clip_truncate, bias=self.bias,
                    bias_shift=self.bias_shift, mul=self.mul, mul_shift=self.mul_shift,
                    relu=self.relu, cvt_offset=self.cvt_offset, cvt_scale=self.cvt_scale,
                    cvt_shift=self.cvt_shift, clip_max=self.clip_max,
                    pad_value=self.pad_value)


def quantize_weights(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-output-channel symmetric int8 weights: ``(w_q int8, scale[K])``.

    A channel's scale is ``max|w_k| / 127`` but never below
    ``SCALE_FLOOR`` times the layer's largest scale.  Trained networks have
    dead channels (weights of 1e-27 next to weights of 0.1): an unbounded
    scale spread would make their bias, in accumulator units, dwarf every
    other channel's and force a layer-wide ALU shift that wipes the other
    biases out, and would leave their int16 multiplier with no precision.
    At the floor, weights below ``max|w| / 2**16`` quantize to zero, as they
    would (much sooner) with one scale per layer.
    """
    w = np.asarray(w, dtype=np.float64)
    amax = np.abs(w.reshape(w.shape[0], -1)).max(axis=1)
    top = float(amax.max()) if amax.size else 0.0
    scale = np.maximum(amax, top * SCALE_FLOOR) / 127.0 if top > 0 else np.ones_like(amax)
    q = round_half_away(w / scale.reshape(-1, *([1] * (w.ndim - 1))))
    return np.clip(q, -127, 127).astype(np.int8), scale


def conv_quant(w: np.ndarray, b: np.ndarray | None, in_scale: float, out_scale: float,
               relu: bool, name: str = "", relu_max: float | None = None,
               in_zero: int = 0, out_zero: int = 0) -> ConvQuant:
    """Choose the integer parameters of one conv/FC layer.

    ``w`` is the float KCRS weight, ``b`` the float bias (or None), and the
    scales are the per-tensor activation scales of the layer's input and output,
    ``in_zero`` / ``out_zero`` their zero points (see the module docstring).
    ``relu_max`` caps a ReLU (ReLU6: 6.0); it costs an X2 minimum only when the
    cap falls inside the int8 output range, where saturation would not do it.
    """
    if not (in_scale > 0 and out_scale > 0):
        raise ValueError(f"{name}: activation scales must be positive "
                         f"(input {in_scale!r}, output {out_scale!r})")
    w_q, w_scale = quantize_weights(w)
    k = w_q.shape[0]
    acc_scale = in_scale * w_scale                      # value of one accumulator unit

    # CACC: keep the accumulator within int32 (worst case |x| = 128).
    worst = int(np.abs(w_q.astype(np.int64)).reshape(k, -1).sum(axis=1).max()) * 128
    clip_truncate = max(0, worst.bit_length() - 31)
    if clip_truncate > MAX_CLIP_TRUNCATE:
        raise ValueError(f"{name}: accumulator needs a clip truncate of {clip_truncate} "
                         f"(> {MAX_CLIP_TRUNCATE}); the layer is too large for int8 on NVDLA")
    acc_scale = acc_scale * (1 << clip_truncate)

    rescale = acc_scale / out_scale                     # per channel, > 0
    bias16, bias_shift = quantize_bias(b, acc_scale, rescale, worst, clip_truncate,
                                       zero_sums(w_q, in_zero), name)

    peak = float(rescale.max())
    mul_shift = min(MAX_SHIFT, math.floor(math.log2(INT16_MAX / peak)))
    if mul_shift < 0:
        raise ValueError(f"{name}: rescale {peak:g} exceeds the int16 multiplier range")
    mul = round_half_away(rescale * 2.0 ** mul_shift)
    if mul.max() > INT16_MAX:                           # rounding pushed it over
        mul_shift -= 1
        mul = round_half_away(rescale * 2.0 ** mul_shift)
    mul = np.maximum(mul, 1).astype(np.int16)           # never zero a channel completely

    clip_max = None
    if relu_max is not None:
        if not (relu and relu_max > 0):
            raise ValueError(f"{name}: a ReLU cap needs a ReLU and a positive bound, got "
                             f"relu={relu}, relu_max={relu_max!r}")
        cap = int(round_half_away(np.float64(relu_max) / out_scale))
        # the converter adds the zero point after the cap: at >= 127 - out_zero the
        # int8 saturation caps already
        clip_max = cap if cap < 127 - out_zero else None

    return ConvQuant(weight=w_q, weight_scale=w_scale, in_scale=float(in_scale),
                     out_scale=float(out_scale), clip_truncate=clip_truncate, bias=bias16,
                     bias_shift=bias_shift, mul=mul, mul_shift=mul_shift, relu=relu,
                     clip_max=clip_max, cvt_offset=-int(out_zero), pad_value=int(in_zero))


def zero_sums(w_q: np.ndarray, in_zero: int) -> np.ndarray | None:
    """``z_in * W[k]`` per output channel (int64; ``W[k]`` the sum of kernel ``k``'s int8
    weights): what an input zero point adds to each accumulator.  None for ``z_in = 0``."""
    if not in_zero:
        return None
    w = np.asarray(w_q, dtype=np.int64)
    return int(in_zero) * w.reshape(w.shape[0], -1).sum(axis=1)


def quantize_bias(b: np.ndarray | None, acc_scale: np.ndarray, rescale: np.ndarray,
                  worst: int, clip_truncate: int, zero_sum: np.ndarray | None = None,
                  name: str = "") -> tuple[np.ndarray | None, int]:
    """The X1 ALU operand ``(int16 bias [K], shift)`` of a convolution: the float bias
    ``b`` in accumulator units (``acc_scale`` per unit, after the clip truncate) minus
    ``zero_sum / 2**clip_truncate`` (:func:`zero_sums`), rounded once; ``(None, 0)`` when
    there is neither.  ``worst`` bounds ``|acc|`` before the truncate, ``rescale`` is the
    output step per accumulator unit."""
    if b is None and zero_sum is None:
        return None, 0
    b32 = np.zeros(np.shape(acc_scale), dtype=np.float64)
    if b is not None:
        b32 = np.asarray(b, dtype=np.float64) / acc_scale
    if zero_sum is not None:
        b32 = b32 - zero_sum / float(1 << clip_truncate)
    b32 = round_half_away(b32)
    # Beyond |acc| + 2**9 output steps the output saturates whatever the
    # input (and whatever the output zero point), so clipping there changes no
    # result and keeps the shift small.
    reach = (worst >> clip_truncate) + np.ceil(2.0 ** 9 / rescale)
    b32 = np.clip(b32, -reach, reach).astype(np.int64)
    peak = int(np.abs(b32).max()) if b32.size else 0
    bias_shift = max(0, peak.bit_length() - 15)
    if bias_shift > MAX_SHIFT:
        raise ValueError(f"{name}: bias needs an ALU shift of {bias_shift} (> {MAX_SHIFT})")
    return shift_round(b32, bias_shift).clip(-INT16_MAX - 1, INT16_MAX).astype(np.int16), \
        bias_shift


def int16_factor(values: np.ndarray, max_shift: int = MAX_SHIFT) -> tuple[np.ndarray, int]:
    """Real ``values`` as int16 ``q`` with one shift: ``values ~= q / 2**shift``.

    The shift is the largest that keeps every ``|q|`` within int16 (at most
    ``max_shift``); all-zero values give ``(0, 0)``.

    >>> q, s = int16_factor(np.array([0.25, -0.1]))
    >>> s, q.tolist()
    (16, [16384, -6554])
    """
    v = np.asarray(values, dtype=np.float64)
    peak = float(np.abs(v).max()) if v.size else 0.0
    if peak == 0:
        return np.zeros(v.shape, dtype=np.int64), 0
    shift = min(max_shift, math.floor(math.log2(INT16_MAX / peak)))
    if shift < 0:
        raise ValueError(f"value {peak:g} exceeds the int16 multiplier range")
    q = round_half_away(v * 2.0 ** shift)
    while np.abs(q).max() > INT16_MAX:
        shift -= 1
        q = round_half_away(v * 2.0 ** shift)
    return q.astype(np.int64), shift


def layer_operand(value: int) -> tuple[int, int]:
    """An integer as a per-layer ALU operand ``(v, shift)``, ``v`` int16 and the ALU
    adding ``v << shift``: exact when ``value`` fits int16 (shift 0) or its low bits are
    zero, else rounded half away from zero to the smallest shift that fits.

    >>> layer_operand(-300), layer_operand(1024 * 128), layer_operand(65535)
    ((-300, 0), (16384, 3), (16384, 2))
    """
    v = int(value)
    shift = max(0, abs(v).bit_length() - 15)
    while True:
        q = int(shift_round(np.array([v], dtype=np.int64), shift)[0])
        if -INT16_MAX - 1 <= q <= INT16_MAX:
            return q, shift
        shift += 1
