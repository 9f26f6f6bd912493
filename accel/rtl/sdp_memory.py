"""SDP reading its input cube from memory: X1, X2 and the converter over an int8 cube.

The same arithmetic as behind the CACC (:class:`~accel.rtl.postproc.PostProcessor`, with
no truncation: an int8 input sign-extended is the value X1 takes), fed by SDP_RDMA's
reads instead of the convolution and written by SDP's write DMA
(:class:`~accel.rtl.dma.OutputWriter`), as the cmodel's :func:`accel.cmod.sdp.decode` /
``SdpPlan.execute`` computes it for ``FLYING_MODE`` off:

* the **input** (MRDMA): an atom per point, surface by surface, line by line;
* **operands** of X1 (BRDMA) and X2 (NRDMA) where a stage is on and its ALU or multiplier
  takes its operand from memory: per element (``DATA_MODE`` 1: a cube of the input's
  points, ``atom`` lanes of one or two components of one or two bytes each, with the
  DMA's own line and surface strides) or per kernel (a packed 1xC vector, a surface's
  lanes read once at the surface's start).  One-byte operands are sign-extended; with
  ``DATA_USE`` BOTH the ALU's component comes first;
* the **output** as the write DMA stores it: whole atoms, the padded lanes of the last
  surface computed like the others.

One :class:`~accel.rtl.axi.AxiReader` serves the three streams: a walker issues, for each
chunk of up to :data:`CHUNK` points of a line, the input's command and each per-element
operand's, and a tag per command routes the returned words into a FIFO per stream.  A
command goes out only while its FIFO has half its depth free, room for its largest
(credits: :class:`TaggedStreams`), so the
reads, answered in order, never wait on each other.  An assembler takes a point's words
(one input word, ``esize`` words per operand stream) and offers the beat to the
post-processor, which computes at SDP's throughput (a lane per cycle on nv_small).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from accel.config import HwConfig
from accel.rtl.axi import AxiReader, read_signature, write_signature
from accel.rtl.conv_layout import ADDR_BITS, SIZE_BITS
from accel.rtl.credits import SlicedFIFO
from accel.rtl.dma import OutputWriter, check_bus
from accel.rtl.postproc import (
    BeatLayout,
    ConfigLayout,
    LaneGroups,
    PostProcessor,
    lane_group_counts,
    lanes_per_cycle,
    memory_ready_copies,
)
from accel.rtl.sdp_rdma import DECODE_LANES
from accel.rtl.timing import PassCount, kept_copies, registered_copy, set_all, stage

#: points per command of a line (the input's FIFO holds two chunks)
CHUNK = 8
#: the most words an operand takes per point: 4 bytes a lane (two 16-bit components)
MAX_OPERAND_WORDS = 4
#: ``DATA_USE`` values of SDP_RDMA's operand DMAs
USE_MUL, USE_ALU, USE_BOTH = 0, 1, 2
#: the operand streams by X stage: SDP register prefix, SDP_RDMA DMA, SDP_RDMA address prefix
STREAMS = {"x1": ("BS", "BRDMA", "BS"), "x2": ("BN", "NRDMA", "BN")}


class OperandLayout(data.StructLayout):
    """Where one X stage's operands come from."""

    def __init__(self) -> None:
        super().__init__({"fetch": 1, "per_element": 1, "use": 2, "wide": 1,
                          "base": ADDR_BITS, "line": ADDR_BITS, "surf": ADDR_BITS})


class SdpMemoryConfigLayout(data.StructLayout):
    """One operation's registers as the unit uses them (sizes as counts)."""

    def __init__(self) -> None:
        super().__init__({
            "surfaces": SIZE_BITS, "h": SIZE_BITS, "w": SIZE_BITS,
            "src": ADDR_BITS, "src_line": ADDR_BITS, "src_surf": ADDR_BITS,
            "dst": ADDR_BITS, "dst_line": ADDR_BITS, "dst_surf": ADDR_BITS,
            "post": ConfigLayout(), "x1": OperandLayout(), "x2": OperandLayout(),
        })


def operand_needed(field, stage: str):
    """Whether X stage ``stage`` (``"x1"``/``"x2"``) reads operands from memory, from SDP's
    registers: the stage is on and an active ALU or multiplier has source MEM."""
    p = STREAMS[stage][0]
    sdp, cfg = "NVDLA_SDP", f"D_DP_{p}_CFG"
    return ~field(sdp, cfg, f"{p}_BYPASS") & (
        (~field(sdp, cfg, f"{p}_ALU_BYPASS") & field(sdp, f"D_DP_{p}_ALU_CFG", f"{p}_ALU_SRC"))
        | (~field(sdp, cfg, f"{p}_MUL_BYPASS")
           & field(sdp, f"D_DP_{p}_MUL_CFG", f"{p}_MUL_SRC")))


def config_from_registers(field, hw: HwConfig, post_fields):
    """A function of a :class:`SdpMemoryConfigLayout` signal giving its assignments from
    the consumer groups' registers (``field(unit, reg, name=None)``); ``post_fields(post)``
    gives the post-processing's (X1, X2, the converter; CACC's truncation is 0 here)."""
    sdp, rdma = "NVDLA_SDP", "NVDLA_SDP_RDMA"
    shift = hw.atom_size.bit_length() - 1

    def assign(cfg) -> list:
        out = [
            cfg.surfaces.eq((field(sdp, "D_DATA_CUBE_CHANNEL", "CHANNEL") >> shift) + 1),
            cfg.h.eq(field(sdp, "D_DATA_CUBE_HEIGHT", "HEIGHT") + 1),
            cfg.w.eq(field(sdp, "D_DATA_CUBE_WIDTH", "WIDTH") + 1),
            cfg.src.eq(field(rdma, "D_SRC_BASE_ADDR_LOW")),
            cfg.src_line.eq(field(rdma, "D_SRC_LINE_STRIDE")),
            cfg.src_surf.eq(field(rdma, "D_SRC_SURFACE_STRIDE")),
            cfg.dst.eq(field(sdp, "D_DST_BASE_ADDR_LOW")),
            cfg.dst_line.eq(field(sdp, "D_DST_LINE_STRIDE")),
            cfg.dst_surf.eq(field(sdp, "D_DST_SURFACE_STRIDE")),
            *post_fields(cfg.post), cfg.post.truncate.eq(0),
        ]
        for name in STREAMS:
            out += operand_fields(field, name, getattr(cfg, name))
        return out
    return assign


def writer_config(writer, cfg) -> list:
    """Assignments of SDP's write DMA's registers (``writer``, an
    :class:`~accel.rtl.dma.OutputWriter`'s ``cfg``) for an operation ``cfg``
    (:class:`SdpMemoryConfigLayout`)."""
    return [writer.dst_addr.eq(cfg.dst), writer.line_stride.eq(cfg.dst_line),
            writer.surf_stride.eq(cfg.dst_surf), writer.out_w.eq(cfg.w),
            writer.out_h.eq(cfg.h)]


def operand_fields(field, stage: str, op) -> list:
    """Assignments of an :class:`OperandLayout` ``op`` for X stage ``stage`` from SDP's and
    SDP_RDMA's registers (``field(unit, reg, name=None)``)."""
    _, dma, pre = STREAMS[stage]
    rdma = "NVDLA_SDP_RDMA"
    return [op.fetch.eq(operand_needed(field, stage)),
            op.per_element.eq(field(rdma, f"D_{dma}_CFG", f"{dma}_DATA_MODE")),
            op.use.eq(field(rdma, f"D_{dma}_CFG", f"{dma}_DATA_USE")),
            op.wide.eq(field(rdma, f"D_{dma}_CFG", f"{dma}_DATA_SIZE")),
            op.base.eq(field(rdma, f"D_{pre}_BASE_ADDR_LOW")),
            op.line.eq(field(rdma, f"D_{pre}_LINE_STRIDE")),
            op.surf.eq(field(rdma, f"D_{pre}_SURFACE_STRIDE"))]


def word_shift(op):
    """log2 of the bus words an operand element of ``op`` takes per point (its bytes per
    lane: one or two components of one or two bytes)."""
    return ((op.use == USE_BOTH) + op.wide)[:2]


def chunk_words(points, shift):
    """Bus words of ``points`` points of an operand of :func:`word_shift` ``shift``, as a
    shift by 0..2 (not a multiplier)."""
    return points << shift


def words_per_point(op) -> Signal:
    """Bus words an operand element of ``op`` takes per point: its bytes per lane."""
    return 1 << word_shift(op)


def decode_lanes(m: Module, name: str, raw, op, lanes: int, on=None) -> list[tuple]:
    """``(alu, mul)`` operands of each of ``lanes`` lanes from a point's words ``raw`` (one
    or two components of one or two bytes per lane, sign-extended; with ``DATA_USE`` BOTH
    the ALU's component first; a single component serves the unit ``DATA_USE`` names); 0
    where ``on`` (if given) is not set.

    Every :data:`~accel.rtl.sdp_rdma.DECODE_LANES` lanes decode on registered copies of
    ``op``'s format (and ``on``) of their own, ``name_*``: the operation's registers into
    every lane's choice were the full engine's paths at 74-78 MHz.  The format must hold
    from a cycle before the first words arrive (an operation's registers do)."""
    out = []
    for i in range(lanes):
        if i % DECODE_LANES == 0:
            tag = f"{name}_{i // DECODE_LANES}"
            # (the format's choices decoded before their copies)
            both = registered_copy(m, f"{tag}_both", op.use == USE_BOTH)
            is_mul = registered_copy(m, f"{tag}_mul", op.use == USE_MUL)
            wide = registered_copy(m, f"{tag}_wide", op.wide)
            kept_on = registered_copy(m, f"{tag}_on", on) if on is not None else None

        def comp(j: int, nbytes: int, esize: int, i=i):
            """Component ``j`` of lane ``i`` in elements of ``esize`` bytes."""
            at = 8 * (i * esize + j * nbytes)
            return raw[at:at + 8 * nbytes].as_signed()
        # (one byte, one component) (one byte, two) (two bytes, one) (two, two)
        first = Mux(wide, Mux(both, comp(0, 2, 4), comp(0, 2, 2)),
                    Mux(both, comp(0, 1, 2), comp(0, 1, 1)))
        second = Mux(wide, comp(1, 2, 4), comp(1, 1, 2))
        pair = (first, Mux(is_mul, first, second))
        if kept_on is not None:
            pair = tuple(Mux(kept_on, x, 0) for x in pair)
        out.append(pair)
    return out


class TaggedStreams:
    """Streams of words read by one :class:`~accel.rtl.axi.AxiReader`: a FIFO per stream
    (``fifos``, read by the caller), each with credits for its room, and a tag per command
    (its stream and words) that routes the words of the answer, which come in command
    order.  The caller issues a command on ``cmd_stream``/``cmd_words`` only when ``fits``
    and ``tags.w_rdy``, and says so on ``issue``; each word it takes from a FIFO gives a
    credit back.

    ``fits`` is a register's: its stream's FIFO has half its depth free (each stream's
    depth is at least twice its largest command), compared with the credits' register,
    which counts the commands and words taken a cycle late, and no command of the stream
    in the last two cycles is still to be counted.  (The command's word count into a
    comparison with the credits, on into the issue and the credits' adders, was the unit's
    path on an ECP5 at 72 MHz; the credits' two adders into the comparison, at 94 MHz.)"""

    def __init__(self, m: Module, word, depths: dict[str, int], word_bits: int) -> None:
        self.names = list(depths)
        self.fifos = {n: SlicedFIFO(word_bits, d) for n, d in depths.items()}
        for n, f in self.fifos.items():
            m.submodules[f"{n}_words"] = f
        self.credits = {n: Signal(range(d + 1), init=d, name=f"{n}_credits")
                        for n, d in depths.items()}
        tag_layout = data.StructLayout({"stream": 2, "words": 6})
        m.submodules.tags = self.tags = tags = fifo.SyncFIFOBuffered(width=tag_layout.size,
                                                                    depth=8)
        self.cmd_stream, self.cmd_words, self.issue = Signal(2), Signal(6), Signal()
        self.fits = Signal()
        m.d.comb += [tags.w_data.eq(Cat(self.cmd_stream, self.cmd_words)),
                     tags.w_en.eq(self.issue)]
        tag = data.View(tag_layout, tags.r_data)
        left = Signal(6)                        # words of the head tag not yet routed
        first_word = Signal(init=1)             # ``left`` is not loaded yet for the head tag
        ready = Signal()
        taken_words = Signal(6)
        m.d.sync += taken_words.eq(self.cmd_words)
        for i, n in enumerate(self.names):
            f, credits = self.fifos[n], self.credits[n]
            m.d.comb += f.w_data.eq(word.payload)
            with m.If(tag.stream == i):
                m.d.comb += [f.w_en.eq(tags.r_rdy & word.valid), ready.eq(f.w_rdy)]
            # credits: taken by a command, given back by each word the caller takes, each
            # counted a cycle later
            taken, given = Signal(name=f"{n}_taken"), Signal(name=f"{n}_given")
            room = Signal(init=1, name=f"{n}_room")
            m.d.sync += [taken.eq(self.issue & (self.cmd_stream == i)),
                         given.eq(f.r_en & f.r_rdy)]
            taken_before = stage(m, f"{n}_taken_before", taken)
            m.d.sync += [credits.eq(credits - Mux(taken, taken_words, 0) + given),
                         room.eq(credits >= depths[n] // 2)]
            with m.If(self.cmd_stream == i):
                m.d.comb += self.fits.eq(room & ~taken & ~taken_before)
        m.d.comb += word.ready.eq(tags.r_rdy & ready)
        with m.If(word.valid & word.ready):
            words_left = Mux(first_word, tag.words, left)
            m.d.sync += [left.eq(words_left - 1), first_word.eq(words_left == 1)]
            m.d.comb += tags.r_en.eq(words_left == 1)


class PointWords:
    """A point's words of one stream, read from its FIFO ``f`` (a ``SyncFIFO``-like read
    side) into ``held`` (:data:`MAX_OPERAND_WORDS` registers ``name_word*``) while
    ``enable``.  ``restart``: the point is done, the next starts with none, needing
    ``need_next`` words (a register's value or a decode of registers, valid in that cycle).

    ``more`` (whether words are still missing) is a register worked out from the next
    count and the next need, so that each word's read enable is one gate of flip-flops (a
    comparison of the count and a need chosen by the surface, into the enables of every
    held word, were the full engine's paths at 76-78 MHz).  ``done``: no word missing."""

    def __init__(self, m: Module, name: str, f, word_bits: int, enable, restart,
                 need_next) -> None:
        self.held = [Signal(word_bits, name=f"{name}_word{i}") for i in range(MAX_OPERAND_WORDS)]
        got = Signal(range(MAX_OPERAND_WORDS + 1), name=f"{name}_got")
        need = Signal.like(got, name=f"{name}_need")
        self.more = Signal(name=f"{name}_more")
        m.d.comb += f.r_en.eq(enable & self.more)
        read = f.r_en & f.r_rdy
        got_next = Mux(restart, 0, Mux(read, got + 1, got))
        need_after = Mux(restart, need_next, need)
        m.d.sync += [got.eq(got_next), need.eq(need_after), self.more.eq(got_next < need_after)]
        with m.If(read):
            with m.Switch(got):
                for i in range(MAX_OPERAND_WORDS):
                    with m.Case(i):
                        m.d.sync += self.held[i].eq(f.r_data)
        self.done = ~self.more


class LineChunks:
    """A line's points in chunks of :data:`CHUNK`: the chunk's point count (``points``) and
    whether it ends the line (``last``), registers stepped with the chunk, as are the
    points from the chunk on.  (Worked out from a column count, ``width - x``, its minimum
    with the chunk, the command's word count and its credit test were one path, 22-23 ns
    on an ECP5.)  ``width`` must hold from :meth:`first` on."""

    def __init__(self, m: Module, width) -> None:
        self.width = width
        self.points = Signal(range(CHUNK + 1), name="chunk_points")
        self.last = Signal(name="chunk_last")
        self.rest = Signal(SIZE_BITS, name="line_rest")       # the line's points from here
        # a line's first chunk, for the lines after the first
        self.line_points = Signal(range(CHUNK + 1), name="line_first_points")
        self.line_one = Signal(name="line_one_chunk")
        m.d.sync += [self.line_points.eq(Mux(width > CHUNK, CHUNK, width)),
                     self.line_one.eq(width <= CHUNK)]

    def first(self, m: Module) -> None:
        """The operation's first chunk next cycle (in the caller's conditions)."""
        width = self.width
        m.d.sync += [self.rest.eq(width), self.points.eq(Mux(width > CHUNK, CHUNK, width)),
                     self.last.eq(width <= CHUNK)]

    def next(self, m: Module) -> None:
        """The next chunk next cycle, or the next line's first after the last."""
        rest = self.rest
        m.d.sync += [rest.eq(rest - CHUNK),
                     self.points.eq(Mux(rest > 2 * CHUNK, CHUNK, rest - CHUNK)),
                     self.last.eq(rest <= 2 * CHUNK)]
        with m.If(self.last):
            m.d.sync += [rest.eq(self.width), self.points.eq(self.line_points),
                         self.last.eq(self.line_one)]


class SdpMemory(wiring.Component):
    """See the module docstring.

    Attributes
    ----------
    cfg : ``In(SdpMemoryConfigLayout())``, held while the operation runs
    start : ``In(1)``, a pulse; done : ``Out(1)``, a pulse once the last write is answered
    busy : ``Out(1)`` from ``start`` to ``done``, both included
    bus_error : ``Out(1)``, sticky
    axi_read, axi_write : the AXI4 read and write channels (no ``axi_write`` when shared)

    ``shared``: the unit beside a convolution uses the convolution's SDP datapath and write
    DMA (NVDLA has one SDP; :class:`~accel.rtl.sdp.Sdp`'s ``memory`` input), not its own:
    it hands each assembled beat on a lane group a cycle, as the datapath computes, on
    ``lanes`` (``Out(stream.Signature(BeatLayout(hw, lanes_per_cycle(hw))))``), and learns
    of their end from ``results`` (``In(1)``: a result beat left the datapath) and
    ``drained`` (``In(1)``: the datapath offers no result and the write DMA has every
    write answered); the owner programs the write DMA (:func:`writer_config`) and the
    datapath (``cfg.post``).  ``lanes_ready_copies`` (``In``, where lanes go in by groups):
    ``lanes.ready``, one per count of the hand-off
    (:func:`~accel.rtl.postproc.memory_ready_copies`).
    """

    def __init__(self, hw: HwConfig, ecp5_dsp: bool | None = None, shared: bool = False) -> None:
        check_bus(hw)
        self.hw, self.ecp5_dsp, self.shared = hw, ecp5_dsp, shared
        members = {
            "cfg": In(SdpMemoryConfigLayout()), "start": In(1), "done": Out(1),
            "busy": Out(1), "bus_error": Out(1),
            "axi_read": Out(read_signature(ADDR_BITS, 8 * hw.atom_size)),
        }
        if shared:
            members.update(lanes=Out(stream.Signature(BeatLayout(hw, lanes_per_cycle(hw)))),
                           results=In(1), drained=In(1))
            if memory_ready_copies(hw):
                members["lanes_ready_copies"] = In(memory_ready_copies(hw))
        else:
            members["axi_write"] = Out(write_signature(ADDR_BITS, 8 * hw.atom_size))
        super().__init__(members)

    def elaborate(self, platform) -> Module:
        m = Module()
        hw, cfg = self.hw, self.cfg
        atom, word_bits = hw.atom_size, 8 * hw.atom_size
        # (the bus's ready into the reader's registers, across the die from the memory's
        # slice, was 10.99 ns in the full engine: through a slice of its own)
        m.submodules.reader = reader = AxiReader(ADDR_BITS, atom, sliced_address=True)
        wiring.connect(m, wiring.flipped(self.axi_read), reader.axi)
        # the datapath and the write DMA: its own, or the SDP's beside the convolution
        # (``lanes`` out, ``results`` and ``drained`` back)
        if self.shared:
            results, drained = self.results, self.drained
            m.d.comb += self.bus_error.eq(reader.bus_error)
        else:
            m.submodules.wdma = wdma = OutputWriter(hw)
            m.submodules.post = post = PostProcessor(hw, ecp5_dsp=self.ecp5_dsp)
            wiring.connect(m, wiring.flipped(self.axi_write), wdma.axi)
            wiring.connect(m, post.out, wdma.inp)
            m.d.comb += [post.cfg.eq(cfg.post),
                         self.bus_error.eq(reader.bus_error | wdma.bus_error),
                         *writer_config(wdma.cfg, cfg), wdma.start.eq(self.start)]
            results = post.out.valid & post.out.ready
            drained = wdma.idle & ~post.out.valid

        # ---- the streams' FIFOs and their credits -------------------------------------
        names = ("input", "x1", "x2")
        depth = {"input": 2 * CHUNK, "x1": 2 * CHUNK * MAX_OPERAND_WORDS,
                 "x2": 2 * CHUNK * MAX_OPERAND_WORDS}
        streams = TaggedStreams(m, reader.data, depth, word_bits)
        fifos, tags = streams.fifos, streams.tags

        # ---- the walker: surface, line, chunk of points ---------------------------------
        lines = PassCount(m, "line", cfg.h, SIZE_BITS)
        surfaces = PassCount(m, "surface", cfg.surfaces, SIZE_BITS)
        # the addresses count up: of (surface, y, 0), of (surface, 0, 0) and of the chunk,
        # for the input and each operand stream; a chunk's step in a register
        in_line = Signal(ADDR_BITS)
        in_surf = Signal(ADDR_BITS)
        in_at = Signal(ADDR_BITS)
        op_line = {s: Signal(ADDR_BITS, name=f"{s}_line_addr") for s in STREAMS}
        op_surf = {s: Signal(ADDR_BITS, name=f"{s}_surf_addr") for s in STREAMS}
        op_at = {s: Signal(ADDR_BITS, name=f"{s}_chunk_addr") for s in STREAMS}
        op_step = {s: Signal(range(CHUNK * MAX_OPERAND_WORDS * atom + 1), name=f"{s}_step")
                   for s in STREAMS}
        op_kernel = {s: Signal(ADDR_BITS, name=f"{s}_kernel_addr") for s in STREAMS}
        chunks = LineChunks(m, cfg.w)
        n_points = chunks.points
        walking, walked = Signal(), Signal()
        cmd = reader.cmd
        cmd_words, cmd_stream, fits = streams.cmd_words, streams.cmd_stream, streams.fits
        issue = streams.issue                   # the command on ``cmd`` goes out this cycle
        m.d.comb += [cmd.payload.beats.eq(cmd_words), issue.eq(cmd.valid & cmd.ready)]
        words = {s: words_per_point(getattr(cfg, s)) for s in STREAMS}
        # the commands' word counts from registers of the operation's (its registers
        # decoded into the tags' FIFO was the full engine's path at 76 MHz; they are there
        # at the begin, a command later)
        shift = {s: registered_copy(m, f"{s}_word_shift", word_shift(getattr(cfg, s)))
                 for s in STREAMS}
        # the operation begins a cycle after its start, on copies of it, one for each
        # stream's addresses, the walker's and the assembler's registers (the engine's
        # start register into every one of them was the full engine's path at 58 MHz)
        begin = dict(zip(("input", *STREAMS, "assembler"),
                         kept_copies("begin", 2 + len(STREAMS)), strict=True))
        m.d.sync += set_all(begin.values(), self.start)
        for s in STREAMS:
            op = getattr(cfg, s)
            with m.If(begin[s]):
                m.d.sync += [op_line[s].eq(op.base), op_surf[s].eq(op.base),
                             op_at[s].eq(op.base), op_step[s].eq(words[s] * CHUNK * atom),
                             op_kernel[s].eq(op.base)]
        stepping = kept_copies("stepping", 2 + len(STREAMS))
        step_input, *step_streams, step_counts = stepping
        m.d.sync += set_all(stepping, 0)
        with m.FSM(name="walker"):
            with m.State("IDLE"):
                with m.If(begin["input"]):
                    chunks.first(m)
                    lines.first(m)
                    surfaces.first(m)
                    m.d.sync += [in_line.eq(cfg.src),
                                 in_surf.eq(cfg.src), in_at.eq(cfg.src), walking.eq(1),
                                 walked.eq(0)]
                    m.next = "KERNEL_X1"
            # a surface's per-kernel operands, once at its start
            for s, here, after in (("x1", "KERNEL_X1", "KERNEL_X2"), ("x2", "KERNEL_X2", "INPUT")):
                op = getattr(cfg, s)
                with m.State(here):
                    m.d.comb += [cmd.payload.addr.eq(op_kernel[s]),
                                 cmd_words.eq(chunk_words(1, shift[s])),
                                 cmd_stream.eq(names.index(s)),
                                 cmd.valid.eq(op.fetch & ~op.per_element & fits & tags.w_rdy)]
                    with m.If(~op.fetch | op.per_element | issue):
                        m.next = after
            with m.State("INPUT"):              # a chunk: the input's words
                m.d.comb += [cmd.payload.addr.eq(in_at), cmd_words.eq(n_points),
                             cmd_stream.eq(0), cmd.valid.eq(fits & tags.w_rdy)]
                with m.If(issue):
                    m.next = "ELEMENT_X1"
            for s, here, after in (("x1", "ELEMENT_X1", "ELEMENT_X2"),
                                   ("x2", "ELEMENT_X2", "NEXT")):
                op = getattr(cfg, s)
                with m.State(here):             # the chunk's per-element operands
                    m.d.comb += [cmd.payload.addr.eq(op_at[s]),
                                 cmd_words.eq(chunk_words(n_points, shift[s])),
                                 cmd_stream.eq(names.index(s)),
                                 cmd.valid.eq(op.fetch & op.per_element & fits & tags.w_rdy)]
                    with m.If(~op.fetch | ~op.per_element | issue):
                        m.next = after
                        if after == "NEXT":
                            m.d.sync += set_all(stepping, 1)
            with m.State("NEXT"):
                m.next = "INPUT"
                with m.If(chunks.last & lines.last):
                    m.next = "KERNEL_X1"
                    with m.If(surfaces.last):
                        m.next = "IDLE"
        # the step to the next chunk (in state NEXT) on copies of a flag of its own, set
        # as the walker enters it, one for the input's addresses, each operand stream's
        # and the counts (the state's decode into every address register's enable was
        # 10.3-11.2 ns in the full engine)
        with m.If(step_input):
            m.d.sync += in_at.eq(in_at + CHUNK * atom)
            with m.If(chunks.last):
                m.d.sync += [in_line.eq(in_line + cfg.src_line),
                             in_at.eq(in_line + cfg.src_line)]
                with m.If(lines.last):
                    m.d.sync += [in_line.eq(in_surf + cfg.src_surf),
                                 in_at.eq(in_surf + cfg.src_surf),
                                 in_surf.eq(in_surf + cfg.src_surf)]
        for s, step in zip(STREAMS, step_streams, strict=True):
            op = getattr(cfg, s)
            with m.If(step):
                m.d.sync += op_at[s].eq(op_at[s] + op_step[s])
                with m.If(chunks.last):
                    line_next = op_line[s] + op.line
                    m.d.sync += [op_line[s].eq(line_next), op_at[s].eq(line_next)]
                    with m.If(lines.last):
                        m.d.sync += [op_line[s].eq(op_surf[s] + op.surf),
                                     op_at[s].eq(op_surf[s] + op.surf),
                                     op_surf[s].eq(op_surf[s] + op.surf),
                                     op_kernel[s].eq(op_kernel[s] + words[s] * atom)]
        with m.If(step_counts):
            chunks.next(m)
            with m.If(chunks.last):
                lines.next(m)
                with m.If(lines.last):
                    lines.restart(m)
                    surfaces.next(m)
                    with m.If(surfaces.last):
                        m.d.sync += [walking.eq(0), walked.eq(1)]

        # ---- the assembler: a point's words into a beat ---------------------------------
        in_word = Signal(word_bits)
        have_input = Signal()
        offered = Signal()
        taken = Signal()                        # the beat is handed on (below)
        # whether the operation is assembling, a register (the unit's busy into every held
        # word's enable was the unit's path at 83 MHz)
        assembling = Signal()
        # the point being assembled: its line's columns and its surface's lines left, with
        # whether it is the last of each a register worked out as the point moves (the
        # counts' adders and comparisons into the next point's need, on into PointWords'
        # flags, were 14.20 ns in the full engine)
        point_columns = PassCount(m, "point_column", cfg.w, SIZE_BITS)
        point_lines = PassCount(m, "point_line", cfg.h, SIZE_BITS)
        x_last, y_last = point_columns.last, point_lines.last
        # whether the next point is its surface's first: after the last point of one, or
        # at the begin (the words it needs are worked out ahead, :class:`PointWords`)
        next_surface_start = begin["assembler"] | (x_last & y_last)
        restart = begin["assembler"] | taken
        collecting = Signal()
        m.d.comb += collecting.eq(assembling & ~offered)
        f_in = fifos["input"]
        m.d.comb += f_in.r_en.eq(collecting & ~have_input)
        with m.If(f_in.r_en & f_in.r_rdy):
            m.d.sync += [in_word.eq(f_in.r_data), have_input.eq(1)]
        # each operand's words: a surface's first point's and any other's, registers from
        # the operation's (the choice is the one register's)
        held = {}
        complete = have_input
        for s in STREAMS:
            op = getattr(cfg, s)
            first, other = (Signal(range(MAX_OPERAND_WORDS + 1), name=f"{s}_need_{n}")
                            for n in ("first", "other"))
            m.d.sync += [first.eq(Mux(op.fetch, words[s], 0)),
                         other.eq(Mux(op.fetch & op.per_element, words[s], 0))]
            point = PointWords(m, s, fifos[s], word_bits, collecting, restart,
                               Mux(next_surface_start, first, other))
            held[s] = point.held
            complete &= point.done
        beat = Signal(BeatLayout(hw))
        lanes = hw.atomic_k
        for i in range(lanes):
            m.d.comb += beat.acc[i].eq(in_word[8 * i:8 * i + 8].as_signed())
        for s, (alu, mul) in (("x1", ("alu1", "mul1")), ("x2", ("alu2", "mul2"))):
            for i, (a, b) in enumerate(decode_lanes(m, f"{s}_decode", Cat(*held[s]),
                                                    getattr(cfg, s), lanes)):
                m.d.comb += [getattr(beat, alu)[i].eq(a), getattr(beat, mul)[i].eq(b)]
        # the beat handed on: whole into its own datapath, or a lane group a cycle into
        # the shared one
        offer = collecting & complete
        with m.If(offer):
            m.d.sync += offered.eq(1)
        with m.If(taken):
            m.d.sync += offered.eq(0)
        if self.shared:
            self._lane_groups(m, beat, offered, offer, taken, begin["assembler"])
        else:
            m.d.comb += [post.inp.payload.eq(beat), post.inp.valid.eq(offered),
                         taken.eq(post.inp.valid & post.inp.ready)]
        with m.If(taken):
            m.d.sync += have_input.eq(0)
            point_columns.next(m)
            with m.If(x_last):
                point_columns.restart(m)
                point_lines.next(m)
                with m.If(y_last):
                    point_lines.restart(m)
        with m.If(begin["assembler"]):
            m.d.sync += [have_input.eq(0), offered.eq(0), assembling.eq(1)]
            point_columns.first(m)
            point_lines.first(m)
        with m.If(self.done):
            m.d.sync += assembling.eq(0)

        # ---- completion: every beat through the post-processor and written --------------
        inside = Signal(range(64))              # beats in the post-processor
        m.d.sync += inside.eq(inside + taken - results)
        with m.If(self.start):                  # (a shared datapath's results of others)
            m.d.sync += inside.eq(0)
        settled = Signal()
        # (the FIFOs' levels: a word written shows at their read side a cycle later)
        m.d.comb += settled.eq(walked & (tags.level == 0) & ~have_input & ~offered
                               & (inside == 0) & ~reader.busy & drained
                               & (Cat(*(f.level for f in fifos.values())) == 0))
        m.d.sync += self.done.eq(0)
        with m.If(settled & ~self.done):
            m.d.sync += [walked.eq(0), self.done.eq(1)]
        m.d.comb += self.busy.eq(begin["input"] | walking | walked | self.done)
        return m

    def _lane_groups(self, m: Module, beat, offered, offer, taken, reset) -> None:
        """``beat``'s lane groups on ``lanes``, one a cycle from lane 0
        (:class:`~accel.rtl.postproc.LaneGroups`): ``offered`` beats are taken (``taken``)
        into registers as the one before them goes, so that the assembler gathers the next
        while their groups shift out (handing the groups on from the assembler's own
        registers made a beat 10 cycles, not 8).  Each of the groups' counts takes from a
        copy of ``offered`` of its own, set on ``offer`` and cleared by its own take
        (``offered`` into the take of every register of the beat was the full engine's
        path at 74 MHz); ``reset`` clears them."""
        out = self.lanes
        copies = [offered, *kept_copies("offered", len(lane_group_counts(
            self.hw.atomic_k // lanes_per_cycle(self.hw))) - 1)]
        ready = (list(self.lanes_ready_copies) if memory_ready_copies(self.hw)
                 else [out.ready] * len(copies))
        groups = LaneGroups(m, self.hw, beat, copies, ready, reset=self.start)
        for copy, take in zip(copies[1:], groups.takes[1:], strict=True):
            with m.If(offer):
                m.d.sync += copy.eq(1)
            with m.If(take | reset):
                m.d.sync += copy.eq(0)
        m.d.comb += [out.valid.eq(groups.valid), out.payload.eq(groups.held[0]),
                     taken.eq(groups.takes[0])]
