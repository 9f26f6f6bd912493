"""Firmware: program CDP and CDP_RDMA for one LRN op (sw kmd/firmware cdp.c order).

CDP always reads its input from memory, so CDP_RDMA runs with every op and
shares the CDP's register group.  The op's LUT (``lut_index`` >= 0) is
loaded through the CDP's LUT port (:mod:`accel.runtime.fw_lut`) between the
RDMA and the CDP registers, as NVIDIA's firmware does.  The LUT is one RAM
shared by both register groups: :func:`lut_conflict` tells the scheduler when
an op must wait until the other group's op is done with a different table.

One deliberate difference: a converter whose ``enable`` is 0 is programmed
as the identity (offset 0, scale 1, shift 0); NVIDIA's firmware writes the
descriptor's numbers whatever ``enable`` says, and the hardware has no
enable bit.
"""

from __future__ import annotations

from collections.abc import Callable

from accel.loadable.descriptors import MEM_HW, PRECISION_FP16, CvtParam
from accel.loadable.descriptors_aux import CdpOpDesc, LutParam
from accel.runtime import fw_lut
from accel.runtime.fw_conv import FirmwareError
from accel.runtime.regwriter import RegWriter

_PRECISION = ("INT8", "INT16", "FP16")
_RAM = ("MC", "CV")  # by dla memory type MEM_MC=0, MEM_CV=1
LOCAL_SIZES = (3, 5, 7, 9)


def set_producer(w: RegWriter, group: int) -> None:
    w.write("NVDLA_CDP", "S_POINTER", PRODUCER=group)
    w.write("NVDLA_CDP_RDMA", "S_POINTER", PRODUCER=group)


def enable(w: RegWriter) -> None:
    """Start CDP_RDMA, then CDP."""
    w.write("NVDLA_CDP_RDMA", "D_OP_ENABLE", OP_EN="ENABLE")
    w.write("NVDLA_CDP", "D_OP_ENABLE", OP_EN="ENABLE")


def lut_conflict(lut_index: int, other_lut: int | None, other_enabled: bool) -> bool:
    """Whether an op using ``lut_index`` must wait for the op in the other group.

    ``other_lut`` is the other group's LUT (None when that group is free, -1
    when its op uses none).  Programming writes the shared LUT RAM, which
    must not change under an op that is programmed with a different table,
    and is locked while the CDP runs.
    """
    if lut_index < 0 or other_lut is None or other_lut == lut_index:
        return False
    if other_lut >= 0:
        return True
    return other_enabled


def _cvt(c: CvtParam) -> tuple[int, int, int]:
    """``(offset, scale, truncate)``; the identity for a disabled converter."""
    return (c.offset, c.scale, c.truncate) if c.enable else (0, 1, 0)


def validate(index: int, op: CdpOpDesc, surf: object) -> None:
    def need(cond: bool, what: str) -> None:
        if not cond:
            raise FirmwareError(f"cdp op {index}: {what}")

    src, dst = surf.src_data, surf.dst_data
    need(src.type != MEM_HW, f"src_data type {src.type} (MEM_HW): CDP reads memory only")
    need(dst.type != MEM_HW, f"dst_data type {dst.type} (MEM_HW): CDP writes memory only")
    need(op.in_precision == op.out_precision,
         f"in_precision {op.in_precision} != out_precision {op.out_precision}; CDP does "
         f"not convert precision")
    need(op.in_precision < len(_PRECISION), f"in_precision {op.in_precision} not in 0..2")
    need(op.in_precision != PRECISION_FP16, "FP16 LRN is not supported (INT8, INT16 only)")
    need(op.local_size in LOCAL_SIZES,
         f"local_size {op.local_size} not in {', '.join(map(str, LOCAL_SIZES))}")
    in_off, in_scale, in_shift = _cvt(op.in_cvt)
    out_off, out_scale, out_shift = _cvt(op.out_cvt)
    need(-(1 << 15) <= in_off < (1 << 15), f"in_cvt.offset {in_off} outside int16")
    need(-(1 << 15) <= in_scale < (1 << 15), f"in_cvt.scale {in_scale} outside int16")
    need(0 <= in_shift < 32, f"in_cvt.truncate {in_shift} outside 0..31")
    need(-(1 << 15) <= out_scale < (1 << 15), f"out_cvt.scale {out_scale} outside int16")
    need(0 <= out_shift < 64, f"out_cvt.truncate {out_shift} outside 0..63")
    for what, cube in (("src_data", src), ("dst_data", dst)):
        need(min(cube.width, cube.height, cube.channel) >= 1,
             f"{what} is {cube.width}x{cube.height}x{cube.channel} (WxHxC); every size "
             f"must be >= 1")


def program(w: RegWriter, index: int, op: CdpOpDesc, surf: object,
            address_of: Callable[[object, str], int], lut: LutParam | None,
            load_lut: bool = True) -> None:
    """Write the D_ registers of one CDP op (and load its LUT ``lut``, unless
    ``load_lut`` is False: the LUT holds that table already)."""
    validate(index, op, surf)
    if op.lut_index >= 0 and lut is None:
        raise FirmwareError(f"cdp op {index}: lut_index {op.lut_index} but no LUT parameters")
    src, dst = surf.src_data, surf.dst_data
    src_addr = address_of(src, "src_data")
    dst_addr = address_of(dst, "dst_data")
    precision = _PRECISION[op.in_precision]

    w.write("NVDLA_CDP_RDMA", "D_DATA_CUBE_WIDTH", WIDTH=src.width - 1)
    w.write("NVDLA_CDP_RDMA", "D_DATA_CUBE_HEIGHT", HEIGHT=src.height - 1)
    w.write("NVDLA_CDP_RDMA", "D_DATA_CUBE_CHANNEL", CHANNEL=src.channel - 1)
    w.cube("NVDLA_CDP_RDMA", "SRC", src_addr, src.line_stride, src.surf_stride)
    w.write("NVDLA_CDP_RDMA", "D_SRC_DMA_CFG", SRC_RAM_TYPE=_RAM[src.type])
    w.write("NVDLA_CDP_RDMA", "D_DATA_FORMAT", INPUT_DATA=precision)

    if op.lut_index >= 0 and load_lut:
        fw_lut.load(w, "NVDLA_CDP", lut, op.in_precision, f"cdp op {index}")

    w.cube("NVDLA_CDP", "DST", dst_addr, dst.line_stride, dst.surf_stride)
    w.write("NVDLA_CDP", "D_DST_DMA_CFG", DST_RAM_TYPE=_RAM[dst.type])
    w.write("NVDLA_CDP", "D_DATA_FORMAT", INPUT_DATA_TYPE=precision)
    w.write("NVDLA_CDP", "D_LRN_CFG", NORMALZ_LEN=(op.local_size - 1) // 2 - 1)
    in_off, in_scale, in_shift = _cvt(op.in_cvt)
    out_off, out_scale, out_shift = _cvt(op.out_cvt)
    w.write("NVDLA_CDP", "D_DATIN_OFFSET", DATIN_OFFSET=in_off & 0xFFFF)
    w.write("NVDLA_CDP", "D_DATIN_SCALE", DATIN_SCALE=in_scale & 0xFFFF)
    w.write("NVDLA_CDP", "D_DATIN_SHIFTER", DATIN_SHIFTER=in_shift)
    w.write("NVDLA_CDP", "D_DATOUT_OFFSET", DATOUT_OFFSET=out_off & 0xFFFFFFFF)
    w.write("NVDLA_CDP", "D_DATOUT_SCALE", DATOUT_SCALE=out_scale & 0xFFFF)
    w.write("NVDLA_CDP", "D_DATOUT_SHIFTER", DATOUT_SHIFTER=out_shift)
    w.write("NVDLA_CDP", "D_FUNC_BYPASS", SQSUM_BYPASS="ENABLE" if op.bypass_sqsum else "DISABLE",
            MUL_BYPASS="ENABLE" if op.bypass_out_mul else "DISABLE")
