"""The weight rewrites a calibration table was made for, carried in the table.

Cross-layer equalization (:func:`~tengine_host.quant.equalize.equalize`) rescales
channels of intermediate tensors, and bias correction
(:func:`~tengine_host.quant.bias_correction.correct_bias`) moves layers' biases:
a table calibrated after either describes the *rewritten* graph, and using it
with the original weights would quantize every rescaled channel with the wrong
range, silently.  So ``opendla quantize`` stores what it applied in the table
(:data:`KEY`), and every user of a table (the executor, ``opendla compile``,
the fidelity check) applies it again to the model it loads
(:func:`with_rewrites`):

* equalization of pairs depends on the weights alone and is deterministic, so the
  table stores only that it was applied; equalization of channel groups
  (:mod:`~tengine_host.quant.equalize_groups`) depends on the calibration data, so
  the table stores each group's channel scales (keyed by the group's first tensor);
* bias correction depends on the calibration data, so the table stores each
  corrected layer's shift (one number per output channel).

A graph keeps the rewrites applied to it (:func:`applied`), so applying a
table's rewrites twice is a no-op and a graph rewritten otherwise is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from accel.ir import Graph
from tengine_host.errors import TengineInputError
from tengine_host.passes.edit import drop_unused
from tengine_host.quant.layers import copy_graph, read_layer, write_layer

#: the table's JSON key for its rewrites (not a tensor: entries are read around it)
KEY = "__graph_rewrites__"

EQUALIZATION, BIAS_CORRECTION = "cross-layer equalization", "bias correction"
#: how channel groups are found (:mod:`~tengine_host.quant.equalize_groups`), written with
#: a table's channel scales: 2 since residual sums cut streams into one group per block and
#: HardSwish, Concat, Split and Resize joined.  Scales found another way would fall on
#: other groups (or on groups of the same width, silently), so they are refused.
CHANNEL_GROUPS = 2
#: equalization whose lone pairs of layers take scales from their data too
#: (:func:`equalization` with ``pairs``), a candidate of its own
PAIRS_BY_DATA = f"{EQUALIZATION} (pairs by data)"


@dataclass(frozen=True)
class GraphRewrites:
    """What was applied before calibration: ``equalize`` (pairs), the channel groups'
    scales (``channel_scale[group]``, see :mod:`~tengine_host.quant.equalize_groups`),
    then ``bias_shift[node]`` subtracted from each corrected layer's bias (a layer
    without a bias gets ``-shift``).  Both equalizations are reported as one."""

    equalize: bool = False
    bias_shift: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    channel_scale: Mapping[str, tuple[float, ...]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.equalize or bool(self.bias_shift) or bool(self.channel_scale)

    def names(self) -> list[str]:
        """The rewrites applied, in order, for reports."""
        return [name for name, on in (
            (EQUALIZATION, self.equalize or bool(self.channel_scale)),
            (BIAS_CORRECTION, bool(self.bias_shift))) if on]

    def without_shifts(self, nodes=None) -> GraphRewrites:
        """These rewrites without the bias correction of ``nodes`` (kept in fp32: their
        weights are not rounded, so there is nothing to correct); of every layer when
        ``nodes`` is None (what the ranges are calibrated on)."""
        drop = set(self.bias_shift if nodes is None else nodes)
        return GraphRewrites(self.equalize, {n: s for n, s in self.bias_shift.items()
                                             if n not in drop}, self.channel_scale)

    def key(self) -> tuple:
        """A hashable form (equal rewrites, equal keys)."""
        return (self.equalize, *(tuple(sorted(m.items())) for m in (self.bias_shift,
                                                                     self.channel_scale)))

    def as_json(self) -> dict:
        return {"equalize": self.equalize,
                "bias_shift": {n: list(s) for n, s in sorted(self.bias_shift.items())},
                **({"channel_groups": CHANNEL_GROUPS,
                    "channel_scale": {t: list(s) for t, s in sorted(self.channel_scale.items())}}
                   if self.channel_scale else {})}

    @classmethod
    def from_json(cls, doc, where: str = "calibration table") -> GraphRewrites:
        """Rewrites from :meth:`as_json`'s form; anything else is a
        :class:`TengineInputError` saying what is wrong and where."""
        if not isinstance(doc, dict) or set(doc) - {"equalize", "bias_shift", "channel_scale",
                                                    "channel_groups"}:
            raise TengineInputError(f"{where}: {KEY!r} must be an object with 'equalize' (true "
                                    f"or false), 'bias_shift' ({{layer: [numbers]}}) and "
                                    f"optionally 'channel_scale' ({{tensor: [numbers]}}), got "
                                    f"{doc!r}")
        equalize = doc.get("equalize", False)
        if not isinstance(equalize, bool):
            raise TengineInputError(f"{where}: {KEY}.equalize must be true or false, got "
                                    f"{equalize!r}")
        shifts = _vectors(doc, "bias_shift", "layer", where, positive=False)
        scales = _vectors(doc, "channel_scale", "tensor", where, positive=True)
        if scales and doc.get("channel_groups") != CHANNEL_GROUPS:
            raise TengineInputError(
                f"{where}: its channel scales were made for channel groups of kind "
                f"{doc.get('channel_groups', 1)!r}, this OpenDLA finds groups of kind "
                f"{CHANNEL_GROUPS}; re-run 'opendla quantize'")
        return cls(equalize, shifts, scales)


def _vectors(doc: dict, name: str, what: str, where: str, *, positive: bool
             ) -> dict[str, tuple[float, ...]]:
    """``doc[name]``, a mapping of names to non-empty lists of finite (``positive``)
    numbers, checked."""
    entries = doc.get(name, {})
    if not isinstance(entries, dict):
        raise TengineInputError(f"{where}: {KEY}.{name} must map {what} names to lists of "
                                f"numbers, got {entries!r}")
    out = {}
    for key, vector in entries.items():
        values = np.asarray(vector, dtype=object)
        if values.ndim != 1 or not values.size or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool)
                and np.isfinite(v) and (v > 0 or not positive) for v in values):
            kind = "positive" if positive else "finite"
            raise TengineInputError(f"{where}: {KEY}.{name}[{key!r}] must be a non-empty list "
                                    f"of {kind} numbers, got {vector!r}")
        out[key] = tuple(float(v) for v in values)
    return out


def applied(graph: Graph) -> GraphRewrites:
    """The rewrites :func:`apply` made to ``graph`` (none for a loaded model)."""
    return getattr(graph, "rewrites", None) or GraphRewrites()


def apply(graph: Graph, rewrites: GraphRewrites) -> Graph:
    """A copy of ``graph`` (as loaded, without rewrites) with ``rewrites`` made; ``graph``
    itself when there are none.  A shift for a layer the graph does not have, or of
    another channel count, is a ``ValueError``: the table belongs to another model."""
    if not rewrites:
        return graph
    if applied(graph):
        raise ValueError(f"graph {graph.name!r} already has {' and '.join(applied(graph).names())}"
                         f" applied; rewrites apply to the model as loaded")
    from tengine_host.quant.equalize import equalize
    from tengine_host.quant.equalize_groups import rescale

    out = equalize(graph)[0] if rewrites.equalize else copy_graph(graph)
    if rewrites.channel_scale:
        try:
            rescale(out, rewrites.channel_scale)
        except ValueError as exc:
            raise TengineInputError(f"the table's channel scales do not fit model "
                                    f"{graph.name!r}: {exc}; re-run 'opendla quantize' on this "
                                    f"model") from exc
    nodes = {n.name: n for n in out.nodes}
    for name, shift in rewrites.bias_shift.items():
        layer = read_layer(out, nodes[name]) if name in nodes else f"no layer {name!r}"
        if isinstance(layer, str) or layer.out_channels != len(shift):
            why = layer if isinstance(layer, str) else (
                f"{name!r} has {layer.out_channels} output channels, the shift {len(shift)}")
            raise TengineInputError(f"the table's bias correction does not fit model "
                                    f"{graph.name!r}: {why}; re-run 'opendla quantize' on this "
                                    f"model")
        layer.bias = (0.0 if layer.bias is None else layer.bias) - np.asarray(shift)
        write_layer(out, layer, "corrected", weight=False)
    drop_unused(out)
    out.rewrites = rewrites
    return out


def with_rewrites(graph: Graph, table) -> Graph:
    """``graph`` with the rewrites ``table`` was calibrated for (its ``rewrites``
    attribute; a plain mapping has none), applied once: a graph that already has them
    is returned as it is."""
    wanted = getattr(table, "rewrites", None) or GraphRewrites()
    have = applied(graph)
    if have == wanted:
        return graph
    if have:
        raise ValueError(f"graph {graph.name!r} has {' and '.join(have.names()) or 'no rewrites'}"
                         f" applied, the calibration table wants "
                         f"{' and '.join(wanted.names()) or 'none'}")
    return apply(graph, wanted)


def equalization(graph: Graph, samples, *, pairs: bool = False) -> GraphRewrites:
    """Both equalizations: pairs by their weights, then every channel group (with
    ``pairs``, every pair too) by the ranges of its tensors on ``samples`` (fp32)."""
    from tengine_host.interpreter import interpret
    from tengine_host.quant.equalize_groups import channel_groups, group_scales

    paired = apply(graph, GraphRewrites(equalize=True))
    groups = channel_groups(paired, pairs=pairs)
    if not groups:
        return GraphRewrites(equalize=True)
    members = {t for g in groups for t in g.offsets}
    values = []             # each member's per-channel peak |x| on each sample, [1, C, 1, 1]
    for feeds in samples:
        env = interpret(paired, feeds, keep_all=True)
        values.append({t: np.abs(env[t]).max(axis=(0, 2, 3), keepdims=True) for t in members})
    return GraphRewrites(True, channel_scale={
        g.key: tuple(float(v) for v in group_scales(g, values)) for g in groups})


def bias_correction(graph: Graph, samples, quantize_weights, int8_nodes, *,
                    base: GraphRewrites = GraphRewrites()) -> GraphRewrites:
    """The rewrites: ``base`` (equalization, if any), then bias correction of the layers
    ``int8_nodes(node)`` says run with int8 weights, measured on ``samples``
    (:func:`~tengine_host.quant.bias_correction.correct_bias`; ``quantize_weights``
    is the compiler's weight quantizer)."""
    from tengine_host.quant.bias_correction import correct_bias

    report = correct_bias(apply(graph, base), samples, quantize_weights,
                          int8_nodes=int8_nodes)[1]
    return GraphRewrites(base.equalize, {c.node: tuple(float(v) for v in c.shift)
                                         for c in report.layers}, base.channel_scale)
