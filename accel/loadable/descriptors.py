"""The binary descriptors the NVDLA firmware reads (``dla_interface.h``).

A DLA1 task is described by a network descriptor (task address-list entry 0)
that points, through address-list indices, at four arrays in DRAM:

* the dependency graph: one :class:`CommonOpDesc` per op (36 bytes each);
* the operation list: one ``dla_operation_container`` union per op (116 bytes,
  the size of ``dla_sdp_op_desc``);
* the surface list: one ``dla_surface_container`` union per op (644 bytes, the
  size of ``dla_bdma_surface_desc``);
* the LUT list: ``dla_lut_param`` entries (700 bytes each).

Every struct in the header is ``__packed __aligned(4)``: no padding between
members and ``sizeof`` rounded up to 4.  Field names are the C names.  PDP,
CDP, BDMA, Rubik and LUT op structs live in
:mod:`accel.loadable.descriptors_aux`, the surface descriptors (which depend on
the firmware interface version through :class:`DataCube`) in
:mod:`accel.loadable.surfaces`, and the unions in
:mod:`accel.loadable.containers`.

>>> cube = DataCube(type=MEM_MC, address=5, size=8192, width=8, height=8, channel=128,
...                 line_stride=64, surf_stride=512)
>>> len(cube.pack()), DataCube.unpack(cube.pack()) == cube
(32, True)
"""

from __future__ import annotations

from accel.loadable.cstruct import CStruct, cstruct, member

# engine (processor) types: index into op_head[] and consumers[]
OP_BDMA, OP_CONV, OP_SDP, OP_PDP, OP_CDP, OP_RUBIK = range(6)
OP_NUM = 6
OP_NAMES = ("BDMA", "CONV", "SDP", "PDP", "CDP", "RUBIK")

# dla_data_cube.type
MEM_MC, MEM_CV, MEM_HW = 0, 1, 2

# dla_consumer.event
EVENT_OP_COMPLETED = 1
EVENT_OP_PROGRAMMED = 2
EVENT_OP_ENABLED = 3
EVENT_CDMA_WT_DONE = 4
EVENT_CDMA_DT_DONE = 5

PRECISION_INT8, PRECISION_INT16, PRECISION_FP16 = 0, 1, 2
CONV_MODE_DIRECT, CONV_MODE_WINOGRAD = 0, 1
FORMAT_FEATURE = 36  # dla data_format: feature cube (below 36: pixel formats)

# dla_sdp_op.type / .alu_type / .mode / .act
SDP_OP_NONE, SDP_OP_MUL, SDP_OP_ADD, SDP_OP_BOTH = range(4)
SDP_ALU_OP_MAX, SDP_ALU_OP_MIN, SDP_ALU_OP_SUM, SDP_ALU_OP_EQL = range(4)
SDP_OP_PER_LAYER, SDP_OP_PER_KERNEL, SDP_OP_PER_POINT = range(3)
ACTIVATION_NONE, ACTIVATION_RELU, ACTIVATION_LUT, ACTIVATION_PRELU = range(4)


@cstruct
class NetworkDesc(CStruct):
    """``dla_network_desc`` (40 bytes): where the task's lists are, and op heads.

    Every ``*_index`` is an index into the task's address list (-1: none).
    ``op_head[t]`` is the first op of engine type ``t`` (-1: none).
    """

    operation_desc_index: int = member("h")
    surface_desc_index: int = member("h")
    dependency_graph_index: int = member("h")
    lut_data_index: int = member("h")
    roi_array_index: int = member("h")
    surface_index: int = member("h")
    stat_list_index: int = member("h")
    reserved1: int = member("h")
    op_head: list[int] = member("h", OP_NUM)
    num_rois: int = member("H")
    num_operations: int = member("H")
    num_luts: int = member("H")
    num_addresses: int = member("H")
    input_layer: int = member("h")
    dynamic_roi: int = member("B")
    reserved0: int = member("B")


@cstruct
class Consumer(CStruct):
    """``dla_consumer``: op ``index`` (-1: none) is notified of ``event``."""

    index: int = member("h")
    event: int = member("B")
    res: int = member("B")


@cstruct
class CommonOpDesc(CStruct):
    """``dla_common_op_desc`` (36 bytes): one node of the dependency graph."""

    index: int = member("h")
    roi_index: int = member("b")
    op_type: int = member("B")
    dependency_count: int = member("B")
    reserved0: list[int] = member("B", 3)
    consumers: list[Consumer] = member(Consumer, OP_NUM)
    fused_parent: Consumer = member(Consumer)


@cstruct
class CvtParam(CStruct):
    """``dla_cvt_param``: ``(x - offset) * scale >> truncate`` when enabled."""

    scale: int = member("h")
    truncate: int = member("B")
    enable: int = member("B")
    offset: int = member("i")


@cstruct
class DataCube(CStruct):
    """``dla_data_cube`` (32 bytes, firmware interface 0.12): a surface.

    ``address`` is a task address-list index (-1: none), ``offset`` a byte
    offset added to that address.
    """

    type: int = member("H")
    address: int = member("h")
    offset: int = member("I")
    size: int = member("I")
    width: int = member("H")
    height: int = member("H")
    channel: int = member("H")
    reserved0: int = member("H")
    line_stride: int = member("I")
    surf_stride: int = member("I")
    plane_stride: int = member("I")


@cstruct
class DataCubeV10(CStruct):
    """``dla_data_cube`` of firmware interface 0.10 (28 bytes): no ``offset``.

    The official regression loadables (blob version 0.10.0) use this layout:
    decoded with the 32-byte one their sizes land in the width fields.
    """

    type: int = member("H")
    address: int = member("h")
    size: int = member("I")
    width: int = member("H")
    height: int = member("H")
    channel: int = member("H")
    reserved0: int = member("H")
    line_stride: int = member("I")
    surf_stride: int = member("I")
    plane_stride: int = member("I")

    @property
    def offset(self) -> int:
        """Always 0: this interface version addresses whole address-list entries."""
        return 0


@cstruct
class ConvOpDesc(CStruct):
    """``dla_conv_op_desc`` (96 bytes): CDMA/CSC/CMAC/CACC programming."""

    conv_mode: int = member("B")
    data_reuse: int = member("B")
    weight_reuse: int = member("B")
    skip_data_rls: int = member("B")
    skip_weight_rls: int = member("B")
    reserved0: int = member("B")
    entry_per_slice: int = member("H")
    data_format: int = member("B")
    pixel_mapping: int = member("B")
    fetch_grain: int = member("H")
    reserved_b: list[int] = member("B", 8)
    batch: int = member("B")
    weight_format: int = member("B")
    data_bank: int = member("B")
    weight_bank: int = member("B")
    batch_stride: int = member("I")
    post_extension: int = member("B")
    pixel_override: int = member("B")
    release: int = member("H")
    input_width_csc: int = member("H")
    input_height_csc: int = member("H")
    input_channel_csc: int = member("H")
    kernel_width_csc: int = member("H")
    kernel_height_csc: int = member("H")
    kernel_channel_csc: int = member("H")
    input_width_cmac: int = member("H")
    input_height_cmac: int = member("H")
    bytes_per_kernel: int = member("I")
    mean_ry: int = member("h")
    mean_gu: int = member("h")
    mean_bv: int = member("h")
    mean_ax: int = member("h")
    mean_format: int = member("B")
    conv_stride_x: int = member("B")
    conv_stride_y: int = member("B")
    pad_x_left: int = member("B")
    pad_x_right: int = member("B")
    pad_y_top: int = member("B")
    pad_y_bottom: int = member("B")
    dilation_x: int = member("B")
    dilation_y: int = member("B")
    reserved2: list[int] = member("B", 2)
    pra_truncate: int = member("B")
    in_precision: int = member("B")
    out_precision: int = member("B")
    pad_val: int = member("h")
    in_cvt: CvtParam = member(CvtParam)
    out_cvt: CvtParam = member(CvtParam)


@cstruct
class SdpCvt(CStruct):
    """``dla_sdp_cvt``: converters of the ALU and MUL operands (Y unit only)."""

    alu_cvt: CvtParam = member(CvtParam)
    mul_cvt: CvtParam = member(CvtParam)


@cstruct
class SdpOp(CStruct):
    """``dla_sdp_op`` (32 bytes): one SDP sub-unit (X1, X2 or Y)."""

    enable: int = member("B")
    alu_type: int = member("B")
    type: int = member("B")
    mode: int = member("B")
    act: int = member("B")
    shift_value: int = member("B")
    truncate: int = member("B")
    precision: int = member("B")
    alu_operand: int = member("i")
    mul_operand: int = member("i")
    cvt: SdpCvt = member(SdpCvt)


@cstruct
class SdpOpDesc(CStruct):
    """``dla_sdp_op_desc`` (116 bytes, the largest op desc)."""

    src_precision: int = member("B")
    dst_precision: int = member("B")
    lut_index: int = member("h")
    out_cvt: CvtParam = member(CvtParam)
    conv_mode: int = member("B")
    batch_num: int = member("B")
    reserved0: int = member("H")
    batch_stride: int = member("I")
    x1_op: SdpOp = member(SdpOp)
    x2_op: SdpOp = member(SdpOp)
    y_op: SdpOp = member(SdpOp)
