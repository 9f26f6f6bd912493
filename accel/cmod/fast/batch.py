"""Consecutive independent convolutions of a learned replay, computed as one batch.

A network compiled for a small NVDLA runs many small convolutions back to
back: a depthwise layer becomes one 8-channel block convolution per channel
group, a large layer one convolution per CBUF tile.  Run one at a time, each
pays the fixed cost of a dozen numpy calls.  A learned replay
(:mod:`accel.cmod.fast.replay`) knows its launches in advance, so a run of
launches with the same shape of work can go through the datapath together:
one feature read, one ``im2col``, one batched GEMM, the CACC, SDP and
converter arithmetic in the same passes, one write.  Each launch then does
its own bookkeeping at its place in the register program
(:meth:`accel.cmod.dla.Dla.launch` with the precomputed
:class:`~accel.cmod.pipeline.ConvDone`): saturation counters, CBUF state,
records, completion and interrupts stay exactly as an unbatched run leaves
them.

The batch computes at the first launch's place, so a launch joins only when
that cannot change a byte:

* it has the batch's :func:`signature` (a feature-cube convolution with the
  SDP on the fly writing to memory, no Y stage, no PDP, no input kept in or
  reused from the CBUF; the same geometry, cube shapes and strides, stage
  modes and operand layout - addresses, weights, operand values, CACC
  truncate and converter may differ);
* nothing it reads (input cube, weights, SDP operands) overlaps what an
  earlier member writes;
* if it reuses the weights kept in the CBUF (the bands of rows a layer too
  large for the CBUF is split into: each keeps the weights for the next), they
  are the ones the launch just before it keeps, read from the same bytes of
  memory (:func:`reuses`); the batch reads them from memory again, so that
  launch, when it is not a member, must not have written there;
* between two members the register program only stores configuration, waits
  for interrupts, reads registers, writes GLB or marks completions - nothing
  that reads or writes memory (a completion hook that reads memory, as
  ``--capture`` installs, makes the replay take the unbatched steps).

The arithmetic is the unbatched one (:func:`accel.cmod.fast.gemm.gemm_int8`,
:func:`accel.arith.shift_round`, :func:`accel.cmod.sdp.x_stage`) on arrays
with a leading batch axis; per-launch values (truncate, converter, register
operands) broadcast along it.  The bands of a 1x1 layer (one weight matrix)
are one GEMM of their pixels stacked, each band's SDP pass on its own rows of
the sums, as :meth:`accel.cmod.fast.paths.FastPaths.pointwise_datapath` computes one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from accel.cmod import cdma, csc, sdp_rdma
from accel.cmod.cube import read_int8_pixels, write_packed_cube
from accel.cmod.fast.depthwise import depthwise_sums, depthwise_sums_hwc, takes_channels_last
from accel.cmod.fast.fused import PostProcess
from accel.cmod.fast.gemm import Weights, diagonal_taps, gemm_sums
from accel.cmod.pipeline import ConvDone

#: im2col elements of one batch (int8; the GEMM converts them to float32): a bound on the
#: batch's working memory, not a tuning knob
MAX_BATCH_ELEMENTS = 1 << 22
#: output elements of one batch (its sums, int32)
MAX_BATCH_OUTPUTS = 1 << 18


def signature(launch) -> tuple | None:
    """What launches of one batch share (None: ``launch`` is never batched)."""
    if launch.kind != "conv" or launch.pdp_plan is not None:
        return None
    plan = launch.plan
    geo, use, sp = plan.geo, plan.use, plan.sdp
    if (geo.image or plan.feature_cvt is not None or use.data_reuse or use.skip_data_rls
            or sp.y_stage or sp.to_pdp or not sp.flying):
        return None
    stages = tuple((replace(st, alu_operand=0, mul_operand=0),
                    None if ops is None else (ops.offsets.shape, ops.nbytes, ops.comps))
                   for st, ops in sp.stages)
    return (launch.needs_rdma, geo, plan.feature[1:], sp.c, sp.c_pad, sp.h, sp.w, stages,
            sp.dst[1:])


def _cube_span(base: int, c: int, h: int, w: int, line: int, surf: int, atom: int
               ) -> tuple[int, int]:
    """``[first, end)`` bytes of a cube's whole atoms."""
    surfaces = -(-c // atom)
    return base, base + (surfaces - 1) * surf + (h - 1) * line + w * atom


def reads_writes(plan, atom: int) -> tuple[list[tuple[int, int]], tuple[int, int]]:
    """Byte ranges a batchable convolution reads (input, weights, SDP operands) and the
    one it writes."""
    base, c, h, w, line, surf = plan.feature
    reads = [_cube_span(base, c, h, w, line, surf, atom),
             (plan.weight_addr, plan.weight_addr + plan.weight_size)]
    for _, ops in plan.sdp.stages:
        if ops is not None:
            reads.append((ops.base + int(ops.offsets.min()),
                          ops.base + int(ops.offsets.max()) + ops.nbytes * len(ops.comps)))
    sp = plan.sdp
    dst, line, surf = sp.dst
    return reads, _cube_span(dst, sp.c_pad, sp.h, sp.w, line, surf, atom)


def reuses(prev, plan) -> bool:
    """Whether ``plan`` computes with the weights the convolution ``prev`` keeps in the CBUF
    (WEIGHT_REUSE after SKIP_WEIGHT_RLS, as the tiles of one layer do), taken as
    :meth:`~accel.cmod.cbuf_state.Cbuf.reused_weights` takes them, without a note or an
    error, and programmed with the address and size of the same bytes: the weights a
    batch reads from memory for it are then the ones an unbatched run reuses."""
    a, b = prev.use, plan.use
    return bool(a.skip_weight_rls and b.weight_reuse
                and (a.weight_banks, a.data_banks, a.weight_bytes, a.kernels,
                     a.bytes_per_kernel, a.image)
                == (b.weight_banks, b.data_banks, b.weight_bytes, b.kernels,
                    b.bytes_per_kernel, b.image)
                and (prev.weight_addr, prev.weight_size) == (plan.weight_addr, plan.weight_size))


def _overlaps(a: tuple[int, int], spans: list[tuple[int, int]]) -> bool:
    return any(a[0] < hi and lo < a[1] for lo, hi in spans)


def _per_launch(values: list[int], ndim: int) -> int | np.ndarray:
    """One value for every launch: the int when they agree, else an int64 array along the
    batch axis broadcasting against ``ndim``-dimensional batched data."""
    if all(v == values[0] for v in values):
        return values[0]
    return np.asarray(values, dtype=np.int64).reshape((-1,) + (1,) * (ndim - 1))


def _progression(values: list[int]) -> int | None:
    """The common step of ``values`` (an arithmetic progression), else None."""
    step = values[1] - values[0]
    if step <= 0 or any(b - a != step for a, b in zip(values, values[1:], strict=False)):
        return None
    return step


class ConvBatch:
    """Launches of one :func:`signature` run as one datapath pass (:meth:`run`)."""

    def __init__(self, launches: list, atom: int) -> None:
        self.launches = launches
        plans = self.plans = [op.plan for op in launches]
        p0 = plans[0]
        self.atom = atom
        self.truncate = _per_launch([p.truncate for p in plans], 3)
        self.cvt = tuple(_per_launch(list(v), 4) for v in zip(*(p.sdp.cvt for p in plans),
                                                              strict=True))
        self.feature_step = _progression([p.feature[0] for p in plans])
        self.dst_step = _progression([p.sdp.dst[0] for p in plans])
        _, dst_end = reads_writes(p0, atom)[1]
        if self.dst_step is not None and self.dst_step < dst_end - p0.sdp.dst[0]:
            self.dst_step = None          # the outputs interleave: write them one by one
        # the last run's results (see done()): the saturation counters of each launch by
        # ConvDone field, the packed weight bytes of each, the input shape (the same for all)
        self.saturations: dict[str, list[int]] = {}
        self.raws: list = []
        self.in_shape: tuple[int, int, int] = (0, 0, 0)
        # (input shape, CACC saturation counts) of a run and its launches' records, kept
        # by FastPaths.batch_finished for the next run with the same
        self.records: tuple[tuple, list] | None = None
        # what the weights and SDP operands are derived from (see inputs): one address per
        # memory region they lie in (its version says whether they changed)
        reads = {p.weight_addr for p in plans}
        reads |= {ops.base for p in plans for _, ops in p.sdp.stages if ops is not None}
        self._sources = tuple(sorted(reads))

    def __len__(self) -> int:
        return len(self.launches)

    def _features(self, dram, cfg) -> np.ndarray:
        """int8 ``[B, C, H, W]``: one strided read when the inputs are evenly spaced."""
        base, c, h, w, line, surf = self.plans[0].feature
        if self.feature_step is not None:
            surfaces = -(-c // self.atom)
            view = dram.strided(base, (len(self), surfaces, self.atom, h, w),
                                (self.feature_step, surf, 1, line, self.atom), cdma.UNIT)
            if view is not None:
                return view.reshape(len(self), surfaces * self.atom, h, w)[:, :c].view(np.int8)
        return np.stack([cdma.read_feature(dram, cfg, p.feature) for p in self.plans])

    def _pixels(self, dram) -> np.ndarray | None:
        """int8 ``[H*W, B*C]``, the inputs as pixels (:func:`accel.cmod.cube.read_int8_pixels`)
        when they are evenly spaced and fill whole atoms, else None."""
        base, c, h, w, line, surf = self.plans[0].feature
        if self.feature_step is None or c % self.atom:
            return None
        return read_int8_pixels(dram, base, c, h, w, self.atom, line, surf, cdma.UNIT,
                                len(self), self.feature_step)

    def inputs(self, dla) -> tuple:
        """``(packed weight bytes per launch, weight matrices, the datapath after the MAC
        array with its operands)``, derived again only when the memory they come from was
        written (:meth:`~accel.cmod.fast.paths.FastPaths.batch_inputs`)."""
        return dla.fast.batch_inputs(self.plans, self._sources, lambda: self._derive(dla))

    def _derive(self, dla) -> tuple:
        dram = dla.dram
        plans = self.plans
        raws = [dla.weights_of(p) for p in plans]
        if all(r is raws[0] for r in raws):        # tiles of one layer: one weight matrix
            matrix = dla.fast.weight_matrix(raws[0], plans[0]).int8[None]
        else:
            matrix = np.stack([dla.fast.weight_matrix(r, p).int8
                               for r, p in zip(raws, plans, strict=True)])
        weights = _diagonal(matrix, plans[0].geo, len(self)) or Weights(matrix)
        sp = plans[0].sdp
        operands = tuple((0, 0, False) if st.bypass else self._operands(i, dram)
                         for i, (st, _) in enumerate(sp.stages))
        post = PostProcess(self.truncate, [st for st, _ in sp.stages], operands, self.cvt,
                           sp.c, (sp.c_pad, sp.h, sp.w), self.atom)
        return raws, weights, post

    def _operands(self, i: int, dram) -> tuple:
        """``(alu operand, mul operand, alu already shifted)`` of X stage ``i``."""
        stages = [p.sdp.stages[i] for p in self.plans]
        st, ops = stages[0]
        alu = _per_launch([s.alu_operand for s, _ in stages], 4)
        mul = _per_launch([s.mul_operand for s, _ in stages], 4)
        shifted = False
        if ops is not None:
            got = [o.read(dram) for _, o in stages]
            if st.alu_src_mem and sdp_rdma.USE_ALU in got[0]:
                alu = np.stack([o.alu_shifted(dram, st.alu_shift) for _, o in stages])
                shifted = True
            if st.mul_src_mem and sdp_rdma.USE_MUL in got[0]:
                mul = np.stack([g[sdp_rdma.USE_MUL] for g in got])
        return alu, mul, shifted

    def _write(self, dram, out: np.ndarray) -> None:
        """Write the channel-packed outputs ``out[B, S, H, W, atom]``: one strided copy when
        the launches' outputs are evenly spaced, else one by one."""
        sp = self.plans[0].sdp
        base, line, surf = sp.dst
        n, surfaces, h, w, atom = out.shape
        disjoint = line >= w * atom and (surfaces == 1 or surf >= (h - 1) * line + w * atom)
        if self.dst_step is not None and disjoint:
            view = dram.strided(base, out.shape, (self.dst_step, surf, line, atom, 1),
                                "SDP_WDMA", "write")
            if view is not None:
                np.copyto(view, out, casting="unsafe")
                dram.touched(base, n)
                return
        for p, o in zip(self.plans, out, strict=True):
            write_packed_cube(dram, p.sdp.dst[0], o, line, surf, "SDP_WDMA")

    def run(self, dla) -> None:
        """Run every launch's datapath (outputs written); :meth:`done` gives each one's
        :class:`~accel.cmod.pipeline.ConvDone` for its bookkeeping, :attr:`saturations` the
        counters of all as lists by ConvDone field."""
        plans, n, dram = self.plans, len(self), dla.dram
        p0 = plans[0]
        geo = p0.geo
        _, c, h, w, _, _ = p0.feature
        raws, weights, post = self.inputs(dla)
        self.raws, self.in_shape = raws, (c, h, w)
        if self._bands_run(dla, raws):
            return
        pixels = (self._pixels(dram) if isinstance(weights, Diagonal)
                  and takes_channels_last(n * c, geo) else None)
        if pixels is not None:      # the channels-last loops take the pixels as they come
            sums = depthwise_sums_hwc(pixels.reshape(h, w, n * c), weights.taps, geo)
            if post.pixels_ready and post.shape[0] == c:   # and so does the SDP pass
                y, sdp_sats = post.run_pixels(sums)
                sat = np.zeros((n, 2), dtype=np.int64)     # CACC saturates nothing here
                sat[:, 1] = sdp_sats
            else:
                y, sat = post.run_packed(np.ascontiguousarray(sums.T).reshape(n, c, -1))
        else:
            x = self._features(dram, dla.cfg).reshape(n * c, h, w)
            if isinstance(weights, Diagonal):
                sums = depthwise_sums(x, weights.taps, geo).reshape(n, c, -1)
            else:
                patches = csc.im2col(x, geo).reshape(n, c * geo.r * geo.s, -1)
                # patches made for this GEMM alone (not the inputs themselves, as a 1x1
                # kernel's are) may be turned into the engine's operand where they lie
                sums = gemm_sums(weights, patches, scratch=not np.may_share_memory(patches, x))
            y, sat = post.run_packed(sums)
        self._write(dram, y)
        self.saturations = {"cacc_sat": sat[:, 0].tolist(), "sdp_sat": sat[:, 1].tolist()}

    def _bands_run(self, dla, raws: list) -> bool:
        """:meth:`run` of 1x1 convolutions of one weight matrix that
        :meth:`~accel.cmod.fast.paths.FastPaths.pointwise_engine` admits (the bands of one
        layer, most often): every member's pixels read as memory holds them, stacked into one GEMM
        on the integer engine, and each member's SDP pass on its rows of the sums
        straight into its output in memory.  False, with nothing done, for any other
        batch."""
        if any(r is not raws[0] for r in raws):
            return False
        plans, atom, dram = self.plans, self.atom, dla.dram
        p0 = plans[0]
        base, c, h, w, line, surf = p0.feature
        engine = dla.fast.pointwise_engine(p0)
        if engine is None:
            return False
        posts = [dla.fast.post_process(p.sdp, p.truncate) for p in plans]
        dsts = [p.sdp.dst_pixels(dram, atom) for p in plans]
        if not all(post.pixels_ready for post in posts) or any(d is None for d in dsts):
            return False
        n, points = len(self), h * w
        if self.feature_step == h * line:      # bands of one cube: one read of all of them
            read = read_int8_pixels(dram, base, c, n * h, w, atom, line, surf, cdma.UNIT,
                                    sign=True)
        else:
            reads = [read_int8_pixels(dram, p.feature[0], c, h, w, atom, line, surf,
                                      cdma.UNIT, sign=True) for p in plans]
            read = None if any(r is None for r in reads) else (
                np.concatenate([r[0] for r in reads]), all(r[1] for r in reads))
        if read is None:
            return False
        acc = dla.fast.pointwise_sums(p0, raws[0], engine, *read)
        sats = []
        for i, (p, post, dst) in enumerate(zip(plans, posts, dsts, strict=True)):
            sats.append(int(post.run_pixels(acc[i * points:(i + 1) * points], dst)[1][0]))
            dram.touched(p.sdp.dst[0])
        self.saturations = {"cacc_sat": [0] * n, "sdp_sat": sats}
        return True

    def done(self, i: int):
        """Launch ``i``'s :class:`~accel.cmod.pipeline.ConvDone` of the last :meth:`run` (made
        on demand: a span's play records a batch without them)."""
        plan = self.plans[i]
        return ConvDone(self.saturations["cacc_sat"][i], plan.sdp.pipeline_record(True),
                        self.saturations["sdp_sat"][i], None, self.raws[i], None, self.in_shape,
                        self.in_bytes, False, plan.use.weight_reuse)

    @property
    def in_bytes(self) -> int:
        """Bytes of each launch's input cube (int8 ``in_shape``)."""
        c, h, w = self.in_shape
        return c * h * w


class Diagonal:
    """The weights of a batch whose every kernel reads only its own input channel (a
    depthwise layer run as block convolutions): ``taps`` are int8 ``[B * K, R * S]``,
    the sums per channel over those taps (:func:`~accel.cmod.fast.depthwise.depthwise_sums`;
    the other channels' weights are all zero, so the sums are the same, with 1/C of the
    products)."""

    def __init__(self, taps: np.ndarray, k: int) -> None:
        self.taps, self.k = taps, k


def _diagonal(weights: np.ndarray, geo, n: int) -> Diagonal | None:
    """``weights`` (int8 ``[B or 1, K, C*R*S]``) as a :class:`Diagonal` when they are."""
    taps = diagonal_taps(weights, geo.k, geo.c, geo.r * geo.s)      # [B or 1, K, R*S]
    if taps is None:
        return None
    if taps.shape[0] != n:
        taps = np.broadcast_to(taps, (n, *taps.shape[1:]))
    return Diagonal(np.ascontiguousarray(taps).reshape(n * geo.k, -1), geo.k)


def batches(steps: list[tuple], atom: int, kinds: dict[str, int],
            quiet: Callable[[tuple], bool]) -> list[tuple] | None:
    """``steps`` with runs of batchable launches turned into one ``(BATCH, batch)`` step
    before the first of them and ``(DONE, store, offset, keep, bits, launch, batch, i)`` in
    place of each launch; None when nothing batches.

    ``kinds`` names the step codes (LAUNCH, BATCH, DONE); ``quiet(step)`` tells a non-launch
    step that neither reads nor writes memory."""
    launch_kind, batch_kind, done_kind = kinds["LAUNCH"], kinds["BATCH"], kinds["DONE"]
    windows: list[list[int]] = []          # indexes of the launch steps of each batch
    current: list[int] = []
    key = None
    written: list[tuple[int, int]] = []
    elements = sums = 0

    def close() -> None:
        nonlocal current, key, written, elements, sums
        if len(current) > 1:
            windows.append(current)
        current, key, written, elements, sums = [], None, [], 0, 0

    #: the batchable launch just before, with only quiet steps since: ``(plan, the bytes it
    #: writes)``
    previous: tuple | None = None
    for idx, step in enumerate(steps):
        if step[0] != launch_kind:
            if not quiet(step):
                close()
                previous = None
            continue
        launch = step[-1]
        sig = signature(launch)
        if sig is None:
            close()
            previous = None
            continue
        plan = launch.plan
        reads, writes = reads_writes(plan, atom)
        geo = plan.geo
        size = plan.feature[1] * geo.r * geo.s * geo.out_h * geo.out_w
        outputs = geo.k * geo.out_h * geo.out_w
        joins = not (sig != key or any(_overlaps(r, written) for r in reads)
                     or elements + size > MAX_BATCH_ELEMENTS
                     or sums + outputs > MAX_BATCH_OUTPUTS)
        # a launch reusing kept weights computes with the bytes the launch before it fetched:
        # as a member after that one, or first of a batch right after it, when what that
        # one wrote is not where the weights are (a batch reads them again from memory)
        if plan.use.weight_reuse and not (
                previous is not None and reuses(previous[0], plan)
                and (joins or not _overlaps(reads[1], [previous[1]]))):
            close()
            previous = (plan, writes)
            continue
        if not joins:
            close()
            key = sig
        current.append(idx)
        written.append(writes)
        elements += size
        sums += outputs
        previous = (plan, writes)
    close()
    if not windows:
        return None
    out = list(steps)
    inserts = []
    for members in windows:
        batch = ConvBatch([steps[i][-1] for i in members], atom)
        for j, i in enumerate(members):
            out[i] = (done_kind, *steps[i][1:], batch, j)
        inserts.append((members[0], (batch_kind, batch)))
    for at, step in reversed(inserts):
        out.insert(at, step)
    return out
