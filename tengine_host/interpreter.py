"""Run a Graph node by node on numpy arrays with the registered fp32 ops.

This is the CPU device's engine and the calibration's: one loop over the
topologically sorted nodes, an environment of named arrays, and an optional
per-node override (the CPU device's int8 mode swaps Conv/Gemm for the int8
reference this way).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import numpy as np

from accel.ir import Graph, Node
from tengine_host.ops import run_op

NodeFn = Callable[[list["np.ndarray | None"]], tuple[np.ndarray, ...]]


def check_feeds(graph: Graph, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Validate the runtime inputs: every graph input present with its shape and dtype.

    A feed of the same kind (float, signed or unsigned integer, bool) but another
    width is converted (float64 images into a float32 model); another kind is an error.
    """
    env: dict[str, np.ndarray] = {}
    unknown = sorted(set(feeds) - set(graph.inputs))
    if unknown:
        raise ValueError(f"inputs {unknown} are not inputs of graph {graph.name!r}; it needs "
                         f"{', '.join(graph.inputs)}")
    for name in graph.inputs:
        if name not in feeds:
            raise ValueError(f"missing input {name!r}; the graph {graph.name!r} needs "
                             f"{', '.join(graph.inputs)}")
        arr = np.asarray(feeds[name])
        want = graph.tensors[name].shape
        if arr.shape != want:
            raise ValueError(f"input {name!r} has shape {arr.shape}, the graph expects {want}")
        dtype = graph.tensors[name].dtype
        if arr.dtype.kind != np.dtype(dtype).kind:
            raise ValueError(f"input {name!r} has dtype {arr.dtype}, the graph expects {dtype}")
        env[name] = arr.astype(dtype, copy=False)
    return env


def interpret(graph: Graph, feeds: Mapping[str, np.ndarray], *, keep_all: bool = False,
              overrides: Mapping[str, NodeFn] | None = None,
              timings: dict[str, float] | None = None) -> dict[str, np.ndarray]:
    """Evaluate ``graph`` on ``feeds``.

    Parameters
    ----------
    graph : Graph
        The graph; constants are read from its tensors.
    feeds : mapping
        One array per graph input.
    keep_all : bool
        Return every tensor computed (inputs and each node's outputs), not only
        the graph outputs; calibration uses this.
    overrides : mapping, optional
        Node name -> function of the node's input arrays, used instead of the
        registered fp32 op.
    timings : dict, optional
        Filled with node name -> seconds spent.
    """
    env = check_feeds(graph, feeds)
    overrides = overrides or {}
    # Drop each activation after its last reader: memory is then reused by the
    # next outputs (fewer page faults, warmer caches) instead of growing per node.
    last_use: dict[str, int] = {}
    if not keep_all:
        for i, node in enumerate(graph.nodes):
            for t in node.inputs:
                last_use[t] = i
        for t in graph.outputs:
            last_use[t] = len(graph.nodes)
    for i, node in enumerate(graph.nodes):
        args = [tensor_value(graph, env, t) for t in node.inputs]
        start = time.perf_counter()
        fn = overrides.get(node.name)
        outs = fn(args) if fn is not None else run_op(node.op_type, args, node.attrs)
        if timings is not None:
            timings[node.name] = time.perf_counter() - start
        for name, value in zip(node.outputs, outs, strict=False):
            if name:
                env[name] = value
        if not keep_all:
            for t in node.inputs:
                if last_use.get(t) == i and t in env:
                    del env[t]
    if keep_all:
        return env
    # An output may be a constant or a graph input passed straight through.
    return {name: tensor_value(graph, env, name) for name in graph.outputs}


def tensor_value(graph: Graph, env: Mapping[str, np.ndarray], name: str) -> np.ndarray | None:
    """``name``'s value: from ``env`` (computed tensors), else the graph's constant; None
    for an absent optional input (``''``)."""
    if not name:
        return None
    if name in env:
        return env[name]
    tensor = graph.tensors.get(name)
    if tensor is not None and tensor.data is not None:
        return tensor.data
    raise KeyError(f"tensor {name!r} has no value yet (missing input or constant)")


def node_label(node: Node) -> str:
    """``name (OpType)`` for reports and errors."""
    return f"{node.name} ({node.op_type})"
