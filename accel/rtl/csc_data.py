"""CSC's data loader: one feature atom per output point and round, into the MAC array.

For every (channel group, kernel tap) of a stripe - a *round* - the loader sends one
feature atom per point: the input pixel ``(oy * SY + r * DY - PAD_TOP, ox * SX + s * DX -
PAD_LEFT)``, or the pad value outside the cube, with the lanes past ``C`` masked.  The
round's first atom swaps the MAC array's kernel banks, once the round's last kernel
entered the shadow bank in an earlier cycle.

A generator walks the points and rounds with the input pixel and its feature address as
running sums stepped by the strides, the dilations and their products with ``W`` (no
multiplication per atom); two stages add them up and check the pixel against the cube,
and the atoms wait in a queue.  The generator runs while the queue has room promised
(credits), so the MAC array's back-pressure never reaches it.  The queue's head is read
from the feature memory once its round's kernels are loaded or loading and its pixel is
padding or in memory.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from accel.config import HwConfig
from accel.rtl.cmac import DataAtomLayout
from accel.rtl.conv_layout import KERNEL_BITS, SIZE_BITS
from accel.rtl.credits import credit_flags
from accel.rtl.csc_sequence import Rounds, SequenceGenerator
from accel.rtl.timing import kept_copies, set_all

#: the loader's queue of atoms between its generator and the feature memory (enough for
#: the generator's credit loop to send an atom every cycle)
QUEUE = 8
#: groups of registers the generator's fire steps, each with its own copies of the flags
#: the fire comes from: the point's, the round's (tap, channel group, stripe), the round
#: counters'
FIRE_GROUPS = 3


class DataLoader(wiring.Component):
    """The feature atoms of every round (module docstring).

    Attributes
    ----------
    data : ``Out(stream.Signature(DataAtomLayout(hw, shadow=True)))``, to the MAC array;
    point, first, last : ``Out``: the output point of the atom on ``data`` and whether its
    round is the point's first / last (they travel beside the MAC pipeline)
    feature_level : ``In``: feature memory entries written so far (only grows)
    may_send : ``In(1)``: the loader may send another round (its kernels are read)
    swap_ready : ``In(1)``: a round's kernels are in the shadow bank, not yet swapped in
    swap_now, started : ``Out(1)``: a round's swap atom is at / enters the MAC array
    round_sent : ``Out(1)``: a round's last atom leaves the queue
    running : ``Out(1)``: the generator has points left; ``busy`` : ``Out(1)``
    """

    def __init__(self, hw: HwConfig, cfg, seq: SequenceGenerator, read_port, points: int,
                 feature_entries: int) -> None:
        self.hw, self.cfg, self.seq, self.read_port = hw, cfg, seq, read_port
        self.points, self.a_bits = points, (feature_entries - 1).bit_length()
        super().__init__({
            "data": Out(stream.Signature(DataAtomLayout(hw, shadow=True))),
            "point": Out(range(points)), "first": Out(1), "last": Out(1),
            "feature_level": In(range(feature_entries + 1)),
            "may_send": In(1), "swap_ready": In(1),
            "swap_now": Out(1), "started": Out(1), "round_sent": Out(1),
            "running": Out(1), "busy": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        n_c, cfg, seq, a_bits = self.hw.atomic_c, self.cfg, self.seq, self.a_bits
        bounds = seq.bounds
        # points left: a copy per group of registers the fire steps (the first is the flag
        # for everything else)
        runs = kept_copies("running", FIRE_GROUPS)
        sd = Rounds("send", bounds, seq.stripes)
        p = Signal(range(self.points))
        oy, ox = Signal(SIZE_BITS), Signal(SIZE_BITS)
        soy, sox = Signal(SIZE_BITS), Signal(SIZE_BITS)       # the stripe's first point
        # the point's pixel for tap (0, 0), (py, px) = (oy*SY - PAD_TOP, ox*SX - PAD_LEFT),
        # its row's first entry py * row_entries as an address (modulo the memory's size:
        # only addresses inside matter), and the same of the stripe's first point
        coord = signed(SIZE_BITS + 6)
        py, px, spy, spx = Signal(coord), Signal(coord), Signal(coord), Signal(coord)
        a_py, sa_py = Signal(a_bits), Signal(a_bits)
        # the tap's offset (ty, tx) = (r*DY, s*DX); the channel group's first entry
        # cg*cg_step, its row of the tap cg*cg_step + ty*row_entries, and the tap's entry
        # (+ tx)
        ty, tx = Signal(2 * KERNEL_BITS), Signal(2 * KERNEL_BITS)
        # and less the cube's height and width, ty - H and tx - W, kept beside them: stage 1
        # then checks the pixel against the cube with one adder each
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
        # of the credit flag and of the round's-end flag, all registers placed beside
        # their group.
        fires = [Signal(name=f"g_fire_{i}") for i in range(FIRE_GROUPS)]
        g_fire = fires[0]
        # p == sd.in_stripe_m1 (the round's last point) as a flag worked out as p moves,
        # not a comparison into the enable of every counter a round's end steps
        ends = kept_copies("round_end", FIRE_GROUPS)
        round_end = ends[0]
        # the next point of the raster (within a stripe or past it); whether ox (and the
        # stripe's first sox) is the row's last: flags kept with them
        ox_last, sox_last = Signal(), Signal()
        wrap = ox_last
        n_ox, n_oy = Mux(wrap, 0, ox + 1), Mux(wrap, oy + 1, oy)
        n_ox_last = Mux(wrap, bounds.out_w_one, ox == bounds.out_w.before)
        n_px = Mux(wrap, -cfg.pad_left, px + cfg.stride_x)
        n_py = Mux(wrap, py + cfg.stride_y, py)
        n_apy = Mux(wrap, a_py + seq.row_step, a_py)
        origin = [ox.eq(0), ox_last.eq(bounds.out_w_one), oy.eq(0), px.eq(-cfg.pad_left),
                  py.eq(-cfg.pad_top), a_py.eq(-seq.top_rows)]
        stripe_origin = [sox.eq(0), sox_last.eq(bounds.out_w_one), soy.eq(0),
                         spx.eq(-cfg.pad_left), spy.eq(-cfg.pad_top), sa_py.eq(-seq.top_rows)]
        # the point's registers
        with m.If(fires[0]):
            m.d.sync += [ox.eq(n_ox), ox_last.eq(n_ox_last), oy.eq(n_oy), px.eq(n_px),
                         py.eq(n_py), a_py.eq(n_apy), p.eq(p + 1),
                         *set_all(ends, p + 1 == sd.in_stripe_m1)]
            with m.If(round_end):
                m.d.sync += [p.eq(0), *set_all(ends, sd.next_round_single)]
                # the next round starts at the stripe's first point, or past its last (the
                # point and the stripe's first point select on kept copies of the
                # last-round and last-stripe flags, not on their AND's one net)
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
                             a_row.eq(a_row + seq.tap_row_step),
                             a_tap.eq(a_row + seq.tap_row_step)]
            with m.Elif(sd.step_cg):
                m.d.sync += [*first_tap, a_cg.eq(a_cg + seq.cg_step),
                             a_row.eq(a_cg + seq.cg_step), a_tap.eq(a_cg + seq.cg_step),
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
        # their signs alone
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

        head_valid, d_valid = self._send(m, queue, entry)
        # an entry's credit comes back a cycle after it left the queue, from a register:
        # the credit count's adder is a cycle away from the head's handshake
        rooms = credit_flags(m, QUEUE, g_fire, queue.r_en, copies=FIRE_GROUPS, late_give=True)
        m.d.comb += [fire.eq(run & room)
                     for fire, run, room in zip(fires, runs, rooms, strict=True)]

        with m.If(seq.begin_send_data):
            m.d.sync += [*set_all(runs, 1), p.eq(0), *set_all(ends, seq.stripes.first_single),
                         *first_tap, a_cg.eq(0), a_row.eq(0), a_tap.eq(0), c_left.eq(cfg.c),
                         *origin, *stripe_origin]
            sd.reset(m)
        m.d.comb += [self.running.eq(runs[0]),
                     self.busy.eq(runs[0] | s1_valid | s2_valid | queue.r_rdy | head_valid
                                  | d_valid)]
        return m

    def _send(self, m: Module, queue, entry) -> tuple[Signal, Signal]:
        """From the queue's head through the feature memory into the MAC array; returns
        the head's and the read atom's valid flags.

        The queue's head moves into a register of its own (``head``) with a flag: is its
        pixel padding or in the feature memory already.  The flag is worked out as the
        entry moves and again each cycle it waits (the memory's level only grows, so a
        comparison a cycle old holds), so no comparison runs on into the pop and the
        queue's read enable.  From ``head`` into the feature memory; the atom read (d_*)
        waits for the MAC array.
        """
        n_c, f_rd = self.hw.atomic_c, self.read_port
        head, h_valid, h_ok = Signal(entry), Signal(), Signal()
        move = Signal()
        d_valid, d_pad, d_mask = Signal(), Signal(), Signal(n_c)
        d_point, d_first, d_last, d_swap = (Signal(range(self.points)), Signal(), Signal(),
                                            Signal())
        # a round's swap atom waits in the register until the round's last kernel entered
        # the shadow bank in an earlier cycle
        d_allowed = Signal()
        m.d.comb += d_allowed.eq(~d_swap | self.swap_ready)
        d_free = Signal()
        m.d.comb += d_free.eq(~d_valid | (d_allowed & self.data.ready))
        pop = Signal()
        m.d.comb += [pop.eq(h_valid & h_ok & d_free & self.may_send),
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
        with m.If(d_free):
            m.d.sync += d_valid.eq(pop)
            with m.If(pop):
                m.d.sync += [d_pad.eq(head.pad), d_mask.eq(head.mask), d_point.eq(head.point),
                             d_first.eq(head.first), d_last.eq(head.last),
                             d_swap.eq(head.swap)]
        m.d.comb += [self.round_sent.eq(pop & head.round_end),
                     self.swap_now.eq(self.data.valid & d_swap),
                     self.started.eq(self.swap_now & self.data.ready),
                     self.data.valid.eq(d_valid & d_allowed),
                     self.data.payload.mask.eq(d_mask),
                     self.data.payload.swap.eq(d_swap),
                     self.point.eq(d_point), self.first.eq(d_first), self.last.eq(d_last)]
        for i in range(n_c):
            m.d.comb += self.data.payload.data[i].eq(Mux(d_pad, self.cfg.pad_value,
                                                         f_rd.data[i]))
        return h_valid, d_valid
