"""Post-training quantization: min-max calibration, the JSON scale table and
per-tensor int8 activation quantization (symmetric, or with a zero point for
one-signed tensors: :func:`assign_zero_points`).  Per-channel weights and the
NVDLA integer parameters are the compiler's (through the nvdla device)."""

from __future__ import annotations

from tengine_host.quant.calibrate import calibrate
from tengine_host.quant.table import QuantTable, load_table, save_table, scale_of
from tengine_host.quant.weights import quantize_activation, round_half_away
from tengine_host.quant.zero_point import assign_zero_points

__all__ = ["QuantTable", "assign_zero_points", "calibrate", "load_table", "quantize_activation",
           "round_half_away", "save_table", "scale_of"]
