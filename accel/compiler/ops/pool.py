"""MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool on the PDP.

The PDP pools windows of 1..8 x 1..8 with strides 1..16 and paddings 0..7; it
has no converter, so a pooled tensor keeps its input's scale (``ties``).

* Bottom/right padding is what the output size needs (NVIDIA's
  ``adjustBRPadding``), so ``ceil_mode`` and SAME padding come for free for
  max/min pooling, which ignore padded cells; input rows/columns no window
  reaches are left out of the read.
* Averages always count padding in the divisor (the PDP has no exclusive
  padding); ``count_include_pad=0`` with padding, or a ceil-mode window that
  hangs over the padded input, is refused rather than computed differently.
* Outputs wider than the PDP line buffer holds (:func:`accel.cbuf.pdp_max_width`)
  run in split-width mode.
* Max/min windows larger than 8 at stride 1 (YOLO's SPP 9 and 13) are
  successive stride-1 pools: ``max`` over the union of windows is the
  ``max`` of maxima, and ``k = 1 + sum(k_i - 1)``.
* Global max pooling of more than 8x8 is a chain of non-overlapping pools.
* Global average pooling sums in the convolution pipeline instead (a
  depthwise convolution with all-ones kernels, the CACC sum exact, one
  rounding in the SDP to the output's own scale - a mean spans far less than
  its map), when the window fits a convolution kernel (32 x 32), directly or
  with its pixels read as another map of the same size (12 x 48 as 24 x 24),
  and the convolution fits the CBUF; beyond, it is a chain of exact-partition PDP
  averages (each pass rounds, the reference computes the same passes, the scale is
  the input's), rescaled by an SDP pass to the output's own scale when the map would
  fit a kernel (the scales are tied by map size, not by preset: nv_large's CBUF
  does not hold a 32 x 32 summing kernel's weights).

Zero points: a pooled tensor keeps its input's (``ties``).  Max and min are
order statistics of the codes, and the mean of codes ``v + z`` is the mean of
``v`` plus ``z``, so the PDP pools the codes as they are; only a padded cell
of an average stands for 0 and adds ``z`` (the PDP's pad-value registers).  A
global average summed in the CACC subtracts ``H * W * z_in`` in X1's ALU
before its multiplier, and its converter adds the output's zero point.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from accel import cbuf
from accel.compiler.engine import PdpOp, PdpSplit, SdpOp
from accel.compiler.ops import conv as conv_ops
from accel.compiler.ops.base import OpEntry, check_activation
from accel.compiler.ops.base import out_shape as batch1
from accel.compiler.program import Converter, Operand, SdpProgram, XStage
from accel.compiler.quantize import int16_factor, layer_operand
from accel.compiler.scales import zero_point_of
from accel.compiler.tiling import ConvGeom, plan_conv
from accel.config import HwConfig
from accel.golden import int8_ref
from accel.ir import Graph, Node
from accel.layout import ceil_div

MAX_KERNEL = 8
MAX_STRIDE = 16
MAX_PAD = 7
MAX_CONV_KERNEL = 32
METHODS = {"MaxPool": "max", "AveragePool": "avg", "GlobalMaxPool": "max",
           "GlobalAveragePool": "avg"}


@dataclass(frozen=True)
class Pass:
    """One PDP operation: window, stride and paddings (top, left, bottom, right)."""

    kernel: tuple[int, int]
    stride: tuple[int, int]
    pads: tuple[int, int, int, int]


@dataclass(frozen=True, eq=False)
class PoolPlan:
    method: str
    in_cube: tuple[int, int, int]
    out_shape: tuple[int, ...]
    passes: tuple[Pass, ...] = ()          # PDP passes, in order
    # global average summed by a convolution: (window (h, w) it reads, block, program)
    sum_conv: tuple | None = None
    pad_value: int = 0                     # what a padded cell adds to an average: z_in
    # a global average with a scale of its own (:func:`ties`) whose summing convolution
    # does not fit: the passes' average (the input's scale) rescaled by this SDP program
    rescale: SdpProgram | bool = False


def _out_size(n: int, k: int, s: int, p0: int, p1: int, ceil: bool) -> int:
    span = n + p0 + p1 - k
    return (-(-span // s) if ceil else span // s) + 1


def sum_window(h: int, w: int) -> tuple[int, int] | None:
    """The kernel a convolution sums an ``h x w`` map with, or None.

    The map itself when it fits a kernel (32 x 32); otherwise the pixels of a
    surface are one run of atoms, so the same ``h * w`` pixels can be read as
    any ``h2 x w2`` cube with ``h2 * w2 == h * w`` - the squarest that fits.
    """
    if h <= MAX_CONV_KERNEL and w <= MAX_CONV_KERNEL:
        return h, w
    n = h * w
    for h2 in range(int(n ** 0.5), 0, -1):
        if n % h2 == 0 and h2 <= MAX_CONV_KERNEL and n // h2 <= MAX_CONV_KERNEL:
            return h2, n // h2
    return None


def _chain(k: int) -> list[int]:
    """Stride-1 window sizes <= 8 whose composition is a window of ``k``."""
    parts = []
    while k > MAX_KERNEL:
        parts.append(MAX_KERNEL)
        k -= MAX_KERNEL - 1
    return parts + [k]


def _factors(n: int) -> list[int] | None:
    """``n`` as a product of factors <= 8 (largest first), or None."""
    out = []
    while n > 1:
        f = next((d for d in range(MAX_KERNEL, 1, -1) if n % d == 0), None)
        if f is None:
            return None
        out.append(f)
        n //= f
    return out or [1]


def _plan_geometry(node: Node, graph: Graph, cfg: HwConfig) -> PoolPlan | str:
    x = node.inputs[0]
    c, h, w = graph.tensors[x].shape[1:]
    out_shape = batch1(graph, node.outputs[0])
    method = METHODS[node.op_type]
    if node.op_type.startswith("Global"):
        window = sum_window(h, w) if method == "avg" else None
        summed = None
        if window is not None:
            summed = PoolPlan(method, (c, h, w), out_shape, sum_conv=(window,))
            block = conv_ops.choose_block(cfg, _sum_geom(summed), c)
            if not isinstance(block, str):
                return summed
            summed = f"as a convolution it does not fit ({block})"
        if h <= MAX_KERNEL and w <= MAX_KERNEL:
            return PoolPlan(method, (c, h, w), out_shape, (Pass((h, w), (1, 1), (0,) * 4),),
                            rescale=window is not None)
        if method == "max":
            ph, pw = _chain_partition(h), _chain_partition(w)
            passes, hh, ww = [], h, w
            for (kh, sh), (kw, sw) in zip(ph, pw, strict=True):
                oh, ow = ceil_div(hh, sh), ceil_div(ww, sw)
                passes.append(Pass((kh, kw), (sh, sw),
                                   (0, 0, (oh - 1) * sh + kh - hh, (ow - 1) * sw + kw - ww)))
                hh, ww = oh, ow
            return PoolPlan(method, (c, h, w), out_shape, tuple(passes))
        fh, fw = _factors(h), _factors(w)
        if fh is None or fw is None:
            why = summed or f"larger than a convolution kernel ({MAX_CONV_KERNEL})"
            return (f"global average over {h}x{w}: {why}, and not a product of PDP "
                    f"windows <= {MAX_KERNEL}")
        n = max(len(fh), len(fw))
        fh, fw = fh + [1] * (n - len(fh)), fw + [1] * (n - len(fw))
        return PoolPlan(method, (c, h, w), out_shape,
                        tuple(Pass((a, b), (a, b), (0,) * 4) for a, b in zip(fh, fw, strict=True)),
                        rescale=window is not None)
    a = node.attrs
    kh, kw = (int(v) for v in a["kernel_shape"])
    sh, sw = (int(v) for v in a.get("strides", (1, 1)))
    t, left, b, r = (int(v) for v in a.get("pads", (0, 0, 0, 0)))
    if any(d != 1 for d in a.get("dilations", (1, 1))):
        return f"dilations {tuple(a['dilations'])}: the PDP pools dense windows"
    oh, ow = out_shape[2], out_shape[3]
    # the bottom/right padding the output size needs (may be less than ONNX's)
    nb = (oh - 1) * sh + kh - (h + t)
    nr = (ow - 1) * sw + kw - (w + left)
    if method == "avg":
        if (t or left or b or r) and not a.get("count_include_pad", 0):
            return ("count_include_pad=0 with padding: the PDP always divides by the "
                    "whole window")
        if nb > b or nr > r:
            return "ceil_mode window beyond the padded input: ONNX divides by fewer cells"
    if kh > MAX_KERNEL or kw > MAX_KERNEL:
        if method != "max" or (sh, sw) != (1, 1):
            return (f"kernel {kh}x{kw} > {MAX_KERNEL}: only stride-1 max pooling is "
                    f"decomposed into smaller windows")
        passes = _stride1_chain(kh, kw, t, left, max(nb, 0), max(nr, 0))
        return PoolPlan(method, (c, h, w), out_shape, tuple(passes))
    return PoolPlan(method, (c, h, w), out_shape,
                    (Pass((kh, kw), (sh, sw), (t, left, max(nb, 0), max(nr, 0))),))


def _chain_partition(n: int) -> list[tuple[int, int]]:
    """(kernel, stride) passes reducing ``n`` to 1 with non-overlapping windows <= 8."""
    steps = []
    while n > MAX_KERNEL:
        steps.append((MAX_KERNEL, MAX_KERNEL))
        n = ceil_div(n, MAX_KERNEL)
    steps.append((n, 1))
    return steps


def _split(total: int, parts: int) -> list[int]:
    return [total * (i + 1) // parts - total * i // parts for i in range(parts)]


def _stride1_chain(kh: int, kw: int, t: int, left: int, b: int, r: int) -> list[Pass]:
    hs, ws = _chain(kh), _chain(kw)
    n = max(len(hs), len(ws))
    hs, ws = hs + [1] * (n - len(hs)), ws + [1] * (n - len(ws))
    # spread each padding over the passes, at most k_i - 1 per pass
    def spread(total: int, ks: list[int]) -> list[int]:
        out = []
        for k in ks:
            p = min(total, k - 1, MAX_PAD)
            out.append(p)
            total -= p
        return out
    pt, pb, pl, pr = spread(t, hs), spread(b, hs), spread(left, ws), spread(r, ws)
    return [Pass((hs[i], ws[i]), (1, 1), (pt[i], pl[i], pb[i], pr[i])) for i in range(n)]


def check(node: Node, graph: Graph, cfg: HwConfig) -> str | None:
    x = node.inputs[0]
    why = check_activation(graph, x)
    if why:
        return why
    if len(graph.tensors[x].shape) != 4:
        return f"input rank {len(graph.tensors[x].shape)}: only 2-D pooling (NCHW)"
    if len(node.outputs) > 1 and node.outputs[1]:
        return "the indices output of MaxPool is not produced"
    p = _plan_geometry(node, graph, cfg)
    if isinstance(p, str):
        return p
    for ps in p.passes:
        if not all(1 <= k <= MAX_KERNEL for k in ps.kernel):
            return f"kernel {ps.kernel} outside 1..{MAX_KERNEL}"
        if not all(1 <= s <= MAX_STRIDE for s in ps.stride):
            return f"strides {ps.stride} outside 1..{MAX_STRIDE}"
        if not all(0 <= v <= MAX_PAD for v in ps.pads):
            return f"pads {ps.pads} outside 0..{MAX_PAD}"
    return None


def _sum_geom(p: PoolPlan) -> ConvGeom:
    c = p.in_cube[0]
    h, w = p.sum_conv[0]
    return ConvGeom(c, h, w, c, h, w)


def _rescaling(ratio: float, offset: int, z_out: int) -> SdpProgram:
    """The SDP program ``(v + offset) * ratio + z_out``, rounded once."""
    mul, truncate = int16_factor(np.array([ratio]))
    alu, shift = layer_operand(offset)
    return SdpProgram(XStage(alu_op="sum" if alu else None,
                             alu=Operand.layer(alu) if alu else None, alu_shift=shift,
                             mul=Operand.layer(int(mul[0])), truncate=truncate),
                      cvt=Converter(offset=-z_out))


def plan(node: Node, graph: Graph, cfg: HwConfig, scales) -> PoolPlan:
    p = _plan_geometry(node, graph, cfg)
    x, y = node.inputs[0], node.outputs[0]
    z_in, z_out = zero_point_of(scales, x), zero_point_of(scales, y)
    if p.rescale:       # the passes' average at the input's scale, to the output's
        program = _rescaling(scales.scale(x) / scales.scale(y), -z_in, z_out)
        return dataclasses.replace(p, pad_value=z_in, rescale=program)
    if p.sum_conv is None:
        return dataclasses.replace(p, pad_value=z_in if p.method == "avg" else 0)
    # the sum of H*W int8 values less H*W*z_in, times s_in / (H*W * s_out), rounded once
    c, h, w = p.in_cube
    program = _rescaling(scales.scale(x) / (h * w * scales.scale(y)), -h * w * z_in, z_out)
    block = conv_ops.choose_block(cfg, _sum_geom(p), c)
    return PoolPlan(p.method, p.in_cube, p.out_shape, sum_conv=(p.sum_conv[0], block, program))


def _pass_out(shape: tuple[int, int], ps: Pass) -> tuple[int, int]:
    (h, w), (kh, kw), (sh, sw) = shape, ps.kernel, ps.stride
    t, left, b, r = ps.pads
    return (h + t + b - kh) // sh + 1, (w + left + r - kw) // sw + 1


def _split_plan(cfg: HwConfig, in_w: int, ps: Pass, out_w: int) -> PdpSplit | None:
    limit = cbuf.pdp_max_width(cfg, ps.kernel[0], ps.stride[0])
    if out_w <= limit:
        return None
    n = ceil_div(out_w, limit)
    outs = _split(out_w, n)
    kw, sw = ps.kernel[1], ps.stride[1]
    first, mid, last = outs[0], outs[1] if n > 2 else 0, outs[-1]
    in_first = (first - 1) * sw + kw - ps.pads[1]
    in_mid = mid * sw if n > 2 else 0
    in_last = in_w - in_first - (n - 2) * in_mid + (kw - sw)
    return PdpSplit(n, (in_first, in_mid, in_last - (kw - sw)), (first, mid, last))


def _emit_pass(lo, node: Node, label: str, src, dst, ps: Pass, method: str,
               pad_value: int) -> None:
    oh, ow = dst.layout.height, dst.layout.width
    kh, kw = ps.kernel
    (sh, sw), (t, left, _, _) = ps.stride, ps.pads
    # read only the rows/columns some window reaches
    used_h = min(src.layout.height, (oh - 1) * sh + kh - t)
    used_w = min(src.layout.width, (ow - 1) * sw + kw - left)
    src = src.rows(0, used_h).cols(0, used_w)
    pads = (t, left, (oh - 1) * sh + kh - (used_h + t), (ow - 1) * sw + kw - (used_w + left))
    ps = Pass(ps.kernel, ps.stride, pads)
    lo.emit(PdpOp(label, node.name, src, dst, method, ps.kernel, ps.stride, pads,
                  pad_value, split=_split_plan(lo.cfg, used_w, ps, ow)))


def lower(lo, node: Node, p: PoolPlan) -> None:
    src, dst = lo.region(node.inputs[0]), lo.region(node.outputs[0])
    if p.sum_conv is not None:
        (h, w), block, program = p.sum_conv
        c = p.in_cube[0]
        if (h, w) != tuple(p.in_cube[1:]):      # the same pixels seen as an h x w map
            if not src.packed_lines:
                packed = lo.temp(lo.label(node, "in"), *p.in_cube)
                lo.copy(node, src, packed)
                src = packed
            src = src.column().strided(0, w * src.layout.atom_bytes, height=h, width=w)
        ones = np.ones((c, 1, h, w), dtype=np.int8)
        for g0 in range(0, c, block):
            g1 = min(c, g0 + block)
            bg = ConvGeom(g1 - g0, h, w, g1 - g0, h, w)
            conv_ops.lower_conv(lo, node, lo.label(node, f"g{g0}"), src.channels(g0, g1 - g0),
                                dst.channels(g0, g1 - g0), bg,
                                conv_ops.block_diagonal(ones, c, g0, g1), 0, program,
                                plan_conv(bg, lo.cfg))
        return
    shape = src.layout.height, src.layout.width
    cur = src
    for i, ps in enumerate(p.passes):
        out_hw = _pass_out(shape, ps)
        last = i == len(p.passes) - 1 and not p.rescale
        nxt = dst if last else lo.temp(lo.label(node, f"pass{i}"), p.in_cube[0], *out_hw)
        _emit_pass(lo, node, lo.label(node) if len(p.passes) == 1 else lo.label(node, f"p{i}"),
                   cur, nxt, ps, p.method, p.pad_value)
        cur, shape = nxt, out_hw
    if p.rescale:
        lo.emit(SdpOp(lo.label(node, "rescale"), node.name, cur, dst, p.rescale))


def reference(p: PoolPlan, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = np.asarray(inputs[0])
    if p.sum_conv is not None:
        _, _, program = p.sum_conv
        c, h, w = p.in_cube
        y = int8_ref.conv_program_int8(x.reshape(1, c, h, w), np.ones((c, 1, h, w), np.int8),
                                       program, group=c)
        return [y.reshape(p.out_shape)]
    if p.method == "max" and len(p.passes) > 1:
        # the whole window at once: evidence that the chain of passes is exact
        return [_direct_max(x, p.passes, p.out_shape)]
    for ps in p.passes:
        x = int8_ref.pool2d_int8(x, p.method, ps.kernel, stride=ps.stride, pads=ps.pads,
                                 pad_value=p.pad_value)
    if p.rescale:
        x = int8_ref.sdp_program_int8(x, p.rescale)
    return [x.reshape(p.out_shape)]


def _direct_max(x: np.ndarray, passes: tuple[Pass, ...], out_shape) -> np.ndarray:
    """Max pooling with the window the passes compose to (stride 1 chains, or a global max)."""
    if all(ps.stride == (1, 1) for ps in passes):
        kh = 1 + sum(ps.kernel[0] - 1 for ps in passes)
        kw = 1 + sum(ps.kernel[1] - 1 for ps in passes)
        pads = tuple(sum(ps.pads[i] for ps in passes) for i in range(4))
        return int8_ref.pool2d_int8(x, "max", (kh, kw), pads=pads).reshape(out_shape)
    return x.max(axis=(2, 3), keepdims=True).reshape(out_shape)


def ties(node: Node, graph: Graph) -> list[list[str]]:
    """The PDP has no converter: a pooled tensor keeps its input's scale - except a global
    average summed in the CACC, whose SDP rescales to a scale of its own (the mean of a
    map spans far less than the map: squeeze-excite gates keep their precision)."""
    if node.op_type == "GlobalAveragePool":
        h, w = graph.tensors[node.inputs[0]].shape[2:]
        if sum_window(int(h), int(w)) is not None:
            return []
    return [[node.inputs[0], node.outputs[0]]]


ENTRY = OpEntry(tuple(METHODS), check, plan, lower, reference, ties=ties)
