"""RTL direct-convolution core under cocotb: 50 random convolutions against plain numpy
sums and the cmodel's CACC/SDP arithmetic (see conv_tb.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from accel.config import get_preset

REPO = Path(__file__).resolve().parents[2]
TB_DIR = Path(__file__).resolve().parent


@pytest.mark.rtl
def test_random_convolutions_match() -> None:
    if shutil.which("iverilog") is None:
        pytest.skip("iverilog not installed (apt-get install -y iverilog)")
    from accel.rtl.sim import run_cocotb

    summary = run_cocotb(get_preset("nv_small"), REPO / "build" / "rtl" / "conv-nv_small",
                         top="conv", test_module="conv_tb", tb_dir=TB_DIR,
                         simulator="icarus")
    print(f"\nconv core: {summary['convolutions']} convolutions, {summary['vectors']} outputs "
          f"checked ({summary['saturated_outputs']} saturated), {summary['stalled_cycles']} "
          f"stalled cycles, {summary['cycles_per_s']} cycles/s")
    assert summary["tests"] == 1 and summary["convolutions"] == 50
    assert summary["vectors"] > 2000 and summary["stalled_cycles"] > 100
