"""AXI4 managers of the RTL engine: a burst reader and a single-beat writer.

NVDLA's data backbone (DBB) is AXI4; the engine's DMAs reach memory through
one AXI4 manager port whose signals carry AXI's own names (``araddr``,
``rvalid``, ...), so a cocotb AXI model (``cocotbext-axi``) or an FPGA
interconnect attaches by name.  IDs are constant 0: every read is in order,
and writes are counted until their responses return.

* :class:`AxiReader` turns a command (byte address, beats) into INCR bursts of
  at most 256 beats that never cross a 4 KiB boundary (the AXI rule), a few
  bursts in flight, and hands the data beats on in order.
* :class:`AxiWriter` writes one beat per request (address, data, byte
  strobes) with up to ``outstanding`` responses in flight; ``idle`` says every
  write has been answered.  Requests wait in a small queue, so the request's
  ``ready`` is the queue's room, not the bus's handshake of the same cycle.

A response other than OKAY sets ``bus_error`` (sticky until reset), which the
engine reports rather than writing or computing on bad data silently.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from accel.rtl.credits import PointerSlice, SlicedFIFO, StreamSlice, credit_room

#: the AXI4 ID width of the engine's manager port (every ID is 0)
ID_WIDTH = 4
#: bits of a read command's beat count
BEAT_BITS = 24
#: requests the writer takes ahead of its address and data channels (its ready is a
#: credit flag whose credits come back a cycle late: 2 entries would not keep a request
#: a cycle flowing)
WRITE_QUEUE = 4


def read_signature(addr_width: int, data_width: int) -> wiring.Signature:
    """AXI4 read address and read data channels, manager side."""
    return wiring.Signature({
        "arid": Out(ID_WIDTH), "araddr": Out(addr_width), "arlen": Out(8), "arsize": Out(3),
        "arburst": Out(2), "arvalid": Out(1), "arready": In(1),
        "rid": In(ID_WIDTH), "rdata": In(data_width), "rresp": In(2), "rlast": In(1),
        "rvalid": In(1), "rready": Out(1),
    })


def write_signature(addr_width: int, data_width: int) -> wiring.Signature:
    """AXI4 write address, write data and write response channels, manager side."""
    return wiring.Signature({
        "awid": Out(ID_WIDTH), "awaddr": Out(addr_width), "awlen": Out(8), "awsize": Out(3),
        "awburst": Out(2), "awvalid": Out(1), "awready": In(1),
        "wdata": Out(data_width), "wstrb": Out(data_width // 8), "wlast": Out(1),
        "wvalid": Out(1), "wready": In(1),
        "bid": In(ID_WIDTH), "bresp": In(2), "bvalid": In(1), "bready": Out(1),
    })


def axi4_signature(addr_width: int, data_width: int) -> wiring.Signature:
    """The whole AXI4 manager port: read and write channels."""
    return wiring.Signature({**read_signature(addr_width, data_width).members,
                             **write_signature(addr_width, data_width).members})


def connect_channels(m: Module, bus, part) -> None:
    """Drive ``bus`` (a full AXI4 port of the enclosing component) from ``part`` (a reader's
    or writer's port) for the members ``part`` has, in both directions."""
    for name, member in part.signature.members.items():
        if member.flow == Out:
            m.d.comb += getattr(bus, name).eq(getattr(part, name))
        else:
            m.d.comb += getattr(part, name).eq(getattr(bus, name))


class AxiSlice(wiring.Component):
    """An AXI4 port through registers on some of its channels (``AR``, ``AW`` and ``W`` by
    default; ``channels`` names them by prefix, the read data ``r`` and the write
    response ``b`` among them), the others passed as they are: ``manager`` takes the
    manager's port, ``subordinate`` gives the same to the memory.  Each sliced channel is
    a two-entry skid buffer: every handshake of a full-rate stream still goes through, a
    cycle later, and neither the payload nor the ready crosses the slice in one cycle (the
    engine's choice of which unit has the bus, into a memory's burst count or its write
    port, the memory's ready back into the units' handshakes, or its read data's valid
    into the readers' buffers, were the full engine's paths on an ECP5); the channels the
    memory drives (``r``, ``b``) keep their entries in place (:class:`PointerSlice`),
    since the manager's ready is a late decision.  ``signature``:
    the manager side's, :func:`axi4_signature`.  A write's data may reach the memory
    before or after its address, as AXI allows."""

    #: the AXI4 channels by prefix
    CHANNELS = ("ar", "aw", "w", "r", "b")

    def __init__(self, signature: wiring.Signature,
                 channels: tuple[str, ...] = ("ar", "aw", "w")) -> None:
        members = signature.members
        for p in channels:
            if p not in self.CHANNELS or f"{p}valid" not in members:
                raise ValueError(f"channel {p!r}: not an AXI channel of this port; the "
                                 f"slice takes {', '.join(map(repr, self.CHANNELS))}")
        self.channels = channels
        super().__init__({"manager": In(signature), "subordinate": Out(signature)})

    def elaborate(self, platform) -> Module:
        m = Module()
        a, b = self.manager, self.subordinate
        members = self.subordinate.signature.members        # (the manager side's flows)

        def channel(name: str) -> str | None:
            # ("aw..." is not "w...": each name has one prefix among the AXI channels)
            return next((p for p in self.channels if name.startswith(p)), None)
        for name, member in members.items():
            if channel(name) is not None:
                continue
            if member.flow == Out:
                m.d.comb += getattr(b, name).eq(getattr(a, name))
            else:
                m.d.comb += getattr(a, name).eq(getattr(b, name))
        for p in self.channels:
            self._skid(m, p, [n for n in members if channel(n) == p
                              and n not in (f"{p}valid", f"{p}ready")])
        return m

    def _skid(self, m: Module, p: str, names: list[str]) -> None:
        a, b = self.manager, self.subordinate
        kind = StreamSlice
        if self.subordinate.signature.members[f"{p}valid"].flow == In:
            # a channel the memory drives: from it to the manager, whose ready is its
            # choice of the reader a beat belongs to and that reader's room
            a, b, kind = b, a, PointerSlice
        width = sum(len(getattr(a, n)) for n in names)
        m.submodules[f"{p}_slice"] = sl = kind(width)
        m.d.comb += [sl.inp.payload.eq(Cat(*(getattr(a, n) for n in names))),
                     sl.inp.valid.eq(getattr(a, f"{p}valid")),
                     getattr(a, f"{p}ready").eq(sl.inp.ready),
                     Cat(*(getattr(b, n) for n in names)).eq(sl.out.payload),
                     getattr(b, f"{p}valid").eq(sl.out.valid),
                     sl.out.ready.eq(getattr(b, f"{p}ready"))]


def _size_code(data_bytes: int) -> int:
    if data_bytes & (data_bytes - 1) or not 1 <= data_bytes <= 128:
        raise ValueError(f"AXI data width of {data_bytes} bytes is not a power of two "
                         f"from 1 to 128")
    return data_bytes.bit_length() - 1


class AxiReader(wiring.Component):
    """Reads ``beats`` consecutive bus words from ``addr`` (bus aligned) per command.

    The address side issues a command's bursts back to back while at most
    ``bursts`` are unanswered, and takes the next command once it has issued
    the last one, so the next command's first burst goes out while the data of
    the one before still arrives: a stream of short commands (a feature cube's
    lines) keeps the data channel busy.  Bursts are answered in order (one ID).

    Attributes
    ----------
    cmd : ``In(stream)`` of ``addr``, ``beats``; taken into a one-command register
        while the command before is issued.  ``beats`` is at least 1 (the fetch's
        commands are: a line of W >= 1 words, a weight piece only while words are left,
        an SDP operand element of 1, 2 or 4 words); the reader does not check it
    data : ``Out(stream)`` of bus words, in command and address order, from the output
        register of a small FIFO (:data:`DATA_BUFFER` words): the bus's ``rvalid`` and
        ``rready`` and the consumer's ``valid`` and ``ready`` meet only at flip-flops
    busy : ``Out(1)`` while a command's bursts are being issued or answered, or words of
        them wait in the buffer
    bus_error : ``Out(1)``, sticky: a read response was not OKAY
    axi : the AXI4 read channels

    ``sliced_address``: the address channel leaves through a :class:`PointerSlice`, so
    that the bus's ``arready`` (a read multiplexer's choice of a slice's flag across the
    die) ends at the slice's few flags instead of running on into the burst's request
    and the enables of the address and count registers (10.99 ns in the full engine);
    a burst's address leaves a cycle later.  ``sliced_data``: the data's FIFO is read
    through one too (:class:`~accel.rtl.credits.SlicedFIFO`), for a consumer whose
    ``ready`` is a decision late in its cycle, which then reaches the slice's flags
    rather than the enables of the FIFO's output register (10.7 ns in the full engine);
    a word reaches the consumer a cycle later.
    """

    #: Words of the read data's FIFO: its output register and two more, so that a word a
    #: cycle flows while its input side's ready is a comparison of its level register.
    #: (The FIFO's level is not the bus's ``rvalid`` straight into the fetch's enables.)
    DATA_BUFFER = 3

    def __init__(self, addr_width: int = 32, data_bytes: int = 8, bursts: int = 4, *,
                 sliced_address: bool = False, sliced_data: bool = False) -> None:
        self.addr_width, self.data_bytes, self.bursts = addr_width, data_bytes, bursts
        self.sliced_address, self.sliced_data = sliced_address, sliced_data
        self.size = _size_code(data_bytes)
        super().__init__({
            "cmd": In(stream.Signature(data.StructLayout({"addr": addr_width,
                                                          "beats": BEAT_BITS}))),
            "data": Out(stream.Signature(8 * data_bytes)),
            "busy": Out(1), "bus_error": Out(1),
            "axi": Out(read_signature(addr_width, 8 * data_bytes)),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        axi = self.axi
        addr = Signal(self.addr_width)
        remaining = Signal(BEAT_BITS)           # beats of the command not yet requested
        # this burst's beats: at most 256, and none past a 4 KiB boundary.  ``to_b`` (beats
        # from the address to the next boundary) and ``limit`` (the smaller of it and 256)
        # are registers: taken from the command's address, and after each burst worked
        # out from the registers alone (a command's bursts but its last take ``limit``)
        page = 4096 >> self.size
        full = min(256, page)
        # the next command waits in a register (taken while the one before is issued): its
        # boundary arithmetic starts from flip-flops, not from the producer's logic
        pending = Signal.like(self.cmd.payload, name="pending")
        pending_valid = Signal()
        m.d.comb += self.cmd.ready.eq(~pending_valid)
        # (no test of beats != 0 here: the weight piece's selection would run on through
        # a 24-bit comparison into this enable)
        with m.If(self.cmd.valid & ~pending_valid):
            m.d.sync += [pending.eq(self.cmd.payload), pending_valid.eq(1)]
        to_boundary = Signal(range(page + 1))
        m.d.comb += to_boundary.eq((4096 - pending.addr[:12]) >> self.size)
        to_b = Signal(range(page + 1))
        limit = Signal(range(full + 1))
        next_to_b = Signal(range(page + 1))
        m.d.comb += next_to_b.eq(Mux(to_b <= full, page, to_b - full))
        # (limit <= 256: the comparisons need only the low 9 bits)
        last_burst = (remaining[9:] == 0) & (remaining[:9] <= limit)
        m.d.comb += [axi.arid.eq(0), axi.arsize.eq(self.size), axi.arburst.eq(1)]  # INCR
        # the burst requested: the address channel, or the slice in front of it
        ar = wiring.Signature({"arvalid": Out(1), "arready": In(1),
                               "araddr": Out(self.addr_width), "arlen": Out(8)}).create()
        if self.sliced_address:
            m.submodules.address = sl = PointerSlice(self.addr_width + 8)
            m.d.comb += [sl.inp.valid.eq(ar.arvalid), sl.inp.payload.eq(Cat(ar.araddr, ar.arlen)),
                         ar.arready.eq(sl.inp.ready), axi.arvalid.eq(sl.out.valid),
                         Cat(axi.araddr, axi.arlen).eq(sl.out.payload),
                         sl.out.ready.eq(axi.arready)]
        else:
            m.d.comb += [axi.arvalid.eq(ar.arvalid), axi.araddr.eq(ar.araddr),
                         axi.arlen.eq(ar.arlen), ar.arready.eq(axi.arready)]
        buffer_kind = SlicedFIFO if self.sliced_data else fifo.SyncFIFOBuffered
        m.submodules.buffer = buffer = buffer_kind(width=8 * self.data_bytes,
                                                   depth=self.DATA_BUFFER)
        m.d.comb += [buffer.w_data.eq(axi.rdata), buffer.w_en.eq(axi.rvalid),
                     axi.rready.eq(buffer.w_rdy),
                     self.data.payload.eq(buffer.r_data), self.data.valid.eq(buffer.r_rdy),
                     buffer.r_en.eq(self.data.ready)]
        with m.If(axi.rvalid & axi.rready & (axi.rresp != 0)):
            m.d.sync += self.bus_error.eq(1)
        # bursts requested and not yet answered by their last beat.  A burst is requested
        # into the address channel's registers (``arvalid``, ``araddr``, ``arlen``) when
        # they are free or being taken: the subordinate's decoding of the burst starts at
        # flip-flops, not at this count's arithmetic
        in_flight = Signal(range(self.bursts + 1))
        issuing = Signal()                      # a command's bursts are being requested
        requested = Signal()
        answered = Signal()
        m.d.comb += [requested.eq(issuing & (in_flight < self.bursts)
                                  & (~ar.arvalid | ar.arready)),
                     answered.eq(axi.rvalid & axi.rready & axi.rlast)]
        with m.If(requested):
            m.d.sync += [ar.arvalid.eq(1), ar.araddr.eq(addr),
                         ar.arlen.eq(Mux(last_burst, remaining - 1, limit - 1))]
        with m.Elif(ar.arready):
            m.d.sync += ar.arvalid.eq(0)
        with m.If(requested & ~answered):
            m.d.sync += in_flight.eq(in_flight + 1)
        with m.Elif(answered & ~requested):
            m.d.sync += in_flight.eq(in_flight - 1)
        with m.If(pending_valid & ~issuing):
            m.d.sync += [addr.eq(pending.addr), remaining.eq(pending.beats),
                         to_b.eq(to_boundary), pending_valid.eq(0),
                         limit.eq(Mux(to_boundary < full, to_boundary, full)), issuing.eq(1)]
        # a burst moves the address and the beats left by ``limit``, which the last burst's
        # may be short of: past the last burst neither is used (the next command sets both),
        # so the adders need not wait for the last-burst comparison
        with m.If(requested):
            m.d.sync += [addr.eq(addr + (limit << self.size)), remaining.eq(remaining - limit),
                         to_b.eq(next_to_b), limit.eq(Mux(next_to_b < full, next_to_b, full))]
            with m.If(last_burst):
                m.d.sync += issuing.eq(0)
        m.d.comb += self.busy.eq(pending_valid | issuing | (in_flight != 0) | (buffer.level != 0))
        return m


class AxiWriter(wiring.Component):
    """One single-beat write per request, up to ``outstanding`` unanswered.

    Attributes
    ----------
    req : ``In(stream)`` of ``addr``, ``data``, ``strb``
    idle : ``Out(1)``: nothing waiting to be sent or answered (a register, a cycle late)
    bus_error : ``Out(1)``, sticky: a write response was not OKAY
    axi : the AXI4 write channels
    """

    def __init__(self, addr_width: int = 32, data_bytes: int = 8,
                 outstanding: int = 15) -> None:
        self.addr_width, self.data_bytes, self.outstanding = addr_width, data_bytes, outstanding
        self.size = _size_code(data_bytes)
        super().__init__({
            "req": In(stream.Signature(data.StructLayout({
                "addr": addr_width, "data": 8 * data_bytes, "strb": data_bytes}))),
            "idle": Out(1), "bus_error": Out(1),
            "axi": Out(write_signature(addr_width, 8 * data_bytes)),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        axi = self.axi
        # the queue: the bus's ready (the memory's arbitration on an FPGA) stops at its
        # read side instead of running on through ``req.ready`` into the producer (the
        # output writer, and on through the conv core's output into SDP)
        req = self.req.payload.shape()
        m.submodules.queue = queue = fifo.SyncFIFOBuffered(width=req.size, depth=WRITE_QUEUE)
        head = Signal(req)
        # the request's ready is a register: the queue's credits, whose read gives one
        # back a cycle late (not the queue's level through its write ready into the
        # output writer's address counters' enables)
        ready = Signal()
        m.d.comb += [queue.w_data.eq(self.req.payload), queue.w_en.eq(self.req.valid & ready),
                     self.req.ready.eq(ready), head.eq(queue.r_data)]
        in_flight = Signal(range(self.outstanding + 1))
        m.d.comb += [axi.awid.eq(0), axi.awlen.eq(0), axi.awsize.eq(self.size),
                     axi.awburst.eq(1), axi.wlast.eq(1), axi.bready.eq(1)]
        # the address and the data leave through slices that keep their entries in place
        # (:class:`PointerSlice`): the bus's ready (a write multiplexer's choice of a
        # slice's flag across the die) reaches their flags, not the queue's read and the
        # enables of the address and data registers (10.2-10.8 ns in the full engine)
        m.submodules.aw = aw = PointerSlice(self.addr_width)
        m.submodules.w = w = PointerSlice(9 * self.data_bytes)
        m.d.comb += [axi.awvalid.eq(aw.out.valid), axi.awaddr.eq(aw.out.payload),
                     aw.out.ready.eq(axi.awready),
                     axi.wvalid.eq(w.out.valid), Cat(axi.wdata, axi.wstrb).eq(w.out.payload),
                     w.out.ready.eq(axi.wready)]
        answered = axi.bvalid & axi.bready
        fire = Signal()
        m.d.comb += [fire.eq(queue.r_rdy & aw.inp.ready & w.inp.ready
                             & (in_flight < self.outstanding)),
                     queue.r_en.eq(fire),
                     aw.inp.valid.eq(fire), aw.inp.payload.eq(head.addr),
                     w.inp.valid.eq(fire), w.inp.payload.eq(Cat(head.data, head.strb)),
                     ready.eq(credit_room(m, WRITE_QUEUE, queue.w_en, fire, name="queue_credits",
                                          late_give=True))]
        with m.If(fire & ~answered):
            m.d.sync += in_flight.eq(in_flight + 1)
        with m.Elif(~fire & answered):
            m.d.sync += in_flight.eq(in_flight - 1)
        with m.If(answered & (axi.bresp != 0)):
            m.d.sync += self.bus_error.eq(1)
        # idle is a register, a cycle late: a request offered now, or anything queued or
        # on the bus now, keeps it low next cycle, and if neither, nothing can start next
        # cycle, so a high ``idle`` is never wrong (and ``in_flight``'s comparison does
        # not run on into the engine's done flags)
        m.d.sync += self.idle.eq((in_flight == 0) & (aw.level == 0) & (w.level == 0)
                                 & (queue.level == 0) & ~self.req.valid)
        return m
