"""CSC's weight loader: each round's kernels from the weight memory into the MAC array's
shadow bank.

Weight entries are read in order: a round's kernels one after the other, the rounds of a
stripe (channel group, tap) in order, every stripe of a kernel group from the group's
first entry again.  A round loads ``atomic_k`` kernels, but in the last kernel group only
its ``k_last`` real ones: the others are loaded as zeros (masked beats) in the first
round of each stripe and stay zero in the shadow bank, which no later beat of the stripe
overwrites.  The weight address counts up, so nothing is multiplied per beat.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from accel.config import HwConfig
from accel.rtl.cmac import WeightLayout
from accel.rtl.credits import credit_room
from accel.rtl.csc_sequence import Rounds, SequenceGenerator

#: the weight beats read, waiting for the MAC array: a beat's credit comes back five
#: cycles after its read (memory, the read data's register, FIFO, array, the credit's
#: register), so five keep a beat a cycle flowing
BEATS = 5


class WeightLoader(wiring.Component):
    """The next round's kernels into the MAC array's shadow bank (module docstring).

    The beats read wait for the MAC array in a small FIFO the loader holds credits for,
    so that the array's handshake (its ready, a round's swap) ends at the FIFO's read side
    instead of running on into the read's fanout (the weight memory's read enable, the
    address and round counters).  A beat: its kernel data, whether it is zero, whether it
    is its round's last, and its round's parity.  A beat enters the array once its round
    is the one the shadow bank takes, its parity that of the rounds started (a round's
    beats all enter before its own swap, so a waiting beat's round is the shadow bank's or
    the one after it), or with the swap that frees the bank (waiting a cycle more cost
    NVIDIA's dilation trace a few points per round of eight beats).

    Attributes
    ----------
    weight : ``Out(stream.Signature(WeightLayout(hw)))``, to the MAC array
    weight_level : ``In``: weight memory entries written so far (only grows while the
    loader runs)
    may_read : ``In(1)``: the loader may read another round ahead of the data loader
    swap_now, started : ``In(1)``: a round's swap atom is at / enters the MAC array
    round_read : ``Out(1)`` a round's last beat is read; ``loaded`` : ``Out(1)`` a round's
    last beat entered the array; ``busy`` : ``Out(1)``
    """

    def __init__(self, hw: HwConfig, seq: SequenceGenerator, read_port,
                 weight_entries: int) -> None:
        self.hw, self.seq, self.read_port = hw, seq, read_port
        self.weight_entries = weight_entries
        super().__init__({
            "weight": Out(stream.Signature(WeightLayout(hw))),
            "weight_level": In(range(weight_entries + 1)),
            "may_read": In(1), "swap_now": In(1), "started": In(1),
            "round_read": Out(1), "loaded": Out(1), "busy": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        hw, seq, w_rd = self.hw, self.seq, self.read_port
        n_c, n_k = hw.atomic_c, hw.atomic_k
        k_last = seq.k_last
        loading = Signal()                # the loader has rounds left
        lw = Rounds("load", seq.bounds, seq.stripes)
        k = Signal(range(n_k))
        kernels_m1 = Signal(range(n_k))   # beats of this round - 1
        m.d.comb += kernels_m1.eq(Mux(lw.last_kg & ~lw.first_round, k_last - 1, n_k - 1))
        # k == kernels_m1 as a flag worked out as k moves: it gates everything a round's
        # end steps
        k_end = Signal()
        w_addr, w_base, w_group = (Signal(range(self.weight_entries)) for _ in range(3))
        atom = data.ArrayLayout(signed(8), n_c)
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
        m.d.comb += w_accepted.eq(self.weight.valid & self.weight.ready)
        w_fire = Signal()
        # whether the entry at ``w_addr`` is in the weight memory, from flags a cycle old
        # (no carry chain of the level's comparison into the fire): ``w_in`` compares the
        # address with the level, valid while the address stays; ``w_in_next`` the next
        # address, valid after a move by one (``w_stepped``: a beat within its round);
        # ``w_in_far`` the address ``n_k`` on, valid after any one move (a beat moves the
        # address on by at most ``n_k``, over the last kernel group's missing kernels, or
        # back).  With the level near (the last entries written), beats are read one a
        # cycle along a round rather than one every other cycle.
        w_in, w_in_next, w_in_far = Signal(), Signal(), Signal()
        w_moved, w_stepped = Signal(), Signal()
        m.d.sync += [w_in.eq(w_addr < self.weight_level),
                     w_in_next.eq(w_addr + 1 < self.weight_level),
                     w_in_far.eq(w_addr + n_k < self.weight_level),
                     w_moved.eq(w_fire | seq.begin_load),
                     w_stepped.eq(w_fire & ~k_end & ~seq.begin_load)]
        beat_room = credit_room(m, BEATS, w_fire, w_accepted, name="beat_credits",
                                late_give=True)
        m.d.comb += w_fire.eq(loading & beat_room & self.may_read
                              & (w_in_far | (w_in & ~w_moved) | (w_in_next & w_stepped)))
        m.d.comb += [w_rd.en.eq(w_fire), w_rd.addr.eq(w_addr)]
        m.d.comb += self.round_read.eq(w_fire & k_end)
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
                lw.advance(m, [loading])
        # the read data into a register first (not from the block RAMs' outputs through
        # their multiplexer straight into the FIFO), the beat's other fields and its valid
        # along with it
        w_data, w_in_reg, w_meta_reg = Signal(atom), Signal(), Signal(beat)
        m.d.sync += [w_data.eq(w_rd.data), w_in_reg.eq(w_read), w_meta_reg.eq(w_meta)]
        beat_in = Signal(beat)
        m.d.comb += [beat_in.eq(w_meta_reg), beat_in.data.eq(w_data),
                     beats.w_en.eq(w_in_reg), beats.w_data.eq(beat_in)]
        m.d.comb += self.loaded.eq(w_accepted & head_beat.last)

        with m.If(self.started):
            m.d.sync += started_parity.eq(~started_parity)
        with m.If(seq.begin_load):
            m.d.sync += [loading.eq(1), k.eq(0), k_end.eq(n_k == 1), w_addr.eq(0),
                         w_base.eq(0), w_group.eq(0), read_parity.eq(0), started_parity.eq(0)]
            lw.reset(m)
        m.d.comb += self.busy.eq(loading | w_read | w_in_reg | beats.r_rdy)

        # into the MAC array
        m.d.comb += [
            self.weight.valid.eq(beats.r_rdy
                                 & ((head_beat.parity == started_parity) | self.swap_now)),
            beats.r_en.eq(w_accepted),
            self.weight.payload.data.eq(head_beat.data),
            self.weight.payload.mask.eq(Mux(head_beat.zero, 0, (1 << n_c) - 1)),
            self.weight.payload.kernel.eq(head_beat.kernel),
        ]
        return m
