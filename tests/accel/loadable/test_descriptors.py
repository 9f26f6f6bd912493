"""Descriptor layouts against hand-computed bytes and the official loadables' blob sizes."""

from __future__ import annotations

import pytest

from accel.loadable.containers import (
    OPERATION_CONTAINER_SIZE,
    SURFACE_CONTAINER_SIZE,
    decode_dep_graph,
    decode_op,
    decode_surface,
)
from accel.loadable.descriptors import (
    CommonOpDesc,
    Consumer,
    ConvOpDesc,
    CvtParam,
    DataCube,
    DataCubeV10,
    NetworkDesc,
    SdpOpDesc,
)
from accel.loadable.descriptors_aux import BdmaSurfaceDesc, LutParam
from accel.loadable.io import read_loadable
from tests.conftest import shared_path


def test_cvt_param_bytes():
    # int16 scale, u8 truncate, u8 enable, int32 offset, little-endian, no padding
    raw = CvtParam(scale=-2, truncate=3, enable=1, offset=0x01020304).pack()
    assert raw == b"\xfe\xff\x03\x01\x04\x03\x02\x01"
    assert CvtParam.unpack(raw) == CvtParam(-2, 3, 1, 0x01020304)


def test_common_op_desc_bytes():
    consumers = [Consumer(-1, 0, 0)] * 6
    desc = CommonOpDesc(index=1, roi_index=0, op_type=2, dependency_count=1,
                        consumers=consumers, fused_parent=Consumer(0, 3, 0))
    expected = (b"\x01\x00\x00\x02" + b"\x01\x00\x00\x00" + b"\xff\xff\x00\x00" * 6
                + b"\x00\x00\x03\x00")
    assert desc.pack() == expected
    assert CommonOpDesc.unpack(expected) == desc


def test_sizes_match_dla_interface_h():
    # sizes counted by hand from the packed C structs
    assert NetworkDesc.SIZE == 40
    assert CommonOpDesc.SIZE == 36
    assert DataCube.SIZE == 32 and DataCubeV10.SIZE == 28
    assert ConvOpDesc.SIZE == 92
    assert ConvOpDesc.offset_of("pad_val") == 74  # packed: no padding before the int16
    assert ConvOpDesc.offset_of("in_cvt") == 76
    assert SdpOpDesc.SIZE == 116 == OPERATION_CONTAINER_SIZE
    assert BdmaSurfaceDesc.SIZE == 644 == SURFACE_CONTAINER_SIZE
    assert LutParam.SIZE == 700  # 644 table bytes + 2+2 offsets + 4*8 + 4*4 + 4


def test_pack_rejects_out_of_range():
    with pytest.raises(ValueError, match="scale=40000"):
        CvtParam(scale=40000).pack()


def test_unpack_short_buffer_names_struct():
    with pytest.raises(ValueError, match="NetworkDesc needs 40 bytes"):
        NetworkDesc.unpack(b"\x00" * 10)


def _blobs(name):
    path = shared_path("nvdla", "loadables", "flatbufs", "kmd", *name.split("/"))
    ld = read_loadable(path.read_bytes())
    return ld, {b.sub_interface: b for b in ld.blobs}


def test_official_conv_loadable_decodes():
    ld, blobs = _blobs("CONV/CONV_D_L0_0_small_fbuf")
    net = NetworkDesc.unpack(blobs[1].data)
    assert net.num_operations == 2 and net.op_head[1] == 0 and net.op_head[2] == 1
    # one union per op in each list
    assert len(blobs[3].data) == 2 * OPERATION_CONTAINER_SIZE
    assert len(blobs[4].data) == 2 * SURFACE_CONTAINER_SIZE
    assert len(blobs[2].data) == 2 * CommonOpDesc.SIZE
    conv, sdp = decode_dep_graph(blobs[2].data, 2)
    assert (conv.op_type, sdp.op_type) == (1, 2)
    # conv -> SDP fused: PROGRAMMED to the SDP, SDP's fused parent is the conv on ENABLED
    assert conv.consumers[2].index == 1 and conv.consumers[2].event == 2
    assert sdp.fused_parent.index == 0 and sdp.fused_parent.event == 3
    op = decode_op(1, blobs[3].data, 0)
    # README facts: 8x8x128 input, 3x3x128 kernels, pad 1
    assert (op.input_width_csc, op.input_height_csc, op.input_channel_csc) == (8, 8, 128)
    assert (op.kernel_width_csc, op.kernel_height_csc) == (3, 3)
    assert op.bytes_per_kernel == 3 * 3 * 128
    surf = decode_surface(1, blobs[4].data, 0, blobs[4].version)
    assert (surf.src_data.width, surf.src_data.channel, surf.src_data.size) == (8, 128, 8192)
    assert surf.weight_data.size == 36864 == 32 * 3 * 3 * 128
    sdp_surf = decode_surface(2, blobs[4].data, 1, blobs[4].version)
    dst = sdp_surf.dst_data
    # output 8x8x32 with line stride 0x40 and surface stride 0x200 (firmware_small.py)
    assert (dst.width, dst.height, dst.channel) == (8, 8, 32)
    assert (dst.line_stride, dst.surf_stride) == (0x40, 0x200)


def test_v12_layout_misreads_v10_blob():
    # the 0.10 blobs decoded with the 32-byte cube put the size into width/height:
    # evidence that the interface version must select the layout
    _, blobs = _blobs("SDP/SDP_X1_L0_0_small_fbuf")
    wrong = decode_surface(2, blobs[4].data, 0, (0, 12, 0)).src_data
    right = decode_surface(2, blobs[4].data, 0, (0, 10, 0)).src_data
    assert (right.width, right.height, right.channel) == (8, 8, 32)
    assert (wrong.width, wrong.height) != (8, 8)
