"""SDP: single data processor - X1 (BS), X2 (BN), output converter, write DMA.

Arithmetic follows the NVDLA cmod HLS (NVDLA_FACTS section 3), order X1 -> X2
-> Y -> CVT, on a 32-bit input (CACC result on the fly, or a sign-extended
int8 cube from memory):

* ALU: operand int16 << shift (saturated to 32 bits); MAX / MIN / SUM with the
  data, 33-bit result, not saturated.
* MUL: x * int16 operand (49 bits); in PReLU mode a non-negative x is passed
  through unmultiplied and untruncated.
* truncate: >> mul shift, round half away from zero, saturate to int32 - also
  when the multiplier is bypassed.
* ReLU: max(x, 0).
* CVT: ((x - offset) * scale) >> shift, round half away, saturate to 17 bits
  (counted in D_PERF_OUT_SATURATION), then to int8.

The write DMA stores whole atoms: the padded lanes of the last channel group
are computed and written like the others.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accel.arith import saturate, saturation_mask, shift_round, shift_round_sat, sign_extend
from accel.cmod import sdp_rdma, sdp_y
from accel.cmod.csb import GroupView
from accel.cmod.cube import padded_channels, write_int8_cube
from accel.cmod.dram import Dram
from accel.cmod.errors import ConfigError, UnsupportedError
from accel.cmod.lut import LutRam
from accel.cmod.perf import sdp_cycles
from accel.config import HwConfig

UNIT = "SDP"
ALU_MAX, ALU_MIN, ALU_SUM = 0, 1, 2
_MAX_SHIFT = 62  # larger right shifts of a <= 49-bit value all give 0, like 62


@dataclass(frozen=True)
class StageConfig:
    """Decoded D_DP_<BS|BN>_* registers of one X stage."""

    bypass: bool
    alu_bypass: bool
    alu_algo: int
    mul_bypass: bool
    prelu: bool
    relu_bypass: bool
    alu_src_mem: bool
    alu_shift: int
    alu_operand: int
    mul_src_mem: bool
    mul_shift: int
    mul_operand: int


def stage_config(g: GroupView, p: str) -> StageConfig:
    """Decode stage ``p`` ("BS" or "BN") from SDP registers."""
    cfg = f"D_DP_{p}_CFG"
    return StageConfig(
        bypass=bool(g(cfg, f"{p}_BYPASS")), alu_bypass=bool(g(cfg, f"{p}_ALU_BYPASS")),
        alu_algo=g(cfg, f"{p}_ALU_ALGO"), mul_bypass=bool(g(cfg, f"{p}_MUL_BYPASS")),
        prelu=bool(g(cfg, f"{p}_MUL_PRELU")), relu_bypass=bool(g(cfg, f"{p}_RELU_BYPASS")),
        alu_src_mem=bool(g(f"D_DP_{p}_ALU_CFG", f"{p}_ALU_SRC")),
        alu_shift=g(f"D_DP_{p}_ALU_CFG", f"{p}_ALU_SHIFT_VALUE"),
        alu_operand=int(sign_extend(g(f"D_DP_{p}_ALU_SRC_VALUE", f"{p}_ALU_OPERAND"), 16)),
        mul_src_mem=bool(g(f"D_DP_{p}_MUL_CFG", f"{p}_MUL_SRC")),
        mul_shift=g(f"D_DP_{p}_MUL_CFG", f"{p}_MUL_SHIFT_VALUE"),
        mul_operand=int(sign_extend(g(f"D_DP_{p}_MUL_SRC_VALUE", f"{p}_MUL_OPERAND"), 16)),
    )


def alu_operand_shifted(op: np.ndarray | int, shift: int) -> np.ndarray:
    """int16 operand << shift, saturated to int32 (shifts past 40 saturate alike)."""
    return saturate(np.left_shift(np.asarray(op, dtype=np.int64), min(shift, 40)), 32)


def x_stage(x: np.ndarray, st: StageConfig, alu_op, mul_op) -> np.ndarray:
    """One X stage (BS or BN) on int64 data; ``alu_op``/``mul_op`` broadcast against x."""
    if st.bypass:
        return x
    if not st.alu_bypass:
        op = alu_operand_shifted(alu_op, st.alu_shift)
        if st.alu_algo == ALU_MAX:
            x = np.maximum(x, op)
        elif st.alu_algo == ALU_MIN:
            x = np.minimum(x, op)
        elif st.alu_algo == ALU_SUM:
            x = x + op
        else:
            raise ConfigError(UNIT, "D_DP_X_CFG", st.alu_algo, "ALU_ALGO must be MAX/MIN/SUM")
    shift = min(st.mul_shift, _MAX_SHIFT)
    if st.mul_bypass:
        y = shift_round_sat(x, shift, 32)
    elif st.prelu:
        neg = x < 0
        y = np.where(neg, shift_round_sat(x * np.asarray(mul_op, np.int64), shift, 32),
                     saturate(x, 32))
    else:
        y = shift_round_sat(x * np.asarray(mul_op, np.int64), shift, 32)
    if not st.relu_bypass:
        y = np.maximum(y, 0)
    return y


def output_cvt(x: np.ndarray, offset: int, scale: int, shift: int) -> tuple[np.ndarray, np.ndarray]:
    """``(int8 values, 17-bit saturation mask)`` of the output converter."""
    y = (x - offset) * scale
    y = shift_round(y, min(shift, _MAX_SHIFT))
    sat = saturation_mask(y, 17)
    return saturate(saturate(y, 17), 8), sat


def _stage_operands(g: GroupView, rdma: GroupView | None, dram: Dram, cfg: HwConfig,
                    st: StageConfig, p: str, shape: tuple[int, int, int]):
    need_alu = not st.bypass and not st.alu_bypass and st.alu_src_mem
    need_mul = not st.bypass and not st.mul_bypass and st.mul_src_mem
    alu_op, mul_op = st.alu_operand, st.mul_operand
    if need_alu or need_mul:
        dma = sdp_rdma.DMA_OF_STAGE[p][0]
        ops = sdp_rdma.read_operands(rdma, dram, cfg, p, *shape) if rdma is not None else {}
        for need, comp, what in ((need_alu, sdp_rdma.USE_ALU, "ALU"),
                                 (need_mul, sdp_rdma.USE_MUL, "MUL")):
            if need and comp not in ops:
                reg = f"D_{dma}_CFG"
                value = rdma(reg) if rdma is not None else 0
                raise ConfigError("SDP_RDMA", reg, value,
                                  f"SDP {p} {what} operand comes from memory but {dma} does not "
                                  f"deliver it (disabled or DATA_USE mismatch)")
        alu_op = ops.get(sdp_rdma.USE_ALU, alu_op) if need_alu else alu_op
        mul_op = ops.get(sdp_rdma.USE_MUL, mul_op) if need_mul else mul_op
    return alu_op, mul_op


def check_supported(g: GroupView, cfg: HwConfig, model_y: bool = False) -> None:
    """Reject SDP programming this model does not implement.

    ``model_y`` lets the Y stage (EW and LUT) run on a configuration without
    ``sdp_ew``/``sdp_lut`` (see :func:`y_note`).
    """
    if g("D_DATA_FORMAT", "PROC_PRECISION") != 0 or g("D_DATA_FORMAT", "OUT_PRECISION") != 0:
        raise UnsupportedError(
            f"SDP precision other than int8 (D_DATA_FORMAT={g('D_DATA_FORMAT'):#x})")
    if g("D_FEATURE_MODE_CFG", "WINOGRAD"):
        raise UnsupportedError("SDP Winograd output is not modelled")
    if g("D_FEATURE_MODE_CFG", "BATCH_NUMBER"):
        raise UnsupportedError("SDP batch > 1 is not modelled")
    ew_active = not g("D_DP_EW_CFG", "EW_BYPASS")
    if model_y:
        return
    if ew_active and not cfg.sdp_ew:
        raise UnsupportedError(f"SDP EW (Y) stage is programmed but {cfg.name} has no SDP_EW")
    if ew_active and not g("D_DP_EW_CFG", "EW_LUT_BYPASS") and not cfg.sdp_lut:
        raise UnsupportedError(f"SDP LUT is programmed but {cfg.name} has no SDP_LUT")


def y_note(g: GroupView, cfg: HwConfig) -> str:
    """Why this op's result needs a Y stage ``cfg`` lacks ("" when it does not).

    NVIDIA's nv_small traces ``sdp_*_ew_*`` program the Y stage although
    nv_small.spec has no SDP_EW; their golden CRCs are reproduced only with Y
    modelled, so they come from a model with Y.  A player that models Y anyway
    records this note with the result.
    """
    if g("D_DP_EW_CFG", "EW_BYPASS"):
        return ""
    lut_used = not g("D_DP_EW_CFG", "EW_LUT_BYPASS")
    missing = [n for n, absent in (("SDP_EW", not cfg.sdp_ew),
                                   ("SDP_LUT", lut_used and not cfg.sdp_lut)) if absent]
    if not missing:
        return ""
    return f"Y stage modelled: {cfg.name} goldens include {'/'.join(missing)}"


def run(g: GroupView, rdma: GroupView | None, dram: Dram, cfg: HwConfig,
        x_in: np.ndarray | None = None, lut: LutRam | None = None,
        model_y: bool = False) -> dict:
    """Execute one SDP operation; return a stats record.

    ``x_in`` is the CACC result ``[K, H, W]`` in on-the-fly mode; otherwise the
    input is read from memory through SDP_RDMA.  ``lut`` holds the tables the
    Y stage's LUT reads (zeros when omitted).  ``model_y`` runs a programmed Y
    stage even when ``cfg`` has none; the record then carries a ``note``.
    """
    check_supported(g, cfg, model_y)
    w = g("D_DATA_CUBE_WIDTH", "WIDTH") + 1
    h = g("D_DATA_CUBE_HEIGHT", "HEIGHT") + 1
    c = g("D_DATA_CUBE_CHANNEL", "CHANNEL") + 1
    c_pad = padded_channels(c, cfg.atom_size)
    if x_in is not None:
        if x_in.shape[1:] != (h, w) or x_in.shape[0] > c_pad:
            raise ConfigError(UNIT, "D_DATA_CUBE_CHANNEL", c - 1,
                              f"SDP cube {c}x{h}x{w} (CxHxW) does not match the CACC output "
                              f"{'x'.join(map(str, x_in.shape))}")
        x = np.zeros((c_pad, h, w), dtype=np.int64)  # disabled MAC cells deliver 0
        x[:x_in.shape[0]] = x_in
    else:
        x = sdp_rdma.read_input(rdma, dram, cfg, c_pad, h, w)
    for p in ("BS", "BN"):
        st = stage_config(g, p)
        alu_op, mul_op = _stage_operands(g, rdma, dram, cfg, st, p, (c_pad, h, w))
        x = x_stage(x, st, alu_op, mul_op)
    lut_counts = None
    if not g("D_DP_EW_CFG", "EW_BYPASS"):
        x, lut_counts = sdp_y.y_stage(x, g, rdma, dram, cfg, lut if lut is not None else LutRam())
    if lut_counts is not None and g("D_PERF_ENABLE", "PERF_LUT_EN"):
        for reg, key in (("D_PERF_LUT_UFLOW", "uflow"), ("D_PERF_LUT_OFLOW", "oflow"),
                         ("D_PERF_LUT_HYBRID", "hybrid"), ("D_PERF_LUT_LE_HIT", "le_hit"),
                         ("D_PERF_LUT_LO_HIT", "lo_hit")):
            g.regs.set_hw(reg, lut_counts[key], g.group)
    out, sat = output_cvt(x, int(sign_extend(g("D_CVT_OFFSET"), 32)),
                          int(sign_extend(g("D_CVT_SCALE", "CVT_SCALE"), 16)),
                          g("D_CVT_SHIFT", "CVT_SHIFT"))
    g.regs.set_hw("D_PERF_OUT_SATURATION", int(np.count_nonzero(sat[:c])), g.group)
    rec = {"unit": "SDP", "shape": (c, h, w), "flying": x_in is not None,
           "cycles": sdp_cycles(g, cfg, c_pad, h, w, x_in is None)}
    if lut_counts is not None:
        rec["lut"] = lut_counts
    note = y_note(g, cfg)
    if note:
        rec["note"] = note
    if g("D_FEATURE_MODE_CFG", "OUTPUT_DST"):  # streamed to PDP, not written
        rec["to_pdp"] = out
        return rec
    base = g.addr("D_DST_BASE_ADDR_LOW", "D_DST_BASE_ADDR_HIGH")
    write_int8_cube(dram, base, out, cfg.atom_size, g("D_DST_LINE_STRIDE"),
                    g("D_DST_SURFACE_STRIDE"), "SDP_WDMA")
    return rec
