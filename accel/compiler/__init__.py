"""Accelerator compiler: host subgraph -> NVDLA loadable.

``supports`` answers whether the DLA can run a node (the partitioner asks it,
the compiler asserts it); ``compile_subgraph`` lowers a supported subgraph to
conv + SDP ops with NVDLA's quantization arithmetic and emits a loadable.
"""

from __future__ import annotations

from accel.compiler.emit import CompiledSubgraph, compile_subgraph
from accel.compiler.lower import (
    CompileError,
    ConvLayer,
    FeatureTensor,
    LoweredSubgraph,
    layer_quant,
    lower,
)
from accel.compiler.support import supports

__all__ = ["CompileError", "CompiledSubgraph", "ConvLayer", "FeatureTensor", "LoweredSubgraph",
           "compile_subgraph", "layer_quant", "lower", "supports"]
