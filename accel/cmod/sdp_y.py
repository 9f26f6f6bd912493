"""SDP Y (EW) stage and its LUT, int8 processing precision.

Follows NVDLA's cmod HLS (hw@master ``cmod/hls/sdp/sdp_y*.cpp`` and the glue
in ``sdp_hls_wrapper.cpp``) on the 32-bit output of X1/X2:

* **operand converters** (memory operands only, unless ``*_CVT_BYPASS``):
  ``sat32(round((op - offset) * scale / 2**truncate))`` with a 32-bit offset,
  int16 scale and 6-bit truncate; register operands are the full 32-bit
  ``EW_*_OPERAND``.
* **MUL first, then ALU** (the reverse of X): ``sat32(round(x * op /
  2**EW_TRUNCATE))`` (10-bit truncate; PReLU passes ``x >= 0`` untouched; a
  bypassed MUL does not truncate), then ALU MAX / MIN / SUM / EQL (``a == b ?
  0 : 1``) saturated to 32 bits.
* **LUT** (unless ``EW_LUT_BYPASS``): the integer index logic of
  ``NV_NVDLA_SDP_CORE_Y_idx`` - linear tables index ``(x - start)`` shifted
  right by the signed 8-bit index select (saturated to 9 bits) with a 35-bit
  fraction; the exponential LE table indexes ``floor(log2(x - start)) -
  index_offset``; ``x <= start`` underflows; index >= 64 / 256 overflows.
  Hits interpolate ``round((y0 * (2**35 - f) + y1 * f) / 2**35)``; under- and
  overflows extrapolate ``y0 + round((x - offset - bias) * scale / 2**shift)``
  from the start / end register with the 5-bit *signed* slope shift (``bias =
  2**index_offset`` for an exponential LE underflow).  Table choice:
  both underflow -> ``UFLOW_PRIORITY``, both overflow -> ``OFLOW_PRIORITY``,
  otherwise two hits or two misses -> ``HYBRID_PRIORITY``, else the hit.
  Counters: selected under/overflows, LE hits, LO hits and ``total - all of
  those`` as hybrid (as the cmod writes them, when ``PERF_LUT_EN``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from accel.arith import saturate, shift_round, sign_extend
from accel.cmod import sdp_rdma
from accel.cmod.csb import GroupView
from accel.cmod.dram import Dram
from accel.cmod.errors import ConfigError
from accel.cmod.lut import LutConfig, LutRam
from accel.config import HwConfig

ALU_MAX, ALU_MIN, ALU_SUM, ALU_EQL = 0, 1, 2, 3
FRAC = 35  # fraction bits of the LUT interpolation


def round_shift(x: np.ndarray, shift: int) -> np.ndarray:
    """Round-half-away right shift of int64 ``x`` (|x| <= 2**62) by any ``shift`` >= 0."""
    if shift <= 62:
        return shift_round(x, shift)
    if shift == 63:  # only |x| == 2**62 reaches one half
        return np.where(np.abs(x) >= (1 << 62), np.sign(x), 0)
    return np.zeros_like(x)


def signed_shift(x: np.ndarray, shift: int) -> np.ndarray:
    """Round-half-away right shift by a signed amount (negative shifts left)."""
    if shift >= 0:
        return round_shift(x, shift)
    return np.left_shift(np.clip(x, -(1 << 46), 1 << 46), -shift)  # saturates anyway


def operand_cvt(op: np.ndarray, offset: int, scale: int, truncate: int) -> np.ndarray:
    return saturate(round_shift((op - offset) * scale, truncate), 32)


def _operands(g: GroupView, rdma: GroupView | None, dram: Dram, cfg: HwConfig,
              shape: tuple[int, int, int], need_alu: bool, need_mul: bool):
    ops = sdp_rdma.read_operands(rdma, dram, cfg, "EW", *shape) if rdma is not None else {}
    out = []
    for need, comp, what in ((need_alu, sdp_rdma.USE_ALU, "ALU"),
                             (need_mul, sdp_rdma.USE_MUL, "MUL")):
        if not need:
            out.append(None)
            continue
        if comp not in ops:
            value = rdma("D_ERDMA_CFG") if rdma is not None else 0
            raise ConfigError("SDP_RDMA", "D_ERDMA_CFG", value,
                              f"SDP EW {what} operand comes from memory but ERDMA does not "
                              f"deliver it (disabled or DATA_USE mismatch)")
        op = ops[comp]
        if not g(f"D_DP_EW_{what}_CFG", f"EW_{what}_CVT_BYPASS"):
            op = operand_cvt(op, int(sign_extend(g(f"D_DP_EW_{what}_CVT_OFFSET_VALUE"), 32)),
                             int(sign_extend(g(f"D_DP_EW_{what}_CVT_SCALE_VALUE"), 16)),
                             g(f"D_DP_EW_{what}_CVT_TRUNCATE_VALUE"))
        out.append(op)
    return out


def y_stage(x: np.ndarray, g: GroupView, rdma: GroupView | None, dram: Dram, cfg: HwConfig,
            ram: LutRam, lut: Callable[[np.ndarray, LutRam, GroupView], tuple] | None = None
            ) -> tuple[np.ndarray, dict | None]:
    """The Y stage on int64 ``x[c_pad, h, w]``; returns the result and LUT counters
    (``lut``: the lookup to use, :func:`lookup` by default)."""
    f = g("D_DP_EW_CFG")
    alu_bypass, algo = bool(f & 2), (f >> 2) & 3
    mul_bypass, prelu, lut_bypass = bool(f & 16), bool(f & 32), bool(f & 64)
    alu_mem = not alu_bypass and bool(g("D_DP_EW_ALU_CFG", "EW_ALU_SRC"))
    mul_mem = not mul_bypass and bool(g("D_DP_EW_MUL_CFG", "EW_MUL_SRC"))
    alu_op, mul_op = _operands(g, rdma, dram, cfg, x.shape, alu_mem, mul_mem)
    if not mul_bypass:
        op = mul_op if mul_mem else int(sign_extend(g("D_DP_EW_MUL_SRC_VALUE"), 32))
        y = saturate(round_shift(x * np.asarray(op, np.int64), g("D_DP_EW_TRUNCATE_VALUE")), 32)
        x = np.where(x >= 0, x, y) if prelu else y
    if not alu_bypass:
        op = np.asarray(alu_op if alu_mem else int(sign_extend(g("D_DP_EW_ALU_SRC_VALUE"), 32)),
                        np.int64)
        if algo == ALU_MAX:
            x = np.maximum(x, op)
        elif algo == ALU_MIN:
            x = np.minimum(x, op)
        elif algo == ALU_SUM:
            x = saturate(x + op, 32)
        else:
            x = (x != op).astype(np.int64)
    if lut_bypass:
        return x, None
    return (lut or lookup)(x, ram, g)


def _log2_floor(u: np.ndarray) -> np.ndarray:
    out = np.zeros(u.shape, dtype=np.int64)
    pos = u > 0
    out[pos] = np.floor(np.log2(u[pos].astype(np.float64))).astype(np.int64)
    # float rounding can push values just below 2**k up to k: correct it exactly
    over = pos & (np.left_shift(np.int64(1), out) > u)
    out[over] -= 1
    return out


def _linear_index(x: np.ndarray, start: int, select: int, depth: int):
    """(under, over, addr, fraction) of a linear table (``depth`` = last index)."""
    under = x <= start
    u = np.where(under, 0, x - start) & 0xFFFFFFFF
    if select >= 0:
        idx = np.minimum(np.right_shift(u, min(select, 63)), 511)
    else:
        k = -select
        idx = np.where(u > (511 >> min(k, 10)), 511, np.left_shift(u, min(k, 10)))
    over = ~under & (idx >= depth)
    if select < 0:
        frac = np.zeros_like(u)
    else:
        mask = (1 << (select & 63)) - 1  # C: 1ull << select
        data = sign_extend(u & mask, 32) & ((1 << FRAC) - 1)  # via a signed 32-bit
        frac = ((data << (FRAC - select)) & ((1 << FRAC) - 1) if select <= FRAC
                else np.right_shift(data, min(select - FRAC, 63)))
    addr = np.where(under, 0, np.where(over, depth, idx))
    return under, over, addr, frac


def _exp_index(x: np.ndarray, start: int, offset: int):
    under = x <= start
    u = np.where(under, 0, x - start)
    log = _log2_floor(u)
    under = under | (log < offset)
    s = log - offset
    over = ~under & (s >= 64)
    frac = np.left_shift(u - np.left_shift(np.int64(1), log), FRAC - log)
    addr = np.where(under, 0, np.where(over, 64, s))
    return under, over, addr, np.where(under | over, 0, frac)


def lut_params(g: GroupView) -> LutConfig:
    """Decode the SDP's LUT registers (32-bit starts and ends, 8-bit index fields: the
    CDP's differ, see :func:`accel.cmod.lut.lut_config`)."""
    def info(field: str) -> int:
        return int(sign_extend(g("S_LUT_INFO", f"LUT_{field}"), 8))

    def edge(name: str) -> int:
        return int(sign_extend(g(f"S_LUT_{name}"), 32))

    def slope(tab: str, kind: str) -> dict[str, int]:
        key = f"{tab}_{kind}".lower()
        return {f"{key}_scale": int(sign_extend(g(f"S_LUT_{tab}_SLOPE_SCALE",
                                                  f"LUT_{tab}_SLOPE_{kind}_SCALE"), 16)),
                f"{key}_shift": int(sign_extend(g(f"S_LUT_{tab}_SLOPE_SHIFT",
                                                  f"LUT_{tab}_SLOPE_{kind}_SHIFT"), 5))}

    return LutConfig(
        le_exponent=g("S_LUT_CFG", "LUT_LE_FUNCTION") == 0,
        uflow_lo=bool(g("S_LUT_CFG", "LUT_UFLOW_PRIORITY")),
        oflow_lo=bool(g("S_LUT_CFG", "LUT_OFLOW_PRIORITY")),
        hybrid_lo=bool(g("S_LUT_CFG", "LUT_HYBRID_PRIORITY")),
        le_index_offset=info("LE_INDEX_OFFSET"), le_index_select=info("LE_INDEX_SELECT"),
        lo_index_select=info("LO_INDEX_SELECT"),
        le_start=edge("LE_START"), le_end=edge("LE_END"), lo_start=edge("LO_START"),
        lo_end=edge("LO_END"),
        **slope("LE", "UFLOW"), **slope("LE", "OFLOW"), **slope("LO", "UFLOW"),
        **slope("LO", "OFLOW"))


def lookup(x: np.ndarray, ram: LutRam, g: GroupView) -> tuple[np.ndarray, dict]:
    """The Y LUT on int64 ``x``; returns int32-range results and counters."""
    p = lut_params(g)
    le_exp, u_lo, o_lo, h_lo, off = p.le_exponent, p.uflow_lo, p.oflow_lo, p.hybrid_lo, \
        p.le_index_offset
    le_sel, lo_sel = p.le_index_select, p.lo_index_select
    reg = {"LE_START": p.le_start, "LE_END": p.le_end, "LO_START": p.lo_start,
           "LO_END": p.lo_end}
    le = (_exp_index(x, reg["LE_START"], off) if le_exp
          else _linear_index(x, reg["LE_START"], le_sel, 64))
    lo = _linear_index(x, reg["LO_START"], lo_sel, 256)
    le_u, le_o, le_a, le_f = le
    lo_u, lo_o, lo_a, lo_f = lo
    le_hit, lo_hit = ~(le_u | le_o), ~(lo_u | lo_o)
    both_u, both_o = le_u & lo_u, le_o & lo_o
    same = ~both_u & ~both_o & ~(le_hit ^ lo_hit)
    use_lo = (both_u & u_lo) | (both_o & o_lo) | (same & h_lo) | (~both_u & ~both_o & ~same
                                                                  & lo_hit)
    addr = np.where(use_lo, lo_a, le_a)
    frac = np.where(use_lo, lo_f, le_f)
    uflow = np.where(use_lo, lo_u, le_u)
    oflow = np.where(use_lo, lo_o, le_o)
    flow = uflow | oflow
    le_tab, lo_tab = ram.le, ram.lo
    y0 = np.where(use_lo, lo_tab[np.minimum(addr, 256)], le_tab[np.minimum(addr, 64)])
    nxt = np.minimum(addr + 1, 256)
    y1 = np.where(use_lo, lo_tab[nxt], le_tab[np.minimum(nxt, 64)])
    out = saturate(round_shift(y0 * ((1 << FRAC) - frac) + y1 * frac, FRAC), 32)
    if flow.any():
        out = out.copy()
        for tab, sel in (("LE", ~use_lo), ("LO", use_lo)):
            for kind, m_kind, edge in (("UFLOW", uflow, "START"), ("OFLOW", oflow, "END")):
                m = flow & sel & m_kind
                if not m.any():
                    continue
                scale = getattr(p, f"{tab}_{kind}_scale".lower())
                shift = getattr(p, f"{tab}_{kind}_shift".lower())
                bias = (1 << (off & 31)) if (tab == "LE" and kind == "UFLOW" and le_exp
                                             and off > 0) else 0
                a = x[m] - (bias + reg[f"{tab}_{edge}"])
                c = saturate(signed_shift(a * scale, shift), 32)
                out[m] = saturate(y0[m] + c, 32)
    total = x.size
    counts = {"uflow": int(uflow.sum()), "oflow": int(oflow.sum()),
              "le_hit": int(le_hit.sum()), "lo_hit": int(lo_hit.sum())}
    counts["hybrid"] = (total - sum(counts.values())) & 0xFFFFFFFF
    return out, counts
