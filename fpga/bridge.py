"""The FPGA build's host bridge: the board's byte protocol (:mod:`fpga.protocol`) on the
UART, and the core of the board top that joins it to the conv engine.

:class:`HostBridge` turns the host's byte commands into CSB requests and
memory accesses; the protocol (opcodes, little-endian fields, one response per
command) is :mod:`fpga.protocol`, whose encoder the host driver and the cocotb
test share.  :class:`BridgedEngine` is the engine, its memory in block RAM
(:class:`~accel.rtl.uart.AxiRam`) and the bridge on a UART
(:class:`~accel.rtl.uart.UartRx` / :class:`~accel.rtl.uart.UartTx`).  It lives
here, not in :mod:`accel.rtl`, because the accelerator's RTL does not import
the FPGA build.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from accel.config import HwConfig
from accel.rtl.axi import AxiSlice
from accel.rtl.conv_engine import ConvEngine
from accel.rtl.csb_regs import CSB_REQUEST
from accel.rtl.uart import BOARD_SLICED, AxiRam, UartRx, UartTx, ram_port_layout
from fpga.protocol import (
    ACK,
    ENGINE_ENTRIES,
    RAM_BYTES,
    READ_MEM,
    READ_REG,
    WRITE_MEM,
    WRITE_REG,
)

#: UART bit time, in clock cycles, of the ``bridged_engine`` simulation top
#: (:func:`simulation_top`): the fastest the receiver allows, for short simulations
SIMULATION_DIVISOR = 4


class HostBridge(wiring.Component):
    """Host commands (:mod:`fpga.protocol`) from ``rx`` to the CSB (``req``, ``rdata``,
    ``rvalid``) and the memory (``port``); responses to ``tx``."""

    def __init__(self, words: int, word_bytes: int) -> None:
        self.words, self.word_bytes = words, word_bytes
        super().__init__({
            "rx": In(stream.Signature(8)), "tx": Out(stream.Signature(8)),
            "req": Out(CSB_REQUEST), "rdata": In(32), "rvalid": In(1),
            "port": Out(ram_port_layout(words, word_bytes)),
            "mem_rdata": In(8 * word_bytes), "mem_done": In(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        nb = self.word_bytes
        shift = nb.bit_length() - 1
        m.submodules.inq = inq = fifo.SyncFIFO(width=8, depth=16)
        m.d.comb += [inq.w_data.eq(self.rx.payload), inq.w_en.eq(self.rx.valid),
                     self.rx.ready.eq(inq.w_rdy)]
        byte = inq.r_data
        opcode = Signal(8)
        addr = Signal(32)
        value = Signal(32)                  # register data, or the byte count
        # the byte count is 0: a flag set with the count (its comparison into the response
        # register was the reduced build's critical path)
        no_bytes = Signal()
        n = Signal(range(5))
        out = Signal(40)                    # response bytes, first in the low byte
        out_left = Signal(range(6))
        word = Signal(8 * nb)
        # the register file's answer into registers here first (its valid from across the
        # die through this state machine's decode into the response's enables was 13.87 ns
        # in the full engine); a read waits a cycle more
        rvalid, rdata = Signal(), Signal(32)
        m.d.sync += [rvalid.eq(self.rvalid), rdata.eq(self.rdata)]
        m.d.comb += [self.tx.payload.eq(out[:8]), self.tx.valid.eq(out_left != 0)]
        with m.If(self.tx.valid & self.tx.ready):
            m.d.sync += [out.eq(out >> 8), out_left.eq(out_left - 1)]
        lane = addr[:shift]
        # the CSB request leaves a register (a one-cycle pulse after WRITE_REG or READ_REG):
        # its address and data fan out to every register of the register file, and start
        # at flip-flops rather than at this state machine's logic
        req = Signal(CSB_REQUEST)
        m.d.comb += self.req.eq(req)
        m.d.sync += req.valid.eq(0)
        with m.FSM() as fsm:
            with m.State("OPCODE"):
                with m.If(inq.r_rdy & (out_left == 0)):
                    m.d.sync += [opcode.eq(byte), n.eq(0)]
                    m.next = "ADDRESS"
            with m.State("ADDRESS"):
                with m.If(inq.r_rdy):
                    m.d.sync += [addr.eq(Cat(addr[8:], byte)), n.eq(n + 1)]
                    with m.If(n == 3):
                        m.d.sync += n.eq(0)
                        with m.If(opcode == READ_REG):
                            m.next = "READ_REG"
                        with m.Elif(opcode == WRITE_REG):
                            m.next = "VALUE4"
                        with m.Else():
                            m.next = "VALUE2"
            with m.State("VALUE4"):
                with m.If(inq.r_rdy):
                    m.d.sync += [value.eq(Cat(value[8:], byte)), n.eq(n + 1)]
                    with m.If(n == 3):
                        m.next = "WRITE_REG"
            with m.State("VALUE2"):
                with m.If(inq.r_rdy):
                    m.d.sync += [value.eq(Cat(value[8:16], byte)), n.eq(n + 1),
                                 no_bytes.eq((value[8:16] == 0) & (byte == 0))]
                    with m.If(n == 1):
                        with m.If(opcode == WRITE_MEM):
                            m.next = "MEM_BYTE_IN"
                        with m.Else():
                            m.next = "MEM_READ"
            with m.State("WRITE_REG"):
                m.d.sync += [req.valid.eq(1), req.write.eq(1), req.addr.eq(addr),
                             req.wdata.eq(value), out.eq(ACK | WRITE_REG), out_left.eq(1)]
                m.next = "OPCODE"
            with m.State("READ_REG"):
                m.d.sync += [req.valid.eq(1), req.write.eq(0), req.addr.eq(addr)]
                m.next = "READ_WAIT"
            with m.State("READ_WAIT"):
                with m.If(rvalid):
                    m.d.sync += [out.eq(Cat(Const(ACK | READ_REG, 8), rdata)),
                                 out_left.eq(5)]
                    m.next = "OPCODE"
            # memory writes: a byte at a time, each a strobed word write
            with m.State("MEM_BYTE_IN"):
                with m.If(no_bytes):
                    m.d.sync += [out.eq(ACK | WRITE_MEM), out_left.eq(1)]
                    m.next = "OPCODE"
                with m.Elif(inq.r_rdy):
                    m.d.sync += word.eq(byte.replicate(nb))
                    m.next = "MEM_WRITE"
            with m.State("MEM_WRITE"):
                m.d.comb += [self.port.valid.eq(1), self.port.write.eq(1),
                             self.port.addr.eq(addr[shift:]), self.port.wdata.eq(word),
                             self.port.strb.eq(1 << lane)]
                with m.If(self.mem_done):
                    m.d.sync += [addr.eq(addr + 1), value.eq(value - 1),
                                 no_bytes.eq(value[:16] == 1)]
                    m.next = "MEM_BYTE_IN"
            # memory reads: a word read per byte, the byte sent before the next read
            with m.State("MEM_READ"):
                # the byte before goes out first (and the acknowledgement after the last)
                with m.If(out_left == 0):
                    with m.If(no_bytes):
                        m.d.sync += [out.eq(ACK | READ_MEM), out_left.eq(1)]
                        m.next = "OPCODE"
                    with m.Else():
                        m.d.comb += [self.port.valid.eq(1), self.port.addr.eq(addr[shift:])]
                        with m.If(self.mem_done):
                            m.next = "MEM_BYTE_OUT"
            with m.State("MEM_BYTE_OUT"):
                m.d.sync += [out.eq(self.mem_rdata.word_select(lane, 8)), out_left.eq(1),
                             addr.eq(addr + 1), value.eq(value - 1),
                             no_bytes.eq(value[:16] == 1)]
                m.next = "MEM_READ"
        # which states take a byte, as one expression outside the FSM: Icarus evaluates a
        # process of the FSM's only once one of its inputs changes, and in OPCODE none does
        # before the first byte, which would leave the FIFO's read enable undefined then
        m.d.comb += inq.r_en.eq(
            (fsm.ongoing("OPCODE") & (out_left == 0)) | fsm.ongoing("ADDRESS")
            | fsm.ongoing("VALUE4") | fsm.ongoing("VALUE2")
            | (fsm.ongoing("MEM_BYTE_IN") & ~no_bytes))
        return m


class BridgedEngine(wiring.Component):
    """The FPGA build's core: the conv engine (with the units ``others`` beside it:
    :class:`~accel.rtl.conv_engine.ConvEngine`), its memory in block RAM
    (:class:`AxiRam`) and the host bridge on a UART (``rx``/``tx`` at ``divisor`` cycles
    per bit); ``irq`` and ``bus_error`` for LEDs."""

    def __init__(self, cfg, divisor: int, ram_bytes: int = RAM_BYTES,
                 engine_entries: int = ENGINE_ENTRIES, others: tuple[str, ...] = ()) -> None:
        self.cfg, self.divisor = cfg, divisor
        self.words = ram_bytes // cfg.atom_size
        self.engine = ConvEngine(cfg, feature_entries=engine_entries,
                                 weight_entries=engine_entries, others=others)
        super().__init__({"rx": In(1, init=1), "tx": Out(1, init=1), "irq": Out(1),
                          "bus_error": Out(1)})

    def elaborate(self, platform) -> Module:
        m = Module()
        nb = self.cfg.atom_size
        m.submodules.engine = engine = self.engine
        m.submodules.ram = ram = AxiRam(engine.axi.signature, self.words, nb)
        # (the address, write-data and read-data channels through registers: the engine's
        # choice of the unit with the bus is not the RAM's burst count's or write port's
        # logic too, nor the RAM's read queue the readers' buffers')
        m.submodules.slice = sliced = AxiSlice(engine.axi.signature, BOARD_SLICED)
        m.submodules.bridge = bridge = HostBridge(self.words, nb)
        m.submodules.urx = urx = UartRx(self.divisor)
        m.submodules.utx = utx = UartTx(self.divisor)
        wiring.connect(m, engine.axi, sliced.manager)
        wiring.connect(m, sliced.subordinate, ram.axi)
        wiring.connect(m, urx.data, bridge.rx)
        wiring.connect(m, bridge.tx, utx.data)
        m.d.comb += [urx.rx.eq(self.rx), self.tx.eq(utx.tx),
                     engine.req.eq(bridge.req), bridge.rdata.eq(engine.rdata),
                     bridge.rvalid.eq(engine.rvalid),
                     ram.port.eq(bridge.port), bridge.mem_rdata.eq(ram.rdata),
                     bridge.mem_done.eq(ram.done),
                     self.irq.eq(engine.irq), self.bus_error.eq(engine.bus_error)]
        return m




def simulation_top(cfg: HwConfig) -> BridgedEngine:
    """The ``bridged_engine`` top of the cocotb test (``tests/rtl/bridge_tb.py``): the board's
    core at :data:`SIMULATION_DIVISOR` cycles per UART bit."""
    return BridgedEngine(cfg, divisor=SIMULATION_DIVISOR)
