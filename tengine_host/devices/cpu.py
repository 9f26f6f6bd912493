"""The ``cpu`` device: every registered op in fp32, or the DLA's ops through the int8 reference.

In ``int8`` precision (Tengine's TENGINE_MODE_INT8) every node that the DLA of
the chosen preset runs goes through its op-table int8 reference with the
parameters the NVDLA compiler chooses (``tengine_host.devices.nvdla.int8_node``):
its activation inputs are quantized with their calibrated scales and its
outputs dequantized.  Every other op runs in fp32 on the dequantized values.
This is the CPU golden of Tengine's op tests; for a byte-for-byte check of a
device run, ``opendla run --verify`` runs the reference of exactly the DLA's
partition instead (:mod:`tengine_host.verify`).

``reference=True`` (TG_DEBUG_REF) runs Conv/Gemm through the naive kernels of
:mod:`tengine_host.debug` instead of the optimized fp32 ops.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from accel.ir import Graph, Node
from tengine_host.debug import DebugOptions, reference_override
from tengine_host.interpreter import NodeFn, interpret
from tengine_host.ops import OPS
from tengine_host.quant.table import QuantTable

PRECISIONS = ("fp32", "int8")


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
    preset : str
        In ``int8``: the DLA configuration whose ops (and arithmetic) to emulate.
    reference : bool, optional
        Naive reference kernels for Conv/Gemm; by default from ``TG_DEBUG_REF``.
    keep_float : iterable of str
        In ``int8``: node names that stay fp32 although the DLA could run them
        (``--keep-float``), as the ``nvdla`` device leaves them to the CPU.
    """

    max_batch = None  # any batch the graph's shapes allow

    def __init__(self, precision: str = "fp32", reference: bool | None = None,
                 preset: str = "nv_small", keep_float=()) -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"precision {precision!r} not in {', '.join(PRECISIONS)}")
        self.precision = precision
        self.preset = preset
        self.keep_float = frozenset(keep_float)
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
            from accel.config import get_preset
            from tengine_host.devices.nvdla import int8_node  # the accelerator stack, on demand

            cfg = get_preset(self.preset)
            for node in subgraph.nodes:
                if node.name in self.keep_float:
                    continue
                fn = int8_node(node, subgraph, quant_table, cfg)
                if fn is not None:
                    overrides[node.name] = fn
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
