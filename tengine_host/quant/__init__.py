"""Post-training quantization: calibration (ranges chosen by the error they cause, a
held-out fidelity check), the JSON scale table and per-tensor int8 activation
quantization (symmetric, or with a zero point for one-signed tensors:
:func:`assign_zero_points`).  Per-channel weights and the NVDLA integer parameters are
the compiler's (through the nvdla device).  Before calibration, cross-layer
equalization and bias correction may rewrite the weights (:func:`equalize`,
:func:`correct_bias`)."""

from __future__ import annotations

from tengine_host.quant.bias_correction import BiasCorrectionReport, correct_bias
from tengine_host.quant.calibrate import calibrate
from tengine_host.quant.equalize import EqualizeReport, equalize
from tengine_host.quant.table import QuantTable, load_table, save_table, scale_of
from tengine_host.quant.weights import quantize_activation, round_half_away
from tengine_host.quant.zero_point import assign_zero_points

__all__ = ["BiasCorrectionReport", "EqualizeReport", "QuantTable", "assign_zero_points",
           "calibrate", "correct_bias", "equalize", "load_table", "quantize_activation",
           "round_half_away", "save_table", "scale_of"]
