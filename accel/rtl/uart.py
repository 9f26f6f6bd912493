"""UART (8 data bits, no parity, 1 stop bit) and the board memory of the FPGA build.

:class:`UartRx` / :class:`UartTx` move bytes at ``divisor`` clock cycles per
bit.  :class:`AxiRam` is the board's memory: one-word-per-cycle AXI4 slave
(INCR bursts, byte strobes) over block RAM, with a second port for the host.
:class:`RamEngine` is the conv engine on that RAM, a simulation top.  The host
bridge that speaks the board's byte protocol over the UART is the FPGA
build's, :mod:`fpga.bridge`: nothing here knows that protocol.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from accel.rtl.axi import AxiSlice
from accel.rtl.conv_engine import ConvEngine
from accel.rtl.credits import credit_room
from accel.rtl.csb_regs import CSB_REQUEST, any_of
from accel.rtl.memories import NO_COLLISION


class UartRx(wiring.Component):
    """Received bytes on ``data`` (a byte is lost if ``data`` is not ready when it ends)."""

    def __init__(self, divisor: int) -> None:
        if divisor < 4:
            raise ValueError(f"UART divisor {divisor} is below 4 clock cycles per bit")
        self.divisor = divisor
        super().__init__({"rx": In(1, init=1), "data": Out(stream.Signature(8))})

    def elaborate(self, platform) -> Module:
        m = Module()
        rx = Signal(init=1)
        m.d.sync += rx.eq(self.rx)               # one register against metastability
        count = Signal(range(self.divisor * 3 // 2 + 1))
        bit = Signal(range(9))
        shift = Signal(8)
        with m.If(self.data.ready):
            m.d.sync += self.data.valid.eq(0)
        with m.FSM():
            with m.State("IDLE"):
                with m.If(~rx):                  # start bit: sample the middle of data bit 0
                    m.d.sync += [count.eq(self.divisor * 3 // 2 - 1), bit.eq(0)]
                    m.next = "DATA"
            with m.State("DATA"):
                with m.If(count != 0):
                    m.d.sync += count.eq(count - 1)
                with m.Else():
                    m.d.sync += [shift.eq(Cat(shift[1:], rx)), bit.eq(bit + 1),
                                 count.eq(self.divisor - 1)]
                    with m.If(bit == 7):
                        m.next = "STOP"
            with m.State("STOP"):
                with m.If(count != 0):
                    m.d.sync += count.eq(count - 1)
                with m.Else():
                    m.d.sync += [self.data.payload.eq(shift), self.data.valid.eq(rx)]
                    m.next = "IDLE"
        return m


class UartTx(wiring.Component):
    """Sends the bytes of ``data``."""

    def __init__(self, divisor: int) -> None:
        self.divisor = divisor
        super().__init__({"tx": Out(1, init=1), "data": In(stream.Signature(8))})

    def elaborate(self, platform) -> Module:
        m = Module()
        count = Signal(range(self.divisor))
        bits = Signal(10, init=0x3FF)
        left = Signal(range(11))
        m.d.comb += [self.tx.eq(bits[0]), self.data.ready.eq(left == 0)]
        with m.If(left == 0):
            with m.If(self.data.valid):
                m.d.sync += [bits.eq(Cat(0, self.data.payload, 1)), left.eq(10),
                             count.eq(self.divisor - 1)]
        with m.Elif(count != 0):
            m.d.sync += count.eq(count - 1)
        with m.Else():
            m.d.sync += [bits.eq(Cat(bits[1:], 1)), left.eq(left - 1),
                         count.eq(self.divisor - 1)]
        return m


def ram_port_layout(words: int, word_bytes: int) -> data.StructLayout:
    """The bridge's memory port: one word at ``addr``, written where ``strb``."""
    return data.StructLayout({"addr": range(words), "wdata": 8 * word_bytes,
                              "strb": word_bytes, "write": 1, "valid": 1})


#: the AXI channels between the engine and the board's RAM through registers
#: (:class:`~accel.rtl.axi.AxiSlice`)
BOARD_SLICED = ("ar", "aw", "w", "r")


class AxiRam(wiring.Component):
    """Block RAM of ``words`` words behind an AXI4 slave (``axi``, flipped manager
    signature) and a bridge port (``port`` request, held until ``done``; ``rdata``/``done``
    :data:`PORT_LATENCY` cycles after the request while the AXI side is idle, later while
    it is busy).  Addresses are taken modulo the RAM's size.

    On the board the RAM is dozens of block RAMs spread over the die, so it is split into
    banks of :data:`BANK_WORDS` words (consecutive addresses in one bank), and the paths
    across the die run from flip-flop to flip-flop (the critical paths of the routed full
    builds were each a little logic and up to 23 ns of routing):

    * each cycle's accesses (the read and the write, their banks as one bit per bank) are
      registered in one place, then copied into each bank's own registers, then into
      registers of each of the bank's block RAMs (one per byte lane), which drive it: the
      block RAMs of a bank lie along a row of the die, apart;
    * a block RAM's read data are registered beside it (its output takes 5.8 ns), twice
      (from the first register on, a path has a whole cycle to cross the die), reset to
      0 unless the bank was read, so that a read's word is the OR of all banks'
      data: taken in two registered levels, groups of :data:`GROUP_BANKS` banks and then
      the groups, instead of a select by bank number reaching every bank's data.

    A write is taken into the access register, then the banks' and the lanes' write
    stages, and written the cycle after (its response is given when it is taken; reads
    pass the same stages, so a read issued once the manager has seen it reads the new
    data); reads are issued on credits for an output
    FIFO rather than on the manager's ``rready``; the bridge is granted the RAM on the AXI
    side's registered activity, from a register of its request."""

    #: Words of a bank: one block RAM (2048 x 9) per byte lane.
    BANK_WORDS = 2048
    #: Banks whose data are OR'd into one register before the last OR into ``picked``.
    GROUP_BANKS = 4
    #: Cycles from a read's issue to its word in the FIFO's input register: the access's
    #: register, the bank's address registers, the byte lanes' address registers, the
    #: block RAM, the lanes' two data registers, the group's register, the picked data
    #: register.
    READ_STAGES = 8
    #: Words of the read FIFO: the reads in flight, one in the FIFO, one being taken out
    #: keep a word a cycle flowing.
    READ_FIFO = READ_STAGES + 2
    #: Cycles from the bridge's request to its ``done`` (and ``rdata``) when the AXI side
    #: is idle: the request's register, then the stages of a read.
    PORT_LATENCY = READ_STAGES + 1

    def __init__(self, axi_signature: wiring.Signature, words: int, word_bytes: int,
                 lane_bytes: int = 1, banked: bool = True) -> None:
        """``lane_bytes``: bytes of a word in one block RAM with its own registers (1 on
        the board; a simulation-only top of a whole bank per memory simulates several
        times faster).  ``banked``: split a RAM of more than :data:`BANK_WORDS` words
        into banks (the board's); a simulation-only top keeps one memory, its every
        access the same number of cycles (the banks' registered stages are there either
        way), and Verilator runs the engine on it 1.1-1.15x faster than on 64 banks."""
        if lane_bytes < 1 or word_bytes % lane_bytes:
            raise ValueError(f"lane_bytes={lane_bytes}: must divide the word's {word_bytes} "
                             f"bytes")
        self.words, self.word_bytes, self.lane_bytes = words, word_bytes, lane_bytes
        self.shift = word_bytes.bit_length() - 1
        if banked and words > self.BANK_WORDS and words % self.BANK_WORDS == 0:
            self.banks, self.bank_words = words // self.BANK_WORDS, self.BANK_WORDS
        else:
            self.banks, self.bank_words = 1, words
        super().__init__({
            "axi": In(axi_signature),
            "port": In(ram_port_layout(words, word_bytes)),
            "rdata": Out(8 * word_bytes), "done": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        axi, nb = self.axi, self.word_bytes
        low_bits = (self.bank_words - 1).bit_length()
        # the bridge's turn: its request (registered) asks, none of its requests is under
        # way and the AXI side was idle the cycle before.  ``granted`` follows a grant
        # through the read's stages to ``done`` and a cycle beyond, while the register
        # still holds the request that ``done`` ended.  The grant is a register, worked
        # out a cycle ahead from the values those registers take: the write channels'
        # ready is its complement, so no path runs from the grant's logic on into the
        # output writer's handshake
        port = Signal.like(self.port)
        m.d.sync += port.eq(self.port)
        axi_busy = Signal()                 # the AXI side's activity, this cycle's
        grant = Signal()
        granted = Signal(self.READ_STAGES + 1)
        m.d.sync += [grant.eq(self.port.valid & ~axi_busy & ~(grant | granted[:-1].any())),
                     granted.eq(Cat(grant, granted[:-1]))]
        m.d.comb += self.done.eq(granted[self.READ_STAGES - 1])
        m.d.comb += [axi.rid.eq(0), axi.rresp.eq(0), axi.bid.eq(0), axi.bresp.eq(0)]
        # ---- reads: a word per cycle while the FIFO has room for it; the next burst's
        # address waits in `pending` and its first word follows the current burst's last
        index = Signal(range(self.words))
        beats = Signal(9)                   # words of the current burst still to read
        m.submodules.rfifo = rfifo = fifo.SyncFIFO(width=8 * nb + 1, depth=self.READ_FIFO)
        popped = rfifo.r_rdy & axi.rready
        m.d.comb += [axi.rdata.eq(rfifo.r_data[:-1]), axi.rlast.eq(rfifo.r_data[-1]),
                     axi.rvalid.eq(rfifo.r_rdy), rfifo.r_en.eq(axi.rready)]
        issue = Signal()
        room = credit_room(m, self.READ_FIFO, issue, popped, name="read_credits")
        # whether the burst has words left: a flag kept with the count, so no comparison
        # with 0 stands ahead of the credits' adders
        beats_nz = Signal()
        m.d.comb += issue.eq(beats_nz & room)
        pending, p_index, p_beats = Signal(), Signal.like(index), Signal.like(beats)
        m.d.comb += axi.arready.eq(~pending)
        accepted = axi.arvalid & axi.arready
        free = Signal()                     # the current burst has no word left to read
        m.d.comb += free.eq(~beats_nz | (issue & (beats == 1)))
        with m.If(issue):
            m.d.sync += [index.eq(index + 1), beats.eq(beats - 1), beats_nz.eq(beats != 1)]
        # (a burst has arlen + 1 >= 1 words)
        with m.If(free & pending):
            m.d.sync += [index.eq(p_index), beats.eq(p_beats), beats_nz.eq(1)]
        with m.Elif(free & accepted):
            m.d.sync += [index.eq(axi.araddr[self.shift:]), beats.eq(axi.arlen + 1),
                         beats_nz.eq(1)]
        with m.If(accepted & (pending | ~free)):
            m.d.sync += [p_index.eq(axi.araddr[self.shift:]), p_beats.eq(axi.arlen + 1)]
        m.d.sync += pending.eq(Mux(free, accepted & pending, pending | accepted))
        read_addr = Signal.like(index)
        m.d.comb += read_addr.eq(Mux(grant, port.addr, index))
        # what each read carries down the pipeline: that it is one, whether it is its
        # burst's last word (for the AXI side)
        read = Signal(self.READ_STAGES)
        last = Signal(self.READ_STAGES)
        m.d.sync += [read.eq(Cat(issue, read[:-1])), last.eq(Cat(beats == 1, last[:-1]))]
        # ---- writes: address and data together into the banks' write stages, a
        # response each
        b_valid = Signal()
        m.d.comb += axi.bvalid.eq(b_valid)
        take, open_ = Signal(), Signal()
        m.d.comb += [open_.eq(~grant & (~b_valid | axi.bready)),
                     take.eq(axi.awvalid & axi.wvalid & open_),
                     axi.awready.eq(open_ & axi.wvalid), axi.wready.eq(open_ & axi.awvalid)]
        with m.If(take):
            m.d.sync += b_valid.eq(1)
        with m.Elif(axi.bready):
            m.d.sync += b_valid.eq(0)
        write_addr = Signal.like(index)
        m.d.comb += write_addr.eq(Mux(take, axi.awaddr[self.shift:], port.addr))
        # ---- the accesses of this cycle, registered here before they fan out to the
        # banks (from the grant and the write's handshake into every bank's write stage
        # was the critical path of the routed full build, 13.9 ns): the bank each reads
        # and writes as one bit per bank (none for one bank), the address's bits within a
        # bank, the write's data and byte strobes
        hit_r, hit_w = Signal(self.banks), Signal(self.banks)
        r_low, w_low = Signal(low_bits), Signal(low_bits)
        w_data_c, w_strb_c = Signal(8 * nb), Signal(nb)
        m.d.sync += [
            hit_r.eq(Mux(issue | grant, 1 << read_addr[low_bits:], 0)),
            hit_w.eq(1 << write_addr[low_bits:]),
            r_low.eq(read_addr[:low_bits]), w_low.eq(write_addr[:low_bits]),
            w_data_c.eq(Mux(take, axi.wdata, port.wdata)),
            w_strb_c.eq(Mux(take, axi.wstrb, Mux(grant & port.write, port.strb, 0))),
        ]
        # ---- the banks, each with its own registers, and those of each byte lane's block
        # RAM (``keep``: yosys must not merge the copies, which are there to be placed
        # apart, each beside the block RAMs it drives)
        picked = Signal(8 * nb)
        bank_data = []
        for i in range(self.banks):
            keep = {"keep": 1}
            r_en = Signal(name=f"bank_{i}_r_en", attrs=keep)
            r_addr = Signal(low_bits, name=f"bank_{i}_r_addr", attrs=keep)
            w_addr = Signal(low_bits, name=f"bank_{i}_w_addr", attrs=keep)
            w_data = Signal(8 * nb, name=f"bank_{i}_w_data", attrs=keep)
            w_strb = Signal(nb, name=f"bank_{i}_w_strb", attrs=keep)
            m.d.sync += [r_en.eq(hit_r[i]), r_addr.eq(r_low), w_addr.eq(w_low),
                         w_data.eq(w_data_c), w_strb.eq(Mux(hit_w[i], w_strb_c, 0))]
            lanes = []
            lb = self.lane_bytes
            for j in range(nb // lb):
                lane = f"bank_{i}_lane_{j}"
                l_r_en = Signal(name=f"{lane}_r_en", attrs=keep)
                l_r_addr = Signal(low_bits, name=f"{lane}_r_addr", attrs=keep)
                l_w_addr = Signal(low_bits, name=f"{lane}_w_addr", attrs=keep)
                l_w_data = Signal(8 * lb, name=f"{lane}_w_data", attrs=keep)
                l_w_en = Signal(lb, name=f"{lane}_w_en", attrs=keep)
                l_r_en_q = Signal(name=f"{lane}_r_en_q", attrs=keep)
                l_data = Signal(8 * lb, name=f"{lane}_data", attrs=keep)
                l_out = Signal(8 * lb, name=f"{lane}_out", attrs=keep)
                m.d.sync += [l_r_en.eq(r_en), l_r_addr.eq(r_addr), l_r_en_q.eq(l_r_en),
                             l_w_addr.eq(w_addr), l_w_data.eq(w_data.word_select(j, 8 * lb)),
                             l_w_en.eq(w_strb.word_select(j, lb))]
                # the lane's bytes.  A read in the cycle its byte is written may return
                # anything on the board (NO_COLLISION): a manager that reads a word after
                # its write's response (the engine does) never reads it then, nor does the
                # bridge, which waits for an idle AXI side
                mem = memory.Memory(shape=8 * lb, depth=self.bank_words, init=[])
                m.submodules[f"{lane}{NO_COLLISION}"] = mem
                rd, wr = mem.read_port(), mem.write_port(granularity=8)
                # the data of a lane not read are 0 (the flip-flops' reset): the read word
                # is the OR of all banks' data, with no select reaching across the die and
                # a data register beside each block RAM
                m.d.sync += [l_data.eq(Mux(l_r_en_q, rd.data, 0)), l_out.eq(l_data)]
                m.d.comb += [rd.en.eq(l_r_en), rd.addr.eq(l_r_addr), wr.addr.eq(l_w_addr),
                             wr.data.eq(l_w_data), wr.en.eq(l_w_en)]
                lanes.append(l_out)
            bank_data.append(Cat(*lanes))
        groups = []
        for g in range(0, self.banks, self.GROUP_BANKS):
            group = Signal(8 * nb, name=f"group_{g // self.GROUP_BANKS}_data")
            m.d.sync += group.eq(any_of(bank_data[g:g + self.GROUP_BANKS]))
            groups.append(group)
        # (and held: the bridge takes it after done)
        with m.If(read[-2] | granted[self.READ_STAGES - 2]):
            m.d.sync += picked.eq(any_of(groups))
        m.d.comb += [rfifo.w_en.eq(read[-1]), rfifo.w_data.eq(Cat(picked, last[-1])),
                     self.rdata.eq(picked)]
        m.d.comb += axi_busy.eq(beats_nz | pending | rfifo.r_rdy | read.any()
                                | axi.arvalid | axi.awvalid | take)
        return m


class RamEngine(wiring.Component):
    """The conv engine (with the units ``others`` beside it: :class:`ConvEngine`) on its
    block RAM (:class:`AxiRam`), as on the board, with the RAM's
    host port as ports of its own (``mem_*``) instead of the UART bridge: a simulation
    top whose memory traffic stays inside the simulator.  A testbench loads the RAM and
    reads results through the port (a word per request, ``mem_done``
    :data:`AxiRam.PORT_LATENCY` cycles after the request while the engine leaves the RAM
    alone).

    Bus addresses go through ``windows`` address windows on their way to the RAM
    (``map_base``/``map_size``/``map_offset``: 32 bits per window, window ``i`` in bits
    ``32 i`` up): an address in ``[base, base + size)`` becomes ``address - base +
    offset``; others pass as they are.  A testbench places a program's memory regions,
    wherever they lie in the 4 GiB space, side by side in the RAM."""

    def __init__(self, cfg, ram_bytes: int, engine_entries: int, windows: int = 8,
                 others: tuple[str, ...] = ()) -> None:
        self.cfg, self.words, self.windows = cfg, ram_bytes // cfg.atom_size, windows
        # (the register file decoded in one place: simulated only, like the RAM below)
        self.engine = ConvEngine(cfg, feature_entries=engine_entries,
                                 weight_entries=engine_entries, others=others,
                                 csb_per_register=False)
        nb = cfg.atom_size
        super().__init__({
            "req": In(CSB_REQUEST), "rdata": Out(32), "rvalid": Out(1), "error": Out(1),
            "irq": Out(1), "bus_error": Out(1),
            "mem_valid": In(1), "mem_write": In(1), "mem_addr": In(range(self.words)),
            "mem_wdata": In(8 * nb), "mem_strb": In(nb),
            "mem_rdata": Out(8 * nb), "mem_done": Out(1),
            "map_base": In(32 * windows), "map_size": In(32 * windows),
            "map_offset": In(32 * windows),
        })

    def _translate(self, m: Module, addr: Signal) -> Signal:
        out = Signal.like(addr, name=f"{addr.name}_in_ram")
        m.d.comb += out.eq(addr)
        for i in reversed(range(self.windows)):      # window 0 wins (the last assignment)
            base, size, offset = (getattr(self, f"map_{k}").word_select(i, 32)
                                  for k in ("base", "size", "offset"))
            with m.If((addr >= base) & ((addr - base)[:32] < size)):
                m.d.comb += out.eq((addr - base + offset)[:len(addr)])
        return out

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.engine = engine = self.engine
        # (one memory, not a block RAM per byte lane of each bank: this top is simulated
        # only, and the lanes made its Icarus run of a trace three times slower)
        m.submodules.ram = ram = AxiRam(engine.axi.signature, self.words, self.cfg.atom_size,
                                        lane_bytes=self.cfg.atom_size, banked=False)
        # (the address, write-data and read-data channels through registers, as on the
        # board: fpga.bridge)
        m.submodules.slice = sliced = AxiSlice(engine.axi.signature, BOARD_SLICED)
        wiring.connect(m, engine.axi, sliced.manager)
        for name, member in engine.axi.signature.members.items():
            src, dst = getattr(sliced.subordinate, name), getattr(ram.axi, name)
            if name in ("araddr", "awaddr"):
                m.d.comb += dst.eq(self._translate(m, src))
            elif member.flow == Out:
                m.d.comb += dst.eq(src)
            else:
                m.d.comb += src.eq(dst)
        m.d.comb += [engine.req.eq(self.req), self.rdata.eq(engine.rdata),
                     self.rvalid.eq(engine.rvalid), self.error.eq(engine.error),
                     self.irq.eq(engine.irq), self.bus_error.eq(engine.bus_error),
                     ram.port.valid.eq(self.mem_valid), ram.port.write.eq(self.mem_write),
                     ram.port.addr.eq(self.mem_addr), ram.port.wdata.eq(self.mem_wdata),
                     ram.port.strb.eq(self.mem_strb),
                     self.mem_rdata.eq(ram.rdata), self.mem_done.eq(ram.done)]
        return m
