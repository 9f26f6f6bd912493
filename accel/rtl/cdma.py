"""CDMA's blocks for a direct convolution: the feature and weight read commands, the
input converter, and the data they bring into the feature and weight memories (see
:mod:`accel.rtl.dma` for the order of the commands and the memories' layouts).

Each block starts on its own kept copy of the operation's launch (``launch``, a cycle
after the start; one net from the fetch's state machine to all of them was too long),
and keeps the flags it decides from (a counter at its last value, a count covering an
entry) as registers worked out as its counters move, not as comparisons in the cycle
that uses them.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from accel.config import HwConfig
from accel.rtl.axi import BEAT_BITS
from accel.rtl.cmac import registered_multiply, use_ecp5_dsp
from accel.rtl.conv_layout import ADDR_BITS, KERNEL_BITS, SIZE_BITS, write_layout
from accel.rtl.csb_regs import any_of
from accel.rtl.postproc import half_minus_one, round_carry, saturate
from accel.rtl.timing import BeforeLast, kept, kept_copies, set_all


def surfaces_left(cfg, bus: int) -> Value:
    """The memory surfaces of C (``bus`` channels each) less three: the first value of a
    count of the surfaces after the next, less one, whose sign says the next is the last."""
    return ((cfg.c + bus - 1) >> (bus.bit_length() - 1)) - 3


class FeatureCommands(wiring.Component):
    """The feature read commands: one per line of each memory surface that exists, in
    the order ``rows_first`` names (:func:`accel.rtl.dma.rows_first`): a surface's lines,
    then the next surface's; or a row's line of each surface, then the next row.

    Attributes
    ----------
    launch : ``In(1)``; issue : ``In(1)`` a line's command is taken now
    rows_first : ``In(1)`` the order (valid from the body on)
    more : ``Out(1)`` lines are left; line_addr : ``Out`` the next line's address
    group_issued : ``Out(1)`` a channel group's weights of the first kernel group are due:
    the command of its last surface's last line (surfaces first) or first line (rows
    first) is taken now
    """

    def __init__(self, cfg, hw: HwConfig) -> None:
        self.cfg, self.hw = cfg, hw
        super().__init__({"launch": In(1), "issue": In(1), "rows_first": In(1),
                          "more": Out(1), "group_issued": Out(1),
                          "line_addr": Out(ADDR_BITS)})

    def elaborate(self, platform) -> Module:
        m = Module()
        cfg, bus = self.cfg, self.hw.atom_size
        groups = self.hw.atomic_c // bus
        y, j = Signal(SIZE_BITS), Signal(range(groups))
        # the first line of the current surface (surfaces first) or row (rows first)
        base_addr, line_addr = Signal(ADDR_BITS), Signal(ADDR_BITS)
        # whether lines are left; whether this line is its surface's last, this surface
        # the last (of the cube, or of the row), this row the first
        more, last_line, last_surface, first_row = Signal(), Signal(), Signal(), Signal()
        h_m2 = Signal(SIZE_BITS)    # the line before the last, compared before y moves
        # the surfaces after the next one still to come (of the cube, or of the row), less
        # one: the next surface is the last when it is negative (its sign, not a comparison)
        until = Signal(signed(SIZE_BITS + 2))
        group_end = (j == groups - 1) | last_surface
        m.d.comb += [self.group_issued.eq(self.issue & group_end
                                          & Mux(self.rows_first, first_row, last_line)),
                     self.more.eq(more), self.line_addr.eq(line_addr)]
        next_surface = [until.eq(until - 1), last_surface.eq(until[-1]),
                        j.eq(Mux(j == groups - 1, 0, j + 1))]
        first_surface = [until.eq(surfaces_left(cfg, bus)), last_surface.eq(bus >= cfg.c),
                         j.eq(0)]
        with m.If(self.issue & self.rows_first):
            with m.If(~last_surface):           # the row's next surface
                m.d.sync += [*next_surface, line_addr.eq(line_addr + cfg.surf_stride)]
            with m.Else():                      # the next row
                m.d.sync += [*first_surface, y.eq(y + 1), first_row.eq(0),
                             more.eq(~last_line), last_line.eq(y == h_m2),
                             base_addr.eq(base_addr + cfg.line_stride),
                             line_addr.eq(base_addr + cfg.line_stride)]
        with m.Elif(self.issue):
            with m.If(~last_line):              # the surface's next line
                m.d.sync += [y.eq(y + 1), line_addr.eq(line_addr + cfg.line_stride),
                             last_line.eq(y == h_m2)]
            with m.Else():                      # the next surface
                m.d.sync += [*next_surface, y.eq(0), last_line.eq(cfg.h == 1),
                             more.eq(~last_surface),
                             base_addr.eq(base_addr + cfg.surf_stride),
                             line_addr.eq(base_addr + cfg.surf_stride)]
        with m.If(self.launch):
            m.d.sync += [*first_surface, y.eq(0), first_row.eq(1),
                         more.eq((cfg.c != 0) & ~cfg.image.enable),
                         last_line.eq(cfg.h == 1), h_m2.eq(cfg.h - 2),
                         base_addr.eq(cfg.feature_addr), line_addr.eq(cfg.feature_addr)]
        return m


class WeightCommands(wiring.Component):
    """The weight read commands: the stream in pieces, interleaved with the features.
    After a channel group's line of the first row come the words of the first kernel
    group's weights for it (the convolution's first rounds need them and the first rows),
    the rest after the last line.

    A command takes all the words left (once the lines are issued, or if the credit
    covers them) or the credit.  The comparison is a register: ``spare`` (words left less
    credit) stays as it is when a command takes words from both, and loses a block when
    the credit gains one; whether words and credit are left are flags worked out with the
    command that changes them.

    Attributes
    ----------
    launch : ``In(1)``; issue : ``In(1)`` a body command is taken now (this block's when
    ``ready``); lines_left : ``In(1)`` feature lines are left to issue;
    group_issued : ``In(1)`` a channel group's weights are due (its first line is
    issued); block : ``In``: the words of one channel group's first kernels
    ready : ``Out(1)`` a weight command is due; piece, addr : ``Out`` its words, address;
    finished : ``Out(1)`` every weight word is asked for
    """

    def __init__(self, cfg, hw: HwConfig) -> None:
        self.cfg, self.hw = cfg, hw
        super().__init__({"launch": In(1), "issue": In(1), "lines_left": In(1),
                          "group_issued": In(1), "block": In(BEAT_BITS),
                          "ready": Out(1), "piece": Out(BEAT_BITS), "addr": Out(ADDR_BITS),
                          "finished": Out(1)})

    def elaborate(self, platform) -> Module:
        m = Module()
        cfg, bus = self.cfg, self.hw.atom_size
        addr, left = Signal(ADDR_BITS), Signal(BEAT_BITS)
        credit = Signal(BEAT_BITS)               # weight words to read before the next line
        words = Signal(BEAT_BITS)
        m.d.comb += words.eq((cfg.weight_bytes + bus - 1) >> (bus.bit_length() - 1))
        spare = Signal(signed(BEAT_BITS + 1))
        left_nz, credit_nz = Signal(), Signal()
        take_all = Signal()
        m.d.comb += take_all.eq(~self.lines_left | spare[-1])
        piece = Signal(BEAT_BITS)
        m.d.comb += piece.eq(Mux(take_all, left, credit))
        with m.If(self.issue & self.ready):
            m.d.sync += [addr.eq(addr + (piece << (bus.bit_length() - 1))),
                         left.eq(Mux(take_all, 0, spare)),
                         credit.eq(Mux(take_all, credit - left, 0)),
                         left_nz.eq(~take_all & (spare != 0)),
                         credit_nz.eq(take_all & (credit != left))]
        with m.If(self.group_issued):
            # (whether the sum is 0 from its terms, not from its carry chain: the sum does
            # not wrap, it is at most the operation's weight words)
            m.d.sync += [credit.eq(credit + self.block), spare.eq(spare - self.block),
                         credit_nz.eq((credit != 0) | (self.block != 0))]
        with m.If(self.launch):
            # (whether there are words: whether there are bytes, not the sum's comparison)
            m.d.sync += [addr.eq(cfg.weight_addr), left.eq(words), credit.eq(0),
                         spare.eq(words), left_nz.eq(cfg.weight_bytes != 0), credit_nz.eq(0)]
        # weights (within their credit, or all once the lines are issued) before lines
        m.d.comb += [self.ready.eq(left_nz & (~self.lines_left | credit_nz)),
                     self.piece.eq(piece), self.addr.eq(addr), self.finished.eq(left == 0)]
        return m


#: lanes of a converter offset each: a pixel's bytes (image input takes each channel's
#: mean in its byte's lanes; features take ``CVT_OFFSET`` in all)
OFFSET_LANES = 4


class ConverterLayout(data.StructLayout):
    """CDMA's input converter registers: ``D_CVT_CFG`` (``CVT_EN``, ``CVT_TRUNCATE``),
    ``D_CVT_SCALE``, and the offset of lane ``i`` in ``offset[i % OFFSET_LANES]``
    (``D_CVT_OFFSET``, or an image channel's ``D_MEAN_*``); ``unsigned``: the bytes are
    read unsigned (image input without ``PIXEL_SIGN_OVERRIDE``)."""

    def __init__(self) -> None:
        super().__init__({"enable": 1, "offset": data.ArrayLayout(signed(16), OFFSET_LANES),
                          "scale": signed(16), "truncate": 6, "unsigned": 1})


#: the largest right shift the converter needs: a 17-bit difference times a 16-bit scale
#: is below 2**31 in magnitude, so any shift from here up rounds it to 0
CONVERTER_MAX_SHIFT = 35


class FeatureConverter(wiring.Component):
    """CDMA's input converter on feature words, one word a cycle, :data:`LATENCY` cycles
    later (always; the pipeline never stalls).

    With ``enable`` every lane's byte ``x`` (int8, or 0..255 with ``unsigned``) becomes
    ``sat8(round((x - offset) * scale >> truncate))`` (:func:`accel.cmod.cdma.read_feature`,
    :func:`accel.cmod.cdma_image.convert`; the 17-bit saturation the cmod applies first
    changes nothing before the 8-bit one), rounded half away from zero; without it the
    lanes run the identity program (offset 0, scale 1, no shift), so the word passes
    unchanged.

    Attributes
    ----------
    cfg : ``In(ConverterLayout())``, held while words pass
    valid, word : ``In`` a word this cycle; out_valid, out : ``Out`` LATENCY cycles later
    busy : ``Out(1)`` words are in the pipeline

    ``ecp5_dsp``: multiply in ECP5 sysDSP blocks with their own registers
    (:func:`accel.rtl.cmac.registered_multiply`; default: on an ECP5 platform).
    """

    #: the word's register (the word comes from the reader's buffer, placed apart: the
    #: route into the subtracter was the full engine's path at 76 MHz), the multiplier's
    #: operand and product registers, the rounding addition, the shift by the low and by
    #: the high three bits of ``truncate``, the saturation: each stage at most one carry
    #: chain or three levels of multiplexers (100 MHz on an ECP5)
    LATENCY = 7

    def __init__(self, lanes: int, ecp5_dsp: bool | None = None) -> None:
        self.lanes, self.ecp5_dsp = lanes, ecp5_dsp
        super().__init__({"cfg": In(ConverterLayout()), "valid": In(1), "word": In(8 * lanes),
                          "out_valid": Out(1), "out": Out(8 * lanes), "busy": Out(1)})

    def elaborate(self, platform) -> Module:
        m = Module()
        cfg, bits = self.cfg, 34 + 2                      # product, plus the rounding term
        valid = [self.valid] + [Signal(name=f"valid_{i}") for i in range(1, self.LATENCY + 1)]
        for i in range(self.LATENCY):
            m.d.sync += valid[i + 1].eq(valid[i])
        # the operation's registers (latched far away) as registers here, the offset and
        # the shift a copy per lane beside its subtracter and shifters; off, the identity
        shift, hm1, zero_shift = Signal(6), Signal(signed(bits)), Signal()
        shifts = kept_copies("cvt_shift", self.lanes, 6)
        offsets = kept_copies("cvt_offset", self.lanes, signed(16))
        unsigned = kept_copies("cvt_unsigned", self.lanes)
        scale = kept("cvt_scale", signed(16))
        m.d.sync += [shift.eq(Mux(~cfg.enable, 0,
                                  Mux(cfg.truncate > CONVERTER_MAX_SHIFT, CONVERTER_MAX_SHIFT,
                                      cfg.truncate))),
                     hm1.eq(half_minus_one(shift, bits)), zero_shift.eq(shift == 0),
                     *set_all(shifts, shift),
                     *set_all(unsigned, cfg.enable & cfg.unsigned),
                     scale.eq(Mux(cfg.enable, cfg.scale, 1))]
        m.d.sync += [offset.eq(Mux(cfg.enable, cfg.offset[lane % OFFSET_LANES], 0))
                     for lane, offset in enumerate(offsets)]
        out, ecp5 = [], use_ecp5_dsp(self.ecp5_dsp, platform)
        word = Signal.like(self.word, name="word_in")                    # cycle 1
        m.d.sync += word.eq(self.word)
        for lane in range(self.lanes):
            byte = word[8 * lane:8 * lane + 8]
            x = Cat(byte, byte[7] & ~unsigned[lane]).as_signed()
            product = Signal(signed(34), name=f"product_{lane}")          # cycle 3
            registered_multiply(m, f"cvt_{lane}", x - offsets[lane], scale, product, ecp5)
            rounded = Signal(signed(bits), name=f"rounded_{lane}")        # cycle 4
            m.d.sync += rounded.eq(product + hm1 + round_carry(product < 0, zero_shift))
            low = Signal(signed(bits), name=f"shifted_low_{lane}")       # cycle 5
            m.d.sync += low.eq(rounded >> shifts[lane][:3])
            high = Signal(signed(bits), name=f"shifted_{lane}")          # cycle 6
            m.d.sync += high.eq(low >> Cat(Const(0, 3), shifts[lane][3:]))
            value = Signal(signed(8), name=f"value_{lane}")              # cycle 7
            m.d.sync += value.eq(saturate(high, 8))
            out.append(value)
        m.d.comb += [self.out_valid.eq(valid[-1]),
                     self.out.eq(Cat(*out)),
                     self.busy.eq(Cat(*valid[1:]).any())]
        return m


class FeatureWriter(wiring.Component):
    """The feature lines into the feature memory, in the commands' order (``rows_first``,
    :class:`FeatureCommands`): the ``atomic_c / atom`` surfaces of channel group ``cg``
    fill the lane groups of entry ``(cg * H + y) * W + x`` (surfaces first) or ``(y * CG +
    cg) * W + x`` (rows first), so that the memory fills in address order either way.

    Attributes
    ----------
    launch : ``In(1)``; valid : ``In(1)`` a feature word is on ``word`` and taken
    rows_first : ``In(1)`` the order; surface : ``In``: H * W, a channel group's entries
    (both valid from the body on)
    write : ``Out``: the memory's write port; level : ``Out``: entries complete so far
    """

    def __init__(self, cfg, hw: HwConfig, entries: int) -> None:
        self.cfg, self.hw, self.entries = cfg, hw, entries
        super().__init__({"launch": In(1), "valid": In(1), "word": In(8 * hw.atom_size),
                          "rows_first": In(1), "surface": In(range(entries + 1)),
                          "write": Out(write_layout(hw, entries, hw.atomic_c // hw.atom_size)),
                          "level": Out(range(entries + 1))})

    def elaborate(self, platform) -> Module:
        m = Module()
        cfg, bus = self.cfg, self.hw.atom_size
        groups = self.hw.atomic_c // bus
        until = Signal(signed(SIZE_BITS + 2))           # as FeatureCommands'
        j, y, x = Signal(range(groups)), Signal(SIZE_BITS), Signal(SIZE_BITS)
        # the line's first entry; surfaces first, the channel group's first entry
        row_base, cg_base = Signal(range(self.entries + 1)), Signal(range(self.entries + 1))
        features_in = Signal()
        # whether x is at its line's end, y at the last line of the surface (surfaces
        # first) or of the cube (rows first), and the surface is the last (of the cube, or
        # of the row): flags worked out as the counters move
        x_last, y_last, last_surface = Signal(), Signal(), Signal()
        w_m2, h_m2 = Signal(SIZE_BITS), Signal(SIZE_BITS)   # compared before x, y move
        fw = self.write
        m.d.comb += [fw.en.eq(Mux(self.valid, 1 << j, 0)), fw.addr.eq(row_base + x)]
        for g in range(groups):
            for lane in range(bus):
                m.d.comb += fw.data[g * bus + lane].eq(self.word[8 * lane:8 * lane + 8])
        next_surface = [until.eq(until - 1), last_surface.eq(until[-1])]
        first_surface = [until.eq(surfaces_left(cfg, bus)), last_surface.eq(bus >= cfg.c),
                         j.eq(0)]
        with m.If(self.valid):
            m.d.sync += [x.eq(x + 1), x_last.eq(x == w_m2)]
        with m.If(self.valid & x_last & self.rows_first):
            m.d.sync += [x.eq(0), x_last.eq(cfg.w == 1)]
            with m.If(~last_surface):           # the row's next surface
                m.d.sync += next_surface
                with m.If(j != groups - 1):
                    m.d.sync += j.eq(j + 1)
                with m.Else():                  # in the next channel group's entries
                    m.d.sync += [j.eq(0), row_base.eq(row_base + cfg.w)]
            with m.Else():                      # the next row
                m.d.sync += [*first_surface, row_base.eq(row_base + cfg.w),
                             y.eq(y + 1), y_last.eq(y == h_m2)]
                with m.If(y_last):
                    m.d.sync += features_in.eq(1)
        with m.Elif(self.valid & x_last):
            m.d.sync += [x.eq(0), x_last.eq(cfg.w == 1)]
            with m.If(~y_last):                 # the surface's next line
                m.d.sync += [y.eq(y + 1), y_last.eq(y == h_m2), row_base.eq(row_base + cfg.w)]
            with m.Else():                      # the next surface
                m.d.sync += [*next_surface, y.eq(0), y_last.eq(cfg.h == 1)]
                with m.If(last_surface):
                    m.d.sync += features_in.eq(1)
                with m.Elif(j != groups - 1):
                    m.d.sync += [j.eq(j + 1), row_base.eq(cg_base)]
                with m.Else():
                    # the next channel group's entries follow this one's H x W
                    m.d.sync += [j.eq(0), cg_base.eq(cg_base + self.surface),
                                 row_base.eq(cg_base + self.surface)]
        # entries below the level hold all their channels: the whole cube once it is in,
        # else the entries before this line's (or, surfaces first, this channel group's)
        # and in a channel group's last surface those before the data's position
        level = Signal.like(self.level)
        with m.If(features_in):
            m.d.sync += level.eq(self.entries)
        with m.Elif(j == groups - 1):
            m.d.sync += level.eq(row_base + x)
        with m.Else():
            m.d.sync += level.eq(Mux(self.rows_first, row_base, cg_base))
        m.d.comb += self.level.eq(level)
        with m.If(self.launch):
            m.d.sync += [*first_surface, features_in.eq(0), y.eq(0), x.eq(0),
                         x_last.eq(cfg.w == 1), y_last.eq(cfg.h == 1), w_m2.eq(cfg.w - 2),
                         h_m2.eq(cfg.h - 2), row_base.eq(0), cg_base.eq(0)]
        return m


class WeightAligner(wiring.Component):
    """The weight words into weight memory entries, through a byte aligner of ``cap``
    bytes, in NVDLA's direct-convolution order (kernel group, channel group, tap, kernel,
    channel); the entries of kernels past K are skipped, not written (the sequencer loads
    zeros for them).  An entry takes ``nc`` bytes (atomic_c, or what C leaves in the last
    channel group).

    The byte count runs two cycles ahead of the bytes: each cycle decides from the count
    alone whether the next entry is written and a word taken, and two cycles later the
    bytes move and the entry is written (``step_*``), so no cycle both decides and shifts.

    Attributes
    ----------
    launch : ``In(1)``; body : ``In(1)`` the fetch's body runs
    valid : ``In(1)`` a weight word is on ``word``; it is taken when ``done | room``
    room : ``Out(1)`` a word fits; done : ``Out(1)`` every entry is written
    write : ``Out``: the memory's write port; level : ``Out``: entries written so far
    """

    def __init__(self, cfg, hw: HwConfig, entries: int) -> None:
        self.cfg, self.hw, self.entries = cfg, hw, entries
        self.cap = hw.atomic_c + hw.atom_size
        super().__init__({"launch": In(1), "body": In(1), "valid": In(1),
                          "word": In(8 * hw.atom_size), "room": Out(1), "done": Out(1),
                          "write": Out(write_layout(hw, entries)),
                          "level": Out(range(entries + 1))})

    def elaborate(self, platform) -> Module:
        m = Module()
        n_c, n_k, bus, cap, body = (self.hw.atomic_c, self.hw.atomic_k, self.hw.atom_size,
                                    self.cap, self.body)
        # a cycle after the launch, the flags of the first entry, worked out from the
        # first values (the body starts two cycles after ``launch`` at the earliest)
        launch_flags = kept("launch_flags")
        m.d.sync += launch_flags.eq(self.launch)
        buf = Signal(8 * cap)
        count = Signal(range(cap + 1))          # bytes in buf once the pending step is done
        c_last = Signal(SIZE_BITS)
        entry = _Entry(n_c, n_k)
        level = Signal(range(self.entries + 1))
        m.d.comb += [self.level.eq(level), self.done.eq(entry.done)]
        # whether the count covers the next entry (count >= nc) is a register, ``covers``
        covers = Signal()
        write_now = Signal()
        m.d.comb += write_now.eq(body & ~entry.done & covers)
        take = Signal(range(n_c + 1))
        m.d.comb += take.eq(Mux(write_now, entry.nc, 0))
        # the count's next values are worked out beside the decision and selected by it
        count_less, count_after = Signal(range(cap + 1)), Signal(range(cap + 1))
        m.d.comb += [count_less.eq(count - entry.nc),
                     count_after.eq(Mux(write_now, count_less, count))]
        # the count's comparisons are tables of its values (a bit of a register or a
        # constant, selected by the count: a few LUTs), not carry chains
        def table(flags) -> Value:
            """The bit of ``flags`` (one per count value 0..cap) that the count selects"""
            return flags.bit_select(count, 1)

        def constant_table(holds) -> Value:
            return table(Const(sum(1 << v for v in range(cap + 1) if holds(v)), cap + 1))

        # whether a word fits (count <= cap - bus) is a register worked out with the count
        # (the count's table into the fetch's words' ready, on into the enables of the
        # words' slice, was 12.01 ns in the full engine)
        room = Signal(init=1)
        m.d.comb += self.room.eq(room)
        # a word is taken while the aligner has room for it (words past the last entry
        # are dropped)
        accept = Signal()
        m.d.comb += accept.eq(self.valid & room & ~entry.done)
        with m.If(body):
            m.d.sync += [count.eq(Mux(accept, Mux(write_now, count_less + bus, count + bus),
                                      count_after)),
                         room.eq(Mux(accept, Mux(write_now, count_less <= cap - 2 * bus,
                                                 count <= cap - 2 * bus),
                                     count_after <= cap - bus))]
        step_write, step_nc, step_level = self._step(m, buf, write_now, entry, take,
                                                     count_after, accept)
        ww = self.write
        m.d.comb += [ww.en.eq(step_write), ww.addr.eq(level)]
        for lane in range(n_c):
            m.d.comb += ww.data[lane].eq(Mux(lane < step_nc, buf[8 * lane:8 * lane + 8], 0))
        with m.If(step_write):
            m.d.sync += level.eq(level + step_level)
        entry.advance(m, write_now, c_last)

        # ``covers`` follows the count and nc: their next values are the count less nc
        # and/or plus a word, and nc or the next entry's size, each c_last or atomic_c
        # (``nc_short``: nc is c_last).  Each case is a comparison of the count with a
        # threshold, a register of c_last (or a constant), selected by the write decision
        # and the word: the decision's loop is a comparison and a multiplexer.
        def at_least(shorts: int, sizes: int, word: bool):
            """count >= the sum of ``sizes`` entry sizes (``shorts`` of them c_last, the
            others atomic_c), less a word if ``word``"""
            constant = (sizes - shorts) * n_c - (bus if word else 0)
            if not shorts:
                return constant_table(lambda v: v >= constant)
            flags = Signal(cap + 1, name=f"covers_{sizes}_{shorts}{'_word' if word else ''}")
            # (c_last holds in the body; compared with constants, with no adder ahead)
            m.d.sync += flags.eq(Cat(shorts * c_last <= v - constant if v >= constant else Const(0)
                                     for v in range(cap + 1)))
            return table(flags)

        def after_write(word: bool):        # nc and the next entry's size taken
            covered = [at_least(shorts, 2, word) for shorts in range(3)]
            return Mux(entry.nc_short, Mux(entry.n_cg_last, covered[2], covered[1]),
                       Mux(entry.n_cg_last, covered[1], covered[0]))
        word_alone = Mux(entry.nc_short, at_least(1, 1, True), at_least(0, 1, True))
        with m.If(body):
            m.d.sync += covers.eq(Mux(write_now, Mux(accept, after_write(True), after_write(False)),
                                      Mux(accept, word_alone, covers)))

        cfg = self.cfg
        with m.If(self.launch):
            m.d.sync += [level.eq(0), count.eq(0), room.eq(1),
                         c_last.eq(cfg.c - ((cfg.channel_groups - 1) * n_c))]
            entry.launch(m, cfg)
        with m.If(launch_flags):
            m.d.sync += covers.eq(entry.cg_one & (c_last == 0))      # count 0 >= nc
            entry.launch_flags(m, c_last)
        return m

    def _step(self, m: Module, buf: Signal, write_now, entry, take, count_after,
              accept) -> tuple[Signal, Signal, Signal]:
        """The pending step, registered once the cycle after its decision (``decided_*``)
        and applied the cycle after that: the decision's loop through the count stays
        small, its only loads the count and these registers.  Returns whether the step
        writes an entry, its bytes and the entries the level moves past.

        An operation's start empties the buffer through the step too: a ``take`` no byte
        has (so each byte keeps nothing) and no word, rather than a clear of every byte
        from the state machine's decode.
        """
        n_c, n_k, bus, cap = self.hw.atomic_c, self.hw.atomic_k, self.hw.atom_size, self.cap
        decided = {"write": Signal(), "nc": Signal(range(n_c + 1)),
                   "level": Signal(range(n_k + 1)),     # entries the level moves past
                   "word": Signal(8 * bus), "take": Signal(range(n_c + 1)),
                   "after": Signal(range(cap + 1)), "accept": Signal()}
        clear_take = (1 << len(take)) - 1
        assert clear_take > n_c, "the clearing take must match no byte's"
        m.d.sync += [decided["write"].eq(write_now), decided["nc"].eq(entry.nc),
                     decided["level"].eq(Mux(entry.group_end, n_k - entry.kk, 1)),
                     decided["word"].eq(self.word),
                     decided["take"].eq(Mux(self.launch, clear_take, take)),
                     decided["after"].eq(count_after), decided["accept"].eq(accept)]
        step_write, step_nc = Signal(), Signal(range(n_c + 1))
        step_level = Signal(range(n_k + 1))
        step_word = Signal(8 * bus)
        m.d.sync += [step_write.eq(decided["write"]), step_nc.eq(decided["nc"]),
                     step_word.eq(decided["word"]), step_level.eq(decided["level"])]
        # the step, byte by byte: byte b takes the byte ``take`` above it, or the word's
        # byte that lands on it when a word comes in after ``after`` bytes.  Each byte has
        # its own kept copy of the step, not one select of the whole buffer's shift.
        for b in range(cap):
            take_b = kept(f"step_take_{b}", range(n_c + 1))
            after_b = kept(f"step_after_{b}", range(cap + 1))
            accept_b = kept(f"step_accept_{b}")
            m.d.sync += [take_b.eq(decided["take"]), after_b.eq(decided["after"]),
                         accept_b.eq(decided["accept"])]
            # as expressions, not a process with cases (Icarus leaves such a process's
            # outputs undefined until one of its inputs first changes)
            stays = [Mux(take_b == t, buf[8 * (b + t):8 * (b + t + 1)], 0)
                     for t in range(n_c + 1) if b + t < cap]
            landed = [Mux(accept_b & (after_b == a), step_word[8 * (b - a):8 * (b - a + 1)], 0)
                      for a in range(max(0, b - bus + 1), b + 1)]     # a <= b < a + bus
            m.d.sync += buf[8 * b:8 * (b + 1)].eq(any_of(stays + landed))
        return step_write, step_nc, step_level


class _Entry:
    """The weight aligner's next entry: its bytes (``nc``), whether it ends its kernel
    group's kernels (``group_end``), and its place (kernel group, channel group, tap
    ``(r, s)``, kernel ``kk``).

    Whether each counter is at its last value is a flag kept with it (a comparison of
    registers when the counter moves), so the next entry's size and group end come from
    flags, not from chained comparisons; the group counters also keep whether their next
    value is the last (``*_next_last``).  The bounds are registers: ``S - 1`` and the like
    (:class:`~accel.rtl.timing.BeforeLast`), and the values at which the counter's next
    one is the last (S - 2, R - 2) or the one before it (CG - 3, KG - 3), compared with
    the counter before it moves.
    """

    def __init__(self, n_c: int, n_k: int) -> None:
        self.n_c, self.n_k = n_c, n_k
        self.nc = Signal(range(n_c + 1))
        self.nc_short = Signal()                # nc is c_last, not atomic_c
        self.group_end, self.done = Signal(), Signal()
        self.kg, self.cg, self.kk = Signal(SIZE_BITS), Signal(SIZE_BITS), Signal(range(n_k))
        self.r, self.s = Signal(KERNEL_BITS), Signal(KERNEL_BITS)
        self.s_bound, self.r_bound = BeforeLast("s", KERNEL_BITS), BeforeLast("r", KERNEL_BITS)
        self.cg_m3, self.kg_m3 = Signal(SIZE_BITS), Signal(SIZE_BITS)
        self.k_last_m1 = Signal(SIZE_BITS)
        self.s_last, self.r_last, self.cg_last, self.kg_last = (Signal(), Signal(), Signal(),
                                                                Signal())
        self.cg_next_last, self.kg_next_last = Signal(), Signal()
        self.cg_one, self.cg_two = Signal(), Signal()   # the operation's channel groups: 1, 2
        # what the flags become on a write (functions of the flags, not of the decision)
        self.n_kk, self.n_cg_last, self.n_kg_last = Signal.like(self.kk), Signal(), Signal()

    def advance(self, m: Module, write: Value, c_last: Signal) -> None:
        """On ``write``, step to the next entry."""
        n_c, n_k = self.n_c, self.n_k
        last_entry = Signal()
        tap_end = Signal()                          # the entry ends its kernel group's tap
        m.d.comb += [tap_end.eq(self.group_end & self.s_last & self.r_last),
                     self.n_kk.eq(Mux(self.group_end, 0, self.kk + 1)),
                     self.n_cg_last.eq(Mux(tap_end, Mux(self.cg_last, self.cg_one,
                                                        self.cg_next_last), self.cg_last)),
                     self.n_kg_last.eq(Mux(tap_end & self.cg_last & ~self.kg_last,
                                           self.kg_next_last, self.kg_last)),
                     last_entry.eq(tap_end & self.cg_last & self.kg_last)]
        first = [self.s.eq(0), self.s_last.eq(self.s_bound.last == 0)]
        with m.If(write):
            m.d.sync += self.kk.eq(self.n_kk)
            with m.If(self.group_end):
                with m.If(~self.s_last):
                    m.d.sync += [self.s.eq(self.s + 1),
                                 self.s_last.eq(self.s == self.s_bound.before)]
                with m.Elif(~self.r_last):
                    m.d.sync += first + [self.r.eq(self.r + 1),
                                         self.r_last.eq(self.r == self.r_bound.before)]
                with m.Elif(~self.cg_last):
                    m.d.sync += first + [self.r.eq(0), self.r_last.eq(self.r_bound.last == 0),
                                         self.cg.eq(self.cg + 1),
                                         self.cg_last.eq(self.n_cg_last),
                                         self.cg_next_last.eq(self.cg == self.cg_m3)]
                with m.Else():
                    m.d.sync += first + [self.r.eq(0), self.r_last.eq(self.r_bound.last == 0),
                                         self.cg.eq(0), self.cg_last.eq(self.n_cg_last),
                                         self.cg_next_last.eq(self.cg_two)]
                    with m.If(~self.kg_last):
                        m.d.sync += [self.kg.eq(self.kg + 1), self.kg_last.eq(self.n_kg_last),
                                     self.kg_next_last.eq(self.kg == self.kg_m3)]
            m.d.sync += [self.nc.eq(Mux(self.n_cg_last, c_last, n_c)),
                         self.nc_short.eq(self.n_cg_last),
                         self.group_end.eq(Mux(self.n_kg_last, self.n_kk == self.k_last_m1,
                                               self.n_kk == n_k - 1))]
            with m.If(last_entry):
                m.d.sync += self.done.eq(1)

    def launch(self, m: Module, cfg) -> None:
        """The first entry's place and the bounds, from the operation's registers."""
        n_k = self.n_k
        m.d.sync += [self.kg.eq(0), self.cg.eq(0), self.kk.eq(0), self.r.eq(0), self.s.eq(0),
                     self.done.eq(0),
                     self.k_last_m1.eq(cfg.k - ((cfg.kernel_groups - 1) * n_k) - 1),
                     *self.s_bound.take(cfg.s), *self.r_bound.take(cfg.r),
                     self.cg_m3.eq(cfg.channel_groups - 3), self.kg_m3.eq(cfg.kernel_groups - 3),
                     self.s_last.eq(cfg.s == 1), self.r_last.eq(cfg.r == 1),
                     self.cg_last.eq(cfg.channel_groups == 1),
                     self.kg_last.eq(cfg.kernel_groups == 1),
                     self.cg_one.eq(cfg.channel_groups == 1),
                     self.cg_two.eq(cfg.channel_groups == 2),
                     self.cg_next_last.eq(cfg.channel_groups == 2),
                     self.kg_next_last.eq(cfg.kernel_groups == 2)]

    def launch_flags(self, m: Module, c_last: Signal) -> None:
        """The first entry's size and group end, a cycle after :meth:`launch`."""
        m.d.sync += [self.nc.eq(Mux(self.cg_one, c_last, self.n_c)),
                     self.nc_short.eq(self.cg_one),
                     self.group_end.eq(Mux(self.kg_last, self.k_last_m1 == 0, self.n_k == 1))]
