"""The ``cpu`` device: every registered op in fp32, or Conv/Gemm through the int8 reference.

In ``int8`` precision each Conv/Gemm quantizes its input with the calibrated
scale, runs ``int8_ref`` with per-channel int8 weights and the parameters of
the NVDLA compiler, and dequantizes its output with the output tensor's scale;
every other op runs in fp32 on the dequantized values.  This is the CPU
golden that the accelerator's int8 result is compared with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tengine_host import int8_ref
from tengine_host.interpreter import NodeFn, interpret
from tengine_host.ir import Graph, Node
from tengine_host.ops import OPS
from tengine_host.quant.table import QuantTable, scale_of
from tengine_host.quant.weights import dequantize, quantize_activation

PRECISIONS = ("fp32", "int8")
INT8_OPS = ("Conv", "Gemm")


@dataclass
class CpuPrepared:
    graph: Graph
    overrides: dict[str, NodeFn]
    timings: dict[str, float] = field(default_factory=dict)


class CpuDevice:
    """Host CPU execution.

    Parameters
    ----------
    precision : {"fp32", "int8"}
        ``int8`` needs a calibration table at :meth:`prerun`.
    """

    def __init__(self, precision: str = "fp32") -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"precision {precision!r} not in {', '.join(PRECISIONS)}")
        self.precision = precision
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
        return CpuPrepared(subgraph, overrides)

    def run(self, prepared: CpuPrepared, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return interpret(prepared.graph, inputs, overrides=prepared.overrides,
                         timings=prepared.timings)

    def postrun(self, prepared: CpuPrepared) -> None:
        prepared.overrides.clear()


def _int8_node(node: Node, graph: Graph, table: QuantTable) -> NodeFn:
    """A function of the node's fp32 inputs that computes it through ``int8_ref``.

    The integer parameters are the NVDLA compiler's (asked through the nvdla
    device), so this CPU golden applies exactly the accelerator's arithmetic.
    """
    from tengine_host.devices.nvdla import quantize_node  # the accelerator stack, on demand

    a = node.attrs
    if a.get("activation") not in (None, "Relu"):
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

