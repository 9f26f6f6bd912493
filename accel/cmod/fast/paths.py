"""FastPaths: the speed layer's one seam into :class:`accel.cmod.dla.Dla`.

The plain model decodes every op from its registers, computes a convolution as
``im2col`` and one exact GEMM, and runs CACC, the SDP and its converter as numpy
passes (:mod:`accel.cmod.cacc`, :mod:`accel.cmod.sdp`).  A ``Dla(fast=True)``
asks its :class:`FastPaths` instead, at the few points where that is slow:

* decoded ops, SDP modes, weight bytes, weight matrices, compiled SDP passes,
  batch inputs, convolution records and the lookup tables of CDP and SDP ops are
  kept (each in a :class:`~accel.cmod.fast.cache.BoundedCache`, valid while the
  registers or the memory they come from are unchanged);
* sums of products go to the integer GEMM engine (:mod:`accel.cmod.fast.gemm`), the
  taps of a depthwise layer to their own loops (:mod:`accel.cmod.fast.depthwise`),
  large 1x1 convolutions pixel by pixel;
* CACC, SDP and converter run as one compiled pass (:mod:`accel.cmod.fast.fused`),
  and so do SDP ops reading memory that add an operand cube or copy; the Y stage's
  LUT is one compiled loop (:mod:`accel.cmod.fast.lut_y`);
* learned replays of a firmware run (:mod:`accel.cmod.fast.replay`) skip the CSB
  decoding and compute runs of independent convolutions together
  (:mod:`accel.cmod.fast.batch`).

Every fast path computes the same bytes as the plain one; the conformance tests
(``tests/accel/cmod/fast/test_conformance.py``) run every NVDLA trace and zoo model
both ways and compare them.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter

import numpy as np

from accel.cmod import cdma, cdp, conv, csc, pdp, sdp, sdp_rdma
from accel.cmod.cube import read_int8_raw
from accel.cmod.fast import code_tables, fused, lut_y
from accel.cmod.fast.cache import BoundedCache
from accel.cmod.fast.depthwise import depthwise_sums, depthwise_sums_hwc, takes_channels_last
from accel.cmod.fast.gemm import (
    INT_ENGINE_MAX_TERMS,
    INT_ENGINE_MIN_MACS,
    IntEngine,
    Weights,
    gemm_sums,
    int_engine,
    select_sums,
)
from accel.cmod.fast.pool import pool_packed
from accel.cmod.pipeline import ConvDone
from accel.cmod.records import OpRecord

#: entries each cache keeps: a loadable's ops, several loadables
MAX_ENTRIES = 8192
#: fewest points of an SDP op from memory that :meth:`FastPaths._channel_table_datapath`
#: runs as a table of each channel's 256 codes: below, the table costs more to make than
#: the compiled pass it replaces
CHANNEL_TABLE_MIN_POINTS = 256
#: most distinct X1 results a staged table (:func:`_staged_code_table`) takes: its columns,
#: a byte per channel each (512 channels: 8 MiB at most)
STAGED_COLUMNS = 16384
#: the SDP registers that decide where its data comes from and goes (:meth:`FastPaths.sdp_mode`)
SDP_MODE_REGISTERS = ("D_FEATURE_MODE_CFG", *(f"D_DP_{p}_{r}" for p in ("BS", "BN", "EW")
                                             for r in ("CFG", "ALU_CFG", "MUL_CFG")))


class FastPaths:
    """The caches and fast datapaths of one :class:`~accel.cmod.dla.Dla` (``dla``)."""

    def __init__(self, dla) -> None:
        self.dla = dla
        self.dram, self.cfg = dla.dram, dla.cfg
        self.plans: BoundedCache = BoundedCache("decoded ops", MAX_ENTRIES)
        self.sdp_modes: BoundedCache = BoundedCache("SDP modes", MAX_ENTRIES)
        self.raw_weights: BoundedCache = BoundedCache("weight bytes", MAX_ENTRIES)
        self.matrices: BoundedCache = BoundedCache("weight matrices", MAX_ENTRIES)
        self.posts: BoundedCache = BoundedCache("SDP passes", MAX_ENTRIES)
        self.batches: BoundedCache = BoundedCache("batch inputs", MAX_ENTRIES)
        self.books: BoundedCache = BoundedCache("convolution records", MAX_ENTRIES)
        self.cdp_tables: BoundedCache = BoundedCache("CDP code tables", MAX_ENTRIES)
        self.sdp_tables: BoundedCache = BoundedCache("SDP code tables", MAX_ENTRIES)
        self.y_tables: BoundedCache = BoundedCache("Y LUT tables", MAX_ENTRIES)
        self.pixel_routes: BoundedCache = BoundedCache("pixel routes", MAX_ENTRIES)
        self.stages: BoundedCache = BoundedCache("SDP stage operands", MAX_ENTRIES)
        self._cdp_lut_key = _lut_registers(dla.regs["NVDLA_CDP"])
        sdp_regs = dla.regs["NVDLA_SDP"]
        self._sdp_lut_key = _lut_registers(sdp_regs)
        self._sdp_mode_key = itemgetter(*(sdp_regs.unit.registers[name].offset
                                          for name in SDP_MODE_REGISTERS))
        #: learned replays compute runs of independent convolutions together
        #: (:mod:`accel.cmod.fast.batch`); False keeps one datapath pass per launch
        self.batch_convs = True

    def caches(self) -> list[BoundedCache]:
        """Every cache, for their hit and miss counts."""
        return [self.plans, self.sdp_modes, self.raw_weights, self.matrices, self.posts,
                self.batches, self.books, self.cdp_tables, self.sdp_tables, self.y_tables,
                self.stages, self.pixel_routes]

    # --- kept decodes ----------------------------------------------------------------
    def plan(self, kind: str, units: tuple[str, ...], decode: Callable[[], object]) -> object:
        """``decode()`` of an op of ``kind`` whose units' consumer groups are programmed as
        now, kept by those register values (the next inference of a loadable)."""
        regs = self.dla.regs
        key = (kind, *(regs[u].config(regs[u].consumer) for u in units))
        return self.plans.get(key, decode)

    def sdp_mode(self, decide: Callable[[], tuple[bool, bool, bool]]
                 ) -> tuple[bool, bool, bool]:
        """``decide()``, the SDP's next mode, kept by the values of the registers it is
        decided from alone: it is asked whenever a pipeline unit is enabled, while the
        SDP's group may still hold what an earlier op left in the registers this op does
        not use."""
        regs = self.dla.regs["NVDLA_SDP"]
        return self.sdp_modes.get(self._sdp_mode_key(regs.groups[regs.consumer]), decide)

    def weights_of(self, plan: conv.ConvPlan, read: Callable[[conv.ConvPlan], np.ndarray]
                   ) -> np.ndarray:
        """``read(plan)``, the packed weight bytes of ``plan``, read again only when their
        memory was written."""
        key = (plan.weight_addr, plan.weight_size)
        version = self.dram.version(plan.weight_addr)
        hit = self.raw_weights.lookup(key)
        if hit is None or hit[0] != version:
            hit = self.raw_weights.put(key, (version, read(plan)))
        return hit[1]

    def weight_matrix(self, raw: np.ndarray, plan: conv.ConvPlan) -> Weights:
        """The ``[K, C*R*S]`` weights of the packed bytes ``raw`` (kept per bytes object:
        the entry holds ``raw``, so its id is not reused while the entry lives)."""
        key = (id(raw), plan.kernel)
        hit = self.matrices.lookup(key)
        if hit is None:
            hit = self.matrices.put(key, (raw, Weights(raw[plan.weight_order(self.cfg)]
                                                       .view(np.int8), plan.kernel)))
        return hit[1]

    def post_process(self, plan: sdp.SdpPlan, truncate: int) -> fused.PostProcess:
        """The compiled CACC/SDP/converter pass of ``plan`` fed by a convolution with
        CLIP_TRUNCATE ``truncate`` (0 for an op reading memory), set up again only when
        the memory its operands come from was written (the entry holds ``plan``: its id
        stays its own)."""
        dram, key = self.dram, (id(plan), truncate)
        hit = self.posts.lookup(key)
        if hit is None or dram.versions(hit[1]) != hit[2]:
            bases = tuple(reads.base for _, reads in plan.stages if reads is not None)
            hit = self.posts.put(key, (plan, bases, dram.versions(bases),
                                       fused.for_plan(plan, truncate, dram,
                                                      self.cfg.atom_size)))
        return hit[3]

    def batch_inputs(self, plans: list, sources: tuple[int, ...], derive: Callable[[], tuple]
                     ) -> tuple:
        """``derive()``, what a batch of launches of ``plans`` computes with (its weights and
        SDP operands), derived again only when the memory at ``sources`` was written;
        kept per plans, not per batch: a task recorded from two starting states batches
        the same plans twice."""
        versions = self.dram.versions(sources)
        # the entry holds the plans: their ids stay theirs
        return self.batches.get(tuple(map(id, plans)),
                                lambda: (tuple(plans), versions, derive()),
                                lambda hit: hit[1] == versions)[2]

    def conv_books(self, plan: conv.ConvPlan, run: tuple, count: Callable[..., tuple]
                   ) -> tuple:
        """``count(plan, *run)``, the cycles, MAC atoms, shapes and CBUF record of a
        convolution: the same for every run of ``plan`` that fetched and reused the same
        (``run``), kept per plan (the entry holds it) and shared by the records of those
        runs (records are read, not modified)."""
        key = (id(plan), *run)
        hit = self.books.lookup(key)
        if hit is None:
            hit = self.books.put(key, (plan, count(plan, *run)))
        return hit[1]

    def cdp_table(self, g, ram) -> cdp.CodeTable:
        """:func:`accel.cmod.cdp.code_table` of the CDP group ``g`` and LUT ``ram``, kept by
        the group's configuration, the LUT's registers and its entries (each op loads its
        table: the entries are compared, not a version of them)."""
        regs = g.regs
        key = (regs.config(g.group), self._cdp_lut_key(regs.stores()[0]), ram.le.tobytes(),
               ram.lo.tobytes())
        hit = self.cdp_tables.lookup(key)
        if hit is None:
            hit = self.cdp_tables.put(key, cdp.code_table(g, ram))
        return hit

    def lut_lookup(self, x: np.ndarray, ram, g) -> tuple[np.ndarray, dict]:
        """The SDP Y stage's lookup in one compiled pass (:mod:`accel.cmod.fast.lut_y`)."""
        return lut_y.lookup(x, ram, g, self.y_table(g, ram))

    def y_table(self, g, ram) -> lut_y.YTable:
        """:func:`accel.cmod.fast.lut_y.y_table` of the SDP's LUT ``ram`` and registers, kept
        by the LUT's registers and entries (each op loads its table: the entries are
        compared, not a version of them)."""
        key = (self._sdp_lut_key(g.regs.stores()[0]), ram.le.tobytes(), ram.lo.tobytes())
        hit = self.y_tables.lookup(key)
        if hit is None:
            hit = self.y_tables.put(key, lut_y.y_table(ram, g))
        return hit

    # --- convolution -----------------------------------------------------------------
    def conv_sums(self, raw: np.ndarray, plan: conv.ConvPlan, x: np.ndarray,
                  geo: csc.ConvGeometry) -> np.ndarray:
        """:func:`conv_sums` of the weight bytes ``raw`` of ``plan`` over the cube ``x``."""
        return conv_sums(self.weight_matrix(raw, plan), x, geo)

    def conv_post(self, plan: conv.ConvPlan, sums: np.ndarray, y_group: tuple | None
                  ) -> tuple[int, OpRecord, np.ndarray | None, int] | None:
        """``(CACC saturations, SDP record, output streamed to PDP, SDP saturations)`` of the
        sums of a convolution through the compiled pass: one without a Y stage, or with a
        Y stage that :meth:`_lut_post` computes (``y_group``: the SDP group and LUT, as
        :meth:`~accel.cmod.dla.Dla._y_group` gives them); None for any other."""
        sp = plan.sdp
        post = self.post_process(sp, plan.truncate)
        if not sp.y_stage:
            y, sats = post.run_packed(sums[None])
            rec = sp.pipeline_record(True)
        else:
            done = self._lut_post(sp, post, sums[None], True, y_group)
            if done is None:
                return None
            y, sats, rec = done
        return (int(sats[0, 0]), rec, sp.deliver_packed(self.dram, y[0]), int(sats[0, 1]))

    def _lut_post(self, plan: sdp.SdpPlan, post: fused.PostProcess, acc: np.ndarray,
                  flying: bool, y_group: tuple) -> tuple[np.ndarray, np.ndarray, OpRecord] | None:
        """``(outputs, saturations, record)`` of :meth:`fused.PostProcess.run_lut` on ``acc``
        (``flying``: sums of a convolution, else the input from memory), for an SDP op
        whose Y stage is a LUT alone (no element-wise multiply or add) and whose values
        reaching the LUT all lie in its table (:meth:`y_table`); None for any other."""
        lut = self._lut_alone(y_group)
        if lut is None:
            return None
        g, table = lut
        done = post.run_lut(acc, table.values, table.flags, cacc=flying)
        if done is None:
            return None
        y, sats, counts = done
        rec = plan.record(flying)
        plan.lut_counted(rec, g, lut_y.counters(counts, plan.c_pad * plan.h * plan.w))
        return y, sats, rec

    def pixels_datapath(self, plan: conv.ConvPlan, raw: np.ndarray, weights_reused: bool,
                        note: str, y_group: tuple | None = None) -> ConvDone | None:
        """The datapath of a convolution computed pixel by pixel, a large 1x1 one
        (:meth:`pointwise_datapath`), a block of a depthwise layer
        (:meth:`depthwise_datapath`) or a large one with a larger kernel
        (:meth:`rows_datapath`), with a Y stage that is a LUT alone or none (``y_group``:
        the SDP group and LUT, as :meth:`~accel.cmod.dla.Dla._y_group` gives them); None
        for any other."""
        hit = self.pixel_routes.lookup(id(plan))
        if hit is None:     # the entry holds the plan: its id stays its own
            hit = self.pixel_routes.put(id(plan), (plan, self._takes_a_pixel_route(plan)))
        if not hit[1]:
            return None
        lut = None
        if plan.sdp.y_stage:
            lut = self._lut_alone(y_group)
            if lut is None:
                return None
        return (self.pointwise_datapath(plan, raw, weights_reused, note, lut)
                or self.depthwise_datapath(plan, raw, weights_reused, note, lut)
                or self.rows_datapath(plan, raw, weights_reused, note, lut))

    def _lut_alone(self, y_group: tuple | None) -> tuple | None:
        """``(SDP group, Y table)`` (:meth:`y_table`) of a Y stage that is a LUT alone (no
        element-wise multiply or add), as the compiled passes take it; None for any
        other."""
        if y_group is None:
            return None
        g, _, ram, _ = y_group
        if not (g("D_DP_EW_CFG", "EW_ALU_BYPASS") and g("D_DP_EW_CFG", "EW_MUL_BYPASS")
                and not g("D_DP_EW_CFG", "EW_LUT_BYPASS")):
            return None
        return g, self.y_table(g, ram)

    def _takes_a_pixel_route(self, plan: conv.ConvPlan) -> bool:
        """Whether the shape of ``plan`` admits one of :meth:`pixels_datapath`'s routes (its
        weights, SDP program and memory decide the rest as it runs): decided once per
        plan, the checks of a convolution that none admits cost as much as a small one's
        datapath."""
        return (self.pointwise_engine(plan) is not None or self._depthwise_shape(plan)
                or self._rows_engine(plan) is not None)

    def pointwise_datapath(self, plan: conv.ConvPlan, raw: np.ndarray, weights_reused: bool,
                           note: str, lut: tuple | None = None) -> ConvDone | None:
        """The datapath of a large 1x1 convolution of the compiler's usual SDP program,
        with stride 1 and no padding, that neither keeps nor reuses data in the CBUF,
        computed pixel by pixel: its pixels read as memory holds them (whole atoms),
        ``pixels @ weights.T`` on the integer engine (the uint8 x int8 kernels when the
        pixels are non-negative), the SDP pass on the pixel-major sums
        (:meth:`~accel.cmod.fast.fused.PostProcess.run_pixels`) straight into the channel
        packing; None for any other convolution (or pixels that leave their region)."""
        sp = plan.sdp
        engine = self.pointwise_engine(plan)
        if engine is None:
            return None
        post = self.post_process(sp, plan.truncate)
        if not _pixels_ready(post, lut):
            return None
        read = cdma.read_feature_pixels(self.dram, self.cfg, plan.feature)
        if read is None:
            return None
        acc = self.pointwise_sums(plan, raw, engine, *read)
        return self._pixels_done(plan, post, acc, raw, weights_reused, note, lut)

    def depthwise_datapath(self, plan: conv.ConvPlan, raw: np.ndarray, weights_reused: bool,
                           note: str, lut: tuple | None = None) -> ConvDone | None:
        """The datapath of a block of a depthwise layer (each kernel reading only its own
        channel: :attr:`~accel.cmod.fast.gemm.Weights.diagonal`) that the channels-last
        loops take (:func:`~accel.cmod.fast.depthwise.takes_channels_last`), of the
        compiler's usual SDP program, whose input fills the output's atoms and which
        neither keeps nor reuses data in the CBUF, computed pixel by pixel as a batch of
        such blocks is (:class:`~accel.cmod.fast.batch.ConvBatch`): its pixels read as
        memory holds them (whole atoms, a pixel's channels side by side), summed
        channels innermost with each lane's taps (the lanes past the kernels with taps of
        0, so their sums are the 0 that disabled MAC cells deliver), the SDP pass on the
        pixel-major sums straight into the channel packing.  None for any other
        convolution (or pixels that leave their region)."""
        geo, sp = plan.geo, plan.sdp
        if not self._depthwise_shape(plan):
            return None
        _, c, h, w, _, _ = plan.feature
        taps = self.weight_matrix(raw, plan).diagonal
        post = self.post_process(sp, plan.truncate)
        if taps is None or not _pixels_ready(post, lut):
            return None
        read = cdma.read_feature_pixels(self.dram, self.cfg, plan.feature)
        if read is None:
            return None
        lanes = np.zeros((sp.c_pad, taps.shape[1]), dtype=np.int8)
        lanes[:taps.shape[0]] = taps
        sums = depthwise_sums_hwc(read[0].reshape(h, w, sp.c_pad), lanes, geo)
        return self._pixels_done(plan, post, sums, raw, weights_reused, note, lut)

    def _depthwise_shape(self, plan: conv.ConvPlan) -> bool:
        """Whether :meth:`depthwise_datapath` may take ``plan`` by its shape: a pixel route's
        convolution (:func:`_takes_pixels`) whose input fills the output's atoms, of a
        shape the channels-last loops take."""
        if not _takes_pixels(plan):
            return False
        c, atom = plan.feature[1], self.cfg.atom_size
        return (plan.sdp.c_pad == -(-c // atom) * atom
                and takes_channels_last(plan.sdp.c_pad, plan.geo))

    def rows_datapath(self, plan: conv.ConvPlan, raw: np.ndarray, weights_reused: bool,
                      note: str, lut: tuple | None = None) -> ConvDone | None:
        """The datapath of a convolution that :func:`conv_sums` runs as rows of patches by
        packed weights (a kernel larger than 1x1, at least :data:`ROWS_MIN_CHANNELS`
        channels, not a depthwise block, large enough for the integer engine), of the
        compiler's usual SDP program, that neither keeps nor reuses data in the CBUF:
        its patches taken from its pixels as memory holds them
        (:func:`~accel.cmod.csc.im2col_pixels`, a pixel's lanes side by side, those past
        the channels met by zero weights), the sums pixel-major, zero past the kernels,
        as the SDP's pixel-major pass takes them into the channel packing.  None for any
        other convolution (or pixels that leave their region)."""
        geo, sp = plan.geo, plan.sdp
        engine = self._rows_engine(plan)
        if engine is None:
            return None
        _, c, h, w, _, _ = plan.feature
        lanes = -(-c // self.cfg.atom_size) * self.cfg.atom_size
        weights = self.weight_matrix(raw, plan)
        post = self.post_process(sp, plan.truncate)
        if weights.diagonal is not None or not _pixels_ready(post, lut):
            return None
        read = cdma.read_feature_pixels(self.dram, self.cfg, plan.feature)
        if read is None:
            return None
        pixels, nonnegative = read
        signed = engine.signed and geo.pad_value >= 0 and nonnegative
        # the patches of the weights' channels alone: the lanes past them meet zero weights
        patches = csc.im2col_pixels(pixels.reshape(h, w, lanes)[:, :, :weights.kernel[1]],
                                    geo, offset=not signed)
        acc = _widened(weights.taps_last(engine).run(patches, signed), sp.c_pad)
        return self._pixels_done(plan, post, acc, raw, weights_reused, note, lut)

    def _rows_engine(self, plan: conv.ConvPlan) -> IntEngine | None:
        """The integer engine, for a convolution that :meth:`rows_datapath` may take by its
        shape: a pixel route's (:func:`_takes_pixels`) with a kernel larger than 1x1, at
        least :data:`ROWS_MIN_CHANNELS` channels, large enough for the engine; None for
        any other (or no engine)."""
        geo = plan.geo
        if not _takes_pixels(plan) or geo.r * geo.s == 1:
            return None
        c = plan.feature[1]
        terms = -(-c // self.cfg.atom_size) * self.cfg.atom_size * geo.r * geo.s
        if (c < ROWS_MIN_CHANNELS or terms > INT_ENGINE_MAX_TERMS
                or geo.k * terms * geo.out_h * geo.out_w < INT_ENGINE_MIN_MACS):
            return None
        return int_engine()

    def _pixels_done(self, plan: conv.ConvPlan, post: fused.PostProcess, acc: np.ndarray,
                     raw: np.ndarray, weights_reused: bool, note: str,
                     lut: tuple | None = None) -> ConvDone | None:
        """The SDP's pixel-major pass of a convolution's sums ``acc`` (int32 ``[pixels,
        C_pad]``) into its output, in memory itself where the output's lines are dense,
        and the convolution's :class:`~accel.cmod.pipeline.ConvDone` (32-bit sums, no
        truncate: CACC saturates nothing).  ``lut``: its Y stage's LUT
        (:meth:`_lut_alone`), its counters set as the plain model sets them; None when
        a value reaching it lies outside its table."""
        sp = plan.sdp
        _, c, h, w, _, _ = plan.feature
        dst = sp.dst_pixels(self.dram, self.cfg.atom_size)    # the output written in place
        if lut is None:
            y, sdp_sats = post.run_pixels(acc, dst)
            rec = sp.pipeline_record(True)
        else:
            g, table = lut
            done = post.run_pixels_lut(acc, table.values, table.flags, dst)
            if done is None:
                return None
            y, sdp_sats, counts = done
            rec = sp.record(True)
            sp.lut_counted(rec, g, lut_y.counters(counts, sp.c_pad * sp.h * sp.w))
        if dst is None:
            streamed = sp.deliver_packed(self.dram, y[0])
        else:
            streamed = None
            self.dram.touched(sp.dst[0])
        return ConvDone(0, rec, int(sdp_sats[0]), streamed, raw, None, (c, h, w), c * h * w,
                        False, weights_reused, note)

    def pointwise_sums(self, plan: conv.ConvPlan, raw: np.ndarray, engine: IntEngine,
                       pixels: np.ndarray, nonnegative: bool) -> np.ndarray:
        """int32 ``[pixels, C_pad]``: int8 ``pixels`` (``[pixels, C_pad]``, as
        :func:`~accel.cmod.cube.read_int8_pixels` reads them) through the 1x1 weights
        ``raw`` of ``plan``, on ``engine`` (:meth:`pointwise_engine`): its uint8 x int8
        kernels when the pixels are all non-negative, the offset form otherwise."""
        weights = self.weight_matrix(raw, plan)
        if weights.selection is not None:
            return select_sums(weights.selection, pixels, plan.sdp.c_pad, 1)
        # over every lane, padded ones included: a 1x1 GEMM's products are few per output
        # (the copies that would leave them out cost more, as BlazeFace's 24 -> 24 layers
        # on nv_large measured: 6.8 -> 9.5 ms an inference)
        packed = weights.pointwise(engine, plan.sdp.c_pad, pixels.shape[1])
        return packed.run(pixels, engine.signed and nonnegative)

    @staticmethod
    def pointwise_engine(plan: conv.ConvPlan) -> IntEngine | None:
        """The integer engine, for a convolution :meth:`pointwise_datapath` computes pixel by
        pixel: a large 1x1 one of a feature cube without the input converter, stride 1, no
        padding, that neither keeps nor reuses data in the CBUF; None for any other (or no
        engine).  (Batches of bands, :mod:`accel.cmod.fast.batch`, hold no Y stage.)"""
        geo = plan.geo
        if not _takes_pixels(plan):
            return None
        _, c, h, w, _, _ = plan.feature
        if (geo.r != 1 or geo.s != 1 or geo.stride_y != 1 or geo.stride_x != 1
                or geo.pad_top or geo.pad_left or (geo.out_h, geo.out_w) != (h, w)
                or c > INT_ENGINE_MAX_TERMS or geo.k * c * h * w < INT_ENGINE_MIN_MACS):
            return None
        return int_engine()

    def batch_finished(self, conv_batch) -> None:
        """What :meth:`~accel.cmod.dla.Dla.conv_finished` leaves for each launch of a
        :class:`~accel.cmod.fast.batch.ConvBatch` that just ran, from its results (no
        ConvDone made): none of them keeps data in the CBUF, and the weights a member
        keeps are the ones the next member reuses, so the CBUF state is the last one's;
        none of them has a note."""
        dla, plans = self.dla, conv_batch.plans
        dla.cbuf.complete(plans[-1].use, conv_batch.raws[-1], None)
        # the records depend on the run only through its input shape and saturation counts
        # (mostly all 0): after a run with the same, the same objects again (their notes
        # are kept since)
        key = (conv_batch.in_shape, tuple(conv_batch.saturations["cacc_sat"]))
        kept = conv_batch.records
        if kept is None or kept[0] != key:
            first = len(dla.stats)
            in_shape, in_bytes = conv_batch.in_shape, conv_batch.in_bytes
            for plan, cacc_sat in zip(plans, key[1], strict=True):
                sdp_rec = plan.sdp.pipeline_record(True)
                dla.keep_note(sdp_rec.note)
                dla.conv_recorded(plan, in_shape, in_bytes, cacc_sat, sdp_rec,
                                  weights_reused=plan.use.weight_reuse)
            conv_batch.records = (key, dla.stats[first:])
            return
        dla.stats.extend(kept[1])

    # --- SDP from memory -------------------------------------------------------------
    def sdp_from_memory(self, plan: sdp.SdpPlan, y_group: tuple | None
                        ) -> tuple[OpRecord, np.ndarray | None, int] | None:
        """``(record, output streamed to PDP, saturations)`` of an SDP op reading memory:
        without a Y stage, an element-wise add or a copy as memory holds the cubes, a
        table of the values or pairs of values of its int8 operands, any other through
        the compiled pass; with a Y stage that :meth:`_lut_post` computes
        (``y_group``: the SDP group and LUT), through the compiled pass.  None for any
        other Y stage."""
        rec = plan.pipeline_record(False)
        done = None if plan.y_stage else (self._eltwise_datapath(plan)
                                          or self._copy_datapath(plan)
                                          or self._table_datapath(plan))
        if done is None:
            got = self._channel_table_datapath(plan, y_group)
            if got is not None:
                *done, counts = got
                if plan.y_stage:
                    rec = plan.record(False)
                    plan.lut_counted(rec, y_group[0], lut_y.counters(
                        counts, plan.c_pad * plan.h * plan.w))
        if done is None:
            base, line, surf = plan.src
            x = read_int8_raw(self.dram, base, plan.c_pad, plan.h, plan.w, self.cfg.atom_size,
                              line, surf, sdp_rdma.UNIT)
            x = np.ascontiguousarray(x).reshape(1, plan.c_pad, -1)
            post = self.post_process(plan, 0)
            if plan.y_stage:
                got = self._lut_post(plan, post, x, False, y_group)
                if got is None:
                    return None
                y, sats, rec = got
            else:
                y, sats = post.run_packed(x, cacc=False)
            done = y[0], int(sats[0, 1])
        return rec, plan.deliver_packed(self.dram, done[0]), done[1]

    def _eltwise_datapath(self, plan: sdp.SdpPlan) -> tuple[np.ndarray, int] | None:
        """``(int8 [C_pad / atom, H, W, atom], converter saturations)`` of an SDP op
        reading memory that adds an int8 operand cube element by element (X1 of
        :func:`~accel.cmod.fast.fused.eltwise_ready`; X2 off, or with one operand and
        multiplier per channel: :meth:`_channel_stage`), from both cubes as memory holds
        them (:func:`~accel.cmod.fast.fused.eltwise_packed`); None for any other op, or
        cubes whose atoms leave their regions."""
        (st, reads), (st2, reads2) = plan.stages
        atom = self.cfg.atom_size
        if not (fused.eltwise_ready(st) and reads is not None
                and reads.nbytes == 1 and reads.comps == (sdp_rdma.USE_ALU,)
                and reads.grid is not None):
            return None
        x2 = None if st2.bypass else self._channel_stage(plan, st2, reads2)
        if not st2.bypass and x2 is None:
            return None
        (surfaces, lanes, h, w), (surf, lane, line, pixel) = reads.grid
        if lanes != atom or lane != 1 or pixel != atom or (h, w) != (plan.h, plan.w):
            return None
        operand = self._packed_cube(reads.base, surfaces, h, w, line, surf)
        base, x_line, x_surf = plan.src
        x = self._packed_cube(base, plan.c_pad // atom, h, w, x_line, x_surf)
        if operand is None or x is None or operand.shape != x.shape:
            return None
        return fused.eltwise_packed(x, operand, st, plan.cvt, plan.c, x2)

    def _channel_stage(self, plan: sdp.SdpPlan, st: sdp.StageConfig,
                       reads: sdp.OperandRead | None
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """X stage ``st`` as :func:`~accel.cmod.fast.fused.eltwise_packed` takes an X2:
        ``(its stage-table row, ALU operands (shifted), multipliers)``, int64 ``[C_pad]``
        each, from registers or read per channel; None when it reads operands per
        element.  Kept per plan and stage while the operands read are the same
        (:meth:`~accel.cmod.sdp.OperandRead.read` gives the same object until their memory is
        written): the arrays are shared, not to be modified."""
        c_pad = plan.c_pad
        got = None
        if reads is not None:
            if reads.offsets.shape != (c_pad, 1, 1):
                return None
            got = reads.read(self.dram)
        key = (id(plan), id(st))
        hit = self.stages.lookup(key)
        if hit is None or hit[1] is not got:     # the entry holds the plan (and its stages)
            hit = self.stages.put(key, (plan, got, self._stage_operands(plan, st, reads, got)))
        return hit[2]

    def _stage_operands(self, plan: sdp.SdpPlan, st: sdp.StageConfig,
                        reads: sdp.OperandRead | None, got: dict | None
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`_channel_stage`'s arrays of X stage ``st`` with the operands ``got`` that
        ``reads`` read (None: from registers)."""
        c_pad = plan.c_pad
        got = got or {}
        alu = np.zeros(c_pad, dtype=np.int64)
        if not st.alu_bypass:
            alu[:] = (reads.alu_shifted(self.dram, st.alu_shift).reshape(-1)
                      if st.alu_src_mem and sdp_rdma.USE_ALU in got
                      else sdp.alu_operand_shifted(st.alu_operand, st.alu_shift))
        mul = np.ones(c_pad, dtype=np.int64)
        if not st.mul_bypass:
            mul[:] = (got[sdp_rdma.USE_MUL].reshape(-1)
                      if st.mul_src_mem and sdp_rdma.USE_MUL in got else st.mul_operand)
        return fused.stage_row(st), alu, mul

    def _table_datapath(self, plan: sdp.SdpPlan) -> tuple[np.ndarray, int] | None:
        """``(int8 [C_pad / atom, H, W, atom], converter saturations)`` of an SDP op reading
        memory whose result is a function of its int8 input alone (every operand a
        register value: HardSwish's gate, a scale and offset of the whole layer) or of
        its input and one int8 operand X1 multiplies by, per element or per channel
        (HardSwish's product, a squeeze-excite's channel gates): the plain model's
        arithmetic (:func:`accel.cmod.sdp.x_stage` and the converter) on all 256 values
        or 65536 pairs, kept per plan, and a lookup per element.  A product by a cube
        followed by an X2 stage with operands per channel (HardSwish's product scaling
        its channels, :mod:`accel.compiler.ops.activation`) is a staged table instead:
        X1 on each pair, then X2 and the converter on each of X1's results per channel
        (:func:`_staged_code_table`).  None for any other op, cubes whose atoms leave
        their regions, or more than :data:`STAGED_COLUMNS` distinct X1 results."""
        (st, reads), (st2, reads2) = plan.stages
        x2 = None
        if reads2 is not None or not _registers_only(st2):
            if reads is None or reads.grid is None:
                return None
            x2 = self._channel_stage(plan, st2, reads2)
            if x2 is None:
                return None
        atom = self.cfg.atom_size
        if reads is None:
            if not _registers_only(st):
                return None
        elif not (not st.bypass and not st.mul_bypass and st.mul_src_mem and not st.prelu
                  and (st.alu_bypass or not st.alu_src_mem) and reads.nbytes == 1
                  and reads.comps == (sdp_rdma.USE_MUL,)):
            return None
        base, line, surf = plan.src
        x = self._packed_cube(base, plan.c_pad // atom, plan.h, plan.w, line, surf)
        if x is None:
            return None
        operand = None
        if reads is not None and reads.grid is not None:          # one per element
            (surfaces, lanes, h, w), (r_surf, lane, r_line, pixel) = reads.grid
            if lanes != atom or lane != 1 or pixel != atom or (h, w) != (plan.h, plan.w):
                return None
            operand = self._packed_cube(reads.base, surfaces, h, w, r_line, r_surf)
            if operand is None or operand.shape != x.shape:
                return None
        elif reads is not None:                                   # one per channel
            if reads.offsets.shape != (plan.c_pad, 1, 1):
                return None
            # each channel's byte over its plane: zero strides along the rows and columns
            per_channel = self.dram.gather(reads.base, reads.offsets.reshape(-1),
                                           sdp_rdma.UNIT).view(np.int8)
            operand = np.ndarray(x.shape, np.int8, buffer=per_channel, strides=(atom, 0, 0, 1))
        if x2 is not None:
            key, operands = ("staged", id(plan)), b"".join(v.tobytes() for v in x2[1:])
            hit = self.sdp_tables.lookup(key)
            if hit is None or hit[1] != operands:     # the entry holds the plan (its id)
                hit = self.sdp_tables.put(key, (plan, operands, _staged_code_table(plan, x2)))
            return None if hit[2] is None else code_tables.staged_apply(x, operand, hit[2])
        hit = self.sdp_tables.lookup(id(plan))
        if hit is None:     # the entry holds the plan: its id stays its own
            table = code_tables.byte_table(_code_table(plan, reads is not None))
            hit = self.sdp_tables.put(id(plan), (plan, table))
        return code_tables.table_apply(x, operand, hit[1], plan.c)

    def _channel_table_datapath(self, plan: sdp.SdpPlan, y_group: tuple | None
                                ) -> tuple[np.ndarray, int, np.ndarray] | None:
        """``(int8 [C_pad / atom, H, W, atom], converter saturations, LUT counts)`` of an
        SDP op reading memory whose result is a function of each channel's int8 input:
        X stages with operands from registers or one per channel (a per-channel scale
        of any width, PReLU's slopes, a bias), then no Y stage or one that is a LUT alone
        (on presets whose SDP has one: Sigmoid, Tanh, SiLU over a cube in memory).  The
        plain model's arithmetic (:func:`accel.cmod.sdp.x_stage`, the Y stage's
        :class:`~accel.cmod.fast.lut_y.YTable`, the converter) on all 256 codes of each
        channel, kept while the operands and the LUT are unchanged, and a lookup per
        element.  None for any other op, a value the Y table does not hold, or an input
        whose atoms leave their region, or a channel of fewer than
        :data:`CHANNEL_TABLE_MIN_POINTS` elements."""
        if plan.h * plan.w < CHANNEL_TABLE_MIN_POINTS:
            return None
        stages = []
        for st, reads in plan.stages:
            if st.bypass:
                continue
            got = self._channel_stage(plan, st, reads)
            if got is None:
                return None
            stages.append((st, got[1], got[2]))
        y_table = None
        if plan.y_stage:
            lut = self._lut_alone(y_group)
            if lut is None:
                return None
            y_table = lut[1]
        atom = self.cfg.atom_size
        base, line, surf = plan.src
        x = self._packed_cube(base, plan.c_pad // atom, plan.h, plan.w, line, surf)
        if x is None:
            return None
        operands = b"".join(a.tobytes() + m.tobytes() for _, a, m in stages)
        key = ("channels", id(plan))
        hit = self.sdp_tables.lookup(key)
        if hit is None or hit[1] != operands or hit[2] is not y_table:
            # the entry holds the plan: its id stays its own
            table = _channel_code_table(plan, stages, y_table)
            if table is not None and y_table is None:     # no LUT counters to sum
                table = code_tables.byte_table(table, per_channel=True)
            hit = self.sdp_tables.put(key, (plan, operands, y_table, table))
        if hit[3] is None:
            return None
        return code_tables.channel_table_apply(x, hit[3], plan.c)

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

    def pdp_packed(self, plan: pdp.PdpPlan) -> np.ndarray | None:
        """The output of a PDP operation reading memory, int8 ``[C_pad / atom, OH, OW,
        atom]``, pooled from its input as memory holds it
        (:func:`~accel.cmod.fast.pool.pool_packed`); None when the input's atoms leave
        their region."""
        base, line, surf = plan.src
        x = self._packed_cube(base, plan.c_pad // self.cfg.atom_size, plan.h, plan.w, line,
                              surf)
        return None if x is None else pool_packed(x, plan)

    def _packed_cube(self, base: int, surfaces: int, h: int, w: int, line: int, surf: int
                     ) -> np.ndarray | None:
        """A cube in memory as int8 ``[surfaces, H, W, atom]``, channel-packed, a view (None
        when its atoms leave their region)."""
        atom = self.cfg.atom_size
        view = self.dram.strided(base, (surfaces, h, w, atom), (surf, line, atom, 1),
                                 sdp_rdma.UNIT)
        return None if view is None else view.view(np.int8)


def _lut_registers(regs) -> Callable[[dict], tuple]:
    """The values of a unit's LUT registers (its ranges, index selects, slopes; not its
    access port) from the store of its single registers."""
    return itemgetter(*(reg.offset for name, reg in regs.unit.registers.items()
                        if name.startswith("S_LUT_") and not name.startswith("S_LUT_ACCESS")))


def _widened(acc: np.ndarray, c_pad: int) -> np.ndarray:
    """Pixel-major sums of the ``K`` kernels alone (int32 ``[pixels, K]``: a patch-row
    GEMM runs over the real kernels, a quarter to seven eighths of nv_large's 32 lanes on
    narrow layers, hundreds of products each) as the SDP's pixel-major pass takes them,
    ``[pixels, c_pad]`` with 0 past the kernels, as disabled MAC cells deliver."""
    if acc.shape[1] == c_pad:
        return acc
    out = np.zeros((acc.shape[0], c_pad), dtype=np.int32)
    out[:, :acc.shape[1]] = acc
    return out


def _pixels_ready(post: fused.PostProcess, lut: tuple | None) -> bool:
    """Whether the pixel-major pass takes ``post``'s operations, with the Y stage's LUT
    ``lut`` (:meth:`FastPaths._lut_alone`) or without a Y stage."""
    return post.pixels_lut_ready if lut is not None else post.pixels_ready


def _takes_pixels(plan: conv.ConvPlan) -> bool:
    """Whether a convolution may take a pixel route (:meth:`FastPaths.pixels_datapath`): it
    reads a feature cube from memory (not an image, no input converter) and neither keeps
    nor reuses data in the CBUF (a Y stage: :meth:`FastPaths._lut_alone`)."""
    use = plan.use
    return not (plan.feature is None or plan.feature_cvt is not None or plan.geo.image
                or use.data_reuse or use.skip_data_rls)


def _registers_only(st: sdp.StageConfig) -> bool:
    """An X stage that is bypassed or takes its operands from registers alone."""
    return st.bypass or ((st.alu_bypass or not st.alu_src_mem)
                         and (st.mul_bypass or not st.mul_src_mem))


def _code_table(plan: sdp.SdpPlan, pairs: bool) -> np.ndarray:
    """The code table of the stages and converter of ``plan`` (for
    :func:`~accel.cmod.fast.code_tables.table_apply`, through its ``byte_table``),
    computed by the plain model: int16 ``[256]``, entry ``x`` for the int8
    input ``x - 128``; with ``pairs``, ``[256, 256]``, entry ``[x, a]`` for X1's
    multiplier operand ``a - 128`` too."""
    codes = np.arange(-128, 128, dtype=np.int64)
    x = np.repeat(codes, 256) if pairs else codes.copy()
    for st, operands in plan.stages:
        mul = np.tile(codes, 256) if operands is not None else st.mul_operand
        x = sdp.x_stage(x, st, st.alu_operand, mul, inplace=True)
    table = _converted_entries(x, plan.cvt)
    return table.reshape(256, 256) if pairs else table


def _staged_code_table(plan: sdp.SdpPlan, x2: tuple[np.ndarray, np.ndarray, np.ndarray]
                       ) -> code_tables.StagedTable | None:
    """The :class:`~accel.cmod.fast.code_tables.StagedTable` of ``plan``: X1 (a product by
    the operand cube) on each of the 65536 pairs, indexed by their raw bytes, then X2
    (``x2``: :meth:`FastPaths._channel_stage`'s row, shifted ALU operands and
    multipliers per channel) and the converter on each of X1's results for each channel,
    all by the plain model's arithmetic; None when X1 has more than
    :data:`STAGED_COLUMNS` distinct results (a product of two int8 cubes has 9,390)."""
    (st, _), (st2, _) = plan.stages
    values = np.arange(256, dtype=np.uint8).view(np.int8).astype(np.int64)  # by raw byte
    x1 = sdp.x_stage(np.repeat(values, 256), st, st.alu_operand, np.tile(values, 256),
                     inplace=True)
    results, index = np.unique(x1, return_inverse=True)
    if len(results) > STAGED_COLUMNS:
        return None
    _, alu, mul = x2
    entries = _converted_entries(sdp.x_stage(np.tile(results, (plan.c_pad, 1)), st2,
                                             alu[:, None], mul[:, None], inplace=True,
                                             alu_shifted=True), plan.cvt)
    saturates = ((entries >> 8) & 1).astype(np.uint8)
    saturates[plan.c:] = 0                  # channels whose saturations do not count
    table = code_tables.StagedTable(
        index.astype(np.uint16), np.ascontiguousarray(entries & 0xFF, np.uint8),
        saturates if saturates.any() else np.zeros((0, 0), np.uint8))
    for array in table:
        array.flags.writeable = False
    return table


def _converted_entries(x: np.ndarray, cvt: tuple[int, int, int]) -> np.ndarray:
    """The converter on each value of ``x`` (int64, any shape, consumed) as a table's int16
    entries: the output byte, and 1 in bit 8 where the converter saturates (each value
    converted as a launch of its own, whose saturation count is then 0 or 1)."""
    out, sat = sdp.convert_launches(x.reshape(-1, 1, 1, 1), *cvt, 1)
    entries = (out.reshape(-1).astype(np.int16) & 0xFF) | (np.asarray(sat, np.int16) << 8)
    return entries.reshape(x.shape)


def _channel_code_table(plan: sdp.SdpPlan, stages: list, y_table: lut_y.YTable | None
                        ) -> np.ndarray | None:
    """The per-channel code table of ``plan`` (for
    :func:`~accel.cmod.fast.code_tables.channel_table_apply`), computed by the plain
    model: int16 ``[C_pad, 256]``, entry ``[ch, x]`` for the int8 input ``x -
    128`` of channel ``ch``; ``stages``: each X stage that runs, with its ALU operands
    (shifted) and multipliers per channel (int64 ``[C_pad]``); ``y_table``: the Y
    stage's LUT, or None.  None when a value reaching the LUT lies outside its table."""
    x = np.tile(np.arange(-128, 128, dtype=np.int64), (plan.c_pad, 1))
    for st, alu, mul in stages:
        x = sdp.x_stage(x, st, alu[:, None], mul[:, None], inplace=True, alu_shifted=True)
    flags = np.zeros(x.shape, dtype=np.int16)
    if y_table is not None:
        index = x + lut_y.HALF
        if index.min() < 0 or index.max() >= 2 * lut_y.HALF:
            return None
        flags[:] = y_table.flags[index]
        x = y_table.values[index]
    return _converted_entries(x, plan.cvt) | (flags << 9)


#: fewest channels of a convolution that :func:`conv_sums` runs with packed weights: a
#: tap's channels then fill a cache line of the pixel-by-pixel patches
ROWS_MIN_CHANNELS = 64


def conv_sums(weights: Weights, x: np.ndarray, geo: csc.ConvGeometry) -> np.ndarray:
    """Exact ``[K, out_h*out_w]`` sums of products of a convolution of the cube ``x``.

    A large one of an int8 feature cube with a kernel larger than 1x1 and at least
    :data:`ROWS_MIN_CHANNELS` channels runs as ``patches @ weights.T`` on the integer
    engine with the weights packed once (:meth:`~accel.cmod.fast.gemm.Weights.taps_last`,
    patches from :func:`~accel.cmod.csc.im2col_rows`); the others as
    :func:`~accel.cmod.fast.gemm.gemm_sums` of :func:`~accel.cmod.csc.im2col`, whose
    patches for a 1x1 kernel are the cube's pixels as they are.  Packing the patches
    per run costs less than turning them and the sums around when a kernel tap's
    channels are few or the kernel is 1x1 (measured on the layers of mobilenet_v2,
    yolox_nano and resnet18_cifar).  A block of a depthwise layer (each kernel reading
    only its own channel: :attr:`~accel.cmod.fast.gemm.Weights.diagonal`) sums its taps
    per channel (:func:`~accel.cmod.fast.depthwise.depthwise_sums`), 1/C of the GEMM's
    products."""
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
