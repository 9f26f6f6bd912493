"""ECP5 ``EHXPLLL``: divisor search and a one-output clock generator.

The output frequency is ``f_in / CLKI_DIV * CLKFB_DIV`` (feedback from CLKOP)
and the VCO runs at ``f_out * CLKOP_DIV``.  The ranges below are the ECP5
family data sheet's: PFD 3.125-400 MHz, VCO 400-800 MHz, output 3.125-400 MHz.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import ClockSignal, Elaboratable, Instance, Module, Signal

PFD_HZ = (3.125e6, 400e6)
VCO_HZ = (400e6, 800e6)
OUT_HZ = (3.125e6, 400e6)


@dataclass(frozen=True)
class PllParams:
    """Divisors of one EHXPLLL setting and the frequency they give."""

    clki_div: int
    clkfb_div: int
    clkop_div: int
    f_out: float
    f_vco: float


def ecp5_pll_params(f_in: float, f_out: float) -> PllParams:
    """The divisors whose output is closest to ``f_out`` (ties: VCO nearest 600 MHz).

    >>> p = ecp5_pll_params(25e6, 100e6)
    >>> (p.f_out, p.f_vco)
    (100000000.0, 600000000.0)
    """
    if not OUT_HZ[0] <= f_out <= OUT_HZ[1]:
        raise ValueError(f"PLL output {f_out / 1e6:g} MHz outside {OUT_HZ[0] / 1e6:g}-"
                         f"{OUT_HZ[1] / 1e6:g} MHz")
    best: tuple[tuple[float, float], PllParams] | None = None
    for clki_div in range(1, 129):
        pfd = f_in / clki_div
        if not PFD_HZ[0] <= pfd <= PFD_HZ[1]:
            continue
        for clkfb_div in range(1, 81):
            out = pfd * clkfb_div
            if not OUT_HZ[0] <= out <= OUT_HZ[1]:
                continue
            for clkop_div in range(1, 129):
                vco = out * clkop_div
                if VCO_HZ[0] <= vco <= VCO_HZ[1]:
                    key = (abs(out - f_out), abs(vco - 600e6))
                    if best is None or key < best[0]:
                        best = (key, PllParams(clki_div, clkfb_div, clkop_div, out, vco))
    if best is None:
        raise ValueError(f"no EHXPLLL setting makes {f_out / 1e6:g} MHz from {f_in / 1e6:g} MHz")
    return best[1]


class Ecp5Pll(Elaboratable):
    """One-output EHXPLLL driving ``clk_out`` from the clock of domain ``src_domain``.

    Attributes
    ----------
    clk_out : Signal, out
        The generated clock.
    locked : Signal, out
        High once the PLL has locked.
    """

    def __init__(self, params: PllParams, f_in: float, src_domain: str = "ref") -> None:
        self.params, self.f_in, self.src_domain = params, f_in, src_domain
        self.clk_out = Signal()
        self.locked = Signal()

    def elaborate(self, platform: object) -> Module:
        m = Module()
        p = self.params
        m.submodules.pll = Instance(
            "EHXPLLL",
            a_FREQUENCY_PIN_CLKI=f"{self.f_in / 1e6:g}",
            a_FREQUENCY_PIN_CLKOP=f"{p.f_out / 1e6:g}",
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA",
            p_CLKI_DIV=p.clki_div, p_CLKFB_DIV=p.clkfb_div,
            p_CLKOP_ENABLE="ENABLED", p_CLKOP_DIV=p.clkop_div,
            p_CLKOP_CPHASE=p.clkop_div - 1, p_CLKOP_FPHASE=0, p_FEEDBK_PATH="CLKOP",
            i_CLKI=ClockSignal(self.src_domain), i_CLKFB=self.clk_out,
            i_RST=0, i_STDBY=0, i_PHASESEL0=0, i_PHASESEL1=0, i_PHASEDIR=1,
            i_PHASESTEP=1, i_PHASELOADREG=1, i_PLLWAKESYNC=0, i_ENCLKOP=0,
            o_CLKOP=self.clk_out, o_LOCK=self.locked,
        )
        return m
