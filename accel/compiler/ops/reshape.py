"""Flatten, Reshape, Squeeze, Unsqueeze, Identity, Dropout: the same bytes, another shape.

The DLA stores a tensor as a feature cube; these ops keep the cube and change
only the host shape, so they cost nothing: the output is an alias of the
input (:meth:`accel.compiler.placement.Placement.alias`).  A flattened
``[1, C*H*W]`` tensor keeps the ``C x H x W`` cube its producer wrote (NVDLA's
fully-connected layers read that cube with a kernel as large as it, see
:mod:`accel.compiler.ops.conv`), and the host unpacks the cube and reshapes.
Only when the output is a subgraph output that cannot take the input's place
(the input is itself bound) does the op copy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accel.compiler.ops.base import (
    ALIAS_OPS,
    OpEntry,
    alias_ok,
    check_activation,
    out_shape,
    source_cube,
)
from accel.config import HwConfig
from accel.ir import Graph, Node


@dataclass(frozen=True)
class AliasPlan:
    out_shape: tuple[int, ...]


def check(node: Node, graph: Graph, cfg: HwConfig) -> str | None:
    x = node.inputs[0]
    cube = source_cube(graph, x)
    if cube is None:
        return check_activation(graph, x) or f"input {x!r} is not a DLA cube"
    if node.op_type == "Dropout" and len(node.outputs) > 1 and node.outputs[1]:
        return "Dropout's mask output is not produced"
    shape = tuple(graph.tensors[node.outputs[0]].shape)
    if not alias_ok(cube, shape):
        return (f"output shape {shape} is not the {cube[0]}x{cube[1]}x{cube[2]} cube "
                f"(C x H x W) or its flattening [1, {cube[0] * cube[1] * cube[2]}]")
    return None


def plan(node: Node, graph: Graph, cfg: HwConfig, scales) -> AliasPlan:
    return AliasPlan(out_shape(graph, node.outputs[0]))


def place(lo, node: Node, p: AliasPlan) -> None:
    src, out = node.inputs[0], node.outputs[0]
    lo.placement.alias(out, src, lo.cube(src))


def lower(lo, node: Node, p: AliasPlan) -> None:
    src, out = lo.region(node.inputs[0]), lo.region(node.outputs[0])
    if src.buffer != out.buffer:       # the alias was refused: a bound output
        lo.copy(node, src, out)


def reference(p: AliasPlan, inputs: list[np.ndarray]) -> list[np.ndarray]:
    return [np.asarray(inputs[0]).reshape(p.out_shape)]


def ties(node: Node, graph: Graph) -> list[list[str]]:
    return [[node.inputs[0], node.outputs[0]]]


ENTRY = OpEntry(ALIAS_OPS, check, plan, lower, reference, ties=ties, place=place)
