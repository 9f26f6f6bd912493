"""ConvTranspose on the DLA: every output phase a convolution, the phases interleaved.

Output pixel ``o = s * m + d`` of a transposed convolution (stride ``s``, kernel ``k``,
leading padding ``p``) takes the taps ``t = r + s * u`` with ``r = (d + p) mod s`` from
input ``m + q - u`` (``q = (d + p) div s``): for each phase ``d`` a plain convolution of
the input with the phase's taps in reverse order (a correlation), stride 1, its window
and padding worked out per axis (:func:`axis_phases`). So a 4x4 / stride 2 decoder
layer is four 2x2 convolutions and a 3x3 / stride 1 one a 3x3 convolution with the
flipped kernel, each as many multiply-accumulates as the layer's own - none on inserted
zeros.

* **kernel == stride, no padding** (PP-OCR's 2x2 / stride 2 upsampling): every phase is
  one tap, a pointwise convolution, which reads its input as one column of pixels and
  writes every ``sx``-th pixel of a row-packed temporary (or of the output when
  ``sy == 1``) through the same strided writes as nearest upsampling
  (:mod:`accel.compiler.ops.resize`); ``sy`` copies then interleave the rows.
* **any other** (overlapping windows, padding, output padding): each phase writes a
  packed temporary of the largest phase's size (a phase with one row or column fewer
  computes one more from its padding, dropped below), the temporaries of one row phase
  are interleaved into a row-packed one by column copies, and the rows into the output
  as above.

One weight scale per output channel covers every tap, so the phases share the SDP
program - unless the input has a zero point: each phase's bias then absorbs ``-z_in``
times that phase's own weight sums (:func:`accel.compiler.quantize.zero_sums`), and its
padded taps read ``z_in``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from accel.compiler.engine import SdpOp
from accel.compiler.ops import conv as conv_ops
from accel.compiler.ops.base import OpEntry, check_activation, constant, out_shape
from accel.compiler.ops.conv import sdp_program
from accel.compiler.ops.resize import column_copies
from accel.compiler.program import IDENTITY, SdpProgram
from accel.compiler.quantize import ConvQuant, conv_quant, quantize_bias, zero_sums
from accel.compiler.scales import zero_point_of
from accel.compiler.tiling import ConvGeom, plan_conv
from accel.config import HwConfig
from accel.golden import int8_ref
from accel.ir import Graph, Node

MAX_COLUMN = 8192


@dataclass(frozen=True)
class AxisPhase:
    """One output phase ``d`` of one axis: outputs ``d, d + s, ...`` (``count`` of them;
    the convolution computes ``size``, the largest phase's), the kernel taps in the
    order the convolution reads them, the input window ``[start, end)`` and the
    padding before and after it."""

    d: int
    count: int
    size: int
    taps: tuple[int, ...]
    start: int
    end: int
    pads: tuple[int, int]


def axis_phases(n: int, k: int, s: int, pad_begin: int, out: int) -> list[AxisPhase] | str:
    """The phases of an axis of ``n`` inputs transposed-convolved by ``k`` taps at stride
    ``s`` into ``out`` outputs (leading padding ``pad_begin``), or why not."""
    size = -(-out // s)
    phases = []
    for d in range(s):
        count = -(-(out - d) // s) if d < out else 0
        r, q = (d + pad_begin) % s, (d + pad_begin) // s
        taps = tuple(range(r, k, s))[::-1]            # correlation order: last tap first
        if not taps or count == 0:
            return (f"output phase {d} of stride {s} is reached by no tap of a kernel of "
                    f"{k}")
        first = q - (len(taps) - 1)                    # input read by output 0's first tap
        last = size - 1 + q                            # input read by the last output's last
        start, end = max(0, first), min(n, last + 1)
        if end <= start:
            return f"output phase {d} reads only padding"
        phases.append(AxisPhase(d, count, size, taps, start, end,
                                (max(0, -first), max(0, last - (n - 1)))))
    return phases


@dataclass(frozen=True, eq=False)
class DeconvPlan:
    stride: tuple[int, int]
    in_cube: tuple[int, int, int]
    k: int
    quant: ConvQuant                 # weight [K, C, kh, kw], the layer's taps as they are
    programs: tuple[SdpProgram, ...]  # per phase (dy, dx), row-major
    out_shape: tuple[int, ...]
    # the phases of each axis; None: kernel == stride, one tap per phase (pointwise)
    phases: tuple[tuple[AxisPhase, ...], tuple[AxisPhase, ...]] | None = None

    def phase_weight(self, py: AxisPhase, px: AxisPhase) -> np.ndarray:
        return phase_weight(self.quant.weight, py, px)

    def phase_geom(self, py: AxisPhase, px: AxisPhase) -> ConvGeom:
        return phase_geom(self.in_cube[0], self.k, py, px)


def phase_weight(weight: np.ndarray, py: AxisPhase, px: AxisPhase) -> np.ndarray:
    """The taps ``[K, C, len(py.taps), len(px.taps)]`` of phase (py, px) of ``weight``
    ``[K, C, kh, kw]``, in the order its convolution reads them."""
    return weight[:, :, list(py.taps)][:, :, :, list(px.taps)]


def phase_geom(c: int, k: int, py: AxisPhase, px: AxisPhase) -> ConvGeom:
    """The convolution of phase (py, px) of ``c`` input and ``k`` output channels."""
    return ConvGeom(c, py.end - py.start, px.end - px.start, k, len(py.taps), len(px.taps),
                    (1, 1), (py.pads[0], px.pads[0], py.pads[1], px.pads[1]))


def _pointwise(node: Node, graph: Graph) -> bool:
    """Kernel equal to stride and no padding: each output pixel takes one tap."""
    a = node.attrs
    kernel = tuple(graph.tensors[node.inputs[1]].shape[2:])
    return (kernel == tuple(int(v) for v in a.get("strides", (1, 1)))
            and not any(a.get("pads", (0, 0, 0, 0))) and not any(a.get("output_padding", (0, 0))))


def _phases(node: Node, graph: Graph):
    a = node.attrs
    _, _, h, w = graph.tensors[node.inputs[0]].shape
    _, _, oh, ow = graph.tensors[node.outputs[0]].shape
    _, _, kh, kw = graph.tensors[node.inputs[1]].shape
    sy, sx = (int(v) for v in a.get("strides", (1, 1)))
    t, left = (int(v) for v in a.get("pads", (0, 0, 0, 0))[:2])
    rows, cols = axis_phases(h, kh, sy, t, oh), axis_phases(w, kw, sx, left, ow)
    for why in (rows, cols):
        if isinstance(why, str):
            return why
    return tuple(rows), tuple(cols)


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
    if int(a.get("group", 1)) != 1 or any(d != 1 for d in a.get("dilations", (1, 1))):
        return "group or dilation"
    act = a.get("activation")
    if act not in (None, "Relu", "Clip"):
        return f"fused activation {act!r}"
    _, h, w = graph.tensors[x].shape[1:]
    if _pointwise(node, graph):
        tiles = plan_conv(ConvGeom(c, min(h * w, MAX_COLUMN), 1, kg, 1, 1), cfg)
        return tiles if isinstance(tiles, str) else None
    phases = _phases(node, graph)
    if isinstance(phases, str):
        return phases
    rows, cols = phases
    if rows[0].size * cols[0].size > MAX_COLUMN:
        return (f"an output phase of {rows[0].size}x{cols[0].size} pixels is more than the "
                f"{MAX_COLUMN} a column copy interleaves")
    for py in rows:
        for px in cols:
            g = phase_geom(c, kg, py, px)
            why = conv_ops.check_geometry(g)
            if why:
                return f"output phase ({py.d}, {px.d}): {why}"
            tiles = plan_conv(g, cfg)
            if isinstance(tiles, str):
                return f"output phase ({py.d}, {px.d}): {tiles}"
    return None


def plan(node: Node, graph: Graph, cfg: HwConfig, scales) -> DeconvPlan:
    w = constant(graph, node.inputs[1]).astype(np.float64)          # [C, K, kh, kw]
    b = constant(graph, node.inputs[2]) if len(node.inputs) > 2 else None
    b = None if b is None else b.astype(np.float64).reshape(-1)
    act = node.attrs.get("activation")
    x, y = node.inputs[0], node.outputs[0]
    z_in = zero_point_of(scales, x)
    # the whole kernel's quantization; the input zero point is per phase, below
    q = conv_quant(w.transpose(1, 0, 2, 3), b, scales.scale(x), scales.scale(y),
                   act in ("Relu", "Clip"), name=node.name,
                   relu_max=node.attrs.get("activation_max") if act == "Clip" else None,
                   out_zero=zero_point_of(scales, y))
    sy, sx = (int(v) for v in node.attrs.get("strides", (1, 1)))
    c, h, wd = graph.tensors[x].shape[1:]
    pointwise = _pointwise(node, graph)
    if pointwise:
        taps = [q.weight[:, :, dy:dy + 1, dx:dx + 1] for dy in range(sy) for dx in range(sx)]
        phases = None
    else:
        phases = _phases(node, graph)
        taps = [phase_weight(q.weight, py, px) for py in phases[0] for px in phases[1]]
    programs = []
    for tap_w in taps:
        tap = q
        if z_in:
            acc_scale = q.in_scale * q.weight_scale * (1 << q.clip_truncate)
            worst = int(np.abs(tap_w.astype(np.int64)).reshape(len(tap_w), -1)
                        .sum(axis=1).max()) * 128
            bias, shift = quantize_bias(b, acc_scale, acc_scale / q.out_scale, worst,
                                        q.clip_truncate, zero_sums(tap_w, z_in), node.name)
            tap = dataclasses.replace(q, bias=bias, bias_shift=shift)
        programs.append(sdp_program(tap))
    return DeconvPlan((sy, sx), (c, h, wd), int(w.shape[1]),
                      dataclasses.replace(q, pad_value=z_in), tuple(programs),
                      out_shape(graph, y), phases)


def lower(lo, node: Node, p: DeconvPlan) -> None:
    if p.phases is not None:
        _lower_phases(lo, node, p)
        return
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


def _lower_phases(lo, node: Node, p: DeconvPlan) -> None:
    """Each phase's convolution into a packed temporary (or straight into the output at
    stride 1), a row phase's columns interleaved into a row-packed temporary, its rows
    into the output (see the module docstring)."""
    src, out = lo.region(node.inputs[0]), lo.region(node.outputs[0])
    rows, cols = p.phases
    (sy, sx), k = p.stride, p.k
    my, mx = rows[0].size, cols[0].size
    ow = out.layout.width
    for py in rows:
        wide = lo.temp(lo.label(node, f"row{py.d}"), k, my, sx * mx) if sx > 1 else None
        for px in cols:
            geom = p.phase_geom(py, px)
            direct = sy == sx == 1 and (my, mx) == (out.layout.height, ow)
            dst = out if direct else lo.temp(lo.label(node, f"phase{py.d}{px.d}"), k, my, mx)
            window = src.rows(py.start, py.end - py.start).cols(px.start, px.end - px.start)
            conv_ops.lower_conv(lo, node, lo.label(node, f"phase{py.d}{px.d}.conv"), window,
                                dst, geom, p.phase_weight(py, px), p.quant.clip_truncate,
                                p.programs[py.d * sx + px.d], plan_conv(geom, lo.cfg),
                                p.quant.pad_value)
            if direct:
                return
            if wide is None:
                wide = dst
            else:
                column_copies(lo, node, dst, wide, sx, f"{py.d}{px.d}", first=px.d)
        line = out.layout.line_stride
        dst = out.strided(py.d * line, line_stride=sy * line, height=py.count)
        lo.emit(SdpOp(lo.label(node, f"y{py.d}"), node.name,
                      wide.rows(0, py.count).cols(0, ow), dst, IDENTITY))


def reference(p: DeconvPlan, inputs: list[np.ndarray]) -> list[np.ndarray]:
    (sy, sx), (c, h, w) = p.stride, p.in_cube
    x = np.asarray(inputs[0]).reshape(1, c, h, w)
    if p.phases is not None:
        rows, cols = p.phases
        y = np.zeros((1, p.k, *p.out_shape[2:]), dtype=np.int8)
        for py in rows:
            for px in cols:
                part = int8_ref.conv_program_int8(
                    x[:, :, py.start:py.end, px.start:px.end], p.phase_weight(py, px),
                    p.programs[py.d * sx + px.d], pads=p.phase_geom(py, px).pads,
                    pad_value=p.quant.pad_value, clip_truncate=p.quant.clip_truncate)
                y[:, :, py.d::sy, px.d::sx] = part[:, :, :py.count, :px.count]
        return [y.reshape(p.out_shape)]
    y = np.zeros((1, p.k, h * sy, w * sx), dtype=np.int8)
    for dy in range(sy):
        for dx in range(sx):
            y[:, :, dy::sy, dx::sx] = int8_ref.conv_program_int8(
                x, p.quant.weight[:, :, dy:dy + 1, dx:dx + 1], p.programs[dy * sx + dx],
                clip_truncate=p.quant.clip_truncate)
    return [y.reshape(p.out_shape)]


ENTRY = OpEntry(("ConvTranspose",), check, plan, lower, reference)
