"""NVDLA's constraints on activation scales, applied to a calibrated table.

Some tensors must share one int8 scale because the hardware cannot rescale
between them (pooling has no converter, concatenation and reshapes move bytes
unchanged, element-wise sums add raw integers), and some outputs have a scale
fixed by their range (HardSigmoid's [0, 1] at 1/127).  The accelerator's op
table knows which; this module asks it through the ``nvdla`` device
(:func:`tengine_host.devices.nvdla.scale_constraints`), so the rules live with
the ops that need them.

Tied tensors form groups (union-find); a group takes its fixed scale if a
member has one, else the largest scale of its members, so no member's
observed range is clipped harder than calibration chose.  ``min`` / ``max``
keep the observed values.  The rules apply to symmetric tables; tied tensors
also share one zero point, which :func:`tengine_host.quant.zero_point.assign_zero_points`
gives per group afterwards.
"""

from __future__ import annotations

from accel.ir import Graph
from tengine_host.quant.table import QuantTable


def _constraints(graph: Graph) -> tuple[list[list[str]], dict[str, float]]:
    from tengine_host.devices.nvdla import scale_constraints  # the accelerator stack, on demand

    return scale_constraints(graph)


def scale_groups(graph: Graph, ties: list[list[str]] | None = None) -> list[list[str]]:
    """Groups (of two or more activations) that the DLA requires to share one scale."""
    parent: dict[str, str] = {}

    def find(t: str) -> str:
        parent.setdefault(t, t)
        while parent[t] != t:
            parent[t] = parent[parent[t]]
            t = parent[t]
        return t

    for names in (_constraints(graph)[0] if ties is None else ties):
        names = [t for t in names if t and not graph.is_constant(t)]
        for t in names[1:]:
            parent[find(t)] = find(names[0])
    groups: dict[str, list[str]] = {}
    for t in parent:
        groups.setdefault(find(t), []).append(t)
    return sorted(sorted(g) for g in groups.values() if len(g) > 1)


def apply_dla_rules(graph: Graph, table: QuantTable) -> QuantTable:
    """A copy of ``table`` with every scale group and fixed scale applied."""
    ties, fixed = _constraints(graph)
    out = type(table)({name: dict(e) for name, e in table.items()})
    groups = scale_groups(graph, ties)
    grouped = {t for g in groups for t in g}
    for group in [*groups, *([t] for t in fixed if t not in grouped)]:
        present = [t for t in group if t in out]
        if not present:
            continue
        pinned = [fixed[t] for t in present if t in fixed]
        scale = max(pinned) if pinned else max(out[t]["scale"] for t in present)
        for t in present:
            out[t]["scale"] = scale
    return out
