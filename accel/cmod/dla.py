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

This is the plain model, read as the hardware.  The speed layer
(:mod:`accel.cmod.fast`) joins it at one seam, :attr:`Dla.fast`, where it keeps
decoded ops and computes datapaths faster, to the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from accel.cmod import cacc, cbuf_state, cdma, cdma_image, cdp, cmac, conv, csc, pdp, rubik, sdp
from accel.cmod.bdma import Bdma
from accel.cmod.csb import GroupView, make_register_file
from accel.cmod.dram import Dram
from accel.cmod.errors import (
    MAX_WEIGHT_BYTES,
    ConfigError,
    UnsupportedError,
    check_elements,
)
from accel.cmod.fast import FastPaths
from accel.cmod.glb import Glb, status_bit
from accel.cmod.lut import LutRam
from accel.cmod.perf import conv_cycles
from accel.cmod.pipeline import CONV_UNITS, ConvDone, Launch, sdp_units
from accel.cmod.records import OpRecord
from accel.config import HwConfig
from accel.regs import by_address, lookup

# unit -> the Dla method an op enable of that unit calls: it starts the unit's pipeline
# once every unit the pipeline needs is enabled (BDMA starts from its own registers)
_ON_ENABLE = {**dict.fromkeys(CONV_UNITS + ("NVDLA_SDP", "NVDLA_SDP_RDMA"), "_try_run"),
              "NVDLA_PDP": "_try_run_pdp", "NVDLA_PDP_RDMA": "_try_run_pdp",
              "NVDLA_CDP": "_try_run_cdp", "NVDLA_CDP_RDMA": "_try_run_cdp",
              "NVDLA_RBK": "_run_rubik"}
_MODELLED = frozenset(_ON_ENABLE)
# units with a LUT behind S_LUT_ACCESS_CFG / S_LUT_ACCESS_DATA
_LUT_UNITS = ("NVDLA_CDP", "NVDLA_SDP")


class Dla:
    """One NVDLA core of configuration ``cfg`` on the byte memory ``dram``.

    ``model_y_stage`` runs an SDP Y stage (EW, LUT) that the program enables
    even when ``cfg`` has none, instead of raising :class:`UnsupportedError`;
    each distinct note of such ops is kept in :attr:`notes`.  ``cfg`` itself is unchanged
    (the compiler's view of the preset stays without EW).

    ``fast`` (the default) hands the slow points to the speed layer
    (:class:`~accel.cmod.fast.FastPaths`, kept in :attr:`fast`): the same bytes,
    sooner.  ``fast=False`` is the plain model the speed layer is checked against:
    every op decoded from its registers as it starts, every datapath the units'
    own arithmetic, no replays and nothing kept between ops but what the hardware
    keeps (registers, CBUF, LUTs, memory).
    """

    def __init__(self, cfg: HwConfig, dram: Dram | None = None, *,
                 model_y_stage: bool = False, fast: bool = True) -> None:
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
        # the units a convolution completes, without / with SDP_RDMA
        self._conv_units = {rdma: tuple(self.regs[u] for u in CONV_UNITS + sdp_units(rdma))
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
        self.fast: FastPaths | None = FastPaths(self) if fast else None

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
        """The decoded op of ``kind`` from its units' consumer groups: ``decode()``, which
        reads and checks every register (the speed layer keeps it for the next op with
        the same register values: the next inference of a loadable)."""
        return decode() if self.fast is None else self.fast.plan(kind, units, decode)

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
        """``(needs SDP_RDMA, output to PDP, input on the fly)`` of the SDP's next op."""
        g = self._exec("NVDLA_SDP")
        return (self._sdp_needs_rdma(g), bool(g("D_FEATURE_MODE_CFG", "OUTPUT_DST")),
                bool(g("D_FEATURE_MODE_CFG", "FLYING_MODE")))

    def _try_run(self) -> None:
        """Start the SDP pipeline (a convolution feeding it, or its memory input; a PDP it
        feeds) once every unit it needs is enabled."""
        if not self._enabled("NVDLA_SDP"):
            return
        needs_rdma, to_pdp, flying = (self._sdp_mode() if self.fast is None
                                      else self.fast.sdp_mode(self._sdp_mode))
        if needs_rdma and not self._enabled("NVDLA_SDP_RDMA"):
            return
        if to_pdp and not self._enabled("NVDLA_PDP"):
            return
        def rdma() -> GroupView | None:
            return self._exec("NVDLA_SDP_RDMA") if needs_rdma else None

        if flying:
            if not all(self._enabled(u) for u in CONV_UNITS):
                return
            plan = self._plan(f"conv{int(needs_rdma)}", CONV_UNITS + sdp_units(needs_rdma),
                              lambda: conv.decode(
                                  self.cfg, self._exec("NVDLA_CDMA"), self._exec("NVDLA_CSC"),
                                  self._exec("NVDLA_CACC"), self._exec("NVDLA_SDP"), rdma(),
                                  self.model_y_stage))
        else:
            plan = self._plan(f"sdp{int(needs_rdma)}", sdp_units(needs_rdma),
                              lambda: sdp.decode(self._exec("NVDLA_SDP"), rdma(), self.cfg,
                                                 flying=False, model_y=self.model_y_stage))
        pdp_plan = None
        if to_pdp:
            pdp_plan = self._plan("pdp-fed", ("NVDLA_PDP", "NVDLA_PDP_RDMA"), lambda: pdp.decode(
                self._exec("NVDLA_PDP"), self._exec("NVDLA_PDP_RDMA"), self.cfg, fed=True))
        self.launch(Launch("conv" if flying else "sdp", plan, needs_rdma, pdp_plan))

    def launch(self, op: Launch, done: ConvDone | None = None) -> None:
        """Run ``op`` from the consumer groups, complete its units and raise its interrupts.

        The units must be enabled with the registers ``op`` was decoded from (a
        replay of a recorded task calls this directly; see :mod:`accel.cmod.fast.replay`).
        ``done``: a convolution whose datapath already ran (:mod:`accel.cmod.fast.batch`).
        """
        self.launched = op
        if op.kind == "cdp":
            self._run_cdp(op.plan)
            return
        if op.kind == "pdp":
            group = self.regs["NVDLA_PDP"].consumer
            self.stats.append(op.plan.execute(self.dram, self.cfg, fast=self.fast))
            self._complete(["NVDLA_PDP", "NVDLA_PDP_RDMA"], [("PDP", group)])
            return
        if op.kind == "conv":
            rec, streamed = self._run_conv(op.needs_rdma, op.plan, done)
        else:
            rec, streamed = self._run_sdp(op.needs_rdma, op.plan)
            self.keep_note(rec.note)
        if op.pdp_plan is not None:
            group = self.regs["NVDLA_PDP"].consumer
            self.stats.append(op.pdp_plan.execute(self.dram, self.cfg, streamed))
            self._complete(["NVDLA_PDP"], [("PDP", group)])

    def _y_group(self, plan: sdp.SdpPlan, needs_rdma: bool) -> tuple | None:
        """What a Y stage reads as it runs: the SDP's groups, its LUT, how to look up."""
        if not plan.y_stage:
            return None
        return (self._exec("NVDLA_SDP"), self._exec("NVDLA_SDP_RDMA") if needs_rdma else None,
                self.luts["NVDLA_SDP"], self.fast.lut_lookup if self.fast else None)

    def _run_sdp(self, needs_rdma: bool, plan: sdp.SdpPlan
                 ) -> tuple[OpRecord, np.ndarray | None]:
        """An SDP op reading its input from memory."""
        regs, y_group = self.regs["NVDLA_SDP"], self._y_group(plan, needs_rdma)
        group = regs.consumer
        done = self.fast.sdp_from_memory(plan, y_group) if self.fast is not None else None
        if done is None:
            done = plan.execute(self.dram, self.cfg, y_group=y_group)
        rec, streamed, sat = done
        regs.set_hw("D_PERF_OUT_SATURATION", sat, group)
        self.stats.append(rec)
        self._complete(list(sdp_units(needs_rdma)), [("SDP", group)])
        return rec, streamed

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
        self.launch(Launch("cdp", self._cdp_plan()))

    def _cdp_plan(self) -> cdp.CdpPlan:
        """The CDP operation its consumer groups hold, decoded (kept by their values)."""
        g, rdma = self._exec("NVDLA_CDP"), self._exec("NVDLA_CDP_RDMA")
        return self._plan("cdp", ("NVDLA_CDP", "NVDLA_CDP_RDMA"), lambda: cdp.decode(g, rdma))

    def _run_cdp(self, plan: cdp.CdpPlan | None = None) -> None:
        """The CDP operation its consumer groups hold (``plan``: decoded from them, as a
        :class:`~accel.cmod.pipeline.Launch` keeps it), and its completion."""
        g, rdma = self._exec("NVDLA_CDP"), self._exec("NVDLA_CDP_RDMA")
        fast = self.fast
        if plan is None:
            plan = self._cdp_plan()
        self.stats.append(cdp.run(g, rdma, self.dram, self.cfg, self.luts["NVDLA_CDP"],
                                  per_code=fast is not None,
                                  tables=fast.cdp_table if fast else None, plan=plan))
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
        """The packed weight bytes of ``plan`` as the CDMA fetches them."""
        if self.fast is not None:
            return self.fast.weights_of(plan, self._fetch_weights)
        return self._fetch_weights(plan)

    def _fetch_weights(self, plan: conv.ConvPlan) -> np.ndarray:
        check_elements("CDMA", f"weights of {plan.use.kernels} kernels x "
                               f"{plan.use.bytes_per_kernel} bytes", plan.weight_size,
                       MAX_WEIGHT_BYTES)
        return self.dram.read(plan.weight_addr, plan.weight_size, "CDMA")

    def _conv_datapath(self, needs_rdma: bool, plan: conv.ConvPlan) -> ConvDone:
        """CDMA -> CSC -> CMAC -> CACC -> SDP of one convolution: its output written (or
        streamed), nothing of its registers or interrupts touched yet."""
        geo, use, fast = plan.geo, plan.use, self.fast
        kept_data = self.cbuf.reused_data(use)
        kept_w, note = self.cbuf.reused_weights(use)
        raw = kept_w.raw if kept_w is not None else self.weights_of(plan)
        y_group = self._y_group(plan.sdp, needs_rdma)
        if fast is not None and not geo.image:
            done = fast.pixels_datapath(plan, raw, kept_w is not None, note, y_group)
            if done is not None:
                return done
        x, geo_run, in_shape, in_bytes, data = self._conv_input(plan, kept_data)
        if fast is None:      # CMAC: the exact sums of products
            sums = cmac.conv_gemm(raw[plan.weight_order(self.cfg)].view(np.int8),
                                  csc.im2col(x, geo_run))
        else:
            sums = fast.conv_sums(raw, plan, x, geo_run)
        post = fast.conv_post(plan, sums, y_group) if fast is not None else None
        if post is not None:
            cacc_sat, rec, streamed, sdp_sat = post
        else:
            terms = psum_terms(plan)
            out, cacc_sat = cacc.clip_truncate(cacc.accumulate(sums.astype(np.int64, copy=False),
                                                               terms), plan.truncate, terms)
            rec, streamed, sdp_sat = plan.sdp.execute(
                self.dram, self.cfg, out.reshape(geo.k, geo.out_h, geo.out_w), y_group=y_group)
        return ConvDone(cacc_sat, rec, sdp_sat, streamed, raw, data, in_shape, in_bytes,
                        kept_data is not None, kept_w is not None, note)

    def _conv_input(self, plan: conv.ConvPlan, kept: cbuf_state.KeptData | None) -> tuple:
        """CDMA and CSC: ``(input cube, the geometry the convolution runs with, the input's
        shape, bytes fetched, what the CBUF holds)``; ``kept``: the input the CBUF kept."""
        geo = plan.geo
        if geo.image:
            if kept is not None:
                lines, fmt = kept.value
            else:
                lines, fmt = cdma_image.fetch_image(self._exec("NVDLA_CDMA"), self.dram,
                                                    self.cfg)
            x, geo_run = csc.image_cube(lines, fmt.channels, geo, self._exec("NVDLA_CSC"))
            in_shape = (fmt.channels, lines.shape[0], plan.use.width)
            return (x, geo_run, in_shape, cdma_image.image_bytes(fmt, *in_shape[1:]),
                    (lines, fmt))
        x = kept.value if kept is not None else cdma.read_feature(
            self.dram, self.cfg, plan.feature, plan.feature_cvt)       # kept: converted
        return x, geo, tuple(x.shape), int(x.size), x

    def _run_conv(self, needs_rdma: bool, plan: conv.ConvPlan, done: ConvDone | None = None
                  ) -> tuple[OpRecord, np.ndarray | None]:
        """A convolution: its datapath (``done``: already run, see
        :mod:`accel.cmod.fast.batch`), then its saturation counters, CBUF state, record,
        completion and interrupts."""
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
        self.keep_note(done.note)
        self.keep_note(done.sdp.note)
        self.conv_recorded(plan, done.in_shape, done.in_bytes, done.cacc_sat, done.sdp,
                           done.data_reused, done.weights_reused, done.note)

    def keep_note(self, note: str) -> None:
        """Keep ``note`` (a behaviour worth telling) once."""
        if note and note not in self.notes:
            self.notes.append(note)

    def conv_recorded(self, plan: conv.ConvPlan, in_shape: tuple, in_bytes: int,
                      cacc_sat: int, sdp_rec: OpRecord, data_reused: bool = False,
                      weights_reused: bool = False, note: str = "") -> None:
        """Append a convolution's record to :attr:`stats`."""
        run = (in_shape, data_reused, weights_reused, in_bytes, sdp_rec.cycles, note)
        if self.fast is None:
            books = self._conv_books(plan, *run)
        else:
            books = self.fast.conv_books(plan, run, self._conv_books)
        cycles, atoms, shapes, cbuf_rec = books
        self.stats.append(OpRecord(
            "CONV", cycles, shapes,
            {"mac_atoms": atoms, "cacc_saturations": cacc_sat, "cbuf": cbuf_rec},
            sdp=sdp_rec))  # the fused SDP runs in the same pipeline

    def _conv_books(self, plan: conv.ConvPlan, in_shape: tuple, data_reused: bool,
                    weights_reused: bool, in_bytes: int, sdp_cycles: int, note: str) -> tuple:
        """``(cycles, mac atoms, shapes, CBUF record)`` of a convolution."""
        geo, use = plan.geo, plan.use
        # the CDMA fetches nothing it reuses; weights it fetches are WEIGHT_BYTES long
        cycles, atoms = conv_cycles(self.cfg, (geo.out_h, geo.out_w), plan.kernel,
                                    0 if data_reused else in_bytes,
                                    0 if weights_reused else use.weight_bytes, sdp_cycles)
        shapes = {"in": in_shape, "kernel": plan.kernel, "out": (geo.k, geo.out_h, geo.out_w)}
        return cycles, atoms, shapes, _cbuf_record(use, data_reused, weights_reused, note)


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
