from __future__ import annotations

import pytest

from fpga.pll import ecp5_pll_params


def test_25_to_100_mhz() -> None:
    # Hand check: 25 MHz / 1 * 4 = 100 MHz, VCO = 100 * 6 = 600 MHz (inside 400-800).
    p = ecp5_pll_params(25e6, 100e6)
    assert (p.clki_div, p.clkfb_div, p.clkop_div) == (1, 4, 6)
    assert p.f_out == 100e6 and p.f_vco == 600e6


def test_unreachable_frequency_names_the_range() -> None:
    with pytest.raises(ValueError, match="outside 3.125-400 MHz"):
        ecp5_pll_params(25e6, 1e9)
