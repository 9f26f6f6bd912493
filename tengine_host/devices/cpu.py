"""The ``cpu`` device: every registered op in fp32, or the DLA's ops through the int8 reference.

In ``int8`` precision (Tengine's TENGINE_MODE_INT8) each Conv/Gemm quantizes
its input with the calibrated scale, runs ``int8_ref`` with per-channel int8
weights and the parameters of the NVDLA compiler, and dequantizes its output
with the output tensor's scale.  Max/average pooling runs through the PDP
reference (no rescale: the output keeps the input's scale) and a two-input
Add through SDP X1's per-element sum with an output-converter rescale.
Every other op runs in fp32 on the dequantized values.  This is the CPU
golden that the accelerator's int8 result is compared with.

``reference=True`` (TG_DEBUG_REF) runs Conv/Gemm through the naive kernels of
:mod:`tengine_host.debug` instead of the optimized fp32 ops.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tengine_host import int8_ref
from tengine_host.debug import DebugOptions, reference_override
from tengine_host.interpreter import NodeFn, interpret
from tengine_host.ir import Graph, Node
from tengine_host.ops import OPS
from tengine_host.quant.table import QuantTable, scale_of
from tengine_host.quant.weights import dequantize, quantize_activation

PRECISIONS = ("fp32", "int8")
INT8_OPS = ("Conv", "Gemm")
INT8_POOLS = {"MaxPool": "max", "AveragePool": "avg"}


@dataclass
class CpuPrepared:
    graph: Graph
    overrides: dict[str, NodeFn]
    timings: dict[str, float] = field(default_factory=dict)
    keep_values: bool = False                       # set by the executor for TG_DEBUG_DATA
    values: dict[str, np.ndarray] = field(default_factory=dict)


class CpuDevice:
    """Host CPU execution.

    Parameters
    ----------
    precision : {"fp32", "int8"}
        ``int8`` needs a calibration table at :meth:`prerun`.
    reference : bool, optional
        Naive reference kernels for Conv/Gemm; by default from ``TG_DEBUG_REF``.
    """

    max_batch = None  # any batch the graph's shapes allow

    def __init__(self, precision: str = "fp32", reference: bool | None = None) -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"precision {precision!r} not in {', '.join(PRECISIONS)}")
        self.precision = precision
        self.reference = DebugOptions.from_env().ref if reference is None else reference
        self.name = "cpu" if precision == "fp32" else "cpu-int8"

    def supports(self, node: Node, graph: Graph) -> tuple[bool, str]:
        if node.op_type not in OPS:
            return False, f"op {node.op_type} has no CPU implementation"
        return True, ""

    def prerun(self, subgraph: Graph, quant_table: QuantTable | None) -> CpuPrepared:
        overrides: dict[str, NodeFn] = {}
        if self.precision == "int8":
            if quant_table is None:
                raise ValueError("int8 precision needs a calibration table (opendla quantize)")
            for node in subgraph.nodes:
                if node.op_type in INT8_OPS:
                    overrides[node.name] = _int8_node(node, subgraph, quant_table)
                elif node.op_type in INT8_POOLS and _pool_fits_pdp(node, subgraph):
                    overrides[node.name] = _int8_pool(node, quant_table)
                elif node.op_type == "Add" and _add_fits_sdp(node, subgraph):
                    overrides[node.name] = _int8_add(node, quant_table)
        if self.reference:
            for node in subgraph.nodes:
                ref = reference_override(node) if node.name not in overrides else None
                if ref is not None:
                    overrides[node.name] = ref
        return CpuPrepared(subgraph, overrides)

    def run(self, prepared: CpuPrepared, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = interpret(prepared.graph, inputs, overrides=prepared.overrides,
                        timings=prepared.timings, keep_all=prepared.keep_values)
        if prepared.keep_values:
            prepared.values = out
            return {t: out[t] for t in prepared.graph.outputs}
        return out

    def postrun(self, prepared: CpuPrepared) -> None:
        prepared.overrides.clear()


def _int8_node(node: Node, graph: Graph, table: QuantTable) -> NodeFn:
    """A function of the node's fp32 inputs that computes it through ``int8_ref``.

    The integer parameters are the NVDLA compiler's (asked through the nvdla
    device), so this CPU golden applies exactly the accelerator's arithmetic.
    """
    from tengine_host.devices.nvdla import quantize_node  # the accelerator stack, on demand

    a = node.attrs
    if a.get("activation") not in (None, "Relu", "Clip"):
        raise ValueError(f"int8 {node.name!r}: fused activation {a['activation']!r} unsupported")
    for t in node.inputs[1:3]:
        if t and not graph.is_constant(t):
            raise ValueError(f"int8 {node.op_type} {node.name!r} needs constant weights/bias; "
                             f"{t!r} is computed at run time")
    if node.op_type == "Gemm" and a["transA"]:
        raise ValueError(f"int8 Gemm {node.name!r}: transA=1 is not supported")
    params = quantize_node(node, graph, table)
    s_in, s_out = scale_of(table, node.inputs[0]), scale_of(table, node.outputs[0])
    wq = params.weight if node.op_type == "Conv" else params.weight.reshape(len(params.weight), -1)
    kw: dict[str, Any] = params.reference_kwargs()

    if node.op_type == "Conv":
        geom = dict(stride=a["strides"], pads=a["pads"], dilation=a["dilations"], group=a["group"])

        def run_conv(args: list[np.ndarray | None]) -> tuple[np.ndarray, ...]:
            q = int8_ref.conv2d_int8(quantize_activation(args[0], s_in), wq, **geom, **kw)
            return (dequantize(q, s_out),)
        return run_conv

    def run_fc(args: list[np.ndarray | None]) -> tuple[np.ndarray, ...]:
        return (dequantize(int8_ref.fc_int8(quantize_activation(args[0], s_in), wq, **kw), s_out),)
    return run_fc



def _pool_fits_pdp(node: Node, graph: Graph) -> bool:
    """2-D pooling within the PDP's limits whose result the PDP computes exactly as ONNX asks."""
    a = node.attrs
    k, st = a.get("kernel_shape", ()), a.get("strides", ())
    if len(k) != 2 or graph.tensors[node.inputs[0]].dtype != np.float32:
        return False
    if not (all(1 <= v <= int8_ref.PDP_MAX_KERNEL for v in k)
            and all(1 <= v <= int8_ref.PDP_MAX_STRIDE for v in st)):
        return False
    if any(d != 1 for d in a.get("dilations", (1, 1))) or len(node.outputs) > 1 \
            and node.outputs[1]:
        return False
    pads = a.get("pads", (0, 0, 0, 0))
    # The output must be what floor mode gives (ceil-mode overhang windows differ),
    # and averages over padding must count it (the PDP has no exclusive padding).
    h, w = graph.tensors[node.inputs[0]].shape[2:]
    oh, ow = graph.tensors[node.outputs[0]].shape[2:]
    floor_hw = ((h + pads[0] + pads[2] - k[0]) // st[0] + 1,
                (w + pads[1] + pads[3] - k[1]) // st[1] + 1)
    if (oh, ow) != floor_hw:
        return False
    return not (node.op_type == "AveragePool" and any(pads) and not a.get("count_include_pad"))


def _int8_pool(node: Node, table: QuantTable) -> NodeFn:
    """PDP pooling on the int8 input; the output stays in the input's scale (no converter)."""
    a = node.attrs
    s_in = scale_of(table, node.inputs[0])
    kind = INT8_POOLS[node.op_type]

    def run_pool(args: list[np.ndarray | None]) -> tuple[np.ndarray, ...]:
        q = int8_ref.pool2d_int8(quantize_activation(args[0], s_in), kind, a["kernel_shape"],
                                 stride=a["strides"], pads=a.get("pads", (0, 0, 0, 0)))
        return (dequantize(q, s_in),)
    return run_pool


def _add_fits_sdp(node: Node, graph: Graph) -> bool:
    """A sum of two same-shaped activations (SDP X1 per-element; no broadcasting)."""
    ins = node.inputs
    return (len(ins) == 2 and not any(graph.is_constant(t) for t in ins)
            and graph.tensors[ins[0]].shape == graph.tensors[ins[1]].shape
            and node.attrs.get("activation") in (None, "Relu"))


def _int8_add(node: Node, table: QuantTable) -> NodeFn:
    """SDP X1 sum of the raw integers (inputs share one scale), converter to the output scale."""
    s_a, s_b = scale_of(table, node.inputs[0]), scale_of(table, node.inputs[1])
    s_out = scale_of(table, node.outputs[0])
    if not np.isclose(s_a, s_b, rtol=1e-6):
        raise ValueError(f"int8 Add {node.name!r}: inputs {node.inputs} have scales {s_a:g} and "
                         f"{s_b:g}; the DLA needs one (re-run 'opendla quantize')")
    from tengine_host.devices.nvdla import output_converter  # the accelerator stack, on demand

    cvt_scale, cvt_shift = output_converter(s_a / s_out)
    relu = node.attrs.get("activation") == "Relu"

    def run_add(args: list[np.ndarray | None]) -> tuple[np.ndarray, ...]:
        q = int8_ref.eltwise_int8(quantize_activation(args[0], s_a),
                                  quantize_activation(args[1], s_a), "sum", relu=relu,
                                  cvt_scale=cvt_scale, cvt_shift=cvt_shift)
        return (dequantize(q, s_out),)
    return run_add
