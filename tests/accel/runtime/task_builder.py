"""Hand-built DLA1 tasks written straight into a backend's DRAM, for firmware tests.

Address list: 0 network desc, 1 op list, 2 surface list, 3 dependency graph,
4 LUT list, then one entry per data region (``DATA0`` + i).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from accel.loadable.containers import pack_op_container, pack_surface_container
from accel.loadable.cstruct import CStruct
from accel.loadable.descriptors import OP_NUM, CommonOpDesc, Consumer, DataCube, NetworkDesc
from accel.loadable.descriptors_aux import FloatData, LutParam

BASE = 0x4000_0000
PAGE = 4096
LUT_LIST = 4
DATA0 = 5


@dataclass
class TaskOp:
    op_type: int
    desc: CStruct
    surf: CStruct
    deps: int = 0
    consumers: dict[int, tuple[int, int]] = field(default_factory=dict)  # engine -> (op, event)
    fused_parent: tuple[int, int] | None = None


def cube(index: int, c: int, h: int, w: int, atom: int = 8, mem_type: int = 0) -> DataCube:
    """A packed feature cube in data region ``index`` (-1 and ``mem_type`` 2: on the fly)."""
    line = w * atom
    surf = line * h
    return DataCube(type=mem_type, address=-1 if mem_type == 2 else DATA0 + index,
                    size=surf * -(-c // atom), width=w, height=h, channel=c,
                    line_stride=line, surf_stride=surf)


def write_task(backend, ops: list[TaskOp], regions: list[bytes | int],
               luts: list[LutParam] = ()) -> list[int]:
    """Write descriptors and data regions; return the task's absolute address list."""
    n = len(ops)
    heads = [-1] * OP_NUM
    for i, op in enumerate(ops):
        if heads[op.op_type] < 0:
            heads[op.op_type] = i
    net = NetworkDesc(operation_desc_index=1, surface_desc_index=2, dependency_graph_index=3,
                      lut_data_index=LUT_LIST if luts else -1, roi_array_index=-1,
                      surface_index=-1, stat_list_index=-1, reserved1=-1, op_head=heads,
                      num_rois=1, num_operations=n, num_luts=len(luts),
                      num_addresses=DATA0 + len(regions), input_layer=0)
    dep = b""
    for i, op in enumerate(ops):
        cons = [Consumer(index=-1, event=0) for _ in range(OP_NUM)]
        for engine, (idx, event) in op.consumers.items():
            cons[engine] = Consumer(index=idx, event=event)
        fp = Consumer(index=-1, event=0) if op.fused_parent is None else Consumer(
            index=op.fused_parent[0], event=op.fused_parent[1])
        dep += CommonOpDesc(index=i, roi_index=0, op_type=op.op_type,
                            dependency_count=op.deps, consumers=cons, fused_parent=fp).pack()
    blobs: list[bytes | int] = [
        net.pack(), b"".join(pack_op_container(op.desc) for op in ops),
        b"".join(pack_surface_container(op.surf) for op in ops), dep,
        b"".join(lut.pack() for lut in luts) or 4, *regions]
    addresses = []
    for i, blob in enumerate(blobs):
        addr = BASE + i * (1 << 20)
        size = blob if isinstance(blob, int) else len(blob)
        backend.map_memory(addr, -(-max(size, 1) // PAGE) * PAGE, f"r{i}")
        if not isinstance(blob, int):
            backend.write_mem(addr, np.frombuffer(blob, np.uint8))
        addresses.append(addr)
    return addresses


def hand_lo_lut(step: int = 10) -> LutParam:
    """LO T[i] = step * i from 0, index select 2 (4 inputs per entry), end 1024; under
    slope 3 / 2**1, over 5 / 2**2; the LE table is never chosen (start at the int32
    maximum, every priority LO)."""
    flat = FloatData(scale=0, shifter=0)
    return LutParam(linear_exp_table=[0] * 65, linear_only_table=[step * i for i in range(257)],
                    linear_exp_offset=0, linear_only_offset=2, linear_exp_start=2**31 - 1,
                    linear_exp_end=2**31 - 1, linear_only_start=0, linear_only_end=1024,
                    linear_exp_underflow_slope=flat, linear_exp_overflow_slope=flat,
                    linear_only_underflow_slope=FloatData(scale=3, shifter=1),
                    linear_only_overflow_slope=FloatData(scale=5, shifter=2),
                    hybrid_priority=1, underflow_priority=1, overflow_priority=1, method=1)
