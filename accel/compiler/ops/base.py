"""The op-table entry: everything the toolchain knows about one DLA-capable ONNX op.

One :class:`OpEntry` per op family, one module per entry.  Who asks it:

* the partitioner: ``check(node, graph, cfg)`` -> None, or the reason the
  preset cannot run the node (attribute and value named);
* the compiler: ``plan(node, graph, cfg, scales)`` computes the typed spec and
  integer parameters once per node; ``place`` / ``nest`` declare views
  (:mod:`accel.compiler.placement`); ``lower(lowering, node, plan)`` emits
  engine operations;
* the int8 CPU golden: ``reference(plan, inputs)`` maps the node's int8
  inputs (host shapes, batch 1) to its int8 outputs with plain numpy
  (:mod:`accel.golden.int8_ref`), using the same plan;
* calibration: ``ties(node, graph)`` names tensors that must share one scale
  because the hardware cannot rescale between them (or should not: a sum of
  two tensors at one scale adds raw integers), ``fixed_scales`` the scales an
  op needs whatever the data (an output in [0, 1] at 1/127); for zero points
  (:mod:`tengine_host.quant.zero_point`), ``zero_ties`` the tensors that must
  share one (None: the scale ties), ``zero_free`` the activations the op
  cannot read with one (they stay symmetric), ``zero_exclusive`` sets of
  activations of which at most one may have one (preferred first),
  ``zero_pow2`` the activations it can read only with a zero point of 0 or
  ``-2**k`` (a product's inputs: the SDP takes the zero point off by adding
  the other input shifted).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from accel.config import HwConfig
from accel.ir import Graph, Node

Check = Callable[[Node, Graph, HwConfig], "str | None"]
Plan = Callable[[Node, Graph, HwConfig, Any], Any]
Lower = Callable[[Any, Node, Any], None]
Reference = Callable[[Any, list[np.ndarray]], list[np.ndarray]]
Ties = Callable[[Node, Graph], list[list[str]]]
Hook = Callable[[Any, Node, Any], None]


def no_ties(node: Node, graph: Graph) -> list[list[str]]:
    return []


def no_fixed_scales(node: Node, graph: Graph) -> dict[str, float]:
    return {}


def no_zero_free(node: Node, graph: Graph) -> list[str]:
    return []


@dataclass(frozen=True)
class OpEntry:
    """See the module docstring."""

    op_types: tuple[str, ...]
    check: Check
    plan: Plan
    lower: Lower
    reference: Reference
    ties: Ties = no_ties
    fixed_scales: Callable[[Node, Graph], dict[str, float]] = no_fixed_scales
    zero_ties: Ties | None = None
    zero_free: Callable[[Node, Graph], list[str]] = no_zero_free
    zero_exclusive: Ties = no_ties
    zero_pow2: Callable[[Node, Graph], list[str]] = no_zero_free

    def zero_point_ties(self, node: Node, graph: Graph) -> list[list[str]]:
        """Tensors of ``node`` that must share one zero point."""
        return (self.ties if self.zero_ties is None else self.zero_ties)(node, graph)
    place: Hook | None = None      # forward pass: aliases and slices
    nest: Hook | None = None       # backward pass: write inputs into the output


def check_channel_factors(node: Node, attrs: tuple[str, ...], channels: int) -> str | None:
    """Per-channel factors a node carries as private attributes (set by channel-group
    equalization): each of ``attrs`` absent, or ``channels`` finite positive numbers."""
    for attr in attrs:
        c = node.attrs.get(attr)
        if c is not None and (np.shape(c) != (channels,)
                              or not np.all(np.isfinite(c) & (np.asarray(c) > 0))):
            return f"{attr} must be {channels} positive numbers, got shape {np.shape(c)}"
    return None


def cube_of(graph: Graph, tensor: str) -> tuple[int, int, int] | None:
    """(C, H, W) of an NCHW / NC activation, else None.  The batch does not matter: the
    executor runs larger batches through a batch-1 compilation, one sample at a time."""
    shape = tuple(graph.tensors[tensor].shape)
    if len(shape) == 4 and shape[0] >= 1:
        return int(shape[1]), int(shape[2]), int(shape[3])
    if len(shape) == 2 and shape[0] >= 1:
        return int(shape[1]), 1, 1
    return None


def check_activation(graph: Graph, tensor: str, what: str = "input") -> str | None:
    """A float activation the DLA can hold: batch-1 NCHW or NC, dims within 1..8192."""
    t = graph.tensors[tensor]
    if graph.is_constant(tensor):
        return f"{what} {tensor!r} is a constant"
    if np.dtype(t.dtype) != np.float32:
        return f"{what} {tensor!r} has dtype {np.dtype(t.dtype)}, not float32"
    cube = cube_of(graph, tensor)
    if cube is None:
        return (f"{what} {tensor!r} has shape {tuple(t.shape)}; the DLA holds NCHW or NC "
                f"tensors")
    if max(cube) > 8192:
        return f"{what} {tensor!r} has a dimension above 8192 (cube C x H x W = {cube})"
    return None


#: ops whose output holds the input's bytes under another shape (the DLA aliases them)
ALIAS_OPS = ("Flatten", "Reshape", "Squeeze", "Unsqueeze", "Identity", "Dropout")


def alias_ok(cube: tuple[int, int, int], shape: tuple[int, ...]) -> bool:
    """Can a tensor of host ``shape`` be the bytes of ``cube`` unchanged?  Yes for the
    same NCHW shape and for the flattened ``[N, C*H*W]`` / ``[N, C*H*W, 1, 1]`` (NVDLA's
    fully-connected layers read the cube directly)."""
    c, h, w = cube
    rest = tuple(int(d) for d in shape[1:])
    return rest in ((c, h, w), (c * h * w,), (c * h * w, 1, 1)) or (h == w == 1 and rest == (c,))


def source_cube(graph: Graph, tensor: str) -> tuple[int, int, int] | None:
    """The cube ``tensor`` is stored as: its own, or, through alias ops (Flatten, Reshape...)
    that keep the bytes, the cube of the tensor it was reshaped from."""
    for _ in range(64):
        producer = graph.producer(tensor)
        if producer is None or producer.op_type not in ALIAS_OPS:
            break
        src = producer.inputs[0]
        cube = source_cube(graph, src)
        if cube is None or not alias_ok(cube, graph.tensors[tensor].shape):
            break
        return cube
    return cube_of(graph, tensor)


def out_shape(graph: Graph, tensor: str) -> tuple[int, ...]:
    """The host shape of ``tensor`` for one sample (plans describe batch 1, as the DLA runs)."""
    shape = tuple(int(d) for d in graph.tensors[tensor].shape)
    return (1, *shape[1:]) if shape else shape


def constant(graph: Graph, tensor: str) -> np.ndarray | None:
    """The value of a constant input, or None."""
    if not tensor or not graph.is_constant(tensor):
        return None
    return np.asarray(graph.tensors[tensor].data)
