"""Firmware: program the convolution pipeline (CDMA, CSC, CMAC_A/B, CACC) for one op.

Follows the order and field choices of NVDLA's firmware (sw kmd/firmware
conv.c): the sub-units are configured in reverse pipeline order (CACC, CMAC,
CSC, CDMA) and enabled together.  One deliberate difference: the "packed"
line/surface checks use the configuration's atom size instead of a
hard-coded 32 bytes, so nv_small surfaces are classified correctly.
"""

from __future__ import annotations

from collections.abc import Callable

from accel.config import HwConfig
from accel.loadable.descriptors import (
    CONV_MODE_DIRECT,
    FORMAT_FEATURE,
    MEM_HW,
    ConvOpDesc,
)
from accel.runtime.errors import FirmwareError
from accel.runtime.regwriter import RegWriter

CONV_UNITS = ("NVDLA_CACC", "NVDLA_CMAC_A", "NVDLA_CMAC_B", "NVDLA_CSC", "NVDLA_CDMA")
_PRECISION = ("INT8", "INT16", "FP16")
_CONV_MODE = ("DIRECT", "WINOGRAD")
_WEIGHT_FORMAT = ("UNCOMPRESSED", "COMPRESSED")
_RAM = ("MCIF", "CVIF")


def set_producer(w: RegWriter, group: int) -> None:
    """Point the D_ register writes of every conv sub-unit at ``group``."""
    for unit in CONV_UNITS:
        w.write(unit, "S_POINTER", PRODUCER=group)


def enable(w: RegWriter) -> None:
    """Start the conv pipeline: CACC first, CDMA (the data source) last."""
    for unit in CONV_UNITS:
        w.write(unit, "D_OP_ENABLE", OP_EN="ENABLE")


def program(w: RegWriter, cfg: HwConfig, index: int, op: ConvOpDesc, surf: object,
            address_of: Callable[[object, str], int]) -> None:
    """Write every D_ register of one conv op into the current producer group.

    ``address_of(cube, what)`` resolves a data cube to an absolute DRAM address.
    """
    def need(cond: bool, what: str) -> None:
        if not cond:
            raise FirmwareError(f"conv op {index}: {what}")

    need(op.out_cvt.scale == 1 and op.out_cvt.offset == 0,
         f"out_cvt must be scale 1 offset 0 (got scale {op.out_cvt.scale}, "
         f"offset {op.out_cvt.offset}); CACC only truncates")
    need(op.weight_format == 0, "compressed weights are not supported")
    need(op.data_format == FORMAT_FEATURE, f"data_format {op.data_format} (pixel input) is not "
         f"supported yet; only FEATURE ({FORMAT_FEATURE})")
    need(op.batch >= 1, f"batch must be >= 1, got {op.batch}")
    src, dst, wt = surf.src_data, surf.dst_data, surf.weight_data
    in_addr = address_of(src, "src_data")
    wt_addr = address_of(wt, "weight_data")
    out_addr = address_of(dst, "dst_data") if dst.type != MEM_HW and dst.address != -1 else 0
    prec, proc = _PRECISION[op.in_precision], _PRECISION[op.out_precision]
    mode = _CONV_MODE[op.conv_mode]
    atom = cfg.atom_size

    # CACC
    w.write("NVDLA_CACC", "D_MISC_CFG", CONV_MODE=mode, PROC_PRECISION=proc)
    w.write("NVDLA_CACC", "D_DATAOUT_SIZE_0", DATAOUT_WIDTH=dst.width - 1,
            DATAOUT_HEIGHT=dst.height - 1)
    w.write("NVDLA_CACC", "D_DATAOUT_SIZE_1", DATAOUT_CHANNEL=dst.channel - 1)
    w.write("NVDLA_CACC", "D_DATAOUT_ADDR", out_addr)
    w.write("NVDLA_CACC", "D_BATCH_NUMBER", op.batch - 1)
    w.write("NVDLA_CACC", "D_LINE_STRIDE", dst.line_stride)
    w.write("NVDLA_CACC", "D_SURF_STRIDE", dst.surf_stride)
    packed = "TRUE" if dst.width == 1 and dst.height == 1 else "FALSE"
    w.write("NVDLA_CACC", "D_DATAOUT_MAP", LINE_PACKED=packed, SURF_PACKED=packed)
    w.write("NVDLA_CACC", "D_CLIP_CFG", CLIP_TRUNCATE=op.out_cvt.truncate)

    # CMAC
    for unit in ("NVDLA_CMAC_A", "NVDLA_CMAC_B"):
        w.write(unit, "D_MISC_CFG", CONV_MODE=mode, PROC_PRECISION=proc)

    # CSC
    w.write("NVDLA_CSC", "D_MISC_CFG", CONV_MODE=mode, IN_PRECISION=proc, PROC_PRECISION=proc,
            DATA_REUSE=op.data_reuse, WEIGHT_REUSE=op.weight_reuse,
            SKIP_DATA_RLS=op.skip_data_rls, SKIP_WEIGHT_RLS=op.skip_weight_rls)
    w.write("NVDLA_CSC", "D_DATAIN_FORMAT", DATAIN_FORMAT="FEATURE")
    w.write("NVDLA_CSC", "D_DATAIN_SIZE_EXT_0", DATAIN_WIDTH_EXT=op.input_width_csc - 1,
            DATAIN_HEIGHT_EXT=op.input_height_csc - 1)
    w.write("NVDLA_CSC", "D_DATAIN_SIZE_EXT_1", DATAIN_CHANNEL_EXT=op.input_channel_csc - 1)
    w.write("NVDLA_CSC", "D_BATCH_NUMBER", BATCHES=op.batch - 1)
    w.write("NVDLA_CSC", "D_POST_Y_EXTENSION", Y_EXTENSION=op.post_extension)
    w.write("NVDLA_CSC", "D_ENTRY_PER_SLICE", ENTRIES=op.entry_per_slice - 1)
    w.write("NVDLA_CSC", "D_WEIGHT_FORMAT", WEIGHT_FORMAT=_WEIGHT_FORMAT[op.weight_format])
    w.write("NVDLA_CSC", "D_WEIGHT_SIZE_EXT_0", WEIGHT_WIDTH_EXT=op.kernel_width_csc - 1,
            WEIGHT_HEIGHT_EXT=op.kernel_height_csc - 1)
    w.write("NVDLA_CSC", "D_WEIGHT_SIZE_EXT_1", WEIGHT_CHANNEL_EXT=op.kernel_channel_csc - 1,
            WEIGHT_KERNEL=dst.channel - 1)
    w.write("NVDLA_CSC", "D_WEIGHT_BYTES", wt.size)
    w.write("NVDLA_CSC", "D_WMB_BYTES", surf.wmb_data.size)
    w.write("NVDLA_CSC", "D_DATAOUT_SIZE_0", DATAOUT_WIDTH=op.input_width_cmac - 1,
            DATAOUT_HEIGHT=op.input_height_cmac - 1)
    w.write("NVDLA_CSC", "D_DATAOUT_SIZE_1", DATAOUT_CHANNEL=dst.channel - 1)
    w.write("NVDLA_CSC", "D_ATOMICS", ATOMICS=dst.width * dst.height - 1)
    w.write("NVDLA_CSC", "D_RELEASE", RLS_SLICES=op.release - 1)
    direct = op.conv_mode == CONV_MODE_DIRECT
    w.write("NVDLA_CSC", "D_CONV_STRIDE_EXT",
            CONV_X_STRIDE_EXT=op.conv_stride_x - 1 if direct else 0,
            CONV_Y_STRIDE_EXT=op.conv_stride_y - 1 if direct else 0)
    w.write("NVDLA_CSC", "D_DILATION_EXT", X_DILATION_EXT=op.dilation_x - 1,
            Y_DILATION_EXT=op.dilation_y - 1)
    w.write("NVDLA_CSC", "D_ZERO_PADDING", PAD_LEFT=op.pad_x_left if direct else 0,
            PAD_TOP=op.pad_y_top if direct else 0)
    w.write("NVDLA_CSC", "D_ZERO_PADDING_VALUE", PAD_VALUE=op.pad_val & 0xFFFF)
    w.write("NVDLA_CSC", "D_BANK", DATA_BANK=op.data_bank - 1, WEIGHT_BANK=op.weight_bank - 1)
    w.write("NVDLA_CSC", "D_PRA_CFG", PRA_TRUNCATE=op.pra_truncate)

    # CDMA
    w.write("NVDLA_CDMA", "D_MISC_CFG", CONV_MODE=mode, IN_PRECISION=prec, PROC_PRECISION=proc,
            DATA_REUSE=op.data_reuse, WEIGHT_REUSE=op.weight_reuse,
            SKIP_DATA_RLS=op.skip_data_rls, SKIP_WEIGHT_RLS=op.skip_weight_rls)
    w.write("NVDLA_CDMA", "D_DATAIN_FORMAT", DATAIN_FORMAT="FEATURE",
            PIXEL_MAPPING=op.pixel_mapping, PIXEL_SIGN_OVERRIDE=op.pixel_override)
    w.write("NVDLA_CDMA", "D_DATAIN_SIZE_0", DATAIN_WIDTH=src.width - 1,
            DATAIN_HEIGHT=src.height - 1)
    w.write("NVDLA_CDMA", "D_DATAIN_SIZE_1", DATAIN_CHANNEL=src.channel - 1)
    w.write("NVDLA_CDMA", "D_DATAIN_SIZE_EXT_0", DATAIN_WIDTH_EXT=op.input_width_csc - 1,
            DATAIN_HEIGHT_EXT=op.input_height_csc - 1)
    w.write("NVDLA_CDMA", "D_DAIN_RAM_TYPE", DATAIN_RAM_TYPE=_RAM[src.type])
    w.write("NVDLA_CDMA", "D_DAIN_ADDR_HIGH_0", in_addr >> 32)
    w.write("NVDLA_CDMA", "D_DAIN_ADDR_LOW_0", in_addr & 0xFFFFFFFF)
    uv = in_addr + surf.offset_u
    w.write("NVDLA_CDMA", "D_DAIN_ADDR_HIGH_1", uv >> 32)
    w.write("NVDLA_CDMA", "D_DAIN_ADDR_LOW_1", uv & 0xFFFFFFFF)
    w.write("NVDLA_CDMA", "D_LINE_STRIDE", src.line_stride)
    w.write("NVDLA_CDMA", "D_SURF_STRIDE", src.surf_stride)
    w.write("NVDLA_CDMA", "D_LINE_UV_STRIDE", surf.in_line_uv_stride)
    w.write("NVDLA_CDMA", "D_DAIN_MAP",
            LINE_PACKED=int(src.line_stride == src.width * atom),
            SURF_PACKED=int(src.surf_stride == src.width * src.height * atom))
    w.write("NVDLA_CDMA", "D_BATCH_NUMBER", BATCHES=op.batch - 1)
    w.write("NVDLA_CDMA", "D_BATCH_STRIDE", BATCH_STRIDE=op.batch_stride)
    w.write("NVDLA_CDMA", "D_ENTRY_PER_SLICE", ENTRIES=op.entry_per_slice - 1)
    w.write("NVDLA_CDMA", "D_FETCH_GRAIN", GRAINS=op.fetch_grain - 1)
    w.write("NVDLA_CDMA", "D_WEIGHT_FORMAT", WEIGHT_FORMAT=_WEIGHT_FORMAT[op.weight_format])
    w.write("NVDLA_CDMA", "D_WEIGHT_SIZE_0", BYTE_PER_KERNEL=op.bytes_per_kernel - 1)
    w.write("NVDLA_CDMA", "D_WEIGHT_SIZE_1", WEIGHT_KERNEL=dst.channel - 1)
    w.write("NVDLA_CDMA", "D_WEIGHT_RAM_TYPE", WEIGHT_RAM_TYPE=_RAM[wt.type])
    w.write("NVDLA_CDMA", "D_WEIGHT_ADDR_HIGH", wt_addr >> 32)
    w.write("NVDLA_CDMA", "D_WEIGHT_ADDR_LOW", wt_addr & 0xFFFFFFFF)
    w.write("NVDLA_CDMA", "D_WEIGHT_BYTES", wt.size)
    w.write("NVDLA_CDMA", "D_MEAN_FORMAT", MEAN_FORMAT=op.mean_format)
    if op.mean_format:
        w.write("NVDLA_CDMA", "D_MEAN_GLOBAL_0", MEAN_RY=op.mean_ry & 0xFFFF,
                MEAN_GU=op.mean_gu & 0xFFFF)
        w.write("NVDLA_CDMA", "D_MEAN_GLOBAL_1", MEAN_BV=op.mean_bv & 0xFFFF,
                MEAN_AX=op.mean_ax & 0xFFFF)
    if op.in_cvt.enable:
        w.write("NVDLA_CDMA", "D_CVT_CFG", CVT_EN="ENABLE", CVT_TRUNCATE=op.in_cvt.truncate)
        w.write("NVDLA_CDMA", "D_CVT_OFFSET", op.in_cvt.offset)
        w.write("NVDLA_CDMA", "D_CVT_SCALE", op.in_cvt.scale & 0xFFFF)
    else:
        w.write("NVDLA_CDMA", "D_CVT_CFG", CVT_EN="DISABLE")
    w.write("NVDLA_CDMA", "D_CONV_STRIDE", CONV_X_STRIDE=op.conv_stride_x - 1,
            CONV_Y_STRIDE=op.conv_stride_y - 1)
    w.write("NVDLA_CDMA", "D_ZERO_PADDING", PAD_LEFT=op.pad_x_left, PAD_RIGHT=op.pad_x_right,
            PAD_TOP=op.pad_y_top, PAD_BOTTOM=op.pad_y_bottom)
    w.write("NVDLA_CDMA", "D_ZERO_PADDING_VALUE", PAD_VALUE=op.pad_val & 0xFFFF)
    w.write("NVDLA_CDMA", "D_BANK", WEIGHT_BANK=op.weight_bank - 1, DATA_BANK=op.data_bank - 1)
