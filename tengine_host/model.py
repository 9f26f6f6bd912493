"""Load an ONNX model the way every command uses it: import, then the default passes.

Calibration and execution must see the same graph (fusion renames tensors),
so both go through :func:`load_model`.
"""

from __future__ import annotations

from pathlib import Path

from accel.ir import Graph
from tengine_host.frontend import load_onnx
from tengine_host.passes import run_passes


def load_model(path: str | Path, *, optimize: bool = True,
               input_shapes: dict[str, tuple[int, ...]] | None = None) -> Graph:
    """Import ``path`` and, unless ``optimize`` is False, run the default passes."""
    graph = load_onnx(path, input_shapes=input_shapes)
    if optimize:
        run_passes(graph)
    return graph
