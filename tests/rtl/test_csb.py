"""RTL CSB register file under cocotb against the cmodel's register file (csb_tb.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from accel.config import get_preset

REPO = Path(__file__).resolve().parents[2]
TB_DIR = Path(__file__).resolve().parent


@pytest.mark.rtl
@pytest.mark.parametrize("top", ["csb", "csb_decoded"])
def test_csb_register_file_matches_the_cmodel(top: str) -> None:
    """The board's register file and the simulation tops' decoded one: the same values,
    interrupts and views in the same cycles (the testbench checks every read's and
    write's latency)."""
    if shutil.which("iverilog") is None:
        pytest.skip("iverilog not installed (apt-get install -y iverilog)")
    from accel.rtl.sim import run_cocotb

    summary = run_cocotb(get_preset("nv_small"), REPO / "build" / "rtl" / top, top=top,
                         test_module="csb_tb", tb_dir=TB_DIR, simulator="icarus")
    print(f"\n{top}: {summary['writes']} writes, {summary['reads']} reads, {summary['dones']} "
          f"completions, {summary['errors']} unmapped requests, irq high "
          f"{summary['irq_cycles']} steps")
    assert summary["tests"] == 1 and summary["steps"] == 3000
    assert min(summary[k] for k in ("writes", "reads", "dones", "errors", "irq_cycles")) > 10
    assert summary["write_and_done"] >= 5      # completions in the cycle a write lands
