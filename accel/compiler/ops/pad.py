"""Constant Pad on channels, rows and columns: the input nested in a filled output.

The input is written straight into its place in the output buffer (nested,
as a concat slot; copied when it cannot be), and SDP operations fill the
border with the constant: an X1 multiplier of 0 wipes whatever memory held,
an X2 ALU sum adds the quantized constant.  BlazeFace / MediaPipe residuals
pad channels this way (16 -> 32).  Channel pads must start and end on atoms,
so a fill never touches the input's lanes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accel.compiler.engine import SdpOp
from accel.compiler.ops.base import OpEntry, check_activation, constant, out_shape
from accel.compiler.program import Operand, SdpProgram, XStage
from accel.compiler.quantize import round_half_away
from accel.compiler.scales import zero_point_of
from accel.config import HwConfig
from accel.ir import Graph, Node


@dataclass(frozen=True, eq=False)
class PadPlan:
    begin: tuple[int, int, int]       # channels, rows, columns before the input
    in_cube: tuple[int, int, int]
    out_shape: tuple[int, ...]
    value: float
    fill: int = 0                     # the quantized constant


def _pads(node: Node, graph: Graph) -> tuple[list[int], float] | str:
    a = node.attrs
    if a.get("mode", "constant") != "constant":
        return f"mode {a.get('mode')!r}: only constant padding"
    pads = constant(graph, node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] \
        else a.get("pads")
    if pads is None:
        return "pads are not constant"
    if len(node.inputs) > 3 and node.inputs[3]:
        return "axes input is not supported"
    value = 0.0
    if len(node.inputs) > 2 and node.inputs[2]:
        v = constant(graph, node.inputs[2])
        if v is None:
            return "the pad value is not constant"
        value = float(np.asarray(v).reshape(-1)[0]) if np.asarray(v).size else 0.0
    else:
        value = float(a.get("value_attr", 0.0) or 0.0)
    return [int(p) for p in np.asarray(pads).reshape(-1)], value


def check(node: Node, graph: Graph, cfg: HwConfig) -> str | None:
    why = check_activation(graph, node.inputs[0])
    if why:
        return why
    shape = tuple(graph.tensors[node.inputs[0]].shape)
    if len(shape) != 4:
        return f"input rank {len(shape)}"
    r = _pads(node, graph)
    if isinstance(r, str):
        return r
    pads, _ = r
    if len(pads) != 8 or pads[0] or pads[4] or min(pads) < 0:
        return f"pads {pads}: only non-negative pads of channels, rows and columns"
    a = cfg.atom_size
    cb, ce = pads[1], pads[5]
    if cb % a or (ce and (cb + shape[1]) % a):
        return (f"channel pads {cb}/{ce} around {shape[1]} channels do not fall on whole "
                f"{a}-channel atoms")
    return None


def plan(node: Node, graph: Graph, cfg: HwConfig, scales) -> PadPlan:
    pads, value = _pads(node, graph)
    shape = tuple(graph.tensors[node.inputs[0]].shape)
    y = node.outputs[0]
    # the constant's code: the output's zero point (the input's: tied) for a zero pad
    fill = int(np.clip(round_half_away(value / scales.scale(y)) + zero_point_of(scales, y),
                       -128, 127))
    return PadPlan((pads[1], pads[2], pads[3]), tuple(shape[1:]),
                   out_shape(graph, node.outputs[0]), value, fill)


def _slot(region, p: PadPlan):
    (cb, hb, wb), (c, h, w) = p.begin, p.in_cube
    return region.channels(cb, c).rows(hb, h).cols(wb, w)


def nest(lo, node: Node, p: PadPlan) -> None:
    lo.placement.nest(node.inputs[0], node.outputs[0], lambda r: _slot(r, p))


def lower(lo, node: Node, p: PadPlan) -> None:
    out = lo.region(node.outputs[0])
    slot = _slot(out, p)
    src = lo.region(node.inputs[0])
    if src != slot:
        lo.copy(node, src, slot)
    (cb, hb, wb), (c, h, w) = p.begin, p.in_cube
    big_c, big_h, big_w = out.shape
    fills = []
    if cb:
        fills.append(out.channels(0, cb))
    if cb + c < big_c:
        fills.append(out.channels(cb + c, big_c - cb - c))
    band = out.channels(cb, c)
    if hb:
        fills.append(band.rows(0, hb))
    if hb + h < big_h:
        fills.append(band.rows(hb + h, big_h - hb - h))
    rows = band.rows(hb, h)
    if wb:
        fills.append(rows.cols(0, wb))
    if wb + w < big_w:
        fills.append(rows.cols(wb + w, big_w - wb - w))
    program = SdpProgram(XStage(mul=Operand.layer(0)),
                         XStage(alu_op="sum", alu=Operand.layer(p.fill)) if p.fill else None)
    for i, region in enumerate(fills):
        lo.emit(SdpOp(lo.label(node, f"fill{i}"), node.name, region, region, program,
                      reads_src=False))


def reference(p: PadPlan, inputs: list[np.ndarray]) -> list[np.ndarray]:
    (cb, hb, wb), (c, h, w) = p.begin, p.in_cube
    _, big_c, big_h, big_w = p.out_shape
    y = np.full(p.out_shape, p.fill, dtype=np.int8)
    y[:, cb:cb + c, hb:hb + h, wb:wb + w] = np.asarray(inputs[0]).reshape(1, c, h, w)
    return [y]


def ties(node: Node, graph: Graph) -> list[list[str]]:
    return [[node.inputs[0], node.outputs[0]]]


ENTRY = OpEntry(("Pad",), check, plan, lower, reference, ties=ties, nest=nest)
