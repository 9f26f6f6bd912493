"""NVDLA's constraints on activation scales, applied to a calibrated table.

Some tensors must share one int8 scale because the hardware cannot rescale
between them:

* pooling (PDP) has no output converter: a pooled tensor keeps its input's
  scale (average, max and min, global or not);
* data-movement ops (Reshape, Flatten, ...) move int8 bytes unchanged;
* Concat is in-place aliasing into one buffer: all inputs and the output
  share one scale;
* element-wise Add / Max / Min (SDP X1 per-element) combine the raw integers
  of both inputs, so the inputs are reconciled to one scale (the output keeps
  its own: the output converter rescales it).

Tensors tied by these rules form groups (union-find); every member gets the
largest scale of its group, so no member's observed range is clipped harder
than calibration chose.  ``min`` / ``max`` keep the observed values.
"""

from __future__ import annotations

from tengine_host.ir import Graph
from tengine_host.quant.table import QuantTable

SCALE_PASS_THROUGH = ("AveragePool", "MaxPool", "GlobalAveragePool", "GlobalMaxPool",
                      "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout")
SHARED_INPUTS = ("Add", "Sum", "Max", "Min")


def scale_groups(graph: Graph) -> list[list[str]]:
    """Groups (of two or more activations) that the DLA requires to share one scale."""
    parent: dict[str, str] = {}

    def find(t: str) -> str:
        parent.setdefault(t, t)
        while parent[t] != t:
            parent[t] = parent[parent[t]]
            t = parent[t]
        return t

    def union(names: list[str]) -> None:
        names = [t for t in names if t and not graph.is_constant(t)]
        for t in names[1:]:
            parent[find(t)] = find(names[0])

    for node in graph.nodes:
        if node.op_type in SCALE_PASS_THROUGH:
            union([node.inputs[0], node.outputs[0]])
        elif node.op_type == "Concat":
            union([*node.inputs, node.outputs[0]])
        elif node.op_type in SHARED_INPUTS:
            union(list(node.inputs))
    groups: dict[str, list[str]] = {}
    for t in parent:
        groups.setdefault(find(t), []).append(t)
    return [sorted(g) for g in groups.values() if len(g) > 1]


def apply_dla_rules(graph: Graph, table: QuantTable) -> QuantTable:
    """A copy of ``table`` where every scale group uses its largest member scale."""
    out = {name: dict(e) for name, e in table.items()}
    for group in scale_groups(graph):
        present = [t for t in group if t in out]
        if not present:
            continue
        scale = max(out[t]["scale"] for t in present)
        for t in present:
            out[t]["scale"] = scale
    return out
