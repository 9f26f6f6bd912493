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

Bilinear upsampling with ``half_pixel`` coordinates by 2 or 4 on each axis (the
usual decoder and segmentation-head upsampling; 1 leaves an axis as it is) is exact
integer arithmetic too.  Along an axis of factor ``f``, output ``f*i + d`` lies
``t = (2d + 1 - f) / 2f`` pixels from input ``i``: it is ``(-t) x[i-1] + (1+t) x[i]``
for ``t < 0``, else ``(1-t) x[i] + t x[i+1]`` (the neighbour clamped at the border,
i.e. the input replicate-padded by one pixel), weights in ``2f``-ths: ``(1, 3)`` and
``(3, 1)`` for 2x, ``(3, 5), (1, 7), (7, 1), (5, 3)`` for 4x.  Output pixel ``(fy*i + dy,
fx*j + dx)`` is the outer product of its two axes' weights over a 2x2 window, divided
by ``4*fy*fx`` (a power of two) once.  So: replicate-pad into a temporary (five SDP
copies), one depthwise 2x2 convolution per phase ``(dy, dx)`` with those integer
weights (at most 49: CACC sums exactly; the SDP divides with one rounding, input and
output scales being tied), and the interleaving copies above.  A factor of 8 would
need weights up to 225, past int8.
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


#: bilinear factors whose weights stay exact (see the module docstring)
BILINEAR_FACTORS = (1, 2, 4)


def bilinear_taps(f: int, d: int) -> tuple[int, tuple[int, int]]:
    """``(first tap, weights in 2f-ths)`` of output phase ``d`` of an axis upsampled by
    ``f``: taps ``i - 1, i`` (first tap 0 in the replicate-padded input) when the output
    lies before input ``i``, else ``i, i + 1`` (first tap 1)."""
    ahead = 2 * d + 1 - f             # 2f * t
    if ahead < 0:
        return 0, (-ahead, 2 * f + ahead)
    return 1, (2 * f - ahead, ahead)


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
        if (fy not in BILINEAR_FACTORS or fx not in BILINEAR_FACTORS or (fy, fx) == (1, 1)
                or coord not in ("half_pixel", "pytorch_half_pixel")):
            return (f"linear mode with factors {fy}x{fx} and {coord!r} coordinates: only "
                    f"factors 1, 2 or 4 per axis with half_pixel")
        groups = conv_ops.choose_block(cfg, ConvGeom(src[1], src[2] + 1, src[3] + 1, src[1],
                                                     2, 2), src[1])
        return groups if isinstance(groups, str) else None
    if a.get("mode", "nearest") != "nearest":
        return f"mode {a.get('mode')!r}: only nearest, or linear by 2 or 4"
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


def _bilinear_phase(p: ResizePlan, dy: int, dx: int
                    ) -> tuple[tuple[int, int], np.ndarray, SdpProgram]:
    """``((first row, first column) of its window in the padded input, depthwise 2x2
    integer weights [C, 1, 2, 2], the SDP program dividing by 4*fy*fx)`` of output phase
    ``(dy, dx)``."""
    (oy, wy), (ox, wx) = bilinear_taps(p.fy, dy), bilinear_taps(p.fx, dx)
    k = np.outer(wy, wx).astype(np.int8)
    shift = (4 * p.fy * p.fx).bit_length() - 1
    return ((oy, ox), np.broadcast_to(k, (p.in_cube[0], 1, 2, 2)).copy(),
            SdpProgram(XStage(truncate=shift)))


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
    for dy in range(p.fy):
        wide = lo.temp(lo.label(node, f"row{dy}"), c, h, p.fx * w)
        for dx in range(p.fx):
            tap = lo.temp(lo.label(node, f"tap{dy}{dx}"), c, h, w)
            (y0, x0), weights, program = _bilinear_phase(p, dy, dx)
            window = pad.rows(y0, h + 1).cols(x0, w + 1)
            for g0 in range(0, c, block):
                g1 = min(c, g0 + block)
                bg = ConvGeom(g1 - g0, h + 1, w + 1, g1 - g0, 2, 2)
                conv_ops.lower_conv(lo, node, lo.label(node, f"t{dy}{dx}g{g0}"),
                                    window.channels(g0, g1 - g0), tap.channels(g0, g1 - g0), bg,
                                    conv_ops.block_diagonal(weights, c, g0, g1), 0,
                                    program, plan_conv(bg, lo.cfg))
            column_copies(lo, node, tap, wide, p.fx, f"{dy}{dx}", first=dx)
        dst = out.strided(dy * line, line_stride=p.fy * line, height=h)
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
        y = np.zeros((1, c, p.fy * h, p.fx * w), dtype=np.int8)
        for dy in range(p.fy):
            for dx in range(p.fx):
                (y0, x0), weights, program = _bilinear_phase(p, dy, dx)
                y[:, :, dy::p.fy, dx::p.fx] = int8_ref.conv_program_int8(
                    padded[:, :, y0:y0 + h + 1, x0:x0 + w + 1], weights, program, group=c)
        return [y.reshape(p.out_shape)]
    return [np.repeat(np.repeat(x, p.fy, axis=2), p.fx, axis=3).reshape(p.out_shape)]


def ties(node: Node, graph: Graph) -> list[list[str]]:
    return [[node.inputs[0], node.outputs[0]]]


ENTRY = OpEntry(("Resize", "Upsample"), check, plan, lower, reference, ties=ties)
