"""A direct-convolution core: CSC-style sequencing over a CBUF, CMAC, CACC, SDP X1/X2, CVT.

The feature cube and the weights sit in on-chip memories laid out the way the
sequencer walks them (NVDLA's CBUF banks hold the same atoms):

* feature atom ``(cg, y, x)`` (``atomic_c`` channels of group ``cg``) at
  ``(cg * H + y) * W + x``;
* weight entry of kernel ``kg * atomic_k + k``, channel group ``cg``, tap
  ``(r, s)`` at ``(((kg * CG + cg) * R + r) * S + s) * atomic_k + k``; kernels
  past ``K`` and channels past ``C`` hold zeros.

For every kernel group, the output points are taken in raster order in
stripes of at most ``points`` (the CACC's entries).  For every (channel
group, kernel tap) of a stripe the sequencer loads the group's ``atomic_k``
kernels into the MAC array, then sends one feature atom per point: the input
pixel ``(oy * SY + r * DY - PAD_TOP, ox * SX + s * DX - PAD_LEFT)``, or the pad
value outside the cube, with the lanes past ``C`` masked.  The CACC adds the
partial sums up per point and hands each finished point to the
post-processing pipeline (:mod:`accel.rtl.postproc`), whose int8 beats leave
on ``out`` in the same order: kernel group, then point.

The registers arrive on ``cfg`` (constant from ``start`` until the last
output; the CSB register file drives them in the full engine).  X1/X2
operands come from the registers (``ALU_SRC``/``MUL_SRC`` = memory is not
wired yet: the SDP_RDMA path).
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from accel.config import HwConfig
from accel.rtl.cacc import Accumulator
from accel.rtl.cmac import Cmac, pipeline_depth
from accel.rtl.postproc import ConfigLayout, PostProcessor, ResultLayout

SIZE_BITS = 12


class ConvConfigLayout(data.StructLayout):
    """The operation's registers: cube and kernel sizes, strides, dilation, padding,
    group counts (``ceil(C / atomic_c)``, ``ceil(K / atomic_k)``) and the post-processing."""

    def __init__(self) -> None:
        size = unsigned(SIZE_BITS)
        super().__init__({
            "c": size, "h": size, "w": size, "k": size, "r": 4, "s": 4,
            "stride_x": 4, "stride_y": 4, "dilation_x": 4, "dilation_y": 4,
            "pad_left": 4, "pad_top": 4, "out_w": size, "out_h": size,
            "channel_groups": size, "kernel_groups": size, "pad_value": signed(8),
            "post": ConfigLayout(),
        })


def write_layout(cfg: HwConfig, entries: int) -> data.StructLayout:
    """A memory write port: one atom at ``addr`` when ``en``."""
    return data.StructLayout({"addr": range(entries),
                              "data": data.ArrayLayout(signed(8), cfg.atomic_c), "en": 1})


class ConvCore(wiring.Component):
    """See the module docstring.

    Attributes
    ----------
    cfg : ``In(ConvConfigLayout())``
    start : ``In(1)``, a one-cycle pulse; ``busy`` : ``Out(1)`` until every atom is sent
    feature_write, weight_write : ``In`` address / data / enable of the memories
    out : ``Out(stream.Signature(ResultLayout(cfg)))``
    """

    def __init__(self, cfg: HwConfig, points: int = 16, feature_entries: int = 2048,
                 weight_entries: int = 2048) -> None:
        self.hw, self.points = cfg, points
        self.feature_entries, self.weight_entries = feature_entries, weight_entries
        super().__init__({
            "cfg": In(ConvConfigLayout()),
            "start": In(1),
            "busy": Out(1),
            "feature_write": In(write_layout(cfg, feature_entries)),
            "weight_write": In(write_layout(cfg, weight_entries)),
            "out": Out(stream.Signature(ResultLayout(cfg))),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        hw, cfg = self.hw, self.cfg
        n_c, n_k = hw.atomic_c, hw.atomic_k
        m.submodules.cmac = cmac = Cmac(hw)
        m.submodules.cacc = cacc = Accumulator(hw, self.points)
        m.submodules.post = post = PostProcessor(hw)
        atom = data.ArrayLayout(signed(8), n_c)
        m.submodules.fmem = fmem = memory.Memory(shape=atom, depth=self.feature_entries,
                                                 init=[])
        m.submodules.wmem = wmem = memory.Memory(shape=atom, depth=self.weight_entries,
                                                 init=[])
        for mem, port in ((fmem, self.feature_write), (wmem, self.weight_write)):
            wr = mem.write_port()
            m.d.comb += [wr.addr.eq(port.addr), wr.data.eq(port.data), wr.en.eq(port.en)]
        f_rd, w_rd = fmem.read_port(), wmem.read_port()

        # ---- stage A: the sequencer ------------------------------------------------
        kg, cg = Signal(SIZE_BITS), Signal(SIZE_BITS)
        r, s = Signal(4), Signal(4)
        k = Signal(range(n_k))
        p = Signal(range(self.points))
        stripe, stripe_y, stripe_x = (Signal(2 * SIZE_BITS), Signal(SIZE_BITS),
                                      Signal(SIZE_BITS))
        oy, ox = Signal(SIZE_BITS), Signal(SIZE_BITS)
        loading = Signal()                 # sending the kernels of this round
        running = Signal()
        total = Signal(2 * SIZE_BITS)
        m.d.comb += total.eq(cfg.out_w * cfg.out_h)
        in_stripe = Signal(range(self.points + 1))
        m.d.comb += in_stripe.eq(Mux(total - stripe > self.points, self.points,
                                     total - stripe))

        # ---- stage B: the memory read and the command beside it -----------------------
        b_valid, b_weight = Signal(), Signal()
        b_pad, b_mask, b_kernel = Signal(), Signal(n_c), Signal(range(n_k))
        b_point, b_first, b_last = Signal(range(self.points)), Signal(), Signal()
        b_free = Signal()
        m.d.comb += b_free.eq(~b_valid | cmac.data.ready)   # weight.ready == data.ready
        a_fire = Signal()
        m.d.comb += a_fire.eq(running & b_free)
        m.d.comb += [f_rd.en.eq(a_fire), w_rd.en.eq(a_fire)]

        iy = Signal(signed(2 * SIZE_BITS + 2))
        ix = Signal(signed(2 * SIZE_BITS + 2))
        m.d.comb += [iy.eq(oy * cfg.stride_y + r * cfg.dilation_y - cfg.pad_top),
                     ix.eq(ox * cfg.stride_x + s * cfg.dilation_x - cfg.pad_left)]
        inside = Signal()
        m.d.comb += inside.eq((iy >= 0) & (iy < cfg.h) & (ix >= 0) & (ix < cfg.w))
        m.d.comb += f_rd.addr.eq((cg * cfg.h + iy) * cfg.w + ix)
        m.d.comb += w_rd.addr.eq((((kg * cfg.channel_groups + cg) * cfg.r + r) * cfg.s + s)
                                 * n_k + k)
        remaining = Signal(signed(SIZE_BITS + 2))
        m.d.comb += remaining.eq(cfg.c - cg * n_c)
        mask = Signal(n_c)
        m.d.comb += [mask[i].eq(remaining > i) for i in range(n_c)]
        first_round = (cg == 0) & (r == 0) & (s == 0)
        last_round = (cg == cfg.channel_groups - 1) & (r == cfg.r - 1) & (s == cfg.s - 1)

        with m.If(b_free):
            m.d.sync += b_valid.eq(a_fire)
            with m.If(a_fire):
                m.d.sync += [b_weight.eq(loading), b_pad.eq(~inside), b_mask.eq(mask),
                             b_kernel.eq(k), b_point.eq(p), b_first.eq(first_round),
                             b_last.eq(last_round)]

        # advancing the loops
        with m.If(self.start & ~running):
            m.d.sync += [running.eq(1), loading.eq(1), kg.eq(0), cg.eq(0), r.eq(0), s.eq(0),
                         k.eq(0), p.eq(0), stripe.eq(0), stripe_y.eq(0), stripe_x.eq(0),
                         oy.eq(0), ox.eq(0)]
        with m.Elif(a_fire & loading):
            m.d.sync += k.eq(k + 1)
            with m.If(k == n_k - 1):
                m.d.sync += [k.eq(0), loading.eq(0), p.eq(0), oy.eq(stripe_y),
                             ox.eq(stripe_x)]
        with m.Elif(a_fire):
            # next point of the stripe, in raster order
            with m.If(ox == cfg.out_w - 1):
                m.d.sync += [ox.eq(0), oy.eq(oy + 1)]
            with m.Else():
                m.d.sync += ox.eq(ox + 1)
            m.d.sync += p.eq(p + 1)
            with m.If(p == in_stripe - 1):          # the round is over
                m.d.sync += [p.eq(0), loading.eq(1)]
                with m.If(s != cfg.s - 1):
                    m.d.sync += s.eq(s + 1)
                with m.Elif(r != cfg.r - 1):
                    m.d.sync += [s.eq(0), r.eq(r + 1)]
                with m.Elif(cg != cfg.channel_groups - 1):
                    m.d.sync += [s.eq(0), r.eq(0), cg.eq(cg + 1)]
                with m.Else():                      # the stripe is over
                    m.d.sync += [s.eq(0), r.eq(0), cg.eq(0)]
                    with m.If(stripe + in_stripe < total):
                        m.d.sync += [stripe.eq(stripe + in_stripe),
                                     stripe_y.eq(Mux(ox == cfg.out_w - 1, oy + 1, oy)),
                                     stripe_x.eq(Mux(ox == cfg.out_w - 1, 0, ox + 1))]
                    with m.Else():                  # the kernel group is over
                        m.d.sync += [stripe.eq(0), stripe_y.eq(0), stripe_x.eq(0)]
                        with m.If(kg == cfg.kernel_groups - 1):
                            m.d.sync += running.eq(0)
                        with m.Else():
                            m.d.sync += kg.eq(kg + 1)
        m.d.comb += self.busy.eq(running | b_valid)

        # ---- into the MAC array ------------------------------------------------------
        m.d.comb += [
            cmac.weight.valid.eq(b_valid & b_weight),
            cmac.weight.payload.data.eq(w_rd.data),
            cmac.weight.payload.mask.eq((1 << n_c) - 1),
            cmac.weight.payload.kernel.eq(b_kernel),
            cmac.data.valid.eq(b_valid & ~b_weight),
            cmac.data.payload.mask.eq(b_mask),
        ]
        for i in range(n_c):
            m.d.comb += cmac.data.payload.data[i].eq(Mux(b_pad, cfg.pad_value, f_rd.data[i]))

        # the point and its place in the sum travel beside the MAC pipeline
        m.submodules.meta = meta = fifo.SyncFIFOBuffered(
            width=len(b_point) + 2, depth=pipeline_depth(hw) + 2)
        m.d.comb += [meta.w_data.eq(b_point | (b_first << len(b_point))
                                    | (b_last << (len(b_point) + 1))),
                     meta.w_en.eq(cmac.data.valid & cmac.data.ready)]
        taken = Signal()
        m.d.comb += [
            cacc.psum.payload.data.eq(cmac.result.payload),
            cacc.psum.payload.point.eq(meta.r_data[:len(b_point)]),
            cacc.psum.payload.first.eq(meta.r_data[len(b_point)]),
            cacc.psum.payload.last.eq(meta.r_data[len(b_point) + 1]),
            cacc.psum.valid.eq(cmac.result.valid & meta.r_rdy),
            cmac.result.ready.eq(cacc.psum.ready & meta.r_rdy),
            taken.eq(cmac.result.valid & cmac.result.ready),
            meta.r_en.eq(taken),
        ]
        # ---- CACC -> SDP -> out ------------------------------------------------------
        m.d.comb += [
            post.cfg.eq(cfg.post),
            post.inp.valid.eq(cacc.sum.valid),
            cacc.sum.ready.eq(post.inp.ready),
        ]
        m.d.comb += [post.inp.payload.acc[i].eq(cacc.sum.payload[i]) for i in range(n_k)]
        wiring.connect(m, post.out, wiring.flipped(self.out))
        return m
