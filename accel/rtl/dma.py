"""The engine's DMAs over AXI4: CDMA and SDP_RDMA fetch, SDP's write DMA.

:class:`ConvFetch` does the reads of a direct convolution over one
:class:`~accel.rtl.axi.AxiReader` (several bursts in flight), in NVDLA's blocks: SDP_RDMA
(:class:`~accel.rtl.sdp_rdma.OperandFetch`), then CDMA's feature and weight commands and
the data they bring (:mod:`accel.rtl.cdma`); it issues the commands and routes the data:

1. **SDP operands** first (SDP_RDMA, per-kernel mode): for every kernel
   group, the ``atomic_k`` elements of X1's (BRDMA) and X2's (NRDMA) packed
   1x1xC operand cubes - one or two 8/16-bit components each (ALU first) -
   into one operand memory entry.  Then ``ready`` rises and the convolution
   starts; each of its reads waits until ``feature_level`` / ``weight_level``
   has passed the entry, so it runs as the input and the weights arrive.
2. **Features** (CDMA): the input cube in NVDLA's feature layout (a surface of
   ``atom`` channels per ``SURF_STRIDE``, a line of ``W`` atoms per
   ``LINE_STRIDE``), one command per line, through the input converter
   (:class:`~accel.rtl.cdma.FeatureConverter`) into the feature memory, in one
   of two orders (:func:`rows_first`), each filling the memory in address
   order: *surfaces first* (a surface's lines, then the next surface's; the
   ``atomic_c / atom`` surfaces of channel group ``cg`` fill the lane groups of
   entry ``(cg * H + y) * W + x``) or *rows first* (a row's line of every
   surface, then the next row; entry ``(y * CG + cg) * W + x``).  Surfaces past
   ``C`` do not exist in memory and are not read (the sequencer masks those
   lanes).
3. **Weights** (CDMA): ``WEIGHT_BYTES`` from ``WEIGHT_ADDR`` in NVDLA's
   direct-convolution order (kernel group, channel group, tap, kernel,
   channel - channels and kernels of the last groups packed without padding)
   through a byte aligner into weight memory entries; the entries of kernels
   past ``K`` are skipped, not written (the sequencer loads zeros for them).

The commands of 2 and 3 interleave in the order the convolution's first
kernel group consumes them: a channel group's weights of the first kernel group
follow its last line (surfaces first; with one channel group, whose lines are
the whole input, they go first unless the input is no larger than them, ``H * W
<= R * S * min(K, atomic_k)`` entries: its rounds then start once the input and
the first tap's kernels are in, not after the whole block) or its line of the
first row (rows first); the other kernel groups' weights after the last line.  A
tag per command (weights or a line, and its words) routes the data as they come back.

The sequencer's rounds take a stripe of output points through every channel
group, so rows first gives them their input as it arrives, all channel groups
of a few rows at a time, where surfaces first makes a stripe wait for nearly
the whole input (a 1x1 convolution of 64 channels took twice the estimate).
Surfaces first starts the first rounds sooner (one channel group's input and
weights), which matters when the weights are the larger part of the fetch: the
rounds then have to keep pace with the weights from the start.

:class:`OutputWriter` is SDP's write DMA: every output beat (``atomic_k``
channels of one point, kernel group by kernel group in raster order) to
``DST_BASE + kg * DST_SURFACE_STRIDE + oy * DST_LINE_STRIDE + ox * atom``.

The bus word is one memory atom (``memory_atomic_size`` bytes); the engine
needs ``atomic_k == memory_atomic_size`` (every NVDLA preset has it), so an
output beat is one word.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from accel.config import HwConfig
from accel.rtl.axi import BEAT_BITS, AxiReader, AxiWriter, read_signature, write_signature
from accel.rtl.cdma import (
    ConverterLayout,
    FeatureCommands,
    FeatureConverter,
    FeatureWriter,
    WeightAligner,
    WeightCommands,
)
from accel.rtl.cdma_image import (
    ImageCommands,
    ImageLayout,
    ImageWriter,
    image_shape_ok,
    lane_offsets,
)
from accel.rtl.cmac import registered_multiply
from accel.rtl.conv_layout import (
    ADDR_BITS,
    KERNEL_BITS,
    SIZE_BITS,
    operand_write_layout,
    write_layout,
)
from accel.rtl.credits import PointerSlice, SlicedFIFO, StreamSlice
from accel.rtl.postproc import ResultLayout
from accel.rtl.sdp_rdma import OperandFetch, OperandFetchLayout
from accel.rtl.timing import kept, kept_copies, registered_copies, set_all

#: bursts the CDMA's reader keeps in flight
READ_BURSTS = 4


class FetchConfigLayout(data.StructLayout):
    """What :class:`ConvFetch` reads from the registers."""

    def __init__(self) -> None:
        size = SIZE_BITS
        super().__init__({
            "feature_addr": ADDR_BITS, "line_stride": ADDR_BITS, "surf_stride": ADDR_BITS,
            "c": size, "h": size, "w": size, "k": size, "r": KERNEL_BITS, "s": KERNEL_BITS,
            "channel_groups": size, "kernel_groups": size,
            "weight_addr": ADDR_BITS, "weight_bytes": ADDR_BITS,
            "x1": OperandFetchLayout(), "x2": OperandFetchLayout(), "cvt": ConverterLayout(),
            "image": ImageLayout(),
        })


#: cycles after an operation's start before the fetch issues its first command: the
#: products of the operation's registers (:func:`_registered_product`, ``block`` and the
#: kernels' taps products of a product) and the order decided from them are ready by then
PRODUCTS_SETTLE = 6


def _registered_product(m: Module, name: str, a, b, width: int) -> Signal:
    """``a * b`` (truncated to ``width`` bits) three cycles after ``a`` and ``b``: the
    multiplier's operands and product in fabric registers beside it
    (:func:`accel.rtl.cmac.registered_multiply`), then the value in a register beside its
    users.  ``a`` and ``b`` must hold (the operation's registers)."""
    product = kept(f"{name}_product", width)
    value = Signal(width, name=name)
    registered_multiply(m, name, a, b, product, ecp5=False)
    m.d.sync += value.eq(product)
    return value


def feature_groups(cfg: HwConfig) -> int:
    """Memory surfaces per feature memory entry (``atomic_c / atom``)."""
    return cfg.atomic_c // cfg.atom_size


def rows_first(taps: int, k: int, h: int, w: int, image: bool = False) -> bool:
    """Whether the fetch takes the input rows first (else surfaces first; module
    docstring): when the input is at least as large as the weights (``R * S * K <= H *
    W``, both divided by ``C``), so that the rounds keep pace with the larger stream.
    Image input fills its memory once the last row is in: surfaces first."""
    return not image and taps * k <= h * w


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
    rows_first : ``Out(1)`` the order of the input (:func:`rows_first`), from ``ready`` on
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
            "start": In(1), "ready": Out(1), "done": Out(1), "rows_first": Out(1),
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
        # (its bursts' addresses through a slice: the engine's bus flag into its address
        # registers' enables was 10.5 ns in the full engine)
        m.submodules.reader = reader = AxiReader(ADDR_BITS, hw.atom_size, bursts=READ_BURSTS,
                                                 sliced_address=True)
        wiring.connect(m, wiring.flipped(self.axi), reader.axi)
        m.d.comb += self.bus_error.eq(reader.bus_error)
        # the commands reach the reader through a slice (the reader's command register
        # through the commands' choice into the command blocks' enables and back into
        # that register, 12.7-13.1 ns in the full engine), in three parts: each of the
        # blocks whose counts step on an issued command takes it on a copy of the slice's
        # ready of its own (below).  The words come through one too (the weight aligner's
        # room through the words' ready into the reader's buffer was 12.23 ns), one that
        # keeps its words in place, since their ready is that room (into a skid buffer's
        # enables, 12.28 ns)
        m.submodules.commands = commands = StreamSlice(reader.cmd.payload.shape(), parts=3)
        wiring.connect(m, commands.out, reader.cmd)
        m.submodules.arriving = arriving = PointerSlice(reader.data.payload.shape())
        wiring.connect(m, reader.data, arriving.inp)
        cmd, beat = commands.inp, arriving.out
        ready, done, drained = Signal(), Signal(), Signal()
        body = Signal()                          # features and weights under way
        body_begins = Signal()                   # its first cycle is next
        starting = Signal()                      # a start, in the idle state
        # each block takes its first values on its own kept copy of the start, a cycle
        # after it
        m.submodules.feature_commands = fc = FeatureCommands(cfg, hw)
        m.submodules.weight_commands = wc = WeightCommands(cfg, hw)
        m.submodules.converter = cv = FeatureConverter(hw.atom_size)
        m.submodules.features = fd = FeatureWriter(cfg, hw, self.entries[0])
        m.submodules.weights = wa = WeightAligner(cfg, hw, self.entries[1])
        m.submodules.operands = op = OperandFetch(hw, cfg.x1, cfg.x2, cfg.kernel_groups,
                                                  self.entries[2])
        blocks = [fc, wc, fd, wa, op]
        # image input (nv_small's shape): the rows' commands and the line buffer writing
        # the windows, in place of the feature lines' (``image``: this operation's)
        image = Signal()
        # the choice of the writer the converted words go to (and whose writes reach the
        # memory) from registered copies of their own: the words come many cycles after
        # the start (the operation's one register into the feature writer's counts was
        # 11.28 ns in the full engine)
        to_features = to_image = to_memory = Const(0)
        # and the body's commands, the image rows' and the feature lines', on copies of
        # their own (the operation's register into both blocks' issue and address
        # enables was 10.1-10.7 ns in the full engine)
        image_rows = feature_lines_image = Const(0)
        if image_shape_ok(hw):
            m.submodules.image_commands = ic = ImageCommands(cfg, hw)
            m.submodules.image = iw = ImageWriter(cfg, hw, self.entries[0])
            blocks += [ic, iw]
            m.d.comb += image.eq(cfg.image.enable)
            to_features, to_image, to_memory = registered_copies(m, "image_words",
                                                                 cfg.image.enable, 3)
            image_rows, feature_lines_image = registered_copies(m, "image_commands",
                                                                cfg.image.enable, 2)
        launches = kept_copies("launch", len(blocks))
        m.d.sync += set_all(launches, starting)
        for block, launch in zip(blocks, launches, strict=True):
            m.d.comb += block.launch.eq(launch)
        settle, surface, order, lines_first = self._products(m, starting, wc)
        m.d.comb += [fc.rows_first.eq(order), fd.rows_first.eq(order), fd.surface.eq(surface),
                     self.rows_first.eq(order)]

        # what each command issued in the body reads, in order: its words and whether
        # they are weights (else one line of features)
        # (read through a slice: its read enable is the words' take, a decision on the
        # weight aligner's room, 10.6 ns into the FIFO's output register in the full engine)
        m.submodules.tags = tags = SlicedFIFO(BEAT_BITS + 1, READ_BURSTS + 4)
        tag_beats, tag_weights = tags.r_data[:BEAT_BITS], tags.r_data[BEAT_BITS]
        issue = Signal()                         # a body command is taken now
        body_cmd = Signal()
        # a line: the next feature line, or image row (whose command waits for a free
        # buffer row); the weights go first for image input (its rows are in only once all
        # are: nothing to interleave with)
        lines, line_addr, line_beats = fc.more, fc.line_addr, cfg.w
        if image_shape_ok(hw):
            lines = Mux(image_rows, ic.more & iw.room, fc.more)
            line_addr = Mux(image_rows, ic.addr, fc.line_addr)
            line_beats = Mux(image_rows, ic.beats, cfg.w)
            m.d.comb += [ic.issue.eq(issue & ~wc.ready & image_rows), iw.issued.eq(ic.issue)]
        beats = Mux(wc.ready, wc.piece, line_beats)
        # (the slice's one ready into every count of the command blocks was 11.00 ns in
        # the full engine: the feature lines' and the weights' take copies of their own)
        fc_ready, wc_ready = commands.ready_copies[1], commands.ready_copies[2]
        m.d.comb += [body_cmd.eq(body & tags.w_rdy & (wc.ready | lines)),
                     issue.eq(body_cmd & cmd.ready),
                     # (body_cmd with the weights not ready: its lines are the feature
                     # lines', from their own block's flag, not through the image choice)
                     fc.issue.eq(body & tags.w_rdy & fc.more & ~wc.ready & ~feature_lines_image
                                 & fc_ready),
                     wc.issue.eq(body_cmd & wc_ready),
                     wc.lines_left.eq(fc.more),
                     # a block of weight credit after each channel group's last (or, rows
                     # first, first) line; with one channel group, whose lines are the
                     # whole input, as the body starts (its weights before its lines)
                     # unless the input is no larger than the block
                     wc.group_issued.eq(fc.group_issued
                                        | (body_begins & (cfg.channel_groups == 1)
                                           & ~order & ~lines_first))]
        m.d.comb += [tags.w_en.eq(issue),
                     tags.w_data.eq(Cat(beats.as_unsigned()[:BEAT_BITS], wc.ready))]
        # the data, routed by the tag of the command they answer: the word at the bus is
        # the nth of its command (counted from 1, so that its last word is an equality
        # with the tag, no subtraction)
        nth = Signal(BEAT_BITS, init=1)
        with m.If(beat.valid & beat.ready & body):
            m.d.sync += nth.eq(Mux(nth == tag_beats, 1, nth + 1))
        with m.If(wc.launch):
            m.d.sync += nth.eq(1)
        m.d.comb += tags.r_en.eq(beat.valid & beat.ready & body & (nth == tag_beats))
        # the converter's registers; image input puts its channels' means in their bytes'
        # lanes
        m.d.comb += cv.cfg.eq(cfg.cvt)
        if image_shape_ok(hw):          # (the later assignment of the offsets wins)
            m.d.comb += [lane.eq(o) for lane, o in zip(cv.cfg.offset, lane_offsets(m, cfg),
                                                       strict=True)]
        m.d.comb += [cv.valid.eq(body & tags.r_rdy & ~tag_weights & beat.valid),
                     cv.word.eq(beat.payload),
                     fd.valid.eq(cv.out_valid & ~to_features), fd.word.eq(cv.out),
                     wa.body.eq(body),
                     wa.valid.eq(body & tags.r_rdy & tag_weights & beat.valid),
                     wa.word.eq(beat.payload),
                     op.beat_valid.eq(beat.valid), op.beat_word.eq(beat.payload),
                     op.cmd_ready.eq(cmd.ready)]
        m.d.comb += [self.weight_write.eq(wa.write), self.operand_write.eq(op.write),
                     self.weight_level.eq(wa.level)]
        images_busy = Const(0)
        if image_shape_ok(hw):
            m.d.comb += [iw.valid.eq(cv.out_valid & to_image), iw.word.eq(cv.out),
                         iw.surface.eq(surface),
                         self.feature_write.eq(Mux(to_memory, iw.write.as_value(),
                                                   fd.write.as_value())),
                         self.feature_level.eq(Mux(image, iw.level, fd.level))]
            images_busy = iw.busy
        else:
            m.d.comb += [self.feature_write.eq(fd.write), self.feature_level.eq(fd.level)]

        with m.FSM() as fsm:
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += [ready.eq(0), done.eq(0)]
                    m.next = "LAUNCH"
            with m.State("LAUNCH"):             # the blocks take their first values
                with m.If(cfg.x1.fetch | cfg.x2.fetch):
                    m.next = "OPERANDS"
                with m.Else():
                    m.next = "START"
            with m.State("OPERANDS"):           # SDP_RDMA: the per-kernel operands
                with m.If(op.finished):
                    m.next = "START"
            # the input and the weights: the convolution starts, each of its reads
            # waiting for its entry
            with m.State("START"):
                with m.If(settle == 0):
                    m.d.sync += [ready.eq(1), body.eq(1)]
                    m.next = "BODY"
            with m.State("BODY"):
                with m.If(drained):
                    m.d.sync += [done.eq(1), body.eq(0)]
                    m.next = "IDLE"
        # every block finished and nothing left on the way, a register of the body's
        # cycles (each term stays true once true): the body ends a cycle after it (the
        # blocks' flags from across the fetch into the state and ``done`` were 10.9 ns in
        # the full engine)
        m.d.sync += drained.eq(fsm.ongoing("BODY") & ~fc.more & wc.finished & ~tags.r_rdy
                               & wa.done & ~reader.busy & (commands.level == 0)
                               & (arriving.level == 0) & ~cv.busy & ~images_busy)
        m.d.comb += [starting.eq(fsm.ongoing("IDLE") & self.start),
                     body_begins.eq(fsm.ongoing("START") & (settle == 0)),
                     op.go.eq(fsm.ongoing("LAUNCH") & (cfg.x1.fetch | cfg.x2.fetch))]
        m.d.comb += [
            cmd.valid.eq(op.cmd_valid | body_cmd),
            cmd.payload.addr.eq(Mux(body, Mux(wc.ready, wc.addr, line_addr), op.cmd_addr)),
            cmd.payload.beats.eq(Mux(body, beats, op.cmd_beats)),
            beat.ready.eq(op.receiving
                          | (body & tags.r_rdy & (~tag_weights | wa.done | wa.room))),
            self.ready.eq(ready),
            self.done.eq(done),
        ]
        return m

    def _products(self, m: Module, starting: Signal,
                  weights: WeightCommands) -> tuple[Signal, Signal, Signal, Signal]:
        """The products of the operation's registers, as registers (cfg holds from start):
        the weight words of a channel group's first kernels, a channel group's feature
        entries (``H * W``), and from them the order of the input (:func:`rows_first`) and
        whether a single channel group's lines go before its weights (the module
        docstring).  Returns the count of the cycles the first command waits
        for them (:data:`PRODUCTS_SETTLE`), the entries, the order and that flag."""
        cfg, n_c, n_k, bus = self.cfg, self.hw.atomic_c, self.hw.atomic_k, self.hw.atom_size
        taps, block_kernels = Signal(2 * KERNEL_BITS), Signal(SIZE_BITS + 2)
        m.d.sync += [taps.eq(cfg.r * cfg.s),
                     block_kernels.eq(Mux(cfg.kernel_groups == 1, cfg.k, n_k) * (n_c // bus))]
        surface = _registered_product(m, "surface", cfg.h, cfg.w, 2 * SIZE_BITS)
        kernel_taps = _registered_product(m, "kernel_taps", taps, cfg.k,
                                          2 * KERNEL_BITS + SIZE_BITS)
        order = Signal()
        m.d.sync += order.eq(~cfg.image.enable & (kernel_taps <= surface))
        block = _registered_product(m, "block", taps, block_kernels, len(weights.block))
        m.d.comb += weights.block.eq(block)
        small = Signal()           # the input's words are no more than the block's
        m.d.sync += small.eq(~cfg.image.enable
                             & ((surface << exact_log2(n_c // bus)) <= block))
        settle = Signal(range(PRODUCTS_SETTLE + 1))
        with m.If(starting):
            m.d.sync += settle.eq(PRODUCTS_SETTLE)
        with m.Elif(settle != 0):
            m.d.sync += settle.eq(settle - 1)
        return settle, surface, order, small


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
        # the beats' data come in through a slice, so that the handshake stepping the
        # address counts is between registers of the writer's own (the engine's choice of
        # the results through the writer's ready into the counts' enables was 12.96 ns in
        # the full engine)
        data = self.inp.payload.data.as_value()
        m.submodules.beats = beats = StreamSlice(len(data))
        m.d.comb += [beats.inp.valid.eq(self.inp.valid), beats.inp.payload.eq(data),
                     self.inp.ready.eq(beats.inp.ready)]
        beat = beats.out
        m.d.comb += [self.idle.eq(writer.idle & (beats.level == 0)),
                     self.bus_error.eq(writer.bus_error)]
        ox, oy = Signal(SIZE_BITS), Signal(SIZE_BITS)
        point = Signal(ADDR_BITS)
        m.d.comb += [writer.req.valid.eq(beat.valid), beat.ready.eq(writer.req.ready),
                     writer.req.payload.addr.eq(point), writer.req.payload.data.eq(beat.payload),
                     writer.req.payload.strb.eq((1 << hw.atom_size) - 1)]
        # whether the point ends its line and the line its surface, and the next line's and
        # surface's addresses: registers worked out a beat ahead (no comparison with the
        # registers' sizes behind the next line's sum)
        ox_last, oy_last = Signal(), Signal()
        w_m2, h_m2 = Signal(SIZE_BITS), Signal(SIZE_BITS)     # (compared before the counts move)
        next_row, next_surface = Signal(ADDR_BITS), Signal(ADDR_BITS)
        with m.If(self.start):
            m.d.sync += [ox.eq(0), oy.eq(0), point.eq(cfg.dst_addr),
                         ox_last.eq(cfg.out_w == 1), oy_last.eq(cfg.out_h == 1),
                         w_m2.eq(cfg.out_w - 2), h_m2.eq(cfg.out_h - 2),
                         next_row.eq(cfg.dst_addr + cfg.line_stride),
                         next_surface.eq(cfg.dst_addr + cfg.surf_stride)]
        with m.Elif(beat.valid & beat.ready):
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
