"""Lowering: a supported subgraph -> engine operations, through the op table.

:class:`Lowering` is the context every op-table entry lowers into: it knows
each activation's region (after :mod:`accel.compiler.placement`), its scale
(the calibration table) and the node's plan (typed spec and integer
parameters, computed once per node); entries append
:mod:`accel.compiler.engine` operations with :meth:`Lowering.emit`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from accel.compiler.engine import EngineOp, SdpOp
from accel.compiler.ops import entry_for
from accel.compiler.placement import Placement
from accel.compiler.plans import make_plan
from accel.compiler.program import IDENTITY
from accel.compiler.scales import CompileError, Scales, as_scales, zero_point_of
from accel.compiler.tensors import Region
from accel.config import HwConfig
from accel.ir import Graph, Node
from accel.layout import cube_layout


@dataclass
class Buffer:
    """A block of DLA memory holding one root tensor (and its views) or a temporary."""

    name: str
    size: int
    kind: str            # "input" | "output" | "internal"


@dataclass
class DlaTensor:
    """An activation as the DLA stores it: its region, scale, host (ONNX) shape and zero
    point (the int8 code of 0: the value of code ``q`` is ``(q - zero_point) * scale``)."""

    name: str
    region: Region
    scale: float
    host_shape: tuple[int, ...]
    zero_point: int = 0

    @property
    def layout(self):
        return self.region.layout


def host_cube(shape: tuple[int, ...]) -> tuple[int, int, int] | None:
    """(C, H, W) of a batch-1 NCHW or NC host shape; None for other ranks or batches."""
    if len(shape) == 4 and shape[0] == 1:
        return int(shape[1]), int(shape[2]), int(shape[3])
    if len(shape) == 2 and shape[0] == 1:
        return int(shape[1]), 1, 1
    return None


@dataclass
class Lowering:
    """The lowering of one subgraph; see the module docstring."""

    graph: Graph
    scales: Scales
    cfg: HwConfig
    ops: list[EngineOp] = field(default_factory=list)
    buffers: dict[str, Buffer] = field(default_factory=dict)
    plans: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.scales = as_scales(self.scales)
        g = self.graph
        produced = {t for n in g.nodes for t in n.outputs if t}
        self.placement = Placement(list(g.inputs), list(g.outputs), produced)
        for node in g.nodes:
            self.plans[node.name] = self._plan(node)
        for backward in (False, True):
            for node in (reversed(g.nodes) if backward else g.nodes):
                entry = entry_for(node)
                hook = entry.nest if backward else entry.place
                if hook is not None:
                    hook(self, node, self.plans[node.name])
        self._regions: dict[str, Region] = {}
        self._labels: dict[str, int] = {}

    # ---------------------------------------------------------------- queries
    def _plan(self, node: Node) -> Any:
        return make_plan(node, self.graph, self.cfg, self.scales)

    def plan(self, node: Node) -> Any:
        return self.plans[node.name]

    def scale(self, tensor: str) -> float:
        return self.scales.scale(tensor)

    def zero_point(self, tensor: str) -> int:
        return zero_point_of(self.scales, tensor)

    def cube(self, tensor: str) -> tuple[int, int, int]:
        """(C, H, W) of ``tensor`` as the DLA stores it."""
        if tensor in self.placement.cubes:
            return self.placement.cubes[tensor]
        shape = tuple(self.graph.tensors[tensor].shape)
        cube = host_cube(shape)
        if cube is None:
            raise CompileError(f"tensor {tensor!r} of shape {shape} is not a batch-1 NCHW or "
                               f"NC tensor (the executor splits batches)")
        return cube

    def _root_region(self, root: str) -> Region:
        c, h, w = self.cube(root)
        layout = cube_layout(self.cfg, c, h, w)
        if root not in self.buffers:
            kind = ("input" if root in self.graph.inputs else
                    "output" if root in self.graph.outputs else "internal")
            self.buffers[root] = Buffer(root, layout.size, kind)
        return Region(root, 0, layout)

    def region(self, tensor: str) -> Region:
        """Where ``tensor`` lives (its root buffer, through any views)."""
        if tensor not in self._regions:
            self._regions[tensor] = self.placement.resolve(tensor, self._root_region)
        return self._regions[tensor]

    def tensor(self, name: str) -> DlaTensor:
        return DlaTensor(name, self.region(name), self.scale(name),
                         tuple(self.graph.tensors[name].shape), self.zero_point(name))

    def is_view(self, tensor: str) -> bool:
        return tensor in self.placement.parent

    # ---------------------------------------------------------------- building
    def label(self, node: Node, what: str = "") -> str:
        """A unique operation name derived from the node's."""
        base = f"{node.name}{'.' + what if what else ''}"
        n = self._labels.get(base, 0)
        self._labels[base] = n + 1
        return base if n == 0 else f"{base}#{n}"

    def temp(self, name: str, c: int, h: int, w: int) -> Region:
        """A fresh internal buffer for an intermediate cube that is not a graph tensor."""
        if name in self.buffers or name in self.graph.tensors:
            raise CompileError(f"temporary buffer name {name!r} is taken")
        layout = cube_layout(self.cfg, c, h, w)
        self.buffers[name] = Buffer(name, layout.size, "internal")
        return Region(name, 0, layout)

    def emit(self, op: EngineOp) -> None:
        self.ops.append(op)

    def copy(self, node: Node, src: Region, dst: Region, what: str = "copy") -> None:
        """An SDP pass-through from ``src`` to ``dst`` (same cube, both int8)."""
        if src.shape != dst.shape:
            raise CompileError(f"node {node.name!r}: copy of a {src.shape} cube into {dst.shape}")
        self.emit(SdpOp(self.label(node, what), node.name, src, dst, IDENTITY))

    def run(self) -> list[EngineOp]:
        for node in self.graph.nodes:
            entry_for(node).lower(self, node, self.plans[node.name])
        # every subgraph output must be written by some operation
        written = {r.buffer for op in self.ops for r in op.writes()}
        for t in self.graph.outputs:
            if self.region(t).buffer not in written:
                raise CompileError(f"output {t!r} is not computed by any DLA operation")
        return self.ops
