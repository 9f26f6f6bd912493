from __future__ import annotations

import pytest

from fpga.boards import get_board


def test_build_only_platform_needs_no_programmer() -> None:
    platform = get_board("ulx3s-85f")
    assert "openFPGALoader" not in platform.required_tools
    assert "yosys" in platform.required_tools and platform.device == "LFE5U-85F"


def test_unknown_board_lists_the_boards() -> None:
    with pytest.raises(ValueError, match=r"board 'de10' not in ulx3s-85f"):
        get_board("de10")
