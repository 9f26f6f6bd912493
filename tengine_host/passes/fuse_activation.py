"""Fold a ``Relu`` into the Conv/Gemm/Add feeding it: ``attrs["activation"] = "Relu"``.

NVDLA applies ReLU in the SDP right after the convolution, so the fused form
is what the accelerator compiler lowers.  The producer takes over the Relu's
output name (the pre-activation tensor disappears), which keeps graph outputs
and the calibration table's names valid.
"""

from __future__ import annotations

from tengine_host.ir import Graph

FUSABLE_PRODUCERS = ("Conv", "Gemm", "Add")
ACTIVATIONS = ("Relu",)


def apply(graph: Graph) -> bool:
    """Fuse one activation at a time; True when any was fused."""
    for act in graph.nodes:
        if act.op_type not in ACTIVATIONS:
            continue
        src = act.inputs[0]
        producer = graph.producer(src)
        if (producer is None or producer.op_type not in FUSABLE_PRODUCERS
                or producer.attrs.get("activation") is not None
                or len(graph.consumers(src)) != 1 or src in graph.outputs):
            continue
        producer.attrs["activation"] = act.op_type
        producer.outputs = [act.outputs[0] if t == src else t for t in producer.outputs]
        graph.nodes.remove(act)
        graph.tensors.pop(src, None)
        return True
    return False
