"""Model importers: file formats -> :class:`accel.ir.Graph`."""

from __future__ import annotations

from tengine_host.frontend.constants import OnnxImportError
from tengine_host.frontend.onnx_import import MAX_OPSET, MIN_OPSET, load_onnx

__all__ = ["MAX_OPSET", "MIN_OPSET", "OnnxImportError", "load_onnx"]
