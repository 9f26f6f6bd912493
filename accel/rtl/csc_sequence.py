"""CSC's sequence generator: the operation's constants and the round counters.

At ``start`` the :class:`SequenceGenerator` takes, in the ``PREP`` cycles that follow,
every product of the operation's registers the two loaders need (the output points, the
entries of an input row, the row steps of the strides and dilations, the rows of top
padding), the last values of the counters (:class:`Bounds`) and the first stripe of
output points (:class:`Stripes`); then it starts the weight loader and the data loader,
each of which walks its own :class:`Rounds`.  Nothing is multiplied per atom.
"""

from __future__ import annotations

from amaranth.hdl import Elaboratable, Module, Mux, Signal, signed

from accel.config import HwConfig
from accel.rtl.cmac import registered_multiply, use_ecp5_dsp
from accel.rtl.conv_layout import KERNEL_BITS, SIZE_BITS
from accel.rtl.timing import BeforeLast, kept, kept_copies, registered_copy, set_all

#: cycles from ``start`` to the first read: the operation's products are taken meanwhile
#: (their operands registered at start, the multipliers' input and output registers the
#: two cycles after, the products copied on the cycle after that; the products of a
#: row's entries the same three cycles later; what follows from them the cycle after)
PREP = 8


class Bounds:
    """The last value of each counter the generators compare, as registers (cfg holds from
    ``start``; these follow a cycle later, within the PREP cycles).  The values before the
    last (:class:`~accel.rtl.timing.BeforeLast`) let a counter set its last-value flag as
    it moves."""

    def __init__(self) -> None:
        self.out_w = BeforeLast("out_w", SIZE_BITS)
        self.cg = BeforeLast("cg", SIZE_BITS)
        self.kg = BeforeLast("kg", SIZE_BITS)
        self.r = BeforeLast("r", KERNEL_BITS)
        self.s = BeforeLast("s", KERNEL_BITS)
        self.h, self.w = Signal(SIZE_BITS, name="cube_h"), Signal(SIZE_BITS, name="cube_w")
        # whether the output row, the taps and the channel groups have a single value
        self.out_w_one = Signal(name="out_w_one")
        self.s_one, self.r_one = Signal(name="s_one"), Signal(name="r_one")
        self.cg_one = Signal(name="cg_one")

    def take(self, m: Module, cfg) -> None:
        m.d.sync += [*self.out_w.take(cfg.out_w), *self.cg.take(cfg.channel_groups),
                     *self.kg.take(cfg.kernel_groups), *self.r.take(cfg.r),
                     *self.s.take(cfg.s), self.h.eq(cfg.h), self.w.eq(cfg.w),
                     self.out_w_one.eq(cfg.out_w == 1), self.s_one.eq(cfg.s == 1),
                     self.r_one.eq(cfg.r == 1), self.cg_one.eq(cfg.channel_groups == 1)]


class Stripes:
    """What the round generators need of a kernel group's stripes, as registers of
    ``total`` (output points) and ``size`` (points of a full stripe), which hold from the
    PREP cycles on; each follows them a cycle later, within PREP (the generators start at
    its end)."""

    def __init__(self, total: Signal, size: Signal) -> None:
        self.total, self.size = total, size
        self.first = Signal.like(size, name="first_stripe")        # its points
        self.first_is_last = Signal(name="first_stripe_is_last")
        self.first_single = Signal(name="first_stripe_single")     # it has one point
        self.second_single = Signal(name="second_stripe_single")   # the next has one
        self.size_one = Signal(name="stripe_size_one")
        # the group's first values of the generators' look-ahead counts (see Rounds)
        self.rest1 = Signal(signed(2 * SIZE_BITS + 1), name="first_rest1")
        self.rest2_m1 = Signal(signed(2 * SIZE_BITS + 2), name="first_rest2_m1")
        # whether rest2_m1 < size, and whether rest2_m1 == 0
        self.rest2_short = Signal(name="first_rest2_short")
        self.rest2_zero = Signal(name="first_rest2_zero")

    def take(self, m: Module) -> None:
        total, size = self.total, self.size
        fits = total <= size
        m.d.sync += [self.first.eq(Mux(fits, total, size)), self.first_is_last.eq(fits),
                     self.first_single.eq(Mux(fits, total == 1, size == 1)),
                     self.second_single.eq(Mux(total <= (size << 1), total == size + 1,
                                               size == 1)),
                     self.size_one.eq(size == 1),
                     self.rest1.eq(total - size), self.rest2_m1.eq(total - (size << 1) - 1),
                     self.rest2_short.eq(total <= size + (size << 1)),
                     self.rest2_zero.eq(total == (size << 1) + 1)]


class SequenceGenerator(Elaboratable):
    """The operation's constants, from ``start`` (with the data loader not ``running``)
    through the PREP cycles; ``begin_load`` and ``begin_send`` (with ``begin_send_data``,
    its copy for the data loader's counters) pulse in PREP's last cycle to start the
    weight loader and the data loader.

    Each product has its own registers for its operands, taken every cycle (``cfg`` holds
    from start), then the multiplier's input and output registers (on ECP5 the DSP
    block's own), and its value moves on to where it is used a cycle later.
    """

    def __init__(self, hw: HwConfig, cfg, points: int, feature_entries: int,
                 ecp5_dsp: bool | None) -> None:
        self.hw, self.cfg, self.points, self.ecp5_dsp = hw, cfg, points, ecp5_dsp
        a_bits = (feature_entries - 1).bit_length()
        self.start = Signal()
        self.running = Signal()           # the data loader has points left
        self.prep = Signal(range(PREP + 1))
        # a flag per loader, a register each (``keep``): the start of every counter; the
        # data loader's sending side has one of its own (``begin_send`` across the die
        # into its counters' enables was 11.38 ns in the full engine)
        self.begin_load, self.begin_send = kept("begin_load"), kept("begin_send")
        self.begin_send_data = kept("begin_send_data")
        self.total = Signal(2 * SIZE_BITS)                  # output points
        # total - 1 and total - 2 (for the output count's last flag)
        self.total_bound = BeforeLast("total", 2 * SIZE_BITS)
        self.size = Signal(range(points + 1))               # points of a full stripe
        # the feature memory's layout (:mod:`accel.rtl.csc`): the entries from one channel
        # group to the next, ``cg_step`` (``h * w``, or rows first ``w``), and from one row
        # to the next, row_entries (``w``, or rows first ``channel_groups * w``)
        self.surface = Signal(a_bits)                       # h * w
        self.line = Signal(a_bits)                          # channel_groups * w
        self.cg_step = Signal(a_bits)
        self.row_step = Signal(a_bits)                      # stride_y * row_entries
        self.tap_row_step = Signal(a_bits)                  # dilation_y * row_entries
        self.top_rows = Signal(a_bits)                      # pad_top * row_entries
        self.k_last = Signal(range(hw.atomic_k + 1))        # real kernels of the last group
        self.bounds = Bounds()
        self.stripes = Stripes(self.total, self.size)

    def elaborate(self, platform) -> Module:
        m = Module()
        cfg, prep, n_k = self.cfg, self.prep, self.hw.atomic_k
        m.d.sync += set_all((self.begin_load, self.begin_send, self.begin_send_data),
                            prep == 2)                                           # PREP >= 8
        with m.If(prep != 0):
            m.d.sync += prep.eq(prep - 1)
        with m.If(self.start & (prep == 0) & ~self.running):
            m.d.sync += [prep.eq(PREP),
                         self.size.eq(Mux(cfg.stripe_points > self.points, self.points,
                                          cfg.stripe_points)),
                         self.k_last.eq((cfg.k - 1)[:n_k.bit_length() - 1] + 1)]
        dsp = use_ecp5_dsp(self.ecp5_dsp, platform)
        # (the result, its factors, the cycle it is taken); the row steps follow a row's
        # entries
        row_entries = Mux(cfg.rows_first, self.line, cfg.w)
        products = [(self.total, (cfg.out_w, cfg.out_h), PREP - 2),
                    (self.surface, (cfg.h, cfg.w), PREP - 2),
                    (self.line, (cfg.channel_groups, cfg.w), PREP - 2),
                    (self.row_step, (cfg.stride_y, row_entries), PREP - 6),
                    (self.tap_row_step, (cfg.dilation_y, row_entries), PREP - 6),
                    (self.top_rows, (cfg.pad_top, row_entries), PREP - 6)]
        for result, factors, when in products:
            # the operands are taken every cycle: they hold from the cycle after start (a
            # row's entries from the cycle after it is taken), and no enable carries
            # ``start`` to them
            a, b = (registered_copy(m, f"factor_{result.name}_{i}", factor)
                    for i, factor in enumerate(factors))
            # the product is there two cycles after its operands
            product = Signal(2 * SIZE_BITS, name=f"product_{result.name}")
            registered_multiply(m, f"mult_{result.name}", a, b, product, dsp)
            with m.If(prep == when):
                m.d.sync += result.eq(product)
        with m.If(prep == PREP - 3):
            m.d.sync += [*self.total_bound.take(self.total),
                         self.cg_step.eq(Mux(cfg.rows_first, cfg.w, self.surface))]
        self.bounds.take(m, cfg)
        self.stripes.take(m)
        return m


class Rounds:
    """The round counters one generator walks: kernel group, stripe of output points,
    channel group, kernel tap; ``advance`` steps to the next round.

    A kernel group's stripes have ``size`` points but its last, which has the points left.
    Of the points from the stripe's first to the group's last (``rest``) the generator
    keeps look-ahead counts, ``rest1`` = rest - size and ``rest2_m1`` = rest - 2 * size - 1
    (the next stripe is the group's last when it is negative), and from them, as the
    stripe starts, registers of its length (``in_stripe_m1`` + 1), whether it is the
    group's last, whether it has a single point and whether the next one has: the flag of
    a round's last point then takes its next value from flip-flops, not from ``rest``
    through a subtraction and a comparison."""

    def __init__(self, name: str, bounds: Bounds, stripes: Stripes) -> None:
        self.bounds, self.stripes, self.size = bounds, stripes, stripes.size
        self.kg = Signal(SIZE_BITS, name=f"{name}_kg")
        self.cg = Signal(SIZE_BITS, name=f"{name}_cg")
        self.r = Signal(KERNEL_BITS, name=f"{name}_r")
        self.s = Signal(KERNEL_BITS, name=f"{name}_s")
        self.last_kg = Signal(name=f"{name}_last_kg")
        self.rest1 = Signal.like(stripes.rest1, name=f"{name}_rest1")
        self.rest2_m1 = Signal.like(stripes.rest2_m1, name=f"{name}_rest2_m1")
        # rest2_m1 < size and rest2_m1 == 0, flags kept with it (no carry chain of its
        # comparison with size in front of the next stripe's single-point flag)
        self.rest2_short = Signal(name=f"{name}_rest2_short")
        self.rest2_zero = Signal(name=f"{name}_rest2_zero")
        self.in_stripe_m1 = Signal.like(stripes.size, name=f"{name}_points_m1")
        self.single = Signal(name=f"{name}_single")          # in_stripe_m1 == 0
        self.next_single = Signal(name=f"{name}_next_single")   # of the stripe after it
        self.last_stripe = Signal(name=f"{name}_last_stripe")
        # copies of it and of ``last_round`` as kept registers, for wide registers'
        # selects: they take the same values
        self.last_stripe_copies = kept_copies(f"{name}_last_stripe", 2)
        self.last_round_copies = kept_copies(f"{name}_last_round", 2)
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
        return set_all((self.last_stripe, *self.last_stripe_copies), value)

    def _group_start(self) -> list:
        stripes = self.stripes
        return [self.rest1.eq(stripes.rest1), self.rest2_m1.eq(stripes.rest2_m1),
                self.rest2_short.eq(stripes.rest2_short), self.rest2_zero.eq(stripes.rest2_zero),
                *self._set_last_stripe(stripes.first_is_last),
                self.in_stripe_m1.eq(stripes.first - 1), self.single.eq(stripes.first_single),
                self.next_single.eq(Mux(stripes.first_is_last, stripes.first_single,
                                        stripes.second_single))]

    def reset(self, m: Module) -> None:
        bounds = self.bounds
        m.d.sync += [self.kg.eq(0), self.cg.eq(0), self.r.eq(0), self.s.eq(0),
                     self.cg_last.eq(bounds.cg_one), self.r_last.eq(bounds.r_one),
                     self.s_last.eq(bounds.s_one), self.last_kg.eq(bounds.kg.last == 0),
                     *self._group_start(),
                     *set_all(self.last_round_copies,
                              bounds.s_one & bounds.r_one & bounds.cg_one)]

    def advance(self, m: Module, active: list[Signal]) -> None:
        """Step to the next round (clearing the flags of ``active`` after the last)."""
        size, bounds = self.size, self.bounds
        # the counters' last-value flags, worked out once for them and for the copies of
        # their AND
        s_last = Mux(self.step_s, self.s == bounds.s.before, bounds.s_one)
        r_last = Mux(self.step_s, self.r_last,
                     Mux(self.step_r, self.r == bounds.r.before, bounds.r_one))
        cg_last = Mux(self.step_s | self.step_r, self.cg_last,
                      Mux(self.step_cg, self.cg == bounds.cg.before, bounds.cg_one))
        m.d.sync += [self.s_last.eq(s_last), self.r_last.eq(r_last), self.cg_last.eq(cg_last),
                     *set_all(self.last_round_copies, s_last & r_last & cg_last)]
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
                    m.d.sync += set_all(active, 0)
                with m.Else():
                    m.d.sync += [self.kg.eq(self.kg + 1),
                                 self.last_kg.eq(self.kg == bounds.kg.before)]
