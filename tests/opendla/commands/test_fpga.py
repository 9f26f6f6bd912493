"""``opendla fpga build`` argument handling (the real build is tests/fpga, marker fpga)."""

from __future__ import annotations

import pytest

from opendla.cli import main


def test_unknown_board_lists_boards(capsys: pytest.CaptureFixture) -> None:
    assert main(["fpga", "build", "--board", "arty"]) == 2
    assert "board 'arty' not in ulx3s-85f" in capsys.readouterr().err


def test_bad_atomic_size_is_reported(capsys: pytest.CaptureFixture) -> None:
    assert main(["fpga", "build", "--atomic-c", "6"]) == 2
    assert "mac_atomic_c_size=6" in capsys.readouterr().err
