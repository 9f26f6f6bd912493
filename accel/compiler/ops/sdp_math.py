"""SDP programs for element-wise arithmetic on quantized tensors, and the SDP entry plumbing.

All of them compute on int8 inputs ``q`` with scales ``s`` and produce
``sat8(round(y / s_out))``:

* :func:`affine` - ``y = A * x + B`` with per-layer or per-channel ``A`` and
  ``B``: X1 multiplies into a *fine unit* ``u = s_out / 2**f`` (so the
  addition keeps ``f`` fraction bits), X2 adds ``B / u`` (int16 << shift)
  and applies ReLU / PReLU, the converter rounds ``f`` bits away.  Without
  ``B`` the multiplier goes straight to output units (one rounding).
* :func:`binary` - ``a op b`` of two tensors (sum, max, min; difference by
  reading ``b`` as the main input, negated): with equal input scales the ALU
  works on the raw integers (NVIDIA's scheme); otherwise X1 brings ``a`` onto
  a fine grid of ``b``'s scale and X2's ALU adds ``b << f``.

**Zero points.**  A tensor with zero point ``z`` holds codes ``v + z``.  An
input's is taken off exactly, before anything non-linear: X1's ALU subtracts
``z_in`` from the main input before the multiplier (:func:`affine`), X2's ALU
takes ``2 z`` off a sum of two tied codes and ``z`` off a maximum
(:func:`binary`), and a product adds the other input shifted, ``-z * y`` for
``z = -2**k`` (:func:`product`).  The output's is added last, after every
ReLU / PReLU / cap, as the converter's offset.  The converter subtracts its
offset *before* scaling, so where an X stage is free the scaling moves into
its multiplier and the converter keeps only the shift of a fine grid
(``offset = -z_out * 2**f``), which adds ``z_out`` exactly; elsewhere
(products, differences, inputs at different scales) the converter's input is
made fine and :func:`converter` rounds ``-z_out`` to it.  A stage's two
operands come both from registers or both from memory (one mode per stage
descriptor), which decides where each correction can go.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from accel.arith import scale_shift_factorize
from accel.compiler.engine import SdpOp
from accel.compiler.program import Converter, Operand, SdpProgram, XStage
from accel.compiler.quantize import int16_factor, layer_operand, round_half_away
from accel.errors import AccelError
from accel.golden import int8_ref
from accel.ir import Node

INT16_MAX = (1 << 15) - 1
FINE_BITS = 8          # fraction bits kept between X1 and the converter


class SdpMathError(AccelError, ValueError):
    """A rescale the SDP cannot represent."""


def converter(ratio: float, z_out: int = 0) -> Converter:
    """The output converter for ``x * ratio + z_out`` (int16 scale, 6-bit shift); 0 -> zeros.

    The converter subtracts its offset before scaling, so ``z_out`` becomes
    ``-z_out / ratio`` units of ``x``, rounded: the result moves by at most
    ``ratio / 2`` output steps, which callers keep small by giving ``x`` in units
    far finer than the output's."""
    if ratio == 0:
        if z_out:
            raise SdpMathError(f"a converter of scale 0 cannot add a zero point ({z_out})")
        return Converter(scale=0)
    sign = -1 if ratio < 0 else 1
    try:
        scale, shift = scale_shift_factorize(abs(ratio), max_shift=63)
    except ValueError as exc:
        raise SdpMathError(str(exc)) from None
    offset = int(round_half_away(-z_out * 2.0 ** shift / (sign * scale))) if z_out else 0
    if not -(1 << 31) <= offset < (1 << 31):
        raise SdpMathError(f"output zero point {z_out} is {offset} converter units, beyond int32")
    return Converter(offset=offset, scale=sign * scale, shift=shift)


def product(main: int, other: int, mode: str, ratio: float, z_main: int, z_other: int,
            z_out: int, *, relu: bool = False, channel: np.ndarray | None = None
            ) -> SdpProgram:
    """``x * y`` on the SDP: ``x`` node input ``main`` (streamed), ``y`` input ``other``
    read as a ``mode`` operand; ``ratio`` is the output step per unit of the product of
    the codes, and at most one of the inputs has a zero point, ``-2**k``.  ``channel``
    (positive, one per channel) multiplies output channel ``c`` by ``channel[c]``, in
    X2's multiplier (int16 with a shift): only without zero points on the inputs, whose
    correction X2 would need.

    X1 multiplies the codes.  With ``z_main = -2**k`` that is ``(v + z_main) * y``, and
    X2's ALU reads ``y`` again and adds ``y << k = -z_main * y``; with ``z_other``, X2
    reads the main input as an element operand and adds ``x << k``.  (Other zero points
    cannot be taken off: the value to scale sits in memory, and a stage's multiplier and
    ALU read the same operand mode.)  ReLU comes after.  The converter rescales and adds
    ``z_out`` (:func:`converter`: a unit of the product of codes is a fine one, an output
    step spanning a hundred or more of them)."""
    if z_main and z_other:
        raise SdpMathError(f"a product with zero points on both inputs ({z_main}, {z_other})")
    z, again = (z_main, Operand.input(other, mode)) if z_main else \
        (z_other, Operand.input(main, "element"))
    if z and (z > 0 or -z & (-z - 1)):
        raise SdpMathError(f"an input of a product has zero point {z}; only 0 or -2**k (-1, "
                           f"-2, ..., -128) can be taken off the other input's codes")
    if channel is not None:
        if z:
            raise SdpMathError(f"a product scaled per channel with an input zero point ({z}): "
                               f"X2 cannot both take it off and scale (re-run 'opendla "
                               f"quantize')")
        m, t = int16_factor(np.asarray(channel, np.float64).reshape(-1))
        return SdpProgram(XStage(mul=Operand.input(other, mode)),
                          XStage(mul=_operand(m), truncate=t, relu=relu),
                          converter(ratio, z_out))
    x2 = XStage(alu_op="sum", alu=again, alu_shift=(-z).bit_length() - 1,
                relu=relu) if z else None
    x1 = XStage(mul=Operand.input(other, mode), relu=relu and x2 is None)
    return SdpProgram(x1, x2, converter(ratio, z_out))


def _operand(values: np.ndarray) -> Operand:
    v = np.asarray(values).reshape(-1)
    return Operand.layer(int(v[0])) if v.size == 1 else Operand.kernel(v)


def _fine_bits(peak_ratio: float) -> int:
    """Fraction bits below the output unit that keep the X1 multiplier in int16."""
    if peak_ratio <= 0:
        return FINE_BITS
    room = math.floor(math.log2(INT16_MAX / peak_ratio))
    if room < 0:
        raise SdpMathError(f"rescale {peak_ratio:g} exceeds the int16 multiplier")
    return max(0, min(FINE_BITS, room))


def affine(s_in: float, s_out: float, mult, bias=None, *, relu: bool = False,
           prelu: np.ndarray | float | None = None, cap: float | None = None,
           floor: float | None = None, z_in: int = 0, z_out: int = 0) -> SdpProgram:
    """``y = mult * x + bias`` (scalars or per-channel arrays), then ReLU / PReLU / a cap.

    ``prelu`` gives the negative slopes of a (Leaky)ReLU; ``cap`` an upper
    bound (in real units) applied after a ReLU; ``floor`` a lower bound on
    ``x`` (real units, X1's ALU maximum, with a scalar ``mult`` and no bias,
    ReLU or PReLU: Clip).  ``z_in`` / ``z_out`` are the zero points (see the
    module docstring); with a floor, X1's ALU is taken, so ``z_in`` rides
    through the multiplier as the constant ``drift`` (fine units), which the
    cap and the converter's offset take off.
    """
    a = np.atleast_1d(np.asarray(mult, dtype=np.float64))
    ratio = a * s_in / s_out
    has_bias = bias is not None and np.any(np.asarray(bias) != 0)
    if floor is not None and (has_bias or relu or prelu is not None or a.size != 1):
        raise SdpMathError("a floor combines only with a scalar multiplier and a cap")
    drifts = floor is not None and z_in != 0
    f = _fine_bits(float(np.abs(ratio).max())) if (has_bias or prelu is not None
                                                   or cap is not None or drifts) else 0
    if np.all(ratio == 0):
        m, t = np.zeros(a.shape, np.int64), 0
    else:
        m, t = int16_factor(ratio * 2.0 ** f)
    drift = 0
    if floor is None:   # the zero point in the multiplier's mode (one mode per stage)
        x1 = XStage(alu_op="sum" if z_in else None,
                    alu=_operand(np.full(m.shape, -z_in)) if z_in else None,
                    mul=_operand(m), truncate=t, relu=relu and not has_bias)
    else:   # max(x, floor) on the codes, then the multiplier
        lowest = int(np.clip(round_half_away(floor / s_in) + z_in, -INT16_MAX - 1, INT16_MAX))
        x1 = XStage("max", Operand.layer(lowest), 0, _operand(m), False, t, False)
        drift = int(round_half_away(z_in * float(m[0]) / 2.0 ** t))
    x2 = None
    unit = s_out / 2.0 ** f
    if has_bias:
        b = np.atleast_1d(np.asarray(bias, dtype=np.float64)) / unit
        # beyond 2**(9+f) fine units the output saturates whatever x is
        reach = 128 * float(np.abs(m).max()) / 2.0 ** t + 2.0 ** (9 + f)
        b32 = np.clip(round_half_away(b), -reach, reach).astype(np.int64)
        peak = int(np.abs(b32).max())
        shift = max(0, peak.bit_length() - 15)
        b16 = np.clip(round_half_away(b32 / 2.0 ** shift), -INT16_MAX - 1, INT16_MAX)
        x2 = XStage(alu_op="sum", alu=_operand(b16.astype(np.int64)), alu_shift=shift,
                    relu=relu)
    if prelu is not None:
        if x2 is not None:
            raise SdpMathError("an affine op with a bias and a PReLU needs three stages")
        q, tq = int16_factor(np.atleast_1d(np.asarray(prelu, dtype=np.float64)))
        x2 = XStage(mul=_operand(q), prelu=True, truncate=tq)
    if cap is not None:
        capped = int(round_half_away(np.float64(cap) / unit))
        if capped < (127 - z_out) * 2 ** f:   # else int8 saturation caps already
            if x2 is not None:
                raise SdpMathError("an affine op with a bias and a cap needs three stages")
            value, shift = layer_operand(capped + drift)
            x2 = XStage(alu_op="min", alu=Operand.layer(value), alu_shift=shift)
    return SdpProgram(x1, x2, Converter(offset=drift - z_out * 2 ** f, shift=f))


def binary(op: str, a: tuple[int, float, int], b: tuple[int, float, int], s_out: float, *,
           relu: bool = False, mode: str = "element", slopes: np.ndarray | None = None,
           z_out: int = 0, main_scale: np.ndarray | None = None) -> tuple[int, SdpProgram]:
    """``a op b`` for op in sum, sub, max, min: ``(main input index, program)``.

    ``a`` and ``b`` are ``(node input index, scale, zero point)``, ``z_out`` the
    output's zero point.  The main input streams through the SDP's input DMA,
    the other is the ALU operand (``mode`` element, or kernel for a per-channel
    ``b``).  A difference reads ``b`` as the main input and negates it, so the
    ALU adds ``a``.  ``slopes`` are the negative slopes of a fused PReLU (sum,
    max, min at one scale and without zero points: its X2 stage has no room to
    take them off).

    A stage's operands come both from memory or both from registers, so an ALU
    reading the operand leaves its stage's multiplier unused.  At one scale,
    with zero points, X2 takes the excess off (a sum of two codes carries
    ``z_a + z_b``, a maximum or minimum of inputs sharing ``z`` carries ``z``, a
    difference of such inputs none) and rescales to output units, and the
    converter adds ``z_out``; a difference, whose X2 ALU reads ``a``, works on a
    fine grid instead (:func:`converter` rounds ``z_out`` to it).  At different
    scales the main input is brought onto a fine grid of the operand's by X1,
    which takes the main input's zero point off first; the operand's codes are
    added as they are, so it must have none (the caller makes the input with a
    zero point the main input of a sum).  ``main_scale`` (a sum only) multiplies the
    main input's channel ``c`` by ``main_scale[c]`` on the way: X1's multiplier per
    channel (its zero point, if any, taken off per channel too: a stage's operands
    share one mode).
    """
    (main, s_main, z_main), (other, s_other, z_other) = (b, a) if op == "sub" else (a, b)
    alu = "sum" if op in ("sum", "sub") else op
    sign = -1 if op == "sub" else 1
    operand = Operand.input(other, mode)
    if main_scale is not None and (op != "sum" or slopes is not None):
        raise SdpMathError(f"a {op} with a fused PReLU cannot scale its main input per "
                           f"channel" if slopes is not None else
                           f"only a sum scales its main input per channel, not a {op}")
    if slopes is not None and (z_main or z_other or z_out):
        raise SdpMathError(f"a fused PReLU with zero points ({z_main}, {z_other} in, {z_out} "
                           f"out): X2 has no room left to take them off (re-run 'opendla "
                           f"quantize')")
    if main_scale is not None or not math.isclose(s_main, s_other, rel_tol=1e-9):
        if slopes is not None:
            raise SdpMathError(f"a fused PReLU needs the inputs at one scale (got {s_main:g} "
                               f"and {s_other:g}); re-run 'opendla quantize'")
        if z_other:
            raise SdpMathError(f"inputs at different scales ({s_main:g} and {s_other:g}): the "
                               f"ALU adds the operand's codes as they are, so its zero point "
                               f"({z_other}) must be 0; re-run 'opendla quantize'")
        # fine grid u = s_other / 2**f: (main - z_main) * s_main / u in X1, then + other << f
        ratio = s_main / s_other * (1.0 if main_scale is None else
                                    np.asarray(main_scale, np.float64).reshape(-1))
        f = _fine_bits(float(np.max(ratio)))
        m, t = int16_factor(np.atleast_1d(sign * ratio * 2.0 ** f))
        x1 = XStage(alu_op="sum" if z_main else None,
                    alu=_operand(np.full(m.shape, -z_main)) if z_main else None,
                    mul=_operand(m), truncate=t)
        x2 = XStage(alu_op=alu, alu=operand, alu_shift=f, relu=relu)
        return main, SdpProgram(x1, x2, converter(s_other / (2.0 ** f * s_out), z_out))
    if op != "sum" and z_main != z_other:
        raise SdpMathError(f"a {op} of inputs with different zero points ({z_main}, {z_other})")
    ratio = s_other / s_out
    if slopes is not None:      # negative results times their slope, in X2 (free: one scale)
        if op == "sub":
            raise SdpMathError("a fused PReLU on a difference needs three stages")
        q, tq = int16_factor(np.asarray(slopes, dtype=np.float64).reshape(-1))
        slope = Operand.layer(int(q[0])) if q.size == 1 else Operand.kernel(q)
        return main, SdpProgram(XStage(alu_op=alu, alu=operand, relu=relu),
                                XStage(mul=slope, prelu=True, truncate=tq), converter(ratio))
    if op == "sub":     # -b, then + a; the shared zero point cancels
        if not z_out:
            return main, SdpProgram(XStage(mul=Operand.layer(-1)),
                                    XStage(alu_op=alu, alu=operand, relu=relu),
                                    converter(ratio))
        f = FINE_BITS   # (a - b) * 2**f: both operands shifted, exactly
        return main, SdpProgram(XStage(mul=Operand.layer(-(1 << f))),
                                XStage(alu_op=alu, alu=operand, alu_shift=f, relu=relu),
                                converter(ratio / 2.0 ** f, z_out))
    if not (z_main or z_other or z_out):     # NVIDIA's scheme: the converter rescales
        return main, SdpProgram(XStage(alu_op=alu, alu=operand, relu=relu), None,
                                converter(ratio))
    m, t = int16_factor(np.array([ratio]))
    excess = z_main + z_other if op == "sum" else z_main
    x2 = XStage(alu_op="sum" if excess else None,
                alu=Operand.layer(-excess) if excess else None,
                mul=Operand.layer(int(m[0])), truncate=t, relu=relu)
    return main, SdpProgram(XStage(alu_op=alu, alu=operand), x2, Converter(offset=-z_out))


@dataclass(frozen=True, eq=False)
class SdpStep:
    """One SDP operation of a node: main input, program, and where the result goes.

    ``inputs`` maps program source indices to node inputs (``("in", i)``) or
    to the result of an earlier step (``("step", j)``); ``out`` None is the
    node's output, else the temporary's channel/height/width.
    """

    main: tuple[str, int]
    program: SdpProgram
    inputs: tuple[tuple[int, tuple[str, int]], ...] = ()


@dataclass(frozen=True, eq=False)
class SdpPlan:
    steps: tuple[SdpStep, ...]
    out_shape: tuple[int, ...]


def single(main: int, program: SdpProgram, out_shape: tuple[int, ...]) -> SdpPlan:
    srcs = tuple((i, ("in", i)) for i in program.sources())
    return SdpPlan((SdpStep(("in", main), program, srcs),), out_shape)


def lower_steps(lo, node: Node, p: SdpPlan) -> None:
    """Emit one SDP operation per step; intermediate steps write temporaries."""
    results = []
    dst_final = lo.region(node.outputs[0])

    def resolve(ref: tuple[str, int]):
        kind, i = ref
        return lo.region(node.inputs[i]) if kind == "in" else results[i]

    for j, step in enumerate(p.steps):
        last = j == len(p.steps) - 1
        src = resolve(step.main)
        dst = dst_final if last else lo.temp(lo.label(node, f"s{j}"), *src.shape)
        ops = {i: resolve(ref) for i, ref in step.inputs}
        lo.emit(SdpOp(lo.label(node) if len(p.steps) == 1 else lo.label(node, f"s{j}"),
                      node.name, src, dst, step.program, ops))
        results.append(dst)


def reference_steps(p: SdpPlan, inputs: list[np.ndarray]) -> list[np.ndarray]:
    results: list[np.ndarray] = []

    def resolve(ref: tuple[str, int]) -> np.ndarray:
        kind, i = ref
        return np.asarray(inputs[i]) if kind == "in" else results[i]

    for step in p.steps:
        x = resolve(step.main)
        shape4 = x.shape if x.ndim == 4 else (x.shape[0], x.shape[1], 1, 1)
        srcs = {i: resolve(ref).reshape(-1, *resolve(ref).shape[1:]) for i, ref in step.inputs}
        width = max(srcs, default=-1) + 1
        operands = [srcs[i].reshape(_as4(srcs[i])) if i in srcs else None
                    for i in range(width)]
        y = int8_ref.sdp_program_int8(x.reshape(shape4).astype(np.int64), step.program,
                                      operands)
        results.append(y.reshape(x.shape))
    return [results[-1].reshape(p.out_shape)]


def _as4(a: np.ndarray) -> tuple[int, ...]:
    return a.shape if a.ndim == 4 else (a.shape[0], a.shape[1], 1, 1)
