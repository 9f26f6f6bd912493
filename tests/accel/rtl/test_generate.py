"""Verilog generation: widths follow from HwConfig (hand-computed here)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from accel.config import get_preset
from accel.rtl.generate import clocked_top, config_from_json, generate_verilog


def test_nv_small_ports(tmp_path: Path) -> None:
    cfg = get_preset("nv_small")
    path = generate_verilog(cfg, tmp_path)
    text = path.read_text()
    assert text.count("module cmac(") == 1
    ports = {p["name"]: (p["direction"], p["width"])
             for p in json.loads((tmp_path / "cmac.ports.json").read_text())}
    # data: 8 lanes x 8 bits + 8 mask bits; weight: + a 3-bit kernel index;
    # result: 8 sums of 16 + log2(8) = 19 bits.
    assert ports["data__payload"] == ("input", 72)
    assert ports["weight__payload"] == ("input", 75)
    assert ports["result__payload"] == ("output", 152)
    assert ports["data__ready"] == ("output", 1) and ports["result__ready"] == ("input", 1)
    assert "output [151:0] result__payload" in text
    assert config_from_json((tmp_path / "cmac.config.json").read_text()) == cfg


def test_unknown_top_lists_tops(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"top 'sdp_rdma' not in cmac, postproc, cacc"):
        generate_verilog(get_preset("nv_small"), tmp_path, top="sdp_rdma")


def test_generated_verilog_is_kept_and_reused(tmp_path: Path, monkeypatch) -> None:
    """A simulation's Verilog comes from the cache when the same top, configuration and
    sources made it before (no elaboration, no Yosys), and is made again for another
    configuration; the files each build directory gets are the generator's."""
    from accel.rtl import sim

    monkeypatch.setattr(sim, "CACHE_DIR", tmp_path / "cache")
    made = []

    def counted(cfg, out_dir, top="cmac", factory=None):
        made.append(cfg.name)
        return generate_verilog(cfg, out_dir, top=top, factory=factory)

    monkeypatch.setattr(sim, "generate_verilog", counted)
    small, large = get_preset("nv_small"), get_preset("nv_large")
    first = sim._generated(small, tmp_path / "a", "cmac", None)
    again = sim._generated(small, tmp_path / "b", "cmac", None)
    assert made == ["nv_small"]
    generate_verilog(small, tmp_path / "plain")
    for name in ("cmac.v", "cmac.ports.json", "cmac.config.json"):
        want = (tmp_path / "plain" / name).read_text()
        assert (first.parent / name).read_text() == want
        assert (again.parent / name).read_text() == want
    other = sim._generated(large, tmp_path / "c", "cmac", None)
    assert made == ["nv_small", "nv_large"]
    assert config_from_json((other.parent / "cmac.config.json").read_text()) == large


def test_a_clocked_top_makes_its_own_clock(tmp_path: Path) -> None:
    """``clocked_top`` wraps a generated top: every port but ``clk`` passed through under
    its name, ``clk`` a register toggled every half period.  Icarus counts its rising
    edges in 105 ns of a 10 ns clock: at 5, 15, ..., 95 ns, ten."""
    if not shutil.which("iverilog"):
        pytest.skip("iverilog is not installed (make test installs it)")
    inner = generate_verilog(get_preset("nv_small"), tmp_path)
    wrapper = clocked_top(inner, "cmac", 10)
    ports = json.loads((tmp_path / "cmac_clocked.ports.json").read_text())
    plain = json.loads((tmp_path / "cmac.ports.json").read_text())
    assert [p for p in ports if p["name"] != "clk"] == [p for p in plain if p["name"] != "clk"]
    assert {"name": "clk", "direction": "output", "width": 1} in ports
    bench = tmp_path / "bench.v"
    bench.write_text("`timescale 1ns/1ps\nmodule bench;\n  cmac_clocked dut();\n"
                     "  integer rises = 0;\n  always @(posedge dut.clk) rises = rises + 1;\n"
                     "  initial begin #105 $display(\"rises %0d\", rises); $finish; end\n"
                     "endmodule\n")
    out = tmp_path / "bench.vvp"
    subprocess.run(["iverilog", "-g2012", "-s", "bench", "-o", str(out), str(bench),
                    str(wrapper), str(inner)], check=True, capture_output=True)
    run = subprocess.run(["vvp", "-n", str(out)], check=True, capture_output=True, text=True)
    assert "rises 10" in run.stdout


@pytest.mark.parametrize(("period", "match"), [(7, "period 7 must be an even"),
                                              (0, "period 0 must be an even")])
def test_a_clocked_top_needs_an_even_period(tmp_path: Path, period, match) -> None:
    inner = generate_verilog(get_preset("nv_small"), tmp_path)
    with pytest.raises(ValueError, match=match):
        clocked_top(inner, "cmac", period)


def test_a_clocked_top_needs_a_clock_input(tmp_path: Path) -> None:
    inner = generate_verilog(get_preset("nv_small"), tmp_path)
    ports = tmp_path / "cmac.ports.json"
    ports.write_text(json.dumps([p for p in json.loads(ports.read_text())
                                 if p["name"] != "clk"]))
    with pytest.raises(ValueError, match="cmac has no 1-bit clk input"):
        clocked_top(inner, "cmac", 10)
