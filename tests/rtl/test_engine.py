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
