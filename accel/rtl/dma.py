"""The engine's DMAs over AXI4: CDMA and SDP_RDMA fetch, SDP's write DMA.

:class:`ConvFetch` does the reads of a direct convolution over one
:class:`~accel.rtl.axi.AxiReader` (several bursts in flight):

1. **SDP operands** first (SDP_RDMA, per-kernel mode): for every kernel
   group, the ``atomic_k`` elements of X1's (BRDMA) and X2's (NRDMA) packed
   1x1xC operand cubes - one or two 8/16-bit components each (ALU first) -
   into one operand memory entry.  Then ``ready`` rises and the convolution
   starts; each of its reads waits until ``feature_level`` / ``weight_level``
   has passed the entry, so it runs as the input and the weights arrive.
2. **Features** (CDMA): the input cube in NVDLA's feature layout (a surface of
   ``atom`` channels per ``SURF_STRIDE``, a line of ``W`` atoms per
   ``LINE_STRIDE``), one command per line, into the feature memory: the
   ``atomic_c / atom`` surfaces of channel group ``cg`` fill the lane groups
   of entry ``(cg * H + y) * W + x``.  Surfaces past ``C`` do not exist in
   memory and are not read (the sequencer masks those lanes).
3. **Weights** (CDMA): ``WEIGHT_BYTES`` from ``WEIGHT_ADDR`` in NVDLA's
   direct-convolution order (kernel group, channel group, tap, kernel,
   channel - channels and kernels of the last groups packed without padding)
   through a byte aligner into weight memory entries; the entries of kernels
   past ``K`` are skipped, not written (the sequencer loads zeros for them).

The commands of 2 and 3 interleave in the order the convolution's first
kernel group consumes them: a channel group's lines, then that channel
group's weights of the first kernel group, and so on; the other kernel
groups' weights after the last line.  A tag per command (weights or a line,
and its words) routes the data as they come back.

:class:`OutputWriter` is SDP's write DMA: every output beat (``atomic_k``
channels of one point, kernel group by kernel group in raster order) to
``DST_BASE + kg * DST_SURFACE_STRIDE + oy * DST_LINE_STRIDE + ox * atom``.

The bus word is one memory atom (``memory_atomic_size`` bytes); the engine
needs ``atomic_k == memory_atomic_size`` (every NVDLA preset has it), so an
output beat is one word.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from accel.config import HwConfig
from accel.rtl.axi import BEAT_BITS, AxiReader, AxiWriter, read_signature, write_signature
from accel.rtl.cmac import registered_multiply
from accel.rtl.conv_core import (
    KERNEL_BITS,
    SIZE_BITS,
    operand_layout,
    operand_write_layout,
    write_layout,
)
from accel.rtl.csb_regs import any_of
from accel.rtl.postproc import ResultLayout

ADDR_BITS = 32
#: bursts the CDMA's reader keeps in flight
READ_BURSTS = 4
#: SDP_RDMA ``DATA_USE`` codes
USE_MUL, USE_ALU, USE_BOTH = 0, 1, 2


class OperandFetchLayout(data.StructLayout):
    """One SDP stage's operand DMA: on or off, base address, components, 16-bit or 8-bit."""

    def __init__(self) -> None:
        super().__init__({"fetch": 1, "addr": ADDR_BITS, "use": 2, "wide": 1})


class FetchConfigLayout(data.StructLayout):
    """What :class:`ConvFetch` reads from the registers."""

    def __init__(self) -> None:
        size = SIZE_BITS
        super().__init__({
            "feature_addr": ADDR_BITS, "line_stride": ADDR_BITS, "surf_stride": ADDR_BITS,
            "c": size, "h": size, "w": size, "k": size, "r": KERNEL_BITS, "s": KERNEL_BITS,
            "channel_groups": size, "kernel_groups": size,
            "weight_addr": ADDR_BITS, "weight_bytes": ADDR_BITS,
            "x1": OperandFetchLayout(), "x2": OperandFetchLayout(),
        })


#: cycles after an operation's start before the fetch issues its first command: the
#: products of the operation's registers (:func:`_registered_product`, ``block`` the
#: product of a product) are ready by then
PRODUCTS_SETTLE = 4


def _registered_product(m: Module, name: str, a, b, width: int) -> Signal:
    """``a * b`` (truncated to ``width`` bits) three cycles after ``a`` and ``b``: the
    multiplier's operands and product in fabric registers beside it
    (:func:`accel.rtl.cmac.registered_multiply`), then the value in a register beside its
    users.  ``a`` and ``b`` must hold (the operation's registers)."""
    product = Signal(width, name=f"{name}_product", attrs={"keep": 1})
    value = Signal(width, name=name)
    registered_multiply(m, name, a, b, product, ecp5=False)
    m.d.sync += value.eq(product)
    return value


def feature_groups(cfg: HwConfig) -> int:
    """Memory surfaces per feature memory entry (``atomic_c / atom``)."""
    return cfg.atomic_c // cfg.atom_size


def check_bus(cfg: HwConfig) -> None:
    if cfg.atomic_k != cfg.atom_size or cfg.atomic_c % cfg.atom_size:
        raise ValueError(f"{cfg.name}: the RTL engine needs atomic_k == memory_atomic_size and "
                         f"atomic_c a multiple of it (atomic_c={cfg.atomic_c}, "
                         f"atomic_k={cfg.atomic_k}, memory_atomic_size={cfg.atom_size})")


class ConvFetch(wiring.Component):
    """See the module docstring.

    Attributes
    ----------
    cfg : ``In(FetchConfigLayout())``, constant from ``start`` to ``done``
    start : ``In(1)`` pulse; ``ready`` : ``Out(1)`` features and operands are in;
    ``done`` : ``Out(1)`` everything is in (both stay high until the next start)
    weight_level : ``Out``: weight memory entries written so far
    feature_write, weight_write, operand_write : memory write ports
    axi : AXI4 read channels; ``bus_error`` : sticky, a read was not OKAY
    """

    def __init__(self, cfg: HwConfig, feature_entries: int, weight_entries: int,
                 operand_entries: int) -> None:
        check_bus(cfg)
        self.hw = cfg
        self.entries = (feature_entries, weight_entries, operand_entries)
        super().__init__({
            "cfg": In(FetchConfigLayout()),
            "start": In(1), "ready": Out(1), "done": Out(1),
            "weight_level": Out(range(weight_entries + 1)),
            "feature_level": Out(range(feature_entries + 1)),
            "feature_write": Out(write_layout(cfg, feature_entries, feature_groups(cfg))),
            "weight_write": Out(write_layout(cfg, weight_entries)),
            "operand_write": Out(operand_write_layout(cfg, operand_entries)),
            "axi": Out(read_signature(ADDR_BITS, 8 * cfg.atom_size)),
            "bus_error": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        hw, cfg = self.hw, self.cfg
        bus, n_c, n_k = hw.atom_size, hw.atomic_c, hw.atomic_k
        groups = feature_groups(hw)
        m.submodules.reader = reader = AxiReader(ADDR_BITS, bus, bursts=READ_BURSTS)
        wiring.connect(m, wiring.flipped(self.axi), reader.axi)
        m.d.comb += self.bus_error.eq(reader.bus_error)
        cmd = reader.cmd
        beat = reader.data
        ready, done = Signal(), Signal()
        body = Signal()                          # features and weights under way
        # what each command issued in the body reads, in order: its words and whether
        # they are weights (else one line of features)
        m.submodules.tags = tags = fifo.SyncFIFOBuffered(width=BEAT_BITS + 1,
                                                         depth=READ_BURSTS + 4)
        tag_beats, tag_weights = tags.r_data[:BEAT_BITS], tags.r_data[BEAT_BITS]
        issue = Signal()                         # a body command is taken now
        starting = Signal()                      # a start, in the idle state
        launch = {g: Signal(name=f"launch_{g}", attrs={"keep": 1})
                  for g in ("fc", "wc", "fd", "op", "wa")}
        m.d.sync += [flag.eq(starting) for flag in launch.values()]
        # a cycle later, the weight entries' flags worked out from those first values (the
        # body starts two cycles after ``launch`` at the earliest: LAUNCH, START)
        launch_flags = Signal(name="launch_flags", attrs={"keep": 1})
        m.d.sync += launch_flags.eq(launch["wa"])

        # ---- features, commands: one per line of each surface that exists -------------
        fc_y = Signal(SIZE_BITS)
        fc_j = Signal(range(groups))
        fc_surf_addr, fc_line_addr = Signal(ADDR_BITS), Signal(ADDR_BITS)
        # whether lines are left, this surface is the last and this line its last: flags
        # worked out as the counters move (comparisons of registers, one cycle ahead)
        fc_more, fc_last_surface, fc_last_line = Signal(), Signal(), Signal()
        fc_issue = Signal()
        # (H - 2, for the commands' and the data's line counters: the line before the last
        # is compared with a register, not ``fc_y + 2`` with H, an adder into an equality)
        h_m2 = Signal(SIZE_BITS)
        # the surfaces after the next one still to come, less one: the next surface is the
        # last when it is negative (its sign, where ``(surface + 2) * bus >= C`` was among
        # the netlist's deepest logic, and then ``surface >= surfaces - 2``, a comparison's
        # carry chain into the flag's multiplexer, the 8x8 build's path at 82.56 MHz)
        fc_until = Signal(signed(SIZE_BITS + 2))
        group_issued = Signal()                  # the command of a channel group's last line
        m.d.comb += group_issued.eq(fc_issue & fc_last_line
                                    & ((fc_j == groups - 1) | fc_last_surface))
        with m.If(fc_issue):
            with m.If(~fc_last_line):
                m.d.sync += [fc_y.eq(fc_y + 1), fc_line_addr.eq(fc_line_addr + cfg.line_stride),
                             fc_last_line.eq(fc_y == h_m2)]
            with m.Else():
                m.d.sync += [fc_y.eq(0), fc_until.eq(fc_until - 1),
                             fc_last_line.eq(cfg.h == 1), fc_more.eq(~fc_last_surface),
                             fc_last_surface.eq(fc_until[-1]),
                             fc_j.eq(Mux(fc_j == groups - 1, 0, fc_j + 1)),
                             fc_surf_addr.eq(fc_surf_addr + cfg.surf_stride),
                             fc_line_addr.eq(fc_surf_addr + cfg.surf_stride)]

        # ---- weights, commands: the stream in pieces, interleaved with the features: after
        # a channel group's lines, the words of the first kernel group's weights for it
        # (the convolution's first rounds need both), the rest after the last line
        wc_addr, wc_left = Signal(ADDR_BITS), Signal(BEAT_BITS)
        credit = Signal(BEAT_BITS)               # weight words to read before the next line
        block = Signal(BEAT_BITS)                # words of one channel group's first kernels
        weight_words = Signal(BEAT_BITS)
        m.d.comb += weight_words.eq((cfg.weight_bytes + bus - 1) >> (bus.bit_length() - 1))
        # (whether there are any: whether there are bytes, not the sum's comparison, whose
        # carry chain was the reduced build's path at 90.61 MHz, 19 logic steps)
        # a command takes all the words left (once the lines are issued, or if the credit
        # covers them) or the credit.  The comparison is a register: ``spare`` (words left
        # less credit) stays as it is when a command takes words from both, and loses a
        # block when the credit gains one; whether words and credit are left are flags
        # worked out with the command that changes them
        spare = Signal(signed(BEAT_BITS + 1))
        left_nz, credit_nz = Signal(), Signal()
        take_all = Signal()
        m.d.comb += take_all.eq(~fc_more | spare[-1])
        piece = Signal(BEAT_BITS)
        m.d.comb += piece.eq(Mux(take_all, wc_left, credit))
        wc_issue = Signal()
        with m.If(wc_issue):
            m.d.sync += [wc_addr.eq(wc_addr + (piece << (bus.bit_length() - 1))),
                         wc_left.eq(Mux(take_all, 0, spare)),
                         credit.eq(Mux(take_all, credit - wc_left, 0)),
                         left_nz.eq(~take_all & (spare != 0)),
                         credit_nz.eq(take_all & (credit != wc_left))]
        gained = Signal(BEAT_BITS)
        m.d.comb += gained.eq(credit + block)
        with m.If(group_issued):
            # (whether the sum is 0 from its terms, not from its carry chain: the sum does
            # not wrap, it is at most the operation's weight words)
            m.d.sync += [credit.eq(gained), spare.eq(spare - block),
                         credit_nz.eq((credit != 0) | (block != 0))]
        # weights (within their credit, or all once the lines are issued) before lines
        wc_ready = Signal()
        m.d.comb += wc_ready.eq(left_nz & (~fc_more | credit_nz))
        body_cmd = Signal()
        m.d.comb += [body_cmd.eq(body & tags.w_rdy & (wc_ready | fc_more)),
                     issue.eq(body_cmd & cmd.ready),
                     wc_issue.eq(issue & wc_ready), fc_issue.eq(issue & ~wc_ready)]
        m.d.comb += [tags.w_en.eq(issue),
                     tags.w_data.eq(Cat(Mux(wc_ready, piece, cfg.w).as_unsigned()
                                        [:BEAT_BITS], wc_ready))]

        # ---- data: routed by the tag of the command they answer --------------------------
        # the word at the bus is the nth of its command (counted from 1, so that its last
        # word is an equality with the tag, no subtraction)
        nth = Signal(BEAT_BITS, init=1)
        feature_beat, weight_beat = Signal(), Signal()
        with m.If(beat.valid & beat.ready & body):
            m.d.sync += nth.eq(Mux(nth == tag_beats, 1, nth + 1))
        m.d.comb += tags.r_en.eq(beat.valid & beat.ready & body & (nth == tag_beats))

        # features: the lane groups of entry (cg * H + y) * W + x
        fd_until = Signal.like(fc_until)                # as fc_until
        cg, j, y, x = (Signal(SIZE_BITS), Signal(range(groups)), Signal(SIZE_BITS),
                       Signal(SIZE_BITS))
        row_base, cg_base = Signal(range(self.entries[0] + 1)), Signal(range(self.entries[0] + 1))
        surface = Signal(range(self.entries[0] + 1))     # H * W: a channel group's entries
        features_in = Signal()
        # whether x and y are at their line's and surface's ends and the surface is the last:
        # flags worked out as the counters move, like the commands' (the surface count's
        # comparison with C behind x's and y's was the reduced build's critical path)
        x_last, y_last, fd_last_surface = Signal(), Signal(), Signal()
        fd_w_m2 = Signal(SIZE_BITS)                     # W - 2 (as h_m2)
        m.d.comb += feature_beat.eq(body & tags.r_rdy & ~tag_weights & beat.valid)
        fw = self.feature_write
        m.d.comb += [fw.en.eq(Mux(feature_beat, 1 << j, 0)), fw.addr.eq(row_base + x)]
        for g in range(groups):
            for lane in range(bus):
                m.d.comb += fw.data[g * bus + lane].eq(beat.payload[8 * lane:8 * lane + 8])
        with m.If(feature_beat):
            m.d.sync += [x.eq(x + 1), x_last.eq(x == fd_w_m2)]
            with m.If(x_last):
                m.d.sync += [x.eq(0), x_last.eq(cfg.w == 1)]
                with m.If(~y_last):
                    m.d.sync += [y.eq(y + 1), y_last.eq(y == h_m2),
                                 row_base.eq(row_base + cfg.w)]
                with m.Else():
                    m.d.sync += [y.eq(0), y_last.eq(cfg.h == 1), fd_until.eq(fd_until - 1),
                                 fd_last_surface.eq(fd_until[-1])]
                    with m.If(fd_last_surface):
                        m.d.sync += features_in.eq(1)
                    with m.Elif(j != groups - 1):
                        m.d.sync += [j.eq(j + 1), row_base.eq(cg_base)]
                    with m.Else():
                        # the next channel group's entries follow this one's H x W
                        m.d.sync += [j.eq(0), cg.eq(cg + 1), cg_base.eq(cg_base + surface),
                                     row_base.eq(cg_base + surface)]
        # entries below the level hold all their channels: the whole cube once it is in,
        # else the entries of the channel groups before, and in a group's last surface
        # those before the data's position
        flevel = Signal.like(self.feature_level)
        with m.If(features_in):
            m.d.sync += flevel.eq(self.entries[0])
        with m.Elif(j == groups - 1):
            m.d.sync += flevel.eq(row_base + x)
        with m.Else():
            m.d.sync += flevel.eq(cg_base)
        m.d.comb += self.feature_level.eq(flevel)

        # weights: a byte aligner of ``cap`` bytes between the bus words and the weight
        # entries, in NVDLA's direct-convolution order.  An entry takes ``nc`` bytes
        # (atomic_c, or what C leaves in the last channel group).  The byte count runs two
        # cycles ahead of the bytes: each cycle decides from the count alone whether the
        # next entry is written and a word taken, and two cycles later the bytes move and
        # the entry is written (``step_*``), so no cycle both decides and shifts.
        cap = n_c + bus
        buf = Signal(8 * cap)
        count = Signal(range(cap + 1))          # bytes in buf once the pending step is done
        wkg, wcg, wkk = Signal(SIZE_BITS), Signal(SIZE_BITS), Signal(range(n_k))
        wr, ws = Signal(KERNEL_BITS), Signal(KERNEL_BITS)
        c_last = Signal(SIZE_BITS)
        # the next entry: its bytes, and whether it is the last of its kernel group, channel
        # group and tap (the entries of the kernels past K are not written: the sequencer
        # loads zeros for them)
        nc = Signal(range(n_c + 1))
        nc_short = Signal()                     # nc is c_last, not atomic_c
        group_end = Signal()
        entries_done = Signal()
        level = Signal(range(self.entries[1] + 1))
        m.d.comb += self.weight_level.eq(level)
        # whether the count covers the next entry (count >= nc) is a register, ``covers``,
        # worked out below with the count and nc
        covers = Signal()
        write_now = Signal()
        m.d.comb += write_now.eq(body & ~entries_done & covers)
        take = Signal(range(n_c + 1))
        m.d.comb += take.eq(Mux(write_now, nc, 0))
        # the count's four next values are worked out beside the decision and selected by
        # it (chained, the comparison, the take and two adders were the 8x8 build's path at
        # 81.42 MHz, 14 logic steps)
        count_less = Signal(range(cap + 1))
        m.d.comb += count_less.eq(count - nc)
        count_after = Signal(range(cap + 1))
        m.d.comb += count_after.eq(Mux(write_now, count_less, count))
        # the count's comparisons are tables of its values (a bit of a register or a
        # constant, selected by the count: a few LUTs), not carry chains: from the count
        # through a comparison of it with c_last's threshold into ``covers`` was the 8x8
        # build's path at 80.34 MHz (13 logic steps)
        def table(flags) -> Value:
            """The bit of ``flags`` (one per count value 0..cap) that the count selects"""
            return flags.bit_select(count, 1)

        def constant_table(holds) -> Value:
            return table(Const(sum(1 << v for v in range(cap + 1) if holds(v)), cap + 1))

        room = Signal()                         # a word fits, whatever this cycle writes
        m.d.comb += room.eq(constant_table(lambda v: v <= cap - bus))
        # a weight word is taken while the aligner has room for it (words past the last
        # entry are dropped)
        m.d.comb += weight_beat.eq(body & tags.r_rdy & tag_weights & beat.valid
                                   & (entries_done | room))
        accept = Signal()
        m.d.comb += accept.eq(weight_beat & ~entries_done)
        with m.If(body):
            m.d.sync += count.eq(Mux(accept, Mux(write_now, count_less + bus, count + bus),
                                     count_after))
        # the pending step, registered once the cycle after its decision (``decided_*``)
        # and applied the cycle after that: the decision's loop through the count stays
        # small, its only loads the count and these registers (when the per-byte copies
        # below took the decision itself, its fanout spread the loop: the full build's
        # critical path at 82.54 MHz, 12.1 ns, two thirds routing)
        decided = {"write": Signal(), "nc": Signal(range(n_c + 1)),
                   "level": Signal(range(n_k + 1)),     # entries the level moves past
                   "word": Signal(8 * bus), "take": Signal(range(n_c + 1)),
                   "after": Signal(range(cap + 1)), "accept": Signal()}
        # an operation's start empties the buffer through the step too: a ``take`` no byte
        # has (so each byte keeps nothing) and no word.  In the state machine, clearing
        # every byte at start put its state decode on a net to all of them: the 8x8
        # build's critical path at 61.89 MHz (16.2 ns, 11.9 of it that one net).
        clear_take = (1 << len(take)) - 1
        assert clear_take > n_c, "the clearing take must match no byte's"
        m.d.sync += [decided["write"].eq(write_now), decided["nc"].eq(nc),
                     decided["level"].eq(Mux(group_end, n_k - wkk, 1)),
                     decided["word"].eq(beat.payload),
                     decided["take"].eq(Mux(launch["wa"], clear_take, take)),
                     decided["after"].eq(count_after), decided["accept"].eq(accept)]
        step_write, step_nc = Signal(), Signal(range(n_c + 1))
        step_level = Signal(range(n_k + 1))
        step_word = Signal(8 * bus)
        m.d.sync += [step_write.eq(decided["write"]), step_nc.eq(decided["nc"]),
                     step_word.eq(decided["word"]), step_level.eq(decided["level"])]
        # the step, byte by byte: byte b takes the byte ``take`` above it, or the word's
        # byte that lands on it when a word comes in after ``after`` bytes.  Each byte has
        # its own copy of the step (``keep``): as shifts of the whole buffer by two
        # registers, their selects were among the full build's most congested nets.
        for b in range(cap):
            take_b = Signal(range(n_c + 1), name=f"step_take_{b}", attrs={"keep": 1})
            after_b = Signal(range(cap + 1), name=f"step_after_{b}", attrs={"keep": 1})
            accept_b = Signal(name=f"step_accept_{b}", attrs={"keep": 1})
            m.d.sync += [take_b.eq(decided["take"]), after_b.eq(decided["after"]),
                         accept_b.eq(decided["accept"])]
            # as expressions, not a process with cases (Icarus leaves such a process's
            # outputs undefined until one of its inputs first changes)
            kept = [Mux(take_b == t, buf[8 * (b + t):8 * (b + t + 1)], 0)
                    for t in range(n_c + 1) if b + t < cap]
            landed = [Mux(accept_b & (after_b == a), step_word[8 * (b - a):8 * (b - a + 1)], 0)
                      for a in range(max(0, b - bus + 1), b + 1)]     # a <= b < a + bus
            m.d.sync += buf[8 * b:8 * (b + 1)].eq(any_of(kept + landed))
        ww = self.weight_write
        m.d.comb += [ww.en.eq(step_write), ww.addr.eq(level)]
        for lane in range(n_c):
            m.d.comb += ww.data[lane].eq(Mux(lane < step_nc, buf[8 * lane:8 * lane + 8], 0))
        with m.If(step_write):
            m.d.sync += level.eq(level + step_level)
        # the entry after this one.  Whether each counter is at its last value is a flag
        # kept with it (a comparison of registers when the counter moves), so the next
        # entry's size and group end come from flags, not from chained comparisons; the
        # group counters also keep whether their next value is the last (``*_next_last``:
        # compared as the counter moved, ``wcg + 1 == cg_m1`` and the like were the 8x8
        # build's path at 85.09 MHz, from the entry's size through the write decision into
        # the next size, 11 logic steps)
        # the counters' bounds: s_m1 = S - 1 and the like, and the values at which the
        # counter's next one is the last (S - 2, R - 2) or the one before it (CG - 3,
        # KG - 3), compared with the counter before it moves (not ``ws + 1 == s_m1``: an
        # adder into an equality)
        s_m1, r_m1 = Signal(KERNEL_BITS), Signal(KERNEL_BITS)
        s_m2, r_m2, cg_m3, kg_m3 = (Signal(KERNEL_BITS), Signal(KERNEL_BITS),
                                    Signal(SIZE_BITS), Signal(SIZE_BITS))
        k_last_m1 = Signal(SIZE_BITS)
        ws_last, wr_last, wcg_last, wkg_last = Signal(), Signal(), Signal(), Signal()
        wcg_next_last, wkg_next_last = Signal(), Signal()
        cg_one, cg_two = Signal(), Signal()         # the operation's channel groups: 1, 2
        n_wkk, n_wcg_last, n_wkg_last = Signal.like(wkk), Signal(), Signal()
        last_entry = Signal()
        # what the flags become on a write (functions of the flags, not of the decision)
        tap_end = Signal()                          # the entry ends its kernel group's tap
        m.d.comb += [tap_end.eq(group_end & ws_last & wr_last),
                     n_wkk.eq(Mux(group_end, 0, wkk + 1)),
                     n_wcg_last.eq(Mux(tap_end, Mux(wcg_last, cg_one, wcg_next_last), wcg_last)),
                     n_wkg_last.eq(Mux(tap_end & wcg_last & ~wkg_last, wkg_next_last, wkg_last)),
                     last_entry.eq(tap_end & wcg_last & wkg_last)]
        first = [ws.eq(0), ws_last.eq(s_m1 == 0)]
        with m.If(write_now):
            m.d.sync += wkk.eq(n_wkk)
            with m.If(group_end):
                with m.If(~ws_last):
                    m.d.sync += [ws.eq(ws + 1), ws_last.eq(ws == s_m2)]
                with m.Elif(~wr_last):
                    m.d.sync += first + [wr.eq(wr + 1), wr_last.eq(wr == r_m2)]
                with m.Elif(~wcg_last):
                    m.d.sync += first + [wr.eq(0), wr_last.eq(r_m1 == 0), wcg.eq(wcg + 1),
                                         wcg_last.eq(n_wcg_last),
                                         wcg_next_last.eq(wcg == cg_m3)]
                with m.Else():
                    m.d.sync += first + [wr.eq(0), wr_last.eq(r_m1 == 0), wcg.eq(0),
                                         wcg_last.eq(n_wcg_last), wcg_next_last.eq(cg_two)]
                    with m.If(~wkg_last):
                        m.d.sync += [wkg.eq(wkg + 1), wkg_last.eq(n_wkg_last),
                                     wkg_next_last.eq(wkg == kg_m3)]
            m.d.sync += [nc.eq(Mux(n_wcg_last, c_last, n_c)), nc_short.eq(n_wcg_last),
                         group_end.eq(Mux(n_wkg_last, n_wkk == k_last_m1, n_wkk == n_k - 1))]
            with m.If(last_entry):
                m.d.sync += entries_done.eq(1)
        # ``covers`` follows the count and nc: their next values are the count less nc
        # and/or plus a word, and nc or the next entry's size, each c_last or atomic_c
        # (``nc_short``: nc is c_last).  Each case is a comparison of the count with a
        # threshold, a register of c_last (or a constant), selected by the write decision
        # and the word: the decision's loop is a comparison and a multiplexer.  (The count's
        # comparison with nc behind the decision, chained into the group counters, was the
        # 8x8 build's path at 73.61 MHz, 12 logic steps.)
        def at_least(shorts: int, sizes: int, word: bool):
            """count >= the sum of ``sizes`` entry sizes (``shorts`` of them c_last, the
            others atomic_c), less a word if ``word``"""
            constant = (sizes - shorts) * n_c - (bus if word else 0)
            if not shorts:
                return constant_table(lambda v: v >= constant)
            flags = Signal(cap + 1, name=f"covers_{sizes}_{shorts}{'_word' if word else ''}")
            # (c_last holds in the body; compared with constants, with no adder ahead: the
            # sum's carry chain into the comparison's was the 8x8 build's path at 82.88 MHz)
            m.d.sync += flags.eq(Cat(shorts * c_last <= v - constant if v >= constant else Const(0)
                                     for v in range(cap + 1)))
            return table(flags)
        def after_write(word: bool):        # nc and the next entry's size taken
            covered = [at_least(shorts, 2, word) for shorts in range(3)]
            return Mux(nc_short, Mux(n_wcg_last, covered[2], covered[1]),
                       Mux(n_wcg_last, covered[1], covered[0]))
        word_alone = Mux(nc_short, at_least(1, 1, True), at_least(0, 1, True))
        with m.If(body):
            m.d.sync += covers.eq(Mux(write_now, Mux(accept, after_write(True), after_write(False)),
                                      Mux(accept, word_alone, covers)))

        # ---- operands ----------------------------------------------------------------
        kg = Signal(SIZE_BITS)
        stage = Signal()
        st = Signal(OperandFetchLayout())          # the stage being fetched
        m.d.comb += st.eq(Mux(stage, cfg.x2.as_value(), cfg.x1.as_value()))
        x1_addr, x2_addr = Signal(ADDR_BITS), Signal(ADDR_BITS)
        # bytes per element = bus words per kernel group, of each stage (registers of the
        # operation's registers: used from the operands on, cycles after start)
        sizes = []
        for operands in (cfg.x1, cfg.x2):
            size, both = Signal(3), operands.use == USE_BOTH
            m.d.sync += size.eq(Mux(operands.wide & both, 4, Mux(operands.wide | both, 2, 1)))
            sizes.append(size)
        esize = Signal(3)
        m.d.comb += esize.eq(Mux(stage, sizes[1], sizes[0]))
        # The stage's words, then its lanes one a cycle: each lane's element is at the
        # bottom of the words, which then shift down by an element (bytes per element =
        # words per kernel group, as the bus word is ``atomic_k`` bytes), and its ALU and
        # multiplier operands shift into the top of the stage's operands.  (All lanes at
        # once, a multiplexer per lane on the format, were the full build's critical path
        # through congested routing: 16.9 ns, 15.7 of them routing, at 59.09 MHz.)
        raw = Signal(4 * 8 * bus)
        word = Signal(2)
        lane = Signal(range(n_k))
        # esize during the decode, one-hot, a copy per word of ``raw`` (``keep``): one
        # select of all 256 bits' shift was the 8x8 build's path at 61.37 MHz, 14.2 ns on
        # its net through congestion
        elems = [Signal(3, name=f"elem_{i}", attrs={"keep": 1}) for i in range(4)]
        assembled = Signal(operand_layout(hw))
        ow = self.operand_write
        # the words are taken and shifted, and the stage's operands shift in, outside the
        # state machine: each word and each operand field on its own copy of the decode's
        # flag (``keep``), set and cleared as the decode starts and ends.  With the state's
        # decode as every bit's select, that one net spread across the die (the 8x8
        # build's critical path at 74.34 MHz, 13.5 ns, 10.9 of them on the net).
        decoding = [Signal(name=f"decoding_{i}", attrs={"keep": 1}) for i in range(8)]
        # each word likewise takes the bus on its own copy of the OPERAND_DATA state's flag
        # (``~body`` as the words' enable was the 8x8 build's path at 84.14 MHz, 6.0 ns on
        # the body flag's net)
        receiving = [Signal(name=f"receiving_{i}", attrs={"keep": 1}) for i in range(4)]
        for i, (flag, elem, bus_flag) in enumerate(zip(decoding[:4], elems, receiving,
                                                        strict=True)):
            shifted = Mux(elem[2], raw >> 32, Mux(elem[1], raw >> 16, raw >> 8))
            chunk = slice(8 * bus * i, 8 * bus * (i + 1))
            with m.If(flag):
                m.d.sync += raw[chunk].eq(shifted[chunk])
            with m.Elif(beat.valid & bus_flag & (word == i)):
                m.d.sync += raw[chunk].eq(beat.payload)
        # Each field decodes on its own registered copy of the stage's format and of
        # whether it is the stage's field (``keep``; a cycle behind the stage, which changes
        # cycles before its words arrive): the stage's net into the format's multiplexer
        # and every field's bits was the 8x8 build's path at 75.04 MHz, 12.6 ns on one net.
        fields = (("alu1", 0), ("mul1", 0), ("alu2", 1), ("mul2", 1))
        for (name, stage_of), flag in zip(fields, decoding[4:], strict=True):
            use = Signal.like(st.use, name=f"decode_use_{name}", attrs={"keep": 1})
            wide = Signal(name=f"decode_wide_{name}", attrs={"keep": 1})
            mine = Signal(name=f"decode_mine_{name}", attrs={"keep": 1})
            m.d.sync += [use.eq(st.use), wide.eq(st.wide), mine.eq(stage == stage_of)]
            first = Mux(wide, raw[:16].as_signed(), raw[:8].as_signed())
            if name.startswith("alu"):
                new = Mux((use == USE_ALU) | (use == USE_BOTH), first, 0)
            else:
                second = Mux(wide, raw[16:32].as_signed(), raw[8:16].as_signed())
                new = Mux(use == USE_MUL, first, Mux(use == USE_BOTH, second, 0))
            field = getattr(assembled, name)
            with m.If(flag & mine):
                m.d.sync += field.eq(Cat(field.as_value()[16:], new))

        # products of the operation's registers, as registers: cfg holds from start, and
        # the first command waits PRODUCTS_SETTLE cycles for them.  The wide ones through
        # registers beside their multipliers (cfg straight into a DSP block and on into
        # ``surface`` was the 8x8 build's path at 83.38 MHz, 12.0 ns: 7.5 of routing)
        taps, block_kernels = Signal(2 * KERNEL_BITS), Signal(SIZE_BITS + 2)
        m.d.sync += [taps.eq(cfg.r * cfg.s),
                     block_kernels.eq(Mux(cfg.kernel_groups == 1, cfg.k, n_k) * (n_c // bus))]
        m.d.comb += [surface.eq(_registered_product(m, "surface", cfg.h, cfg.w, len(surface))),
                     block.eq(_registered_product(m, "block", taps, block_kernels,
                                                  len(block)))]
        settle = Signal(range(PRODUCTS_SETTLE + 1))
        with m.If(starting):
            m.d.sync += settle.eq(PRODUCTS_SETTLE)
        with m.Elif(settle != 0):
            m.d.sync += settle.eq(settle - 1)
        # ---- the operation's start: each group of counters takes its first values on its
        # own registered copy of the start (``launch``, a cycle after it; ``keep``).  As the
        # state machine's decode of the start, one net to all of them, it was the 8x8
        # build's path at 84.68 MHz (11.8 ns, 7.2 of them on that net); the first entry's
        # size and group end, worked out in the same cycle from the operation's registers
        # (two carry chains), the reduced build's at 100.08 MHz.
        surfaces = (cfg.c + bus - 1) >> (bus.bit_length() - 1)     # of C, bus bytes each
        with m.If(launch["fc"]):
            m.d.sync += [fc_y.eq(0), fc_j.eq(0),
                         fc_more.eq(cfg.c != 0), fc_last_surface.eq(bus >= cfg.c),
                         fc_until.eq(surfaces - 3),
                         fc_last_line.eq(cfg.h == 1), h_m2.eq(cfg.h - 2),
                         fc_surf_addr.eq(cfg.feature_addr), fc_line_addr.eq(cfg.feature_addr)]
        with m.If(launch["wc"]):
            m.d.sync += [wc_addr.eq(cfg.weight_addr), wc_left.eq(weight_words),
                         credit.eq(0), spare.eq(weight_words),
                         left_nz.eq(cfg.weight_bytes != 0), credit_nz.eq(0), nth.eq(1)]
        with m.If(launch["fd"]):
            m.d.sync += [features_in.eq(0),
                         fd_until.eq(surfaces - 3), cg.eq(0), j.eq(0), y.eq(0), x.eq(0),
                         x_last.eq(cfg.w == 1), y_last.eq(cfg.h == 1),
                         fd_w_m2.eq(cfg.w - 2),
                         fd_last_surface.eq(bus >= cfg.c), row_base.eq(0), cg_base.eq(0)]
        with m.If(launch["op"]):
            m.d.sync += [kg.eq(0), stage.eq(0), x1_addr.eq(cfg.x1.addr),
                         x2_addr.eq(cfg.x2.addr)]
        with m.If(launch["wa"]):
            m.d.sync += [wkg.eq(0), wcg.eq(0), wkk.eq(0), wr.eq(0), ws.eq(0), level.eq(0),
                         count.eq(0), entries_done.eq(0),
                         c_last.eq(cfg.c - ((cfg.channel_groups - 1) * n_c)),
                         k_last_m1.eq(cfg.k - ((cfg.kernel_groups - 1) * n_k) - 1),
                         s_m1.eq(cfg.s - 1), r_m1.eq(cfg.r - 1),
                         s_m2.eq(cfg.s - 2), r_m2.eq(cfg.r - 2),
                         cg_m3.eq(cfg.channel_groups - 3),
                         kg_m3.eq(cfg.kernel_groups - 3),
                         ws_last.eq(cfg.s == 1), wr_last.eq(cfg.r == 1),
                         wcg_last.eq(cfg.channel_groups == 1),
                         wkg_last.eq(cfg.kernel_groups == 1),
                         cg_one.eq(cfg.channel_groups == 1),
                         cg_two.eq(cfg.channel_groups == 2),
                         wcg_next_last.eq(cfg.channel_groups == 2),
                         wkg_next_last.eq(cfg.kernel_groups == 2)]
        with m.If(launch_flags):
            m.d.sync += [nc.eq(Mux(cg_one, c_last, n_c)), nc_short.eq(cg_one),
                         covers.eq(cg_one & (c_last == 0)),      # count 0 >= nc
                         group_end.eq(Mux(wkg_last, k_last_m1 == 0, n_k == 1))]
        with m.FSM() as fsm:
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += [ready.eq(0), done.eq(0)]
                    m.next = "LAUNCH"
            with m.State("LAUNCH"):             # the counters take their first values
                with m.If(cfg.x1.fetch | cfg.x2.fetch):
                    m.next = "OPERAND_WORDS"
                with m.Else():
                    m.next = "START"
            # ---- SDP operands: per kernel group, X1's then X2's elements
            with m.State("OPERAND_WORDS"):
                with m.If(~st.fetch):
                    m.next = "NEXT_STAGE"
                with m.Elif(cmd.ready):
                    m.d.sync += [word.eq(0), *(flag.eq(1) for flag in receiving)]
                    m.next = "OPERAND_DATA"
            with m.State("OPERAND_DATA"):
                with m.If(beat.valid):
                    m.d.sync += word.eq(word + 1)
                    with m.If(word == esize - 1):
                        m.d.sync += [lane.eq(0), *(elem.eq(esize) for elem in elems),
                                     *(flag.eq(1) for flag in decoding),
                                     *(flag.eq(0) for flag in receiving)]
                        m.next = "OPERAND_DECODE"
            with m.State("OPERAND_DECODE"):
                m.d.sync += lane.eq(lane + 1)
                with m.If(lane == n_k - 1):
                    m.d.sync += [flag.eq(0) for flag in decoding]
                    with m.If(stage):
                        m.d.sync += x2_addr.eq(x2_addr + esize * bus)
                    with m.Else():
                        m.d.sync += x1_addr.eq(x1_addr + esize * bus)
                    m.next = "NEXT_STAGE"
            with m.State("NEXT_STAGE"):
                with m.If(~stage):
                    m.d.sync += stage.eq(1)
                    m.next = "OPERAND_WORDS"
                with m.Else():
                    m.d.sync += [stage.eq(0), kg.eq(kg + 1)]
                    with m.If(kg == cfg.kernel_groups - 1):
                        m.next = "START"
                    with m.Else():
                        m.next = "OPERAND_WORDS"
            # ---- the input and the weights: the convolution starts, each of its reads
            # waiting for its entry
            with m.State("START"):
                with m.If(settle == 0):
                    m.d.sync += [ready.eq(1), body.eq(1)]
                    m.next = "BODY"
            with m.State("BODY"):
                with m.If(~fc_more & (wc_left == 0) & ~tags.r_rdy & entries_done
                          & ~reader.busy):
                    m.d.sync += [done.eq(1), body.eq(0)]
                    m.next = "IDLE"
        operand_words = fsm.ongoing("OPERAND_WORDS") & st.fetch
        m.d.comb += starting.eq(fsm.ongoing("IDLE") & self.start)
        m.d.comb += [
            cmd.valid.eq(operand_words | body_cmd),
            cmd.payload.addr.eq(Mux(body, Mux(wc_ready, wc_addr, fc_line_addr),
                                    Mux(stage, x2_addr, x1_addr))),
            cmd.payload.beats.eq(Mux(body, Mux(wc_ready, piece, cfg.w), esize)),
            beat.ready.eq(fsm.ongoing("OPERAND_DATA")
                          | (body & tags.r_rdy & (~tag_weights | entries_done | room))),
            self.ready.eq(ready),
            self.done.eq(done),
        ]
        # a kernel group's operands are written the cycle after their last stage's decode
        # ends, from registers (the state's decode across the die into the block RAM's
        # port was the 8x8 build's path at 89.61 MHz, 11.2 ns, 9.9 of them routing).  The
        # operands hold: the next decode is cycles away.  The core registers the write once
        # more beside its memory, where it lands the cycle the core starts at the earliest
        write_en, write_kg = Signal(), Signal.like(kg)
        m.d.sync += [write_en.eq(fsm.ongoing("NEXT_STAGE") & stage), write_kg.eq(kg)]
        m.d.comb += [ow.en.eq(write_en), ow.addr.eq(write_kg), ow.data.eq(assembled)]
        return m


class OutputWriter(wiring.Component):
    """SDP's write DMA (see the module docstring).

    Attributes
    ----------
    cfg : ``In``: ``dst_addr``, ``line_stride``, ``surf_stride``, ``out_w``, ``out_h``
    start : ``In(1)`` pulse (before the first beat); ``idle`` : ``Out(1)`` every write
    answered; ``inp`` : ``In(stream)`` of output beats; ``axi`` : AXI4 write channels
    """

    def __init__(self, cfg: HwConfig, outstanding: int = 15) -> None:
        check_bus(cfg)
        self.hw, self.outstanding = cfg, outstanding
        super().__init__({
            "cfg": In(data.StructLayout({"dst_addr": ADDR_BITS, "line_stride": ADDR_BITS,
                                         "surf_stride": ADDR_BITS, "out_w": SIZE_BITS,
                                         "out_h": SIZE_BITS})),
            "start": In(1), "idle": Out(1), "bus_error": Out(1),
            "inp": In(stream.Signature(ResultLayout(cfg))),
            "axi": Out(write_signature(ADDR_BITS, 8 * cfg.atom_size)),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        hw, cfg = self.hw, self.cfg
        m.submodules.writer = writer = AxiWriter(ADDR_BITS, hw.atom_size, self.outstanding)
        wiring.connect(m, wiring.flipped(self.axi), writer.axi)
        m.d.comb += [self.idle.eq(writer.idle), self.bus_error.eq(writer.bus_error)]
        ox, oy = Signal(SIZE_BITS), Signal(SIZE_BITS)
        point = Signal(ADDR_BITS)
        m.d.comb += [writer.req.valid.eq(self.inp.valid), self.inp.ready.eq(writer.req.ready),
                     writer.req.payload.addr.eq(point),
                     writer.req.payload.data.eq(self.inp.payload.data.as_value()),
                     writer.req.payload.strb.eq((1 << hw.atom_size) - 1)]
        # whether the point ends its line and the line its surface, and the next line's and
        # surface's addresses: registers worked out a beat ahead (the comparisons with the
        # registers' sizes behind the next line's sum were the routed full build's
        # critical path, 13.0 ns)
        ox_last, oy_last = Signal(), Signal()
        w_m2, h_m2 = Signal(SIZE_BITS), Signal(SIZE_BITS)     # (compared before the counts move)
        next_row, next_surface = Signal(ADDR_BITS), Signal(ADDR_BITS)
        with m.If(self.start):
            m.d.sync += [ox.eq(0), oy.eq(0), point.eq(cfg.dst_addr),
                         ox_last.eq(cfg.out_w == 1), oy_last.eq(cfg.out_h == 1),
                         w_m2.eq(cfg.out_w - 2), h_m2.eq(cfg.out_h - 2),
                         next_row.eq(cfg.dst_addr + cfg.line_stride),
                         next_surface.eq(cfg.dst_addr + cfg.surf_stride)]
        with m.Elif(self.inp.valid & self.inp.ready):
            m.d.sync += [ox.eq(ox + 1), ox_last.eq(ox == w_m2),
                         point.eq(point + hw.atom_size)]
            with m.If(ox_last):
                m.d.sync += [ox.eq(0), ox_last.eq(cfg.out_w == 1),
                             oy.eq(oy + 1), oy_last.eq(oy == h_m2),
                             point.eq(next_row),
                             next_row.eq(next_row + cfg.line_stride)]
                with m.If(oy_last):                     # the next kernel group's surface
                    m.d.sync += [oy.eq(0), oy_last.eq(cfg.out_h == 1),
                                 point.eq(next_surface),
                                 next_row.eq(next_surface + cfg.line_stride),
                                 next_surface.eq(next_surface + cfg.surf_stride)]
        return m
