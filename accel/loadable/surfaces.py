"""Surface descriptors (``dla_*_surface_desc``), per firmware interface version.

Surface descriptors are made of :class:`~accel.loadable.descriptors.DataCube`
members, whose layout changed between firmware interface 0.10 (28 bytes, no
``offset``; the official regression loadables) and 0.12 (32 bytes; nvdla/sw
master).  :func:`surface_types` returns the set for a version; the module-level
names are the 0.12 ones.
"""

from __future__ import annotations

from accel.loadable.cstruct import CStruct, cstruct, member
from accel.loadable.descriptors import (
    OP_BDMA,
    OP_CDP,
    OP_CONV,
    OP_PDP,
    OP_RUBIK,
    OP_SDP,
    DataCube,
    DataCubeV10,
)
from accel.loadable.descriptors_aux import BdmaSurfaceDesc

#: firmware interface versions whose layouts we know
INTERFACE_V10 = (0, 10, 0)
INTERFACE_V12 = (0, 12, 0)


def _make(cube: type[CStruct], suffix: str) -> dict[int, type[CStruct]]:
    """Build the surface structs of one DataCube layout, keyed by op type."""

    @cstruct
    class ConvSurfaceDesc(CStruct):
        """``dla_conv_surface_desc``."""

        weight_data: DataCube = member(cube)
        wmb_data: DataCube = member(cube)
        wgs_data: DataCube = member(cube)
        src_data: DataCube = member(cube)
        dst_data: DataCube = member(cube)
        offset_u: int = member("q")
        in_line_uv_stride: int = member("I")

    @cstruct
    class SdpSurfaceDesc(CStruct):
        """``dla_sdp_surface_desc``: X1/X2/Y operand cubes for per-kernel/point modes."""

        src_data: DataCube = member(cube)
        x1_data: DataCube = member(cube)
        x2_data: DataCube = member(cube)
        y_data: DataCube = member(cube)
        dst_data: DataCube = member(cube)

    @cstruct
    class PdpSurfaceDesc(CStruct):
        """``dla_pdp_surface_desc``."""

        src_data: DataCube = member(cube)
        dst_data: DataCube = member(cube)

    @cstruct
    class CdpSurfaceDesc(CStruct):
        """``dla_cdp_surface_desc``."""

        src_data: DataCube = member(cube)
        dst_data: DataCube = member(cube)

    @cstruct
    class RubikSurfaceDesc(CStruct):
        """``dla_rubik_surface_desc``."""

        src_data: DataCube = member(cube)
        dst_data: DataCube = member(cube)

    table: dict[int, type[CStruct]] = {
        OP_BDMA: BdmaSurfaceDesc, OP_CONV: ConvSurfaceDesc, OP_SDP: SdpSurfaceDesc,
        OP_PDP: PdpSurfaceDesc, OP_CDP: CdpSurfaceDesc, OP_RUBIK: RubikSurfaceDesc,
    }
    for cls in table.values():
        if cls is not BdmaSurfaceDesc:
            cls.__name__ = cls.__qualname__ = cls.__name__ + suffix
    return table


_V12 = _make(DataCube, "")
_V10 = _make(DataCubeV10, "V10")

ConvSurfaceDesc = _V12[OP_CONV]
SdpSurfaceDesc = _V12[OP_SDP]
PdpSurfaceDesc = _V12[OP_PDP]
CdpSurfaceDesc = _V12[OP_CDP]
RubikSurfaceDesc = _V12[OP_RUBIK]


def surface_types(version: tuple[int, int, int] = INTERFACE_V12) -> dict[int, type[CStruct]]:
    """Surface descriptor classes by op type for firmware interface ``version``.

    Versions below 0.12 use the 28-byte data cube; 0.12 and later the 32-byte one.
    """
    major, minor = version[0], version[1]
    if (major, minor) < (0, 10):
        raise ValueError(f"firmware interface {'.'.join(map(str, version))} is older than "
                         f"0.10, the oldest layout known")
    return _V10 if (major, minor) < (0, 12) else _V12


def cube_type(version: tuple[int, int, int] = INTERFACE_V12) -> type[CStruct]:
    """The DataCube class of firmware interface ``version``."""
    return DataCubeV10 if surface_types(version) is _V10 else DataCube
