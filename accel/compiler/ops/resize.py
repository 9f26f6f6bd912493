"""Resize / Upsample, nearest neighbour with integer factors, by strided SDP copies.

nv_small has no Rubik, but every DMA writes a cube at any line stride.  An
output row is made ``fy`` times by ``fy`` copies whose line stride skips the
other rows (``out.strided(dy * line, fy * line)``).  Doubling pixels inside a
line needs a stride between pixels, which a cube does not have - unless the
cube is seen as one column of ``H * W`` pixels (width 1, one line per pixel,
:meth:`accel.compiler.tensors.Region.column`): then the line stride is the
pixel stride, and ``fx`` copies with stride ``fx`` atoms interleave the
pixels of every line at once (the rows of a packed ``H x fx*W`` cube follow
each other, so pixel ``p`` of the column lands at ``fx * p + dx``).  Width
first into a temporary (or straight into the output when rows are not
repeated), then rows: ``fx + fy`` SDP operations, exact copies (the scale is
tied).  Columns taller than a cube dimension (8192) are cut in pieces.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accel.compiler.engine import SdpOp
from accel.compiler.ops.base import OpEntry, check_activation
from accel.compiler.program import IDENTITY
from accel.config import HwConfig
from tengine_host.ir import Graph, Node

MAX_DIM = 8192
# (coordinate transformation, nearest rounding) pairs that repeat pixels exactly for any
# integer factor f: source x = i / f floored, or (i + 0.5) / f - 0.5 rounded, both give i // f
EXACT = {("asymmetric", "floor"), ("asymmetric", "simple"),
         ("half_pixel", "round_prefer_floor"), ("half_pixel", "round_prefer_ceil"),
         ("pytorch_half_pixel", "round_prefer_floor"),
         ("pytorch_half_pixel", "round_prefer_ceil")}
# asymmetric + round_prefer_floor repeats pixels only for factor 2 (i / 2 = j + 0.5 -> j)


@dataclass(frozen=True)
class ResizePlan:
    fy: int
    fx: int
    in_cube: tuple[int, int, int]
    out_shape: tuple[int, ...]


def check(node: Node, graph: Graph, cfg: HwConfig) -> str | None:
    x = node.inputs[0]
    why = check_activation(graph, x)
    if why:
        return why
    a = node.attrs
    if a.get("mode", "nearest") != "nearest":
        return f"mode {a.get('mode')!r}: only nearest"
    src = tuple(graph.tensors[x].shape)
    out = tuple(graph.tensors[node.outputs[0]].shape)
    if len(src) != 4 or src[:2] != out[:2]:
        return f"resizes {src} to {out}: only the two spatial axes"
    if out[2] % src[2] or out[3] % src[3]:
        return f"factors {out[2] / src[2]:g} x {out[3] / src[3]:g} are not integers"
    fy, fx = out[2] // src[2], out[3] // src[3]
    key = (a.get("coordinate_transformation_mode", "asymmetric"),
           a.get("nearest_mode", "simple"))
    if a.get("antialias"):
        return "antialias"
    if key not in EXACT and not (key == ("asymmetric", "round_prefer_floor")
                                 and fy in (1, 2) and fx in (1, 2)):
        return (f"coordinate mode {key[0]!r} with nearest mode {key[1]!r} does not repeat "
                f"pixels for factors {fy}x{fx}")
    return None


def plan(node: Node, graph: Graph, cfg: HwConfig, scales) -> ResizePlan:
    src = tuple(graph.tensors[node.inputs[0]].shape)
    out = tuple(graph.tensors[node.outputs[0]].shape)
    return ResizePlan(out[2] // src[2], out[3] // src[3], tuple(src[1:]), out)


def _column_copies(lo, node: Node, src, dst_cube, fx: int, tag: str) -> None:
    """Copy every pixel of ``src`` to ``fx`` neighbouring pixels of ``dst_cube``'s lines."""
    col = src.column()
    dcol = dst_cube.column()
    a = dst_cube.layout.atom_bytes
    n = col.layout.height
    for dx in range(fx):
        for p0 in range(0, n, MAX_DIM):
            rows = min(MAX_DIM, n - p0)
            dst = dcol.strided(dx * a + p0 * fx * a, line_stride=fx * a, height=rows)
            lo.emit(SdpOp(lo.label(node, f"{tag}x{dx}"), node.name, col.rows(p0, rows), dst,
                          IDENTITY))


def lower(lo, node: Node, p: ResizePlan) -> None:
    src, out = lo.region(node.inputs[0]), lo.region(node.outputs[0])
    c, h, w = p.in_cube
    if not src.packed_lines:          # a column view needs packed lines
        packed = lo.temp(lo.label(node, "in"), c, h, w)
        lo.copy(node, src, packed)
        src = packed
    wide = src
    if p.fx > 1:
        direct = p.fy == 1 and out.packed_lines
        wide = out if direct else lo.temp(lo.label(node, "wide"), c, h, w * p.fx)
        _column_copies(lo, node, src, wide, p.fx, "w")
    if p.fy > 1 or wide is not out:
        line = out.layout.line_stride
        for dy in range(p.fy):
            dst = out.strided(dy * line, line_stride=p.fy * line, height=h)
            lo.emit(SdpOp(lo.label(node, f"y{dy}"), node.name, wide, dst, IDENTITY))


def reference(p: ResizePlan, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = np.asarray(inputs[0])
    return [np.repeat(np.repeat(x, p.fy, axis=2), p.fx, axis=3).reshape(p.out_shape)]


def ties(node: Node, graph: Graph) -> list[list[str]]:
    return [[node.inputs[0], node.outputs[0]]]


ENTRY = OpEntry(("Resize", "Upsample"), check, plan, lower, reference, ties=ties)
