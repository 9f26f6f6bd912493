"""A direct-convolution core: CSC-style sequencing over a CBUF, CMAC, CACC, SDP X1/X2, CVT.

The feature cube and the weights sit in on-chip memories laid out the way the
sequencer walks them (NVDLA's CBUF banks hold the same atoms):

* feature atom ``(cg, y, x)`` (``atomic_c`` channels of group ``cg``) at
  ``(cg * H + y) * W + x``;
* weight entry of kernel ``kg * atomic_k + k``, channel group ``cg``, tap
  ``(r, s)`` at ``(((kg * CG + cg) * R + r) * S + s) * atomic_k + k``; channels
  past ``C`` hold zeros, the entries of kernels past ``K`` are never read.

For every kernel group, the output points are taken in raster order in
stripes of at most ``points`` (the CACC's entries), balanced
(:func:`stripe_points`).  For every (channel
group, kernel tap) of a stripe - a *round* - the sequencer loads the group's
``atomic_k`` kernels into the MAC array's shadow bank, then sends one feature
atom per point: the input pixel ``(oy * SY + r * DY - PAD_TOP, ox * SX + s *
DX - PAD_LEFT)``, or the pad value outside the cube, with the lanes past ``C``
masked.  The round's first atom swaps the banks, in the cycle after its last
kernel entered at the earliest; the next round's kernels enter from that same
cycle on, so a round costs ``max(kernels, points)`` cycles.  In the last
kernel group only the ``K mod atomic_k`` real kernels are loaded (the others
once per stripe, as zeros).  The CACC adds the
partial sums up per point and hands each finished point to the
post-processing pipeline (:mod:`accel.rtl.postproc`), whose int8 beats leave
on ``out`` in the same order: kernel group, then point.

The registers arrive on ``cfg`` (constant from ``start`` until the last
output; the CSB register file drives them in the full engine).  X1/X2
operands come from the registers, or (``ALU_SRC``/``MUL_SRC`` = memory) per
output channel from the operand memory, one entry per kernel group, as
SDP_RDMA delivers them in per-kernel mode (``operand_write``).
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from accel.config import HwConfig
from accel.rtl.cacc import Accumulator
from accel.rtl.cmac import Cmac, pipeline_depth
from accel.rtl.postproc import ConfigLayout, PostProcessor, ResultLayout

#: bits of a size the registers give as a 13-bit field plus one (cube width, height and
#: channels, kernels, output width and height: up to 8192)
SIZE_BITS = 14
#: bits of a kernel width or height (5-bit field plus one: up to 32) and of a dilation
KERNEL_BITS = 6


class ConvConfigLayout(data.StructLayout):
    """The operation's registers: cube and kernel sizes, strides, dilation, padding, the
    post-processing, and three values the register decode derives: the group counts
    (``ceil(C / atomic_c)``, ``ceil(K / atomic_k)``) and the stripe length
    (:func:`stripe_points`)."""

    def __init__(self) -> None:
        size = unsigned(SIZE_BITS)
        super().__init__({
            "c": size, "h": size, "w": size, "k": size, "r": KERNEL_BITS, "s": KERNEL_BITS,
            "stride_x": 4, "stride_y": 4, "dilation_x": KERNEL_BITS, "dilation_y": KERNEL_BITS,
            "pad_left": 5, "pad_top": 5, "out_w": size, "out_h": size,
            "channel_groups": size, "kernel_groups": size, "stripe_points": size,
            "pad_value": signed(8),
            "post": ConfigLayout(),
        })


def stripe_points(out_points: int, points: int) -> int:
    """Output points per stripe: at most ``points`` (the CACC's entries), and balanced so
    that no stripe is short: a short stripe's rounds would wait for the next kernels."""
    stripes = -(-out_points // points)
    return -(-out_points // stripes)


def operand_layout(cfg: HwConfig) -> data.StructLayout:
    """The SDP operands of one kernel group, per output channel (lane): X1's and X2's ALU
    and multiplier operands, as SDP_RDMA delivers them in per-kernel mode."""
    lane = data.ArrayLayout(signed(16), cfg.atomic_k)
    return data.StructLayout({"alu1": lane, "mul1": lane, "alu2": lane, "mul2": lane})


def operand_write_layout(cfg: HwConfig, entries: int) -> data.StructLayout:
    return data.StructLayout({"addr": range(entries), "data": operand_layout(cfg), "en": 1})


def write_layout(cfg: HwConfig, entries: int, groups: int = 1) -> data.StructLayout:
    """A memory write port: one entry of ``atomic_c`` lanes at ``addr``, in ``groups`` lane
    groups each written when its ``en`` bit is set."""
    return data.StructLayout({"addr": range(entries),
                              "data": data.ArrayLayout(signed(8), cfg.atomic_c), "en": groups})


class ConvCore(wiring.Component):
    """See the module docstring.

    Attributes
    ----------
    cfg : ``In(ConvConfigLayout())``
    start : ``In(1)``, a one-cycle pulse; ``busy`` : ``Out(1)`` until every atom is sent
    feature_write, weight_write : ``In`` address / data / enable of the memories (the
    feature entries in lane groups of one memory atom)
    feature_level, weight_level : ``In``: entries of the feature / weight memory written
    so far (every entry below the level is complete); the sequencer reads an entry only
    below it, so the input and the weights may stream in while the convolution runs
    out : ``Out(stream.Signature(ResultLayout(cfg)))``
    """

    def __init__(self, cfg: HwConfig, points: int = 16, feature_entries: int = 2048,
                 weight_entries: int = 2048, operand_entries: int = 64) -> None:
        self.hw, self.points = cfg, points
        self.feature_entries, self.weight_entries = feature_entries, weight_entries
        self.operand_entries = operand_entries
        super().__init__({
            "cfg": In(ConvConfigLayout()),
            "start": In(1),
            "busy": Out(1),
            "feature_write": In(write_layout(cfg, feature_entries,
                                             cfg.atomic_c // cfg.atom_size)),
            "weight_write": In(write_layout(cfg, weight_entries)),
            "feature_level": In(range(feature_entries + 1)),
            "weight_level": In(range(weight_entries + 1)),
            "operand_write": In(operand_write_layout(cfg, operand_entries)),
            "out": Out(stream.Signature(ResultLayout(cfg))),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        hw, cfg = self.hw, self.cfg
        n_c, n_k = hw.atomic_c, hw.atomic_k
        m.submodules.cmac = cmac = Cmac(hw, shadow=True)
        m.submodules.cacc = cacc = Accumulator(hw, self.points)
        m.submodules.post = post = PostProcessor(hw)
        atom = data.ArrayLayout(signed(8), n_c)
        m.submodules.fmem = fmem = memory.Memory(shape=atom, depth=self.feature_entries,
                                                 init=[])
        m.submodules.wmem = wmem = memory.Memory(shape=atom, depth=self.weight_entries,
                                                 init=[])
        for mem, port in ((fmem, self.feature_write), (wmem, self.weight_write)):
            wr = mem.write_port(granularity=hw.atom_size if mem is fmem else None)
            m.d.comb += [wr.addr.eq(port.addr), wr.data.eq(port.data), wr.en.eq(port.en)]
        f_rd, w_rd = fmem.read_port(), wmem.read_port()

        total = Signal(2 * SIZE_BITS)
        m.d.comb += total.eq(cfg.out_w * cfg.out_h)
        running = Signal()
        rounds_loaded = Signal(32)        # rounds whose kernels are all in the shadow bank
        rounds_started = Signal(32)       # rounds whose first atom (the swap) was accepted

        # ---- the kernel loader: the next round's kernels into the shadow bank --------------
        # A round loads ``atomic_k`` kernels, but in the last kernel group only its
        # ``k_last`` real ones: the others are loaded as zeros (masked beats) in the first
        # round of each stripe and stay zero in the shadow bank, which no later beat of the
        # stripe overwrites.
        lw = _Rounds(m, "load", cfg, total, self.points)
        k = Signal(range(n_k))
        k_last = Signal(range(n_k + 1))
        m.d.comb += k_last.eq((cfg.k - 1)[:n_k.bit_length() - 1] + 1)
        last_kg = Signal()
        m.d.comb += last_kg.eq(lw.kg == cfg.kernel_groups - 1)
        kernels = Signal(range(n_k + 1))    # beats of this round
        m.d.comb += kernels.eq(Mux(last_kg & ~lw.first_round, k_last, n_k))
        load_round = Signal(32)
        loading = Signal()                # the loader has rounds left
        # the beat waiting for the MAC array: its kernel, round, whether it is zero and
        # whether it is its round's last
        w_valid, w_kernel = Signal(), Signal(range(n_k))
        w_round, w_zero, w_last = Signal(32), Signal(), Signal()
        w_accepted = Signal()
        m.d.comb += w_accepted.eq(cmac.weight.valid & cmac.weight.ready)
        w_free = Signal()
        m.d.comb += w_free.eq(~w_valid | w_accepted)
        w_fire = Signal()
        w_addr = Signal(range(self.weight_entries))
        m.d.comb += w_addr.eq((((lw.kg * cfg.channel_groups + lw.cg) * cfg.r + lw.r)
                               * cfg.s + lw.s) * n_k + k)
        # a round's kernels are read while the round before them waits in the shadow bank,
        # and enter it with (or after) that round's swap
        m.d.comb += w_fire.eq(loading & w_free & (load_round <= rounds_started + 1)
                              & (w_addr < self.weight_level))
        m.d.comb += [w_rd.en.eq(w_fire), w_rd.addr.eq(w_addr)]
        with m.If(w_free):
            m.d.sync += w_valid.eq(w_fire)
            with m.If(w_fire):
                m.d.sync += [w_kernel.eq(k), w_round.eq(load_round),
                             w_zero.eq(last_kg & (k >= k_last)), w_last.eq(k == kernels - 1)]
        with m.If(w_fire):
            m.d.sync += k.eq(k + 1)
            with m.If(k == kernels - 1):
                m.d.sync += [k.eq(0), load_round.eq(load_round + 1)]
                lw.advance(m, loading)
        with m.If(w_accepted & w_last):
            m.d.sync += rounds_loaded.eq(rounds_loaded + 1)

        # ---- the atom sender: one atom per point of the stripe and round ------------------
        sd = _Rounds(m, "send", cfg, total, self.points)
        p = Signal(range(self.points))
        oy, ox = Signal(SIZE_BITS), Signal(SIZE_BITS)
        send_round = Signal(32)
        d_valid, d_pad, d_mask = Signal(), Signal(), Signal(n_c)
        d_point, d_first, d_last, d_swap = (Signal(range(self.points)), Signal(), Signal(),
                                            Signal())
        # a round's swap atom waits in the sender's register until the round's last kernel
        # entered the shadow bank in an earlier cycle
        d_allowed = Signal()
        m.d.comb += d_allowed.eq(~d_swap | (rounds_started < rounds_loaded))
        d_free = Signal()
        m.d.comb += d_free.eq(~d_valid | (d_allowed & cmac.data.ready))
        iy = Signal(signed(2 * SIZE_BITS + 2))
        ix = Signal(signed(2 * SIZE_BITS + 2))
        m.d.comb += [iy.eq(oy * cfg.stride_y + sd.r * cfg.dilation_y - cfg.pad_top),
                     ix.eq(ox * cfg.stride_x + sd.s * cfg.dilation_x - cfg.pad_left)]
        inside = Signal()
        m.d.comb += inside.eq((iy >= 0) & (iy < cfg.h) & (ix >= 0) & (ix < cfg.w))
        # the address in the memory's width: exact for a pixel inside the cube (the
        # operation fits the memory), and only those are read
        f_addr = Signal(range(self.feature_entries))
        m.d.comb += f_addr.eq((sd.cg * cfg.h + iy) * cfg.w + ix)
        # an atom is read once its round's kernels are loaded or loading, and its pixel is
        # padding or in memory
        d_fire = Signal()
        m.d.comb += d_fire.eq(running & d_free & (send_round <= rounds_loaded)
                              & (~inside | (f_addr < self.feature_level)))
        m.d.comb += [f_rd.en.eq(d_fire), f_rd.addr.eq(f_addr)]
        remaining = Signal(signed(SIZE_BITS + 2))
        m.d.comb += remaining.eq(cfg.c - sd.cg * n_c)
        mask = Signal(n_c)
        m.d.comb += [mask[i].eq(remaining > i) for i in range(n_c)]
        with m.If(d_free):
            m.d.sync += d_valid.eq(d_fire)
            with m.If(d_fire):
                m.d.sync += [d_pad.eq(~inside), d_mask.eq(mask), d_point.eq(p),
                             d_first.eq(sd.first_round), d_last.eq(sd.last_round),
                             d_swap.eq(p == 0)]
        with m.If(d_fire):
            with m.If(ox == cfg.out_w - 1):
                m.d.sync += [ox.eq(0), oy.eq(oy + 1)]
            with m.Else():
                m.d.sync += ox.eq(ox + 1)
            m.d.sync += p.eq(p + 1)
            with m.If(p == sd.in_stripe - 1):            # the round is over
                m.d.sync += [p.eq(0), send_round.eq(send_round + 1)]
                last_of_stripe = sd.advance(m, running)
                # the next round starts at the stripe's first point, or past its last
                with m.If(last_of_stripe):
                    m.d.sync += [sd.stripe_y.eq(Mux(ox == cfg.out_w - 1, oy + 1, oy)),
                                 sd.stripe_x.eq(Mux(ox == cfg.out_w - 1, 0, ox + 1)),
                                 oy.eq(Mux(ox == cfg.out_w - 1, oy + 1, oy)),
                                 ox.eq(Mux(ox == cfg.out_w - 1, 0, ox + 1))]
                    with m.If(sd.stripe + sd.in_stripe >= total):   # a new kernel group
                        m.d.sync += [sd.stripe_y.eq(0), sd.stripe_x.eq(0), oy.eq(0), ox.eq(0)]
                with m.Else():
                    m.d.sync += [oy.eq(sd.stripe_y), ox.eq(sd.stripe_x)]
        with m.If(cmac.data.valid & cmac.data.ready & cmac.data.payload.swap):
            m.d.sync += rounds_started.eq(rounds_started + 1)

        with m.If(self.start & ~running):
            m.d.sync += [running.eq(1), loading.eq(1), k.eq(0), p.eq(0), oy.eq(0), ox.eq(0),
                         load_round.eq(0), send_round.eq(0), rounds_loaded.eq(0),
                         rounds_started.eq(0)]
            lw.reset(m)
            sd.reset(m)
        m.d.comb += self.busy.eq(running | d_valid | loading | w_valid)

        # ---- into the MAC array ------------------------------------------------------
        m.d.comb += [
            # a beat of the round after the waiting one enters with that round's swap
            cmac.weight.valid.eq(w_valid & (w_round <= rounds_started
                                            + (cmac.data.valid & d_swap))),
            cmac.weight.payload.data.eq(w_rd.data),
            cmac.weight.payload.mask.eq(Mux(w_zero, 0, (1 << n_c) - 1)),
            cmac.weight.payload.kernel.eq(w_kernel),
            cmac.data.valid.eq(d_valid & d_allowed),
            cmac.data.payload.mask.eq(d_mask),
            cmac.data.payload.swap.eq(d_swap),
        ]
        for i in range(n_c):
            m.d.comb += cmac.data.payload.data[i].eq(Mux(d_pad, cfg.pad_value, f_rd.data[i]))

        # the point and its place in the sum travel beside the MAC pipeline
        m.submodules.meta = meta = fifo.SyncFIFOBuffered(
            width=len(d_point) + 2, depth=pipeline_depth(hw) + 2)
        m.d.comb += [meta.w_data.eq(d_point | (d_first << len(d_point))
                                    | (d_last << (len(d_point) + 1))),
                     meta.w_en.eq(cmac.data.valid & cmac.data.ready)]
        m.d.comb += [
            cacc.psum.payload.data.eq(cmac.result.payload),
            cacc.psum.payload.point.eq(meta.r_data[:len(d_point)]),
            cacc.psum.payload.first.eq(meta.r_data[len(d_point)]),
            cacc.psum.payload.last.eq(meta.r_data[len(d_point) + 1]),
            cacc.psum.valid.eq(cmac.result.valid & meta.r_rdy),
            cmac.result.ready.eq(cacc.psum.ready & meta.r_rdy),
            meta.r_en.eq(cmac.result.valid & cmac.result.ready),
        ]
        # ---- CACC -> SDP -> out ------------------------------------------------------
        m.d.comb += post.cfg.eq(cfg.post)
        if post.lanes == n_k:
            m.d.comb += [post.inp.valid.eq(cacc.sum.valid), cacc.sum.ready.eq(post.inp.ready)]
            m.d.comb += [post.inp.payload.acc[i].eq(cacc.sum.payload[i]) for i in range(n_k)]
        else:
            # SDP takes a beat every n_k / lanes cycles, the CACC empties a stripe at once:
            # a stripe of sums waits here (CACC's delivery buffer) while the MAC array
            # goes on with the next stripe
            sums = cacc.sum.payload.as_value()
            m.submodules.dbuf = dbuf = fifo.SyncFIFOBuffered(width=len(sums), depth=self.points)
            m.d.comb += [dbuf.w_data.eq(sums), dbuf.w_en.eq(cacc.sum.valid),
                         cacc.sum.ready.eq(dbuf.w_rdy),
                         post.inp.valid.eq(dbuf.r_rdy), dbuf.r_en.eq(post.inp.ready),
                         post.inp.payload.acc.as_value().eq(dbuf.r_data)]
        # the per-kernel SDP operands of the kernel group whose sums enter SDP
        m.submodules.omem = omem = memory.Memory(shape=operand_layout(hw),
                                                 depth=self.operand_entries, init=[])
        ow_port = omem.write_port()
        m.d.comb += [ow_port.addr.eq(self.operand_write.addr),
                     ow_port.data.eq(self.operand_write.data),
                     ow_port.en.eq(self.operand_write.en)]
        o_rd = omem.read_port(domain="comb")
        out_kg, out_point = Signal(SIZE_BITS), Signal(2 * SIZE_BITS)
        with m.If(self.start):
            m.d.sync += [out_kg.eq(0), out_point.eq(0)]
        with m.Elif(post.inp.valid & post.inp.ready):
            m.d.sync += out_point.eq(out_point + 1)
            with m.If(out_point == total - 1):
                m.d.sync += [out_point.eq(0), out_kg.eq(out_kg + 1)]
        m.d.comb += o_rd.addr.eq(out_kg)
        for name in ("alu1", "mul1", "alu2", "mul2"):
            m.d.comb += [getattr(post.inp.payload, name)[i].eq(getattr(o_rd.data, name)[i])
                         for i in range(n_k)]
        wiring.connect(m, post.out, wiring.flipped(self.out))
        return m


class _Rounds:
    """The round counters one generator walks: kernel group, stripe of output points,
    channel group, kernel tap; ``advance`` steps to the next round."""

    def __init__(self, m: Module, name: str, cfg, total: Signal, points: int) -> None:
        self.cfg, self.total = cfg, total
        self.kg = Signal(SIZE_BITS, name=f"{name}_kg")
        self.cg = Signal(SIZE_BITS, name=f"{name}_cg")
        self.r = Signal(KERNEL_BITS, name=f"{name}_r")
        self.s = Signal(KERNEL_BITS, name=f"{name}_s")
        self.stripe = Signal(2 * SIZE_BITS, name=f"{name}_stripe")     # its first point
        self.stripe_y = Signal(SIZE_BITS, name=f"{name}_stripe_y")
        self.stripe_x = Signal(SIZE_BITS, name=f"{name}_stripe_x")
        self.in_stripe = Signal(range(points + 1), name=f"{name}_points")
        size = Mux(cfg.stripe_points > points, points, cfg.stripe_points)
        m.d.comb += self.in_stripe.eq(Mux(total - self.stripe > size, size,
                                          total - self.stripe))
        self.first_round = (self.cg == 0) & (self.r == 0) & (self.s == 0)
        self.last_round = ((self.cg == cfg.channel_groups - 1) & (self.r == cfg.r - 1)
                           & (self.s == cfg.s - 1))

    def reset(self, m: Module) -> None:
        m.d.sync += [self.kg.eq(0), self.cg.eq(0), self.r.eq(0), self.s.eq(0),
                     self.stripe.eq(0), self.stripe_y.eq(0), self.stripe_x.eq(0)]

    def advance(self, m: Module, active: Signal) -> Value:
        """Step to the next round (clearing ``active`` after the last); returns whether
        this round was the last of its stripe."""
        cfg = self.cfg
        with m.If(self.s != cfg.s - 1):
            m.d.sync += self.s.eq(self.s + 1)
        with m.Elif(self.r != cfg.r - 1):
            m.d.sync += [self.s.eq(0), self.r.eq(self.r + 1)]
        with m.Elif(self.cg != cfg.channel_groups - 1):
            m.d.sync += [self.s.eq(0), self.r.eq(0), self.cg.eq(self.cg + 1)]
        with m.Else():                                  # the stripe is over
            m.d.sync += [self.s.eq(0), self.r.eq(0), self.cg.eq(0)]
            with m.If(self.stripe + self.in_stripe < self.total):
                m.d.sync += self.stripe.eq(self.stripe + self.in_stripe)
            with m.Else():                              # the kernel group is over
                m.d.sync += self.stripe.eq(0)
                with m.If(self.kg == cfg.kernel_groups - 1):
                    m.d.sync += active.eq(0)
                with m.Else():
                    m.d.sync += self.kg.eq(self.kg + 1)
        return self.last_round
