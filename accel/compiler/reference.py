"""The int8 CPU golden of a subgraph: every node through its op-table entry's reference.

Plain numpy on int8 tensors in host (NCHW / NC) shapes, with the plans the
compiler made (:attr:`accel.compiler.compile.CompiledSubgraph.plans`), so it
computes what the accelerator must compute, bit for bit, without sharing the
accelerator's code: the entries' references call :mod:`accel.golden.int8_ref`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from accel.compiler.ops import TABLE, entry_for
from accel.ir import Graph


def run_reference(graph: Graph, plans: Mapping[str, Any],
                  feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """int8 values of every activation of ``graph`` from int8 ``feeds`` of its inputs."""
    values = {name: np.asarray(v) for name, v in feeds.items()}
    for node in graph.nodes:
        ins = [values.get(t) if t and not graph.is_constant(t) else None for t in node.inputs]
        outs = entry_for(node).reference(plans[node.name], ins)
        for t, v in zip([o for o in node.outputs if o], outs, strict=True):
            values[t] = np.asarray(v, dtype=np.int8)
    return values


def scale_constraints(graph: Graph) -> tuple[list[list[str]], dict[str, float]]:
    """Tensors that must share one scale (and one zero point), and scales fixed whatever
    the data, over every node the op table knows (calibration applies them before
    partitioning)."""
    groups: list[list[str]] = []
    fixed: dict[str, float] = {}
    for node in graph.nodes:
        entry = TABLE.get(node.op_type)
        if entry is None:
            continue
        groups += [[t for t in g if t and not graph.is_constant(t)]
                   for g in entry.ties(node, graph)]
        fixed.update(entry.fixed_scales(node, graph))
    return [g for g in groups if len(g) > 1], fixed


def zero_pow2_constraints(graph: Graph) -> set[str]:
    """Activations some node reads with a zero point only of 0 or ``-2**k`` (the op
    table's ``zero_pow2``: the inputs of a product)."""
    out: set[str] = set()
    for node in graph.nodes:
        entry = TABLE.get(node.op_type)
        if entry is not None:
            out.update(t for t in entry.zero_pow2(node, graph) if t and not graph.is_constant(t))
    return out


def zero_point_constraints(graph: Graph) -> tuple[list[list[str]], set[str], list[list[str]]]:
    """``(ties, free, exclusive)`` over every node the op table knows: tensors that must
    share one zero point, activations some node cannot read with one (calibration leaves
    them symmetric), and sets of activations of which at most one may have one
    (preferred first: the main input of a product of two tensors, then its operand)."""
    ties: list[list[str]] = []
    free: set[str] = set()
    exclusive: list[list[str]] = []
    for node in graph.nodes:
        entry = TABLE.get(node.op_type)
        if entry is None:
            continue
        ties += [[t for t in g if t and not graph.is_constant(t)]
                 for g in entry.zero_point_ties(node, graph)]
        free.update(t for t in entry.zero_free(node, graph) if t and not graph.is_constant(t))
        exclusive += [[t for t in group if t and not graph.is_constant(t)]
                      for group in entry.zero_exclusive(node, graph)]
    return [g for g in ties if len(g) > 1], free, [g for g in exclusive if len(g) > 1]
