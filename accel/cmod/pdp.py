"""PDP: planar data processor - max / min / average pooling (NVDLA_FACTS section 3).

* Max and min ignore padded positions.
* Average sums the window in 32 bits and, for padding, adds the registers
  ``PAD_VALUE_<n>X`` (n = padded cells in a window row or column, sign-extended
  from 8/9/10/10/11/11/11 bits): each real row of the window adds the value
  for its ``n`` padded columns, and the ``m`` padded rows add
  ``PAD_VALUE_<m>X * kernel_width``.  The sum is scaled by the 16.16
  reciprocals, width first then height, each with round half away from zero.
* Split-width mode (``SPLIT_NUM`` = n - 1 > 0) pools n vertical slices
  independently, as the cmod's RDMA / pooling / WDMA sequences do: slice 0
  reads ``PARTIAL_WIDTH_IN_FIRST`` columns from column 0 with the left
  padding only; slice i > 0 starts at ``first + (i-1) * mid - (kernel_w -
  stride_w)`` (the overlap the windows need) and reads ``mid`` (or ``last``)
  plus that overlap, the last slice alone with the right padding.  Slice i
  writes ``PARTIAL_WIDTH_OUT_*`` columns from output column ``out_first +
  (i-1) * out_mid``.  With consistent partial widths this equals one pass;
  inconsistent ones give what the slices compute, or a ConfigError when a
  slice leaves the input cube or the output widths do not add up.
* Limits: windows are 1..8 high and wide (the RDL encodes KERNEL_HEIGHT_1..8),
  and one pass, or each split-width slice, writes at most
  :func:`accel.cbuf.pdp_max_width` output columns (the line buffer); wider is a
  ConfigError that points at split-width mode.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accel import cbuf
from accel.arith import saturate, shift_round, sign_extend
from accel.cmod.csb import GroupView
from accel.cmod.cube import (
    padded_channels,
    read_int8_cube,
    read_int8_raw,
    write_int8_cube,
    write_packed_cube,
)
from accel.cmod.dram import Dram
from accel.cmod.errors import ConfigError, UnsupportedError, check_elements
from accel.cmod.perf import pdp_cycles
from accel.cmod.records import OpRecord
from accel.config import HwConfig
from accel.regs import lookup

UNIT = "PDP"
AVERAGE, MAX, MIN = 0, 1, 2
PAD_VALUE_BITS = (8, 9, 10, 10, 11, 11, 11)  # int8 width of PAD_VALUE_1X .. _7X
_FAR = 1 << 40  # beyond any int8 value: neutral element for masked max/min
_KERNEL_CFG = lookup("NVDLA_PDP.D_POOLING_KERNEL_CFG")


def pad_values(g: GroupView) -> np.ndarray:
    """``[0, PV1, .., PV7]``: index n gives the sum to add for n padded cells."""
    vals = [0]
    for n, bits in enumerate(PAD_VALUE_BITS, 1):
        vals.append(int(sign_extend(g(f"D_POOLING_PADDING_VALUE_{n}_CFG"), bits)))
    return np.array(vals, dtype=np.int64)


def _taps(n_out: int, stride: int, pad: int, k: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Clipped input indices ``[n_out, k]`` of each window and their validity."""
    idx = np.arange(n_out)[:, None] * stride - pad + np.arange(k)[None, :]
    valid = (idx >= 0) & (idx < size)
    return np.clip(idx, 0, size - 1), valid


def _extreme(x: np.ndarray, method: int, k: tuple[int, int], stride: tuple[int, int],
             pad: tuple[int, int], out_hw: tuple[int, int]) -> np.ndarray:
    """MAX / MIN pooling as two one-dimensional passes (the extreme of a window is the
    extreme over its rows of the extreme over its columns): ``kh + kw`` strided
    comparisons instead of a gathered ``[C, OH, KH, OW, KW]`` cube.  Positions outside the
    input hold the neutral value, as in the windowed form."""
    (kh, kw), (sh, sw), (pt, pl), (oh, ow) = k, stride, pad, out_hw
    c, h, w = x.shape
    # int8 data (the PDP's) in an int16 frame, a quarter of the int64 one's memory, whose
    # extreme value is a neutral fill: no int16 value is beyond it
    dtype = np.int16 if x.dtype in (np.int8, np.int16) else np.int64
    lo, hi = (-(1 << 15), (1 << 15) - 1) if dtype == np.int16 else (-_FAR, _FAR)
    fill, better = (lo, np.maximum) if method == MAX else (hi, np.minimum)
    need_h, need_w = (oh - 1) * sh + kh, (ow - 1) * sw + kw
    frame = np.full((c, need_h, need_w), fill, dtype=dtype)
    # input row i sits at frame row i + pad: clip both to the frame
    y0, y1 = max(0, -pt), min(h, need_h - pt)
    x0, x1 = max(0, -pl), min(w, need_w - pl)
    if y0 < y1 and x0 < x1:
        frame[:, y0 + pt:y1 + pt, x0 + pl:x1 + pl] = x[:, y0:y1, x0:x1]
    ye, xe = (oh - 1) * sh + 1, (ow - 1) * sw + 1
    rows = frame[:, 0:ye:sh, :].copy()
    for r in range(1, kh):
        better(rows, frame[:, r:r + ye:sh, :], out=rows)
    out = rows[:, :, 0:xe:sw].copy()
    for s in range(1, kw):
        better(out, rows[:, :, s:s + xe:sw], out=out)
    return out


def pool(x: np.ndarray, method: int, k: tuple[int, int], stride: tuple[int, int],
         pad: tuple[int, int], out_hw: tuple[int, int], pad_vals: np.ndarray | None = None,
         recip: tuple[int, int] = (1 << 16, 1 << 16)) -> np.ndarray:
    """Pool ``x[C, H, W]`` to ``[C, out_h, out_w]`` (int64, not yet saturated).

    ``k``, ``stride``, ``pad`` are ``(height, width)`` / ``(top, left)`` pairs,
    ``recip`` the 16.16 reciprocals ``(height, width)``.
    """
    kh, kw = k
    c, h, w = x.shape
    check_elements(UNIT, f"a {kh}x{kw} window over {out_hw[0]}x{out_hw[1]} outputs",
                   c * out_hw[0] * out_hw[1] * kh * kw)
    if method in (MAX, MIN):
        return _extreme(x, method, k, stride, pad, out_hw)
    if method != AVERAGE:
        raise ValueError(f"pooling method {method} not in AVERAGE=0, MAX=1, MIN=2")
    rows, vrow = _taps(out_hw[0], stride[0], pad[0], kh, h)
    cols, vcol = _taps(out_hw[1], stride[1], pad[1], kw, w)
    win = x[:, rows[:, :, None, None], cols[None, None, :, :]]  # [C, OH, KH, OW, KW]
    valid = vrow[:, :, None, None] & vcol[None, None, :, :]
    pv = np.zeros(8, dtype=np.int64) if pad_vals is None else pad_vals
    total = np.where(valid, win, 0).sum(axis=(2, 4))
    n_v = kh - vrow.sum(axis=1)  # padded rows per output row
    n_h = kw - vcol.sum(axis=1)  # padded columns per output column
    for padded, register in ((n_v, "D_DATA_CUBE_OUT_HEIGHT"), (n_h, "D_DATA_CUBE_OUT_WIDTH")):
        if padded.max() >= pv.size:
            size = out_hw[0] if register.endswith("HEIGHT") else out_hw[1]
            raise ConfigError(UNIT, register, size - 1,
                              f"an average window of {kh}x{kw} lies wholly in the padding "
                              f"({int(padded.max())} padded cells across; PAD_VALUE_1X.."
                              f"{pv.size - 1}X cover 1..{pv.size - 1})")
    total = (total + (kh - n_v)[:, None] * pv[n_h][None, :]
             + kw * pv[n_v][:, None])
    total = saturate(total, 32)
    return shift_round(shift_round(total * recip[1], 16) * recip[0], 16)


def check_kernel(g: GroupView, kern: tuple[int, int]) -> None:
    """Pooling windows are 1..8 high and wide (the RDL's KERNEL_HEIGHT/WIDTH encodings)."""
    for size, name in zip(kern, ("KERNEL_HEIGHT", "KERNEL_WIDTH"), strict=True):
        most = len(_KERNEL_CFG.field(name).enums)
        if size > most:
            raise ConfigError(UNIT, "D_POOLING_KERNEL_CFG", g("D_POOLING_KERNEL_CFG"),
                              f"{name}+1 = {size}: pooling windows are 1..{most}")


def check_line_buffer(g: GroupView, cfg: HwConfig, kernel_h: int, stride_y: int,
                      widths: list[int]) -> None:
    """Each pass / split-width slice writes at most :func:`accel.cbuf.pdp_max_width` columns.

    The PDP keeps the lines a window still needs in its line buffer, per output
    column; a wider pass does not fit (NVIDIA's compiler splits such passes,
    ``PDPNode.cpp`` ``calculateMaxWidth``, and asserts every slice is within it).
    """
    limit = cbuf.pdp_max_width(cfg, kernel_h, stride_y)
    why = (f"the PDP line buffer holds {limit} output columns for a {kernel_h}-high window at "
           f"stride {stride_y} on {cfg.name}")
    if len(widths) == 1 and widths[0] > limit:
        raise ConfigError(UNIT, "D_DATA_CUBE_OUT_WIDTH", g("D_DATA_CUBE_OUT_WIDTH"),
                          f"{widths[0]} output columns in one pass, but {why}; use split-width "
                          f"mode (SPLIT_NUM, D_PARTIAL_WIDTH_IN/OUT)")
    if len(widths) > 1 and max(widths) > limit:
        raise ConfigError(UNIT, "D_PARTIAL_WIDTH_OUT", g("D_PARTIAL_WIDTH_OUT"),
                          f"a split-width slice writes {max(widths)} output columns, but {why}; "
                          f"use more, narrower slices (SPLIT_NUM)")


def split_plan(g: GroupView, kw: int, sw: int, w: int, ow: int
               ) -> list[tuple[int, int, int, int, int]]:
    """``(in_start, in_width, pad_left, out_start, out_width)`` of each width slice."""
    pad_left = g("D_POOLING_PADDING_CFG", "PAD_LEFT")
    n = g("D_OPERATION_MODE_CFG", "SPLIT_NUM") + 1
    if n == 1:
        return [(0, w, pad_left, 0, ow)]
    win = [g("D_PARTIAL_WIDTH_IN", f"PARTIAL_WIDTH_IN_{k}") + 1 for k in ("FIRST", "MID", "LAST")]
    wout = [g("D_PARTIAL_WIDTH_OUT", f"PARTIAL_WIDTH_OUT_{k}") + 1
            for k in ("FIRST", "MID", "LAST")]
    overlap = kw - sw  # may be negative: stride wider than the kernel skips columns
    plan = [(0, win[0], pad_left, 0, wout[0])]
    for i in range(1, n):
        k = 2 if i == n - 1 else 1
        in0 = win[0] + (i - 1) * win[1] - overlap
        plan.append((in0, win[k] + overlap, 0, wout[0] + (i - 1) * wout[1], wout[k]))
    for in0, in_w, *_ in plan:
        if in0 < 0 or in_w <= 0 or in0 + in_w > w:
            raise ConfigError(UNIT, "D_PARTIAL_WIDTH_IN", g("D_PARTIAL_WIDTH_IN"),
                              f"split slice reads input columns [{in0}, {in0 + in_w}) outside "
                              f"the {w}-wide input cube")
    if plan[-1][3] + plan[-1][4] != ow:
        raise ConfigError(UNIT, "D_PARTIAL_WIDTH_OUT", g("D_PARTIAL_WIDTH_OUT"),
                          f"split output widths end at column {plan[-1][3] + plan[-1][4]}, "
                          f"not at the output width {ow}")
    return plan


@dataclass(frozen=True)
class PdpPlan:
    """One PDP operation decoded and checked from its registers (see :func:`decode`)."""

    c: int
    h: int
    w: int
    oh: int
    ow: int
    c_pad: int
    src: tuple[int, int, int] | None      # from memory: base, line, surface stride
    method: int
    kernel: tuple[int, int]
    stride: tuple[int, int]
    pad_top: int
    recip: tuple[int, int]
    splits: tuple[tuple[int, int, int, int, int], ...]
    pad_values: np.ndarray
    dst: tuple[int, int, int]
    cycles: int

    def execute(self, dram: Dram, cfg: HwConfig, x_in: np.ndarray | None = None,
                fast=None) -> OpRecord:
        """Pool (``x_in``: the SDP's output on the fly, int8) and write; return the record.
        ``fast``: the cmodel's speed layer (:class:`accel.cmod.fast.paths.FastPaths`),
        which pools an input from memory as memory holds it where it can."""
        a, c_pad, h, w = cfg.atom_size, self.c_pad, self.h, self.w
        extreme = self.method in (MAX, MIN)      # these pool int8 values as they are
        packed = fast.pdp_packed(self) if fast is not None and self.src is not None else None
        if packed is not None:
            base, line, surf = self.dst
            write_packed_cube(dram, base, packed, line, surf, "PDP_WDMA")
            return self._record()
        if self.src is not None:
            base, line, surf = self.src
            read = read_int8_raw if extreme else read_int8_cube
            x = read(dram, base, c_pad, h, w, a, line, surf, "PDP_RDMA")
        else:
            if x_in.shape[1:] != (h, w) or x_in.shape[0] < self.c:
                raise ConfigError(UNIT, "D_DATA_CUBE_IN_CHANNEL", self.c - 1,
                                  f"PDP input {self.c}x{h}x{w} (CxHxW) does not match the SDP "
                                  f"output {'x'.join(map(str, x_in.shape))}")
            x = np.zeros((c_pad, h, w), dtype=np.int8 if extreme and x_in.dtype == np.int8
                         else np.int64)
            n = min(c_pad, x_in.shape[0])
            x[:n] = x_in[:n]
        out = np.empty((c_pad, self.oh, self.ow), dtype=np.int64)
        for in0, in_w, pad_left, out0, out_w in self.splits:
            out[:, :, out0:out0 + out_w] = pool(x[:, :, in0:in0 + in_w], self.method,
                                                self.kernel, self.stride,
                                                (self.pad_top, pad_left), (self.oh, out_w),
                                                self.pad_values, self.recip)
        base, line, surf = self.dst
        write_int8_cube(dram, base, saturate(out, 8), a, line, surf, "PDP_WDMA")
        return self._record()

    def _record(self) -> OpRecord:
        return OpRecord("PDP", self.cycles,
                        {"in": (self.c, self.h, self.w), "out": (self.c, self.oh, self.ow)},
                        {"method": ("avg", "max", "min")[self.method],
                         "splits": len(self.splits)})


def decode(g: GroupView, rdma: GroupView, cfg: HwConfig, fed: bool) -> PdpPlan:
    """Read and check one PDP operation's registers; ``fed``: an SDP streams its output
    to this op (on the fly), otherwise PDP_RDMA reads the input from memory."""
    if g("D_DATA_FORMAT", "INPUT_DATA") != 0:
        raise UnsupportedError("PDP precision other than int8 is not modelled")
    off_flying = bool(g("D_OPERATION_MODE_CFG", "FLYING_MODE"))
    if not off_flying and not fed:
        raise ConfigError(UNIT, "D_OPERATION_MODE_CFG", g("D_OPERATION_MODE_CFG"),
                          "on-the-fly PDP needs an SDP with OUTPUT_DST=PDP")
    c = g("D_DATA_CUBE_IN_CHANNEL") + 1
    h, w = g("D_DATA_CUBE_IN_HEIGHT") + 1, g("D_DATA_CUBE_IN_WIDTH") + 1
    oh, ow = g("D_DATA_CUBE_OUT_HEIGHT") + 1, g("D_DATA_CUBE_OUT_WIDTH") + 1
    c_pad = padded_channels(c, cfg.atom_size)
    src = None
    if off_flying:
        src = (rdma.addr("D_SRC_BASE_ADDR_LOW", "D_SRC_BASE_ADDR_HIGH"),
               rdma("D_SRC_LINE_STRIDE"), rdma("D_SRC_SURFACE_STRIDE"))
    method = g("D_OPERATION_MODE_CFG", "POOLING_METHOD")
    kern = (g("D_POOLING_KERNEL_CFG", "KERNEL_HEIGHT") + 1,
            g("D_POOLING_KERNEL_CFG", "KERNEL_WIDTH") + 1)
    stride = (g("D_POOLING_KERNEL_CFG", "KERNEL_STRIDE_HEIGHT") + 1,
              g("D_POOLING_KERNEL_CFG", "KERNEL_STRIDE_WIDTH") + 1)
    check_kernel(g, kern)
    splits = split_plan(g, kern[1], stride[1], w, ow)
    check_line_buffer(g, cfg, kern[0], stride[0], [s[4] for s in splits])
    if method not in (AVERAGE, MAX, MIN):
        raise ConfigError(UNIT, "D_OPERATION_MODE_CFG", g("D_OPERATION_MODE_CFG"),
                          f"POOLING_METHOD={method} is not AVERAGE=0, MAX=1, MIN=2")
    return PdpPlan(
        c=c, h=h, w=w, oh=oh, ow=ow, c_pad=c_pad, src=src, method=method, kernel=kern,
        stride=stride, pad_top=g("D_POOLING_PADDING_CFG", "PAD_TOP"),
        recip=(g("D_RECIP_KERNEL_HEIGHT"), g("D_RECIP_KERNEL_WIDTH")),
        splits=tuple(splits), pad_values=pad_values(g),
        dst=(g.addr("D_DST_BASE_ADDR_LOW", "D_DST_BASE_ADDR_HIGH"), g("D_DST_LINE_STRIDE"),
             g("D_DST_SURFACE_STRIDE")),
        # a split-width slice reads the columns it shares with the slice before again
        cycles=pdp_cycles(cfg, c_pad * h * sum(s[1] for s in splits), c_pad * oh * ow,
                          off_flying))
