"""Cut a graph into per-device subgraphs, in execution order.

Each node goes to the first device (in priority order) that supports it;
rejections by earlier devices are recorded as fallbacks with their reasons.
Subgraphs are grown over the ready set: the current device keeps absorbing
every node whose producers have all run, and only when it has none left does
execution switch (to the device of the earliest ready node).  This is tried
once per possible first device and the schedule with the fewest groups wins.

Guarantees:

* each group is a contiguous run of one topological order, hence convex (no
  path leaves it and comes back), and the groups run in sequence with every
  dependency met (no cycles between subgraphs);
* each group is maximal: when it closes, its device has no runnable node left;
* with two devices (DLA + CPU) the number of groups, hence of CPU<->DLA
  transitions, is the minimum over all valid schedules.  Taking every ready
  node of the current device can only enlarge the set of finished nodes, and
  a larger finished set never needs more switches (drop the finished nodes
  from any schedule: the device sequence only loses switches); with two
  devices the device after a switch is forced, so only the first device is a
  choice, and both are tried.  With three or more devices the choice at each
  switch is greedy (earliest ready node), not a proven minimum.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from accel.ir import Graph, Node, dependencies
from tengine_host.devices.base import Device
from tengine_host.errors import TengineInputError


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

    @property
    def transitions(self) -> int:
        """Device switches between consecutive subgraphs."""
        return sum(a[0] is not b[0] for a, b in zip(self.parts, self.parts[1:], strict=False))

    def subgraph_counts(self) -> dict[str, int]:
        """Subgraphs per device name."""
        counts = {name: 0 for name in self.ops}
        for dev, _ in self.parts:
            counts[dev.name] = counts.get(dev.name, 0) + 1
        return counts

    def share(self, device: str) -> tuple[float, float]:
        """(fraction of ops, fraction of MACs) that run on ``device``."""
        ops, macs = sum(self.ops.values()), sum(self.macs.values())
        return (self.ops.get(device, 0) / ops if ops else 0.0,
                self.macs.get(device, 0) / macs if macs else 0.0)

    def fallback_reasons(self) -> list[tuple[int, str, str]]:
        """``(count, op type, reason)`` of the fallbacks, most frequent first."""
        counts: dict[tuple[str, str], int] = {}
        for fb in self.fallbacks:
            key = (fb.op_type, f"{fb.device} declined: {fb.reason}")
            counts[key] = counts.get(key, 0) + 1
        return sorted(((n, op, why) for (op, why), n in counts.items()),
                      key=lambda r: (-r[0], r[1], r[2]))

    def report(self) -> str:
        """A plain-text summary: subgraphs, ops and MACs per device, fallbacks by reason."""
        counts = self.subgraph_counts()
        lines = [f"{len(self.parts)} subgraph(s) (" + ", ".join(
            f"{n} {name}" for name, n in counts.items()) + f"), {self.transitions} transition(s)"]
        for i, (dev, sub) in enumerate(self.parts):
            kinds: dict[str, int] = {}
            for n in sub.nodes:
                kinds[n.op_type] = kinds.get(n.op_type, 0) + 1
            lines.append(f"  [{i}] {dev.name:<10} {len(sub.nodes):>4} ops  " + ", ".join(
                f"{op}" + (f" x{k}" if k > 1 else "") for op, k in kinds.items()))
        lines.append("per device:")
        for name in self.ops:
            op_share, mac_share = self.share(name)
            lines.append(f"  {name:<10} {self.ops[name]:>4} ops ({op_share:6.1%})  "
                         f"{self.macs[name]:>14,} MACs ({mac_share:6.1%})")
        reasons = self.fallback_reasons()
        if reasons:
            lines.append(f"fallbacks ({len(self.fallbacks)} nodes):")
            lines += [f"  {n:>4} x {op}: {why}" for n, op, why in reasons]
        return "\n".join(lines)


def node_macs(node: Node, graph: Graph) -> int:
    """Multiply-accumulates of a Conv or Gemm (0 for other ops)."""
    if node.op_type == "Conv":            # of any rank: every output times its taps
        out, w = graph.tensors[node.outputs[0]].shape, graph.tensors[node.inputs[1]].shape
        return math.prod(out) * math.prod(w[1:])
    if node.op_type == "Gemm":
        m, n = graph.tensors[node.outputs[0]].shape
        a = graph.tensors[node.inputs[0]].shape
        return m * n * (a[0] if node.attrs.get("transA") else a[1])
    return 0


#: An island (a subgraph between subgraphs of the last device, the CPU) with at most this
#: share of the graph's multiply-accumulates is handed to the CPU when that saves subgraphs.
#: YOLOv8's box decoding has one 16 -> 1 convolution (the DFL's expectation, 0.01 % of the
#: MACs) between a CPU Softmax and CPU arithmetic: two transitions and an int8 rounding of
#: a probability for less work than either transition.
ISLAND_MAC_SHARE = 0.01


def partition(graph: Graph, devices: Sequence[Device], merge_islands: bool = True) -> Partition:
    """Assign every node to a device and cut ``graph`` into ordered subgraphs.

    With ``merge_islands``, a subgraph with at most :data:`ISLAND_MAC_SHARE` of
    the graph's multiply-accumulates that sits between subgraphs of the last
    device (the CPU) is handed to that device when this lowers the number of
    subgraphs: moving a few concatenations (or a tiny convolution in a
    detector's decoding) to the accelerator and back costs two transitions and
    gains nothing.

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

    dev_of = [owner[id(n)] for n in graph.nodes]
    groups = _best_groups(graph.nodes, dev_of, len(devices))
    # A group with (almost) no multiply-accumulates (data movement, element-wise) between
    # groups of the last device only adds transitions: hand it to the last device when that
    # lowers the number of subgraphs and the last device runs all of its nodes.
    last = len(devices) - 1
    index = {id(n): i for i, n in enumerate(graph.nodes)}
    island_macs = ISLAND_MAC_SHARE * sum(node_macs(n, graph) for n in graph.nodes)
    moved = merge_islands
    while moved and len(groups) > 1:
        moved = False
        for d, nodes in groups:
            macs = sum(node_macs(n, graph) for n in nodes)
            if d == last or macs > island_macs \
                    or not all(devices[last].supports(n, graph)[0] for n in nodes):
                continue
            trial = list(dev_of)
            for n in nodes:
                trial[index[id(n)]] = last
            regrouped = _best_groups(graph.nodes, trial, len(devices))
            if len(regrouped) < len(groups):
                for n in nodes:
                    owner[id(n)] = last
                    fallbacks.append(Fallback(n.name, n.op_type, devices[d].name,
                                              "moved to save transitions (" + (
                                                  "no MACs" if not macs else
                                                  f"<= {ISLAND_MAC_SHARE:.0%} of the MACs")
                                              + f" between {devices[last].name} subgraphs)",
                                              devices[last].name))
                dev_of, groups, moved = trial, regrouped, True
                break
    parts = [(devices[d], graph.subgraph(nodes, name=f"{graph.name}_{i}_{devices[d].name}"))
             for i, (d, nodes) in enumerate(groups)]
    ops = {dev.name: 0 for dev in devices}
    macs = {dev.name: 0 for dev in devices}
    for node in graph.nodes:
        name = devices[owner[id(node)]].name
        ops[name] += 1
        macs[name] += node_macs(node, graph)
    return Partition(parts, fallbacks, macs, ops)


def _best_groups(nodes: list[Node], dev_of: list[int], n_devices: int
                 ) -> list[tuple[int, list[Node]]]:
    """The fewest groups over the possible first devices."""
    return min((_grow(nodes, dev_of, n_devices, first)
                for first in sorted(set(dev_of), key=dev_of.index)), key=len)


def _grow(nodes: list[Node], dev_of: list[int], n_devices: int, first: int
          ) -> list[tuple[int, list[Node]]]:
    """Groups formed by exhausting one device's ready nodes before switching.

    ``first`` is the device of the first group; after that execution switches
    to the device of the earliest ready node.  Heaps keep each device's ready
    nodes in graph order, so the work is O(E + V log V).
    """
    users, pending = dependencies(nodes)
    ready: dict[int, list[int]] = {d: [] for d in range(n_devices)}
    for i in range(len(nodes)):
        if pending[i] == 0:
            heapq.heappush(ready[dev_of[i]], i)
    groups: list[tuple[int, list[Node]]] = []
    d = first
    while any(ready.values()):
        if not ready[d]:
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
    return groups


def resolve_keep_float(graph: Graph, names) -> frozenset[str]:
    """The node names that ``--keep-float`` names: each item is a node's name or the name
    of a tensor a node produces.  An unknown name is a ``ValueError`` that lists the
    nearest names of the graph."""
    import difflib

    by_output = {t: n.name for n in graph.nodes for t in n.outputs if t}
    nodes = {n.name for n in graph.nodes}
    out = set()
    for name in names:
        if name in nodes:
            out.add(name)
        elif name in by_output:
            out.add(by_output[name])
        else:
            # a node and the tensor it writes often share a name: each name once
            near = difflib.get_close_matches(name, sorted(nodes | set(by_output)), n=5,
                                             cutoff=0.5)
            raise TengineInputError(f"--keep-float {name!r} is neither a node nor a tensor of "
                                    f"{graph.name!r}"
                                    + (f"; nearest: {', '.join(map(repr, near))}" if near
                                       else ""))
    return frozenset(out)
