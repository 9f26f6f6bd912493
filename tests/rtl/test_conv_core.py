"""RTL direct-convolution core under cocotb: 50 random convolutions against plain numpy
sums and the cmodel's CACC/SDP arithmetic, 12 more with their memories written while they
run, and its cycles against the cmodel's estimate (see conv_tb.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from accel.config import get_preset

REPO = Path(__file__).resolve().parents[2]
TB_DIR = Path(__file__).resolve().parent


@pytest.mark.rtl
def test_random_convolutions_and_cycles() -> None:
    if shutil.which("iverilog") is None:
        pytest.skip("iverilog not installed (apt-get install -y iverilog)")
    from accel.rtl.sim import run_cocotb

    summary = run_cocotb(get_preset("nv_small"), REPO / "build" / "rtl" / "conv-nv_small",
                         top="conv", test_module="conv_tb", tb_dir=TB_DIR,
                         simulator="icarus")
    print(f"\nconv core: {summary['convolutions']} convolutions, {summary['vectors']} outputs "
          f"checked ({summary['saturated_outputs']} saturated), {summary['stalled_cycles']} "
          f"stalled cycles")
    assert summary["tests"] == 3 and summary["convolutions"] == 50
    assert summary["streamed"] == 12
    assert summary["vectors"] > 2000 and summary["stalled_cycles"] > 100
    print(f"{'convolution':<28} {'RTL':>6} {'cmodel':>7} {'ratio':>6} {'MAC use':>8}")
    for row in summary["timed"]:
        ratio = row["rtl"] / row["cmodel"]
        print(f"{row['shape']:<28} {row['rtl']:>6} {row['cmodel']:>7} {ratio:>6.3f} "
              f"{row['utilization']:>8.1%}")
        # the RTL and the cmodel's estimate agree within 15% (the estimate counts one MAC
        # atom per cycle, or one SDP element per cycle on nv_small; the RTL adds pipeline
        # fill and drain)
        assert 1.0 <= ratio <= 1.15, row
    # 3x3 convolutions whose C and K are multiples of the atom keep the MACs busy
    three_by_three = [r for r in summary["timed"] if "x3x3 /1" in r["shape"]]
    assert len(three_by_three) == 3 and all(r["utilization"] >= 0.85 for r in three_by_three)


#: random convolutions for the ECP5 build of the core (the fabric core above runs 50 with
#: the same scoreboard; these check the multiplier blocks, which every one of them uses)
ECP5_CONFIGS = 20


@pytest.mark.rtl
def test_conv_core_with_the_ecp5_multipliers() -> None:
    """The core as the ECP5 build elaborates it: the CMAC's products in MULT18X18D blocks
    whose weight registers hold the active kernels (loaded from the shadow bank on a swap,
    through the block's CE1), SDP's in blocks with their registers; simulated with the
    model written from Lattice's sysDSP guide, the same scoreboard as the fabric core's."""
    if shutil.which("iverilog") is None:
        pytest.skip("iverilog not installed (apt-get install -y iverilog)")
    from accel.rtl.sim import run_cocotb

    cfg = get_preset("nv_small")
    summary = run_cocotb(cfg, REPO / "build" / "rtl" / "conv-nv_small-ecp5", top="conv_ecp5",
                         test_module="conv_tb", tb_dir=TB_DIR, simulator="icarus",
                         models=(TB_DIR / "mult18x18d_model.v",),
                         extra_env={"OPENDLA_CONV_CONFIGS": str(ECP5_CONFIGS)})
    verilog = Path(summary["verilog"]).read_text()
    # a block per MAC (the weight register enabled by the swap), two per SDP product, one
    # per product of the operation's registers (points, a channel group's and a row's
    # entries, three row steps)
    assert verilog.count("MULT18X18D #(") == cfg.atomic_c * cfg.atomic_k + 3 * 2 + 6
    assert verilog.count('.REG_INPUTB_CE("CE1")') == cfg.atomic_c * cfg.atomic_k
    assert summary["tests"] == 3 and summary["convolutions"] == ECP5_CONFIGS
    assert summary["streamed"] == 12 and summary["vectors"] > 1000
