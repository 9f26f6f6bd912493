"""The single answer to "can the DLA run this node?".

``supports(node, graph, cfg)`` is asked by the host partitioner and asserted
by the compiler; there is no second list of supported operators anywhere.
It returns ``(True, "")`` or ``(False, reason)`` where the reason names the
attribute and the value that the hardware cannot take.

Limits come from the register field widths of NVDLA's RDL (CDMA/CSC):
stride 3 bits (1..8), left/top padding 5 bits (0..31), right/bottom padding
6 bits (0..63), dilation 5 bits (1..32), kernel size 5 bits (1..32), cube
width/height/channels 13 bits (1..8192).
"""

from __future__ import annotations

from collections.abc import Callable

from accel.config import HwConfig
from accel.layout import ceil_div
from tengine_host.ir import Graph, Node

MAX_STRIDE = 8
MAX_PAD_BEGIN = 31
MAX_PAD_END = 63
MAX_DILATION = 32
MAX_KERNEL = 32
MAX_CUBE_DIM = 8192
FUSABLE_ACTIVATIONS = (None, "Relu", "Clip")  # Clip: ReLU capped (X2 MIN)

Verdict = tuple[bool, str]


def conv_geometry(node: Node, graph: Graph) -> dict:
    """Normalized geometry of a Conv or Gemm node as a direct convolution.

    Gemm ``Y = X @ W^T`` on an ``[N, F]`` input becomes a 1x1 convolution over
    a 1 x 1 x F cube.
    """
    if node.op_type == "Conv":
        _, c, h, w = graph.tensors[node.inputs[0]].shape
        k, cg, r, s = graph.tensors[node.inputs[1]].shape
        pads = list(node.attrs.get("pads", [0, 0, 0, 0]))
        return dict(c=c, h=h, w=w, k=k, r=r, s=s, group=int(node.attrs.get("group", 1)),
                    stride=tuple(node.attrs.get("strides", (1, 1))),
                    dilation=tuple(node.attrs.get("dilations", (1, 1))),
                    pad_top=pads[0], pad_left=pads[1], pad_bottom=pads[2], pad_right=pads[3])
    if node.op_type == "Gemm":
        f = graph.tensors[node.inputs[0]].shape[-1]
        wshape = graph.tensors[node.inputs[1]].shape
        k = wshape[0] if node.attrs.get("transB", 0) else wshape[1]
        return dict(c=f, h=1, w=1, k=k, r=1, s=1, group=1, stride=(1, 1), dilation=(1, 1),
                    pad_top=0, pad_left=0, pad_bottom=0, pad_right=0)
    raise ValueError(f"node {node.name!r}: op {node.op_type!r} is not a convolution")


def output_hw(g: dict) -> tuple[int, int]:
    (sy, sx), (dy, dx) = g["stride"], g["dilation"]
    oh = (g["h"] + g["pad_top"] + g["pad_bottom"] - ((g["r"] - 1) * dy + 1)) // sy + 1
    ow = (g["w"] + g["pad_left"] + g["pad_right"] - ((g["s"] - 1) * dx + 1)) // sx + 1
    return oh, ow


def cbuf_banks(cfg: HwConfig, g: dict) -> tuple[int, int, int]:
    """(data banks, weight banks, entries per slice) to hold the whole layer."""
    entries_per_slice = g["w"] * ceil_div(g["c"], cfg.atomic_c)
    data_banks = ceil_div(entries_per_slice * g["h"], cfg.cbuf_bank_depth)
    weight_bytes = g["k"] * g["c"] * g["r"] * g["s"]
    weight_banks = ceil_div(weight_bytes, cfg.cbuf_bank_bytes)
    return data_banks, weight_banks, entries_per_slice


def _check_conv_like(node: Node, graph: Graph, cfg: HwConfig) -> Verdict:
    if not graph.is_constant(node.inputs[1]):
        return False, "weights are not constant"
    if len(node.inputs) > 2 and node.inputs[2] and not graph.is_constant(node.inputs[2]):
        return False, "bias is not constant"
    act = node.attrs.get("activation")
    if act not in FUSABLE_ACTIVATIONS:
        return False, f"fused activation {act!r} not in Relu, Clip"
    if act == "Clip" and not float(node.attrs.get("activation_max") or 0) > 0:
        return False, (f"fused Clip needs a positive upper bound, got "
                       f"{node.attrs.get('activation_max')!r}")
    g = conv_geometry(node, graph)
    if g["group"] != 1:
        return False, f"group={g['group']}: grouped convolution lands later (only group=1)"
    for key, limit in (("c", MAX_CUBE_DIM), ("h", MAX_CUBE_DIM), ("w", MAX_CUBE_DIM),
                       ("k", MAX_CUBE_DIM), ("r", MAX_KERNEL), ("s", MAX_KERNEL)):
        if not 1 <= g[key] <= limit:
            return False, f"{key}={g[key]} outside 1..{limit}"
    for key, limit in (("pad_top", MAX_PAD_BEGIN), ("pad_left", MAX_PAD_BEGIN),
                       ("pad_bottom", MAX_PAD_END), ("pad_right", MAX_PAD_END)):
        if not 0 <= g[key] <= limit:
            return False, f"{key}={g[key]} outside 0..{limit}"
    if not all(1 <= v <= MAX_STRIDE for v in g["stride"]):
        return False, f"strides={g['stride']} outside 1..{MAX_STRIDE}"
    if not all(1 <= v <= MAX_DILATION for v in g["dilation"]):
        return False, f"dilations={g['dilation']} outside 1..{MAX_DILATION}"
    if min(output_hw(g)) < 1:
        return False, f"output would be empty (geometry {g})"
    data_banks, weight_banks, _ = cbuf_banks(cfg, g)
    if data_banks + weight_banks > cfg.cbuf_bank_number:
        return False, (f"needs {data_banks} data + {weight_banks} weight CBUF banks, "
                       f"{cfg.name} has {cfg.cbuf_bank_number} (CBUF tiling lands later)")
    return True, ""


def _conv(node: Node, graph: Graph, cfg: HwConfig) -> Verdict:
    x = graph.tensors[node.inputs[0]].shape
    if len(x) != 4:
        return False, f"input rank {len(x)}: only 2-D convolution (NCHW) is supported"
    return _check_conv_like(node, graph, cfg)


def _gemm(node: Node, graph: Graph, cfg: HwConfig) -> Verdict:
    x = graph.tensors[node.inputs[0]].shape
    if len(x) != 2:
        return False, f"input rank {len(x)}: Gemm needs a 2-D input"
    if node.attrs.get("transA", 0):
        return False, "transA=1 is not supported"
    if float(node.attrs.get("alpha", 1.0)) <= 0:
        return False, f"alpha={node.attrs.get('alpha')} must be positive"
    if len(node.inputs) > 2 and node.inputs[2]:
        bias = graph.tensors[node.inputs[2]]
        if bias.size not in (1, conv_geometry(node, graph)["k"]):
            return False, f"bias shape {bias.shape} is not per output channel"
    return _check_conv_like(node, graph, cfg)


SUPPORTED: dict[str, Callable[[Node, Graph, HwConfig], Verdict]] = {
    "Conv": _conv,
    "Gemm": _gemm,
}


def supports(node: Node, graph: Graph, cfg: HwConfig) -> Verdict:
    """Can ``cfg``'s accelerator run ``node``?  ``(ok, reason)``."""
    check = SUPPORTED.get(node.op_type)
    if check is None:
        return False, f"op {node.op_type} has no NVDLA lowering yet"
    if any(graph.tensors[t].dtype != "float32" for t in node.inputs[:1]):
        return False, f"input dtype {graph.tensors[node.inputs[0]].dtype} is not float32"
    return check(node, graph, cfg)
