"""Boards the FPGA flow builds for: name -> amaranth-boards platform, build-only.

amaranth-boards' ULX3S platforms list ``openFPGALoader`` among the required
tools because they can also program the board; a build-only flow must not
need it, so each platform here is a subclass that drops the programmer.
"""

from __future__ import annotations

from collections.abc import Callable

from amaranth.build import Platform
from amaranth_boards.ulx3s import ULX3S_85F_Platform

#: Tools only needed to program a board, never to build a bitstream.
PROGRAMMERS = ("openFPGALoader",)


def _build_only(platform: type[Platform]) -> type[Platform]:
    class BuildOnly(platform):  # type: ignore[misc, valid-type]
        @property
        def required_tools(self) -> list[str]:
            return [t for t in super().required_tools if t not in PROGRAMMERS]

    BuildOnly.__name__ = BuildOnly.__qualname__ = f"{platform.__name__}BuildOnly"
    return BuildOnly


#: Board name -> platform constructor.
BOARDS: dict[str, Callable[[], Platform]] = {
    "ulx3s-85f": _build_only(ULX3S_85F_Platform),
}


def get_board(name: str) -> Platform:
    """A fresh platform for board ``name``; the error lists the known boards."""
    try:
        return BOARDS[name]()
    except KeyError:
        raise ValueError(f"board {name!r} not in {', '.join(BOARDS)}") from None
