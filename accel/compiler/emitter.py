"""Emission: engine operations -> one DLA1 task in an NVDLA loadable.

Memories (NVDLA_FACTS section 4 for the task conventions):

* memory 0 is a zero page, global address 0 a dummy;
* the task's descriptors: ``addr0`` (``dla_network_desc``), the dependency
  graph, the operation list, the surface list and, when an op has a lookup
  table, the LUT list (``dla_lut_param`` entries, each distinct table once;
  SET memories filled from ``task-0-*`` blobs);
* ``weights`` (SET): every operation's packed weights, 256-byte aligned;
* ``operands`` (SET): constant SDP operands (per-kernel / per-element int16);
* ``arena`` (ALLOC): every internal buffer at the offset memory planning chose;
* one memory per subgraph input (INPUT) and output (OUTPUT), with a tensor
  description and a bind id.

Each memory has one address-list entry; data cubes name it by task
address-list index and add their byte offset.

Ops run in list order.  Operation ``j`` (a conv + SDP pair counts as one)
starts when operation ``j - 1`` has completed: its first firmware op lists
the previous one's last firmware op as a producer (``OP_COMPLETED``).  Each
engine's ops are also chained (``consumers[engine]``, how the firmware finds
the next op to program).  A pair's SDP waits for its conv to be programmed
and the conv for its SDP to be enabled (``fused_parent``), so the consumer
is ready before data flows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accel.compiler.engine import CdpOp, ConvOp, EngineOp, PdpOp, SdpOp
from accel.compiler.program import ALU_OPS, MODES, Operand, SdpProgram, XStage
from accel.compiler.tensors import Region
from accel.config import HwConfig
from accel.layout import align_up, cube_layout, pack_feature, pack_sdp_operand
from accel.loadable.containers import pack_op_container, pack_surface_container
from accel.loadable.descriptors import (
    ACTIVATION_LUT,
    ACTIVATION_NONE,
    ACTIVATION_PRELU,
    ACTIVATION_RELU,
    CONV_MODE_DIRECT,
    EVENT_OP_COMPLETED,
    EVENT_OP_ENABLED,
    EVENT_OP_PROGRAMMED,
    FORMAT_FEATURE,
    MEM_HW,
    MEM_MC,
    OP_CDP,
    OP_CONV,
    OP_NUM,
    OP_PDP,
    OP_SDP,
    PRECISION_INT8,
    PRECISION_INT16,
    SDP_OP_ADD,
    SDP_OP_BOTH,
    SDP_OP_MUL,
    SDP_OP_NONE,
    CommonOpDesc,
    Consumer,
    ConvOpDesc,
    CvtParam,
    DataCube,
    NetworkDesc,
    SdpCvt,
    SdpOpDesc,
)
from accel.loadable.descriptors import SdpOp as SdpStageDesc
from accel.loadable.descriptors_aux import PDP_PAD_VAL_NUM, CdpOpDesc, LutParam, PdpOpDesc
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
from accel.loadable.surfaces import (
    INTERFACE_V12,
    CdpSurfaceDesc,
    ConvSurfaceDesc,
    PdpSurfaceDesc,
    SdpSurfaceDesc,
)

PAGE = 4096
WEIGHT_ALIGN = 256        # format.rst: weight start addresses are 256-byte aligned
OPERAND_ALIGN = 64
POOL_MODES = {"avg": 0, "max": 1, "min": 2}


@dataclass(frozen=True)
class Placed:
    """Where a buffer landed: memory id and byte offset in it."""

    memory: int
    offset: int


@dataclass
class Emitted:
    loadable: Loadable
    buffers: dict[str, Placed]             # buffer name -> memory and offset
    fw_ops: list[tuple[int, ...]]          # engine op index -> its firmware op indices
    weight_bytes: int
    operand_bytes: int
    arena_bytes: int


def _cvt(scale: int = 1, truncate: int = 0, offset: int = 0, enable: int = 1) -> CvtParam:
    return CvtParam(scale=scale, truncate=truncate, enable=enable, offset=offset)


def _no_cube() -> DataCube:
    return DataCube(type=MEM_MC, address=-1, offset=0, size=0, width=0, height=0, channel=0,
                    line_stride=0, surf_stride=0, plane_stride=0)


def _disabled_stage() -> SdpStageDesc:
    return SdpStageDesc(enable=0, alu_type=0, type=0, mode=0, act=0, shift_value=0, truncate=0,
                        precision=0, alu_operand=0, mul_operand=0,
                        cvt=SdpCvt(alu_cvt=_cvt(enable=0), mul_cvt=_cvt(enable=0)))


class _Task:
    """Memories, addresses and blobs of one task under construction."""

    def __init__(self) -> None:
        self.memories = [MemoryListEntry(id=0, size=PAGE, flags=MemoryFlags.ALLOC,
                                         alignment=PAGE)]
        self.addresses = [AddressListEntry(id=0, mem_id=0, size=PAGE)]
        self.task_addresses: list[int] = []
        self.blobs: list[Blob] = []
        self.tensors: list[TensorDescListEntry] = []
        self._addr_of_mem: dict[int, int] = {}

    def memory(self, size: int, flags: MemoryFlags, alignment: int = PAGE) -> int:
        mem_id = len(self.memories)
        self.memories.append(MemoryListEntry(id=mem_id, size=max(size, 1), flags=flags,
                                             alignment=alignment))
        return mem_id

    def fill(self, mem_id: int, name: str, data: bytes, offset: int) -> None:
        self.blobs.append(Blob(name=name, data=data))
        mem = self.memories[mem_id]
        mem.contents.append(name)
        mem.offsets.append(offset)

    def address(self, mem_id: int) -> int:
        """Task address-list index of memory ``mem_id`` (offset 0), created on first use."""
        if mem_id not in self._addr_of_mem:
            aid = len(self.addresses)
            self.addresses.append(AddressListEntry(id=aid, mem_id=mem_id, offset=0,
                                                   size=self.memories[mem_id].size))
            self.task_addresses.append(aid)
            self._addr_of_mem[mem_id] = len(self.task_addresses) - 1
        return self._addr_of_mem[mem_id]


class _Emitter:
    def __init__(self, cfg: HwConfig, buffers: dict[str, Placed], task: _Task,
                 wmem: int, omem: int) -> None:
        self.cfg, self.buffers, self.task = cfg, buffers, task
        self.wmem, self.omem = wmem, omem
        self.weights: dict[str, tuple[int, int]] = {}     # weights name -> (offset, size)
        self.weight_blobs: list[tuple[str, bytes, int]] = []
        self.operand_blobs: list[tuple[str, bytes, int]] = []
        self.w_cursor = 0
        self.o_cursor = 0
        self.luts: list[bytes] = []        # packed dla_lut_param, in lut_index order

    def lut_index(self, lut: LutParam) -> int:
        """Index of ``lut`` in the task's LUT list (each distinct table stored once)."""
        data = lut.pack()
        if data not in self.luts:
            self.luts.append(data)
        return self.luts.index(data)

    # -------------------------------------------------------------- cubes
    def cube(self, region: Region) -> DataCube:
        placed = self.buffers[region.buffer]
        lay = region.layout
        return DataCube(type=MEM_MC, address=self.task.address(placed.memory),
                        offset=placed.offset + region.offset, size=lay.size, width=lay.width,
                        height=lay.height, channel=lay.channels, line_stride=lay.line_stride,
                        surf_stride=lay.surf_stride, plane_stride=0)

    def _weights(self, op: ConvOp) -> DataCube:
        w = op.weights
        if w.name not in self.weights:
            self.w_cursor = align_up(self.w_cursor, WEIGHT_ALIGN)
            self.weights[w.name] = (self.w_cursor, len(w.data))
            self.weight_blobs.append((f"weights-{w.name}", w.data, self.w_cursor))
            self.w_cursor += len(w.data)
        off, size = self.weights[w.name]
        k, c, r, s = op.kernel
        return DataCube(type=MEM_MC, address=self.task.address(self.wmem), offset=off,
                        size=size, width=s, height=r, channel=c, line_stride=0, surf_stride=0,
                        plane_stride=0)

    def _const_cube(self, name: str, data: bytes, channels: int, layout=None) -> DataCube:
        self.o_cursor = align_up(self.o_cursor, OPERAND_ALIGN)
        off = self.o_cursor
        self.operand_blobs.append((name, data, off))
        self.o_cursor += len(data)
        lay = layout
        return DataCube(type=MEM_MC, address=self.task.address(self.omem), offset=off,
                        size=len(data), width=lay.width if lay else 1,
                        height=lay.height if lay else 1, channel=channels,
                        line_stride=lay.line_stride if lay else 0,
                        surf_stride=lay.surf_stride if lay else 0, plane_stride=0)

    # -------------------------------------------------------------- SDP
    def _stage(self, st: XStage | None, name: str, channels: int, h: int, w: int,
               operands: dict[int, Region]) -> tuple[SdpStageDesc, DataCube]:
        if st is None:
            return _disabled_stage(), _no_cube()
        mem = st.memory_operands
        mode = mem[0].mode if mem else "layer"
        alu, mul = st.alu, st.mul
        kind = {(True, True): SDP_OP_BOTH, (True, False): SDP_OP_ADD,
                (False, True): SDP_OP_MUL, (False, False): SDP_OP_NONE}[(alu is not None,
                                                                        mul is not None)]
        act = ACTIVATION_PRELU if st.prelu else ACTIVATION_RELU if st.relu else ACTIVATION_NONE
        if st.prelu and st.relu:
            raise ValueError(f"{name}: a stage is either PReLU or ReLU")
        precision, cube = PRECISION_INT16, _no_cube()
        if mem and mem[0].source is not None:
            precision = PRECISION_INT8
            cube = self.cube(operands[mem[0].source])
        elif mem:
            cube = self._pack_const(name, mem, channels, h, w)
        desc = SdpStageDesc(
            enable=1, alu_type=ALU_OPS.index(st.alu_op) if st.alu_op else 0, type=kind,
            mode=MODES.index(mode), act=act, shift_value=st.alu_shift, truncate=st.truncate,
            precision=precision,
            alu_operand=alu.value if alu is not None and alu.mode == "layer" else 0,
            mul_operand=mul.value if mul is not None and mul.mode == "layer" else 0,
            cvt=SdpCvt(alu_cvt=_cvt(enable=0), mul_cvt=_cvt(enable=0)))
        return desc, cube

    def _pack_const(self, name: str, mem: list[Operand], channels: int, h: int,
                    w: int) -> DataCube:
        cfg = self.cfg
        if mem[0].mode == "kernel":
            cpad = align_up(channels, cfg.atom_size)
            vals = []
            for o in mem:
                v = np.zeros(cpad, dtype=np.int64)
                v[:channels] = np.asarray(o.const).reshape(-1)[:channels]
                vals.append(v)
            data = pack_sdp_operand(vals[0], cfg, elem_bytes=2,
                                    second=vals[1] if len(vals) == 2 else None)
            return self._const_cube(name, data.tobytes(), channels)
        if len(mem) != 1:
            raise ValueError(f"{name}: two per-element constants in one stage")
        layout = cube_layout(cfg, channels, h, w, elem_bytes=2)
        data = pack_feature(np.asarray(mem[0].const), layout)
        return self._const_cube(name, data.tobytes(), channels, layout)

    def sdp(self, name: str, program: SdpProgram, src: DataCube, dst: Region,
            operands: dict[int, Region]) -> tuple[SdpOpDesc, object]:
        c, h, w = dst.shape
        x1, x1_cube = self._stage(program.x1, f"sdp-x1-{name}", c, h, w, operands)
        x2, x2_cube = self._stage(program.x2, f"sdp-x2-{name}", c, h, w, operands)
        cvt = program.cvt
        lut_index, y = -1, _disabled_stage()
        if program.lut is not None:   # the Y stage: ALU and MUL bypassed, then the LUT
            lut_index = self.lut_index(program.lut)
            y = SdpStageDesc(enable=1, alu_type=0, type=SDP_OP_NONE, mode=0,
                             act=ACTIVATION_LUT, shift_value=0, truncate=0,
                             precision=PRECISION_INT16, alu_operand=0, mul_operand=0,
                             cvt=SdpCvt(alu_cvt=_cvt(enable=0), mul_cvt=_cvt(enable=0)))
        desc = SdpOpDesc(src_precision=PRECISION_INT8, dst_precision=PRECISION_INT8,
                         lut_index=lut_index,
                         out_cvt=_cvt(scale=cvt.scale, truncate=cvt.shift, offset=cvt.offset),
                         conv_mode=CONV_MODE_DIRECT, batch_num=1, reserved0=0, batch_stride=0,
                         x1_op=x1, x2_op=x2, y_op=y)
        surf = SdpSurfaceDesc(src_data=src, x1_data=x1_cube, x2_data=x2_cube,
                              y_data=_no_cube(), dst_data=self.cube(dst))
        return desc, surf

    # -------------------------------------------------------------- engines
    def conv(self, op: ConvOp) -> list[tuple[int, object, object]]:
        k, c, r, s = op.kernel
        oh, ow = op.out_hw
        src = op.src.layout
        top, left, bottom, right = op.pads
        cb = op.cbuf
        conv_desc = ConvOpDesc(
            conv_mode=CONV_MODE_DIRECT, data_reuse=0, weight_reuse=int(cb.weight_reuse),
            skip_data_rls=0, skip_weight_rls=int(cb.skip_weight_release), reserved0=0,
            entry_per_slice=cb.entries_per_slice, data_format=FORMAT_FEATURE, pixel_mapping=0,
            fetch_grain=1, reserved_b=[0] * 8, batch=1, weight_format=0,
            data_bank=cb.data_banks, weight_bank=cb.weight_banks, batch_stride=0,
            post_extension=0, pixel_override=0, release=src.height,
            input_width_csc=src.width, input_height_csc=src.height, input_channel_csc=c,
            kernel_width_csc=s, kernel_height_csc=r, kernel_channel_csc=c,
            input_width_cmac=ow, input_height_cmac=oh, bytes_per_kernel=c * r * s,
            mean_ry=0, mean_gu=0, mean_bv=0, mean_ax=0, mean_format=0,
            conv_stride_x=op.stride[1], conv_stride_y=op.stride[0],
            pad_x_left=left, pad_x_right=right, pad_y_top=top, pad_y_bottom=bottom,
            dilation_x=op.dilation[1], dilation_y=op.dilation[0], reserved2=[0, 0],
            pra_truncate=0, in_precision=PRECISION_INT8, out_precision=PRECISION_INT8,
            pad_val=op.pad_value, in_cvt=_cvt(enable=0),
            out_cvt=_cvt(scale=1, truncate=op.clip_truncate, offset=0, enable=1))
        stream = DataCube(type=MEM_HW, address=-1, offset=0, size=0, width=ow, height=oh,
                          channel=k, line_stride=0, surf_stride=0, plane_stride=0)
        conv_surf = ConvSurfaceDesc(weight_data=self._weights(op), wmb_data=_no_cube(),
                                    wgs_data=_no_cube(), src_data=self.cube(op.src),
                                    dst_data=stream, offset_u=0, in_line_uv_stride=0)
        sdp_desc, sdp_surf = self.sdp(op.name, op.sdp, stream, op.dst, op.operands)
        return [(OP_CONV, conv_desc, conv_surf), (OP_SDP, sdp_desc, sdp_surf)]

    def standalone_sdp(self, op: SdpOp) -> list[tuple[int, object, object]]:
        desc, surf = self.sdp(op.name, op.program, self.cube(op.src), op.dst, op.operands)
        return [(OP_SDP, desc, surf)]

    def pdp(self, op: PdpOp) -> list[tuple[int, object, object]]:
        kh, kw = op.kernel
        top, left, bottom, right = op.pads
        sp = op.split
        in_w = sp.in_widths if sp else (0, 0, 0)
        out_w = sp.out_widths if sp else (0, 0, 0)
        desc = PdpOpDesc(
            partial_in_width_first=in_w[0], partial_in_width_mid=in_w[1],
            partial_in_width_last=in_w[2], partial_width_first=out_w[0],
            partial_width_mid=out_w[1], partial_width_last=out_w[2],
            split_num=sp.n if sp else 1, pool_mode=POOL_MODES[op.method], pool_width=kw - 1,
            pool_height=kh - 1, stride_x=op.stride[1], stride_y=op.stride[0], pad_left=left,
            pad_right=right, pad_top=top, pad_bottom=bottom, precision=PRECISION_INT8,
            reserved0=0, padding_value=[(i + 1) * op.pad_value for i in range(PDP_PAD_VAL_NUM)])
        surf = PdpSurfaceDesc(src_data=self.cube(op.src), dst_data=self.cube(op.dst))
        return [(OP_PDP, desc, surf)]

    def cdp(self, op: CdpOp) -> list[tuple[int, object, object]]:
        (io, isc, ish), (oo, osc, osh) = op.in_cvt, op.out_cvt
        desc = CdpOpDesc(in_precision=PRECISION_INT8, out_precision=PRECISION_INT8,
                         lut_index=self.lut_index(op.lut),
                         in_cvt=_cvt(scale=isc, truncate=ish, offset=io),
                         out_cvt=_cvt(scale=osc, truncate=osh, offset=oo),
                         local_size=op.local_size, bypass_sqsum=int(op.sqsum_bypass),
                         bypass_out_mul=int(op.mul_bypass), reserved0=0)
        surf = CdpSurfaceDesc(src_data=self.cube(op.src), dst_data=self.cube(op.dst))
        return [(OP_CDP, desc, surf)]

    def lower(self, op: EngineOp) -> list[tuple[int, object, object]]:
        if isinstance(op, CdpOp):
            return self.cdp(op)
        if isinstance(op, ConvOp):
            return self.conv(op)
        if isinstance(op, SdpOp):
            return self.standalone_sdp(op)
        if isinstance(op, PdpOp):
            return self.pdp(op)
        raise ValueError(f"operation {op.name!r}: {type(op).__name__} is not emitted yet")


def dependencies(units: list[list[int]], types: list[int]) -> list[CommonOpDesc]:
    """Dependency graph of firmware ops grouped in units run one after another.

    ``units[j]`` lists the firmware op indices of engine operation ``j``
    (``[conv, sdp]`` for a pair), ``types[i]`` the engine of firmware op ``i``.
    """
    n = len(types)
    none = Consumer(index=-1, event=0, res=0)
    consumers = [[none] * OP_NUM for _ in range(n)]
    fused = [none] * n
    deps = [0] * n

    def link(src: int, dst: int, event: int) -> None:
        slot = types[dst]
        cur = consumers[src][slot]
        if cur.index == dst:
            return
        if cur.index >= 0:
            raise AssertionError(f"op {src}: consumer slot {slot} holds {cur.index}, not {dst}")
        consumers[src][slot] = Consumer(index=dst, event=event, res=0)
        deps[dst] += 1

    # engine chains: the next op of the same engine, once this one completed
    last: dict[int, int] = {}
    for i in range(n):
        if types[i] in last:
            link(last[types[i]], i, EVENT_OP_COMPLETED)
        last[types[i]] = i
    for j, unit in enumerate(units):
        if len(unit) == 2:      # conv -> SDP pipeline
            conv, sdp = unit
            link(conv, sdp, EVENT_OP_PROGRAMMED)
            fused[sdp] = Consumer(index=conv, event=EVENT_OP_ENABLED, res=0)
            deps[conv] += 1
        if j:
            link(units[j - 1][-1], unit[0], EVENT_OP_COMPLETED)
    return [CommonOpDesc(index=i, roi_index=0, op_type=types[i], dependency_count=deps[i],
                         consumers=consumers[i], fused_parent=fused[i]) for i in range(n)]


def _tensor_desc(name: str, region: Region, tid: int, mem_id: int,
                 cfg: HwConfig) -> TensorDescListEntry:
    lay = region.layout
    strides = [0] * 8
    strides[0], strides[1], strides[2] = 1, lay.line_stride, lay.surf_stride
    pixel = PixelFormat.FEATURE_X8 if cfg.atom_size == 8 else PixelFormat.FEATURE
    return TensorDescListEntry(
        name=name, id=tid, mem_id=mem_id, size=lay.size, offset=region.offset,
        data_format=DataFormat.NCHW, data_type=DataType.INT8,
        data_category=DataCategory.FEATURE, pixel_format=pixel, n=1, c=lay.channels,
        h=lay.height, w=lay.width, strides=strides)


def emit(cfg: HwConfig, ops: list[EngineOp], buffers: dict, arena: dict[str, int],
         arena_size: int, inputs: dict[str, Region], outputs: dict[str, Region]) -> Emitted:
    """Lay out ``ops`` as a one-task DLA1 loadable.

    ``buffers`` maps every buffer name to its ``Buffer`` (kind input / output /
    internal), ``arena`` the internal ones to their arena offsets, ``inputs``
    and ``outputs`` the bound tensors to their regions (roots of their buffers).
    """
    if not ops:
        raise ValueError("no operations to emit")
    task = _Task()
    desc_mems = [task.memory(0, MemoryFlags.ALLOC | MemoryFlags.SET) for _ in range(4)]
    for mem_id in desc_mems:
        task.address(mem_id)
    wmem = task.memory(0, MemoryFlags.ALLOC | MemoryFlags.SET, WEIGHT_ALIGN)
    omem = task.memory(0, MemoryFlags.ALLOC | MemoryFlags.SET, PAGE)
    amem = task.memory(arena_size, MemoryFlags.ALLOC, PAGE)
    placed: dict[str, Placed] = {name: Placed(amem, off) for name, off in arena.items()}
    for flag, group in ((MemoryFlags.INPUT, inputs), (MemoryFlags.OUTPUT, outputs)):
        for bind, (name, region) in enumerate(group.items()):
            mem_id = task.memory(buffers[region.buffer].size, MemoryFlags.ALLOC | flag)
            task.memories[mem_id].bind_id = bind
            tid = len(task.tensors)
            task.tensors.append(_tensor_desc(name, region, tid, mem_id, cfg))
            task.memories[mem_id].tensor_desc_id = tid
            placed[region.buffer] = Placed(mem_id, 0)

    em = _Emitter(cfg, placed, task, wmem, omem)
    types: list[int] = []
    units: list[list[int]] = []
    op_list, surf_list = bytearray(), bytearray()
    for op in ops:
        unit = []
        for engine, desc, surf in em.lower(op):
            unit.append(len(types))
            types.append(engine)
            op_list += pack_op_container(desc)
            surf_list += pack_surface_container(surf)
        units.append(unit)
    for mem_id, blobs in ((wmem, em.weight_blobs), (omem, em.operand_blobs)):
        for name, data, off in blobs:
            task.fill(mem_id, name, data, off)
    task.memories[wmem].size = align_up(max(em.w_cursor, 1), PAGE)
    task.memories[omem].size = align_up(max(em.o_cursor, 1), PAGE)
    lut_index = -1
    if em.luts:
        lut_mem = task.memory(0, MemoryFlags.ALLOC | MemoryFlags.SET)
        lut_index = task.address(lut_mem)
        desc_mems.append(lut_mem)

    head = [-1] * OP_NUM
    for i, t in reversed(list(enumerate(types))):
        head[t] = i
    net = NetworkDesc(operation_desc_index=2, surface_desc_index=3, dependency_graph_index=1,
                      lut_data_index=lut_index, roi_array_index=-1, surface_index=-1,
                      stat_list_index=-1, reserved1=-1, op_head=head, num_rois=1,
                      num_operations=len(types), num_luts=len(em.luts),
                      num_addresses=len(task.task_addresses), input_layer=0, dynamic_roi=0,
                      reserved0=0)
    dep = b"".join(d.pack() for d in dependencies(units, types))
    contents = [(net.pack(), BlobSubInterface.NETWORK_DESC, "addr0"),
                (dep, BlobSubInterface.DEP_GRAPH, "dep_graph"),
                (bytes(op_list), BlobSubInterface.OP_LIST, "op_list"),
                (bytes(surf_list), BlobSubInterface.SURF_LIST, "surf_list")]
    if em.luts:
        contents.append((b"".join(em.luts), BlobSubInterface.LUT_LIST, "lut_list"))
    for mem_id, (data, sub, suffix) in zip(desc_mems, contents, strict=True):
        name = f"task-0-{suffix}"
        task.blobs.append(Blob(name=name, data=data, interface=Interface.DLA1, sub_interface=sub,
                               version=INTERFACE_V12))
        mem = task.memories[mem_id]
        mem.size, mem.contents, mem.offsets = align_up(len(data), PAGE), [name], [0]
    for a in task.addresses:
        a.size = task.memories[a.mem_id].size
    tl = TaskListEntry(id=0, interface=Interface.DLA1, instance=-1,
                       address_list=list(task.task_addresses), pre_actions=[], post_actions=[0])
    loadable = Loadable(task_list=[tl], memory_list=task.memories, address_list=task.addresses,
                        event_list=[EventListEntry(id=0, type=0, target=0, val=1,
                                                   op=EventOp.SIGNAL)],
                        blobs=task.blobs, tensor_desc_list=task.tensors,
                        submit_list=[SubmitListEntry(id=0, task_id=[0])])
    return Emitted(loadable, placed, [tuple(u) for u in units], em.w_cursor, em.o_cursor,
                   arena_size)
