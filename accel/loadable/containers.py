"""The op/surface unions and decoding of a task's descriptor arrays.

``dla_operation_container`` and ``dla_surface_container`` are C unions, so
every op occupies the size of the largest member in the op list and surface
list: 116 bytes (``dla_sdp_op_desc``) and 644 bytes (``dla_bdma_surface_desc``,
which holds no data cube, so the size is the same in every interface version).
"""

from __future__ import annotations

from accel.loadable.cstruct import CStruct
from accel.loadable.descriptors import (
    OP_BDMA,
    OP_CDP,
    OP_CONV,
    OP_NAMES,
    OP_PDP,
    OP_RUBIK,
    OP_SDP,
    CommonOpDesc,
    ConvOpDesc,
    SdpOpDesc,
)
from accel.loadable.descriptors_aux import BdmaOpDesc, CdpOpDesc, PdpOpDesc, RubikOpDesc
from accel.loadable.surfaces import INTERFACE_V12, surface_types

OP_DESC_TYPES: dict[int, type[CStruct]] = {
    OP_BDMA: BdmaOpDesc, OP_CONV: ConvOpDesc, OP_SDP: SdpOpDesc,
    OP_PDP: PdpOpDesc, OP_CDP: CdpOpDesc, OP_RUBIK: RubikOpDesc,
}
OPERATION_CONTAINER_SIZE = max(t.SIZE for t in OP_DESC_TYPES.values())
SURFACE_CONTAINER_SIZE = max(t.SIZE for t in surface_types(INTERFACE_V12).values())


def op_name(op_type: int) -> str:
    """``"CONV"`` for 1, etc.; ``"UNKNOWN(7)"`` for values outside the table."""
    return OP_NAMES[op_type] if 0 <= op_type < len(OP_NAMES) else f"UNKNOWN({op_type})"


def _check_type(op_type: int) -> None:
    if op_type not in OP_DESC_TYPES:
        raise ValueError(f"op_type {op_type} not in "
                         f"{', '.join(f'{k}={op_name(k)}' for k in OP_DESC_TYPES)}")


def decode_op(op_type: int, op_list: bytes, index: int) -> CStruct:
    """The op descriptor of op ``index`` in an operation-list blob."""
    _check_type(op_type)
    return OP_DESC_TYPES[op_type].unpack(op_list, index * OPERATION_CONTAINER_SIZE)


def decode_surface(op_type: int, surf_list: bytes, index: int,
                   version: tuple[int, int, int] = INTERFACE_V12) -> CStruct:
    """The surface descriptor of op ``index`` in a surface-list blob.

    ``version`` is the firmware interface version (the blob's version).
    """
    _check_type(op_type)
    return surface_types(version)[op_type].unpack(surf_list, index * SURFACE_CONTAINER_SIZE)


def pack_op_container(desc: CStruct) -> bytes:
    """``desc`` zero-padded to the operation union size."""
    raw = desc.pack()
    return raw + bytes(OPERATION_CONTAINER_SIZE - len(raw))


def pack_surface_container(desc: CStruct) -> bytes:
    """``desc`` zero-padded to the surface union size."""
    raw = desc.pack()
    return raw + bytes(SURFACE_CONTAINER_SIZE - len(raw))


def decode_dep_graph(dep_graph: bytes, num_ops: int) -> list[CommonOpDesc]:
    """The ``num_ops`` dependency-graph nodes of a task."""
    return [CommonOpDesc.unpack(dep_graph, i * CommonOpDesc.SIZE) for i in range(num_ops)]
