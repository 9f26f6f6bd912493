"""Cut a graph into per-device subgraphs, in execution order.

Each node goes to the first device (in priority order) that supports it;
rejections by earlier devices are recorded as fallbacks with their reasons.
Subgraphs are grown greedily over the ready set: the current device keeps
absorbing every node whose producers have all run, and only when it has none
left does execution switch to the device of the earliest ready node.  Every
group formed this way is convex (no path leaves it and comes back), the
groups run in sequence with all dependencies met (no cycles between them),
and a device is left only when it has nothing runnable, which keeps the
number of transitions low (greedy, not a proven minimum).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field

from tengine_host.devices.base import Device
from tengine_host.ir import Graph, Node


@dataclass
class Fallback:
    node: str
    op_type: str
    device: str      # the device that declined
    reason: str
    runs_on: str     # the device that took it


@dataclass
class Partition:
    """The ordered subgraphs and what the partitioner decided."""

    parts: list[tuple[Device, Graph]]
    fallbacks: list[Fallback] = field(default_factory=list)
    macs: dict[str, int] = field(default_factory=dict)
    ops: dict[str, int] = field(default_factory=dict)

    def report(self) -> str:
        """A plain-text summary: subgraphs, ops and MACs per device, fallbacks."""
        lines = [f"{len(self.parts)} subgraph(s)"]
        for i, (dev, sub) in enumerate(self.parts):
            lines.append(f"  [{i}] {dev.name:<10} {len(sub.nodes):>4} ops  "
                         f"{', '.join(n.op_type for n in sub.nodes)}")
        lines.append("per device:")
        for name in self.ops:
            lines.append(f"  {name:<10} {self.ops[name]:>4} ops  {self.macs[name]:>12,} MACs")
        for fb in self.fallbacks:
            lines.append(f"fallback: {fb.node} ({fb.op_type}) -> {fb.runs_on}: "
                         f"{fb.device} declined: {fb.reason}")
        return "\n".join(lines)


def node_macs(node: Node, graph: Graph) -> int:
    """Multiply-accumulates of a Conv or Gemm (0 for other ops)."""
    if node.op_type == "Conv":
        n, k, oh, ow = graph.tensors[node.outputs[0]].shape
        _, cg, r, s = graph.tensors[node.inputs[1]].shape
        return n * k * oh * ow * cg * r * s
    if node.op_type == "Gemm":
        m, n = graph.tensors[node.outputs[0]].shape
        a = graph.tensors[node.inputs[0]].shape
        return m * n * (a[0] if node.attrs.get("transA") else a[1])
    return 0


def partition(graph: Graph, devices: Sequence[Device]) -> Partition:
    """Assign every node to a device and cut ``graph`` into ordered subgraphs.

    Raises ``ValueError`` naming the node and every device's reason when no
    device supports a node.
    """
    if not devices:
        raise ValueError("partition needs at least one device")
    owner: dict[int, int] = {}
    fallbacks: list[Fallback] = []
    for node in graph.nodes:
        reasons = []
        for d, dev in enumerate(devices):
            ok, why = dev.supports(node, graph)
            if ok:
                owner[id(node)] = d
                fallbacks += [Fallback(node.name, node.op_type, name, r, dev.name)
                              for name, r in reasons]
                break
            reasons.append((dev.name, why))
        else:
            detail = "; ".join(f"{n}: {r}" for n, r in reasons)
            raise ValueError(f"no device runs node {node.name!r} ({node.op_type}): {detail}")

    nodes = graph.nodes
    index = {id(n): i for i, n in enumerate(nodes)}
    producer = {t: index[id(n)] for n in nodes for t in n.outputs if t}
    users: list[list[int]] = [[] for _ in nodes]
    pending = [0] * len(nodes)
    for i, n in enumerate(nodes):
        for j in {producer[t] for t in n.inputs if t in producer}:
            users[j].append(i)
            pending[i] += 1
    dev_of = [owner[id(n)] for n in nodes]
    # One heap of runnable node indices per device; the index keeps graph order.
    ready: dict[int, list[int]] = {d: [] for d in range(len(devices))}
    for i in range(len(nodes)):
        if pending[i] == 0:
            heapq.heappush(ready[dev_of[i]], i)
    groups: list[tuple[int, list[Node]]] = []
    while any(ready.values()):
        d = min((h[0], dev) for dev, h in ready.items() if h)[1]
        group: list[Node] = []
        while ready[d]:
            i = heapq.heappop(ready[d])
            group.append(nodes[i])
            for u in users[i]:
                pending[u] -= 1
                if pending[u] == 0:
                    heapq.heappush(ready[dev_of[u]], u)
        groups.append((d, group))

    parts = [(devices[d], graph.subgraph(nodes, name=f"{graph.name}_{i}_{devices[d].name}"))
             for i, (d, nodes) in enumerate(groups)]
    ops = {dev.name: 0 for dev in devices}
    macs = {dev.name: 0 for dev in devices}
    for node in graph.nodes:
        name = devices[owner[id(node)]].name
        ops[name] += 1
        macs[name] += node_macs(node, graph)
    return Partition(parts, fallbacks, macs, ops)
