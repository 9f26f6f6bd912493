"""Board top of the conv engine: the engine, its memory in block RAM, a UART bridge to the host.

:class:`~fpga.bridge.BridgedEngine` on the board's FTDI UART (``uart`` 0),
clocked by the PLL at the target frequency; LED 0 shows the interrupt line,
LED 1 a bus error, LED 7 a heartbeat.  The host drives it with
``opendla fpga run`` (:mod:`fpga.host`) through :mod:`fpga.protocol`.
"""

from __future__ import annotations

from amaranth.hdl import Elaboratable, Module, Signal
from amaranth.lib import io

from accel.config import HwConfig
from fpga.bridge import BridgedEngine
from fpga.protocol import BAUD, ENGINE_ENTRIES, RAM_BYTES
from fpga.top import pll_clock


class EngineTop(Elaboratable):
    """See the module docstring.  ``ram_bytes``: the DLA memory on the board;
    ``engine_entries``: the engine's feature and weight memories (entries each);
    ``others``: the units beside the convolution (:data:`accel.rtl.conv_engine.OTHER_UNITS`)."""

    def __init__(self, cfg: HwConfig, target_hz: float = 100e6, baud: int = BAUD,
                 ram_bytes: int = RAM_BYTES, engine_entries: int = ENGINE_ENTRIES,
                 others: tuple[str, ...] = ()) -> None:
        self.cfg, self.target_hz, self.baud = cfg, target_hz, baud
        self.ram_bytes, self.engine_entries, self.others = ram_bytes, engine_entries, others

    def elaborate(self, platform: object) -> Module:
        m = Module()
        f_clk = pll_clock(m, platform, self.target_hz)
        divisor = round(f_clk / self.baud)
        m.submodules.core = core = BridgedEngine(self.cfg, divisor, self.ram_bytes,
                                                 self.engine_entries, self.others)
        uart = platform.request("uart", 0, dir="-")
        m.submodules.rx = rx = io.Buffer("i", uart.rx)
        m.submodules.tx = tx = io.Buffer("o", uart.tx)
        m.d.comb += [core.rx.eq(rx.i), tx.o.eq(core.tx)]
        beat = Signal(27)
        m.d.sync += beat.eq(beat + 1)
        for i, value in ((0, core.irq), (1, core.bus_error), (7, beat[-1])):
            led = io.Buffer("o", platform.request("led", i, dir="-"))
            m.submodules[f"led_{i}"] = led
            m.d.comb += led.o.eq(value)
        return m
