"""Post-training quantization: min-max calibration, the JSON scale table,
symmetric int8 weight/activation quantization and NVDLA parameter choice."""

from __future__ import annotations

from tengine_host.quant.calibrate import calibrate
from tengine_host.quant.table import QuantTable, load_table, save_table, scale_of
from tengine_host.quant.weights import (
    quantize_activation,
    quantize_weights,
    round_half_away,
    weight_scales,
)

__all__ = ["QuantTable", "calibrate", "load_table", "quantize_activation", "quantize_weights",
           "round_half_away", "save_table", "scale_of", "weight_scales"]
