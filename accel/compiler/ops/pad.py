"""Pad on channels, rows and columns: the input nested in a filled output.

The input is written straight into its place in the output buffer (nested,
as a concat slot; copied when it cannot be), and SDP operations fill the
border with the constant: an X1 multiplier of 0 wipes whatever memory held,
an X2 ALU sum adds the quantized constant.  BlazeFace / MediaPipe residuals
pad channels this way (16 -> 32).

The DMAs write whole atoms, so a fill may not share an atom with the input's
lanes.  When the channel pads do not fall on atoms (24 -> 48 on nv_large's
32-channel atoms), the atoms the input's channels share with the fill are
written by a 1x1 convolution with 0/1 weights that puts the input's lanes in
place and adds the constant on the others
(:func:`accel.compiler.ops.concat.move_channels`); the input's whole atoms
before them are copied, and only the atoms holding no input are filled.

Reflect and edge padding (CycleGAN's and many super-resolution networks'
``ReflectionPad2d``) pad rows and columns only: each border row is an SDP copy of the
row it mirrors (reflect: ``hb - r`` rows into the input for output row ``r`` above it;
edge: the first), over the input's columns; then each border column a copy of the
column it mirrors, over every row, so that the corners mirror both ways as ONNX's
(and numpy's) padding does. The codes are copied unchanged (the scales are tied).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accel.compiler.engine import SdpOp
from accel.compiler.ops.base import OpEntry, check_activation, constant, out_shape
from accel.compiler.ops.concat import move_channels
from accel.compiler.program import IDENTITY, Operand, SdpProgram, XStage
from accel.compiler.quantize import round_half_away
from accel.compiler.scales import zero_point_of
from accel.compiler.tiling import ConvGeom, plan_conv
from accel.config import HwConfig
from accel.ir import Graph, Node

MODES = ("constant", "reflect", "edge")


@dataclass(frozen=True, eq=False)
class PadPlan:
    begin: tuple[int, int, int]       # channels, rows, columns before the input
    in_cube: tuple[int, int, int]
    out_shape: tuple[int, ...]
    value: float
    fill: int = 0                     # the quantized constant
    mode: str = "constant"            # or "reflect", "edge": rows and columns mirrored


def _pads(node: Node, graph: Graph) -> tuple[list[int], float] | str:
    a = node.attrs
    if a.get("mode", "constant") not in MODES:
        return f"mode {a.get('mode')!r}: only {', '.join(MODES)} padding"
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
    mode = node.attrs.get("mode", "constant")
    if mode != "constant":
        if pads[1] or pads[5]:
            return f"{mode} padding of channels: only of rows and columns"
        h, w = shape[2:]
        if mode == "reflect" and (max(pads[2], pads[6]) >= h or max(pads[3], pads[7]) >= w):
            return (f"reflect pads {pads} of a {h}x{w} map: each at most its axis less one "
                    f"(a mirror does not repeat the edge)")
    moved = _moved(pads[1], shape[1], pads[1] + shape[1] + pads[5], cfg.atom_size)
    if moved:
        first, o0, o1 = moved
        why = plan_conv(ConvGeom(shape[1] - first, shape[2], shape[3], o1 - o0, 1, 1), cfg)
        if isinstance(why, str):
            return (f"channel pads {pads[1]}/{pads[5]} around {shape[1]} channels off "
                    f"{cfg.atom_size}-channel atoms: moving the channels {why}")
    return None


def _moved(cb: int, c: int, big_c: int, atom: int) -> tuple[int, int, int] | None:
    """Where the input's channels share atoms with the fill: ``(first, o0, o1)``,
    input channels ``first..`` moved onto output surfaces ``[o0, o1)`` (the input's
    whole atoms before ``first`` are copied); None when the input's channels start
    on an atom and end on one or at the end of the output."""
    end = cb + c
    if cb % atom == 0 and (end % atom == 0 or end == big_c):
        return None
    first = (c // atom) * atom if cb % atom == 0 else 0
    o0 = cb + first - (cb + first) % atom
    return first, o0, min(big_c, -(-end // atom) * atom)


def plan(node: Node, graph: Graph, cfg: HwConfig, scales) -> PadPlan:
    pads, value = _pads(node, graph)
    shape = tuple(graph.tensors[node.inputs[0]].shape)
    y = node.outputs[0]
    # the constant's code: the output's zero point (the input's: tied) for a zero pad
    fill = int(np.clip(round_half_away(value / scales.scale(y)) + zero_point_of(scales, y),
                       -128, 127))
    return PadPlan((pads[1], pads[2], pads[3]), tuple(shape[1:]),
                   out_shape(graph, node.outputs[0]), value, fill,
                   node.attrs.get("mode", "constant"))


def _slot(region, p: PadPlan):
    (cb, hb, wb), (c, h, w) = p.begin, p.in_cube
    return region.channels(cb, c).rows(hb, h).cols(wb, w)


def nest(lo, node: Node, p: PadPlan) -> None:
    if _moved(p.begin[0], p.in_cube[0], p.out_shape[1], lo.cfg.atom_size) is None:
        lo.placement.nest(node.inputs[0], node.outputs[0], lambda r: _slot(r, p))


def lower(lo, node: Node, p: PadPlan) -> None:
    out = lo.region(node.outputs[0])
    src = lo.region(node.inputs[0])
    (cb, hb, wb), (c, h, w) = p.begin, p.in_cube
    big_c, big_h, big_w = out.shape
    moved = _moved(cb, c, big_c, lo.cfg.atom_size)
    if moved is None:
        slot = _slot(out, p)
        if src != slot:
            lo.copy(node, src, slot)
        c0, c1 = cb, cb + c            # the output channels the input's lanes fill
    else:
        first, o0, o1 = moved
        if first:
            lo.copy(node, src.channels(0, first),
                    out.channels(cb, first).rows(hb, h).cols(wb, w))
        move_channels(lo, node, "move", src.channels(first, c - first),
                      out.channels(o0, o1 - o0).rows(hb, h).cols(wb, w), cb + first - o0, 0,
                      c - first, p.fill)
        c0, c1 = min(cb, o0), o1
    if p.mode != "constant":
        _mirror(lo, node, p, out)
        return
    fills = []
    if c0:
        fills.append(out.channels(0, c0))
    if c1 < big_c:
        fills.append(out.channels(c1, big_c - c1))
    band = out.channels(c0, c1 - c0)
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


def mirrored(r: int, begin: int, n: int, mode: str) -> int:
    """The input row (or column) border row ``r`` of the output copies: ``begin`` rows
    pad the ``n`` input rows before; ``r`` lies before them or after."""
    if mode == "edge":
        return 0 if r < begin else n - 1
    return begin - r if r < begin else 2 * (n - 1) - (r - begin)


def _mirror(lo, node: Node, p: PadPlan, out) -> None:
    """The border rows over the input's columns, then the border columns over every row,
    each a copy of the row or column it mirrors (already in the output)."""
    (_, hb, wb), (_, h, w) = p.begin, p.in_cube
    _, _, big_h, big_w = p.out_shape
    band = out.cols(wb, w)
    for r in [*range(hb), *range(hb + h, big_h)]:
        src = hb + mirrored(r, hb, h, p.mode)
        lo.emit(SdpOp(lo.label(node, f"row{r}"), node.name, band.rows(src, 1), band.rows(r, 1),
                      IDENTITY))
    for col in [*range(wb), *range(wb + w, big_w)]:
        src = wb + mirrored(col, wb, w, p.mode)
        lo.emit(SdpOp(lo.label(node, f"col{col}"), node.name, out.cols(src, 1),
                      out.cols(col, 1), IDENTITY))


def reference(p: PadPlan, inputs: list[np.ndarray]) -> list[np.ndarray]:
    (cb, hb, wb), (c, h, w) = p.begin, p.in_cube
    _, big_c, big_h, big_w = p.out_shape
    if p.mode != "constant":
        x = np.asarray(inputs[0]).reshape(1, c, h, w)
        pads = ((0, 0), (0, 0), (hb, big_h - h - hb), (wb, big_w - w - wb))
        return [np.pad(x, pads, mode=p.mode).astype(np.int8)]
    y = np.full(p.out_shape, p.fill, dtype=np.int8)
    y[:, cb:cb + c, hb:hb + h, wb:wb + w] = np.asarray(inputs[0]).reshape(1, c, h, w)
    return [y]


def ties(node: Node, graph: Graph) -> list[list[str]]:
    return [[node.inputs[0], node.outputs[0]]]


ENTRY = OpEntry(("Pad",), check, plan, lower, reference, ties=ties, nest=nest)
