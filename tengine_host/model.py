"""Load an ONNX model the way every command uses it: import, then the default passes.

Calibration and execution must see the same graph (fusion renames tensors),
so both go through :func:`load_model`.
"""

from __future__ import annotations

from pathlib import Path

from accel.ir import Graph
from tengine_host.frontend import OnnxImportError, load_onnx
from tengine_host.passes import run_passes


def load_model(path: str | Path, *, optimize: bool = True,
               input_shapes: dict[str, tuple[int, ...]] | None = None) -> Graph:
    """Import ``path`` and, unless ``optimize`` is False, run the default passes.

    An import error names the file (once: the reader's own messages may already)."""
    try:
        graph = load_onnx(path, input_shapes=input_shapes)
    except OnnxImportError as exc:
        if isinstance(path, (str, Path)) and repr(str(path)) not in str(exc):
            raise OnnxImportError(f"ONNX model {str(path)!r}: {exc}") from exc
        raise
    if optimize:
        run_passes(graph)
    return graph
