"""Firmware descriptors of the other engines: PDP, CDP, BDMA, Rubik, LUT.

Same conventions as :mod:`accel.loadable.descriptors` (packed, C names).
"""

from __future__ import annotations

from accel.loadable.cstruct import CStruct, cstruct, member
from accel.loadable.descriptors import CvtParam

POOL_MODE_AVG, POOL_MODE_MAX, POOL_MODE_MIN = range(3)
PDP_PAD_VAL_NUM = 7
NUM_MAX_BDMA_OPS = 20
RUBIK_MODE_CONTRACT, RUBIK_MODE_SPLIT, RUBIK_MODE_MERGE = range(3)
LUT_LINEAR_EXP_ENTRIES = (1 << 6) + 1
LUT_LINEAR_ONLY_ENTRIES = (1 << 8) + 1


@cstruct
class PdpOpDesc(CStruct):
    """``dla_pdp_op_desc``; ``pool_width``/``pool_height`` hold size - 1."""

    partial_in_width_first: int = member("H")
    partial_in_width_mid: int = member("H")
    partial_in_width_last: int = member("H")
    partial_width_first: int = member("H")
    partial_width_mid: int = member("H")
    partial_width_last: int = member("H")
    split_num: int = member("B")
    pool_mode: int = member("B")
    pool_width: int = member("B")
    pool_height: int = member("B")
    stride_x: int = member("B")
    stride_y: int = member("B")
    pad_left: int = member("B")
    pad_right: int = member("B")
    pad_top: int = member("B")
    pad_bottom: int = member("B")
    precision: int = member("B")
    reserved0: int = member("B")
    padding_value: list[int] = member("i", PDP_PAD_VAL_NUM)


@cstruct
class CdpOpDesc(CStruct):
    """``dla_cdp_op_desc`` (LRN)."""

    in_precision: int = member("B")
    out_precision: int = member("B")
    lut_index: int = member("h")
    in_cvt: CvtParam = member(CvtParam)
    out_cvt: CvtParam = member(CvtParam)
    local_size: int = member("B")
    bypass_sqsum: int = member("B")
    bypass_out_mul: int = member("B")
    reserved0: int = member("B")


@cstruct
class BdmaTransferDesc(CStruct):
    """``dla_bdma_transfer_desc``: addresses are address-list indices."""

    source_address: int = member("h")
    destination_address: int = member("h")
    line_size: int = member("I")
    line_repeat: int = member("I")
    source_line: int = member("I")
    destination_line: int = member("I")
    surface_repeat: int = member("I")
    source_surface: int = member("I")
    destination_surface: int = member("I")


@cstruct
class BdmaSurfaceDesc(CStruct):
    """``dla_bdma_surface_desc`` (644 bytes, the largest surface desc)."""

    source_type: int = member("B")
    destination_type: int = member("B")
    num_transfers: int = member("H")
    transfers: list[BdmaTransferDesc] = member(BdmaTransferDesc, NUM_MAX_BDMA_OPS)


@cstruct
class BdmaOpDesc(CStruct):
    """``dla_bdma_op_desc``."""

    num_transfers: int = member("H")
    reserved0: int = member("H")


@cstruct
class RubikOpDesc(CStruct):
    """``dla_rubik_op_desc``."""

    mode: int = member("B")
    precision: int = member("B")
    stride_x: int = member("B")
    stride_y: int = member("B")


@cstruct
class FloatData(CStruct):
    """``dla_float_data`` (the INT view of ``union dla_slope``): scale >> shifter."""

    scale: int = member("h")
    shifter: int = member("b")
    reserved0: int = member("B")


@cstruct
class LutParam(CStruct):
    """``dla_lut_param`` (700 bytes).

    ``union dla_lut_offset`` is 2 bytes: its int8 view (exp_offset or frac_bits)
    is kept, the high byte skipped. ``union dla_slope`` is kept in its INT view.
    """

    linear_exp_table: list[int] = member("h", LUT_LINEAR_EXP_ENTRIES)
    linear_only_table: list[int] = member("h", LUT_LINEAR_ONLY_ENTRIES)
    linear_exp_offset: int = member("bx")
    linear_only_offset: int = member("bx")
    linear_exp_start: int = member("Q")
    linear_exp_end: int = member("Q")
    linear_only_start: int = member("Q")
    linear_only_end: int = member("Q")
    linear_exp_underflow_slope: FloatData = member(FloatData)
    linear_exp_overflow_slope: FloatData = member(FloatData)
    linear_only_underflow_slope: FloatData = member(FloatData)
    linear_only_overflow_slope: FloatData = member(FloatData)
    hybrid_priority: int = member("B")
    underflow_priority: int = member("B")
    overflow_priority: int = member("B")
    method: int = member("B")
