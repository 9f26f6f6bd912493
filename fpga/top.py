"""Self-test board top: the RTL CMAC fed by an LFSR, its results folded onto LEDs.

The array has no host interface on the board, so to keep synthesis from
removing it every input bit comes from a register the tools cannot predict
(a 32-bit LFSR shifted into a shift register as wide as the inputs) and every
output bit reaches a pin (results XOR-folded into a checksum register whose
parity and low bits drive the LEDs).  ``result.ready`` and the ``valid`` bits
are LFSR bits too, so the stall logic is exercised and kept.  The MAC array
runs in a PLL clock at the target frequency; the board's reference clock only
feeds the PLL.
"""

from __future__ import annotations

from amaranth.hdl import ClockDomain, Const, Elaboratable, Instance, Module, Signal
from amaranth.lib import io

from accel.config import HwConfig
from accel.rtl.cmac import Cmac
from fpga.pll import Ecp5Pll, ecp5_pll_params

#: Fibonacci LFSR of 32 bits with taps 32, 22, 2, 1 (maximal length).
LFSR_BITS = 32
LFSR_TAPS = (31, 21, 1, 0)


def pll_clock(m: Module, platform: object, target_hz: float) -> float:
    """The ``sync`` domain at ``target_hz`` from the board's reference clock through the
    ECP5 PLL, held in reset until the PLL locks; returns the frequency reached.

    The domain has no reset signal of its own: its flip-flops are reset through the chip's
    global set/reset network (GSR), which reaches every flip-flop on a dedicated wire and
    loads its initial value - the way amaranth's own ECP5 platform resets its default
    domain.  The PLL's lock, synchronized by two flip-flops kept out of that network (they
    must leave reset first), drives the network through ``SGSR``, which releases it in step
    with the clock.  A reset in the fabric is logic or routing at every register: as a
    synchronous reset it was among the conv engine's most congested nets, as an
    asynchronous one through a global buffer (DCCA) nextpnr found no route into the
    buffer's input in four of ten placements."""
    ref = platform.request(platform.default_clk, dir="-")
    f_ref = platform.default_clk_frequency
    cd_ref = ClockDomain("ref", reset_less=True)
    m.domains += cd_ref
    m.submodules.ref_buf = ref_buf = io.Buffer("i", ref)
    m.d.comb += cd_ref.clk.eq(ref_buf.i)
    pll = m.submodules.pll = Ecp5Pll(ecp5_pll_params(f_ref, target_hz), f_ref)
    sync = ClockDomain("sync", reset_less=True)
    m.domains += sync
    m.d.comb += sync.clk.eq(pll.clk_out)
    locked_0, locked_1 = Signal(), Signal()
    m.submodules.lock_sync_0 = Instance("FD1S3AX", p_GSR="DISABLED", i_CK=sync.clk,
                                        i_D=pll.locked, o_Q=locked_0)
    m.submodules.lock_sync_1 = Instance("FD1S3AX", p_GSR="DISABLED", i_CK=sync.clk,
                                        i_D=locked_0, o_Q=locked_1)
    # GSR is active low: flip-flops stay at their initial values until the lock is through
    m.submodules.gsr = Instance("SGSR", i_CLK=sync.clk, i_GSR=locked_1)
    platform.add_clock_constraint(sync.clk, pll.params.f_out)
    return pll.params.f_out


class CmacSelfTest(Elaboratable):
    """Board top around :class:`accel.rtl.cmac.Cmac`.

    Parameters
    ----------
    cfg : HwConfig
        Configuration of the MAC array.
    target_hz : float
        Frequency of the PLL clock the array runs in.
    leds : int
        Number of board LEDs to drive (``led`` resources 0..leds-1).
    """

    def __init__(self, cfg: HwConfig, target_hz: float = 100e6, leds: int = 8) -> None:
        self.cfg, self.target_hz, self.leds = cfg, target_hz, leds
        self.cmac = Cmac(cfg)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        cmac = m.submodules.cmac = self.cmac

        pll_clock(m, platform, self.target_hz)

        # Stimulus: an LFSR bit per cycle shifted into a register as wide as
        # both input payloads plus the three handshake bits.
        data_w = len(cmac.data.payload.as_value())
        weight_w = len(cmac.weight.payload.as_value())
        lfsr = Signal(LFSR_BITS, init=1)
        feedback = Const(0, 1)
        for tap in LFSR_TAPS:
            feedback = feedback ^ lfsr[tap]
        m.d.sync += lfsr.eq((lfsr << 1) | feedback)
        shift = Signal(data_w + weight_w + 4)
        m.d.sync += shift.eq((shift << 1) | lfsr[-1])
        m.d.comb += [
            cmac.data.payload.eq(shift[:data_w]),
            cmac.weight.payload.eq(shift[data_w:data_w + weight_w]),
            cmac.data.valid.eq(lfsr[3]),
            # Reload a kernel about one cycle in four.
            cmac.weight.valid.eq(lfsr[5] & lfsr[9]),
            cmac.result.ready.eq(lfsr[7] | lfsr[11]),
        ]

        # Observation: fold every accepted result into a checksum register.
        result = cmac.result.payload.as_value()
        checksum = Signal(len(result))
        with m.If(cmac.result.valid & cmac.result.ready):
            m.d.sync += checksum.eq(checksum ^ result)
        parity = Signal()
        m.d.sync += parity.eq(checksum.xor())
        leds = []
        for i in range(self.leds):
            buf = io.Buffer("o", platform.request("led", i, dir="-"))
            m.submodules[f"led_{i}"] = buf
            leds.append(buf.o)
        m.d.comb += leds[0].eq(parity)
        for i, led in enumerate(leds[1:]):
            m.d.comb += led.eq(checksum[i])
        return m

