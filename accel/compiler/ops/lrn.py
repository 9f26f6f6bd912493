"""LRN on the CDP: ``y = x / (bias + alpha / size * sum_window x**2) ** beta``.

The CDP computes, per int8 element ``q`` (NVDLA_FACTS section 3 "CDP (LRN)")::

    v = in_cvt(q);  S = sum of v**2 over size channels;  L = LUT(S);  out = out_cvt(L * v)

With the input converter the identity (``v = q``; ``x = s_in * q``), the window
sum of ``x**2`` is ``s_in**2 * S`` exactly, so the LUT holds

    L(S) ~= lut_scale * f(S),   f(S) = (bias + alpha / size * s_in**2 * S) ** -beta

and the output converter multiplies by ``s_in / (s_out * lut_scale)`` (int16
scale, shift), rounding once.  ``lut_scale`` puts the largest ``f`` on the
interval at 32767, so the int16 entries keep 15 bits.

**The LUT.**  ``S`` is an exact integer in ``[0, size * 128**2]`` (more with a
zero point, below).  Both tables are linear: an exponential LE table
interpolates over whole octaves, which misses a power law like ``f`` by up to
about ``beta (beta + 1) / 18`` (7 % for beta = 0.75).  One table starts at 0
with a fine step, where ``f`` bends most; the other starts where the first
ends and reaches past the largest ``S`` with the smallest power-of-two step
that does.  Which table is the fine one (LE: 64
steps, LO: 256), its step, and whether the entries are lowered by half their
segments' sag (the chord of a convex ``f`` lies above it) are chosen by the
largest predicted output error over every ``S``, weighted by the largest
``|q|`` that sum allows (``q**2 <= S``).  ``S = 0`` (``t <= 0``) underflows both
tables and takes the first table's entry 0 (underflow priority: the first
table); at the seam the first table overflows and the second underflows, a
"hybrid" case that also takes the first; past the second table's end (no sum
gets there) the overflow priority takes the second.  Slopes are ``f``'s
derivative at each table's ends.

**Channel edges.**  The CDP reads channels outside the cube (the halo before
channel 0 and after the last, and the lanes padding the last atom in memory,
whatever they hold) as the input offset, which the converter maps to 0: they
add nothing to ``S``, which is ONNX's zero padding of the window.  The padded
output lanes are written as 0.

**Scales.**  Both converters rescale, so the input and output scales come
from calibration independently: no ties.

**Zero points.**  The input converter's offset is the input's zero point
(``v = q - z_in``, up to ``128 + |z_in|`` in magnitude: the sums and the LUT
cover ``size * v_max**2``), and the lanes outside the cube, read as that
offset, still add nothing.  The output converter subtracts its offset before
scaling, so the output's zero point is ``-z_out / (scale / 2**shift)``
output-converter units, rounded: a ``y`` unit is a tiny fraction of an output
step (``2**shift / scale`` units per step, tens of thousands), so the rounding
moves the result by well under 1e-3 step.

**Accuracy.**  The LUT's share of the error (``LrnPlan.lut_error_lsb``, output
LSBs, with the output scale at the largest possible output) stays below 0.1
LSB up to ``alpha / size * s_in**2 * S_max = 100`` and reaches 0.3-1.0 LSB at
1000 (a normalization 1000 times the bias: uniform and octave steps cannot
follow it).  Against fp32 LRN of the dequantized int8 input the CDP is then
within 0.5 + that share (the output rounding); against onnxruntime on the
float input, within 1.1 LSB on the test graphs (tests/accel/compiler/test_lrn.py),
the rest being the input's own quantization, up to ``0.5 * s_in / s_out``
output LSBs, which grows with strong normalization.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from accel.compiler.engine import CdpOp
from accel.compiler.ops.base import OpEntry, check_activation
from accel.compiler.ops.base import out_shape as batch1
from accel.compiler.quantize import INT16_MAX, int16_factor, round_half_away
from accel.compiler.scales import zero_point_of
from accel.config import HwConfig
from accel.golden import int8_lrn
from accel.ir import Graph, Node
from accel.loadable.descriptors_aux import FloatData, LutParam

LOCAL_SIZES = (3, 5, 7, 9)
LE_STEPS, LO_STEPS = 64, 256       # 65 and 257 entries
SLOPE_SHIFTS = (-16, 15)           # the signed 5-bit LUT slope shift
LINEAR = 1                         # dla_lut_param.method: 0 exponential, 1 linear
IN_CVT = (0, 1, 0)                 # offset, scale, shift: v = q
DATOUT_OFFSET_BITS = 25            # the CDP output converter's offset register


@dataclass(frozen=True)
class LutTable:
    """One linear table as programmed: entries, start, index select (log2 of the step),
    under/overflow slopes ``(scale, shift)`` meaning ``scale / 2**shift`` per unit of S."""

    entries: tuple[int, ...]
    start: int
    select: int
    underflow: tuple[int, int]
    overflow: tuple[int, int]

    @property
    def end(self) -> int:
        return self.start + ((len(self.entries) - 1) << self.select)


@dataclass(frozen=True)
class LrnPlan:
    size: int
    alpha: float
    beta: float
    bias: float
    out_shape: tuple[int, ...]
    in_scale: float
    out_scale: float
    le: LutTable
    lo: LutTable
    underflow_lo: bool             # priorities: True selects LO, False LE
    overflow_lo: bool
    hybrid_lo: bool
    lut_scale: float               # LUT units per unit of f
    out_cvt: tuple[int, int, int]  # offset, scale, shift
    lut_error_lsb: float           # predicted worst LUT error, in output LSBs
    in_cvt: tuple[int, int, int] = IN_CVT


def _attrs(node: Node) -> tuple[int, float, float, float]:
    a = node.attrs
    return (int(a.get("size", 0)), float(a.get("alpha", 1e-4)), float(a.get("beta", 0.75)),
            float(a.get("bias", 1.0)))


def check(node: Node, graph: Graph, cfg: HwConfig) -> str | None:
    if not cfg.cdp:
        return f"preset {cfg.name} has no CDP"
    x = node.inputs[0]
    rank = len(graph.tensors[x].shape)
    if rank != 4:
        return f"input rank {rank}: the CDP normalizes NCHW cubes (rank 4)"
    why = check_activation(graph, x)
    if why:
        return why
    size, alpha, beta, bias = _attrs(node)
    if size not in LOCAL_SIZES:
        return (f"size {size}: the CDP sums over {', '.join(map(str, LOCAL_SIZES))} "
                f"channels")
    if not all(math.isfinite(v) for v in (alpha, beta, bias)):
        return f"alpha={alpha:g}, beta={beta:g}, bias={bias:g} must be finite"
    if not bias > 0:
        return f"bias {bias:g} <= 0: the denominator reaches 0 (the LUT holds no infinity)"
    if alpha < 0:
        return f"alpha {alpha:g} < 0: the denominator can reach 0 or turn negative"
    return None


def _slope(m: float) -> tuple[int, int]:
    """``m`` as an int16 scale over ``2**shift``, shift within the signed 5-bit range."""
    if m == 0 or not math.isfinite(m):
        return 0, 0
    lo, hi = SLOPE_SHIFTS
    shift = max(lo, min(hi, math.floor(math.log2(INT16_MAX / abs(m)))))
    scale = int(np.clip(round_half_away(m * 2.0 ** shift), -INT16_MAX - 1, INT16_MAX))
    return scale, shift


@dataclass(frozen=True)
class _Layout:
    """Where the two tables sit: ``first`` covers [0, its end] at 2**first_sel."""

    first_is_le: bool
    first_sel: int
    second_sel: int
    sag: bool


def _entries(lut_f, start: int, sel: int, steps: int, sag: bool) -> np.ndarray:
    x = start + (np.arange(steps + 1, dtype=np.float64) * 2.0 ** sel)
    vals = lut_f(x)
    if sag:
        # each segment's chord misses f at its middle by `bow`; lowering both ends by
        # half of it splits the error around f
        bow = (vals[:-1] + vals[1:]) / 2 - lut_f(x[:-1] + 2.0 ** sel / 2)
        shift = np.zeros_like(vals)
        shift[:-1] += bow
        shift[1:] += bow
        shift[1:-1] /= 2
        vals = vals - shift / 2
    return np.clip(round_half_away(vals), -INT16_MAX - 1, INT16_MAX).astype(np.int64)


def _sel_to_cover(span: int, steps: int) -> int:
    sel = 0
    while steps << sel < span:
        sel += 1
    return sel


def _tables(lay: _Layout, lut_f, dlut_f) -> tuple[LutTable, LutTable]:
    n1, n2 = (LE_STEPS, LO_STEPS) if lay.first_is_le else (LO_STEPS, LE_STEPS)
    end1 = n1 << lay.first_sel
    tabs = []
    for start, sel, n in ((0, lay.first_sel, n1), (end1, lay.second_sel, n2)):
        ent = _entries(lut_f, start, sel, n, lay.sag)
        end = start + (n << sel)
        tabs.append(LutTable(tuple(int(v) for v in ent), start, sel,
                             _slope(float(dlut_f(start))), _slope(float(dlut_f(end)))))
    first, second = tabs
    return (first, second) if lay.first_is_le else (second, first)


def _layouts(s_max: int) -> list[_Layout]:
    out = []
    for first_is_le, n1, n2 in ((True, LE_STEPS, LO_STEPS), (False, LO_STEPS, LE_STEPS)):
        sel = 0
        while True:
            end1 = n1 << sel
            second = _sel_to_cover(max(s_max - end1, 1), n2)
            out += [_Layout(first_is_le, sel, second, sag) for sag in (False, True)]
            if end1 >= s_max:
                break
            sel += 1
    return out


def _predicted_error(lay: _Layout, le: LutTable, lo: LutTable, ideal: np.ndarray,
                     weight: np.ndarray) -> float:
    """Worst ``|L(S) - ideal[S]|`` over every ``S``, times ``weight[S]`` (output LSBs per
    LUT unit); interpolation in floats (the hardware rounds each result to an integer)."""
    first, second = (le, lo) if lay.first_is_le else (lo, le)
    seam = min(first.end + 1, ideal.size)
    worst = 0.0
    for tab, part in ((first, slice(0, seam)), (second, slice(seam, ideal.size))):
        if part.start >= part.stop:
            continue
        xs = tab.start + (np.arange(len(tab.entries)) << tab.select)
        got = np.interp(np.arange(part.start, part.stop, dtype=np.float64), xs,
                        np.asarray(tab.entries, dtype=np.float64))
        worst = max(worst, float((np.abs(got - ideal[part]) * weight[part]).max()))
    return worst


def plan(node: Node, graph: Graph, cfg: HwConfig, scales) -> LrnPlan:
    size, alpha, beta, bias = _attrs(node)
    x, y = node.inputs[0], node.outputs[0]
    s_in, s_out = scales.scale(x), scales.scale(y)
    z_in, z_out = zero_point_of(scales, x), zero_point_of(scales, y)
    a = alpha / size * s_in * s_in             # per unit of S
    v_max = max(128 + z_in, 127 - z_in)        # largest |q - z_in|
    s_max = size * v_max * v_max

    def f(s):
        return (bias + a * s) ** -beta

    peak = max(f(0.0), f(float(s_max)))
    lut_scale = INT16_MAX / peak

    def lut_f(s):
        return lut_scale * f(s)

    def dlut_f(s):
        return -lut_scale * beta * a * (bias + a * s) ** (-beta - 1)

    ratio = s_in / s_out
    mul, shift = int16_factor(np.array([ratio / lut_scale]))
    s = np.arange(s_max + 1, dtype=np.int64)
    weight = np.minimum(v_max, np.floor(np.sqrt(s))) * ratio / lut_scale
    ideal = lut_f(s.astype(np.float64))
    best = None
    for lay in _layouts(s_max):
        le, lo = _tables(lay, lut_f, dlut_f)
        err = _predicted_error(lay, le, lo, ideal, weight)
        if best is None or err < best[0]:
            best = (err, lay, le, lo)
    err, lay, le, lo = best
    # S = 0 underflows both tables: the first table's entry 0; seams and hybrids: the
    # first table; past the second table's end (never reached): the second
    first_lo = not lay.first_is_le
    out_off = int(round_half_away(-z_out * 2.0 ** shift / float(mul[0]))) if z_out else 0
    if abs(out_off) >= 1 << (DATOUT_OFFSET_BITS - 1):
        raise ValueError(f"output zero point {z_out} is {out_off} output-converter units, "
                         f"beyond the {DATOUT_OFFSET_BITS}-bit offset register")
    return LrnPlan(size, alpha, beta, bias, batch1(graph, y), s_in, s_out,
                   le, lo, underflow_lo=first_lo, overflow_lo=not first_lo,
                   hybrid_lo=first_lo, lut_scale=lut_scale,
                   out_cvt=(out_off, int(mul[0]), int(shift)), lut_error_lsb=err,
                   in_cvt=(z_in, 1, 0))


def lut_param(p: LrnPlan) -> LutParam:
    """The ``dla_lut_param`` of a plan (linear LE and LO tables)."""
    def slope(v: tuple[int, int]) -> FloatData:
        return FloatData(scale=v[0], shifter=v[1], reserved0=0)

    return LutParam(
        linear_exp_table=list(p.le.entries), linear_only_table=list(p.lo.entries),
        linear_exp_offset=p.le.select, linear_only_offset=p.lo.select,
        linear_exp_start=p.le.start, linear_exp_end=p.le.end,
        linear_only_start=p.lo.start, linear_only_end=p.lo.end,
        linear_exp_underflow_slope=slope(p.le.underflow),
        linear_exp_overflow_slope=slope(p.le.overflow),
        linear_only_underflow_slope=slope(p.lo.underflow),
        linear_only_overflow_slope=slope(p.lo.overflow),
        hybrid_priority=int(p.hybrid_lo), underflow_priority=int(p.underflow_lo),
        overflow_priority=int(p.overflow_lo), method=LINEAR)


def lower(lo, node: Node, p: LrnPlan) -> None:
    lo.emit(CdpOp(lo.label(node), node.name, lo.region(node.inputs[0]),
                  lo.region(node.outputs[0]), p.size, lut_param(p), p.in_cvt, p.out_cvt))


def reference(p: LrnPlan, inputs: list[np.ndarray]) -> list[np.ndarray]:
    def table(t: LutTable) -> int8_lrn.Table:
        return int8_lrn.Table(t.entries, t.start, t.select, t.underflow, t.overflow)

    lut = int8_lrn.Lut(table(p.le), table(p.lo), p.underflow_lo, p.overflow_lo, p.hybrid_lo)
    y = int8_lrn.lrn_int8(np.asarray(inputs[0]), p.size, lut, p.in_cvt, p.out_cvt)
    return [y.reshape(p.out_shape)]


ENTRY = OpEntry(("LRN",), check, plan, lower, reference)
