"""Tengine-style lifecycle over a partitioned graph: prerun -> run (repeatable) -> postrun.

>>> ex = Executor(graph, [get_device("cpu")])        # doctest: +SKIP
>>> ex.prerun(); out = ex.run({"input": x}); ex.postrun()   # doctest: +SKIP

Debugging (Tengine's ``TG_DEBUG_*``, see :mod:`tengine_host.debug`): the
executor reads the environment unless given ``debug=``; GRAPH prints the
graph at prerun, TIME prints the per-node table after each run, DATA dumps
every node's inputs and outputs, REF is applied by the CPU device
(``get_device("cpu", reference=True)``; ``opendla run --debug-ref`` and the
environment variable do it).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, TextIO

import numpy as np

from accel.ir import Graph
from tengine_host.debug import DebugOptions, dump_node_data, format_graph, time_table
from tengine_host.devices.base import Device
from tengine_host.interpreter import check_feeds
from tengine_host.partition import Partition, partition
from tengine_host.quant.rewrites import with_rewrites
from tengine_host.quant.table import QuantTable


class Executor:
    """Run ``graph`` across ``devices`` (priority order; the last is usually ``cpu``).

    Attributes
    ----------
    partition : Partition or None
        Set by :meth:`prerun`.
    subgraph_times : list of (label, seconds)
        Wall time of each subgraph in the last :meth:`run`.
    node_times : dict
        node name -> seconds, for devices whose handle exposes ``timings``.
    """

    def __init__(self, graph: Graph, devices: Sequence[Device],
                 quant_table: QuantTable | None = None, *, debug: DebugOptions | None = None,
                 log: TextIO | None = None) -> None:
        # a table calibrated after weight rewrites (equalization, bias correction)
        # describes the rewritten graph: run that one
        self.graph = with_rewrites(graph, quant_table) if quant_table is not None else graph
        self.devices = list(devices)
        self.quant_table = quant_table
        self.debug = DebugOptions.from_env() if debug is None else debug
        self.log = log if log is not None else sys.stderr
        self.dumped: list[Any] = []
        self.time_rows: list[tuple[str, str, str, float]] = []
        self.partition: Partition | None = None
        self._prepared: list[tuple[Device, Graph, Any]] = []
        self._split: list[bool] = []
        self.subgraph_times: list[tuple[str, float]] = []
        self.node_times: dict[str, float] = {}

    @property
    def prepared(self) -> list[tuple[Device, Graph, Any]]:
        """``(device, subgraph, handle)`` of each prepared subgraph, in execution order.

        Handles are device-specific (the nvdla device's carries per-layer
        captures and cycle estimates of the last run).
        """
        return list(self._prepared)

    def prerun(self) -> Partition:
        """Partition the graph and prepare every subgraph on its device."""
        if self._prepared:
            raise RuntimeError("prerun() called twice without postrun()")
        if self.debug.graph:
            print(format_graph(self.graph), file=self.log)
        self.partition = partition(self.graph, self.devices)
        self._split = []
        for dev, sub in self.partition.parts:
            split = _batch(sub) > 1 and _max_batch(dev) is not None \
                and _batch(sub) > _max_batch(dev)
            handle = dev.prerun(_batch_one(sub) if split else sub, self.quant_table)
            if self.debug.data and hasattr(handle, "keep_values"):
                handle.keep_values = True
            self._prepared.append((dev, sub, handle))
            self._split.append(split)
        return self.partition

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One inference; returns the graph outputs by name."""
        if not self._prepared:
            raise RuntimeError("run() before prerun()")
        env = check_feeds(self.graph, inputs)
        self.subgraph_times = []
        self.node_times = {}
        rows: list[tuple[str, str, str, float]] = []
        for i, (dev, sub, handle) in enumerate(self._prepared):
            start = time.perf_counter()
            feeds = {t: env[t] for t in sub.inputs}
            if self._split[i]:  # compiled for batch 1: one sample at a time
                runs = [dev.run(handle, {t: v[n:n + 1] for t, v in feeds.items()})
                        for n in range(_batch(sub))]
                outs = {t: np.concatenate([r[t] for r in runs]) for t in runs[0]}
            else:
                outs = dev.run(handle, feeds)
            elapsed = time.perf_counter() - start
            self.subgraph_times.append((f"[{i}] {dev.name}", elapsed))
            missing = [t for t in sub.outputs if t not in outs]
            if missing:
                raise RuntimeError(f"device {dev.name} did not return {missing} for {sub.name}")
            env.update(outs)
            if self.debug.data:
                env.update(getattr(handle, "values", {}))
            timings = getattr(handle, "timings", {})
            self.node_times.update(timings)
            if timings:
                rows += [(n.name, n.op_type, dev.name, timings.get(n.name, 0.0))
                         for n in sub.nodes]
            else:  # a device that runs the subgraph as one unit (a DLA loadable)
                rows.append((f"[{i}] {len(sub.nodes)} nodes", "subgraph", dev.name, elapsed))
        self.time_rows = rows
        if self.debug.time:
            print(time_table(rows), file=self.log)
        if self.debug.data:
            self.dumped = dump_node_data(self.graph, env, self.debug.data_dir)
            print(f"TG_DEBUG_DATA: {len(self.dumped)} tensors -> {self.debug.data_dir}/",
                  file=self.log)
        return {t: env[t] for t in self.graph.outputs}

    def postrun(self) -> None:
        """Release every device's prepared subgraph."""
        for dev, _, handle in self._prepared:
            dev.postrun(handle)
        self._prepared = []

    def __enter__(self) -> Executor:
        self.prerun()
        return self

    def __exit__(self, *exc: object) -> None:
        self.postrun()

    def timing_report(self) -> str:
        """Per-subgraph and per-node wall times of the last run, in milliseconds."""
        lines = [f"{label:<16} {sec * 1e3:9.3f} ms" for label, sec in self.subgraph_times]
        lines += [f"  {name:<40} {sec * 1e3:9.3f} ms" for name, sec in self.node_times.items()]
        return "\n".join(lines)


def _max_batch(dev: Device) -> int | None:
    """Largest batch ``dev`` prepares at once (``None``: any): its ``max_batch``
    attribute, else 1, since accelerator loadables are compiled for batch 1."""
    return getattr(dev, "max_batch", 1)


def _batch(graph: Graph) -> int:
    """The batch of a subgraph: the leading dimension of its inputs (1 without inputs)."""
    dims = {graph.tensors[t].shape[0] for t in graph.inputs if graph.tensors[t].shape}
    return dims.pop() if len(dims) == 1 else 1


def _batch_one(graph: Graph) -> Graph:
    """``graph`` with every activation's leading (batch) dimension set to 1."""
    n = _batch(graph)
    tensors = {name: t if t.data is not None or not t.shape or t.shape[0] != n
               else replace(t, shape=(1, *t.shape[1:]))
               for name, t in graph.tensors.items()}
    return Graph(graph.name, graph.nodes, tensors, graph.inputs, graph.outputs)
