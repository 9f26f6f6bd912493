"""Dla: the register-level NVDLA model - CSB register bus, DRAM and units composed.

Operations run synchronously inside the CSB write that completes their
enabling, as the hardware starts a pipeline once every unit in it has
``D_OP_ENABLE`` set in its consumer register group:

* convolution: CDMA, CSC, CMAC_A, CMAC_B, CACC and the SDP consuming it on
  the fly (plus SDP_RDMA when the SDP fetches operands); its CBUF programming
  is checked first, and the CBUF keeps weights or input for the next
  convolution (:mod:`accel.cmod.cbuf_state`);
* SDP from memory: SDP and SDP_RDMA;
* PDP: PDP and PDP_RDMA from memory, or PDP fed on the fly by an SDP whose
  ``OUTPUT_DST`` is PDP (both must be enabled);
* BDMA (presets with ``bdma``): the transfers queued by ``CFG_OP`` run when a
  ``CFG_LAUNCH0/1`` write launches their group (:mod:`accel.cmod.bdma`);
* RUBIK (presets with ``rubik``): contract, split or merge of its register
  group (:mod:`accel.cmod.rubik`); enabling it elsewhere is an
  :class:`UnsupportedError`.

On completion each unit clears its ``D_OP_ENABLE``, flips its consumer pointer,
and GLB raises the done interrupts of the groups that ran.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from operator import itemgetter

import numpy as np

from accel.cmod import (
    cacc,
    cbuf_state,
    cdma,
    cdma_image,
    cdp,
    conv,
    csc,
    fused,
    pdp,
    rubik,
    sdp,
    sdp_rdma,
)
from accel.cmod.bdma import Bdma
from accel.cmod.cmac import (
    INT_ENGINE_MAX_TERMS,
    INT_ENGINE_MIN_MACS,
    IntEngine,
    Weights,
    gemm_sums,
    int_engine,
)
from accel.cmod.csb import GroupView, make_register_file
from accel.cmod.cube import read_int8_raw
from accel.cmod.depthwise import depthwise_sums
from accel.cmod.dram import Dram
from accel.cmod.errors import ConfigError, UnsupportedError, check_elements
from accel.cmod.glb import Glb, status_bit
from accel.cmod.lut import LutRam
from accel.cmod.perf import conv_cycles
from accel.cmod.records import OpRecord
from accel.config import HwConfig
from accel.regs import by_address, lookup

CONV_UNITS = ("NVDLA_CDMA", "NVDLA_CSC", "NVDLA_CMAC_A", "NVDLA_CMAC_B", "NVDLA_CACC")
# unit -> the Dla method an op enable of that unit calls: it starts the unit's pipeline
# once every unit the pipeline needs is enabled (BDMA starts from its own registers)
_ON_ENABLE = {**dict.fromkeys(CONV_UNITS + ("NVDLA_SDP", "NVDLA_SDP_RDMA"), "_try_run"),
              "NVDLA_PDP": "_try_run_pdp", "NVDLA_PDP_RDMA": "_try_run_pdp",
              "NVDLA_CDP": "_try_run_cdp", "NVDLA_CDP_RDMA": "_try_run_cdp",
              "NVDLA_RBK": "_run_rubik"}
_MODELLED = frozenset(_ON_ENABLE)
# units with a LUT behind S_LUT_ACCESS_CFG / S_LUT_ACCESS_DATA
_LUT_UNITS = ("NVDLA_CDP", "NVDLA_SDP")
MAX_PLANS = 8192   # decoded ops kept (a loadable's ops, several loadables)
#: the SDP registers that decide where its data comes from and goes (:meth:`Dla._sdp_mode`)
_SDP_MODE_REGISTERS = ("D_FEATURE_MODE_CFG", *(f"D_DP_{p}_{r}" for p in ("BS", "BN", "EW")
                                              for r in ("CFG", "ALU_CFG", "MUL_CFG")))


@dataclass
class ConvDone:
    """What a convolution's datapath produced; the rest of the op (saturation registers,
    CBUF state, its record, completion) is bookkeeping in :meth:`Dla._run_conv`."""

    cacc_sat: int
    sdp: OpRecord                    # the SDP's record
    sdp_sat: int
    streamed: np.ndarray | None      # the output streamed to PDP
    raw: np.ndarray | None           # packed weight bytes (kept by SKIP_WEIGHT_RLS)
    data: object                     # the input as the CBUF holds it (kept by SKIP_DATA_RLS)
    in_shape: tuple
    in_bytes: int
    data_reused: bool
    weights_reused: bool
    note: str = ""


@dataclass(frozen=True)
class Launch:
    """A pipeline start decided from the registers: what :meth:`Dla.launch` runs.

    ``kind`` is "conv" (a convolution and the SDP on the fly), "sdp" (an SDP
    reading memory) or "pdp" (a PDP reading memory); ``pdp_plan`` is a PDP fed
    on the fly by the SDP.
    """

    kind: str
    plan: object
    needs_rdma: bool = False
    pdp_plan: object = None


class Dla:
    """One NVDLA core of configuration ``cfg`` on the byte memory ``dram``.

    ``model_y_stage`` runs an SDP Y stage (EW, LUT) that the program enables
    even when ``cfg`` has none, instead of raising :class:`UnsupportedError`;
    each distinct note of such ops is kept in :attr:`notes`.  ``cfg`` itself is unchanged
    (the compiler's view of the preset stays without EW).
    """

    def __init__(self, cfg: HwConfig, dram: Dram | None = None, *,
                 model_y_stage: bool = False) -> None:
        self.cfg = cfg
        self.model_y_stage = model_y_stage
        self.notes: list[str] = []
        self.dram = dram if dram is not None else Dram()
        self.regs = make_register_file()
        self.glb = Glb(self.regs["NVDLA_GLB"])
        # the CBUF flush that follows reset has completed by the time software looks
        self.regs["NVDLA_CDMA"].set_hw("S_CBUF_FLUSH_STATUS", 1)
        self.stats: list[OpRecord] = []
        self.luts = {u: LutRam(u[6:]) for u in _LUT_UNITS}
        self.bdma = Bdma(self.regs["NVDLA_BDMA"], self.dram, cfg, self.glb)
        self.cbuf = cbuf_state.Cbuf()  # what the CBUF keeps between convolutions
        self._plans: dict[tuple, object] = {}                  # register values -> decoded op
        self._raw_weights: dict[tuple[int, int], tuple[int, np.ndarray]] = {}
        self._matrices: dict[tuple, tuple[np.ndarray, Weights]] = {}
        self._books: dict[tuple, tuple] = {}           # see _conv_books
        self._posts: dict[tuple, tuple] = {}           # see post_process
        self._batch_inputs: dict[tuple, tuple] = {}    # see batch_inputs
        sdp = self.regs["NVDLA_SDP"]
        self._sdp_mode_key = itemgetter(*(sdp.unit.registers[name].offset
                                          for name in _SDP_MODE_REGISTERS))
        self._sdp_modes: dict[tuple, tuple[bool, bool, bool]] = {}   # see _sdp_mode
        # the units a convolution completes, without / with SDP_RDMA
        self._conv_units = {rdma: tuple(self.regs[u] for u in CONV_UNITS + self._sdp_units(rdma))
                            for rdma in (False, True)}
        self._counters = [(self.regs[unit], self.regs[unit].unit.registers[name].offset, field)
                          for unit, name, field in self.CONV_COUNTERS]
        # the done interrupts of a convolution by the groups of CDMA, CACC and SDP it ran from
        self._conv_interrupting = tuple(self.regs[u] for u in ("NVDLA_CDMA", "NVDLA_CACC",
                                                                "NVDLA_SDP"))
        self._conv_done_bits = {
            (a, b, c): (status_bit("CDMA_DAT", a) | status_bit("CDMA_WT", a)
                        | status_bit("CACC", b) | status_bit("SDP", c))
            for a in (0, 1) for b in (0, 1) for c in (0, 1)}
        self.launched: Launch | None = None    # the last pipeline started (replay learns it)
        #: learned replays compute runs of independent convolutions together
        #: (:mod:`accel.cmod.batch`); False keeps one datapath pass per launch
        self.batch_convs = True

    # --- CSB -------------------------------------------------------------------------
    def csb_write(self, addr: int, value: int) -> None:
        """Write a register by CSB byte address (unit base + offset, as in the RDL)."""
        reg = by_address(addr)
        if reg is None:
            raise KeyError(f"no register at CSB address {addr:#x}")
        if reg.unit == "NVDLA_GLB" and self.glb.csb_write(reg.name, value):
            return
        if reg.unit in self.luts and reg.name == "S_LUT_ACCESS_DATA":
            self.luts[reg.unit].access_data_write(value)
            return
        if reg.unit in self.luts and reg.name == "S_LUT_ACCESS_CFG":
            self.luts[reg.unit].access_cfg(value)
        self.regs[reg.unit].write(reg, value)
        if reg.unit == "NVDLA_BDMA":
            rec = self.bdma.csb_write(reg.name, value)
            if rec is not None:
                self.stats.append(rec)
            return
        if reg.name == "D_OP_ENABLE" and value & 1:
            start = _ON_ENABLE.get(reg.unit)
            if start is None:
                raise UnsupportedError(f"{reg.unit[6:]} operations are not modelled yet")
            getattr(self, start)()

    def csb_read(self, addr: int) -> int:
        reg = by_address(addr)
        if reg is None:
            raise KeyError(f"no register at CSB address {addr:#x}")
        if reg.unit in self.luts and reg.name == "S_LUT_ACCESS_DATA":
            return self.luts[reg.unit].access_data_read()
        return self.regs[reg.unit].read(reg)

    def write_reg(self, symbol: str, value: int) -> None:
        """Write a register by symbol, e.g. ``'NVDLA_SDP.D_CVT_SHIFT_0'``."""
        self.csb_write(lookup(symbol).address, value)

    def read_reg(self, symbol: str) -> int:
        return self.csb_read(lookup(symbol).address)

    # --- scheduling ------------------------------------------------------------------
    def _exec(self, unit: str) -> GroupView:
        regs = self.regs[unit]
        return regs.group(regs.consumer)

    def _enabled(self, unit: str) -> bool:
        return self.regs[unit].enabled()

    def _plan(self, kind: str, units: tuple[str, ...], decode: Callable[[], object]) -> object:
        """The decoded op of ``kind`` whose units' consumer groups are programmed as now.

        Decoding reads and checks every register once; an op with the same register
        values (the next inference of a loadable) reuses the result.
        """
        regs = self.regs
        key = (kind, *(regs[u].config(regs[u].consumer) for u in units))
        plan = self._plans.get(key)
        if plan is None:
            plan = decode()
            if len(self._plans) >= MAX_PLANS:
                self._plans.pop(next(iter(self._plans)))
            self._plans[key] = plan
        return plan

    @staticmethod
    def _sdp_needs_rdma(g: GroupView) -> bool:
        """The SDP takes data from SDP_RDMA: its input (not on the fly), or an operand of an
        active stage whose ALU or multiplier source is MEM.  Decided by the SDP's own
        group, as the hardware does: an op without RDMA data leaves SDP_RDMA's register
        groups alone (the firmware tracks that pointer apart)."""
        if not g("D_FEATURE_MODE_CFG", "FLYING_MODE"):
            return True
        for p in ("BS", "BN", "EW"):
            if g(f"D_DP_{p}_CFG", f"{p}_BYPASS"):
                continue
            if not g(f"D_DP_{p}_CFG", f"{p}_ALU_BYPASS") and g(f"D_DP_{p}_ALU_CFG", f"{p}_ALU_SRC"):
                return True
            if not g(f"D_DP_{p}_CFG", f"{p}_MUL_BYPASS") and g(f"D_DP_{p}_MUL_CFG", f"{p}_MUL_SRC"):
                return True
        return False

    def _sdp_mode(self) -> tuple[bool, bool, bool]:
        """``(needs SDP_RDMA, output to PDP, input on the fly)`` of the SDP's next op.

        Kept by the values of the registers it is decided from alone: it is asked
        whenever a pipeline unit is enabled, while the SDP's group may still hold
        what an earlier op left in the registers this op does not use."""
        regs = self.regs["NVDLA_SDP"]
        key = self._sdp_mode_key(regs.groups[regs.consumer])
        mode = self._sdp_modes.get(key)
        if mode is None:
            g = self._exec("NVDLA_SDP")
            mode = (self._sdp_needs_rdma(g), bool(g("D_FEATURE_MODE_CFG", "OUTPUT_DST")),
                    bool(g("D_FEATURE_MODE_CFG", "FLYING_MODE")))
            if len(self._sdp_modes) >= MAX_PLANS:
                self._sdp_modes.pop(next(iter(self._sdp_modes)))
            self._sdp_modes[key] = mode
        return mode

    def _try_run(self) -> None:
        """Start the SDP pipeline (a convolution feeding it, or its memory input; a PDP it
        feeds) once every unit it needs is enabled."""
        if not self._enabled("NVDLA_SDP"):
            return
        needs_rdma, to_pdp, flying = self._sdp_mode()
        if needs_rdma and not self._enabled("NVDLA_SDP_RDMA"):
            return
        if to_pdp and not self._enabled("NVDLA_PDP"):
            return
        if flying:
            if not all(self._enabled(u) for u in CONV_UNITS):
                return
            plan = self._plan(f"conv{int(needs_rdma)}", CONV_UNITS + self._sdp_units(needs_rdma),
                              lambda: conv.decode(
                                  self.cfg, self._exec("NVDLA_CDMA"), self._exec("NVDLA_CSC"),
                                  self._exec("NVDLA_CACC"), self._exec("NVDLA_SDP"),
                                  self._exec("NVDLA_SDP_RDMA") if needs_rdma else None,
                                  self.model_y_stage))
        else:
            plan = self._plan(f"sdp{int(needs_rdma)}", self._sdp_units(needs_rdma),
                              lambda: sdp.decode(
                                  self._exec("NVDLA_SDP"),
                                  self._exec("NVDLA_SDP_RDMA") if needs_rdma else None,
                                  self.cfg, flying=False, model_y=self.model_y_stage))
        pdp_plan = None
        if to_pdp:
            pdp_plan = self._plan("pdp-fed", ("NVDLA_PDP", "NVDLA_PDP_RDMA"), lambda: pdp.decode(
                self._exec("NVDLA_PDP"), self._exec("NVDLA_PDP_RDMA"), self.cfg, fed=True))
        self.launch(Launch("conv" if flying else "sdp", plan, needs_rdma, pdp_plan))

    def launch(self, op: Launch, done: ConvDone | None = None) -> None:
        """Run ``op`` from the consumer groups, complete its units and raise its interrupts.

        The units must be enabled with the registers ``op`` was decoded from (a
        replay of a recorded task calls this directly; see :mod:`accel.cmod.replay`).
        ``done``: a convolution whose datapath already ran (:mod:`accel.cmod.batch`).
        """
        self.launched = op
        if op.kind == "pdp":
            group = self.regs["NVDLA_PDP"].consumer
            self.stats.append(op.plan.execute(self.dram, self.cfg))
            self._complete(["NVDLA_PDP", "NVDLA_PDP_RDMA"], [("PDP", group)])
            return
        if op.kind == "conv":
            rec, streamed = self._run_conv(op.needs_rdma, op.plan, done)
        else:
            rec, streamed = self._run_sdp(op.needs_rdma, op.plan)
            self._note(rec.note)
        if op.pdp_plan is not None:
            group = self.regs["NVDLA_PDP"].consumer
            self.stats.append(op.pdp_plan.execute(self.dram, self.cfg, streamed))
            self._complete(["NVDLA_PDP"], [("PDP", group)])

    def _sdp_units(self, needs_rdma: bool) -> tuple[str, ...]:
        return ("NVDLA_SDP", "NVDLA_SDP_RDMA") if needs_rdma else ("NVDLA_SDP",)

    def _y_group(self, plan: sdp.SdpPlan, needs_rdma: bool) -> tuple | None:
        """What a Y stage reads as it runs: the SDP's groups and its LUT."""
        if not plan.y_stage:
            return None
        return (self._exec("NVDLA_SDP"), self._exec("NVDLA_SDP_RDMA") if needs_rdma else None,
                self.luts["NVDLA_SDP"])

    def _finish_sdp(self, rec: OpRecord, saturations: int) -> None:
        regs = self.regs["NVDLA_SDP"]
        regs.set_hw("D_PERF_OUT_SATURATION", saturations, regs.consumer)

    def _run_sdp(self, needs_rdma: bool, plan: sdp.SdpPlan
                 ) -> tuple[OpRecord, np.ndarray | None]:
        """An SDP op reading its input from memory."""
        group = self.regs["NVDLA_SDP"].consumer
        if plan.y_stage:     # reads registers as it runs: the numpy form
            rec, streamed, sat = plan.execute(self.dram, self.cfg,
                                              y_group=self._y_group(plan, needs_rdma))
        else:
            rec = plan.pipeline_record(False)
            done = self._eltwise_datapath(plan) or self._copy_datapath(plan)
            if done is None:
                base, line, surf = plan.src
                x = read_int8_raw(self.dram, base, plan.c_pad, plan.h, plan.w,
                                  self.cfg.atom_size, line, surf, sdp_rdma.UNIT)
                y, sats = self.post_process(plan, 0).run_packed(
                    np.ascontiguousarray(x).reshape(1, plan.c_pad, -1), cacc=False)
                done = y[0], int(sats[0, 1])
            streamed, sat = plan.deliver_packed(self.dram, done[0]), done[1]
        self._finish_sdp(rec, sat)
        self.stats.append(rec)
        self._complete(list(self._sdp_units(needs_rdma)), [("SDP", group)])
        return rec, streamed

    def _eltwise_datapath(self, plan: sdp.SdpPlan) -> tuple[np.ndarray, int] | None:
        """``(int8 [C_pad / atom, H, W, atom], converter saturations)`` of an SDP op
        reading memory that adds an int8 operand cube element by element (X1 of
        :func:`~accel.cmod.fused.eltwise_ready`, X2 off), from both cubes as memory holds
        them (:func:`~accel.cmod.fused.eltwise_packed`); None for any other op, or cubes
        whose atoms leave their regions."""
        (st, reads), (st2, _) = plan.stages
        atom = self.cfg.atom_size
        if not (st2.bypass and fused.eltwise_ready(st) and reads is not None
                and reads.nbytes == 1 and reads.comps == (sdp_rdma.USE_ALU,)
                and reads.grid is not None):
            return None
        (surfaces, lanes, h, w), (surf, lane, line, pixel) = reads.grid
        if lanes != atom or lane != 1 or pixel != atom or (h, w) != (plan.h, plan.w):
            return None
        operand = self._packed_cube(reads.base, surfaces, h, w, line, surf)
        base, x_line, x_surf = plan.src
        x = self._packed_cube(base, plan.c_pad // atom, h, w, x_line, x_surf)
        if operand is None or x is None or operand.shape != x.shape:
            return None
        return fused.eltwise_packed(x, operand, st, plan.cvt, plan.c)

    def _copy_datapath(self, plan: sdp.SdpPlan) -> tuple[np.ndarray, int] | None:
        """``(int8 [C_pad / atom, H, W, atom], 0)`` of an SDP op reading memory whose stages
        are all bypassed and whose converter is the identity (a copy into another layout):
        every int8 value passes unchanged and none leaves 17 bits, so the output's atoms
        are the input's; None for any other op, or an input whose atoms leave their
        region."""
        (st, _), (st2, _) = plan.stages
        if not (st.bypass and st2.bypass and tuple(plan.cvt) == (0, 1, 0)):
            return None
        base, line, surf = plan.src
        x = self._packed_cube(base, plan.c_pad // self.cfg.atom_size, plan.h, plan.w, line,
                              surf)
        return None if x is None else (x.copy(), 0)

    def _packed_cube(self, base: int, surfaces: int, h: int, w: int, line: int, surf: int
                     ) -> np.ndarray | None:
        """A cube in memory as int8 ``[surfaces, H, W, atom]``, channel-packed, a view (None
        when its atoms leave their region)."""
        atom = self.cfg.atom_size
        view = self.dram.strided(base, (surfaces, h, w, atom), (surf, line, atom, 1),
                                 sdp_rdma.UNIT)
        return None if view is None else view.view(np.int8)

    def _try_run_pdp(self) -> None:
        if not self._enabled("NVDLA_PDP"):
            return
        g = self._exec("NVDLA_PDP")
        if not g("D_OPERATION_MODE_CFG", "FLYING_MODE"):  # fed by SDP on the fly
            self._try_run()
            return
        if not self._enabled("NVDLA_PDP_RDMA"):
            return
        plan = self._plan("pdp", ("NVDLA_PDP", "NVDLA_PDP_RDMA"), lambda: pdp.decode(
            g, self._exec("NVDLA_PDP_RDMA"), self.cfg, fed=False))
        self.launch(Launch("pdp", plan))

    def _try_run_cdp(self) -> None:
        if not (self._enabled("NVDLA_CDP") and self._enabled("NVDLA_CDP_RDMA")):
            return
        g = self._exec("NVDLA_CDP")
        self.stats.append(cdp.run(g, self._exec("NVDLA_CDP_RDMA"), self.dram, self.cfg,
                                  self.luts["NVDLA_CDP"]))
        self._complete(["NVDLA_CDP", "NVDLA_CDP_RDMA"], [("CDP", g.group)])

    def _run_rubik(self) -> None:
        if not self.cfg.rubik:
            raise UnsupportedError(f"RUBIK is programmed but {self.cfg.name} has no Rubik")
        # groups run in consumer order: an enable of the other group waits for this one
        while self._enabled("NVDLA_RBK"):
            g = self._exec("NVDLA_RBK")
            self.stats.append(rubik.run(g, self.dram, self.cfg))
            self._complete(["NVDLA_RBK"], [("RUBIK", g.group)])

    def _complete(self, units: list[str], interrupts: list[tuple[str, int]]) -> None:
        for unit in units:
            self.regs[unit].finish()
        for source, group in interrupts:
            self.glb.raise_done(source, group)

    # --- convolution -----------------------------------------------------------------
    def weights_of(self, plan: conv.ConvPlan) -> np.ndarray:
        """The packed weight bytes of ``plan`` (read again only when their memory changed)."""
        key = (plan.weight_addr, plan.weight_size)
        version = self.dram.version(plan.weight_addr)
        hit = self._raw_weights.get(key)
        if hit is not None and hit[0] == version:
            return hit[1]
        check_elements("CDMA", f"weights of {plan.use.kernels} kernels x "
                               f"{plan.use.bytes_per_kernel} bytes", plan.weight_size)
        raw = self.dram.read(plan.weight_addr, plan.weight_size, "CDMA")
        self._raw_weights[key] = (version, raw)
        return raw

    def weight_matrix(self, raw: np.ndarray, plan: conv.ConvPlan) -> Weights:
        """The ``[K, C*R*S]`` weights of the packed bytes ``raw`` (kept per bytes object)."""
        key = (id(raw), plan.kernel)
        hit = self._matrices.get(key)
        if hit is not None and hit[0] is raw:
            return hit[1]
        m = Weights(raw[plan.weight_order(self.cfg)].view(np.int8), plan.kernel)
        if len(self._matrices) >= MAX_PLANS:
            self._matrices.pop(next(iter(self._matrices)))
        self._matrices[key] = (raw, m)
        return m

    def post_process(self, plan: sdp.SdpPlan, truncate: int) -> fused.PostProcess:
        """The compiled CACC/SDP/converter pass of ``plan`` fed by a convolution with
        CLIP_TRUNCATE ``truncate`` (0 for an op reading memory), set up again only when
        the memory its operands come from was written."""
        key = (id(plan), truncate)
        hit = self._posts.get(key)
        if hit is not None and hit[0] is plan and self.dram.versions(hit[1]) == hit[2]:
            return hit[3]
        bases = tuple(reads.base for _, reads in plan.stages if reads is not None)
        versions = self.dram.versions(bases)
        post = fused.for_plan(plan, truncate, self.dram, self.cfg.atom_size)
        if len(self._posts) >= MAX_PLANS:
            self._posts.pop(next(iter(self._posts)))
        self._posts[key] = (plan, bases, versions, post)
        return post

    def batch_inputs(self, plans: list, sources: tuple[int, ...], derive: Callable[[], tuple]
                     ) -> tuple:
        """``derive()``, what a batch of launches of ``plans`` computes with (its weights and
        SDP operands), derived again only when the memory at ``sources`` was written;
        kept per plans, not per batch: a task recorded from two starting states batches
        the same plans twice."""
        key = tuple(map(id, plans))     # the entry holds the plans: their ids stay theirs
        versions = self.dram.versions(sources)
        hit = self._batch_inputs.get(key)
        if hit is not None and hit[1] == versions:
            return hit[2]
        derived = derive()
        if len(self._batch_inputs) >= MAX_PLANS:
            self._batch_inputs.pop(next(iter(self._batch_inputs)))
        self._batch_inputs[key] = (tuple(plans), versions, derived)
        return derived

    def _conv_datapath(self, needs_rdma: bool, plan: conv.ConvPlan) -> ConvDone:
        """CDMA -> CSC -> CMAC -> CACC -> SDP of one convolution: its output written (or
        streamed), nothing of its registers or interrupts touched yet."""
        geo, use = plan.geo, plan.use
        kept_data = self.cbuf.reused_data(use)
        kept_w, note = self.cbuf.reused_weights(use)
        raw = kept_w.raw if kept_w is not None else self.weights_of(plan)
        if geo.image:
            g_cdma = self._exec("NVDLA_CDMA")
            if kept_data is not None:
                lines, fmt = kept_data.value
            else:
                lines, fmt = cdma_image.fetch_image(g_cdma, self.dram, self.cfg)
            x, geo_run = csc.image_cube(lines, fmt.channels, geo, self._exec("NVDLA_CSC"))
            in_shape = (fmt.channels, lines.shape[0], use.width)
            data, in_bytes = (lines, fmt), cdma_image.image_bytes(fmt, in_shape[1], in_shape[2])
        else:
            done = self._pointwise_datapath(plan, raw, kept_w is not None, note)
            if done is not None:
                return done
            x = kept_data.value if kept_data is not None else cdma.read_feature(
                self.dram, self.cfg, plan.feature)
            geo_run, in_shape, in_bytes, data = geo, tuple(x.shape), int(x.size), x
        sums = conv_sums(self.weight_matrix(raw, plan), x, geo_run)
        if plan.sdp.y_stage:     # reads registers as it runs: the numpy form
            terms = psum_terms(plan)
            out, sat = cacc.clip_truncate(cacc.accumulate(sums.astype(np.int64, copy=False),
                                                          terms), plan.truncate, terms)
            rec, streamed, sdp_sat = plan.sdp.execute(
                self.dram, self.cfg, out.reshape(geo.k, geo.out_h, geo.out_w),
                y_group=self._y_group(plan.sdp, needs_rdma))
        else:
            y, sats = self.post_process(plan.sdp, plan.truncate).run_packed(sums[None])
            sat, sdp_sat = int(sats[0, 0]), int(sats[0, 1])
            rec = plan.sdp.pipeline_record(True)
            streamed = plan.sdp.deliver_packed(self.dram, y[0])
        return ConvDone(sat, rec, sdp_sat, streamed, raw, data, in_shape, in_bytes,
                        kept_data is not None, kept_w is not None, note)

    def _pointwise_datapath(self, plan: conv.ConvPlan, raw: np.ndarray, weights_reused: bool,
                            note: str) -> ConvDone | None:
        """:meth:`_conv_datapath` of a large 1x1 convolution of the compiler's usual SDP
        program, with stride 1 and no padding, that neither keeps nor reuses data in the
        CBUF, computed pixel by pixel: its pixels read as memory holds them (whole
        atoms), ``pixels @ weights.T`` on the integer engine (the uint8 x int8 kernels
        when the pixels are non-negative), the SDP pass on the pixel-major sums
        (:meth:`~accel.cmod.fused.PostProcess.run_pixels`) straight into the channel
        packing; None for any other convolution (or pixels that leave their region)."""
        sp = plan.sdp
        _, c, h, w, _, _ = plan.feature
        engine = self.pointwise_engine(plan)
        if engine is None:
            return None
        post = self.post_process(sp, plan.truncate)
        if not post.pixels_ready:
            return None
        read = cdma.read_feature_pixels(self.dram, self.cfg, plan.feature)
        if read is None:
            return None
        acc = self.pointwise_sums(plan, raw, engine, *read)
        dst = sp.dst_pixels(self.dram, self.cfg.atom_size)    # the output written in place
        y, sdp_sats = post.run_pixels(acc, dst)
        if dst is None:
            streamed = sp.deliver_packed(self.dram, y[0])
        else:
            streamed = None
            self.dram.touched(sp.dst[0])
        return ConvDone(0, sp.pipeline_record(True), int(sdp_sats[0]), streamed, raw, None,
                        (c, h, w), c * h * w, False, weights_reused, note)

    def pointwise_sums(self, plan: conv.ConvPlan, raw: np.ndarray, engine: IntEngine,
                       pixels: np.ndarray, nonnegative: bool) -> np.ndarray:
        """int32 ``[pixels, C_pad]``: int8 ``pixels`` (``[pixels, C_pad]``, as
        :func:`~accel.cmod.cube.read_int8_pixels` reads them) through the 1x1 weights
        ``raw`` of ``plan``, on ``engine`` (:meth:`pointwise_engine`): its uint8 x int8
        kernels when the pixels are all non-negative, the offset form otherwise."""
        packed = self.weight_matrix(raw, plan).pointwise(engine, plan.sdp.c_pad,
                                                         pixels.shape[1])
        return packed.run(pixels, engine.signed and nonnegative)

    @staticmethod
    def pointwise_engine(plan: conv.ConvPlan) -> IntEngine | None:
        """The integer engine, for a convolution :meth:`_pointwise_datapath` computes pixel by
        pixel: a large 1x1 one of a feature cube, stride 1, no padding, no Y stage, that
        neither keeps nor reuses data in the CBUF; None for any other (or no engine)."""
        geo, use = plan.geo, plan.use
        if plan.feature is None:
            return None
        _, c, h, w, _, _ = plan.feature
        if (geo.r != 1 or geo.s != 1 or geo.stride_y != 1 or geo.stride_x != 1
                or geo.pad_top or geo.pad_left or (geo.out_h, geo.out_w) != (h, w)
                or use.data_reuse or use.skip_data_rls or plan.sdp.y_stage
                or c > INT_ENGINE_MAX_TERMS or geo.k * c * h * w < INT_ENGINE_MIN_MACS):
            return None
        return int_engine()

    def _run_conv(self, needs_rdma: bool, plan: conv.ConvPlan, done: ConvDone | None = None
                  ) -> tuple[OpRecord, np.ndarray | None]:
        """A convolution: its datapath (``done``: already run, see :mod:`accel.cmod.batch`),
        then its saturation counters, CBUF state, record, completion and interrupts."""
        if done is None:
            done = self._conv_datapath(needs_rdma, plan)
        cdma_regs, cacc_regs, sdp_regs = self._conv_interrupting
        bits = self._conv_done_bits[cdma_regs.consumer, cacc_regs.consumer, sdp_regs.consumer]
        for store, off, field_name in self.conv_counters():
            store[off] = getattr(done, field_name) & 0xFFFFFFFF
        self.conv_finished(plan, done)
        for unit in self._conv_units[needs_rdma]:
            unit.finish()
        self.glb.raise_bits(bits)
        return done.sdp, done.streamed

    #: the registers a convolution's completion sets from its data, in the groups it ran
    #: from: ``(unit, register, ConvDone field)``
    CONV_COUNTERS = (("NVDLA_CACC", "D_OUT_SATURATION", "cacc_sat"),
                     ("NVDLA_SDP", "D_PERF_OUT_SATURATION", "sdp_sat"))

    def conv_counters(self) -> list[tuple[dict[int, int], int, str]]:
        """``(register group, offset, ConvDone field)`` of each of :data:`CONV_COUNTERS` that
        a convolution completing now sets."""
        return [(regs.groups[regs.consumer], off, field_name)
                for regs, off, field_name in self._counters]

    def conv_finished(self, plan: conv.ConvPlan, done: ConvDone) -> None:
        """What a finished convolution leaves besides its registers and interrupts: the
        CBUF state, its notes and its record."""
        self.cbuf.complete(plan.use, done.raw, done.data)
        self._note(done.note)
        self._note(done.sdp.note)
        self._conv_recorded(plan, done.in_shape, done.in_bytes, done.cacc_sat, done.sdp,
                            done.data_reused, done.weights_reused, done.note)

    def batch_finished(self, conv_batch) -> None:
        """:meth:`conv_finished` of the launches of a :class:`~accel.cmod.batch.ConvBatch`
        that just ran, from its results (no ConvDone made): none of them keeps data in the
        CBUF, and the weights a member keeps are the ones the next member reuses, so the
        CBUF state is the last one's; none of them has a note."""
        plans = conv_batch.plans
        self.cbuf.complete(plans[-1].use, conv_batch.raws[-1], None)
        # the records depend on the run only through its input shape and saturation counts
        # (mostly all 0): after a run with the same, the same objects again (their notes
        # are kept since)
        key = (conv_batch.in_shape, tuple(conv_batch.saturations["cacc_sat"]))
        kept = conv_batch.records
        if kept is None or kept[0] != key:
            first = len(self.stats)
            in_shape, in_bytes = conv_batch.in_shape, conv_batch.in_bytes
            for plan, cacc_sat in zip(plans, key[1], strict=True):
                sdp_rec = plan.sdp.pipeline_record(True)
                self._note(sdp_rec.note)
                self._conv_recorded(plan, in_shape, in_bytes, cacc_sat, sdp_rec,
                                    weights_reused=plan.use.weight_reuse)
            conv_batch.records = (key, self.stats[first:])
            return
        self.stats.extend(kept[1])

    def _note(self, note: str) -> None:
        """Keep ``note`` (a behaviour worth telling) once."""
        if note and note not in self.notes:
            self.notes.append(note)

    def _conv_recorded(self, plan: conv.ConvPlan, in_shape: tuple, in_bytes: int,
                       cacc_sat: int, sdp_rec: OpRecord, data_reused: bool = False,
                       weights_reused: bool = False, note: str = "") -> None:
        cycles, atoms, shapes, cbuf_rec = self._conv_books(
            plan, in_shape, data_reused, weights_reused, in_bytes, sdp_rec.cycles, note)
        self.stats.append(OpRecord(
            "CONV", cycles, shapes,
            {"mac_atoms": atoms, "cacc_saturations": cacc_sat, "cbuf": cbuf_rec},
            sdp=sdp_rec))  # the fused SDP runs in the same pipeline

    def _conv_books(self, plan: conv.ConvPlan, in_shape: tuple, data_reused: bool,
                    weights_reused: bool, in_bytes: int, sdp_cycles: int, note: str) -> tuple:
        """``(cycles, mac atoms, shapes, CBUF record)`` of a convolution: the same for every
        run of ``plan`` that fetched and reused the same, kept per plan and shared by the
        records of those runs (records are read, not modified)."""
        key = (id(plan), in_shape, data_reused, weights_reused, in_bytes, sdp_cycles, note)
        hit = self._books.get(key)
        if hit is not None and hit[0] is plan:
            return hit[1]
        geo, use = plan.geo, plan.use
        # the CDMA fetches nothing it reuses; weights it fetches are WEIGHT_BYTES long
        cycles, atoms = conv_cycles(self.cfg, (geo.out_h, geo.out_w), plan.kernel,
                                    0 if data_reused else in_bytes,
                                    0 if weights_reused else use.weight_bytes, sdp_cycles)
        shapes = {"in": in_shape, "kernel": plan.kernel, "out": (geo.k, geo.out_h, geo.out_w)}
        books = (cycles, atoms, shapes, _cbuf_record(use, data_reused, weights_reused, note))
        if len(self._books) >= MAX_PLANS:
            self._books.clear()
        self._books[key] = (plan, books)
        return books


#: fewest channels of a convolution that :func:`conv_sums` runs with packed weights: a
#: tap's channels then fill a cache line of the pixel-by-pixel patches
ROWS_MIN_CHANNELS = 64


def conv_sums(weights: Weights, x: np.ndarray, geo: csc.ConvGeometry) -> np.ndarray:
    """Exact ``[K, out_h*out_w]`` sums of products of a convolution of the cube ``x``.

    A large one of an int8 feature cube with a kernel larger than 1x1 and at least
    :data:`ROWS_MIN_CHANNELS` channels runs as ``patches @ weights.T`` on the integer
    engine with the weights packed once (:meth:`~accel.cmod.cmac.Weights.taps_last`,
    patches from :func:`~accel.cmod.csc.im2col_rows`); the others as
    :func:`~accel.cmod.cmac.gemm_sums` of :func:`~accel.cmod.csc.im2col`, whose
    patches for a 1x1 kernel are the cube's pixels as they are.  Packing the patches
    per run costs less than turning them and the sums around when a kernel tap's
    channels are few or the kernel is 1x1 (measured on the layers of mobilenet_v2,
    yolox_nano and resnet18_cifar).  A block of a depthwise layer (each kernel reading
    only its own channel: :attr:`~accel.cmod.cmac.Weights.diagonal`) sums its taps per
    channel (:func:`~accel.cmod.depthwise.depthwise_sums`), 1/C of the GEMM's products."""
    k, c, r, s = weights.kernel or (0, 0, 0, 0)
    terms, points = c * r * s, geo.out_h * geo.out_w
    taps = weights.diagonal if x.dtype == np.int8 and not geo.image else None
    if taps is not None:         # a block of a depthwise layer: the taps of each channel
        return depthwise_sums(x, taps, geo)
    if (r * s > 1 and c >= ROWS_MIN_CHANNELS and x.dtype == np.int8 and not geo.image
            and terms <= INT_ENGINE_MAX_TERMS and k * terms * points >= INT_ENGINE_MIN_MACS):
        engine = int_engine()
        if engine is not None:
            signed = engine.signed and geo.pad_value >= 0 and int(x.min()) >= 0
            rows = weights.taps_last(engine).run(csc.im2col_rows(x, geo, offset=not signed),
                                                 signed)
            return np.ascontiguousarray(rows.T)
    return gemm_sums(weights, csc.im2col(x, geo))


def psum_terms(plan: conv.ConvPlan) -> int:
    """Products summed into each output of ``plan``."""
    k, c, r, s = plan.kernel
    return c * r * s


def _cbuf_record(use: cbuf_state.ConvBuffers, data_reused: bool, weights_reused: bool,
                 note: str) -> dict:
    """The stats entry of a convolution's CBUF use."""
    weights = ("reused" if weights_reused else "fetched" if use.weights_resident
               else "streamed")
    rec = {"data_banks": use.data_banks, "weight_banks": use.weight_banks,
           "data": "reused" if data_reused else "fetched", "weights": weights,
           "kept": [k for k, on in (("data", use.skip_data_rls),
                                    ("weights", use.skip_weight_rls)) if on]}
    if note:
        rec["note"] = note
    return rec


def modelled_units() -> frozenset[str]:
    """Units whose operations this model executes."""
    return frozenset(_MODELLED)


__all__ = ["Dla", "Dram", "UnsupportedError", "ConfigError", "modelled_units"]
