"""Model importers: file formats -> :class:`tengine_host.ir.Graph`."""

from __future__ import annotations

from tengine_host.frontend.onnx_import import OnnxImportError, load_onnx

__all__ = ["OnnxImportError", "load_onnx"]
