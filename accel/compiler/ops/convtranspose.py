"""ConvTranspose with kernel == stride (PP-OCR's 2x2 / stride 2 upsampling) as 1x1 convolutions.

With kernel equal to stride every output pixel ``(sy*i + dy, sx*j + dx)``
takes exactly one tap: ``sum_c x[c, i, j] * W[c, k, dy, dx]``.  So the
layer is ``sy * sx`` pointwise convolutions, one per tap, whose outputs are
interleaved by the same strided writes as nearest upsampling
(:mod:`accel.compiler.ops.resize`): each convolution reads its input as one
column of pixels and its SDP writes every ``sx``-th pixel of a row-packed
temporary (or of the output when ``sy == 1``); ``sy`` copies then interleave
the rows.  One weight scale per output channel covers all taps, so the
convolutions share the SDP program - unless the input has a zero point: each
tap's bias then absorbs ``-z_in`` times that tap's own weight sums
(:func:`accel.compiler.quantize.zero_sums`), one program per tap.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from accel.compiler.engine import SdpOp
from accel.compiler.ops import conv as conv_ops
from accel.compiler.ops.base import OpEntry, check_activation, constant, out_shape
from accel.compiler.ops.conv import sdp_program
from accel.compiler.program import IDENTITY, SdpProgram
from accel.compiler.quantize import ConvQuant, conv_quant, quantize_bias, zero_sums
from accel.compiler.scales import zero_point_of
from accel.compiler.tiling import ConvGeom, plan_conv
from accel.config import HwConfig
from accel.golden import int8_ref
from accel.ir import Graph, Node

MAX_COLUMN = 8192


@dataclass(frozen=True, eq=False)
class DeconvPlan:
    stride: tuple[int, int]
    in_cube: tuple[int, int, int]
    k: int
    quant: ConvQuant                 # weight [K, C, sy, sx]
    programs: tuple[SdpProgram, ...]  # per tap (dy, dx), row-major
    out_shape: tuple[int, ...]


def check(node: Node, graph: Graph, cfg: HwConfig) -> str | None:
    x = node.inputs[0]
    why = check_activation(graph, x)
    if why:
        return why
    if len(graph.tensors[x].shape) != 4:
        return "only 2-D (NCHW)"
    if not graph.is_constant(node.inputs[1]):
        return "weights are not constant"
    if len(node.inputs) > 2 and node.inputs[2] and not graph.is_constant(node.inputs[2]):
        return "bias is not constant"
    a = node.attrs
    c, kg, kh, kw = graph.tensors[node.inputs[1]].shape
    stride = tuple(int(v) for v in a.get("strides", (1, 1)))
    if (kh, kw) != stride:
        return f"kernel {kh}x{kw} != stride {stride}: only non-overlapping transposed windows"
    if int(a.get("group", 1)) != 1 or any(d != 1 for d in a.get("dilations", (1, 1))):
        return "group or dilation"
    if any(a.get("pads", (0, 0, 0, 0))) or any(a.get("output_padding", (0, 0))):
        return "pads or output_padding"
    act = a.get("activation")
    if act not in (None, "Relu", "Clip"):
        return f"fused activation {act!r}"
    _, h, w = graph.tensors[x].shape[1:]
    tiles = plan_conv(ConvGeom(c, min(h * w, MAX_COLUMN), 1, kg, 1, 1), cfg)
    if isinstance(tiles, str):
        return tiles
    return None


def plan(node: Node, graph: Graph, cfg: HwConfig, scales) -> DeconvPlan:
    w = constant(graph, node.inputs[1]).astype(np.float64)          # [C, K, sy, sx]
    b = constant(graph, node.inputs[2]) if len(node.inputs) > 2 else None
    b = None if b is None else b.astype(np.float64).reshape(-1)
    act = node.attrs.get("activation")
    x, y = node.inputs[0], node.outputs[0]
    z_in = zero_point_of(scales, x)
    # the whole kernel's quantization; the input zero point is per tap, below
    q = conv_quant(w.transpose(1, 0, 2, 3), b, scales.scale(x), scales.scale(y),
                   act in ("Relu", "Clip"), name=node.name,
                   relu_max=node.attrs.get("activation_max") if act == "Clip" else None,
                   out_zero=zero_point_of(scales, y))
    sy, sx = (int(v) for v in node.attrs.get("strides", (1, 1)))
    programs = []
    for dy in range(sy):
        for dx in range(sx):
            tap = q
            if z_in:
                tap_w = q.weight[:, :, dy:dy + 1, dx:dx + 1]
                acc_scale = q.in_scale * q.weight_scale * (1 << q.clip_truncate)
                worst = int(np.abs(tap_w.astype(np.int64)).reshape(len(tap_w), -1)
                            .sum(axis=1).max()) * 128
                bias, shift = quantize_bias(b, acc_scale, acc_scale / q.out_scale, worst,
                                            q.clip_truncate, zero_sums(tap_w, z_in), node.name)
                tap = dataclasses.replace(q, bias=bias, bias_shift=shift)
            programs.append(sdp_program(tap))
    c, h, wd = graph.tensors[x].shape[1:]
    return DeconvPlan((sy, sx), (c, h, wd), int(w.shape[1]), q, tuple(programs),
                      out_shape(graph, y))


def lower(lo, node: Node, p: DeconvPlan) -> None:
    src, out = lo.region(node.inputs[0]), lo.region(node.outputs[0])
    (sy, sx), (c, h, w), k = p.stride, p.in_cube, p.k
    if not src.packed_lines:
        packed = lo.temp(lo.label(node, "in"), c, h, w)
        lo.copy(node, src, packed)
        src = packed
    col = src.column()
    n = col.layout.height
    for dy in range(sy):
        wide = out if sy == 1 and out.packed_lines else lo.temp(lo.label(node, f"row{dy}"),
                                                                 k, h, w * sx)
        dcol = wide.column()
        a = wide.layout.atom_bytes
        for dx in range(sx):
            weight = p.quant.weight[:, :, dy:dy + 1, dx:dx + 1]
            for p0 in range(0, n, MAX_COLUMN):
                rows = min(MAX_COLUMN, n - p0)
                geom = ConvGeom(c, rows, 1, k, 1, 1)
                dst = dcol.strided(dx * a + p0 * sx * a, line_stride=sx * a, height=rows)
                conv_ops.lower_conv(lo, node, lo.label(node, f"tap{dy}{dx}"), col.rows(p0, rows),
                                    dst, geom, weight, p.quant.clip_truncate,
                                    p.programs[dy * sx + dx], plan_conv(geom, lo.cfg))
        if wide is not out:
            line = out.layout.line_stride
            dst = out.strided(dy * line, line_stride=sy * line, height=h)
            lo.emit(SdpOp(lo.label(node, f"y{dy}"), node.name, wide, dst, IDENTITY))


def reference(p: DeconvPlan, inputs: list[np.ndarray]) -> list[np.ndarray]:
    (sy, sx), (c, h, w) = p.stride, p.in_cube
    x = np.asarray(inputs[0]).reshape(1, c, h, w)
    y = np.zeros((1, p.k, h * sy, w * sx), dtype=np.int8)
    for dy in range(sy):
        for dx in range(sx):
            y[:, :, dy::sy, dx::sx] = int8_ref.conv_program_int8(
                x, p.quant.weight[:, :, dy:dy + 1, dx:dx + 1], p.programs[dy * sx + dx],
                clip_truncate=p.quant.clip_truncate)
    return [y.reshape(p.out_shape)]


ENTRY = OpEntry(("ConvTranspose",), check, plan, lower, reference)
