"""Per-element SDP operands of a convolution: SDP_RDMA's BRDMA / NRDMA in ``DATA_MODE`` 1.

Where X1 or X2 takes its ALU or multiplier operand from memory per element (a residual
sum folded into the convolution's SDP, for example), every output beat needs its own
operands: a cube of the output's points, ``atom`` lanes of one or two components of one
or two bytes each, with the DMA's own line and surface strides (the layout
:mod:`accel.rtl.sdp_memory` reads for SDP alone).  :class:`ElementOperands` reads them in
the order the SDP takes its beats - kernel group, row, column - and offers each beat's
operands on ``out``.

A walker issues one command per chunk of up to :data:`CHUNK` points of a row and stage,
while the stage's FIFO has half its depth free, room for its largest (credits:
:class:`~accel.rtl.sdp_memory.TaggedStreams`), so its reads never wait
on the SDP; an assembler takes a point's words from each stage and decodes its lanes
(:func:`decode_lanes`).

:class:`AxiReadMux` lets it share the engine's AXI read channels with the convolution's
fetch: bursts keep their order (one ID), so the read data goes to the client whose burst
is oldest.  Neither client holds its read data back for long (the fetch writes into its
memories, this unit has room for every word it asks for), so neither waits on the other.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from accel.config import HwConfig
from accel.rtl.axi import AxiReader, read_signature
from accel.rtl.conv_layout import ADDR_BITS, SIZE_BITS, operand_layout
from accel.rtl.sdp_memory import (
    CHUNK,
    MAX_OPERAND_WORDS,
    LineChunks,
    OperandLayout,
    PointWords,
    TaggedStreams,
    chunk_words,
    decode_lanes,
    word_shift,
    words_per_point,
)
from accel.rtl.timing import PassCount, kept, kept_copies, registered_copy, set_all, stage

#: the X stages and the operand fields each fills (operand_layout)
STAGES = {"x1": ("alu1", "mul1"), "x2": ("alu2", "mul2")}
#: bursts the read channels' multiplexer keeps track of (4 per :class:`AxiReader`)
MUX_BURSTS = 8


class ElementConfigLayout(data.StructLayout):
    """The output cube's sizes and each stage's operand source."""

    def __init__(self) -> None:
        super().__init__({"surfaces": SIZE_BITS, "h": SIZE_BITS, "w": SIZE_BITS,
                          "x1": OperandLayout(), "x2": OperandLayout()})


class ElementOperands(wiring.Component):
    """See the module docstring.

    Attributes
    ----------
    cfg : ``In(ElementConfigLayout())``, held while the operation runs; a stage takes part
        when its ``fetch`` and ``per_element`` are set
    start : ``In(1)``, a pulse
    out : ``Out(stream.Signature(operand_layout(hw)))``, a beat's operands (the fields of a
        stage not taking part are 0)
    busy : ``Out(1)`` from ``start`` until every beat's operands are taken
    bus_error : ``Out(1)``, sticky
    axi_read : the AXI4 read channels
    """

    def __init__(self, hw: HwConfig) -> None:
        if hw.atomic_k != hw.atom_size:
            raise ValueError(f"per-element operands need a kernel group of one memory atom "
                             f"(atomic_k {hw.atomic_k}, atom {hw.atom_size})")
        self.hw = hw
        super().__init__({
            "cfg": In(ElementConfigLayout()), "start": In(1),
            "out": Out(stream.Signature(operand_layout(hw))),
            "busy": Out(1), "bus_error": Out(1),
            "axi_read": Out(read_signature(ADDR_BITS, 8 * hw.atom_size)),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        hw, cfg = self.hw, self.cfg
        atom, word_bits = hw.atom_size, 8 * hw.atom_size
        m.submodules.reader = reader = AxiReader(ADDR_BITS, atom)
        wiring.connect(m, wiring.flipped(self.axi_read), reader.axi)
        m.d.comb += self.bus_error.eq(reader.bus_error)
        on = {s: Signal(name=f"{s}_on") for s in STAGES}
        words = {s: words_per_point(getattr(cfg, s)) for s in STAGES}
        # the commands' word counts from registers (as in SdpMemory)
        shift = {s: registered_copy(m, f"{s}_word_shift", word_shift(getattr(cfg, s)))
                 for s in STAGES}
        for s in STAGES:
            op = getattr(cfg, s)
            m.d.comb += on[s].eq(op.fetch & op.per_element)

        # ---- each stage's FIFO, its credits, and the commands' tags ----------------------
        depth = 2 * CHUNK * MAX_OPERAND_WORDS
        streams = TaggedStreams(m, reader.data, dict.fromkeys(STAGES, depth), word_bits)
        fifos, tags = streams.fifos, streams.tags

        # ---- the walker: surface, row, chunk of points, stage ---------------------------
        lines = PassCount(m, "line", cfg.h, SIZE_BITS)
        surfaces = PassCount(m, "surface", cfg.surfaces, SIZE_BITS)
        # the addresses count up: of (surface, y, 0), (surface, 0, 0) and the chunk
        line = {s: Signal(ADDR_BITS, name=f"{s}_line_addr") for s in STAGES}
        surf = {s: Signal(ADDR_BITS, name=f"{s}_surf_addr") for s in STAGES}
        at = {s: Signal(ADDR_BITS, name=f"{s}_chunk_addr") for s in STAGES}
        step = {s: Signal(range(CHUNK * MAX_OPERAND_WORDS * atom + 1), name=f"{s}_step")
                for s in STAGES}
        chunks = LineChunks(m, cfg.w)
        cmd = reader.cmd
        cmd_words, cmd_stage, fits = streams.cmd_words, streams.cmd_stream, streams.fits
        issue = streams.issue
        m.d.comb += [cmd.payload.beats.eq(cmd_words), issue.eq(cmd.valid & cmd.ready)]
        walking = Signal()
        # the operation begins a cycle after its start, on copies of it: the walker's, each
        # stage's addresses' and the assembler's (the engine's start across the die into
        # the walker's counts was the full engine's path at 77 MHz)
        begin = dict(zip(("walker", *STAGES, "assembler"),
                         kept_copies("begin", 2 + len(STAGES)), strict=True))
        m.d.sync += set_all(begin.values(), self.start)
        # and the walker's with the stages' choice in it, worked out at the start (the
        # operation's registers hold from then: their decode into the walker's counts'
        # enables was 11.40 ns in the full engine)
        walks = kept("walks")
        m.d.sync += walks.eq(self.start & (on["x1"] | on["x2"]))
        for s in STAGES:
            with m.If(begin[s]):
                base = getattr(cfg, s).base
                m.d.sync += [line[s].eq(base), surf[s].eq(base), at[s].eq(base),
                             step[s].eq(words[s] * CHUNK * atom)]
        with m.FSM(name="walker"):
            with m.State("IDLE"):
                with m.If(walks):
                    lines.first(m)
                    surfaces.first(m)
                    m.d.sync += walking.eq(1)
                    chunks.first(m)
                    m.next = "X1"
            for i, (s, here, after) in enumerate((("x1", "X1", "X2"), ("x2", "X2", "NEXT"))):
                with m.State(here):
                    m.d.comb += [cmd.payload.addr.eq(at[s]),
                                 cmd_words.eq(chunk_words(chunks.points, shift[s])),
                                 cmd_stage.eq(i),
                                 cmd.valid.eq(on[s] & fits & tags.w_rdy)]
                    with m.If(~on[s] | issue):
                        m.next = after
            with m.State("NEXT"):
                m.d.sync += [at[s].eq(at[s] + step[s]) for s in STAGES]
                chunks.next(m)
                m.next = "X1"
                with m.If(chunks.last):
                    lines.next(m)
                    for s in STAGES:
                        line_next = line[s] + getattr(cfg, s).line
                        m.d.sync += [line[s].eq(line_next), at[s].eq(line_next)]
                    with m.If(lines.last):
                        lines.restart(m)
                        surfaces.next(m)
                        for s in STAGES:
                            stride = getattr(cfg, s).surf
                            m.d.sync += [line[s].eq(surf[s] + stride), at[s].eq(surf[s] + stride),
                                         surf[s].eq(surf[s] + stride)]
                        with m.If(surfaces.last):
                            m.d.sync += walking.eq(0)
                            m.next = "IDLE"

        # ---- the assembler: a point's words of each stage into a beat's operands ---------
        # the words a point needs of each stage, registers (the operation's registers
        # decoded into the FIFOs' read enables and every held word's enable was the full
        # engine's path at 58 MHz; the registers hold from the start, and the first word
        # is taken after the begin, a cycle later)
        need = {s: Signal(range(MAX_OPERAND_WORDS + 1), name=f"{s}_need_op") for s in STAGES}
        m.d.sync += [need[s].eq(Mux(on[s], words[s], 0)) for s in STAGES]
        # the flags that enable the words' reads, ``assembling`` and ``offered``, in a copy
        # for each stage's reads beside its FIFO and words, the first the flags' own (one
        # register into both stages' read enables and every held word's was 11.3-12.4 ns
        # in the full engine)
        assembling_copies = kept_copies("assembling", 1 + len(STAGES))
        offered_copies = kept_copies("offered", 1 + len(STAGES))
        assembling, offered = assembling_copies[0], offered_copies[0]
        # the beat being assembled: the columns, rows and surfaces left, with their last
        # flags registers (the operation's sizes through the counts' comparisons into
        # ``assembling`` were 12.20 ns in the full engine)
        columns, rows, beat_surfaces = (PassCount(m, f"beat_{n}", total, SIZE_BITS)
                                        for n, total in (("column", cfg.w), ("row", cfg.h),
                                                         ("surface", cfg.surfaces)))
        with m.If(begin["assembler"]):
            m.d.sync += set_all(assembling_copies, on["x1"] | on["x2"])
            for count in (columns, rows, beat_surfaces):
                count.first(m)
        restart = begin["assembler"] | (self.out.valid & self.out.ready)
        held, complete = {}, Const(1)
        for i, s in enumerate(STAGES, start=1):
            point = PointWords(m, s, fifos[s], word_bits,
                               ~offered_copies[i] & assembling_copies[i], restart, need[s])
            held[s] = point.held
            complete &= point.done
        with m.If(~offered & assembling & complete):
            m.d.sync += set_all(offered_copies, 1)
        # the beat's operands decoded into registers every cycle (they hold the offered
        # beat's from the cycle it is offered: its words are complete a cycle before), so
        # that the decode is not on the way across the die to SDP (12.51 ns at 74 MHz)
        for s, (alu, mul) in STAGES.items():
            for i, (a, b) in enumerate(decode_lanes(m, f"{s}_decode", Cat(*held[s]),
                                                    getattr(cfg, s), atom, on=on[s])):
                m.d.sync += [getattr(self.out.payload, alu)[i].eq(a),
                             getattr(self.out.payload, mul)[i].eq(b)]
        m.d.comb += self.out.valid.eq(offered)
        with m.If(self.out.valid & self.out.ready):
            m.d.sync += set_all(offered_copies, 0)
        # the counts step a cycle after the take, on a register (SDP's slice's ready
        # across the die into the counts and ``assembling`` was 11.91 ns in the full
        # engine); ``assembling`` ends a cycle later, when no word of the operation is left
        with m.If(stage(m, "beat_taken", self.out.valid & self.out.ready)):
            columns.next(m)
            with m.If(columns.last):
                columns.restart(m)
                rows.next(m)
                with m.If(rows.last):
                    rows.restart(m)
                    beat_surfaces.next(m)
                    with m.If(beat_surfaces.last):
                        m.d.sync += set_all(assembling_copies, 0)

        m.d.comb += self.busy.eq(begin["walker"] | walking | assembling | reader.busy)
        return m


class AxiReadMux(wiring.Component):
    """Two AXI4 read managers on one port (see the module docstring): the address channel
    goes to client 0 when it asks, else to client 1; each burst's client waits in a FIFO,
    and the read data goes to the client of the oldest burst until its last beat."""

    def __init__(self, addr_width: int, data_width: int) -> None:
        sig = read_signature(addr_width, data_width)
        super().__init__({"bus": Out(sig), "a": In(sig), "b": In(sig)})

    def elaborate(self, platform) -> Module:
        m = Module()
        bus, clients = self.bus, (self.a, self.b)
        m.submodules.order = order = fifo.SyncFIFOBuffered(width=1, depth=MUX_BURSTS)
        pick = Signal()                      # the address channel's client this cycle
        m.d.comb += pick.eq(~self.a.arvalid)
        for name in ("arid", "araddr", "arlen", "arsize", "arburst"):
            m.d.comb += getattr(bus, name).eq(Mux(pick, getattr(self.b, name),
                                                  getattr(self.a, name)))
        m.d.comb += [bus.arvalid.eq(Mux(pick, self.b.arvalid, self.a.arvalid) & order.w_rdy),
                     order.w_data.eq(pick), order.w_en.eq(bus.arvalid & bus.arready)]
        for i, client in enumerate(clients):
            m.d.comb += client.arready.eq(bus.arready & order.w_rdy & (pick == i))
            head = order.r_rdy & (order.r_data == i)
            m.d.comb += [client.rid.eq(bus.rid), client.rdata.eq(bus.rdata),
                         client.rresp.eq(bus.rresp), client.rlast.eq(bus.rlast),
                         client.rvalid.eq(bus.rvalid & head)]
            with m.If(head):
                m.d.comb += bus.rready.eq(client.rready)
        m.d.comb += order.r_en.eq(bus.rvalid & bus.rready & bus.rlast)
        return m
