"""Element-wise functions by a lookup table: Sigmoid, Tanh, Swish (SiLU), Erf, Gelu, Mish,
Softplus, Softsign, Elu, Selu, Celu, Abs and Neg.

An int8 input has 256 values, so any function of it is a 256-entry table:
the SDP reads the input, its Y stage looks each value up in the LO table and
the identity converter writes the int8 result (:mod:`accel.compiler.lut`).
The result is ``f`` of the dequantized input rounded once to the output
scale - as exact as int8 allows, whatever the function.  The input and output
scales and zero points come from calibration independently (no ties); the
table is indexed by the input code and holds output codes.  HardSwish is
registered with the other activations (:mod:`.activation`), which send it here
on presets that look tables up in the CDP, unless channel-group equalization
gave it factors per channel.

Exp is left to the CPU on purpose: its output spans orders of magnitude that
one int8 scale cannot hold (values below half the output step vanish; a
unit-normal input keeps a cosine of 0.983 to fp32 even with the exact table).

**Where the table runs.**  Presets whose SDP has the Y stage and its LUT
(``sdp_ew`` and ``sdp_lut``: nv_small_256_full, nv_medium_1024_full, nv_large,
nv_full) look it up in the SDP, which fuses it into the pass of the convolution
before it (:mod:`accel.compiler.fusion`).  The others (nv_small, nv_small_256,
nv_medium_512) have no SDP LUT but a CDP, whose LUT serves as the same table
when its LRN datapath is bypassed, as NVIDIA's nv_small ``cdp_8x8x32_lrn3_int8``
tests program it (NVDLA_FACTS, "CDP (LRN)"): ``D_FUNC_BYPASS`` with SQSUM_BYPASS
and MUL_BYPASS, so the LUT reads the converted input itself and its result goes
out unmultiplied; the input converter's offset -128 (scale 1, shift 0) makes that
input ``x + 128``, 0..255; the LO table from 0 with index select 0 gives each code
its own entry, with no interpolation (0 underflows both tables and reads entry 0,
as the LO table has every priority); the output converter is the identity.  That
is one more pass through memory (the CDP reads what the convolution wrote), in
place of a round trip to the CPU.  A preset with neither falls back to the CPU
with that reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from accel.compiler.engine import CdpOp, EngineOp, SdpOp
from accel.compiler.lut import INT32_MAX, int8_lut, int8_table, lo_table_lut
from accel.compiler.ops.base import OpEntry, check_activation, out_shape
from accel.compiler.ops.sdp_math import lower_steps, reference_steps, single
from accel.compiler.program import Converter, SdpProgram
from accel.compiler.scales import zero_point_of
from accel.compiler.tensors import Region
from accel.config import HwConfig
from accel.golden import int8_lrn, int8_ref
from accel.ir import Graph, Node

#: the CDP as a table: its input converter maps int8 ``x`` to ``x + 128`` (offset -128,
#: scale 1, shift 0), which the LO table from :data:`CDP_TABLE_START` indexes directly;
#: the output converter is the identity
CDP_IN_CVT, CDP_OUT_CVT, CDP_TABLE_START = (-128, 1, 0), (0, 1, 0), 0
#: D_LRN_CFG's window when the square sum is bypassed (any valid size: it is not used)
CDP_BYPASSED_SIZE = 3


def _sigmoid(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(x, 0.0)


def _elu(alpha: float):
    return lambda x: np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


def _gelu(approximate: str):
    if approximate == "tanh":
        return lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    return lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2)))


def function(node: Node):
    """The float64 function of ``node``, with its attributes (Swish's alpha, Elu's...)."""
    op, a = node.op_type, node.attrs
    if op == "Sigmoid":
        return _sigmoid
    if op == "Tanh":
        return np.tanh
    if op == "Swish":
        alpha = float(a.get("alpha", 1.0))
        return lambda x: x * _sigmoid(alpha * x)
    if op == "Erf":
        return _erf
    if op == "Gelu":
        return _gelu(a.get("approximate", "none"))
    if op == "Mish":
        return lambda x: x * np.tanh(_softplus(x))
    if op == "Softplus":
        return _softplus
    if op == "Softsign":
        return lambda x: x / (1 + np.abs(x))
    if op == "Elu":
        return _elu(float(a.get("alpha", 1.0)))
    if op == "Selu":
        elu, gamma = _elu(float(a.get("alpha", 1.67326319217681884765625))), \
            float(a.get("gamma", 1.05070102214813232421875))
        return lambda x: gamma * elu(x)
    if op == "Celu":
        alpha = float(a.get("alpha", 1.0))
        return lambda x: np.maximum(x, 0) + np.minimum(0, alpha * np.expm1(
            np.minimum(x, 0) / alpha))
    if op == "Abs":
        return np.abs
    if op == "Neg":
        return np.negative
    if op == "HardSwish":         # registered by .activation, which sends it here
        return lambda x: x * np.clip(x / 6.0 + 0.5, 0.0, 1.0)
    raise ValueError(f"op {op} has no lookup function")


def sdp_route(cfg: HwConfig) -> bool:
    """Whether ``cfg`` looks tables up in the SDP (else in the CDP)."""
    return cfg.sdp_ew and cfg.sdp_lut


def check(node: Node, graph: Graph, cfg: HwConfig) -> str | None:
    if not (sdp_route(cfg) or cfg.cdp):
        return (f"{node.op_type} needs a lookup table: the SDP's (with its Y stage) or the "
                f"CDP's, and preset {cfg.name} has neither")
    return check_activation(graph, node.inputs[0])


@dataclass(frozen=True)
class CdpTablePlan:
    """The CDP as the table ``table`` (``T[x + 128]`` for int8 ``x``, output codes)."""

    table: tuple[int, ...]
    out_shape: tuple[int, ...]


def plan(node: Node, graph: Graph, cfg: HwConfig, scales):
    x, out = node.inputs[0], node.outputs[0]
    args = (function(node), scales.scale(x), scales.scale(out), zero_point_of(scales, x),
            zero_point_of(scales, out))
    if not sdp_route(cfg):
        return CdpTablePlan(tuple(int(v) for v in int8_table(*args)), out_shape(graph, out))
    program = SdpProgram(None, None, Converter(), int8_lut(*args))
    return single(0, program, out_shape(graph, out))


def lower(lo, node: Node, p) -> None:
    if not isinstance(p, CdpTablePlan):
        lower_steps(lo, node, p)
        return
    lo.emit(cdp_table_op(lo.label(node), node.name, lo.region(node.inputs[0]),
                         lo.region(node.outputs[0]), p.table))


def cdp_table_op(name: str, node: str, src: Region, dst: Region,
                 table: tuple[int, ...]) -> CdpOp:
    """The CDP as the table ``table`` (see the module docstring) from ``src`` into ``dst``."""
    return CdpOp(name, node, src, dst, CDP_BYPASSED_SIZE,
                 lo_table_lut(table, start=CDP_TABLE_START), CDP_IN_CVT, CDP_OUT_CVT,
                 sqsum_bypass=True, mul_bypass=True)


def table_op(cfg: HwConfig, name: str, node: str, src: Region, dst: Region,
             table: tuple[int, ...]) -> EngineOp:
    """The pass that looks ``table`` (``T[x + 128]``, output codes) up for each int8 ``x``
    of ``src`` into ``dst`` on ``cfg``: the SDP's Y stage where it has one, else the CDP."""
    if sdp_route(cfg):
        return SdpOp(name, node, src, dst, SdpProgram(None, None, Converter(),
                                                       lo_table_lut(table)))
    return cdp_table_op(name, node, src, dst, table)


#: every int8 code, in table order (entry ``v + 128`` for ``v``)
CODES = np.arange(-128, 128, dtype=np.int8)


def codes_of(op: EngineOp) -> np.ndarray | None:
    """What ``op`` writes for each int8 code it reads (int64 ``[256]``, entry ``v + 128``),
    if it is a function of each element alone, the same in every channel: an SDP pass
    reading nothing but its input (operands in registers; any LUT), or the CDP as a
    table (:func:`cdp_table_op`).  None for anything else.  The values are the golden's
    arithmetic for the op, the reference's for the node it lowers."""
    if isinstance(op, SdpOp):
        p = op.program
        if op.operands or not op.reads_src or any(
                st is not None and st.memory_operands for st in p.stages):
            return None
        x = CODES.astype(np.int64).reshape(1, 1, 1, -1)
        return int8_ref.sdp_program_int8(x, p).reshape(-1).astype(np.int64)
    if isinstance(op, CdpOp) and op.sqsum_bypass and op.mul_bypass \
            and (op.in_cvt, op.out_cvt) == (CDP_IN_CVT, CDP_OUT_CVT) \
            and op.lut == lo_table_lut(op.lut.linear_only_table[:256], start=CDP_TABLE_START):
        table = tuple(int(v) for v in op.lut.linear_only_table[:256])
        return reference(CdpTablePlan(table, (256,)), [CODES])[0].astype(np.int64)
    return None


def cdp_lut(table: tuple[int, ...]) -> int8_lrn.Lut:
    """The golden's view of the LUT :func:`lower` programs: the LO table from 0 holding
    ``table`` (its last entry repeated at 256), every priority LO, the LE table starting
    past every input so that it underflows."""
    le = int8_lrn.Table((0,) * int8_lrn.LE_ENTRIES, INT32_MAX, 0)
    lo = int8_lrn.Table((*table, table[-1]), CDP_TABLE_START, 0)
    return int8_lrn.Lut(le, lo, underflow_lo=True, overflow_lo=True, hybrid_lo=True)


def reference(p, inputs: list[np.ndarray]) -> list[np.ndarray]:
    if not isinstance(p, CdpTablePlan):
        return reference_steps(p, inputs)
    y = int8_lrn.lrn_int8(np.asarray(inputs[0]), CDP_BYPASSED_SIZE, cdp_lut(p.table),
                          CDP_IN_CVT, CDP_OUT_CVT, sqsum_bypass=True, mul_bypass=True)
    return [y.reshape(p.out_shape)]


#: the op types a table computes (:func:`function`)
FUNCTIONS = ("Sigmoid", "Tanh", "Swish", "Erf", "Gelu", "Mish", "Softplus", "Softsign", "Elu",
             "Selu", "Celu", "Abs", "Neg")
ENTRY = OpEntry(FUNCTIONS, check, plan, lower, reference)
