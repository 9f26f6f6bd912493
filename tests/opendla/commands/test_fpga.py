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


@pytest.mark.parametrize("flags, driven, placed", [([], True, True),
                                                   (["--no-timing-driven"], False, True),
                                                   (["--synth-only"], True, False)])
def test_timing_driven_placement_is_the_default(flags, driven, placed, monkeypatch, tmp_path,
                                                capsys: pytest.CaptureFixture) -> None:
    """The flag reaches the build (stubbed here: the real one is tests/fpga)."""
    import fpga.build

    seen = {}

    class Report:
        def to_text(self) -> str:
            return "report\n"

    def fake_build(board, cfg, out, **kwargs):
        seen.update(kwargs)
        return Report()

    monkeypatch.setattr(fpga.build, "build", fake_build)
    assert main(["fpga", "build", "-o", str(tmp_path / "b"), *flags]) == 0
    assert seen["timing_driven"] is driven and seen["place"] is placed
    assert capsys.readouterr().out == "report\n"
