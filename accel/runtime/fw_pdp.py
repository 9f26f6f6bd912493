"""Firmware: program PDP and PDP_RDMA for one pooling op (sw kmd/firmware pdp.c order).

The PDP reads its input either from memory through PDP_RDMA or, when the
source cube has type ``MEM_HW``, on the fly from an SDP whose output
destination is PDP; then PDP_RDMA is neither programmed nor enabled, and its
register group does not advance (the firmware tracks it separately).

Field choices follow NVIDIA's firmware: sizes minus one, the 16.16
reciprocals ``floor(65536 / k)`` of the kernel width and height, partial
widths minus one (0 stays 0), the seven ``padding_value`` entries written as
the 19-bit two's complement the PAD_VALUE fields hold.  Two deliberate
differences: strides up to 16 are accepted (the register field and the
hardware allow them; NVIDIA's firmware stops at 8), and FP16 pooling is
refused, as nothing downstream models it.
"""

from __future__ import annotations

from collections.abc import Callable

from accel.loadable.descriptors import MEM_HW, PRECISION_FP16
from accel.loadable.descriptors_aux import PDP_PAD_VAL_NUM, PdpOpDesc
from accel.runtime.fw_conv import FirmwareError
from accel.runtime.regwriter import RegWriter

_PRECISION = ("INT8", "INT16", "FP16")
_METHOD = ("POOLING_METHOD_AVERAGE", "POOLING_METHOD_MAX", "POOLING_METHOD_MIN")
_RAM = ("MC", "CV")  # by dla memory type MEM_MC=0, MEM_CV=1 (the register enums differ)
MAX_KERNEL = 8
MAX_STRIDE = 16
MAX_SPLIT = 256  # SPLIT_NUM is an 8-bit "count - 1" field
_PAD_BITS = 19   # width of the PAD_VALUE_<n>X fields


def recip(k: int) -> int:
    """The 16.16 reciprocal of a kernel size: ``floor(65536 / k)`` (0x5555 for 3)."""
    return (1 << 16) // k


def rdma_needed(surf: object) -> bool:
    """PDP_RDMA runs unless the input streams from SDP (source type ``MEM_HW``)."""
    return surf.src_data.type != MEM_HW


def set_producer(w: RegWriter, group: int, rdma_group: int) -> None:
    """Point PDP at ``group`` and PDP_RDMA at its own ``rdma_group``."""
    w.write("NVDLA_PDP", "S_POINTER", PRODUCER=group)
    w.write("NVDLA_PDP_RDMA", "S_POINTER", PRODUCER=rdma_group)


def enable(w: RegWriter, surf: object) -> None:
    """Start PDP (after PDP_RDMA when the input comes from memory)."""
    if rdma_needed(surf):
        w.write("NVDLA_PDP_RDMA", "D_OP_ENABLE", OP_EN="ENABLE")
    w.write("NVDLA_PDP", "D_OP_ENABLE", OP_EN="ENABLE")


def _partial(n: int) -> int:
    return n - 1 if n else 0


def validate(index: int, op: PdpOpDesc, surf: object) -> None:
    """Refuse descriptors the hardware cannot run, naming the op and the field."""
    def need(cond: bool, what: str) -> None:
        if not cond:
            raise FirmwareError(f"pdp op {index}: {what}")

    src, dst = surf.src_data, surf.dst_data
    need(dst.type != MEM_HW, f"dst_data type {dst.type} (MEM_HW): PDP writes to memory "
         f"(MC=0 or CV=1) only")
    need(src.type in (0, 1, MEM_HW), f"src_data type {src.type} not in MC=0, CV=1, HW=2")
    need(op.precision < len(_PRECISION), f"precision {op.precision} not in 0..2")
    need(op.precision != PRECISION_FP16, "FP16 pooling is not supported (INT8, INT16 only)")
    need(op.pool_mode < len(_METHOD), f"pool_mode {op.pool_mode} not in AVG=0, MAX=1, MIN=2")
    for name in ("pool_width", "pool_height"):
        v = getattr(op, name)
        need(v < MAX_KERNEL, f"{name} {v} (size - 1) outside 0..{MAX_KERNEL - 1}")
    for name in ("stride_x", "stride_y"):
        v = getattr(op, name)
        need(1 <= v <= MAX_STRIDE, f"{name} {v} outside 1..{MAX_STRIDE}")
    need(1 <= op.split_num <= MAX_SPLIT, f"split_num {op.split_num} outside 1..{MAX_SPLIT}")
    need(rdma_needed(surf) or op.split_num == 1,
         f"split_num {op.split_num} with an on-the-fly (SDP) source; split width needs "
         f"the input in memory")
    for name in ("pad_left", "pad_right", "pad_top", "pad_bottom"):
        v = getattr(op, name)
        need(v < 8, f"{name} {v} outside 0..7")
    lo, hi = -(1 << (_PAD_BITS - 1)), (1 << (_PAD_BITS - 1)) - 1
    for i, v in enumerate(op.padding_value[:PDP_PAD_VAL_NUM]):
        need(lo <= v <= hi, f"padding_value[{i}] {v} outside the {_PAD_BITS}-bit range "
             f"{lo}..{hi}")
    for what, cube in (("src_data", src), ("dst_data", dst)):
        need(min(cube.width, cube.height, cube.channel) >= 1,
             f"{what} is {cube.width}x{cube.height}x{cube.channel} (WxHxC); every size "
             f"must be >= 1")


def program(w: RegWriter, index: int, op: PdpOpDesc, surf: object,
            address_of: Callable[[object, str], int]) -> None:
    """Write every D_ register of one PDP op into the current producer groups."""
    validate(index, op, surf)
    src, dst = surf.src_data, surf.dst_data
    precision = _PRECISION[op.precision]
    in_w = dict(PARTIAL_WIDTH_IN_FIRST=_partial(op.partial_in_width_first),
                PARTIAL_WIDTH_IN_MID=_partial(op.partial_in_width_mid),
                PARTIAL_WIDTH_IN_LAST=_partial(op.partial_in_width_last))
    if rdma_needed(surf):
        src_addr = address_of(src, "src_data")
        w.write("NVDLA_PDP_RDMA", "D_DATA_CUBE_IN_WIDTH", CUBE_IN_WIDTH=src.width - 1)
        w.write("NVDLA_PDP_RDMA", "D_DATA_CUBE_IN_HEIGHT", CUBE_IN_HEIGHT=src.height - 1)
        w.write("NVDLA_PDP_RDMA", "D_DATA_CUBE_IN_CHANNEL", CUBE_IN_CHANNEL=src.channel - 1)
        w.cube("NVDLA_PDP_RDMA", "SRC", src_addr, src.line_stride, src.surf_stride)
        w.write("NVDLA_PDP_RDMA", "D_DATA_FORMAT", INPUT_DATA=precision)
        w.write("NVDLA_PDP_RDMA", "D_SRC_RAM_CFG", SRC_RAM_TYPE=_RAM[src.type])
        w.write("NVDLA_PDP_RDMA", "D_OPERATION_MODE_CFG", SPLIT_NUM=op.split_num - 1)
        w.write("NVDLA_PDP_RDMA", "D_POOLING_KERNEL_CFG", KERNEL_WIDTH=op.pool_width,
                KERNEL_STRIDE_WIDTH=op.stride_x - 1)
        w.write("NVDLA_PDP_RDMA", "D_POOLING_PADDING_CFG", PAD_WIDTH=op.pad_left)
        w.write("NVDLA_PDP_RDMA", "D_PARTIAL_WIDTH_IN", **in_w)

    w.write("NVDLA_PDP", "D_DATA_CUBE_IN_WIDTH", CUBE_IN_WIDTH=src.width - 1)
    w.write("NVDLA_PDP", "D_DATA_CUBE_IN_HEIGHT", CUBE_IN_HEIGHT=src.height - 1)
    w.write("NVDLA_PDP", "D_DATA_CUBE_IN_CHANNEL", CUBE_IN_CHANNEL=src.channel - 1)
    w.write("NVDLA_PDP", "D_DATA_CUBE_OUT_WIDTH", CUBE_OUT_WIDTH=dst.width - 1)
    w.write("NVDLA_PDP", "D_DATA_CUBE_OUT_HEIGHT", CUBE_OUT_HEIGHT=dst.height - 1)
    w.write("NVDLA_PDP", "D_DATA_CUBE_OUT_CHANNEL", CUBE_OUT_CHANNEL=dst.channel - 1)
    w.write("NVDLA_PDP", "D_OPERATION_MODE_CFG", POOLING_METHOD=_METHOD[op.pool_mode],
            FLYING_MODE="OFF_FLYING" if rdma_needed(surf) else "ON_FLYING",
            SPLIT_NUM=op.split_num - 1)
    w.write("NVDLA_PDP", "D_PARTIAL_WIDTH_IN", **in_w)
    w.write("NVDLA_PDP", "D_PARTIAL_WIDTH_OUT",
            PARTIAL_WIDTH_OUT_FIRST=_partial(op.partial_width_first),
            PARTIAL_WIDTH_OUT_MID=_partial(op.partial_width_mid),
            PARTIAL_WIDTH_OUT_LAST=_partial(op.partial_width_last))
    w.write("NVDLA_PDP", "D_POOLING_KERNEL_CFG", KERNEL_WIDTH=op.pool_width,
            KERNEL_HEIGHT=op.pool_height, KERNEL_STRIDE_WIDTH=op.stride_x - 1,
            KERNEL_STRIDE_HEIGHT=op.stride_y - 1)
    w.write("NVDLA_PDP", "D_RECIP_KERNEL_WIDTH", recip(op.pool_width + 1))
    w.write("NVDLA_PDP", "D_RECIP_KERNEL_HEIGHT", recip(op.pool_height + 1))
    w.write("NVDLA_PDP", "D_POOLING_PADDING_CFG", PAD_LEFT=op.pad_left, PAD_RIGHT=op.pad_right,
            PAD_TOP=op.pad_top, PAD_BOTTOM=op.pad_bottom)
    mask = (1 << _PAD_BITS) - 1
    for n, v in enumerate(op.padding_value[:PDP_PAD_VAL_NUM], 1):
        w.write("NVDLA_PDP", f"D_POOLING_PADDING_VALUE_{n}_CFG", **{f"PAD_VALUE_{n}X": v & mask})
    if rdma_needed(surf):
        w.cube("NVDLA_PDP", "SRC", None, src.line_stride, src.surf_stride)
    dst_addr = address_of(dst, "dst_data")
    w.cube("NVDLA_PDP", "DST", dst_addr, dst.line_stride, dst.surf_stride)
    w.write("NVDLA_PDP", "D_DST_RAM_CFG", DST_RAM_TYPE=_RAM[dst.type])
    w.write("NVDLA_PDP", "D_DATA_FORMAT", INPUT_DATA=precision)
