"""RTL CACC accumulator under cocotb against the cmodel's saturating accumulation."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from accel.config import get_preset

REPO = Path(__file__).resolve().parents[2]
TB_DIR = Path(__file__).resolve().parent


@pytest.mark.rtl
@pytest.mark.parametrize("preset", ["nv_small", "nv_medium_512"])   # 8 and 16 lanes
def test_cacc_accumulates_stripes_like_the_cmodel(preset: str) -> None:
    if shutil.which("iverilog") is None:
        pytest.skip("iverilog not installed (apt-get install -y iverilog)")
    from accel.rtl.sim import run_cocotb

    summary = run_cocotb(get_preset(preset), REPO / "build" / "rtl" / f"cacc-{preset}",
                         top="cacc", test_module="cacc_tb", tb_dir=TB_DIR, simulator="icarus")
    print(f"\n{preset}: {summary['vectors']} sums of {summary['psums']} partial sums, "
          f"{summary['stalled_cycles']} stalled cycles")
    assert summary["tests"] == 1 and summary["stripes"] == 40
    assert summary["psums"] > summary["vectors"] > 40 and summary["stalled_cycles"] > 20
