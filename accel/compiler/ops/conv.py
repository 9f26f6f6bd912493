"""Conv and Gemm: direct convolution on CDMA/CSC/CMAC/CACC with the SDP behind it.

* **Conv** (2-D, NCHW) of any size: tiled by output rows and kernel slices
  when input and weights do not fit the CBUF (:mod:`accel.compiler.tiling`).
* **Grouped and depthwise Conv**: NVDLA has no grouped convolution, so groups
  are gathered into *blocks* whose input and output channels start on atom
  boundaries; each block is an ordinary convolution with block-diagonal
  weights, reading and writing its surfaces of the input and output.  The
  block size is chosen by estimated cycles (MAC atoms grow with the block,
  the number of operations shrinks): the smallest aligned block for
  depthwise layers on nv_small, the dense block-diagonal form when it is
  cheaper.
* **Gemm** (``Y = X W^T + b``) reads the cube its input was flattened from:
  a kernel as large as the cube (``K x C x H x W``) gives one output pixel.  A
  cube higher or wider than a kernel (32) is first re-laid as strips in
  channel slots (:mod:`accel.compiler.ops.fc_strips`).

The SDP behind the convolution applies the layer's per-channel
quantization (X1: bias << shift, int16 multiplier, truncate, ReLU) and the
fused activation (X2: the cap of a capped ReLU as an ALU minimum, PReLU /
LeakyReLU slopes in the multiplier's PReLU mode); see
:mod:`accel.compiler.quantize` for how the integers are chosen.  Zero
points: the input's pads the borders (CDMA/CSC pad value) and its weight sums
go into the bias, the output's is the converter's offset.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from accel import cbuf
from accel.compiler.engine import CbufPlan, ConvOp, Weights
from accel.compiler.ops.base import OpEntry, check_activation, constant, out_shape, source_cube
from accel.compiler.ops.fc_strips import Strips, strips
from accel.compiler.program import Converter, Operand, SdpProgram, XStage
from accel.compiler.quantize import ConvQuant, conv_quant, int16_factor
from accel.compiler.scales import zero_point_of
from accel.compiler.tiling import OP_OVERHEAD, ConvGeom, TilePlan, plan_conv
from accel.config import HwConfig
from accel.golden import int8_ref
from accel.ir import Graph, Node
from accel.layout import ceil_div, pack_dc_weights

MAX_STRIDE = 8          # CONV_X/Y_STRIDE: 3 bits
MAX_PAD_BEGIN = 31      # PAD_LEFT/TOP: 5 bits
MAX_PAD_END = 63        # PAD_RIGHT/BOTTOM: 6 bits
MAX_DILATION = 32       # X/Y_DILATION_EXT: 5 bits
MAX_KERNEL = 32         # WEIGHT_WIDTH/HEIGHT_EXT: 5 bits
MAX_CHANNELS = 8192     # DATAIN_CHANNEL_EXT / WEIGHT_KERNEL: 13 bits
ACTIVATIONS = (None, "Relu", "Clip", "PRelu", "LeakyRelu")


@dataclass(frozen=True, eq=False)
class ConvPlan:
    """One Conv/Gemm node as the hardware runs it."""

    geom: ConvGeom            # the whole layer (C = all input channels)
    group: int
    block: int                # groups per block convolution
    quant: ConvQuant          # weight [K, C/group, R, S], CACC and X1 parameters
    program: SdpProgram
    out_shape: tuple[int, ...]  # host shape of the output (NCHW, or NC for Gemm)
    strips: Strips | None = None  # a Gemm's cube re-laid to fit the kernel registers
    # a Gemm over more features than a cube has channels (8192) reading its C x 1 x 1
    # input as a line of atoms (``geom`` is then the line's; see :func:`as_line`)
    line: bool = False


# ------------------------------------------------------------------ geometry

def _geometry(node: Node, graph: Graph) -> tuple[ConvGeom, int] | str:
    """The convolution a Conv or Gemm node is, or why it is none the DLA runs."""
    x = node.inputs[0]
    cube = source_cube(graph, x)
    if cube is None:
        return check_activation(graph, x) or f"input {x!r} is not a DLA cube"
    if node.op_type == "Gemm":
        wshape = graph.tensors[node.inputs[1]].shape
        k = wshape[0] if node.attrs.get("transB", 0) else wshape[1]
        c, h, w = cube
        return ConvGeom(c, h, w, int(k), h, w), 1
    _, cg, r, s = graph.tensors[node.inputs[1]].shape
    a = node.attrs
    pads = tuple(int(p) for p in a.get("pads", (0, 0, 0, 0)))
    geom = ConvGeom(cube[0], cube[1], cube[2], int(graph.tensors[node.inputs[1]].shape[0]),
                    int(r), int(s), tuple(a.get("strides", (1, 1))),
                    (pads[0], pads[1], pads[2], pads[3]), tuple(a.get("dilations", (1, 1))))
    return geom, int(a.get("group", 1))


def as_line(node: Node, g: ConvGeom, cfg: HwConfig) -> ConvGeom | None:
    """A Gemm over a ``C x 1 x 1`` cube of more than :data:`MAX_CHANNELS` channels as one
    over the same bytes read as a line of ``ceil(C / atom)`` pixels of ``atom`` channels
    (:meth:`accel.compiler.tensors.Region.surfaces_as_line`), whose strips then fit the
    kernel registers; None for any other."""
    if node.op_type != "Gemm" or (g.h, g.w) != (1, 1) or g.c <= MAX_CHANNELS:
        return None
    n = -(-g.c // cfg.atom_size)
    return ConvGeom(cfg.atom_size, 1, n, g.k, 1, n)


def line_weights(w: np.ndarray, c: int, atom: int) -> np.ndarray:
    """Weights ``[K, C, 1, 1]`` of the features re-laid for :func:`as_line`'s cube: feature
    ``f`` at lane ``f % atom`` of pixel ``f // atom`` (zeros on the last pixel's lanes
    past ``C``)."""
    n = -(-c // atom)
    flat = np.zeros((w.shape[0], n * atom), dtype=w.dtype)
    flat[:, :c] = w.reshape(w.shape[0], c)
    return flat.reshape(w.shape[0], n, atom).transpose(0, 2, 1)[:, :, None, :].copy()


def _strips(node: Node, g: ConvGeom, cfg: HwConfig) -> Strips | None:
    """How a Gemm's input cube is re-laid for kernels of at most MAX_KERNEL a side."""
    return strips((g.c, g.h, g.w), MAX_KERNEL, cfg.atom_size) if node.op_type == "Gemm" \
        else None


def check_geometry(g: ConvGeom) -> str | None:
    for name, v, limit in (("kernel height", g.r, MAX_KERNEL), ("kernel width", g.s, MAX_KERNEL),
                           ("input channels", g.c, MAX_CHANNELS),
                           ("output channels", g.k, MAX_CHANNELS)):
        if not 1 <= v <= limit:
            return f"{name} {v} outside 1..{limit}"
    if not all(1 <= v <= MAX_STRIDE for v in g.stride):
        return f"strides {g.stride} outside 1..{MAX_STRIDE}"
    if not all(1 <= v <= MAX_DILATION for v in g.dilation):
        return f"dilations {g.dilation} outside 1..{MAX_DILATION}"
    t, left, b, right = g.pads
    if not (0 <= t <= MAX_PAD_BEGIN and 0 <= left <= MAX_PAD_BEGIN):
        return f"pads top/left {(t, left)} outside 0..{MAX_PAD_BEGIN}"
    if not (0 <= b <= MAX_PAD_END and 0 <= right <= MAX_PAD_END):
        return f"pads bottom/right {(b, right)} outside 0..{MAX_PAD_END}"
    if min(g.out_hw) < 1:
        return f"the output would be empty ({g.out_hw})"
    return None


def block_unit(cfg: HwConfig, cg: int, kg: int) -> int:
    """Fewest groups whose input and output channels both fill whole atoms."""
    a = cfg.atom_size
    return math.lcm(a // math.gcd(cg, a), a // math.gcd(kg, a))


def _block_geom(g: ConvGeom, group: int, m: int) -> ConvGeom:
    cg, kg = g.c // group, g.k // group
    return ConvGeom(cg * m, g.h, g.w, kg * m, g.r, g.s, g.stride, g.pads, g.dilation)


@lru_cache(maxsize=1024)
def choose_block(cfg: HwConfig, g: ConvGeom, group: int) -> int | str:
    """Groups per block convolution, by estimated cycles; or why no blocking fits.

    Candidates: the smallest aligned block times powers of two, and all groups
    in one (dense block-diagonal) convolution.
    """
    if group == 1:
        return 1
    unit = block_unit(cfg, g.c // group, g.k // group)
    sizes = sorted({unit << i for i in range(16) if unit << i < group} | {group})
    best: tuple[int, int] | None = None
    reason = ""
    for m in sizes:
        plan = plan_conv(_block_geom(g, group, m), cfg)
        if isinstance(plan, str):
            reason = reason or plan
            continue
        blocks = ceil_div(group, m)
        cost = blocks * (plan.cycles + OP_OVERHEAD)
        if best is None or cost < best[0]:
            best = (cost, m)
    return best[1] if best is not None else reason


# ------------------------------------------------------------------ op-table entry

def check(node: Node, graph: Graph, cfg: HwConfig) -> str | None:
    x = node.inputs[0]
    why = check_activation(graph, x)
    if why and source_cube(graph, x) is None:
        return why
    if not graph.is_constant(node.inputs[1]):
        return "weights are not constant"
    if len(node.inputs) > 2 and node.inputs[2] and not graph.is_constant(node.inputs[2]):
        return "bias is not constant"
    a = node.attrs
    act = a.get("activation")
    if act not in ACTIVATIONS:
        return f"fused activation {act!r} not in {', '.join(str(v) for v in ACTIVATIONS[1:])}"
    if act == "Clip" and not float(a.get("activation_max") or 0) > 0:
        return f"fused Clip needs a positive upper bound, got {a.get('activation_max')!r}"
    if node.op_type == "Gemm":
        if len(graph.tensors[x].shape) != 2:
            return f"Gemm input rank {len(graph.tensors[x].shape)}, not 2"
        if a.get("transA", 0):
            return "transA=1 is not supported"
        if float(a.get("alpha", 1.0)) <= 0:
            return f"alpha={a.get('alpha')} must be positive"
        if len(node.inputs) > 2 and node.inputs[2]:
            k = _geometry(node, graph)
            bias = graph.tensors[node.inputs[2]]
            if not isinstance(k, str) and bias.size not in (1, k[0].k):
                return f"bias shape {tuple(bias.shape)} is not per output channel"
    elif len(graph.tensors[x].shape) != 4:
        return f"input rank {len(graph.tensors[x].shape)}: only 2-D convolution (NCHW)"
    geo = _geometry(node, graph)
    if isinstance(geo, str):
        return geo
    g, group = geo
    g = as_line(node, g, cfg) or g
    relaid = _strips(node, g, cfg)
    if relaid is not None:
        why = check_geometry(relaid.geom(g.k))
        if why:
            return (f"the {g.c}x{g.h}x{g.w} input cube (C x H x W) as {relaid.count} strips "
                    f"of {relaid.r}x{relaid.s}: {why}")
        g = relaid.geom(g.k)
    why = check_geometry(g)
    if why:
        return why
    if node.op_type == "Conv" and (g.c % group or g.k % group):
        return f"group={group} does not divide {g.c} input / {g.k} output channels"
    block = choose_block(cfg, g, group)
    if isinstance(block, str):
        return f"does not fit the CBUF in any tiling: {block}"
    if group == 1:
        plan = plan_conv(g, cfg)
        if isinstance(plan, str):
            return f"does not fit the CBUF in any tiling: {plan}"
    return None


def _weights_and_bias(node: Node, graph: Graph,
                      g: ConvGeom) -> tuple[np.ndarray, np.ndarray | None]:
    w = constant(graph, node.inputs[1]).astype(np.float64)
    b = constant(graph, node.inputs[2]) if len(node.inputs) > 2 else None
    b = None if b is None else b.astype(np.float64).reshape(-1)
    if node.op_type == "Gemm":
        a = node.attrs
        if not a.get("transB", 0):
            w = w.T
        w = (w * float(a.get("alpha", 1.0))).reshape(g.k, g.c, g.h, g.w)
        if b is not None:
            b = np.broadcast_to(b * float(a.get("beta", 1.0)), (g.k,)).copy()
    return w, b


def _activation_stage(node: Node, graph: Graph, k: int) -> XStage | None:
    """X2 for a fused PReLU / LeakyReLU: slopes in the multiplier's PReLU mode."""
    a = node.attrs
    act = a.get("activation")
    if act == "LeakyRelu":
        slopes = np.full(k, float(a.get("activation_alpha", 0.01)))
    elif act == "PRelu":
        slopes = np.broadcast_to(np.asarray(a["activation_slope"], np.float64).reshape(-1),
                                 (k,)).astype(np.float64)
    else:
        return None
    q, truncate = int16_factor(slopes)
    return XStage(mul=Operand.kernel(q), prelu=True, truncate=truncate)


def plan(node: Node, graph: Graph, cfg: HwConfig, scales) -> ConvPlan:
    g, group = _geometry(node, graph)
    w, b = _weights_and_bias(node, graph, g)
    line = as_line(node, g, cfg)
    if line is not None:
        w, g = line_weights(w, g.c, cfg.atom_size), line
    act = node.attrs.get("activation")
    x, y = node.inputs[0], node.outputs[0]
    quant = conv_quant(w, b, scales.scale(x), scales.scale(y), act in ("Relu", "Clip"),
                       name=node.name,
                       relu_max=node.attrs.get("activation_max") if act == "Clip" else None,
                       in_zero=zero_point_of(scales, x), out_zero=zero_point_of(scales, y))
    block = choose_block(cfg, g, group)
    return ConvPlan(g, group, block, quant, sdp_program(quant, _activation_stage(node, graph, g.k)),
                    out_shape(graph, y), _strips(node, g, cfg), line is not None)


def sdp_program(quant: ConvQuant, activation: XStage | None = None) -> SdpProgram:
    """The SDP behind a convolution: X1 (bias, multiplier, truncate, ReLU), X2 (the cap
    of a capped ReLU, or ``activation``'s PReLU slopes) and the converter (offset: minus
    the output zero point)."""
    x1 = XStage(alu_op="sum" if quant.bias is not None else None,
                alu=None if quant.bias is None else Operand.kernel(quant.bias),
                alu_shift=quant.bias_shift, mul=Operand.kernel(quant.mul),
                truncate=quant.mul_shift, relu=quant.relu)
    x2 = activation
    if quant.clip_max is not None:
        x2 = XStage(alu_op="min", alu=Operand.layer(quant.clip_max))
    return SdpProgram(x1, x2, Converter(quant.cvt_offset, quant.cvt_scale, quant.cvt_shift))


def block_diagonal(w: np.ndarray, group: int, g0: int, g1: int) -> np.ndarray:
    """Block-diagonal dense weights of groups ``[g0, g1)`` from grouped ``w`` [K, C/G, R, S]."""
    kg = w.shape[0] // group
    cg = w.shape[1]
    n = g1 - g0
    out = np.zeros((n * kg, n * cg, *w.shape[2:]), dtype=w.dtype)
    for i in range(n):
        out[i * kg:(i + 1) * kg, i * cg:(i + 1) * cg] = w[(g0 + i) * kg:(g0 + i + 1) * kg]
    return out


def lower_conv(lo, node: Node, label: str, src, dst, geom: ConvGeom, weight: np.ndarray,
               clip_truncate: int, program: SdpProgram, tiles: TilePlan,
               pad_value: int = 0) -> None:
    """Emit the tiles of one (block) convolution reading ``src`` and writing ``dst``;
    padded taps read ``pad_value`` (the input's zero point)."""
    cfg = lo.cfg
    slices: dict[tuple[int, int], Weights] = {}
    for i, t in enumerate(tiles.tiles):
        k0, k1 = t.kernels
        if (k0, k1) not in slices:
            data = pack_dc_weights(weight[k0:k1], cfg, pad_to=cbuf.WEIGHT_PAD).tobytes()
            tag = f"{label}.w" if (k0, k1) == (0, geom.k) else f"{label}.w{k0}"
            slices[(k0, k1)] = Weights(tag, data, k1 - k0, geom.bytes_per_kernel)
        (o0, o1), (iy0, iy1) = t.out_rows, t.in_rows
        src_t = src.rows(iy0, iy1 - iy0)
        dst_t = dst.channels(k0, k1 - k0).rows(o0, o1 - o0)
        prog = program if (k0, k1) == (0, geom.k) else program.per_kernel_slice(k0, k1)
        op_name = label if len(tiles.tiles) == 1 else f"{label}.t{i}"
        lo.emit(ConvOp(op_name, node.name, src_t, dst_t, slices[(k0, k1)],
                       (k1 - k0, geom.c, geom.r, geom.s), geom.stride,
                       (t.pad_top, geom.pads[1], t.pad_bottom, geom.pads[3]), geom.dilation,
                       clip_truncate, prog,
                       CbufPlan(t.data_banks, t.weight_banks, t.entries_per_slice,
                                t.weight_reuse, t.skip_weight_release), pad_value))


def lower(lo, node: Node, p: ConvPlan) -> None:
    src, dst = lo.region(node.inputs[0]), lo.region(node.outputs[0])
    g, q = p.geom, p.quant
    if p.line:
        if src.layout.surf_stride != src.layout.atom_bytes:
            packed = lo.temp(lo.label(node, "in"), *src.shape)
            lo.copy(node, src, packed)
            src = packed
        src = src.surfaces_as_line()
    if src.shape != (g.c, g.h, g.w):
        raise ValueError(f"input cube {src.shape} is not the planned {(g.c, g.h, g.w)}")
    if p.strips is not None:
        g = p.strips.geom(g.k)
        lower_conv(lo, node, lo.label(node), p.strips.relay(lo, node, src), dst, g,
                   p.strips.weights(q.weight), q.clip_truncate, p.program, plan_conv(g, lo.cfg),
                   q.pad_value)
        return
    if p.group == 1:
        tiles = plan_conv(g, lo.cfg)
        lower_conv(lo, node, lo.label(node), src, dst, g, q.weight, q.clip_truncate,
                   p.program, tiles, q.pad_value)
        return
    cg, kg = g.c // p.group, g.k // p.group
    for g0 in range(0, p.group, p.block):
        g1 = min(p.group, g0 + p.block)
        bg = _block_geom(g, p.group, g1 - g0)
        tiles = plan_conv(bg, lo.cfg)
        lower_conv(lo, node, lo.label(node, f"g{g0}"), src.channels(g0 * cg, bg.c),
                   dst.channels(g0 * kg, bg.k), bg, block_diagonal(q.weight, p.group, g0, g1),
                   q.clip_truncate, p.program.per_kernel_slice(g0 * kg, g1 * kg), tiles,
                   q.pad_value)


def reference(p: ConvPlan, inputs: list[np.ndarray]) -> list[np.ndarray]:
    g = p.geom
    x = np.asarray(inputs[0])
    if p.line:      # feature f at lane f % atom of pixel f // atom (zeros past C)
        flat = np.zeros(g.c * g.w, dtype=x.dtype)
        flat[:x.size] = x.reshape(-1)
        x = flat.reshape(g.w, g.c).T
    x = x.reshape(1, g.c, g.h, g.w)
    y = int8_ref.conv_program_int8(x, p.quant.weight, p.program, stride=g.stride, pads=g.pads,
                                   dilation=g.dilation, group=p.group,
                                   pad_value=p.quant.pad_value,
                                   clip_truncate=p.quant.clip_truncate)
    return [y.reshape(p.out_shape)]


ENTRY = OpEntry(("Conv", "Gemm"), check, plan, lower, reference)
