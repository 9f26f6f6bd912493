"""Zero points for one-signed activations: all 256 int8 codes for a range ``[0, t]``.

A symmetric int8 tensor with threshold ``t`` has scale ``t / 127`` and codes
``-127..127``; when it never goes below zero (after ReLU, ReLU6, HardSigmoid,
a sigmoid, an image in [0, 1]) half of them are never used.  With zero point
``z = -128`` and scale ``t / 255`` the same range takes codes ``-128..127``:
``q = sat8(round(x / s) + z)``, ``x = (q - z) * s``, twice the resolution at
the same threshold.

:func:`assign_zero_points` gives that to every activation of a calibrated
symmetric table whose observed range is one-signed (``min >= 0``).  A tensor
that is mostly one-signed - a SiLU's output reaches -0.28, a HardSwish's
-0.375, a leaky ReLU's a tenth of its top - wastes nearly as much: its range
``[lo, hi]`` within the threshold takes scale ``(hi - lo) / 255`` and the zero
point that maps ``lo`` to -128 (:func:`asymmetric_entry`), when that step is
at least 1.25 times finer.  Both except where the DLA cannot honour it:

* **tied tensors decide together.**  Tensors the hardware cannot rescale or
  re-centre between (a pooled tensor and its input, the inputs and output of
  a concat, split or slice, a reshape, resize or pad and its input, the two
  inputs of an element-wise difference, maximum or minimum: the op table's
  ``zero_ties``) share one scale and one zero point, so a group takes a zero
  point only when every member is one-signed; a concat of a ReLU output and a
  signed tensor stays symmetric.  The two inputs of a sum are tied by scale
  only: a residual's one-signed shortcut takes a zero point (and half the
  step) beside the signed branch it is added to, and the DLA adds the two at
  their own scales.
* **one input of a product.**  The SDP multiplies the two inputs of a ``Mul``
  of two tensors code by code and can take one zero point off afterwards
  (it adds the other input shifted by ``k`` for ``z = -2**k``), not two: when
  both are one-signed, the main input (the full tensor, long-tailed) keeps
  its zero point and the operand (a squeeze-excite gate) stays symmetric (the
  op table's ``zero_exclusive``).
* **powers of two for products**: the inputs of a product (a ``Mul`` of two
  tensors, a HardSwish, which multiplies its input by its gate) take only 0 or
  ``-2**k`` (the op table's ``zero_pow2``); a signed one takes the ``-2**k``
  whose step holds its range finest (a HardSwish input's [-3, 27]: -64), when
  that is :data:`MIN_STEP_GAIN` finer, and only where it is alone in its
  scale group.  A fixed scale keeps its range.
* **a scale group moves together.**  Zero-point groups tied by scale only (the
  two inputs of a sum, a concat added to a residual) keep one scale: either
  the whole scale group takes the asymmetric step spanning all its ranges,
  each zero-point group with the zero point of its own low end (a sum takes
  any two zero points at one scale), or, first, each one-signed group halves
  its step alone (a sum adds it at two scales, the other input without zero
  point).
* **sums with a fused PReLU stay symmetric**: its X2 stage holds the slopes,
  none is left for zero points (the op table's ``zero_free``,
  :func:`tengine_host.devices.nvdla.zero_point_constraints`).
* **entries without an observed range** (``min`` absent) are left alone.

A tensor read only by activations (a convolution's output before the SiLU that
nv_small's CDP applies as a table) spends codes on inputs the activation cannot tell
apart: below about -6 a SiLU is within a fraction of its output's step of 0, and a
symmetric range of +-113 around a SiLU input gives its informative part, [-6, 113],
half of the codes.  Such a tensor is judged by the part of its range where its
readers' outputs still change (:func:`flat_ends`): its ends past which every reader
stays within :data:`FLAT_SHARE` of its output's finest step; a range that is
one-signed there (read by a ReLU) takes zero point -128, another the asymmetric
step that spans it.  Inputs past those ends saturate to codes whose outputs are the
same.  Readers that write a model output are left alone (an fp32 output keeps the
detail its int8 step would not, and a concat there ties its step to other parts').

Every other tensor is fine on the DLA (:mod:`accel.compiler.ops`): a
convolution's bias absorbs ``-z_in`` times its weight sums and its padding
holds ``z_in``, average pooling pads with ``z_in``, lookup tables are indexed
by the code, output converters add ``z_out``.  Graph inputs and outputs are
included: the host quantizes the inputs and dequantizes the outputs of both
the ``nvdla`` device and the int8 CPU reference with the zero point, and
tensors that only CPU (fp32) ops touch are dequantized with it too.  A fixed
scale keeps its range: HardSigmoid's ``[0, 1]`` at 1/127 becomes 1/255 with
zero point -128, which still saturates at exactly 1.

The table must be the calibrated one after the DLA scale rules
(:func:`tengine_host.quant.rules.apply_dla_rules`): ``calibrate`` then this.
"""

from __future__ import annotations

import numpy as np

from accel.ir import Graph
from tengine_host.quant.rules import scale_groups  # union-find over any ties
from tengine_host.quant.table import QuantTable
from tengine_host.quant.weights import round_half_away

#: the zero point of a one-signed tensor: code -128 is 0, code 127 the threshold
ONE_SIGNED_ZERO = -128
#: symmetric codes -127..127 become -128..127: the step shrinks by 127 / 255
STEP_RATIO = 127.0 / 255.0
#: a signed tensor takes an asymmetric zero point only if its step gets this much finer
#: (a fifth of a bit): nearly symmetric ranges gain nothing, and every zero point costs
#: a rounded offset in some converters
MIN_STEP_GAIN = 1.25


def _constraints(graph: Graph) -> tuple[list[list[str]], set[str], list[list[str]]]:
    from tengine_host.devices.nvdla import zero_point_constraints  # the accelerator stack

    return zero_point_constraints(graph)


def _pow2_only(graph: Graph) -> set[str]:
    from tengine_host.devices.nvdla import zero_pow2_constraints  # the accelerator stack

    return zero_pow2_constraints(graph)


def _scale_constraints(graph: Graph) -> tuple[list[list[str]], dict[str, float]]:
    from tengine_host.devices.nvdla import scale_constraints  # the accelerator stack

    return scale_constraints(graph)


#: an activation counts as flat past a point when its output stays within this share of
#: its output's finest step (the zero-point step, 127/255 of the symmetric one)
FLAT_SHARE = 0.25
#: points at which the readers' functions are evaluated over a tensor's range
FLAT_GRID = 4096


def flat_ends(graph: Graph, table: QuantTable) -> dict[str, tuple[float, float]]:
    """``{tensor: (lo, hi)}``: the part of each tensor's observed range (within its
    threshold, 0 included) where its readers' outputs still change, for tensors that only
    unary activations read (:data:`~tengine_host.quant.range_search.ACTIVATIONS`, constant
    scalar operands allowed) and whose part is narrower than the range.

    Each reader's function is evaluated on :data:`FLAT_GRID` points of the range; its
    low end is the last point up to which it stays within :data:`FLAT_SHARE` of its
    output step of its value at the range's bottom (a SiLU: about -6 for an output step
    of 0.05; a ReLU: 0), its high end likewise from the top (a sigmoid saturates both
    ways).  Several readers keep the widest part.  A reader writing a model output
    (directly or through :data:`~tengine_host.quant.coarse_outputs.MOVEMENT_OPS`: a
    concat may tie its scale to boxes in pixels while the CPU computes it in fp32), or
    without a scale of its own, keeps the whole range; so does a part that is not
    :data:`MIN_STEP_GAIN` times narrower (a leaky ReLU's bottom tenth is not flat)."""
    from tengine_host.ops import run_op
    from tengine_host.quant.coarse_outputs import reaches_outputs_unchanged
    from tengine_host.quant.range_search import ACTIVATIONS

    out = {}
    for t, e in table.items():
        if "min" not in e or "max" not in e or not e.get("scale") or t not in graph.tensors:
            continue
        readers = graph.consumers(t)
        threshold = 127.0 * float(e["scale"])
        lo, hi = max(float(e["min"]), -threshold), min(float(e["max"]), threshold)
        if not readers or not lo < hi:
            continue
        grid = np.linspace(lo, hi, FLAT_GRID + 1)
        a, b = hi, lo                   # the informative part: none yet
        for node in readers:
            y_entry = table.get(node.outputs[0]) if node.outputs else None
            operands = [graph.tensors.get(name) for name in node.inputs[1:] if name]
            if (node.op_type not in ACTIVATIONS or node.inputs[0] != t
                    or t in node.inputs[1:] or not y_entry or not y_entry.get("scale")
                    or any(o is None or o.data is None or np.size(o.data) != 1
                           for o in operands)
                    or any(name in graph.outputs or reaches_outputs_unchanged(graph, name)
                           for name in node.outputs if name)):
                a, b = lo, hi
                break
            args = [grid.astype(np.float32).reshape(1, 1, 1, -1),
                    *(graph.tensors[name].data if name else None for name in node.inputs[1:])]
            y = np.asarray(run_op(node.op_type, args, node.attrs)[0], np.float64).ravel()
            tol = FLAT_SHARE * STEP_RATIO * float(y_entry["scale"])
            low = np.abs(y - y[0]) <= tol
            high = np.abs(y - y[-1]) <= tol
            first_change = int(np.argmin(low)) if not low.all() else len(grid)
            last_change = len(grid) - 1 - int(np.argmin(high[::-1])) if not high.all() else -1
            a = min(a, grid[max(first_change - 1, 0)])
            b = max(b, grid[min(last_change + 1, len(grid) - 1)])
        a, b = min(a, 0.0), max(b, 0.0)
        if a < b and (b - a) * MIN_STEP_GAIN <= hi - lo:
            out[t] = (float(a), float(b))
    return out


def _zero_point(lo: float, step: float) -> int:
    """The zero point that maps ``lo`` to code -128 at ``step``."""
    return int(np.clip(round_half_away(-128.0 - lo / step), -128, 127))


def asymmetric_entry(entry: dict) -> tuple[float, int] | None:
    """``(scale, zero point)`` spanning ``entry``'s range within its symmetric threshold
    with all 256 codes, or None when that is not at least :data:`MIN_STEP_GAIN` finer
    than the symmetric step (both signs reach near the threshold)."""
    scale = float(entry["scale"])
    threshold = 127.0 * scale
    lo, hi = max(float(entry["min"]), -threshold), min(float(entry["max"]), threshold)
    if not lo < 0 < hi:
        return None
    step = (hi - lo) / 255.0
    if step * MIN_STEP_GAIN > scale:
        return None
    return step, _zero_point(lo, step)


def assign_zero_points(graph: Graph, table: QuantTable, *, asymmetric: bool = True
                       ) -> QuantTable:
    """A copy of the symmetric ``table`` where every one-signed activation the DLA
    allows takes zero point -128 and scale ``127 * s / 255`` (same threshold, twice
    the resolution), and with ``asymmetric`` every mostly one-signed one (a SiLU,
    HardSwish or leaky output) the zero point and scale that map its range to all
    256 codes (:func:`asymmetric_entry`); see the module docstring for which tensors
    may not.

    Raises ``ValueError`` when ``table`` already has a non-zero zero point (it is
    for calibrated symmetric tables).
    """
    given = sorted(t for t, e in table.items() if e.get("zero_point", 0))
    if given:
        raise ValueError(f"assign_zero_points takes a symmetric table; {len(given)} entries "
                         f"already have a zero point ({', '.join(map(repr, given[:5]))}"
                         f"{', ...' if len(given) > 5 else ''})")
    out = QuantTable({name: dict(e) for name, e in table.items()},
                     rewrites=getattr(table, "rewrites", None),
                     keep_float=getattr(table, "keep_float", ()))
    ties, forbidden, exclusive = _constraints(graph)
    grouped = scale_groups(graph, ties)
    group_of = {t: tuple(g) for g in grouped for t in g}
    for t in out:
        group_of.setdefault(t, (t,))
    pow2_only, fixed, scale_group = set(), set(), {}
    if asymmetric:
        pow2_only = _pow2_only(graph)
        scale_ties, pinned = _scale_constraints(graph)
        fixed = set(pinned)
        # zero-point groups tied by scale (the two inputs of a sum) change their
        # scale together (:func:`choose`)
        scale_group = {t: set(g) for g in scale_groups(graph, scale_ties) for t in g}

    def allowed(members: list[str], *, signed: bool) -> bool:
        """Whether ``members`` may take a zero point: a one-signed one (-128), or with
        ``signed`` an asymmetric one."""
        if not members or any(t in forbidden or "min" not in out[t] for t in members):
            return False
        return not signed or (asymmetric and not any(
            t in pow2_only or t in fixed or "max" not in out[t] for t in members))

    def pow2_allowed(members: list[str]) -> bool:
        """Whether ``members`` (a product's input among them) may take a zero point of
        ``-2**k`` other than -128 (:func:`pow2_step`)."""
        return (asymmetric and allowed(members, signed=False)
                and any(t in pow2_only for t in members)
                and not any(t in fixed or "max" not in out[t] for t in members))

    def pow2_step(members: list[str]) -> tuple[float, int] | None:
        """``(step ratio, zero point)``: of the zero points ``-2**k``, the one whose finest
        step holds every member's range (within the threshold), or None when it is not
        :data:`MIN_STEP_GAIN` finer than the symmetric one.  Zero point ``z`` spans
        ``[(-128 - z) s, (127 - z) s]``: -64 gives a quarter of the codes to the
        negative side, as a HardSwish input's [-3, 27] needs."""
        scale = float(out[members[0]]["scale"])
        lo = max(min(low(t) for t in members), -127.0 * scale)
        hi = min(max(high(t) for t in members), 127.0 * scale)
        if not lo < 0 < hi:
            return None
        step, zero = min((max(hi / (127 + 2 ** k), -lo / (128 - 2 ** k)), -2 ** k)
                         for k in range(7))      # -128: one-signed only
        return None if step * MIN_STEP_GAIN > scale else (step / scale, zero)

    informative = flat_ends(graph, out)

    def low(t: str) -> float:
        return informative[t][0] if t in informative else out[t]["min"]

    def high(t: str) -> float:
        return informative[t][1] if t in informative else out[t]["max"]

    def one_signed(members: list[str]) -> bool:
        return all(low(t) >= 0 for t in members)

    def asymmetric_step(members: list[str]) -> float | None:
        """The asymmetric step (as a ratio of the shared symmetric scale) spanning
        every member's range, or None: no gain."""
        span = {"scale": out[members[0]]["scale"],    # tied: one scale
                "min": min(low(t) for t in members),
                "max": max(high(t) for t in members)}
        asym = asymmetric_entry(span)
        return None if asym is None else asym[0] / span["scale"]

    def zero_for(members: list[str], ratio: float) -> int:
        """The zero point that maps the lowest of ``members`` (within the threshold) to
        -128 at step ``ratio`` times their scale."""
        scale = float(out[members[0]]["scale"])
        return _zero_point(max(min(low(t) for t in members), -127.0 * scale),
                           ratio * scale)

    def choose(groups: list[tuple[str, ...]]) -> dict[tuple[str, ...], tuple[float, int]]:
        """``{group: (step ratio, zero point)}`` for the zero-point groups of one scale
        group (those left out stay symmetric).  Each one-signed group halves its
        step alone (a sum adds it at two scales, beside a symmetric input).  When
        none is one-signed, the whole scale group may take the asymmetric step
        spanning all its ranges, each zero-point group with its own zero point.
        A one-signed group's low end is a bound (a ReLU's 0); a signed one's is
        only the lowest value calibration saw, and an asymmetric step saturates
        below it: the one-signed choice goes first."""
        members = {g: m for g in groups if (m := [t for t in g if t in out])}
        alone = {g: (STEP_RATIO, ONE_SIGNED_ZERO) for g, m in members.items()
                 if allowed(m, signed=False) and one_signed(m)}
        everyone = [t for m in members.values() for t in m]
        if not alone and len(members) == 1 and pow2_allowed(everyone):
            got = pow2_step(everyone)
            return {g: got for g in members} if got else {}
        if alone or not allowed(everyone, signed=True):
            return alone
        ratio = asymmetric_step(everyone)
        if ratio is None:
            return {}
        return {g: (ratio, zero_for(m, ratio)) for g, m in members.items()}

    by_scale_group: dict[frozenset[str], list[tuple[str, ...]]] = {}
    for g in set(group_of.values()):
        key = frozenset(scale_group.get(g[0], g))
        by_scale_group.setdefault(key, []).append(g)
    chosen = {g: c for groups in by_scale_group.values()
              for g, c in choose(sorted(groups)).items()}
    for names in exclusive:        # at most one group of each set keeps its zero point
        kept = False               # (members of one group share it: they count once)
        for g in dict.fromkeys(group_of.get(t, (t,)) for t in names):
            if g in chosen and kept:
                del chosen[g]
            kept = kept or g in chosen
    for g, (ratio, zero) in chosen.items():
        for t in g:
            if t in out:
                out[t]["scale"] = float(out[t]["scale"]) * ratio
                out[t]["zero_point"] = zero
    return out
