"""Log parsers of the FPGA report, on hand-written excerpts in the tools' formats."""

from __future__ import annotations

import pytest

from fpga.report import (
    BuildReport,
    parse_nextpnr_critical_path,
    parse_nextpnr_fmax,
    parse_nextpnr_utilisation,
    parse_yosys_stat,
)

YOSYS_NEW = """
2.52. Printing statistics.

=== top ===

        +----------Local Count, excluding submodules.
        |
     5490 wires
      103 cells
        1   EHXPLLL
       64   MULT18X18D
     3790 submodules
      512   CCU2C
      351   LUT4
     2919   TRELLIS_FF
"""

YOSYS_OLD = """
2.50. Printing statistics.

=== top ===

   Number of wires:               5490
   Number of cells:               3893
     CCU2C                         512
     LUT4                          351
     MULT18X18D                     64
     TRELLIS_FF                   2919
     DP16KD                          2
"""

NEXTPNR = """
Info: Max frequency for clock '$glbnet$clk': 92.15 MHz (FAIL at 100.00 MHz)
Info: Device utilisation:
Info: \t          TRELLIS_IO:       9/    365     2%
Info: \t              DP16KD:       0/    208     0%
Info: \t          MULT18X18D:      64/    156    41%
Info: \t          TRELLIS_FF:    2919/  83640     3%
Info: \t        TRELLIS_COMB:    1601/  83640     1%

Info: Placed 9 cells based on constraints.
Info: Max frequency for clock '$glbnet$clk': 106.21 MHz (PASS at 100.00 MHz)
"""


@pytest.mark.parametrize("log", [YOSYS_NEW, YOSYS_OLD])
def test_yosys_stat_both_formats(log: str) -> None:
    cells = parse_yosys_stat(log)
    assert (cells["LUT4"], cells["TRELLIS_FF"], cells["MULT18X18D"], cells["CCU2C"]) == \
        (351, 2919, 64, 512)


def test_yosys_stat_missing_section_is_an_error() -> None:
    with pytest.raises(ValueError, match="stat"):
        parse_yosys_stat("no statistics here")


def test_nextpnr_utilisation_and_last_fmax() -> None:
    util = parse_nextpnr_utilisation(NEXTPNR)
    assert util["MULT18X18D"] == (64, 156)
    assert util["TRELLIS_COMB"] == (1601, 83640)
    assert "Placed" not in " ".join(util)
    # Placement and routing both report; the post-route (last) value counts.
    assert parse_nextpnr_fmax(NEXTPNR) == {"$glbnet$clk": (106.21, 100.0)}


def test_report_text_says_whether_timing_is_met() -> None:
    report = BuildReport(board="ulx3s-85f", config="nv_small", atomic_c=8, atomic_k=8,
                         target_mhz=100.0, fmax_mhz=92.15, lut4=351, ff=2919, dsp=64, bram=0,
                         carry=512, bitstream="top.bit", build_s=1.0,
                         utilisation={"MULT18X18D": (64, 156)})
    assert not report.timing_met
    text = report.to_text()
    assert "NOT met" in text and "64 / 156" in text
    assert report.to_dict()["timing_met"] is False


def test_critical_path_from_a_nextpnr_report() -> None:
    # the shape of nextpnr's --report JSON, two cells apart by one LUT
    step = {"from": {"cell": "a"}, "to": {"cell": "b"}}
    report = {"critical_paths": [{"from": "posedge clk", "to": "posedge clk", "path": [
        {**step, "type": "clk-to-q", "delay": 0.5},
        {**step, "type": "routing", "delay": 2.25},
        {"from": {"cell": "lut"}, "to": {"cell": "lut"}, "type": "logic", "delay": 0.25},
        {"from": {"cell": "lut"}, "to": {"cell": "ff"}, "type": "routing", "delay": 1.0},
        {"from": {"cell": "ff"}, "to": {"cell": "ff"}, "type": "setup", "delay": 0.0}]}]}
    assert parse_nextpnr_critical_path(report) == {
        "from": "a", "to": "ff", "ns": 4.0, "routing_ns": 3.25, "logic_steps": 1}
    assert parse_nextpnr_critical_path({"critical_paths": []}) == {}
    text = BuildReport(board="ulx3s-85f", config="nv_small", atomic_c=8, atomic_k=8,
                       target_mhz=100.0, fmax_mhz=250.0, lut4=1, ff=1, dsp=0, bram=0, carry=0,
                       bitstream="top.bit", build_s=1.0,
                       critical_path=parse_nextpnr_critical_path(report)).to_text()
    assert "a -> ff: 4.00 ns (3.25 routing, 1 logic steps)" in text


def test_a_synthesis_only_report_says_nothing_was_placed():
    report = BuildReport(board="ulx3s-85f", config="c4k4", atomic_c=4, atomic_k=4,
                         target_mhz=100.0, fmax_mhz=None, lut4=9000, ff=8000, dsp=20, bram=4,
                         carry=300, bitstream=None, build_s=1.0, placed=False)
    assert report.timing_met is None and report.to_dict()["timing_met"] is None
    text = report.to_text()
    assert "Fmax" in text and "not placed (--synth-only)" in text
    assert "nextpnr seed" not in text and "TRELLIS_COMB" not in text
    assert "bitstream" in text and "none" in text and "LUT4 (logic)" in text and "9000" in text
