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

A map of one pixel is repeated whatever the mode (every interpolation of one value is
that value): the ASPP's image-pooling branch, broadcast back over the feature map.

Bilinear 2x with ``half_pixel`` coordinates (the usual decoder upsampling) is
exact integer arithmetic too: output pixel ``(2i + dy, 2j + dx)`` is
``(9 * x[i, j] + 3 * x[i', j] + 3 * x[i, j'] + x[i', j']) / 16`` where ``i'``
is the neighbour row on the ``dy`` side (clamped at the border, i.e. the input
replicate-padded by one pixel), and likewise ``j'``.  So: replicate-pad into a
temporary (five SDP copies), four depthwise 2x2 convolutions with integer
weights ``{1, 3, 3, 9}`` (CACC sums exactly; the SDP divides by 16 with one
rounding, input and output scales being tied), and the interleaving copies
above.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accel.compiler.engine import SdpOp
from accel.compiler.ops import conv as conv_ops
from accel.compiler.ops.base import OpEntry, check_activation, out_shape
from accel.compiler.program import IDENTITY, SdpProgram, XStage
from accel.compiler.tiling import ConvGeom, plan_conv
from accel.config import HwConfig
from accel.golden import int8_ref
from accel.ir import Graph, Node

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
    bilinear: bool = False


# bilinear 2x taps: output parity d reads rows (i - 1, i) for d = 0 and (i, i + 1) for d = 1
_TAPS = {0: (1, 3), 1: (3, 1)}


def check(node: Node, graph: Graph, cfg: HwConfig) -> str | None:
    x = node.inputs[0]
    why = check_activation(graph, x)
    if why:
        return why
    a = node.attrs
    src = tuple(graph.tensors[x].shape)
    out = tuple(graph.tensors[node.outputs[0]].shape)
    if len(src) != 4 or src[:2] != out[:2]:
        return f"resizes {src} to {out}: only the two spatial axes"
    if out[2] % src[2] or out[3] % src[3]:
        return f"factors {out[2] / src[2]:g} x {out[3] / src[3]:g} are not integers"
    fy, fx = out[2] // src[2], out[3] // src[3]
    if a.get("antialias"):
        return "antialias"
    coord = a.get("coordinate_transformation_mode", "asymmetric")
    if src[2:] == (1, 1):
        return None         # one pixel, repeated whatever the mode and coordinates
    if a.get("mode", "nearest") == "linear":
        if (fy, fx) != (2, 2) or coord not in ("half_pixel", "pytorch_half_pixel"):
            return (f"linear mode with factors {fy}x{fx} and {coord!r} coordinates: only 2x "
                    f"with half_pixel")
        groups = conv_ops.choose_block(cfg, ConvGeom(src[1], src[2] + 1, src[3] + 1, src[1],
                                                     2, 2), src[1])
        return groups if isinstance(groups, str) else None
    if a.get("mode", "nearest") != "nearest":
        return f"mode {a.get('mode')!r}: only nearest, or linear 2x"
    key = (coord, a.get("nearest_mode", "simple"))
    if key not in EXACT and not (key == ("asymmetric", "round_prefer_floor")
                                 and fy in (1, 2) and fx in (1, 2)):
        return (f"coordinate mode {key[0]!r} with nearest mode {key[1]!r} does not repeat "
                f"pixels for factors {fy}x{fx}")
    return None


def plan(node: Node, graph: Graph, cfg: HwConfig, scales) -> ResizePlan:
    src = tuple(graph.tensors[node.inputs[0]].shape)
    out = out_shape(graph, node.outputs[0])
    return ResizePlan(out[2] // src[2], out[3] // src[3], tuple(src[1:]), out,
                      node.attrs.get("mode", "nearest") == "linear" and src[2:] != (1, 1))


_DIVIDE_BY_16 = SdpProgram(XStage(truncate=4))


def _bilinear_weights(c: int, dy: int, dx: int) -> np.ndarray:
    """Depthwise 2x2 integer weights ``[C, 1, 2, 2]`` of output parity (dy, dx)."""
    k = np.outer(_TAPS[dy], _TAPS[dx]).astype(np.int8)
    return np.broadcast_to(k, (c, 1, 2, 2)).copy()


def column_copies(lo, node: Node, src, dst_cube, fx: int, tag: str,
                   first: int | None = None) -> None:
    """Copy every pixel of ``src`` to ``fx`` neighbouring pixels of ``dst_cube``'s lines
    (only to pixel ``first`` of each group of ``fx`` when given)."""
    col = src.column()
    dcol = dst_cube.column()
    a = dst_cube.layout.atom_bytes
    n = col.layout.height
    for dx in (range(fx) if first is None else (first,)):
        for p0 in range(0, n, MAX_DIM):
            rows = min(MAX_DIM, n - p0)
            dst = dcol.strided(dx * a + p0 * fx * a, line_stride=fx * a, height=rows)
            lo.emit(SdpOp(lo.label(node, f"{tag}x{dx}"), node.name, col.rows(p0, rows), dst,
                          IDENTITY))


def _lower_bilinear(lo, node: Node, p: ResizePlan, src, out) -> None:
    c, h, w = p.in_cube
    pad = lo.temp(lo.label(node, "pad"), c, h + 2, w + 2)
    lo.copy(node, src, pad.rows(1, h).cols(1, w), "pad")
    lo.copy(node, src.cols(0, 1), pad.rows(1, h).cols(0, 1), "padl")
    lo.copy(node, src.cols(w - 1, 1), pad.rows(1, h).cols(w + 1, 1), "padr")
    lo.copy(node, pad.rows(1, 1), pad.rows(0, 1), "padt")
    lo.copy(node, pad.rows(h, 1), pad.rows(h + 1, 1), "padb")
    block = conv_ops.choose_block(lo.cfg, ConvGeom(c, h + 1, w + 1, c, 2, 2), c)
    line = out.layout.line_stride
    for dy in (0, 1):
        wide = lo.temp(lo.label(node, f"row{dy}"), c, h, 2 * w)
        for dx in (0, 1):
            tap = lo.temp(lo.label(node, f"tap{dy}{dx}"), c, h, w)
            window = pad.rows(dy, h + 1).cols(dx, w + 1)
            weights = _bilinear_weights(c, dy, dx)
            for g0 in range(0, c, block):
                g1 = min(c, g0 + block)
                bg = ConvGeom(g1 - g0, h + 1, w + 1, g1 - g0, 2, 2)
                conv_ops.lower_conv(lo, node, lo.label(node, f"t{dy}{dx}g{g0}"),
                                    window.channels(g0, g1 - g0), tap.channels(g0, g1 - g0), bg,
                                    conv_ops.block_diagonal(weights, c, g0, g1), 0,
                                    _DIVIDE_BY_16, plan_conv(bg, lo.cfg))
            column_copies(lo, node, tap, wide, 2, f"{dy}{dx}", first=dx)
        dst = out.strided(dy * line, line_stride=2 * line, height=h)
        lo.emit(SdpOp(lo.label(node, f"y{dy}"), node.name, wide, dst, IDENTITY))


def lower(lo, node: Node, p: ResizePlan) -> None:
    src, out = lo.region(node.inputs[0]), lo.region(node.outputs[0])
    if p.bilinear:
        _lower_bilinear(lo, node, p, src, out)
        return
    c, h, w = p.in_cube
    if not src.packed_lines:          # a column view needs packed lines
        packed = lo.temp(lo.label(node, "in"), c, h, w)
        lo.copy(node, src, packed)
        src = packed
    wide = src
    if p.fx > 1:
        direct = p.fy == 1 and out.packed_lines
        wide = out if direct else lo.temp(lo.label(node, "wide"), c, h, w * p.fx)
        column_copies(lo, node, src, wide, p.fx, "w")
    if p.fy > 1 or wide is not out:
        line = out.layout.line_stride
        for dy in range(p.fy):
            dst = out.strided(dy * line, line_stride=p.fy * line, height=h)
            lo.emit(SdpOp(lo.label(node, f"y{dy}"), node.name, wide, dst, IDENTITY))


def reference(p: ResizePlan, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = np.asarray(inputs[0])
    if p.bilinear:
        c, h, w = p.in_cube
        padded = np.pad(x.reshape(1, c, h, w), ((0, 0), (0, 0), (1, 1), (1, 1)), mode="edge")
        y = np.zeros((1, c, 2 * h, 2 * w), dtype=np.int8)
        for dy in (0, 1):
            for dx in (0, 1):
                y[:, :, dy::2, dx::2] = int8_ref.conv_program_int8(
                    padded[:, :, dy:dy + h + 1, dx:dx + w + 1], _bilinear_weights(c, dy, dx),
                    _DIVIDE_BY_16, group=c)
        return [y.reshape(p.out_shape)]
    return [np.repeat(np.repeat(x, p.fy, axis=2), p.fx, axis=3).reshape(p.out_shape)]


def ties(node: Node, graph: Graph) -> list[list[str]]:
    return [[node.inputs[0], node.outputs[0]]]


ENTRY = OpEntry(("Resize", "Upsample"), check, plan, lower, reference, ties=ties)
