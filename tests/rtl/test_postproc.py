"""RTL post-processing pipeline (CACC scaling, SDP X1/X2, CVT) under cocotb, scoreboarded by
the cmodel's arithmetic (see postproc_tb.py); an injected rounding bug must be caught."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from accel.config import get_preset

REPO = Path(__file__).resolve().parents[2]
TB_DIR = Path(__file__).resolve().parent

pytestmark = pytest.mark.rtl


def _run(cfg, name: str, top: str = "postproc", models: tuple[Path, ...] = ()):
    if shutil.which("iverilog") is None:
        pytest.skip("iverilog not installed (apt-get install -y iverilog)")
    from accel.rtl.sim import run_cocotb

    return run_cocotb(cfg, REPO / "build" / "rtl" / name, top=top, test_module="postproc_tb",
                      tb_dir=TB_DIR, simulator="icarus", models=models)


@pytest.mark.parametrize("preset", ["nv_small", "nv_medium_512"])   # 8 and 16 lanes
def test_postproc_matches_cmodel(preset: str) -> None:
    summary = _run(get_preset(preset), f"postproc-{preset}")
    print(f"\n{preset}: {summary['configs']} configurations, {summary['vectors']} beats, "
          f"{summary['stalled_cycles']} stalled cycles, {summary['cycles_per_s']} cycles/s")
    assert summary["tests"] == 1 and summary["configs"] == 60
    assert summary["vectors"] == 60 * 12 and summary["stalled_cycles"] > 50
    assert summary["distinct_outputs"] > 100


def test_postproc_with_the_ecp5_multipliers() -> None:
    """The pipeline as the ECP5 build elaborates it, each product in two MULT18X18D blocks
    with their input and output registers (simulated with the model written from Lattice's
    sysDSP guide), passes the same scoreboard: operand widths, signedness and the stage
    count match the fabric multipliers'."""
    summary = _run(get_preset("nv_small"), "postproc-nv_small-ecp5", top="postproc_ecp5",
                   models=(TB_DIR / "mult18x18d_model.v",))
    verilog = Path(summary["verilog"]).read_text()
    # nv_small: one lane a cycle, three products (X1, X2, CVT) of two blocks each
    assert verilog.count("MULT18X18D #(") == 3 * 2
    assert summary["tests"] == 1 and summary["configs"] == 60
    assert summary["vectors"] == 60 * 12 and summary["distinct_outputs"] > 100


def test_an_injected_rounding_bug_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Round half up instead of half away from zero (a classic slip: negative values get
    the same rounding carry as positive ones): the scoreboard must fail the simulation."""
    from amaranth.hdl import Mux

    from accel.rtl import postproc
    from accel.rtl.sim import SimulationFailed

    def half_up(negative, shift_is_zero):
        return Mux(shift_is_zero, 1, 1)

    monkeypatch.setattr(postproc, "round_carry", half_up)
    cfg = dataclasses.replace(get_preset("nv_small"), name="postproc-bug")
    with pytest.raises(SimulationFailed, match="1 of 1 cocotb tests failed"):
        _run(cfg, "postproc-bug")
