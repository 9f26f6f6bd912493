"""The ``rtl`` backend: every hardware operation on the RTL engine, checked against the cmodel.

:class:`RtlBackend` is the cmod backend (:class:`~accel.backends.cmod.CmodBackend`)
over :class:`RtlDla`, a :class:`~accel.cmod.dla.Dla` that hands every operation the RTL
engine implements - convolutions with their on-the-fly SDP (per-kernel or per-element
operands), PDP, SDP reading memory and CDP - to one simulation of that engine, kept
running for the whole session (:class:`RtlSimulator`).  When the firmware's last
``D_OP_ENABLE`` starts such an operation, :class:`RtlDla`

1. records it as a trace in NVIDIA's ``.cfg`` format (:mod:`accel.trace.writer`):
   the memory it reads - input cube, weights, SDP operands - and the current bytes of
   its output region; ``S_POINTER`` and every ``D_`` register of its units from the
   consumer groups the firmware programmed (for the CDP also its lookup table, when the
   engine does not hold it yet); the op enables; an ``intr_notify`` on the done
   interrupt;
2. runs the op on the cmodel too (its records, interrupts and CBUF state stay
   the firmware's view);
3. has the simulation play the trace (``tests/rtl/trace_tb.py``, serve mode)
   and return the output region; the RTL's bytes must equal the cmodel's - a
   difference is an :class:`RtlMismatch` naming the op and the first byte -
   and are what later operations read;
4. adds the RTL's cycle count to the op's record (``details["rtl_cycles"]``,
   beside the cmodel's estimate ``cycles``).

A convolution whose weights exceed the engine's weight memory runs as several engine
operations of whole kernel groups (:meth:`RtlDla._kernel_pieces`): each reads the whole
input and its kernels' weights and operands and writes its output surfaces, the registers
the firmware programmed changed only where the kernel count and the addresses of the
weights, operands and output name them (:func:`kernel_piece`).  NVDLA streams such weights
through the CBUF within one operation; the engine holds them whole, so its driver splits.

Operations the engine does not implement (image input, SDP's Y stage, an SDP op feeding
PDP, Rubik, a convolution whose input is larger than the engine's memories; on a player
without them, such as the board's engine, whatever its ``kinds`` leave out) run on the
cmodel; :attr:`RtlDla.fallbacks` counts them by reason.
"""

from __future__ import annotations

import contextlib
import math
import shutil
import tempfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from accel.backends.cmod import CmodBackend
from accel.cmod.dla import ConvDone, Dla, Launch
from accel.config import HwConfig
from accel.errors import AccelCheckFailed
from accel.layout import CubeLayout
from accel.regs import field_get, field_set, lookup
from accel.rtl.cdp import CDP_UNITS
from accel.rtl.conv_engine import memory_refusal
from accel.rtl.csb_regs import d_registers, s_registers
from accel.rtl.generate import TRACE_ENTRIES, sim_others
from accel.rtl.pdp import PDP_UNITS
from accel.trace.rtl_player import RtlError, RtlSimulator, unsupported
from accel.trace.writer import TraceBuilder

#: the units an RTL convolution programs, in enable order (the last enable starts it)
ENABLE_ORDER = ("NVDLA_SDP", "NVDLA_SDP_RDMA", "NVDLA_CACC", "NVDLA_CMAC_A", "NVDLA_CMAC_B",
                "NVDLA_CSC", "NVDLA_CDMA")
#: an SDP operation's units when it reads its input from memory
SDP_ORDER = ("NVDLA_SDP_RDMA", "NVDLA_SDP")
#: the operations (:attr:`accel.cmod.dla.Launch.kind`) the simulated engine runs
SIM_KINDS = ("conv", "pdp", "sdp", "cdp")
#: GLB mask during RTL operations: only SDP's done interrupts reach the pin
_MASKED = ("CDMA_DAT_DONE_MASK0", "CDMA_DAT_DONE_MASK1", "CDMA_WT_DONE_MASK0",
           "CDMA_WT_DONE_MASK1", "CACC_DONE_MASK0", "CACC_DONE_MASK1")


def kernel_piece(writes: list[tuple[str, int]], k0: int, k1: int, atom: int
                  ) -> list[tuple[str, int]]:
    """A convolution's register ``writes`` for its kernels ``[k0, k1)`` alone: the kernel
    counts, the weights' address and size, the per-kernel operands' addresses and the
    output's address moved to those kernels; every other register as programmed.  ``k0``
    is a whole number of kernel groups and of ``atom``-channel output surfaces; the SDP's
    operands are per kernel (a per-element cube is not moved)."""
    regs = dict(writes)
    kernels = k1 - k0
    bpk = field_get(regs["NVDLA_CDMA.D_WEIGHT_SIZE_0_0"], "NVDLA_CDMA.D_WEIGHT_SIZE_0",
                    "BYTE_PER_KERNEL") + 1
    sizes = {"NVDLA_CDMA.D_WEIGHT_SIZE_1_0": "WEIGHT_KERNEL",
             "NVDLA_CSC.D_WEIGHT_SIZE_EXT_1_0": "WEIGHT_KERNEL",
             "NVDLA_CSC.D_DATAOUT_SIZE_1_0": "DATAOUT_CHANNEL",
             "NVDLA_CACC.D_DATAOUT_SIZE_1_0": "DATAOUT_CHANNEL",
             "NVDLA_SDP.D_DATA_CUBE_CHANNEL_0": "CHANNEL",
             "NVDLA_SDP_RDMA.D_DATA_CUBE_CHANNEL_0": "CHANNEL"}
    out = []
    for symbol, value in writes:
        if symbol in sizes:
            value = field_set(value, lookup(symbol), sizes[symbol], kernels - 1)
        elif symbol in ("NVDLA_CDMA.D_WEIGHT_BYTES_0", "NVDLA_CSC.D_WEIGHT_BYTES_0"):
            value = kernels * bpk
        elif symbol == "NVDLA_CDMA.D_WEIGHT_ADDR_LOW_0":
            value += k0 * bpk
        elif symbol == "NVDLA_SDP.D_DST_BASE_ADDR_LOW_0":
            value += k0 // atom * regs["NVDLA_SDP.D_DST_SURFACE_STRIDE_0"]
        elif symbol in ("NVDLA_SDP_RDMA.D_BS_BASE_ADDR_LOW_0",
                        "NVDLA_SDP_RDMA.D_BN_BASE_ADDR_LOW_0"):
            dma = "BRDMA" if "_BS_" in symbol else "NRDMA"
            cfg_symbol = f"NVDLA_SDP_RDMA.D_{dma}_CFG_0"
            cfg = regs.get(cfg_symbol, 0)
            use = field_get(cfg, cfg_symbol, f"{dma}_DATA_USE")
            wide = field_get(cfg, cfg_symbol, f"{dma}_DATA_SIZE")
            value += k0 * (1 + wide) * (2 if use == 2 else 1)    # USE 2: ALU and MUL
        out.append((symbol, value))
    return out


class RtlMismatch(RtlError, AccelCheckFailed):
    """The RTL engine's output differs from the cmodel's."""


def _merge(regions: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping ``(base, size)`` regions joined.  Regions that only touch stay apart:
    they may lie in two buffers of the memory, which one read must not cross."""
    out: list[list[int]] = []
    for base, size in sorted(regions):
        if out and base < out[-1][0] + out[-1][1]:
            out[-1][1] = max(out[-1][1], base + size - out[-1][0])
        else:
            out.append([base, size])
    return [(b, s) for b, s in out]


class RtlDla(Dla):
    """A :class:`~accel.cmod.dla.Dla` whose convolutions run on the RTL engine too (see the
    module docstring)."""

    def __init__(self, cfg: HwConfig, simulator: str = "icarus", player: Any = None,
                 **kwargs: Any) -> None:
        super().__init__(cfg, **kwargs)
        self.simulator = simulator
        # what plays the traces: a simulation started on the first convolution, or the
        # caller's player (``play``/``close`` as RtlSimulator; ``entries``: its memories)
        self.sim: Any = player
        self.entries = getattr(player, "entries", TRACE_ENTRIES)
        # the operations it runs: the simulated engine's (for nv_small's shape, where the
        # simulation tops have the units beside the convolution, also PDP, SDP from
        # memory, CDP and convolutions with per-element operands), or what the caller's
        # player says (``kinds``; a board's engine: its design's)
        if player is not None:
            self.kinds = getattr(player, "kinds", ("conv",))
        else:
            self.kinds = SIM_KINDS + ("conv_elements",) if sim_others(cfg) else ("conv",)
        # the engine's consumer groups: a fresh simulation starts at 0, a board says
        self.rtl_groups = dict.fromkeys(ENABLE_ORDER + PDP_UNITS + CDP_UNITS, 0)
        self._rtl_lut: tuple | None = None      # the CDP table the engine holds
        if hasattr(player, "consumer_groups"):  # (only units the engine has answer)
            units = (ENABLE_ORDER + (PDP_UNITS if "pdp" in self.kinds else ())
                     + (CDP_UNITS if "cdp" in self.kinds else ()))
            self.rtl_groups.update(player.consumer_groups(units))
        self.rtl_ops = 0
        self.rtl_kinds: dict[str, int] = {}     # operations on the RTL by kind (SIM_KINDS)
        self.rtl_cycles = 0
        self.split_ops = 0                      # convolutions run in kernel pieces
        self.fallbacks: dict[str, int] = {}
        self._traces = Path(tempfile.mkdtemp(prefix="opendla-rtl-traces-"))

    def close(self) -> None:
        if self.sim is not None:
            self.sim.close()
            self.sim = None
            self._rtl_lut = None
        shutil.rmtree(self._traces, ignore_errors=True)

    def _fallback(self, why: str) -> None:
        self.fallbacks[why] = self.fallbacks.get(why, 0) + 1

    def launch(self, op: Launch, done: ConvDone | None = None) -> None:
        if done is not None:   # a cmodel replay's batched datapath: never on this backend
            raise ValueError("the RTL backend runs every convolution itself; it does not "
                             "take a datapath result computed elsewhere")
        if op.kind not in self.kinds:
            self._fallback(f"{op.kind.upper()} operations")
            return super().launch(op)
        if op.pdp_plan is not None:
            self._fallback(("convolutions" if op.kind == "conv" else "SDP operations")
                           + " fused with PDP")
            return super().launch(op)
        if op.kind == "pdp":
            units, why = list(PDP_UNITS), None   # both enabled start it, in either order
        elif op.kind == "sdp":
            units, why = list(SDP_ORDER), self._sdp_refusal(op)
        else:
            units = [u for u in ENABLE_ORDER if u != "NVDLA_SDP_RDMA" or op.needs_rdma]
            why = self._refusal(op)
        writes = [] if why else self._registers(units)
        for symbol, value in writes:
            why = why or unsupported(symbol, value, self.cfg)
        pieces: list[tuple[int, int]] = []
        if op.kind == "conv" and not why:
            pieces, why = self._kernel_pieces(op)
        if why:
            self._fallback(why)
            return super().launch(op)
        if op.kind == "pdp":
            recorded = [self._record_pdp(op, units, writes)]
        elif op.kind == "sdp":
            recorded = [self._record_sdp(op, units, writes)]
        elif len(pieces) == 1:
            recorded = [self._record(op, units, writes)]
        else:                               # the pieces' groups alternate as they run
            atom = self.cfg.atom_size
            recorded = [self._record(op, units, kernel_piece(writes, k0, k1, atom), (k0, k1),
                                     flip=i % 2) for i, (k0, k1) in enumerate(pieces)]
            self.split_ops += 1
        self._play(op.kind, units, recorded, lambda: super(RtlDla, self).launch(op))

    def _play(self, kind: str, units: list[str],
              recorded: list[tuple[TraceBuilder, tuple[int, int]]], cmodel_run) -> None:
        """Run an operation on the cmodel (``cmodel_run``) and on the RTL as the engine
        operations ``recorded`` (traces and their output regions, one after the other: the
        pieces of a convolution split by kernels), check the RTL's output regions against
        the cmodel's and keep them."""
        cmodel_run()                         # the cmodel's run: records, interrupts, CBUF
        if self.sim is None:
            self.sim = RtlSimulator(self.cfg, self.simulator)
        cycles: int | None = 0
        for builder, out in recorded:
            got, reply = self._play_piece(kind, builder, out)
            self.dram.write(out[0], got, {"pdp": "PDP_WDMA", "cdp": "CDP_WDMA"}.get(
                kind, "SDP_WDMA"))
            if reply is None or reply.get("cycles") is None:          # a board counts none
                cycles = None
            elif cycles is not None:
                cycles += reply["cycles"]
            for unit in units:
                self.rtl_groups[unit] ^= 1
        self.rtl_ops += 1
        self.rtl_kinds[kind] = self.rtl_kinds.get(kind, 0) + 1
        if cycles is not None:
            self.stats[-1].details["rtl_cycles"] = cycles
            self.rtl_cycles += cycles

    def _play_piece(self, kind: str, builder: TraceBuilder, out: tuple[int, int]
                    ) -> tuple[np.ndarray, dict | None]:
        """Play one engine operation; its output region ``out`` as the RTL wrote it (equal
        to the cmodel's, else :class:`RtlMismatch`) and the simulation's reply."""
        reference = np.asarray(self.dram.read(out[0], out[1]), np.uint8)
        # the trace checks the cmodel's output, as NVIDIA's traces check their goldens
        builder.check_crc("op_done", out[0], out[1], zlib.crc32(reference.tobytes()))
        trace = builder.save(self._traces)
        dump = trace / "output.bin"
        try:
            reply = self.sim.play(trace, [(out[0], out[1], dump)])
        except RtlError as exc:
            if "CRC" not in str(exc) or not dump.exists():
                raise
            reply = None                     # the CRC differs: name the first byte below
        got = np.fromfile(dump, np.uint8)
        what = {"conv": "convolution", "pdp": "PDP", "sdp": "SDP", "cdp": "CDP"}[kind]
        if got.shape != reference.shape or not np.array_equal(got, reference):
            diff = np.flatnonzero(got != reference)
            raise RtlMismatch(
                f"RTL {what} {self.rtl_ops} ({trace.name}): {diff.size} output bytes "
                f"differ from the cmodel, first at {out[0] + int(diff[0]):#x}: RTL "
                f"{int(got[diff[0]])}, cmodel {int(reference[diff[0]])}")
        shutil.rmtree(trace, ignore_errors=True)
        return got, reply

    def _try_run_cdp(self) -> None:
        if not (self._enabled("NVDLA_CDP") and self._enabled("NVDLA_CDP_RDMA")):
            return
        units = list(CDP_UNITS)
        why = None if "cdp" in self.kinds else "CDP operations"
        writes = [] if why else self._registers(units)
        for symbol, value in writes:
            why = why or unsupported(symbol, value, self.cfg)
        if why:
            self._fallback(why)
            return super()._run_cdp()
        self._play("cdp", units, [self._record_cdp(units, writes)], super()._run_cdp)

    def _run_rubik(self) -> None:
        ran = len(self.stats)
        super()._run_rubik()
        for _ in range(len(self.stats) - ran):
            self._fallback("RUBIK operations")

    def _refusal(self, op: Launch) -> str | None:
        """Why the engine cannot run the convolution ``op`` whatever its size (None: it can,
        in the pieces :meth:`_kernel_pieces` gives)."""
        plan = op.plan
        geo = plan.geo
        if geo.image or plan.feature is None:
            return "image input"
        if plan.sdp.y_stage:
            return "SDP Y (EW/LUT) stages"
        if "conv_elements" not in self.kinds and any(
                read is not None and read.grid is not None for _, read in plan.sdp.stages):
            return "convolutions with per-element SDP operands"
        return None

    def _kernel_pieces(self, op: Launch) -> tuple[list[tuple[int, int]], str | None]:
        """The kernel ranges ``[k0, k1)`` the engine runs the convolution ``op`` in: one
        when it fits the engine's memories, else as many kernel groups each as fit (see the
        module docstring); or why it cannot run (its input, or one kernel group's weights,
        do not fit; per-element operands with too many weights)."""
        plan, hw = op.plan, self.cfg
        geo = plan.geo
        _, c, h, w, _, _ = plan.feature
        why = memory_refusal(hw, c, h, w, geo.k, geo.r, geo.s, self.entries)
        if why is None:
            return [(0, geo.k)], None
        group = math.lcm(hw.atomic_k, hw.atom_size)
        per_element = any(read is not None and read.grid is not None
                          for _, read in plan.sdp.stages)
        if per_element or memory_refusal(hw, c, h, w, group, geo.r, geo.s, self.entries):
            return [], why
        step = group
        while step + group < geo.k and memory_refusal(hw, c, h, w, step + group, geo.r,
                                                      geo.s, self.entries) is None:
            step += group
        return [(k0, min(k0 + step, geo.k)) for k0 in range(0, geo.k, step)], None

    @staticmethod
    def _sdp_refusal(op: Launch) -> str | None:
        """Why the engine cannot run the SDP operation ``op`` reading memory (None: it
        can)."""
        return "SDP Y (EW/LUT) stages" if op.plan.y_stage else None

    def _registers(self, units: list[str]) -> list[tuple[str, int]]:
        """``(symbol, value)`` of every D register the firmware programmed for the op."""
        writes = []
        for unit in units:
            regs = self.regs[unit]
            for reg in d_registers(unit):
                if reg.name != "D_OP_ENABLE":
                    writes.append((reg.symbol, regs.read(reg, regs.consumer)))
        return writes

    def _record(self, op: Launch, units: list[str], writes: list[tuple[str, int]],
                kernels: tuple[int, int] | None = None, flip: int = 0
                ) -> tuple[TraceBuilder, tuple[int, int]]:
        """The convolution's trace up to its interrupt wait, and its output region;
        ``kernels``: of the piece ``[k0, k1)`` the ``writes`` program (:func:`kernel_piece`),
        in the engine's register groups flipped ``flip`` times by the pieces before."""
        plan, hw = op.plan, self.cfg
        base, c, h, w, line, surf = plan.feature
        dst, out_line, out_surf = plan.sdp.dst
        if kernels is None:
            k0, k1 = 0, plan.geo.k
            cdma = self.regs["NVDLA_CDMA"]
            weight_bytes = max(plan.weight_size, cdma.read(
                lookup("NVDLA_CDMA.D_WEIGHT_BYTES"), cdma.consumer))        # CDMA reads all
        else:
            k0, k1 = kernels
            weight_bytes = dict(writes)["NVDLA_CDMA.D_WEIGHT_BYTES_0"]
        bpk = plan.use.bytes_per_kernel
        regions = [self._cube((base, line, surf), c, h, w),
                   (plan.weight_addr + k0 * bpk, weight_bytes)]
        kgs = -(-(k1 - k0) // hw.atomic_k)
        for _, read in plan.sdp.stages:
            if read is not None and read.grid is not None:       # per element: the cube
                regions.append(self._operand_region(read))
            elif read is not None:
                size = read.nbytes * len(read.comps)
                regions.append((read.base + k0 * size, kgs * hw.atomic_k * size))
        out = self._cube((dst + k0 // hw.atom_size * out_surf, out_line, out_surf), k1 - k0,
                         plan.geo.out_h, plan.geo.out_w)
        name = f"conv{self.rtl_ops:05d}" + (f"_k{k0}" if kernels else "")
        what = f" kernels {k0}..{k1 - 1}" if kernels else ""
        return self._trace(name, f"convolution {self.rtl_ops}{what}: {plan.geo}", units,
                           writes, [*regions, out], "SDP", flip), out

    def _record_pdp(self, op: Launch, units: list[str], writes: list[tuple[str, int]]
                    ) -> tuple[TraceBuilder, tuple[int, int]]:
        """The PDP operation's trace up to its interrupt wait, and its output region."""
        plan = op.plan
        regions = [self._cube(plan.src, plan.c, plan.h, plan.w)]
        out = self._cube(plan.dst, plan.c, plan.oh, plan.ow)
        shape = f"{plan.c}x{plan.h}x{plan.w} -> {plan.oh}x{plan.ow}"
        return self._trace(f"pdp{self.rtl_ops:05d}", f"PDP {self.rtl_ops}: {shape}", units,
                           writes, [*regions, out], "PDP"), out

    def _record_sdp(self, op: Launch, units: list[str], writes: list[tuple[str, int]]
                    ) -> tuple[TraceBuilder, tuple[int, int]]:
        """The SDP operation's trace up to its interrupt wait, and its output region."""
        plan = op.plan
        regions = [self._cube(plan.src, plan.c, plan.h, plan.w)]
        for _, read in plan.stages:
            if read is not None:
                regions.append(self._operand_region(read))
        out = self._cube(plan.dst, plan.c, plan.h, plan.w)
        shape = f"{plan.c}x{plan.h}x{plan.w}"
        return self._trace(f"sdp{self.rtl_ops:05d}", f"SDP {self.rtl_ops}: {shape} from memory",
                           units, writes, [*regions, out], "SDP"), out

    def _record_cdp(self, units: list[str], writes: list[tuple[str, int]]
                    ) -> tuple[TraceBuilder, tuple[int, int]]:
        """The CDP operation's trace up to its interrupt wait, and its output region.  The
        lookup table goes first (its ``S_LUT_*`` registers, and both tables through
        ``S_LUT_ACCESS_DATA`` unless the engine holds them already: NVDLA has one table,
        kept between operations)."""
        cdp, rdma = self._exec("NVDLA_CDP"), self._exec("NVDLA_CDP_RDMA")
        c, h, w = (rdma(f"D_DATA_CUBE_{d}", d) + 1 for d in ("CHANNEL", "HEIGHT", "WIDTH"))
        src = (rdma("D_SRC_BASE_ADDR_LOW"), rdma("D_SRC_LINE_STRIDE"),
               rdma("D_SRC_SURFACE_STRIDE"))
        out = self._cube((cdp("D_DST_BASE_ADDR_LOW"), cdp("D_DST_LINE_STRIDE"),
                          cdp("D_DST_SURFACE_STRIDE")), c, h, w)
        regs = self.regs["NVDLA_CDP"]
        lut = self.luts["NVDLA_CDP"]
        table_writes = [(reg.symbol, regs.read(reg, 0)) for reg in s_registers("NVDLA_CDP")
                        if reg.name.startswith("S_LUT_") and "ACCESS" not in reg.name]
        entries = (tuple(int(v) for v in lut.le), tuple(int(v) for v in lut.lo))
        if entries != self._rtl_lut:
            access, data = (lookup(f"NVDLA_CDP.S_LUT_ACCESS_{r}") for r in ("CFG", "DATA"))
            for table, values in enumerate(entries):
                table_writes.append((access.symbol, (table << 16) | (1 << 17)))   # write
                table_writes += [(data.symbol, v & 0xFFFF) for v in values]
            self._rtl_lut = entries
        builder = self._trace(f"cdp{self.rtl_ops:05d}", f"CDP {self.rtl_ops}: {c}x{h}x{w}",
                              units, table_writes + writes,
                              [self._cube(src, c, h, w), out], "CDP")
        return builder, out

    @staticmethod
    def _operand_region(read) -> tuple[int, int]:
        """``(base, size)`` of an SDP operand read: up to its last element's last byte."""
        return read.base, int(read.offsets.max()) + read.nbytes * len(read.comps)

    def _cube(self, where: tuple[int, int, int], c: int, h: int, w: int) -> tuple[int, int]:
        """``(base, size)`` of a ``c x h x w`` cube at ``where`` (base, line and surface
        strides) in NVDLA's layout."""
        base, line, surf = where
        return base, CubeLayout(c, h, w, self.cfg.atom_size, line, surf).size

    def _trace(self, name: str, comment: str, units: list[str], writes: list[tuple[str, int]],
               regions: list[tuple[int, int]], source: str, flip: int = 0) -> TraceBuilder:
        """A trace that loads ``regions`` (the last one the output, as memory holds it now),
        programs ``units`` with ``writes`` in the groups the engine consumes (after ``flip``
        more operations: 0 or 1), enables them and waits for ``source``'s done
        interrupt."""
        trace = TraceBuilder(name)
        trace.comment(comment)
        # the engine reads and writes whole memory atoms
        atom = self.cfg.atom_size
        regions = [(b - b % atom, -(-(b % atom + s) // atom) * atom) for b, s in regions]
        for i, (rb, rs) in enumerate(_merge(regions)):
            trace.load(rb, self.dram.read(rb, rs), f"mem{i}")
        glb = lookup("NVDLA_GLB.S_INTR_MASK")
        mask = sum(glb.field(f).mask for f in _MASKED)
        trace.write(glb.symbol, mask)
        by_unit: dict[str, list[tuple[str, int]]] = {}
        for symbol, value in writes:
            by_unit.setdefault(lookup(symbol).unit, []).append((symbol, value))
        for unit in units:
            trace.write(f"{unit}.S_POINTER", self.rtl_groups[unit] ^ flip)
            for symbol, value in by_unit.get(unit, []):
                trace.write(symbol, value)
        for unit in units:
            trace.write(f"{unit}.D_OP_ENABLE", 1)
        trace.notify(f"{source}_{self.rtl_groups[f'NVDLA_{source}'] ^ flip}", "op_done")
        return trace


class RtlBackend(CmodBackend):
    """The ``rtl`` backend: :class:`RtlDla` behind the cmod backend's protocol."""

    name = "rtl"
    deterministic = False     # every run goes to the simulation: no recorded replays

    def __init__(self, cfg: HwConfig, simulator: str = "icarus", dla: Any = None,
                 player: Any = None) -> None:
        super().__init__(cfg, dla if dla is not None else RtlDla(cfg, simulator, player))

    def close(self) -> None:
        self.dla.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

