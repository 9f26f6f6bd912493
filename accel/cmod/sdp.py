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

from dataclasses import dataclass, field

import numpy as np

from accel.arith import (
    clamp,
    count_saturated_each,
    saturate,
    saturation_mask,
    shift_round,
    shift_round_sat,
    sign_extend,
)
from accel.cmod import sdp_rdma, sdp_y
from accel.cmod.csb import GroupView
from accel.cmod.cube import (
    cube_offsets,
    padded_channels,
    planar,
    read_int8_cube,
    write_int8_cube,
    write_packed_cube,
)
from accel.cmod.dram import Dram
from accel.cmod.errors import ConfigError, UnsupportedError
from accel.cmod.lut import LUT_COUNTERS
from accel.cmod.perf import sdp_cycles
from accel.cmod.records import OpRecord
from accel.config import HwConfig

UNIT = "SDP"
ALU_MAX, ALU_MIN, ALU_SUM = 0, 1, 2
MAX_SHIFT = 62  # larger right shifts of a <= 49-bit value all give 0, like 62


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


def alu_operand_shifted(op: np.ndarray | int, shift: int) -> np.ndarray | int:
    """int16 operand << shift, saturated to int32 (shifts past 40 saturate alike; up to
    15 bits nothing saturates)."""
    if isinstance(op, (int, np.integer)):
        return min(max(int(op) << min(shift, 40), -(1 << 31)), (1 << 31) - 1)
    a = np.asarray(op, dtype=np.int64)
    if shift <= 15:      # an int16 operand shifted by 15 bits or fewer stays within int32
        return np.left_shift(a, shift) if shift else a
    return saturate(np.left_shift(a, min(shift, 40)), 32)


def x_stage(x: np.ndarray, st: StageConfig, alu_op, mul_op, inplace: bool = False,
            alu_shifted: bool = False) -> np.ndarray:
    """One X stage (BS or BN) on int64 data; ``alu_op``/``mul_op`` broadcast against x.

    ``inplace`` lets the stage overwrite ``x`` (the caller owns it); otherwise
    ``x`` is left as it is.  ``alu_shifted``: ``alu_op`` already went through
    :func:`alu_operand_shifted`.
    """
    if st.bypass:
        return x
    y = x if inplace else None      # the array the stage may write into
    if not st.alu_bypass:
        op = alu_op if alu_shifted else alu_operand_shifted(alu_op, st.alu_shift)
        if st.alu_algo == ALU_MAX:
            y = np.maximum(x, op, out=y)
        elif st.alu_algo == ALU_MIN:
            y = np.minimum(x, op, out=y)
        elif st.alu_algo == ALU_SUM:
            y = np.add(x, op, out=y)
        else:
            raise ConfigError(UNIT, "D_DP_X_CFG", st.alu_algo, "ALU_ALGO must be MAX/MIN/SUM")
    src = x if y is None else y
    shift = min(st.mul_shift, MAX_SHIFT)
    if st.mul_bypass:
        y = shift_round(src, shift, out=y)
        y = saturate(y, 32, out=None if y is x and not inplace else y)
    elif st.prelu:
        neg = shift_round_sat(src * np.asarray(mul_op, np.int64), shift, 32)
        y = np.where(src < 0, neg, saturate(src, 32))
    else:
        y = np.multiply(src, mul_op, out=y)
        if not st.relu_bypass:    # saturate and ReLU in one clip: [0, 2**31 - 1]
            shift_round(y, shift, out=y, nonneg=True)    # negatives end at 0 either way
            return clamp(y, 0, (1 << 31) - 1, out=y)
        shift_round(y, shift, out=y)
        saturate(y, 32, out=y)
    if not st.relu_bypass:
        y = np.maximum(y, 0, out=None if y is x and not inplace else y)
    return y


def output_cvt(x: np.ndarray, offset: int, scale: int, shift: int) -> tuple[np.ndarray, np.ndarray]:
    """``(int8 values, 17-bit saturation mask)`` of the output converter."""
    y = (x - offset) * scale
    y = shift_round(y, min(shift, MAX_SHIFT))
    sat = saturation_mask(y, 17)
    return saturate(saturate(y, 17), 8), sat


def convert_inplace(x: np.ndarray, offset: int, scale: int, shift: int, c: int,
                    nonneg: bool = False) -> tuple[np.ndarray, int]:
    """:func:`output_cvt` overwriting ``x[C, H, W]``: ``(int8 values, saturations among the
    first c channels)``; see :func:`convert_launches`."""
    out, sat = convert_launches(x[None], offset, scale, shift, c, nonneg)
    return out[0], sat[0]


def convert_launches(x: np.ndarray, offset, scale, shift, c: int, nonneg: bool = False
                     ) -> tuple[np.ndarray, list[int]]:
    """:func:`output_cvt` overwriting ``x[B, C, H, W]``, the outputs of ``B`` operations:
    ``(int8 values, each one's saturations among its first c channels)``.  ``offset``,
    ``scale`` and ``shift`` are ints or int64 arrays broadcasting along B.  ``nonneg``: the
    caller knows ``x >= 0`` (a ReLU ran last), which with ``offset <= 0`` and ``scale >= 0``
    keeps the arithmetic on non-negative values (no rounding correction for negatives)."""
    if np.any(offset):
        np.subtract(x, offset, out=x)
    np.multiply(x, scale, out=x)
    nonneg = bool(nonneg and np.all(np.asarray(offset) <= 0) and np.all(np.asarray(scale) >= 0))
    if isinstance(shift, (int, np.integer)):
        shift_round(x, min(int(shift), MAX_SHIFT), out=x, nonneg=nonneg)
    else:
        shift_round(x, np.minimum(shift, MAX_SHIFT), out=x)
    sat = count_saturated_each(x[:, :c], 17)
    return (np.minimum(x, 127, out=x) if nonneg else saturate(x, 8, out=x)), sat


@dataclass(frozen=True)
class OperandRead:
    """Where one X stage's memory operands come from (SDP_RDMA BRDMA / NRDMA)."""

    base: int
    offsets: np.ndarray        # int64 [c_pad, h, w] or [c_pad, 1, 1]: first byte of each
    nbytes: int                # 1 or 2 per component
    comps: tuple[int, ...]     # sdp_rdma.USE_ALU / USE_MUL, in memory order
    #: the last read, ``[region version, operands]``: bias and scale tables are read
    #: again only when their memory was written
    last: list = field(default_factory=lambda: [None, None], compare=False, repr=False)
    #: per-element operands: ``(shape, byte strides)`` of ``offsets`` as a
    #: ``[surface, lane, row, column]`` grid, read as a strided view rather than a gather
    grid: tuple[tuple[int, ...], tuple[int, ...]] | None = None

    def read(self, dram: Dram) -> dict[int, np.ndarray]:
        """``{component: int64 operands}`` (shared with later reads: do not modify)."""
        version = dram.version(self.base)
        if self.last[0] == version:
            return self.last[1]
        out = self._read(dram)
        for a in out.values():
            a.flags.writeable = False
        self.last[:] = [version, out]
        return out

    def alu_shifted(self, dram: Dram, shift: int) -> np.ndarray:
        """The ALU operands through :func:`alu_operand_shifted` (kept with the read)."""
        ops = self.read(dram)
        key = ("alu<<", shift)
        if key not in ops:
            shifted = np.asarray(alu_operand_shifted(ops[sdp_rdma.USE_ALU], shift))
            shifted.flags.writeable = False
            ops[key] = shifted
        return ops[key]

    def _bytes(self, dram: Dram, delta: int) -> np.ndarray:
        """The byte ``delta`` after each operand's first, ``[c_pad, h, w]``."""
        if self.grid is not None:
            shape, strides = self.grid
            view = dram.strided(self.base + delta, shape, strides, sdp_rdma.UNIT)
            if view is not None:
                return view.reshape(self.offsets.shape)
        return dram.gather(self.base, self.offsets + delta, sdp_rdma.UNIT)

    def _read(self, dram: Dram) -> dict[int, np.ndarray]:
        out = {}
        for i, comp in enumerate(self.comps):
            lo = self._bytes(dram, i * self.nbytes)
            if self.nbytes == 1:
                out[comp] = lo.view(np.int8).astype(np.int64)
            else:
                hi = self._bytes(dram, i * self.nbytes + 1)
                out[comp] = (lo.astype(np.uint16) | (hi.astype(np.uint16) << 8)).view(
                    np.int16).astype(np.int64)
        return out


def _operand_read(g: GroupView, rdma: GroupView | None, cfg: HwConfig, st: StageConfig,
                  p: str, shape: tuple[int, int, int]) -> OperandRead | None:
    """Decode (and check) the memory operands of stage ``p``; None when it reads none."""
    need_alu = not st.bypass and not st.alu_bypass and st.alu_src_mem
    need_mul = not st.bypass and not st.mul_bypass and st.mul_src_mem
    if not (need_alu or need_mul):
        return None
    dma, pre = sdp_rdma.DMA_OF_STAGE[p]
    reg = f"D_{dma}_CFG"
    comps: list[int] = []
    if rdma is not None and not rdma(reg, f"{dma}_DISABLE"):
        use = rdma(reg, f"{dma}_DATA_USE")
        if use not in (sdp_rdma.USE_MUL, sdp_rdma.USE_ALU, sdp_rdma.USE_BOTH):
            raise ConfigError("SDP_RDMA", reg, rdma(reg),
                              f"{dma}_DATA_USE={use} is not MUL/ALU/BOTH")
        comps = [sdp_rdma.USE_ALU, sdp_rdma.USE_MUL] if use == sdp_rdma.USE_BOTH else [use]
    for need, comp, what in ((need_alu, sdp_rdma.USE_ALU, "ALU"),
                             (need_mul, sdp_rdma.USE_MUL, "MUL")):
        if need and comp not in comps:
            value = rdma(reg) if rdma is not None else 0
            raise ConfigError("SDP_RDMA", reg, value,
                              f"SDP {p} {what} operand comes from memory but {dma} does not "
                              f"deliver it (disabled or DATA_USE mismatch)")
    nbytes = 2 if rdma(reg, f"{dma}_DATA_SIZE") else 1
    esize = nbytes * len(comps)
    c_pad, h, w = shape
    grid = None
    if rdma(reg, f"{dma}_DATA_MODE"):   # per element
        atom = cfg.atom_size
        line, surf = rdma(f"D_{pre}_LINE_STRIDE"), rdma(f"D_{pre}_SURFACE_STRIDE")
        offs = cube_offsets(c_pad, h, w, atom, line, surf, esize)
        # the same offsets (layout.cube_offsets), as strides of whole atoms
        grid = ((c_pad // atom, atom, h, w), (surf, esize, line, atom * esize))
    else:                               # per kernel: a packed 1x1xC cube
        offs = np.arange(c_pad, dtype=np.int64)[:, None, None] * esize
    return OperandRead(rdma.addr(f"D_{pre}_BASE_ADDR_LOW", f"D_{pre}_BASE_ADDR_HIGH"), offs,
                       nbytes, tuple(comps), grid=grid)


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


@dataclass(frozen=True)
class SdpPlan:
    """One SDP operation decoded and checked from its registers (see :func:`decode`)."""

    c: int
    h: int
    w: int
    c_pad: int
    flying: bool
    src: tuple[int, int, int] | None          # base, line, surface stride (from memory)
    stages: tuple[tuple[StageConfig, OperandRead | None], ...]
    y_stage: bool
    lut_perf: bool
    cvt: tuple[int, int, int]                 # offset, scale, shift
    to_pdp: bool
    dst: tuple[int, int, int] | None          # base, line, surface stride
    cycles: int
    note: str
    #: :meth:`pipeline_record`'s records, on the fly and from memory
    _records: dict = field(default_factory=dict, compare=False, repr=False)

    def execute(self, dram: Dram, cfg: HwConfig, x_in: np.ndarray | None = None,
                y_group: tuple | None = None) -> tuple[OpRecord, np.ndarray | None, int]:
        """Run the op: ``(record, output streamed to PDP or None, saturations)``.

        ``x_in`` (on the fly: the CACC result, int64) becomes the op's own and is
        overwritten.  ``y_group`` is ``(g, rdma, lut, lookup)`` for an op with a Y
        stage, which reads its registers as it runs (``lookup``: None, or the speed
        layer's LUT lookup).
        """
        c_pad, h, w = self.c_pad, self.h, self.w
        if x_in is not None and x_in.shape[0] == c_pad:
            x = x_in        # the CACC's result, which this op now owns
        elif x_in is not None:
            x = np.zeros((c_pad, h, w), dtype=np.int64)  # disabled MAC cells deliver 0
            x[:x_in.shape[0]] = x_in
        else:
            base, line, surf = self.src
            x = read_int8_cube(dram, base, c_pad, h, w, cfg.atom_size, line, surf,
                               sdp_rdma.UNIT)
        nonneg = False          # a ReLU ran last: every value is >= 0
        for st, operands in self.stages:
            if st.bypass:
                continue
            nonneg = not st.relu_bypass
            alu_op, mul_op, shifted = st.alu_operand, st.mul_operand, False
            if operands is not None:
                got = operands.read(dram)
                if st.alu_src_mem and sdp_rdma.USE_ALU in got:
                    alu_op, shifted = operands.alu_shifted(dram, st.alu_shift), True
                mul_op = got.get(sdp_rdma.USE_MUL, mul_op) if st.mul_src_mem else mul_op
            x = x_stage(x, st, alu_op, mul_op, inplace=True, alu_shifted=shifted)
        rec = self.record(x_in is not None)
        if self.y_stage:
            g, rdma, lut, lookup = y_group
            x, lut_counts = sdp_y.y_stage(x, g, rdma, dram, cfg, lut, lookup)
            nonneg = False
            if lut_counts is not None:
                self.lut_counted(rec, g, lut_counts)
        out, saturations = convert_inplace(x, *self.cvt, self.c, nonneg)
        return rec, self.deliver(dram, cfg, out), saturations

    def lut_counted(self, rec: OpRecord, g: GroupView, counts: dict[str, int]) -> None:
        """Put the Y stage's LUT counters ``counts`` in the record ``rec`` and, when the
        op counts them, in the registers of its group ``g``."""
        rec.details["lut"] = counts
        if self.lut_perf:
            for reg, key in LUT_COUNTERS:
                g.regs.set_hw(reg, counts[key], g.group)

    def record(self, flying: bool) -> OpRecord:
        """The op's record (the Y stage's lookup counts are added by :meth:`execute`)."""
        return OpRecord("SDP", self.cycles, (self.c, self.h, self.w), {"flying": flying},
                        note=self.note)

    def pipeline_record(self, flying: bool) -> OpRecord:
        """:meth:`record` of an op without a Y stage, whose record is the same on every
        run: one object for all of them (records are read, not modified), so a run of
        many convolutions allocates no SDP records."""
        rec = self._records.get(flying)
        if rec is None:
            rec = self._records[flying] = self.record(flying)
        return rec

    def deliver(self, dram: Dram, cfg: HwConfig, out: np.ndarray) -> np.ndarray | None:
        """Write the converted output ``out[C_pad, H, W]`` (int8 values), or return it as int8
        when it streams to PDP."""
        if self.to_pdp:
            return out.astype(np.int8)
        base, line, surf = self.dst
        write_int8_cube(dram, base, out, cfg.atom_size, line, surf, "SDP_WDMA")
        return None

    def dst_pixels(self, dram: Dram, atom: int) -> np.ndarray | None:
        """The output cube in memory as int8 ``[C_pad / atom, H * W, atom]``, writeable (the
        channel packing, a surface's pixels in order): for an output to memory whose lines
        are dense (line stride ``W * atom``) and whose surfaces do not overlap; None for
        any other (or one leaving its region).  Whoever writes through it calls
        ``dram.touched(dst[0])`` after, as :meth:`deliver_packed` does."""
        if self.to_pdp:
            return None
        base, line, surf = self.dst
        surfaces, points = self.c_pad // atom, self.h * self.w
        if line != self.w * atom or (surfaces > 1 and surf < points * atom):
            return None
        view = dram.strided(base, (surfaces, points, atom), (surf, atom, 1), "SDP_WDMA",
                            "write")
        return None if view is None else view.view(np.int8)

    def deliver_packed(self, dram: Dram, packed: np.ndarray) -> np.ndarray | None:
        """:meth:`deliver` of the output as :meth:`accel.cmod.fast.fused.PostProcess.run_packed`
        makes it, channel-packed ``[S, H, W, atom]``."""
        if self.to_pdp:
            return planar(packed)
        base, line, surf = self.dst
        write_packed_cube(dram, base, packed, line, surf, "SDP_WDMA")
        return None


def decode(g: GroupView, rdma: GroupView | None, cfg: HwConfig, flying: bool,
           model_y: bool = False) -> SdpPlan:
    """Read and check one SDP operation's registers (its consumer groups ``g`` / ``rdma``).

    ``flying``: the input is the CACC result; otherwise SDP_RDMA reads it from
    memory.  ``model_y`` runs a programmed Y stage even when ``cfg`` has none;
    the record then carries a ``note``.
    """
    check_supported(g, cfg, model_y)
    w = g("D_DATA_CUBE_WIDTH", "WIDTH") + 1
    h = g("D_DATA_CUBE_HEIGHT", "HEIGHT") + 1
    c = g("D_DATA_CUBE_CHANNEL", "CHANNEL") + 1
    c_pad = padded_channels(c, cfg.atom_size)
    src = None
    if not flying:
        if rdma("D_FEATURE_MODE_CFG", "IN_PRECISION") != 0:
            raise UnsupportedError("SDP_RDMA input precision other than int8 is not modelled")
        src = (rdma.addr("D_SRC_BASE_ADDR_LOW", "D_SRC_BASE_ADDR_HIGH"),
               rdma("D_SRC_LINE_STRIDE"), rdma("D_SRC_SURFACE_STRIDE"))
    stages = []
    for p in ("BS", "BN"):
        st = stage_config(g, p)
        stages.append((st, _operand_read(g, rdma, cfg, st, p, (c_pad, h, w))))
    to_pdp = bool(g("D_FEATURE_MODE_CFG", "OUTPUT_DST"))
    dst = None if to_pdp else (g.addr("D_DST_BASE_ADDR_LOW", "D_DST_BASE_ADDR_HIGH"),
                               g("D_DST_LINE_STRIDE"), g("D_DST_SURFACE_STRIDE"))
    return SdpPlan(
        c=c, h=h, w=w, c_pad=c_pad, flying=flying, src=src, stages=tuple(stages),
        y_stage=not g("D_DP_EW_CFG", "EW_BYPASS"),
        lut_perf=bool(g("D_PERF_ENABLE", "PERF_LUT_EN")),
        cvt=(int(sign_extend(g("D_CVT_OFFSET"), 32)),
             int(sign_extend(g("D_CVT_SCALE", "CVT_SCALE"), 16)), g("D_CVT_SHIFT", "CVT_SHIFT")),
        to_pdp=to_pdp, dst=dst, cycles=sdp_cycles(g, cfg, c_pad, h, w, not flying),
        note=y_note(g, cfg))
