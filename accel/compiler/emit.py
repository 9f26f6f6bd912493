"""Emission of a lowered subgraph as an NVDLA loadable (one DLA1 task).

Task layout, as the NVDLA compiler lays it out (NVDLA_FACTS.md section 4):

* memory 0 is a zero page and global address 0 points at it (a dummy);
* the task's address list starts with ``addr0``, the ``dla_network_desc``,
  followed by the dependency graph, the operation list and the surface list,
  each a SET memory filled from the blobs ``task-0-addr0``,
  ``task-0-dep_graph``, ``task-0-op_list`` and ``task-0-surf_list``;
* then the constant memories (weights, SDP operands; SET) and one memory per
  feature tensor (INPUT / OUTPUT with a tensor description and bind id, ALLOC
  for tensors that stay inside the subgraph).

Data cubes in the descriptors name memory by *task address-list index*; one
address-list entry exists per (memory, offset) the descriptors use.

Ops: layer ``i`` is CONV op ``2i`` fused with SDP op ``2i+1``.  Dependencies
(``dla_common_op_desc``):

* conv_i -> sdp_i on OP_PROGRAMMED (the SDP must be programmed first ...)
* sdp_i -> conv_i as ``fused_parent`` on OP_ENABLED (... and enabled before
  its conv starts streaming into it);
* conv_i -> conv_i+1 and sdp_i -> sdp_i+1 on OP_COMPLETED (the engine chains);
* sdp_i -> conv_i+1 on OP_COMPLETED: layers run in topological order, so the
  next convolution starts once every earlier output is in memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accel.compiler.lower import ConvLayer, FeatureTensor, LoweredSubgraph, lower
from accel.config import HwConfig
from accel.layout import align_up, ceil_div, pack_dc_weights, pack_sdp_operand
from accel.loadable.containers import pack_op_container, pack_surface_container
from accel.loadable.descriptors import (
    ACTIVATION_NONE,
    ACTIVATION_RELU,
    CONV_MODE_DIRECT,
    EVENT_OP_COMPLETED,
    EVENT_OP_ENABLED,
    EVENT_OP_PROGRAMMED,
    FORMAT_FEATURE,
    MEM_HW,
    MEM_MC,
    OP_CONV,
    OP_NUM,
    OP_SDP,
    PRECISION_INT8,
    PRECISION_INT16,
    SDP_ALU_OP_MIN,
    SDP_ALU_OP_SUM,
    SDP_OP_ADD,
    SDP_OP_BOTH,
    SDP_OP_MUL,
    SDP_OP_PER_KERNEL,
    SDP_OP_PER_LAYER,
    CommonOpDesc,
    Consumer,
    ConvOpDesc,
    CvtParam,
    DataCube,
    NetworkDesc,
    SdpCvt,
    SdpOp,
    SdpOpDesc,
)
from accel.loadable.io import write_loadable
from accel.loadable.model import (
    AddressListEntry,
    Blob,
    BlobSubInterface,
    DataCategory,
    DataFormat,
    DataType,
    EventListEntry,
    EventOp,
    Interface,
    Loadable,
    MemoryFlags,
    MemoryListEntry,
    PixelFormat,
    SubmitListEntry,
    TaskListEntry,
    TensorDescListEntry,
)
from accel.loadable.surfaces import INTERFACE_V12, ConvSurfaceDesc, SdpSurfaceDesc
from tengine_host.ir import Graph

WEIGHT_ALIGN = 256   # format.rst: weight start addresses are 256-byte aligned
PAGE = 4096


@dataclass
class CompiledSubgraph:
    """A compiled accelerator subgraph: the plan and its loadable."""

    name: str
    cfg: HwConfig
    plan: LoweredSubgraph
    loadable: Loadable
    tensor_memory: dict[str, int]   # feature tensor name -> memory-list id

    def to_bytes(self) -> bytes:
        return write_loadable(self.loadable)

    @property
    def inputs(self) -> list[FeatureTensor]:
        return [self.plan.tensors[t] for t in self.plan.inputs]

    @property
    def outputs(self) -> list[FeatureTensor]:
        return [self.plan.tensors[t] for t in self.plan.outputs]

    def summary(self) -> list[dict]:
        """One row per layer (for tables and ``--json``)."""
        rows = []
        for layer in self.plan.layers:
            g, q = layer.geometry, layer.quant
            rows.append(dict(
                name=layer.name, op=layer.op_type,
                input=f"{g['c']}x{g['h']}x{g['w']}",
                kernel=f"{g['k']}x{g['c']}x{g['r']}x{g['s']}",
                output=f"{g['k']}x{layer.out_hw[0]}x{layer.out_hw[1]}",
                macs=layer.macs, data_banks=layer.data_banks, weight_banks=layer.weight_banks,
                clip_truncate=q.clip_truncate, bias_shift=q.bias_shift, mul_shift=q.mul_shift,
                relu=q.relu, clip_max=q.clip_max))
        return rows


class _Builder:
    """Collects memories, address-list entries and blobs of one task."""

    def __init__(self) -> None:
        self.memories: list[MemoryListEntry] = [
            MemoryListEntry(id=0, size=PAGE, flags=MemoryFlags.ALLOC, alignment=PAGE)]
        self.addresses: list[AddressListEntry] = [AddressListEntry(id=0, mem_id=0, size=PAGE)]
        self.task_addresses: list[int] = []   # global address ids, in task order
        self.blobs: list[Blob] = []
        self.tensors: list[TensorDescListEntry] = []

    def memory(self, size: int, flags: MemoryFlags, contents: list[tuple[str, bytes, int]] = (),
               alignment: int = PAGE) -> int:
        mem_id = len(self.memories)
        entry = MemoryListEntry(id=mem_id, size=size, flags=flags, alignment=alignment)
        for name, data, offset in contents:
            self.blobs.append(Blob(name=name, data=data))
            entry.contents.append(name)
            entry.offsets.append(offset)
        self.memories.append(entry)
        return mem_id

    def address(self, mem_id: int, offset: int, size: int) -> int:
        """Task address-list index of (memory, offset); created on first use."""
        for i, aid in enumerate(self.task_addresses):
            a = self.addresses[aid]
            if (a.mem_id, a.offset) == (mem_id, offset):
                return i
        aid = len(self.addresses)
        self.addresses.append(AddressListEntry(id=aid, mem_id=mem_id, offset=offset, size=size))
        self.task_addresses.append(aid)
        return len(self.task_addresses) - 1


def _cube(tensor: FeatureTensor, index: int, offset: int = 0) -> DataCube:
    lay = tensor.layout
    return DataCube(type=MEM_MC, address=index, offset=offset, size=lay.size, width=lay.width,
                    height=lay.height, channel=lay.channels, line_stride=lay.line_stride,
                    surf_stride=lay.surf_stride, plane_stride=0)


def _stream(layer: ConvLayer) -> DataCube:
    """The on-the-fly CACC -> SDP stream (no memory)."""
    oh, ow = layer.out_hw
    return DataCube(type=MEM_HW, address=-1, offset=0, size=0, width=ow, height=oh,
                    channel=layer.geometry["k"], line_stride=0, surf_stride=0, plane_stride=0)


def _no_cube() -> DataCube:
    return DataCube(type=MEM_MC, address=-1, offset=0, size=0, width=0, height=0, channel=0,
                    line_stride=0, surf_stride=0, plane_stride=0)


def _cvt(scale: int = 1, truncate: int = 0, offset: int = 0, enable: int = 1) -> CvtParam:
    return CvtParam(scale=scale, truncate=truncate, enable=enable, offset=offset)


def _disabled_sdp_op() -> SdpOp:
    return SdpOp(enable=0, alu_type=0, type=0, mode=0, act=0, shift_value=0, truncate=0,
                 precision=0, alu_operand=0, mul_operand=0,
                 cvt=SdpCvt(alu_cvt=_cvt(enable=0), mul_cvt=_cvt(enable=0)))


def _conv_op(layer: ConvLayer, cfg: HwConfig) -> ConvOpDesc:
    g, q = layer.geometry, layer.quant
    oh, ow = layer.out_hw
    return ConvOpDesc(
        conv_mode=CONV_MODE_DIRECT, data_reuse=0, weight_reuse=0, skip_data_rls=0,
        skip_weight_rls=0, reserved0=0, entry_per_slice=layer.entries_per_slice,
        data_format=FORMAT_FEATURE, pixel_mapping=0, fetch_grain=1, reserved_b=[0] * 8,
        batch=1, weight_format=0, data_bank=layer.data_banks, weight_bank=layer.weight_banks,
        batch_stride=0, post_extension=0, pixel_override=0, release=g["h"],
        input_width_csc=g["w"], input_height_csc=g["h"], input_channel_csc=g["c"],
        kernel_width_csc=g["s"], kernel_height_csc=g["r"], kernel_channel_csc=g["c"],
        input_width_cmac=ow, input_height_cmac=oh, bytes_per_kernel=g["c"] * g["r"] * g["s"],
        mean_ry=0, mean_gu=0, mean_bv=0, mean_ax=0, mean_format=0,
        conv_stride_x=g["stride"][1], conv_stride_y=g["stride"][0],
        pad_x_left=g["pad_left"], pad_x_right=g["pad_right"],
        pad_y_top=g["pad_top"], pad_y_bottom=g["pad_bottom"],
        dilation_x=g["dilation"][1], dilation_y=g["dilation"][0], reserved2=[0, 0],
        pra_truncate=0, in_precision=PRECISION_INT8, out_precision=PRECISION_INT8,
        pad_val=layer.pad_value, in_cvt=_cvt(enable=0),
        out_cvt=_cvt(scale=1, truncate=q.clip_truncate, offset=0, enable=1))


def _sdp_op(layer: ConvLayer) -> SdpOpDesc:
    q = layer.quant
    x1 = SdpOp(enable=1, alu_type=SDP_ALU_OP_SUM,
               type=SDP_OP_BOTH if q.bias is not None else SDP_OP_MUL,
               mode=SDP_OP_PER_KERNEL, act=ACTIVATION_RELU if q.relu else ACTIVATION_NONE,
               shift_value=q.bias_shift, truncate=q.mul_shift, precision=PRECISION_INT16,
               alu_operand=0, mul_operand=0,
               cvt=SdpCvt(alu_cvt=_cvt(enable=0), mul_cvt=_cvt(enable=0)))
    x2 = _disabled_sdp_op()
    if q.clip_max is not None:  # capped ReLU: X2 ALU MIN with a per-layer operand
        x2 = SdpOp(enable=1, alu_type=SDP_ALU_OP_MIN, type=SDP_OP_ADD, mode=SDP_OP_PER_LAYER,
                   act=ACTIVATION_NONE, shift_value=0, truncate=0, precision=PRECISION_INT16,
                   alu_operand=q.clip_max, mul_operand=1,
                   cvt=SdpCvt(alu_cvt=_cvt(enable=0), mul_cvt=_cvt(enable=0)))
    return SdpOpDesc(src_precision=PRECISION_INT8, dst_precision=PRECISION_INT8, lut_index=-1,
                     out_cvt=_cvt(scale=q.cvt_scale, truncate=q.cvt_shift, offset=q.cvt_offset),
                     conv_mode=CONV_MODE_DIRECT, batch_num=1, reserved0=0, batch_stride=0,
                     x1_op=x1, x2_op=x2, y_op=_disabled_sdp_op())


def _operand_bytes(layer: ConvLayer, cfg: HwConfig) -> bytes:
    """X1's per-kernel operands: (bias, multiplier) pairs, or multipliers alone.

    SDP_RDMA reads whole atoms of channels, so the arrays are padded to a
    multiple of the atom's channel count.
    """
    q = layer.quant
    k = layer.geometry["k"]
    kpad = ceil_div(k, cfg.atom_size) * cfg.atom_size
    mul = np.zeros(kpad, dtype=np.int64)
    mul[:k] = q.mul
    if q.bias is None:
        return pack_sdp_operand(mul, cfg, elem_bytes=2).tobytes()
    bias = np.zeros(kpad, dtype=np.int64)
    bias[:k] = q.bias
    return pack_sdp_operand(bias, cfg, elem_bytes=2, second=mul).tobytes()


def _dependencies(n_layers: int) -> list[CommonOpDesc]:
    none = Consumer(index=-1, event=0, res=0)
    ops = []
    for i in range(n_layers):
        conv, sdp = 2 * i, 2 * i + 1
        last = i == n_layers - 1
        conv_cons = [none] * OP_NUM
        conv_cons[OP_SDP] = Consumer(index=sdp, event=EVENT_OP_PROGRAMMED, res=0)
        if not last:
            conv_cons[OP_CONV] = Consumer(index=conv + 2, event=EVENT_OP_COMPLETED, res=0)
        sdp_cons = [none] * OP_NUM
        if not last:
            sdp_cons[OP_SDP] = Consumer(index=sdp + 2, event=EVENT_OP_COMPLETED, res=0)
            sdp_cons[OP_CONV] = Consumer(index=conv + 2, event=EVENT_OP_COMPLETED, res=0)
        ops.append(CommonOpDesc(index=conv, roi_index=0, op_type=OP_CONV,
                                dependency_count=1 if i == 0 else 3,
                                consumers=conv_cons, fused_parent=none))
        ops.append(CommonOpDesc(index=sdp, roi_index=0, op_type=OP_SDP,
                                dependency_count=1 if i == 0 else 2, consumers=sdp_cons,
                                fused_parent=Consumer(index=conv, event=EVENT_OP_ENABLED, res=0)))
    return ops


def _tensor_desc(t: FeatureTensor, tid: int, mem_id: int, cfg: HwConfig) -> TensorDescListEntry:
    lay = t.layout
    strides = [0] * 8
    strides[0], strides[1], strides[2] = 1, lay.line_stride, lay.surf_stride
    pixel = PixelFormat.FEATURE_X8 if cfg.atom_size == 8 else PixelFormat.FEATURE
    return TensorDescListEntry(
        name=t.name, id=tid, mem_id=mem_id, size=lay.size, offset=0,
        data_format=DataFormat.NCHW, data_type=DataType.INT8,
        data_category=DataCategory.FEATURE, pixel_format=pixel, n=1, c=lay.channels,
        h=lay.height, w=lay.width, strides=strides)


def emit(plan: LoweredSubgraph) -> tuple[Loadable, dict[str, int]]:
    """Lay out ``plan`` as a one-task DLA1 loadable.

    Returns the loadable and the memory id of every feature tensor.
    """
    cfg = plan.cfg
    if not plan.layers:
        raise ValueError(f"subgraph {plan.name!r} has no layers to emit")
    b = _Builder()
    n_ops = 2 * len(plan.layers)
    # addr0 .. surf_list: reserve their memories and the first four task addresses
    # (sizes are filled in once the blobs exist)
    desc_mems = [b.memory(0, MemoryFlags.ALLOC | MemoryFlags.SET) for _ in range(4)]
    for mem_id in desc_mems:
        b.address(mem_id, 0, 0)

    # constants: every layer's weights and operands in two SET memories
    weights, operands, w_off, o_off = [], [], [], []
    cursor_w = cursor_o = 0
    for layer in plan.layers:
        wt = pack_dc_weights(layer.quant.weight, cfg).tobytes()
        cursor_w = align_up(cursor_w, WEIGHT_ALIGN)
        weights.append((f"weights-{layer.name}", wt, cursor_w))
        w_off.append((cursor_w, len(wt)))
        cursor_w += len(wt)
        op = _operand_bytes(layer, cfg)
        cursor_o = align_up(cursor_o, cfg.atom_size * 4)
        operands.append((f"sdp-x1-{layer.name}", op, cursor_o))
        o_off.append((cursor_o, len(op)))
        cursor_o += len(op)
    wmem = b.memory(align_up(cursor_w, PAGE), MemoryFlags.ALLOC | MemoryFlags.SET, weights)
    omem = b.memory(align_up(cursor_o, PAGE), MemoryFlags.ALLOC | MemoryFlags.SET, operands)

    # feature tensors: bound inputs/outputs, internal ones allocated
    tmem: dict[str, int] = {}
    for bind, name in enumerate(plan.inputs):
        flags = MemoryFlags.ALLOC | MemoryFlags.INPUT
        tmem[name] = b.memory(plan.tensors[name].layout.size, flags)
        b.memories[tmem[name]].bind_id = bind
    for bind, name in enumerate(plan.outputs):
        flags = MemoryFlags.ALLOC | MemoryFlags.OUTPUT
        tmem[name] = b.memory(plan.tensors[name].layout.size, flags)
        b.memories[tmem[name]].bind_id = bind
    for name, t in plan.tensors.items():
        if name not in tmem:
            tmem[name] = b.memory(t.layout.size, MemoryFlags.ALLOC)
    for name in [*plan.inputs, *plan.outputs]:
        tid = len(b.tensors)
        b.tensors.append(_tensor_desc(plan.tensors[name], tid, tmem[name], cfg))
        b.memories[tmem[name]].tensor_desc_id = tid

    op_list, surf_list = bytearray(), bytearray()
    for i, layer in enumerate(plan.layers):
        src, dst = plan.tensors[layer.src], plan.tensors[layer.dst]
        src_cube = _cube(src, b.address(tmem[src.name], 0, src.layout.size))
        dst_cube = _cube(dst, b.address(tmem[dst.name], 0, dst.layout.size))
        off, size = w_off[i]
        g = layer.geometry
        weight_cube = DataCube(type=MEM_MC, address=b.address(wmem, off, size), offset=0,
                               size=size, width=g["s"], height=g["r"], channel=g["c"],
                               line_stride=0, surf_stride=0, plane_stride=0)
        ooff, osize = o_off[i]
        x1_cube = DataCube(type=MEM_MC, address=b.address(omem, ooff, osize), offset=0,
                           size=osize, width=1, height=1, channel=g["k"], line_stride=0,
                           surf_stride=0, plane_stride=0)
        conv_surf = ConvSurfaceDesc(weight_data=weight_cube, wmb_data=_no_cube(),
                                    wgs_data=_no_cube(), src_data=src_cube,
                                    dst_data=_stream(layer), offset_u=0, in_line_uv_stride=0)
        sdp_surf = SdpSurfaceDesc(src_data=_stream(layer), x1_data=x1_cube, x2_data=_no_cube(),
                                  y_data=_no_cube(), dst_data=dst_cube)
        op_list += pack_op_container(_conv_op(layer, cfg)) + pack_op_container(_sdp_op(layer))
        surf_list += pack_surface_container(conv_surf) + pack_surface_container(sdp_surf)

    head = [-1] * OP_NUM
    head[OP_CONV], head[OP_SDP] = 0, 1
    net = NetworkDesc(operation_desc_index=2, surface_desc_index=3, dependency_graph_index=1,
                      lut_data_index=-1, roi_array_index=-1, surface_index=-1,
                      stat_list_index=-1, reserved1=-1, op_head=head, num_rois=1,
                      num_operations=n_ops, num_luts=0, num_addresses=len(b.task_addresses),
                      input_layer=0, dynamic_roi=0, reserved0=0)
    dep = b"".join(d.pack() for d in _dependencies(len(plan.layers)))
    contents = [(net.pack(), BlobSubInterface.NETWORK_DESC, "addr0"),
                (dep, BlobSubInterface.DEP_GRAPH, "dep_graph"),
                (bytes(op_list), BlobSubInterface.OP_LIST, "op_list"),
                (bytes(surf_list), BlobSubInterface.SURF_LIST, "surf_list")]
    for mem_id, (data, sub, suffix) in zip(desc_mems, contents, strict=True):
        name = f"task-0-{suffix}"
        b.blobs.append(Blob(name=name, data=data, interface=Interface.DLA1, sub_interface=sub,
                            version=INTERFACE_V12))
        mem = b.memories[mem_id]
        mem.size, mem.contents, mem.offsets = align_up(len(data), PAGE), [name], [0]
        b.addresses[b.task_addresses[desc_mems.index(mem_id)]].size = len(data)

    task = TaskListEntry(id=0, interface=Interface.DLA1, instance=-1,
                         address_list=list(b.task_addresses), pre_actions=[], post_actions=[0])
    loadable = Loadable(task_list=[task], memory_list=b.memories, address_list=b.addresses,
                        event_list=[EventListEntry(id=0, type=0, target=0, val=1,
                                                   op=EventOp.SIGNAL)],
                        blobs=b.blobs, tensor_desc_list=b.tensors,
                        submit_list=[SubmitListEntry(id=0, task_id=[0])])
    return loadable, tmem


def compile_subgraph(graph: Graph, quant_table: dict, cfg: HwConfig) -> CompiledSubgraph:
    """Lower and emit ``graph`` (every node DLA-supported) for ``cfg``."""
    plan = lower(graph, quant_table, cfg)
    loadable, tensor_memory = emit(plan)
    return CompiledSubgraph(graph.name, cfg, plan, loadable, tensor_memory)
