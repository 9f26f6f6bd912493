"""Zero points for one-signed activations: all 256 int8 codes for a range ``[0, t]``.

A symmetric int8 tensor with threshold ``t`` has scale ``t / 127`` and codes
``-127..127``; when it never goes below zero (after ReLU, ReLU6, HardSigmoid,
a sigmoid, an image in [0, 1]) half of them are never used.  With zero point
``z = -128`` and scale ``t / 255`` the same range takes codes ``-128..127``:
``q = sat8(round(x / s) + z)``, ``x = (q - z) * s``, twice the resolution at
the same threshold.

:func:`assign_zero_points` gives that to every activation of a calibrated
symmetric table whose observed range is one-signed (``min >= 0``), except
where the DLA cannot honour it:

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
* **sums with a fused PReLU stay symmetric**: its X2 stage holds the slopes,
  none is left for zero points (the op table's ``zero_free``,
  :func:`tengine_host.devices.nvdla.zero_point_constraints`).
* **entries without an observed range** (``min`` absent) are left alone.

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

from accel.ir import Graph
from tengine_host.quant.rules import scale_groups  # union-find over any ties
from tengine_host.quant.table import QuantTable

#: the zero point of a one-signed tensor: code -128 is 0, code 127 the threshold
ONE_SIGNED_ZERO = -128
#: symmetric codes -127..127 become -128..127: the step shrinks by 127 / 255
STEP_RATIO = 127.0 / 255.0


def _constraints(graph: Graph) -> tuple[list[list[str]], set[str], list[list[str]]]:
    from tengine_host.devices.nvdla import zero_point_constraints  # the accelerator stack

    return zero_point_constraints(graph)


def assign_zero_points(graph: Graph, table: QuantTable) -> QuantTable:
    """A copy of the symmetric ``table`` where every one-signed activation the DLA
    allows takes zero point -128 and scale ``127 * s / 255`` (same threshold, twice
    the resolution); see the module docstring for which tensors may not.

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

    def eligible(group: tuple[str, ...]) -> bool:
        members = [t for t in group if t in out]
        return bool(members) and not any(t in forbidden for t in members) and all(
            "min" in out[t] and out[t]["min"] >= 0 for t in members)

    chosen = {g for g in set(group_of.values()) if eligible(g)}
    for names in exclusive:        # at most one group of each set keeps its zero point
        kept = False
        for t in names:
            g = group_of.get(t, (t,))
            if g in chosen and kept:
                chosen.discard(g)
            kept = kept or g in chosen
    for g in chosen:
        for t in g:
            if t in out:
                out[t]["scale"] = float(out[t]["scale"]) * STEP_RATIO
                out[t]["zero_point"] = ONE_SIGNED_ZERO
    return out
