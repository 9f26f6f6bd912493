"""Post-training quantization: min-max calibration, the JSON scale table and
symmetric per-tensor int8 activation quantization.  Per-channel weights and
the NVDLA integer parameters are the compiler's (through the nvdla device)."""

from __future__ import annotations

from tengine_host.quant.calibrate import calibrate
from tengine_host.quant.table import QuantTable, load_table, save_table, scale_of
from tengine_host.quant.weights import quantize_activation, round_half_away

__all__ = ["QuantTable", "calibrate", "load_table", "quantize_activation", "round_half_away",
           "save_table", "scale_of"]
