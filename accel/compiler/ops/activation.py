"""Activations and per-channel affine ops that did not fuse into a convolution, on the SDP.

Each reads its input from memory and writes its output through the SDP
(:func:`accel.compiler.ops.sdp_math.affine`):

* Relu, LeakyRelu, PRelu (constant slopes per channel): the multiplier's PReLU
  mode scales only negative values;
* Clip(lo, hi): an ALU maximum (in input units) and minimum (in output units);
* BatchNormalization (inference): ``A * x + B`` per channel;
* HardSigmoid ``clip(alpha * x + beta, 0, 1)``: ReLU for the lower bound and
  int8 saturation for the upper one, which needs the output scale 1/127
  (calibration fixes it: ``fixed_scales``);
* HardSwish ``x * HardSigmoid(x)``: two SDP passes, which every preset can run,
  the HardSigmoid into a temporary (scale 1/127), then a per-element product
  with the input.  Channel-group equalization
  (:mod:`tengine_host.quant.equalize_groups`) may give it factors per channel,
  ``channel_scale[c] * HardSwish(input_scale[c] * x)``: the gate's multiplier
  takes ``input_scale`` (it is per channel already), the product's free X2
  multiplier both (so the input may not have a zero point, whose correction
  would need that multiplier).  Without factors it is a function of its int8
  input alone, and on presets whose SDP has no LUT (nv_small, nv_small_256,
  nv_medium_512) the CDP computes it as one exact table (:mod:`.lookup`): one
  pass instead of two, the output rounded once from the exact function
  (:func:`table_route`).  Where the SDP has a LUT the two passes stay: there
  the table would fuse into the convolution's pass, saving 2.5 % of the
  estimated cycles (the text classifier on nv_large), and the simulator
  computes that pass slower than the two narrow ones it replaces (measured
  2026-12-06: PP-OCRv4 det 2.9 -> 3.3x onnxruntime on nv_large).  Either way the input's zero
  point is a product's (0 or ``-2**k``, :func:`zero_pow2`): calibration does
  not know the preset, and a table takes any.

Zero points (:mod:`.sdp_math`): X1's ALU takes the input's off before the
multiplier (Clip's lower bound, an ALU maximum, compares codes instead and
the offset is taken off after), the converter adds the output's.  A
HardSigmoid output at scale ``1/255`` with zero point -128 still saturates at
exactly 1.
"""

from __future__ import annotations

import numpy as np

from accel.compiler.ops import lookup
from accel.compiler.ops.base import (
    OpEntry,
    check_activation,
    check_channel_factors,
    constant,
    out_shape,
)
from accel.compiler.ops.sdp_math import (
    SdpMathError,
    SdpPlan,
    SdpStep,
    affine,
    product,
    single,
)
from accel.compiler.program import SdpProgram
from accel.compiler.scales import zero_point_of
from accel.config import HwConfig
from accel.ir import Graph, Node

UNIT_SCALE = 1.0 / 127.0        # outputs in [0, 1] use all of int8's positive range
HARD_SIGMOID = {"alpha": 0.2, "beta": 0.5}
HARD_SWISH = {"alpha": 1.0 / 6.0, "beta": 0.5}
#: a HardSwish's factors per channel (not ONNX attributes): ``channel_scale[c] *
#: HardSwish(input_scale[c] * x)``
CHANNEL_FACTORS = ("input_scale", "channel_scale")


def _channels(graph: Graph, node: Node) -> int:
    return int(graph.tensors[node.inputs[0]].shape[1])


def _slopes(node: Node, graph: Graph) -> np.ndarray | None:
    """PRelu slopes as one value per channel (or a scalar); None when they vary otherwise."""
    v = constant(graph, node.inputs[1])
    if v is None:
        return None
    c = _channels(graph, node)
    if v.size == 1:
        return v.reshape(1).astype(np.float64)
    if v.size == c and v.reshape(-1).size == c and (v.ndim == 1 and len(
            graph.tensors[node.inputs[0]].shape) == 2 or v.shape in ((c, 1, 1), (1, c, 1, 1))):
        return v.reshape(c).astype(np.float64)
    return None


def _clip_bounds(node: Node, graph: Graph) -> tuple[float, float] | None:
    lo, hi = -np.inf, np.inf
    for idx, attr, default in ((1, "min", -np.inf), (2, "max", np.inf)):
        if len(node.inputs) > idx and node.inputs[idx]:
            v = constant(graph, node.inputs[idx])
            if v is None or v.size != 1:
                return None
            val = float(v)
        else:
            val = node.attrs.get(attr)
            val = default if val is None else float(val)
        if idx == 1:
            lo = val
        else:
            hi = val
    return lo, hi


def check(node: Node, graph: Graph, cfg: HwConfig) -> str | None:
    why = check_activation(graph, node.inputs[0])
    if why:
        return why
    op = node.op_type
    if op == "PRelu" and _slopes(node, graph) is None:
        return "slopes are not constant per channel"
    if op == "Clip":
        b = _clip_bounds(node, graph)
        if b is None:
            return "bounds are not constant scalars"
        if not b[0] < b[1]:
            return f"empty range [{b[0]}, {b[1]}]"
    if op == "BatchNormalization":
        if any(not graph.is_constant(t) for t in node.inputs[1:5]):
            return "statistics are not constant"
        if len([o for o in node.outputs if o]) > 1:
            return "training outputs (running mean/var) are not produced"
    if op == "HardSwish":
        why = check_channel_factors(node, CHANNEL_FACTORS, _channels(graph, node))
        if why:
            return why
    if op in ("HardSigmoid", "HardSwish"):
        a = node.attrs.get("alpha", HARD_SIGMOID["alpha"])
        if op == "HardSwish":
            a = HARD_SWISH["alpha"]
        if not a > 0:
            return f"alpha={a} must be positive"
    return None


def _hard_sigmoid(node: Node, s_in: float, s_out: float, z_in: int = 0,
                  z_out: int = 0, input_scale: np.ndarray | None = None) -> SdpProgram:
    if round(1.0 / s_out) + z_out < 127:
        raise SdpMathError(f"output scale {s_out:g} with zero point {z_out}: 1 is code "
                           f"{round(1.0 / s_out) + z_out} < 127, so int8 saturation would "
                           f"not clamp at 1 (calibration fixes the scale to 1/127, or 1/255 "
                           f"with zero point -128)")
    defaults = HARD_SWISH if node.op_type == "HardSwish" else HARD_SIGMOID
    alpha = float(node.attrs.get("alpha", defaults["alpha"])) \
        if node.op_type == "HardSigmoid" else defaults["alpha"]
    beta = float(node.attrs.get("beta", defaults["beta"])) \
        if node.op_type == "HardSigmoid" else defaults["beta"]
    if input_scale is not None:
        alpha = alpha * np.asarray(input_scale, np.float64)
    return affine(s_in, s_out, alpha, beta, relu=True, z_in=z_in, z_out=z_out)


def table_route(node: Node, cfg: HwConfig) -> bool:
    """Whether ``node`` runs as the CDP's exact table (a HardSwish without factors per
    channel, on a preset whose SDP has no LUT but which has a CDP; see the module
    docstring)."""
    return (node.op_type == "HardSwish" and cfg.cdp and not lookup.sdp_route(cfg)
            and all(node.attrs.get(a) is None for a in CHANNEL_FACTORS))


def plan(node: Node, graph: Graph, cfg: HwConfig, scales):
    if table_route(node, cfg):
        return lookup.plan(node, graph, cfg, scales)
    op = node.op_type
    x, out = node.inputs[0], node.outputs[0]
    s_in, s_out = scales.scale(x), scales.scale(out)
    zp = {"z_in": zero_point_of(scales, x), "z_out": zero_point_of(scales, out)}
    shape = out_shape(graph, out)
    try:
        if op == "Relu":
            return single(0, affine(s_in, s_out, 1.0, relu=True, **zp), shape)
        if op == "LeakyRelu":
            alpha = float(node.attrs.get("alpha", 0.01))
            return single(0, affine(s_in, s_out, 1.0, prelu=alpha, **zp), shape)
        if op == "PRelu":
            return single(0, affine(s_in, s_out, 1.0, prelu=_slopes(node, graph), **zp), shape)
        if op == "Clip":
            lo, hi = _clip_bounds(node, graph)
            cap = None if np.isinf(hi) else hi
            if lo == 0:
                return single(0, affine(s_in, s_out, 1.0, relu=True, cap=cap, **zp), shape)
            floor = None if np.isinf(lo) else lo    # an ALU maximum on the input codes
            return single(0, affine(s_in, s_out, 1.0, cap=cap, floor=floor, **zp), shape)
        if op == "BatchNormalization":
            g, b, mean, var = (constant(graph, t).astype(np.float64).reshape(-1)
                               for t in node.inputs[1:5])
            a = g / np.sqrt(var + float(node.attrs.get("epsilon", 1e-5)))
            return single(0, affine(s_in, s_out, a, b - mean * a, **zp), shape)
        if op == "HardSigmoid":
            return single(0, _hard_sigmoid(node, s_in, s_out, **zp), shape)
        if op == "HardSwish":
            # the gate into a symmetric temporary (a product's operand has no zero point)
            inward, outward = (node.attrs.get(a) for a in CHANNEL_FACTORS)
            hs = _hard_sigmoid(node, s_in, UNIT_SCALE, z_in=zp["z_in"], input_scale=inward)
            factors = [np.asarray(f, np.float64) for f in (inward, outward) if f is not None]
            factor = np.prod(factors, axis=0) if factors else None
            mul = product(0, 1, "element", s_in * UNIT_SCALE / s_out, zp["z_in"], 0,
                          zp["z_out"], channel=factor)
            return SdpPlan((SdpStep(("in", 0), hs), SdpStep(("in", 0), mul,
                                                             ((1, ("step", 0)),))), shape)
    except SdpMathError as exc:
        raise ValueError(str(exc)) from None
    raise ValueError(f"op {op} has no SDP program")


def fixed_scales(node: Node, graph: Graph) -> dict[str, float]:
    """Output scales the lowering needs regardless of calibration."""
    return {node.outputs[0]: UNIT_SCALE} if node.op_type == "HardSigmoid" else {}


def zero_pow2(node: Node, graph: Graph) -> list[str]:
    """HardSwish's input: a product's input (:func:`.sdp_math.product`) where the HardSwish
    multiplies it by its gate, and kept so where it is a table (see the module docstring)."""
    return [node.inputs[0]] if node.op_type == "HardSwish" else []


def zero_free(node: Node, graph: Graph) -> list[str]:
    """A HardSwish scaled per channel: X2 multiplies, none is left for the input's zero point."""
    return [node.inputs[0]] if node.op_type == "HardSwish" and any(
        node.attrs.get(a) is not None for a in CHANNEL_FACTORS) else []


ENTRY = OpEntry(("Relu", "LeakyRelu", "PRelu", "Clip", "BatchNormalization", "HardSigmoid",
                 "HardSwish"), check, plan, lookup.lower, lookup.reference,
                fixed_scales=fixed_scales, zero_free=zero_free, zero_pow2=zero_pow2)
