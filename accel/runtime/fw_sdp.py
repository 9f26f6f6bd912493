"""Firmware: program SDP and SDP_RDMA for one op (sw kmd/firmware sdp.c order).

X1 (BS), X2 (BN) and Y (EW) are programmed in full.  Y's ALU and MUL
operands come from the registers (per layer) or from memory through ERDMA,
each through its operand converter; ``act`` LUT routes Y's result through the
lookup table, which is loaded through the SDP's LUT port (:mod:`accel.runtime.fw_lut`)
between the RDMA and the SDP registers, as NVIDIA's firmware does.  The LUT
RAM is shared by both register groups: the scheduler keeps two ops with
different tables apart (:func:`accel.runtime.fw_cdp.lut_conflict`, the same
rule as the CDP's).  Whether the preset has the Y stage and the LUT is the
hardware's business: the cmodel refuses a Y stage its configuration lacks.

Beyond NVIDIA's firmware, the registers an op leaves unused (the operands of a
stage that takes them from memory or is bypassed, the source cube of an
on-the-fly input, the destination of an output to the PDP) are written too, as
zero: an op's register group then holds nothing of the op that used the group
before it, so the same op is programmed the same way whichever group it lands
in, and a model keyed on register values sees one op, not two.
"""

from __future__ import annotations

from collections.abc import Callable

from accel.loadable.descriptors import (
    ACTIVATION_LUT,
    ACTIVATION_PRELU,
    ACTIVATION_RELU,
    CONV_MODE_WINOGRAD,
    MEM_HW,
    SDP_OP_ADD,
    SDP_OP_BOTH,
    SDP_OP_MUL,
    SDP_OP_NONE,
    SDP_OP_PER_LAYER,
    SdpOp,
    SdpOpDesc,
)
from accel.loadable.descriptors_aux import LutParam
from accel.runtime import fw_lut
from accel.runtime.fw_conv import FirmwareError
from accel.runtime.regwriter import RegWriter

_PRECISION = ("INT8", "INT16", "FP16")
_ALU = ("MAX", "MIN", "SUM")
_ALU_Y = ("MAX", "MIN", "SUM", "EQL")
_DATA_USE = ("MUL", "MUL", "ALU", "BOTH")  # indexed by SDP_OP_{NONE,MUL,ADD,BOTH}
_DATA_MODE = ("PER_ELEMENT", "PER_KERNEL", "PER_ELEMENT")  # by SDP_OP_PER_{LAYER,KERNEL,POINT}
_RAM = ("MC", "CV")
_YESNO = ("YES", "NO")  # bypass[enabled]: an enabled stage is not bypassed


# processing precision by [dst_precision][src_precision], as the firmware's table:
# the source precision, except int16 -> int8 which is processed at int8
_PROC = ((0, 0, 2), (0, 1, 2), (0, 1, 2))


def _proc_precision(src: int, dst: int) -> str:
    return _PRECISION[_PROC[dst][src]]


def rdma_needed(op: SdpOpDesc, surf: object) -> bool:
    """SDP_RDMA runs when the source is in memory or an operand is per-kernel/point."""
    fly = surf.src_data.type == MEM_HW
    ops = (op.x1_op, op.x2_op, op.y_op)
    return (not fly) or any(o.enable and o.mode != SDP_OP_PER_LAYER for o in ops)


def set_producer(w: RegWriter, group: int, rdma_group: int | None = None) -> None:
    """Point SDP at ``group`` and SDP_RDMA at its own ``rdma_group`` (default: the same)."""
    w.write("NVDLA_SDP", "S_POINTER", PRODUCER=group)
    w.write("NVDLA_SDP_RDMA", "S_POINTER", PRODUCER=group if rdma_group is None else rdma_group)


def enable(w: RegWriter, op: SdpOpDesc, surf: object) -> None:
    if rdma_needed(op, surf):
        w.write("NVDLA_SDP_RDMA", "D_OP_ENABLE", OP_EN="ENABLE")
    w.write("NVDLA_SDP", "D_OP_ENABLE", OP_EN="ENABLE")


def _rdma_operand(w: RegWriter, prefix: str, x: SdpOp, cube: object, enabled: bool,
                  addr: int) -> None:
    base = {"BRDMA": "BS", "NRDMA": "BN", "ERDMA": "EW"}[prefix]
    w.write("NVDLA_SDP_RDMA", f"D_{prefix}_CFG", **{
        f"{prefix}_DISABLE": _YESNO[enabled],
        f"{prefix}_DATA_USE": _DATA_USE[x.type],
        f"{prefix}_DATA_SIZE": "ONE_BYTE" if x.precision == 0 else "TWO_BYTE",
        f"{prefix}_DATA_MODE": _DATA_MODE[x.mode],
        f"{prefix}_RAM_TYPE": _RAM[cube.type] if cube.type < 2 else "MC"})
    if enabled:
        w.cube("NVDLA_SDP_RDMA", base, addr, cube.line_stride, cube.surf_stride)
    else:
        w.cube("NVDLA_SDP_RDMA", base, 0, 0, 0)


def _x_unit(w: RegWriter, unit: str, x: SdpOp) -> None:
    """BS (X1) or BN (X2): bypass bits, ALU/MUL sources, operands and truncate."""
    p = unit  # "BS" or "BN"
    w.write("NVDLA_SDP", f"D_DP_{p}_CFG", **{
        f"{p}_BYPASS": _YESNO[bool(x.enable)],
        f"{p}_ALU_BYPASS": _YESNO[x.type not in (SDP_OP_MUL, SDP_OP_NONE)],
        f"{p}_ALU_ALGO": _ALU[x.alu_type] if x.alu_type < 3 else 0,
        f"{p}_MUL_BYPASS": _YESNO[x.type not in (SDP_OP_ADD, SDP_OP_NONE)],
        f"{p}_MUL_PRELU": "YES" if x.act == ACTIVATION_PRELU else "NO",
        f"{p}_RELU_BYPASS": _YESNO[x.act == ACTIVATION_RELU]})
    # a bypassed stage, an unused ALU and operands from memory leave zeros
    src = "MEM" if x.enable and x.mode != SDP_OP_PER_LAYER else "REG"
    alu = x.enable and x.type in (SDP_OP_ADD, SDP_OP_BOTH)
    w.write("NVDLA_SDP", f"D_DP_{p}_ALU_CFG", **{
        f"{p}_ALU_SRC": src if alu else "REG",
        f"{p}_ALU_SHIFT_VALUE": x.shift_value if alu else 0})
    per_layer = x.enable and x.mode == SDP_OP_PER_LAYER
    w.write("NVDLA_SDP", f"D_DP_{p}_ALU_SRC_VALUE", x.alu_operand & 0xFFFF if per_layer else 0)
    w.write("NVDLA_SDP", f"D_DP_{p}_MUL_SRC_VALUE", x.mul_operand & 0xFFFF if per_layer else 0)
    # the MUL truncate applies even when the multiplier is bypassed
    w.write("NVDLA_SDP", f"D_DP_{p}_MUL_CFG", **{
        f"{p}_MUL_SRC": src, f"{p}_MUL_SHIFT_VALUE": x.truncate if x.enable else 0})


def _y_unit(w: RegWriter, y: SdpOp) -> None:
    """EW (Y): bypass bits, then the ALU and MUL sources with their operand converters."""
    w.write("NVDLA_SDP", "D_DP_EW_CFG",
            EW_BYPASS=_YESNO[bool(y.enable)],
            EW_ALU_BYPASS=_YESNO[y.type not in (SDP_OP_MUL, SDP_OP_NONE)],
            EW_ALU_ALGO=_ALU_Y[y.alu_type] if y.alu_type < 4 else 0,
            EW_MUL_BYPASS=_YESNO[y.type not in (SDP_OP_ADD, SDP_OP_NONE)],
            EW_MUL_PRELU="YES" if y.act == ACTIVATION_PRELU else "NO",
            EW_LUT_BYPASS=_YESNO[y.act == ACTIVATION_LUT])
    if not y.enable:
        return
    per_layer = y.mode == SDP_OP_PER_LAYER
    src = "REG" if per_layer else "MEM"
    for what, used, operand, cvt in (("ALU", (SDP_OP_ADD, SDP_OP_BOTH), y.alu_operand,
                                      y.cvt.alu_cvt),
                                     ("MUL", (SDP_OP_MUL, SDP_OP_BOTH), y.mul_operand,
                                      y.cvt.mul_cvt)):
        if y.type not in used:
            continue
        w.write("NVDLA_SDP", f"D_DP_EW_{what}_CFG", **{
            f"EW_{what}_SRC": src, f"EW_{what}_CVT_BYPASS": _YESNO[bool(cvt.enable)]})
        if per_layer:   # the full 32-bit operand
            w.write("NVDLA_SDP", f"D_DP_EW_{what}_SRC_VALUE", operand & 0xFFFFFFFF)
        else:
            w.write("NVDLA_SDP", f"D_DP_EW_{what}_CVT_OFFSET_VALUE", cvt.offset & 0xFFFFFFFF)
            w.write("NVDLA_SDP", f"D_DP_EW_{what}_CVT_SCALE_VALUE", cvt.scale & 0xFFFF)
            w.write("NVDLA_SDP", f"D_DP_EW_{what}_CVT_TRUNCATE_VALUE", cvt.truncate)
    w.write("NVDLA_SDP", "D_DP_EW_TRUNCATE_VALUE", y.truncate)


def program(w: RegWriter, index: int, op: SdpOpDesc, surf: object,
            address_of: Callable[[object, str], int], lut: LutParam | None = None,
            load_lut: bool = True) -> None:
    """Write every D_ register of one SDP op into the current producer group (and load
    its LUT ``lut``, unless ``load_lut`` is False: the LUT holds that table already)."""
    what = f"sdp op {index}"
    if op.lut_index >= 0 and lut is None:
        raise FirmwareError(f"{what}: lut_index {op.lut_index} but no LUT parameters")
    if op.y_op.act == ACTIVATION_LUT and not op.y_op.enable:
        raise FirmwareError(f"{what}: the Y stage is disabled but its act is LUT")
    if op.y_op.enable and op.y_op.act == ACTIVATION_LUT and op.lut_index < 0:
        raise FirmwareError(f"{what}: the Y stage's act is LUT but lut_index is -1")
    src, dst = surf.src_data, surf.dst_data
    fly = src.type == MEM_HW
    out_dma = dst.type != MEM_HW
    x_rdma = [x.enable and x.type != SDP_OP_NONE and x.mode != SDP_OP_PER_LAYER
              for x in (op.x1_op, op.x2_op, op.y_op)]
    src_addr = 0 if fly else address_of(src, "src_data")
    dst_addr = address_of(dst, "dst_data") if out_dma else 0
    x1_addr = address_of(surf.x1_data, "x1_data") if x_rdma[0] else 0
    x2_addr = address_of(surf.x2_data, "x2_data") if x_rdma[1] else 0
    y_addr = address_of(surf.y_data, "y_data") if x_rdma[2] else 0
    winograd = "ON" if op.conv_mode == CONV_MODE_WINOGRAD else "OFF"
    proc = _proc_precision(op.src_precision, op.dst_precision)

    # SDP_RDMA's registers only for ops that use it: its register group advances
    # with those ops alone (the firmware keeps its pointer apart)
    if rdma_needed(op, surf):
        w.write("NVDLA_SDP_RDMA", "D_FEATURE_MODE_CFG", FLYING_MODE="OFF")
        w.write("NVDLA_SDP_RDMA", "D_BRDMA_CFG", BRDMA_DISABLE="YES")
        w.write("NVDLA_SDP_RDMA", "D_NRDMA_CFG", NRDMA_DISABLE="YES")
        w.write("NVDLA_SDP_RDMA", "D_ERDMA_CFG", ERDMA_DISABLE="YES")
        w.write("NVDLA_SDP_RDMA", "D_FEATURE_MODE_CFG", FLYING_MODE="ON" if fly else "OFF",
                WINOGRAD=winograd, IN_PRECISION=_PRECISION[op.src_precision],
                OUT_PRECISION=_PRECISION[op.dst_precision], PROC_PRECISION=proc,
                BATCH_NUMBER=op.batch_num - 1)
        w.write("NVDLA_SDP_RDMA", "D_DATA_CUBE_WIDTH", src.width - 1)
        w.write("NVDLA_SDP_RDMA", "D_DATA_CUBE_HEIGHT", src.height - 1)
        w.write("NVDLA_SDP_RDMA", "D_DATA_CUBE_CHANNEL", src.channel - 1)
        if fly:
            w.cube("NVDLA_SDP_RDMA", "SRC", 0, 0, 0)
            w.write("NVDLA_SDP_RDMA", "D_SRC_DMA_CFG", 0)
        else:
            w.cube("NVDLA_SDP_RDMA", "SRC", src_addr, src.line_stride, src.surf_stride)
            w.write("NVDLA_SDP_RDMA", "D_SRC_DMA_CFG", SRC_RAM_TYPE=_RAM[src.type])
        _rdma_operand(w, "BRDMA", op.x1_op, surf.x1_data, x_rdma[0], x1_addr)
        _rdma_operand(w, "NRDMA", op.x2_op, surf.x2_data, x_rdma[1], x2_addr)
        _rdma_operand(w, "ERDMA", op.y_op, surf.y_data, x_rdma[2], y_addr)
    if op.lut_index >= 0 and load_lut:
        fw_lut.load(w, "NVDLA_SDP", lut, op.src_precision, what)

    w.write("NVDLA_SDP", "D_DATA_CUBE_WIDTH", src.width - 1)
    w.write("NVDLA_SDP", "D_DATA_CUBE_HEIGHT", src.height - 1)
    w.write("NVDLA_SDP", "D_DATA_CUBE_CHANNEL", src.channel - 1)
    if out_dma:
        w.cube("NVDLA_SDP", "DST", dst_addr, dst.line_stride, dst.surf_stride)
    else:
        w.cube("NVDLA_SDP", "DST", 0, 0, 0)
    _x_unit(w, "BS", op.x1_op)
    _x_unit(w, "BN", op.x2_op)
    _y_unit(w, op.y_op)
    w.write("NVDLA_SDP", "D_FEATURE_MODE_CFG", FLYING_MODE="ON" if fly else "OFF",
            OUTPUT_DST="MEM" if out_dma else "PDP", WINOGRAD=winograd,
            BATCH_NUMBER=op.batch_num - 1)
    w.write("NVDLA_SDP", "D_DST_DMA_CFG", DST_RAM_TYPE=_RAM[dst.type] if out_dma else "MC")
    w.write("NVDLA_SDP", "D_DST_BATCH_STRIDE", op.batch_stride if op.batch_num > 1 else 0)
    w.write("NVDLA_SDP", "D_DATA_FORMAT", PROC_PRECISION=proc,
            OUT_PRECISION=_PRECISION[op.dst_precision])
    w.write("NVDLA_SDP", "D_CVT_OFFSET", op.out_cvt.offset & 0xFFFFFFFF)
    w.write("NVDLA_SDP", "D_CVT_SCALE", op.out_cvt.scale & 0xFFFF)
    w.write("NVDLA_SDP", "D_CVT_SHIFT", op.out_cvt.truncate)
