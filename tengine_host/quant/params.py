"""NVDLA conv/FC quantization parameters from scales (NVDLA_FACTS section 5).

A plain stand-in until ``accel.compiler`` chooses them: per-output-channel
weights use SDP X1 in BOTH mode (bias on the ALU, a per-channel int16
multiplier with one common truncate) and an identity output converter.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from tengine_host.quant.weights import round_half_away

INT16_MAX = 32767
ALU_SHIFT_MAX = 31   # the ALU operand int16 << shift is saturated to 32 bits anyway
TRUNCATE_MAX = 63    # SDP X1 truncate is a 6-bit field


@dataclass(frozen=True)
class ConvQuantParams:
    """The keyword arguments of ``int8_ref.conv2d_int8`` / ``fc_int8`` besides geometry."""

    clip_truncate: int
    bias: np.ndarray | None
    bias_shift: int
    mul: np.ndarray | None
    mul_shift: int
    relu: bool
    cvt_offset: int = 0
    cvt_scale: int = 1
    cvt_shift: int = 0

    def as_kwargs(self) -> dict:
        return asdict(self)


def _numbits(v: int) -> int:
    return int(v).bit_length()


def conv_quant_params(s_in: float, s_w: np.ndarray, s_out: float, bias: np.ndarray | None = None,
                      *, relu: bool = False, clip_truncate: int = 0) -> ConvQuantParams:
    """Choose the CACC/SDP parameters that map ``acc`` (units ``s_in * s_w[k]``) to int8 ``s_out``.

    Parameters
    ----------
    s_in, s_out : float
        Input and output activation scales.
    s_w : array [K]
        Per-output-channel weight scales.
    bias : array [K], optional
        fp32 bias.  Quantized as ``round(b / (s_in s_w[k]) / 2**clip_truncate)``
        and stored as int16 with ``bias_shift = clamp(numbits(max|b32|) - 15, 0, 31)``.
    relu : bool
        Fused ReLU.
    clip_truncate : int
        CACC right shift (0 keeps the full accumulator precision).

    Notes
    -----
    The requantization ratio ``r_k = s_in s_w[k] 2**t / s_out`` becomes
    ``mul[k] * 2**-mul_shift`` with the largest common shift that keeps every
    ``mul[k]`` within int16.
    """
    s_w = np.asarray(s_w, dtype=np.float64).reshape(-1)
    if s_in <= 0 or s_out <= 0 or np.any(s_w <= 0):
        raise ValueError(f"scales must be > 0: s_in={s_in}, s_out={s_out}, min s_w={s_w.min()}")
    acc_unit = s_in * s_w * 2.0**clip_truncate
    ratio = acc_unit / s_out
    top = float(ratio.max())
    if round_half_away(top) > INT16_MAX:
        raise ValueError(f"requantization ratio {top:.6g} does not fit int16 even with shift 0; "
                         f"raise clip_truncate (now {clip_truncate})")
    shift = TRUNCATE_MAX
    while shift > 0 and round_half_away(top * 2.0**shift) > INT16_MAX:
        shift -= 1
    mul = round_half_away(ratio * 2.0**shift).astype(np.int16)

    b16, b_shift = None, 0
    if bias is not None:
        b32 = round_half_away(np.asarray(bias, dtype=np.float64).reshape(-1) / acc_unit)
        b_shift = min(max(_numbits(int(np.abs(b32).max())) - 15, 0), ALU_SHIFT_MAX)
        b16 = np.clip(round_half_away(b32 / 2.0**b_shift), -INT16_MAX - 1, INT16_MAX
                      ).astype(np.int16)
    return ConvQuantParams(clip_truncate=clip_truncate, bias=b16, bias_shift=b_shift, mul=mul,
                           mul_shift=shift, relu=relu)
