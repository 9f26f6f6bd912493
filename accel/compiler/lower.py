"""Lowering of a host subgraph to DLA layers (conv + SDP), before emission.

Each Conv / Gemm node (with its fused ReLU) becomes one :class:`ConvLayer`:
a direct convolution on CDMA/CSC/CMAC/CACC whose output streams on the fly
into SDP X1 (per-kernel bias + multiplier + truncate + ReLU) and the output
converter, written to memory as an int8 feature cube.  The plan records the
quantization parameters and the memory layouts; :mod:`accel.compiler.emit`
turns it into a loadable.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from accel.compiler.quantize import ConvQuant, activation_scale, conv_quant
from accel.compiler.support import cbuf_banks, conv_geometry, output_hw, supports
from accel.config import HwConfig
from accel.layout import CubeLayout, cube_layout
from tengine_host.ir import Graph, Node


class CompileError(ValueError):
    """The subgraph cannot be compiled; the message names the node and the cause."""


@dataclass
class FeatureTensor:
    """An int8 feature cube in DLA memory."""

    name: str
    layout: CubeLayout
    scale: float
    host_shape: tuple[int, ...]   # the NCHW / NC shape the host sees (batch 1)


@dataclass
class ConvLayer:
    name: str
    op_type: str
    src: str                      # tensor names
    dst: str
    geometry: dict
    out_hw: tuple[int, int]
    quant: ConvQuant
    data_banks: int
    weight_banks: int
    entries_per_slice: int
    pad_value: int = 0            # int8 zero point is 0 (symmetric quantization)

    @property
    def macs(self) -> int:
        g = self.geometry
        return g["k"] * g["c"] * g["r"] * g["s"] * self.out_hw[0] * self.out_hw[1]


@dataclass
class LoweredSubgraph:
    cfg: HwConfig
    name: str
    layers: list[ConvLayer]
    tensors: dict[str, FeatureTensor] = field(default_factory=dict)
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)


def tensor_scale(quant_table: dict, name: str) -> float:
    """Per-tensor activation scale from a calibration table entry."""
    try:
        entry = quant_table[name]
    except KeyError:
        raise CompileError(f"tensor {name!r} has no entry in the calibration table") from None
    if isinstance(entry, (int, float)):
        return float(entry)
    if "scale" in entry:
        return float(entry["scale"])
    return activation_scale(max(abs(float(entry["min"])), abs(float(entry["max"]))))


def _weights_and_bias(node: Node, graph: Graph) -> tuple[np.ndarray, np.ndarray | None]:
    w = graph.tensors[node.inputs[1]].data.astype(np.float64)
    b = None
    if len(node.inputs) > 2 and node.inputs[2]:
        b = graph.tensors[node.inputs[2]].data.astype(np.float64).reshape(-1)
    if node.op_type == "Gemm":
        if not node.attrs.get("transB", 0):
            w = w.T
        w = w * float(node.attrs.get("alpha", 1.0))
        w = w.reshape(w.shape[0], w.shape[1], 1, 1)
        if b is not None:
            b = np.broadcast_to(b * float(node.attrs.get("beta", 1.0)), (w.shape[0],)).copy()
    return w, b


def layer_quant(node: Node, graph: Graph, quant_table: dict) -> ConvQuant:
    """The integer parameters the compiler chooses for one Conv/Gemm node.

    The host's int8 CPU path uses this too, so the CPU golden and the DLA run
    exactly the same arithmetic.
    """
    src, dst = node.inputs[0], node.outputs[0]
    w, b = _weights_and_bias(node, graph)
    try:
        act = node.attrs.get("activation")
        return conv_quant(w, b, tensor_scale(quant_table, src), tensor_scale(quant_table, dst),
                          act in ("Relu", "Clip"), name=node.name,
                          relu_max=node.attrs.get("activation_max") if act == "Clip" else None)
    except ValueError as exc:
        raise CompileError(str(exc)) from None


def _feature(cfg: HwConfig, graph: Graph, name: str, scale: float) -> FeatureTensor:
    shape = tuple(graph.tensors[name].shape)
    if len(shape) == 4:
        n, c, h, w = shape
    elif len(shape) == 2:
        (n, c), h, w = shape, 1, 1
    else:
        raise CompileError(f"tensor {name!r} of shape {shape} is neither NCHW nor NC")
    if n != 1:
        raise CompileError(f"tensor {name!r} has batch {n}; the DLA runs batch 1 "
                           f"(the executor splits larger batches)")
    return FeatureTensor(name, cube_layout(cfg, c, h, w), scale, shape)


def lower(graph: Graph, quant_table: dict, cfg: HwConfig) -> LoweredSubgraph:
    """Plan every node of ``graph`` (all must be DLA-supported) as a ConvLayer."""
    plan = LoweredSubgraph(cfg, graph.name, [], inputs=list(graph.inputs),
                           outputs=list(graph.outputs))
    for node in graph.nodes:
        ok, reason = supports(node, graph, cfg)
        if not ok:
            raise CompileError(f"node {node.name!r} ({node.op_type}) cannot run on "
                               f"{cfg.name}: {reason}")
        src, dst = node.inputs[0], node.outputs[0]
        for t in (src, dst):
            if t not in plan.tensors:
                plan.tensors[t] = _feature(cfg, graph, t, tensor_scale(quant_table, t))
        q = layer_quant(node, graph, quant_table)
        g = conv_geometry(node, graph)
        data_banks, weight_banks, eps = cbuf_banks(cfg, g)
        layer = ConvLayer(node.name, node.op_type, src, dst, g, output_hw(g), q,
                          data_banks, weight_banks, eps)
        expect = plan.tensors[dst].layout
        if (expect.channels, expect.height, expect.width) != (g["k"], *layer.out_hw):
            raise CompileError(f"node {node.name!r}: output tensor {dst!r} has shape "
                               f"{plan.tensors[dst].host_shape}, the convolution gives "
                               f"{g['k']}x{layer.out_hw[0]}x{layer.out_hw[1]}")
        plan.layers.append(layer)
    return plan
