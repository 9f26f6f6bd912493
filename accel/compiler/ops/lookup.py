"""Element-wise functions by the SDP's lookup table: Sigmoid, Tanh, Swish (SiLU), Erf.

An int8 input has 256 values, so any function of it is a 256-entry table:
the SDP reads the input, its Y stage looks each value up in the LO table and
the identity converter writes the int8 result (:mod:`accel.compiler.lut`).
The result is ``f`` of the dequantized input rounded once to the output
scale - as exact as int8 allows, whatever the function.  The input and output
scales and zero points come from calibration independently (no ties); the
table is indexed by the input code and holds output codes.

Exp is left to the CPU on purpose: its output spans orders of magnitude that
one int8 scale cannot hold (values below half the output step vanish; a
unit-normal input keeps a cosine of 0.983 to fp32 even with the exact table).

Only presets whose SDP has the Y stage and its LUT (``sdp_ew`` and
``sdp_lut``: nv_small_256_full, nv_medium_1024_full, nv_large, nv_full) run
these; on the others the node falls back to the CPU with that reason.
"""

from __future__ import annotations

import math

import numpy as np

from accel.compiler.lut import int8_lut
from accel.compiler.ops.base import OpEntry, check_activation, out_shape
from accel.compiler.ops.sdp_math import lower_steps, reference_steps, single
from accel.compiler.program import Converter, SdpProgram
from accel.compiler.scales import zero_point_of
from accel.config import HwConfig
from accel.ir import Graph, Node


def _sigmoid(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def function(node: Node):
    """The float64 function of ``node`` (Sigmoid, Tanh, Swish with its alpha, Erf)."""
    op = node.op_type
    if op == "Sigmoid":
        return _sigmoid
    if op == "Tanh":
        return np.tanh
    if op == "Swish":
        alpha = float(node.attrs.get("alpha", 1.0))
        return lambda x: x * _sigmoid(alpha * x)
    if op == "Erf":
        return _erf
    raise ValueError(f"op {op} has no lookup function")


def check(node: Node, graph: Graph, cfg: HwConfig) -> str | None:
    if not (cfg.sdp_ew and cfg.sdp_lut):
        missing = " and ".join(n for n, have in (("Y stage (SDP_EW)", cfg.sdp_ew),
                                                 ("lookup table (SDP_LUT)", cfg.sdp_lut))
                               if not have)
        return (f"{node.op_type} needs the SDP {missing}, which preset {cfg.name} lacks "
                f"(presets with both: nv_small_256_full, nv_medium_1024_full, nv_large, "
                f"nv_full)")
    return check_activation(graph, node.inputs[0])


def plan(node: Node, graph: Graph, cfg: HwConfig, scales):
    x, out = node.inputs[0], node.outputs[0]
    lut = int8_lut(function(node), scales.scale(x), scales.scale(out), zero_point_of(scales, x),
                   zero_point_of(scales, out))
    program = SdpProgram(None, None, Converter(), lut)
    return single(0, program, out_shape(graph, out))


ENTRY = OpEntry(("Sigmoid", "Tanh", "Swish", "Erf"), check, plan, lower_steps,
                reference_steps)
