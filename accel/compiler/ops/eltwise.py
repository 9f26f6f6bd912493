"""Add, Sub, Mul, Div, Max, Min on the SDP (X1/X2 from memory, :mod:`.sdp_math`).

* two tensors of one shape: the second is a per-element operand read through
  SDP_RDMA (NVDLA's element-wise scheme, X1 per-element; works without the
  Y unit, so on nv_small).  Add/Sub/Max/Min inputs share one scale after
  calibration (``ties``), so the ALU adds raw integers; Mul scales in the
  converter.  Div of two tensors is refused.
* a tensor and a per-channel activation ``[1, C, 1, 1]`` (squeeze-excite:
  ``x * gate``): the gate is a per-kernel operand read from memory.
* a tensor and a constant (scalar or per channel): an affine program with the
  constant in registers or as per-kernel int16 operands.

A fused ReLU (``attrs["activation"]``, from the host's fuse pass) is applied
last, before the converter.  A sum of two tensors may scale its first input per
channel (``input_scale``, set by channel-group equalization,
:mod:`tengine_host.quant.equalize_groups`: a residual stream's tensors each keep
their own channel scales): X1 multiplies it per channel on its way to the
second input's grid, whose codes X2 adds as they are (so that one has no zero
point).

Zero points (:mod:`.sdp_math`): the inputs of a difference, maximum or minimum
share one; a sum takes any two (at one scale, or the one with a zero point
streamed first at two scales: a residual's one-signed shortcut may have one
while the branch it is added to is signed); of the two inputs of a product one
may have one (``zero_exclusive``, :func:`.sdp_math.product`); a
sum, maximum or minimum with a fused PReLU keeps all its tensors symmetric
(its X2 stage holds the slopes: ``zero_free``).
"""

from __future__ import annotations

import numpy as np

from accel.compiler.ops.base import (
    OpEntry,
    check_activation,
    check_channel_factors,
    constant,
    out_shape,
)
from accel.compiler.ops.sdp_math import SdpMathError, affine, binary, product, single
from accel.compiler.ops.sdp_math import lower_steps as lower
from accel.compiler.ops.sdp_math import reference_steps as reference
from accel.compiler.program import SdpProgram
from accel.compiler.scales import zero_point_of
from accel.config import HwConfig
from accel.ir import Graph, Node

OPS = {"Add": "sum", "Sub": "sub", "Mul": "mul", "Div": "div", "Max": "max", "Min": "min"}
TIED = ("Add", "Sub", "Max", "Min")


def _per_channel(value: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """A constant as one value per channel of an NCHW tensor ``shape`` (None: not so)."""
    v = np.asarray(value, dtype=np.float64)
    c = shape[1]
    if v.size == 1:
        return v.reshape(1)
    if len(shape) == 4 and v.shape in ((c,), (c, 1, 1), (1, c, 1, 1)) and v.size == c:
        return v.reshape(c)
    if len(shape) == 2 and v.shape in ((c,), (1, c)):
        return v.reshape(c)
    return None


def _classify(node: Node, graph: Graph) -> tuple[str, int, int | None] | str:
    """``(kind, main, other)``: kind tensor / channel (per-channel activation) / const."""
    if len(node.inputs) != 2:
        return f"{len(node.inputs)} inputs (two expected)"
    a, b = node.inputs
    shape = tuple(graph.tensors[node.outputs[0]].shape)
    consts = [graph.is_constant(t) for t in (a, b)]
    if all(consts):
        return "both inputs are constants"
    if any(consts):
        i_c = consts.index(True)
        if node.op_type in ("Sub", "Div") and i_c == 0:
            return f"{node.op_type} with the constant first"
        if node.op_type in ("Max", "Min"):
            return f"{node.op_type} with a constant"
        if tuple(graph.tensors[node.inputs[1 - i_c]].shape) != shape:
            return "the tensor input is broadcast"
        if _per_channel(constant(graph, node.inputs[i_c]), shape) is None:
            return (f"constant of shape {tuple(graph.tensors[node.inputs[i_c]].shape)} is "
                    f"neither a scalar nor per channel")
        return "const", 1 - i_c, i_c
    sa, sb = (tuple(graph.tensors[t].shape) for t in (a, b))
    if sa == sb == shape:
        if node.op_type == "Div":
            return "Div of two tensors"
        return "tensor", 0, 1
    if node.op_type in ("Mul", "Add") and len(shape) == 4:
        for main, other in ((0, 1), (1, 0)):
            s_main, s_other = (sa, sb) if main == 0 else (sb, sa)
            if s_main == shape and s_other == (shape[0], shape[1], 1, 1):
                return "channel", main, other
    return f"input shapes {sa} and {sb} broadcast in a way the SDP does not"


def check(node: Node, graph: Graph, cfg: HwConfig) -> str | None:
    for t in node.inputs:
        if t and not graph.is_constant(t):
            why = check_activation(graph, t)
            if why:
                return why
    kind = _classify(node, graph)
    if isinstance(kind, str):
        return kind
    act = node.attrs.get("activation")
    if node.attrs.get("input_scale") is not None:
        if node.op_type != "Add" or kind[0] != "tensor" or act not in (None, "Relu"):
            return ("input_scale on a sum of two tensors of one shape (ReLU fused at most) "
                    "only")
        why = check_channel_factors(node, ("input_scale",),
                                    int(graph.tensors[node.outputs[0]].shape[1]))
        if why:
            return why
    if act not in (None, "Relu", "PRelu", "LeakyRelu"):
        return f"fused activation {act!r} (Relu, PRelu or LeakyRelu)"
    if act in ("PRelu", "LeakyRelu") and (node.op_type not in ("Add", "Max", "Min")
                                          or kind[0] == "const"):
        return (f"fused {act} on {node.op_type} of two tensors only (Add, Max, Min): the "
                f"SDP program of this one has no stage left for it")
    return None


def plan(node: Node, graph: Graph, cfg: HwConfig, scales):
    kind, main, other = _classify(node, graph)
    relu = node.attrs.get("activation") == "Relu"
    op = OPS[node.op_type]
    out = node.outputs[0]
    shape = out_shape(graph, out)
    s_out, z_out = scales.scale(out), zero_point_of(scales, out)
    try:
        if kind == "const":
            c = _per_channel(constant(graph, node.inputs[other]), shape)
            x = node.inputs[main]
            s_in, z_in = scales.scale(x), zero_point_of(scales, x)
            if op == "mul":
                prog = affine(s_in, s_out, c, relu=relu, z_in=z_in, z_out=z_out)
            elif op == "div":
                prog = affine(s_in, s_out, 1.0 / c, relu=relu, z_in=z_in, z_out=z_out)
            else:
                prog = affine(s_in, s_out, np.ones_like(c), c if op == "sum" else -c, relu=relu,
                              z_in=z_in, z_out=z_out)
            return single(main, prog, shape)
        mode = "element" if kind == "tensor" else "kernel"
        if op == "mul":
            return single(*_product(node, scales, kind, main, other, relu, mode), shape)
        a, b = ((i, scales.scale(node.inputs[i]), zero_point_of(scales, node.inputs[i]))
                for i in (main, other))
        scaled = node.attrs.get("input_scale")
        if op == "sum" and b[2] and not a[2] and kind == "tensor" and scaled is None:
            a, b = b, a         # a sum at two scales reads the input with a zero point first
        first, prog = binary(op, a, b, s_out, relu=relu, mode=mode,
                             slopes=_prelu_slopes(node, shape[1]), z_out=z_out,
                             main_scale=scaled)
        return single(first, prog, shape)
    except SdpMathError as exc:
        raise ValueError(str(exc)) from None


def _product(node: Node, scales, kind: str, main: int, other: int, relu: bool,
             mode: str) -> tuple[int, SdpProgram]:
    """``a * b`` of two tensors (:func:`.sdp_math.product`); at most one of them may have
    a zero point."""
    z = [zero_point_of(scales, t) for t in node.inputs]
    if z[main] and z[other]:
        raise SdpMathError(f"{node.op_type}: both inputs have zero points ({z[main]} and "
                           f"{z[other]}); the SDP can take off only one (re-run 'opendla "
                           f"quantize')")
    out = node.outputs[0]
    ratio = scales.scale(node.inputs[main]) * scales.scale(node.inputs[other]) / scales.scale(out)
    return main, product(main, other, mode, ratio, z[main], z[other],
                         zero_point_of(scales, out), relu=relu)


def _prelu_slopes(node: Node, channels: int) -> np.ndarray | None:
    a = node.attrs
    if a.get("activation") == "LeakyRelu":
        return np.array([float(a.get("activation_alpha", 0.01))])
    if a.get("activation") == "PRelu":
        v = np.asarray(a["activation_slope"], np.float64).reshape(-1)
        return v if v.size in (1, channels) else np.broadcast_to(v, (channels,)).copy()
    return None


def ties(node: Node, graph: Graph) -> list[list[str]]:
    if node.op_type in TIED and not any(graph.is_constant(t) for t in node.inputs):
        return [list(node.inputs)]
    return []


def zero_ties(node: Node, graph: Graph) -> list[list[str]]:
    """A difference, maximum or minimum compares or cancels the codes: one zero point.  A
    sum of two same-shape tensors need not share it - the excess of any two is one
    constant - and at two scales (a residual's one-signed shortcut beside a signed
    branch) it adds on a fine grid, the input with the zero point streamed first."""
    kind = _classify(node, graph)
    if node.op_type == "Add" and not isinstance(kind, str) and kind[0] == "tensor":
        return []
    return ties(node, graph)


def zero_free(node: Node, graph: Graph) -> list[str]:
    """Every tensor of a sum, maximum or minimum with a fused PReLU, whose X2 stage has no
    room left for zero points; the second input of a sum scaling its first per channel."""
    kind = _classify(node, graph)
    if isinstance(kind, str) or kind[0] == "const" or node.op_type == "Mul":
        return []
    if node.attrs.get("activation") in ("PRelu", "LeakyRelu"):
        return [*node.inputs, *node.outputs]
    if node.attrs.get("input_scale") is not None:   # X2 adds the second input's codes
        return [node.inputs[1]]
    return []


def zero_exclusive(node: Node, graph: Graph) -> list[list[str]]:
    """The two inputs of a product of two tensors: one may have a zero point, the main
    (full) input preferred - its values spread over a long tail, where a finer step helps
    most - then the operand (a squeeze-excite gate)."""
    kind = _classify(node, graph)
    if node.op_type != "Mul" or isinstance(kind, str) or kind[0] == "const":
        return []
    return [[node.inputs[kind[1]], node.inputs[kind[2]]]]


def zero_pow2(node: Node, graph: Graph) -> list[str]:
    """The inputs of a product of two tensors: X2 takes a zero point ``-2**k`` off by
    adding the other input shifted by ``k`` (:func:`.sdp_math.product`)."""
    kind = _classify(node, graph)
    if node.op_type != "Mul" or isinstance(kind, str) or kind[0] == "const":
        return []
    return list(node.inputs)


ENTRY = OpEntry(tuple(OPS), check, plan, lower, reference, ties=ties, zero_ties=zero_ties,
                zero_free=zero_free, zero_exclusive=zero_exclusive, zero_pow2=zero_pow2)
