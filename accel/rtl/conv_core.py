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
once per stripe, as zeros).

For timing, nothing is multiplied per atom: the weight address counts up
(back to the kernel group's first entry for each stripe), and the pixel and
its feature address are running sums stepped by the strides, the dilations
and their products with ``W``, taken in the ``PREP`` cycles after ``start``.
The two generators wait for each other on small difference counters rather
than by comparing round numbers.  The atom sender's generator runs ahead of
the feature memory through two stages (the address summed, the pixel checked
against the cube) into a queue it holds credits for, so the MAC array's
back-pressure (a registered credit check, :mod:`accel.rtl.cmac`) never
reaches the counters.  The CACC adds the
partial sums up per point and hands each finished point to the
post-processing pipeline (:mod:`accel.rtl.postproc`), whose int8 beats leave
on ``out`` in the same order: kernel group, then point.

The registers arrive on ``cfg`` (constant from ``start`` until the last
output; the CSB register file drives them in the full engine).  X1/X2
operands come from the registers, or (``ALU_SRC``/``MUL_SRC`` = memory) per
output channel from the operand memory, one entry per kernel group, as
SDP_RDMA delivers them in per-kernel mode (``operand_write``); the entry is
read from block RAM into a register, and SDP takes no beat in the two cycles
after the kernel group changes.  The round counters keep flags for "at the
last value" (set as they move), so the generators decide from flip-flops.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from accel.config import HwConfig
from accel.rtl.cacc import Accumulator
from accel.rtl.cmac import Cmac, capacity, registered_multiply, use_ecp5_dsp
from accel.rtl.credits import CountedFIFO, credit_flags, credit_room
from accel.rtl.memories import NO_COLLISION
from accel.rtl.postproc import ConfigLayout, PostProcessor, ResultLayout

#: bits of a size the registers give as a 13-bit field plus one (cube width, height and
#: channels, kernels, output width and height: up to 8192)
SIZE_BITS = 14
#: bits of a kernel width or height (5-bit field plus one: up to 32) and of a dilation
KERNEL_BITS = 6
#: cycles from ``start`` to the first read: the operation's products are taken meanwhile
#: (their operands registered at start, the multipliers' input and output registers the
#: two cycles after, the products copied on the cycle after that, what follows from them
#: the cycle after that)
PREP = 5
#: Entries of the FIFO between the MAC array and CACC: a beat a cycle flows through it
#: with its credit given back from a register, a cycle after the beat leaves.
PSUM_BUFFER = 4
#: the sender's queue of atoms between its generator and the feature memory (enough for
#: the generator's credit loop to send an atom every cycle)
QUEUE = 8
#: groups of registers the atom generator's fire steps, each with its own copies of the
#: flags the fire comes from: the point's, the round's (tap, channel group, stripe), the
#: round counters'
FIRE_GROUPS = 3
#: the weight beats read, waiting for the MAC array: a beat's credit comes back five
#: cycles after its read (memory, the read data's register, FIFO, array, the credit's
#: register), so five keep a beat a cycle flowing
BEATS = 5


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
                 weight_entries: int = 2048, operand_entries: int = 64,
                 ecp5_dsp: bool | None = None) -> None:
        self.hw, self.points, self.ecp5_dsp = cfg, points, ecp5_dsp
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
        m.submodules.cmac = cmac = Cmac(hw, shadow=True, ecp5_dsp=self.ecp5_dsp)
        m.submodules.cacc = cacc = Accumulator(hw, self.points)
        m.submodules.post = post = PostProcessor(hw, ecp5_dsp=self.ecp5_dsp, valid_copies=True)
        atom = data.ArrayLayout(signed(8), n_c)
        m.submodules.fmem = fmem = memory.Memory(shape=atom, depth=self.feature_entries,
                                                 init=[])
        m.submodules.wmem = wmem = memory.Memory(shape=atom, depth=self.weight_entries,
                                                 init=[])
        for mem, port in ((fmem, self.feature_write), (wmem, self.weight_write)):
            wr = mem.write_port(granularity=hw.atom_size if mem is fmem else None)
            m.d.comb += [wr.addr.eq(port.addr), wr.data.eq(port.data), wr.en.eq(port.en)]
        f_rd, w_rd = fmem.read_port(), wmem.read_port()

        # ---- the operation's constants, taken at start (cfg holds until the last output)
        # and in the PREP cycles after it, so that no product is computed per atom
        prep = Signal(range(PREP + 1))
        # the sender's generator has points left: a copy per group of registers it steps
        # (``keep``, see ``fires`` below; the first is the flag for everything else)
        runs = [Signal(name=f"running_{i}", attrs={"keep": 1}) for i in range(FIRE_GROUPS)]
        running = runs[0]
        loading = Signal()                # the loader has rounds left
        # the generators start in the last cycle of PREP: a flag per generator, a register
        # each (``keep``; as one net from a comparison, the start of every counter was among
        # the build's most congested)
        begin = {g: Signal(name=f"begin_{g}", attrs={"keep": 1}) for g in ("load", "send")}
        m.d.sync += [flag.eq(prep == 2) for flag in begin.values()]     # PREP >= 5
        with m.If(prep != 0):
            m.d.sync += prep.eq(prep - 1)
        a_bits = (self.feature_entries - 1).bit_length()
        total = Signal(2 * SIZE_BITS)               # output points
        total_m1 = Signal(2 * SIZE_BITS)
        size = Signal(range(self.points + 1))       # points of a full stripe
        surface = Signal(a_bits)                    # h * w: the entries of a channel group
        row_step = Signal(a_bits)                   # stride_y * w
        tap_row_step = Signal(a_bits)               # dilation_y * w
        top_rows = Signal(a_bits)                   # pad_top * w
        k_last = Signal(range(n_k + 1))             # real kernels of the last kernel group
        # Each product has its own registers for its operands, taken each cycle, then the
        # multiplier's input and output registers (on ECP5 the DSP block's own:
        # :func:`ecp5_multiply`), and its value moves on to where it is used a cycle later.
        # (From the register file's flip-flops across the die straight into a multiplier
        # was 7.3 ns; with the width's register shared by four multipliers and the product
        # going straight to its users, 12.0 ns: the 8x8 build's path at 83.22 MHz; with the
        # operands' and the product's registers in fabric, their routes into and out of
        # the DSP column and the block's 3.9 ns, 10.7 ns: the 8x8 build's at 93.12 MHz.)
        dsp = use_ecp5_dsp(self.ecp5_dsp, platform)
        products = [(total, ("out_w", "out_h")), (surface, ("h", "w")),
                    (row_step, ("stride_y", "w")), (tap_row_step, ("dilation_y", "w")),
                    (top_rows, ("pad_top", "w"))]
        starting = Signal()
        m.d.comb += starting.eq(self.start & (prep == 0) & ~running)
        with m.If(starting):
            m.d.sync += [prep.eq(PREP),
                         size.eq(Mux(cfg.stripe_points > self.points, self.points,
                                     cfg.stripe_points)),
                         k_last.eq((cfg.k - 1)[:n_k.bit_length() - 1] + 1)]
        for result, names in products:
            a, b = (Signal.like(getattr(cfg, name), name=f"factor_{result.name}_{name}",
                                attrs={"keep": 1}) for name in names)
            # taken every cycle (``cfg`` holds from start, so they hold from the cycle after
            # it): through an enable, ``starting`` reached them across the die, the 8x8
            # build's path at 71.57 MHz (8.2 ns of routing into a factor of pad_top * w)
            m.d.sync += [a.eq(getattr(cfg, names[0])), b.eq(getattr(cfg, names[1]))]
            # the product is there two cycles after its operands
            product = Signal(2 * SIZE_BITS, name=f"product_{result.name}")
            registered_multiply(m, f"mult_{result.name}", a, b, product, dsp)
            with m.If(prep == PREP - 2):
                m.d.sync += result.eq(product)
        total_m2 = Signal(2 * SIZE_BITS)            # (for the output count's last flag)
        with m.If(prep == PREP - 3):
            m.d.sync += [total_m1.eq(total - 1), total_m2.eq(total - 2)]
        bounds = _Bounds(m, cfg)
        stripes = _Stripes(m, total, size)

        # The generators wait for each other by round.  Their differences stay small, so
        # small counters hold them instead of round numbers to compare:
        # loader: rounds it may still read ahead (2 + rounds started - rounds read)
        load_room = Signal(range(3))
        # sender: rounds it may still send (1 + rounds loaded - rounds sent)
        send_room = Signal(range(4))
        # swap: rounds loaded - rounds started (a swap waits until its round is loaded)
        loaded_ahead = Signal(range(3))

        # ---- the kernel loader: the next round's kernels into the shadow bank --------------
        # Weight entries are read in order: a round's kernels one after the other, the
        # rounds of a stripe (channel group, tap) in order, every stripe of a kernel group
        # from the group's first entry again.  A round loads ``atomic_k`` kernels, but in
        # the last kernel group only its ``k_last`` real ones: the others are loaded as
        # zeros (masked beats) in the first round of each stripe and stay zero in the
        # shadow bank, which no later beat of the stripe overwrites.
        lw = _Rounds(m, "load", bounds, stripes)
        k = Signal(range(n_k))
        kernels_m1 = Signal(range(n_k))   # beats of this round - 1
        m.d.comb += kernels_m1.eq(Mux(lw.last_kg & ~lw.first_round, k_last - 1, n_k - 1))
        # k == kernels_m1 as a flag worked out as k moves: it gates everything a round's
        # end steps (the comparison chained into the fire's fanout otherwise)
        k_end = Signal()
        w_addr, w_base, w_group = (Signal(range(self.weight_entries)) for _ in range(3))
        # The beats read wait for the MAC array in a small FIFO the loader holds credits
        # for, so that the array's handshake (its ready, a round's swap) ends at the FIFO's
        # read side instead of running on into the fire's fanout (the weight memory's read
        # enable, the address and round counters).  A beat: its kernel data, whether it is
        # zero, whether it is its round's last, and its round's parity.  A beat enters the
        # array once its round is the one the shadow bank takes, its parity that of the
        # rounds started (a round's beats all enter before its own swap, so a waiting beat's
        # round is the shadow bank's or the one after it), or with the swap that frees
        # the bank (waiting a cycle more cost NVIDIA's dilation trace, a few points per
        # round of eight beats, 94 cycles in 1,715).
        beat = data.StructLayout({"data": atom, "kernel": range(n_k), "zero": 1, "last": 1,
                                  "parity": 1})
        m.submodules.beats = beats = fifo.SyncFIFO(width=beat.size, depth=BEATS)
        head_beat = Signal(beat)
        m.d.comb += head_beat.eq(beats.r_data)
        w_meta = Signal(beat)             # the beat read now, but for its data
        w_read = Signal()                 # ... arrives from the memory this cycle
        m.d.sync += w_read.eq(0)
        read_parity, started_parity = Signal(), Signal()
        w_accepted = Signal()
        m.d.comb += w_accepted.eq(cmac.weight.valid & cmac.weight.ready)
        swap_now = Signal()               # a round's swap atom enters the MAC array
        w_fire = Signal()
        # whether the entry at ``w_addr`` is in the weight memory, from flags a cycle old
        # (the level comparison's carry chain into the fire was the 8x8 build's critical
        # path at 67.46 MHz): ``w_in`` compares the address with the level, valid while the
        # address stays; ``w_in_far`` the address ``n_k`` on, valid after one move too (a
        # beat moves the address on by at most ``n_k``, over the last kernel group's missing
        # kernels, or back).  The level only grows while the loader runs.
        w_in, w_in_far, w_moved = Signal(), Signal(), Signal()
        m.d.sync += [w_in.eq(w_addr < self.weight_level),
                     w_in_far.eq(w_addr + n_k < self.weight_level),
                     w_moved.eq(w_fire | begin["load"])]
        beat_room = credit_room(m, BEATS, w_fire, w_accepted, name="beat_credits",
                                late_give=True)
        m.d.comb += w_fire.eq(loading & beat_room & (load_room != 0)
                              & (w_in_far | (w_in & ~w_moved)))
        m.d.comb += [w_rd.en.eq(w_fire), w_rd.addr.eq(w_addr)]
        w_round_read = w_fire & k_end
        with m.If(w_fire):
            m.d.sync += [w_read.eq(1), w_meta.kernel.eq(k),
                         w_meta.zero.eq(lw.last_kg & (k >= k_last)), w_meta.last.eq(k_end),
                         w_meta.parity.eq(read_parity),
                         k.eq(k + 1), w_addr.eq(w_addr + 1), k_end.eq(k + 1 == kernels_m1)]
            with m.If(k_end):
                # the next round's length: a stripe's first round loads every kernel, the
                # others of the last kernel group its real ones
                m.d.sync += [k_end.eq(Mux(lw.last_kg & ~lw.last_round, k_last == 1, n_k == 1)),
                             read_parity.eq(~read_parity)]
                # the next round's entries follow this one's in the kernel group; a stripe
                # starts again at the group's first, and the next group follows the last
                m.d.sync += [k.eq(0), w_addr.eq(w_base + n_k), w_base.eq(w_base + n_k)]
                with m.If(lw.last_round & ~lw.last_stripe):
                    m.d.sync += [w_addr.eq(w_group), w_base.eq(w_group)]
                with m.If(lw.last_round & lw.last_stripe):
                    m.d.sync += w_group.eq(w_base + n_k)
                lw.advance(m, loading)
        # the read data into a register first (from the block RAMs' outputs, 5.8 ns after
        # the clock, through their multiplexer across the die into the FIFO was the 8x8
        # build's path at 83.65 MHz), the beat's other fields and its valid along with it
        w_data, w_in_reg, w_meta_reg = Signal(atom), Signal(), Signal(beat)
        m.d.sync += [w_data.eq(w_rd.data), w_in_reg.eq(w_read), w_meta_reg.eq(w_meta)]
        beat_in = Signal(beat)
        m.d.comb += [beat_in.eq(w_meta_reg), beat_in.data.eq(w_data),
                     beats.w_en.eq(w_in_reg), beats.w_data.eq(beat_in)]
        loaded = w_accepted & head_beat.last

        # ---- the atom sender ----------------------------------------------------------
        # A generator walks the points and rounds with the input pixel and its feature
        # address as running sums (no multiplication per atom), two stages add them up and
        # check the pixel against the cube, and the atoms wait in a queue; the generator
        # runs while the queue has room promised (credits), so the MAC array's back-pressure
        # never reaches it.  The queue's head is read from the feature memory once its
        # round's kernels are loaded or loading and its pixel is padding or in memory.
        sd = _Rounds(m, "send", bounds, stripes)
        p = Signal(range(self.points))
        oy, ox = Signal(SIZE_BITS), Signal(SIZE_BITS)
        soy, sox = Signal(SIZE_BITS), Signal(SIZE_BITS)       # the stripe's first point
        # the point's pixel for tap (0, 0), (py, px) = (oy*SY - PAD_TOP, ox*SX - PAD_LEFT),
        # py * w as an address (modulo the memory's size: only addresses inside matter),
        # and the same of the stripe's first point
        coord = signed(SIZE_BITS + 6)
        py, px, spy, spx = Signal(coord), Signal(coord), Signal(coord), Signal(coord)
        a_py, sa_py = Signal(a_bits), Signal(a_bits)
        # the tap's offset (ty, tx) = (r*DY, s*DX); the channel group's first entry
        # cg*h*w, its row of the tap cg*h*w + ty*w, and the tap's entry (+ tx)
        ty, tx = Signal(2 * KERNEL_BITS), Signal(2 * KERNEL_BITS)
        # and less the cube's height and width, ty - H and tx - W, kept beside them: stage 1
        # then checks the pixel against the cube with one adder each (py + ty - H, two
        # chained, was the 8x8 build's path at 94.09 MHz)
        tap_less = signed(max(SIZE_BITS, 2 * KERNEL_BITS) + 1)
        ty_h, tx_w = Signal(tap_less, name="ty_less_h"), Signal(tap_less, name="tx_less_w")
        row_first_tap = [tx.eq(0), tx_w.eq(-bounds.w)]             # (r, 0)
        first_tap = [*row_first_tap, ty.eq(0), ty_h.eq(-bounds.h)]  # (0, 0)
        a_cg, a_row, a_tap = Signal(a_bits), Signal(a_bits), Signal(a_bits)
        c_left = Signal(signed(SIZE_BITS + 1))      # channels from this channel group on

        entry = data.StructLayout({"addr": a_bits, "pad": 1, "mask": n_c,
                                   "point": range(self.points), "first": 1, "last": 1,
                                   "swap": 1, "round_end": 1})
        m.submodules.queue = queue = fifo.SyncFIFOBuffered(width=entry.size, depth=QUEUE)
        # The generator fires when it runs and the queue has a credit: into the enables of
        # some 300 registers, the point's, the round's (tap, channel group, stripe) and the
        # round counters'.  Each of the three groups has its own copy of the running flag,
        # of the credit flag and of the round's-end flag, all registers placed beside their
        # group (as one net, the fire into the stripe's registers across the die was the
        # 8x8 build's path at 79.99 MHz, 12.5 ns).
        fires = [Signal(name=f"g_fire_{i}") for i in range(FIRE_GROUPS)]
        g_fire = fires[0]
        # p == sd.in_stripe_m1 (the round's last point) as a flag worked out as p moves:
        # the comparison was the 8x8 build's critical path at 84.20 MHz, into the enable of
        # every counter a round's end steps
        ends = [Signal(name=f"round_end_{i}", attrs={"keep": 1}) for i in range(FIRE_GROUPS)]
        round_end = ends[0]
        # the next point of the raster (within a stripe or past it)
        # whether ox (and the stripe's first sox) is the row's last: flags kept with them
        # (``ox == out_w_m1`` in front of the next point's multiplexers was the 8x8 build's
        # path at 90.96 MHz, into the stripe-start registers)
        ox_last, sox_last = Signal(), Signal()
        wrap = ox_last
        n_ox, n_oy = Mux(wrap, 0, ox + 1), Mux(wrap, oy + 1, oy)
        n_ox_last = Mux(wrap, bounds.out_w_one, ox == bounds.out_w_m2)
        n_px = Mux(wrap, -cfg.pad_left, px + cfg.stride_x)
        n_py = Mux(wrap, py + cfg.stride_y, py)
        n_apy = Mux(wrap, a_py + row_step, a_py)
        origin = [ox.eq(0), ox_last.eq(bounds.out_w_one), oy.eq(0), px.eq(-cfg.pad_left),
                  py.eq(-cfg.pad_top), a_py.eq(-top_rows)]
        stripe_origin = [sox.eq(0), sox_last.eq(bounds.out_w_one), soy.eq(0),
                         spx.eq(-cfg.pad_left), spy.eq(-cfg.pad_top), sa_py.eq(-top_rows)]
        # the point's registers
        with m.If(fires[0]):
            m.d.sync += [ox.eq(n_ox), ox_last.eq(n_ox_last), oy.eq(n_oy), px.eq(n_px),
                         py.eq(n_py), a_py.eq(n_apy), p.eq(p + 1),
                         *(end.eq(p + 1 == sd.in_stripe_m1) for end in ends)]
            with m.If(round_end):
                m.d.sync += [p.eq(0), *(end.eq(sd.next_round_single) for end in ends)]
                # the next round starts at the stripe's first point, or past its last (the
                # point and the stripe's first point select on registered copies of the
                # last-round and last-stripe flags: the flag's net to all their bits was
                # the 8x8 build's path at 85.85 MHz, 6.1 ns of routing, and with a copy of
                # it, the last-round AND of three flags, at 70.52 MHz)
                with m.If(~sd.last_round_copies[0]):
                    m.d.sync += [ox.eq(sox), ox_last.eq(sox_last), oy.eq(soy), px.eq(spx),
                                 py.eq(spy), a_py.eq(sa_py)]
                with m.Elif(sd.last_stripe_copies[0]):      # a new kernel group
                    m.d.sync += origin
        # the round's: the next tap or channel group, the stripe's first point
        with m.If(fires[1] & ends[1]):
            with m.If(sd.step_s):
                m.d.sync += [tx.eq(tx + cfg.dilation_x), tx_w.eq(tx_w + cfg.dilation_x),
                             a_tap.eq(a_tap + cfg.dilation_x)]
            with m.Elif(sd.step_r):
                m.d.sync += [*row_first_tap, ty.eq(ty + cfg.dilation_y),
                             ty_h.eq(ty_h + cfg.dilation_y),
                             a_row.eq(a_row + tap_row_step),
                             a_tap.eq(a_row + tap_row_step)]
            with m.Elif(sd.step_cg):
                m.d.sync += [*first_tap, a_cg.eq(a_cg + surface),
                             a_row.eq(a_cg + surface), a_tap.eq(a_cg + surface),
                             c_left.eq(c_left - n_c)]
            with m.Else():
                m.d.sync += [*first_tap, a_cg.eq(0), a_row.eq(0), a_tap.eq(0),
                             c_left.eq(cfg.c)]
            with m.If(sd.last_round_copies[1]):
                with m.If(~sd.last_stripe_copies[1]):
                    m.d.sync += [sox.eq(n_ox), sox_last.eq(n_ox_last), soy.eq(n_oy),
                                 spx.eq(n_px), spy.eq(n_py), sa_py.eq(n_apy)]
                with m.Else():
                    m.d.sync += stripe_origin
        # the round counters
        with m.If(fires[2] & ends[2]):
            sd.advance(m, runs)

        # stage 1: the pixel and the address's two halves
        s1_valid = Signal()
        s1 = Signal(entry)
        s1_a, s1_b = Signal(a_bits), Signal(a_bits)
        # the pixel (iy, ix), and iy - H, ix - W: stage 2 checks it against the cube by
        # their signs alone (four comparisons there were the conv core's critical path)
        s1_iy, s1_ix = Signal(coord), Signal(coord)
        s1_iy_h, s1_ix_w = Signal(signed(coord.width + 1)), Signal(signed(coord.width + 1))
        m.d.sync += [s1_valid.eq(g_fire), s1_a.eq(a_tap), s1_b.eq(a_py + px),
                     s1_iy.eq(py + ty), s1_ix.eq(px + tx),
                     s1_iy_h.eq(py + ty_h), s1_ix_w.eq(px + tx_w),
                     s1.mask.eq(Cat(c_left > i for i in range(n_c))), s1.point.eq(p),
                     s1.first.eq(sd.first_round), s1.last.eq(sd.last_round),
                     s1.swap.eq(p == 0), s1.round_end.eq(round_end)]
        # stage 2: the address, and whether the pixel is padding, into the queue
        s2_valid = Signal()
        s2 = Signal(entry)
        m.d.sync += [s2_valid.eq(s1_valid), s2.eq(s1), s2.addr.eq(s1_a + s1_b),
                     s2.pad.eq(s1_iy[-1] | ~s1_iy_h[-1] | s1_ix[-1] | ~s1_ix_w[-1])]
        m.d.comb += [queue.w_en.eq(s2_valid), queue.w_data.eq(s2)]

        # the queue's head moves into a register of its own (``head``) with a flag: is its
        # pixel padding or in the feature memory already.  The flag is worked out as the
        # entry moves and again each cycle it waits (the memory's level only grows, so a
        # comparison a cycle old holds): on the queue's output, the comparison's carry
        # chain ran on into the pop and the queue's read enable, the 8x8 build's critical
        # path at 79.55 MHz (12.6 ns).  From ``head`` into the feature memory; the atom
        # read (d_*) waits for the MAC.
        head, h_valid, h_ok = Signal(entry), Signal(), Signal()
        move = Signal()
        d_valid, d_pad, d_mask = Signal(), Signal(), Signal(n_c)
        d_point, d_first, d_last, d_swap = (Signal(range(self.points)), Signal(), Signal(),
                                            Signal())
        # a round's swap atom waits in the register until the round's last kernel entered
        # the shadow bank in an earlier cycle
        d_allowed = Signal()
        m.d.comb += d_allowed.eq(~d_swap | (loaded_ahead != 0))
        d_free = Signal()
        m.d.comb += d_free.eq(~d_valid | (d_allowed & cmac.data.ready))
        pop = Signal()
        m.d.comb += [pop.eq(h_valid & h_ok & d_free & (send_room != 0)),
                     move.eq(queue.r_rdy & (~h_valid | pop))]
        m.d.comb += [queue.r_en.eq(move), f_rd.en.eq(pop), f_rd.addr.eq(head.addr)]
        nxt = Signal(entry)
        m.d.comb += nxt.eq(queue.r_data)
        with m.If(move):
            m.d.sync += [head.eq(nxt), h_valid.eq(1),
                         h_ok.eq(nxt.pad | (nxt.addr < self.feature_level))]
        with m.Else():
            m.d.sync += h_ok.eq(head.pad | (head.addr < self.feature_level))
            with m.If(pop):
                m.d.sync += h_valid.eq(0)
        # an entry's credit comes back a cycle after it left the queue, from a register:
        # the credit count's adder is a cycle away from the head's handshake
        rooms = credit_flags(m, QUEUE, g_fire, move, copies=FIRE_GROUPS, late_give=True)
        m.d.comb += [fire.eq(run & room)
                     for fire, run, room in zip(fires, runs, rooms, strict=True)]
        with m.If(d_free):
            m.d.sync += d_valid.eq(pop)
            with m.If(pop):
                m.d.sync += [d_pad.eq(head.pad), d_mask.eq(head.mask), d_point.eq(head.point),
                             d_first.eq(head.first), d_last.eq(head.last),
                             d_swap.eq(head.swap)]
        m.d.comb += swap_now.eq(cmac.data.valid & d_swap)
        started = swap_now & cmac.data.ready

        # the rounds' differences
        m.d.sync += [load_room.eq(load_room - w_round_read + started),
                     send_room.eq(send_room + loaded - (pop & head.round_end)),
                     loaded_ahead.eq(loaded_ahead + loaded - started)]

        with m.If(started):
            m.d.sync += started_parity.eq(~started_parity)
        with m.If(begin["load"]):
            m.d.sync += [loading.eq(1), k.eq(0), k_end.eq(n_k == 1), w_addr.eq(0),
                         w_base.eq(0), w_group.eq(0), load_room.eq(2), loaded_ahead.eq(0),
                         read_parity.eq(0), started_parity.eq(0)]
            lw.reset(m)
        with m.If(begin["send"]):
            m.d.sync += [*(run.eq(1) for run in runs), p.eq(0),
                         *(end.eq(stripes.first_single) for end in ends),
                         *first_tap, a_cg.eq(0), a_row.eq(0), a_tap.eq(0), c_left.eq(cfg.c),
                         *origin, *stripe_origin, send_room.eq(1)]
            sd.reset(m)
        m.d.comb += self.busy.eq((prep != 0) | running | s1_valid | s2_valid | queue.r_rdy
                                 | h_valid | d_valid | loading | w_read | w_in_reg
                                 | beats.r_rdy)

        # ---- into the MAC array ------------------------------------------------------
        m.d.comb += [
            cmac.weight.valid.eq(beats.r_rdy
                                 & ((head_beat.parity == started_parity) | swap_now)),
            beats.r_en.eq(w_accepted),
            cmac.weight.payload.data.eq(head_beat.data),
            cmac.weight.payload.mask.eq(Mux(head_beat.zero, 0, (1 << n_c) - 1)),
            cmac.weight.payload.kernel.eq(head_beat.kernel),
            cmac.data.valid.eq(d_valid & d_allowed),
            cmac.data.payload.mask.eq(d_mask),
            cmac.data.payload.swap.eq(d_swap),
        ]
        for i in range(n_c):
            m.d.comb += cmac.data.payload.data[i].eq(Mux(d_pad, cfg.pad_value, f_rd.data[i]))

        # the point and its place in the sum travel beside the MAC pipeline
        m.submodules.meta = meta = fifo.SyncFIFOBuffered(
            width=len(d_point) + 2, depth=capacity(hw) + 1)
        m.d.comb += [meta.w_data.eq(d_point | (d_first << len(d_point))
                                    | (d_last << (len(d_point) + 1))),
                     meta.w_en.eq(cmac.data.valid & cmac.data.ready)]
        # the partial sums reach CACC through a small FIFO taken on credits: the MAC array's
        # output FIFO is emptied on a register, not on CACC's ready (which goes back
        # through both of its stages and, on a full build, was the conv core's critical
        # path into the enable of that FIFO's output register)
        psum = Signal(cacc.psum.payload.shape())
        m.submodules.psums = psums = fifo.SyncFIFO(width=len(psum.as_value()),
                                                   depth=PSUM_BUFFER)
        moved = Signal()
        m.d.comb += moved.eq(cmac.result.valid & meta.r_rdy & credit_room(
            m, PSUM_BUFFER, moved, psums.r_rdy & psums.r_en, name="psum_credits",
            late_give=True))                            # CACC's ready ends at a register
        m.d.comb += [
            psum.data.eq(cmac.result.payload),
            psum.point.eq(meta.r_data[:len(d_point)]),
            psum.first.eq(meta.r_data[len(d_point)]),
            psum.last.eq(meta.r_data[len(d_point) + 1]),
            cmac.result.ready.eq(moved), meta.r_en.eq(moved),
            psums.w_en.eq(moved), psums.w_data.eq(psum),
            cacc.psum.valid.eq(psums.r_rdy), cacc.psum.payload.eq(psums.r_data),
            psums.r_en.eq(cacc.psum.ready),
        ]
        # ---- CACC -> SDP -> out ------------------------------------------------------
        m.d.comb += post.cfg.eq(cfg.post)
        # the SDP operands of the kernel group in SDP: read from block RAM into a register,
        # two cycles after the kernel group changes (no beat enters SDP meanwhile)
        # (``ops_ok``: settled, a register of the next count, like every flag that decides
        # whether SDP takes a beat: the take enables a whole beat of registers)
        settle = Signal(range(3))
        if post.lanes == n_k:
            ops_ok = Signal(init=1)
            m.d.comb += [post.inp.valid.eq(cacc.sum.valid & ops_ok),
                         cacc.sum.ready.eq(post.inp.ready & ops_ok)]
            m.d.comb += [post.inp.payload.acc[i].eq(cacc.sum.payload[i]) for i in range(n_k)]
        else:
            # SDP takes a beat every n_k / lanes cycles, the CACC empties a stripe at once:
            # a stripe of sums waits here (CACC's delivery buffer) while the MAC array
            # goes on with the next stripe
            # (unbuffered: SDP's input registers take the sums from the memory's output, a
            # group's registers on their own enable; a buffered FIFO's output register took
            # a whole beat on one enable, routed in 7.1 ns, the conv core's critical path)
            sums = cacc.sum.payload.as_value()
            # (no checks of its own: the credits and ``filled`` keep count)
            m.submodules.dbuf = dbuf = CountedFIFO(width=len(sums), depth=self.points)
            # CACC's output is taken on credits for the buffer's entries (the buffer's own
            # w_rdy, a comparison of its level, was the start of the conv core's critical
            # path back through CACC's stages)
            d_taken = Signal()
            # whether SDP may take a beat: a register (the buffer's own flag, a comparison
            # of its level, was the 8x8 build's critical path at 70.39 MHz, into every
            # register of the beat, 14.2 ns; an AND of two registers, ops_ok's route into
            # the take at 82.73 MHz, 12.1 ns).  SDP takes a beat every n_k / lanes >= 2
            # cycles, so it is never ready in the cycle after a take: the flag need only be
            # right in cycles after none, where the level has not gone down and the settle
            # count has not restarted, and SDP's ready stays out of it (through the
            # level's adder into the flag it was the path at 86.38 MHz, 11.6 ns)
            filled, offered = Signal(range(self.points + 1)), Signal()
            d_given = dbuf.r_en & offered
            m.d.sync += filled.eq(filled + d_taken - d_given)
            m.d.comb += [cacc.sum.ready.eq(credit_room(m, self.points, d_taken, d_given,
                                                       name="sum_credits", late_give=True)),
                         d_taken.eq(cacc.sum.valid & cacc.sum.ready)]
            m.d.comb += [dbuf.w_data.eq(sums), dbuf.w_en.eq(d_taken),
                         post.inp.valid.eq(offered),
                         dbuf.r_en.eq(post.inp.ready & offered),
                         post.inp.payload.acc.as_value().eq(dbuf.r_data)]
        # the per-kernel SDP operands of the kernel group whose sums enter SDP
        # (written only before start, while the fetch brings the operands in; a read then
        # may return anything on the board, see NO_COLLISION: nothing uses it before the
        # settle cycles after start).  The write goes in from registers of its own here
        # (``keep``), a cycle after the fetch's: the fetch's address register straight into
        # the block RAM's port was the 8x8 build's path at 89.43 MHz (10.4 ns on that one
        # net).  The last kernel group's write lands the cycle the core starts (with the
        # fetch's ``ready``); the first read the datapath uses is two cycles later.
        omem = memory.Memory(shape=operand_layout(hw), depth=self.operand_entries, init=[])
        m.submodules[f"operands{NO_COLLISION}"] = omem
        ow_port = omem.write_port()
        ow = self.operand_write
        w_addr = Signal.like(ow.addr, name="operand_write_addr", attrs={"keep": 1})
        w_data = Signal.like(ow.data, name="operand_write_data", attrs={"keep": 1})
        w_en = Signal(name="operand_write_en", attrs={"keep": 1})
        m.d.sync += [w_addr.eq(ow.addr), w_data.eq(ow.data), w_en.eq(ow.en)]
        m.d.comb += [ow_port.addr.eq(w_addr), ow_port.data.eq(w_data), ow_port.en.eq(w_en)]
        o_rd = omem.read_port()
        ops = Signal(operand_layout(hw))
        m.d.sync += ops.eq(o_rd.data)
        out_kg, out_point = Signal(SIZE_BITS), Signal(2 * SIZE_BITS)
        # the kernel group's last beat into SDP, flagged a beat ahead (first in PREP's last
        # cycle, once total_m1 is there: the first sums reach SDP many cycles later)
        last_out = Signal()
        moved = post.inp.valid & post.inp.ready
        with m.If(self.start):
            m.d.sync += [out_kg.eq(0), out_point.eq(0)]
        with m.Elif(prep == 1):
            m.d.sync += last_out.eq(total_m1 == 0)
        with m.Elif(moved):
            # (compared before the increment: ``out_point + 1 == total_m1``, an adder into
            # an equality of 26 bits, was the netlist's deepest logic, 22 steps)
            m.d.sync += [out_point.eq(out_point + 1), last_out.eq(out_point == total_m2)]
            with m.If(last_out):
                m.d.sync += [out_point.eq(0), out_kg.eq(out_kg + 1), last_out.eq(total_m1 == 0)]
        settle_next = Signal.like(settle)
        m.d.comb += settle_next.eq(Mux(self.start | (moved & last_out), 2,
                                       Mux(settle != 0, settle - 1, 0)))
        m.d.sync += settle.eq(settle_next)
        if post.lanes == n_k:
            m.d.sync += ops_ok.eq(settle_next == 0)
        else:
            offer_next = (d_taken | (filled != 0)) & ~self.start & (settle <= 1)
            m.d.sync += offered.eq(offer_next)
            # SDP's copies of it, one per register group it enables (``keep``)
            offered_copies = [Signal(name=f"offered_{c}", attrs={"keep": 1})
                              for c in range(post.valid_copies)]
            m.d.sync += [copy.eq(offer_next) for copy in offered_copies]
            m.d.comb += post.inp_valid_copies.eq(Cat(offered_copies))
        m.d.comb += o_rd.addr.eq(out_kg)
        for name in ("alu1", "mul1", "alu2", "mul2"):
            m.d.comb += [getattr(post.inp.payload, name)[i].eq(getattr(ops, name)[i])
                         for i in range(n_k)]
        wiring.connect(m, post.out, wiring.flipped(self.out))
        return m


class _Bounds:
    """The last value of each counter the generators compare, as registers (cfg holds from
    ``start``; these follow a cycle later, within the core's PREP cycles)."""

    def __init__(self, m: Module, cfg) -> None:
        self.out_w_m1 = Signal(SIZE_BITS, name="out_w_m1")
        self.out_w_one = Signal(name="out_w_one")
        self.cg_m1 = Signal(SIZE_BITS, name="cg_m1")
        self.kg_m1 = Signal(SIZE_BITS, name="kg_m1")
        self.r_m1 = Signal(KERNEL_BITS, name="r_m1")
        self.s_m1 = Signal(KERNEL_BITS, name="s_m1")
        # the values before the last: a counter's next value is the last when the counter
        # is at these (compared before its increment: ``s + 1 == s_m1`` and the like, an
        # adder into an equality, were among the netlist's deepest logic)
        self.out_w_m2 = Signal(SIZE_BITS, name="out_w_m2")
        self.cg_m2 = Signal(SIZE_BITS, name="cg_m2")
        self.kg_m2 = Signal(SIZE_BITS, name="kg_m2")
        self.r_m2 = Signal(KERNEL_BITS, name="r_m2")
        self.s_m2 = Signal(KERNEL_BITS, name="s_m2")
        self.h, self.w = Signal(SIZE_BITS, name="cube_h"), Signal(SIZE_BITS, name="cube_w")
        # whether the tap and channel group counters have a single value
        self.s_one, self.r_one = Signal(name="s_one"), Signal(name="r_one")
        self.cg_one = Signal(name="cg_one")
        m.d.sync += [self.out_w_m1.eq(cfg.out_w - 1), self.out_w_one.eq(cfg.out_w == 1),
                     self.cg_m1.eq(cfg.channel_groups - 1),
                     self.kg_m1.eq(cfg.kernel_groups - 1), self.r_m1.eq(cfg.r - 1),
                     self.s_m1.eq(cfg.s - 1), self.h.eq(cfg.h), self.w.eq(cfg.w),
                     self.out_w_m2.eq(cfg.out_w - 2), self.cg_m2.eq(cfg.channel_groups - 2),
                     self.kg_m2.eq(cfg.kernel_groups - 2), self.r_m2.eq(cfg.r - 2),
                     self.s_m2.eq(cfg.s - 2),
                     self.s_one.eq(cfg.s == 1), self.r_one.eq(cfg.r == 1),
                     self.cg_one.eq(cfg.channel_groups == 1)]


class _Stripes:
    """What the round generators need of a kernel group's stripes, as registers of
    ``total`` (output points) and ``size`` (points of a full stripe), which hold from the
    core's PREP cycles on; each follows them a cycle later, within PREP (the generators
    start at its end)."""

    def __init__(self, m: Module, total: Signal, size: Signal) -> None:
        self.size = size
        self.first = Signal.like(size, name="first_stripe")        # its points
        self.first_is_last = Signal(name="first_stripe_is_last")
        self.first_single = Signal(name="first_stripe_single")     # it has one point
        self.second_single = Signal(name="second_stripe_single")   # the next has one
        self.size_one = Signal(name="stripe_size_one")
        # the group's first values of the generators' look-ahead counts (see _Rounds)
        self.rest1 = Signal(signed(2 * SIZE_BITS + 1), name="first_rest1")
        self.rest2_m1 = Signal(signed(2 * SIZE_BITS + 2), name="first_rest2_m1")
        # whether rest2_m1 < size, and whether rest2_m1 == 0
        self.rest2_short = Signal(name="first_rest2_short")
        self.rest2_zero = Signal(name="first_rest2_zero")
        fits = total <= size
        m.d.sync += [self.first.eq(Mux(fits, total, size)), self.first_is_last.eq(fits),
                     self.first_single.eq(Mux(fits, total == 1, size == 1)),
                     self.second_single.eq(Mux(total <= (size << 1), total == size + 1,
                                               size == 1)),
                     self.size_one.eq(size == 1),
                     self.rest1.eq(total - size), self.rest2_m1.eq(total - (size << 1) - 1),
                     self.rest2_short.eq(total <= size + (size << 1)),
                     self.rest2_zero.eq(total == (size << 1) + 1)]


class _Rounds:
    """The round counters one generator walks: kernel group, stripe of output points,
    channel group, kernel tap; ``advance`` steps to the next round.

    A kernel group's stripes have ``size`` points but its last, which has the points left.
    Of the points from the stripe's first to the group's last (``rest``) the generator
    keeps look-ahead counts, ``rest1`` = rest - size and ``rest2_m1`` = rest - 2 * size - 1
    (the next stripe is the group's last when it is negative), and from them, as the
    stripe starts, registers of its length (``in_stripe_m1`` + 1), whether it is the
    group's last, whether it has a single point and whether the next one has: the flag of
    a round's last point then takes its next value from flip-flops (``rest`` itself, its
    subtraction and comparison into that flag were the reduced build's critical path at
    97.51 MHz, 35 logic steps)."""

    def __init__(self, m: Module, name: str, bounds: _Bounds, stripes: _Stripes) -> None:
        self.bounds, self.stripes, self.size = bounds, stripes, stripes.size
        self.kg = Signal(SIZE_BITS, name=f"{name}_kg")
        self.cg = Signal(SIZE_BITS, name=f"{name}_cg")
        self.r = Signal(KERNEL_BITS, name=f"{name}_r")
        self.s = Signal(KERNEL_BITS, name=f"{name}_s")
        self.last_kg = Signal(name=f"{name}_last_kg")
        self.rest1 = Signal.like(stripes.rest1, name=f"{name}_rest1")
        self.rest2_m1 = Signal.like(stripes.rest2_m1, name=f"{name}_rest2_m1")
        # rest2_m1 < size and rest2_m1 == 0, flags kept with it (its comparison with size
        # in front of the next stripe's single-point flag was the 8x8 build's path at
        # 86.72 MHz, a carry chain of 34 steps)
        self.rest2_short = Signal(name=f"{name}_rest2_short")
        self.rest2_zero = Signal(name=f"{name}_rest2_zero")
        self.in_stripe_m1 = Signal.like(stripes.size, name=f"{name}_points_m1")
        self.single = Signal(name=f"{name}_single")          # in_stripe_m1 == 0
        self.next_single = Signal(name=f"{name}_next_single")   # of the stripe after it
        self.last_stripe = Signal(name=f"{name}_last_stripe")
        # copies of it and of ``last_round`` as registers, for wide registers' selects
        # (``keep``: the flag's net to all of them was a critical path, and then the three
        # flags' AND): they take the same values
        self.last_stripe_copies = [Signal(name=f"{name}_last_stripe_{i}", attrs={"keep": 1})
                                   for i in range(2)]
        self.last_round_copies = [Signal(name=f"{name}_last_round_{i}", attrs={"keep": 1})
                                  for i in range(2)]
        # whether each counter is at its last value: flags kept with the counters (a
        # comparison of registers as a counter moves), so the step decisions below are
        # gates of flip-flops, not comparisons
        self.s_last, self.r_last = Signal(name=f"{name}_s_last"), Signal(name=f"{name}_r_last")
        self.cg_last = Signal(name=f"{name}_cg_last")
        self.first_round = (self.cg == 0) & (self.r == 0) & (self.s == 0)
        self.last_round = self.cg_last & self.r_last & self.s_last
        # which counter the next round steps (none: the stripe is over)
        self.step_s = ~self.s_last
        self.step_r = self.s_last & ~self.r_last
        self.step_cg = self.s_last & self.r_last & ~self.cg_last
        # whether the round after this one has a single point (in_stripe_m1 == 0 after
        # ``advance``), for a generator's flag of its round's last point
        self.next_round_single = Mux(self.last_round, self.next_single, self.single)

    def _set_last_stripe(self, value) -> list:
        return [flag.eq(value) for flag in (self.last_stripe, *self.last_stripe_copies)]

    def _group_start(self) -> list:
        stripes = self.stripes
        return [self.rest1.eq(stripes.rest1), self.rest2_m1.eq(stripes.rest2_m1),
                self.rest2_short.eq(stripes.rest2_short), self.rest2_zero.eq(stripes.rest2_zero),
                *self._set_last_stripe(stripes.first_is_last),
                self.in_stripe_m1.eq(stripes.first - 1), self.single.eq(stripes.first_single),
                self.next_single.eq(Mux(stripes.first_is_last, stripes.first_single,
                                        stripes.second_single))]

    def _set_last_round(self, value) -> list:
        return [flag.eq(value) for flag in self.last_round_copies]

    def reset(self, m: Module) -> None:
        bounds = self.bounds
        m.d.sync += [self.kg.eq(0), self.cg.eq(0), self.r.eq(0), self.s.eq(0),
                     self.cg_last.eq(bounds.cg_one), self.r_last.eq(bounds.r_one),
                     self.s_last.eq(bounds.s_one), self.last_kg.eq(bounds.kg_m1 == 0),
                     *self._group_start(),
                     *self._set_last_round(bounds.s_one & bounds.r_one & bounds.cg_one)]

    def advance(self, m: Module, active: list[Signal]) -> None:
        """Step to the next round (clearing the flags of ``active`` after the last)."""
        size, bounds = self.size, self.bounds
        # the counters' last-value flags, worked out once for them and for the copies of
        # their AND
        s_last = Mux(self.step_s, self.s == bounds.s_m2, bounds.s_one)
        r_last = Mux(self.step_s, self.r_last,
                     Mux(self.step_r, self.r == bounds.r_m2, bounds.r_one))
        cg_last = Mux(self.step_s | self.step_r, self.cg_last,
                      Mux(self.step_cg, self.cg == bounds.cg_m2, bounds.cg_one))
        m.d.sync += [self.s_last.eq(s_last), self.r_last.eq(r_last), self.cg_last.eq(cg_last),
                     *self._set_last_round(s_last & r_last & cg_last)]
        with m.If(self.step_s):
            m.d.sync += self.s.eq(self.s + 1)
        with m.Elif(self.step_r):
            m.d.sync += [self.s.eq(0), self.r.eq(self.r + 1)]
        with m.Elif(self.step_cg):
            m.d.sync += [self.s.eq(0), self.r.eq(0), self.cg.eq(self.cg + 1)]
        with m.Else():                                  # the stripe is over
            m.d.sync += [self.s.eq(0), self.r.eq(0), self.cg.eq(0)]
            with m.If(~self.last_stripe):               # it had `size` points
                # the next stripe, the last if rest - size <= size, has rest1 points then
                next_is_last = self.rest2_m1 < 0
                stripes = self.stripes
                # the one after it: the next group's first, or the last if rest - 2 * size
                # <= size (with rest - 2 * size = rest2_m1 + 1 points)
                m.d.sync += [self.rest1.eq(self.rest1 - size),
                             self.rest2_m1.eq(self.rest2_m1 - size),
                             # (of rest2_m1 - size)
                             self.rest2_short.eq(self.rest2_m1 < (size << 1)),
                             self.rest2_zero.eq(self.rest2_m1 == size),
                             *self._set_last_stripe(next_is_last),
                             self.in_stripe_m1.eq(Mux(next_is_last, self.rest1 - 1, size - 1)),
                             self.single.eq(self.next_single),
                             self.next_single.eq(Mux(next_is_last, stripes.first_single,
                                                     Mux(self.rest2_short, self.rest2_zero,
                                                         stripes.size_one)))]
            with m.Else():                              # the kernel group is over
                m.d.sync += self._group_start()
                with m.If(self.last_kg):
                    m.d.sync += [flag.eq(0) for flag in active]
                with m.Else():
                    m.d.sync += [self.kg.eq(self.kg + 1),
                                 self.last_kg.eq(self.kg == self.bounds.kg_m2)]
