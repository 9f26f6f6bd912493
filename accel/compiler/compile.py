"""The compiler driver: lower, plan memory, emit; and what the runtime needs to know.

>>> compiled = compile_subgraph(graph, table, get_preset("nv_small"))   # doctest: +SKIP
>>> open("model.nvdla", "wb").write(compiled.to_bytes())              # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from accel.compiler.emitter import Emitted, Placed, emit
from accel.compiler.engine import ConvOp, EngineOp, PdpOp, SdpOp
from accel.compiler.fusion import fold_into_writers, fold_tables, fuse_lookups
from accel.compiler.lowering import Buffer, DlaTensor, Lowering
from accel.compiler.memory import lifetimes, plan_arena
from accel.config import HwConfig
from accel.ir import Graph
from accel.loadable.io import write_loadable
from accel.loadable.manifest import TensorQuant, attach_manifest
from accel.loadable.model import Loadable

ARENA_ALIGN = 64   # every buffer starts on a 64-byte boundary (atoms are at most 32 bytes)


@dataclass
class CompiledSubgraph:
    """A compiled accelerator subgraph: its loadable and the map from tensors to memory."""

    name: str
    cfg: HwConfig
    graph: Graph
    ops: list[EngineOp]
    tensors: dict[str, DlaTensor]          # every activation the DLA stores
    buffers: dict[str, Buffer]
    placed: dict[str, Placed]              # buffer -> (memory id, offset)
    fw_ops: list[tuple[int, ...]]          # engine op -> firmware op indices
    ready: dict[str, int]                  # tensor -> engine op after which it is complete
    plans: dict[str, Any]                  # node name -> its op-table plan
    loadable: Loadable
    emitted: Emitted
    arena_without_reuse: int = 0
    input_names: list[str] = field(default_factory=list)
    output_names: list[str] = field(default_factory=list)
    fused: dict[str, str] = field(default_factory=dict)   # tensor never stored -> fused into

    def to_bytes(self) -> bytes:
        """The loadable's flatbuffer, with the manifest that describes it
        (:mod:`accel.loadable.manifest`: preset, input/output scales, blob checksums)."""
        quant = [[TensorQuant(t.name, tuple(t.host_shape), float(t.scale), int(t.zero_point))
                  for t in tensors] for tensors in (self.inputs, self.outputs)]
        return write_loadable(attach_manifest(self.loadable, self.cfg.name, *quant))

    @property
    def inputs(self) -> list[DlaTensor]:
        return [self.tensors[t] for t in self.input_names]

    @property
    def outputs(self) -> list[DlaTensor]:
        return [self.tensors[t] for t in self.output_names]

    def location(self, tensor: str) -> tuple[int, int]:
        """(memory id, byte offset in that memory) of ``tensor``'s region start."""
        region = self.tensors[tensor].region
        p = self.placed[region.buffer]
        return p.memory, p.offset + region.offset

    @property
    def dram_bytes(self) -> dict[str, int]:
        """Bytes of DLA memory by kind: weights, operands, arena, inputs, outputs."""
        io = {"input": 0, "output": 0}
        for b in self.buffers.values():
            if b.kind in io:
                io[b.kind] += b.size
        e = self.emitted
        return {"weights": e.weight_bytes, "operands": e.operand_bytes,
                "activations": e.arena_bytes, "inputs": io["input"], "outputs": io["output"]}

    @property
    def macs(self) -> int:
        return sum(op.macs for op in self.ops)

    def summary(self) -> list[dict]:
        """One row per engine operation (tables and ``--json``)."""
        rows = []
        for op in self.ops:
            row = {"op": op.name, "engine": type(op).__name__[:-2].upper(), "node": op.node,
                   "in": "x".join(map(str, op.src.shape)),
                   "out": "x".join(map(str, op.dst.shape))}
            if isinstance(op, ConvOp):
                row["kernel"] = "x".join(map(str, op.kernel))
                row["macs"] = op.macs
                row["banks"] = f"{op.cbuf.data_banks}+{op.cbuf.weight_banks}"
                if op.cbuf.weight_reuse:
                    row["reuse"] = "weights"
            elif isinstance(op, PdpOp):
                row["kernel"] = f"{op.method} {op.kernel[0]}x{op.kernel[1]}"
            elif isinstance(op, SdpOp):
                row["kernel"] = "sdp"
            if getattr(op, "sdp", None) is not None and op.sdp.lut is not None:
                row["kernel"] += " + lut"
            elif isinstance(op, SdpOp) and op.program.lut is not None:
                row["kernel"] = "sdp lut"
            rows.append(row)
        return rows


def _ready(ops: list[EngineOp], tensors: dict[str, DlaTensor],
           inputs: list[str]) -> dict[str, int]:
    """The engine op after which each tensor holds its final value (-1: a bound input)."""
    ready = {}
    for name, t in tensors.items():
        if name in inputs:
            ready[name] = -1
            continue
        last = -1
        for i, op in enumerate(ops):
            if any(w.overlaps(t.region) for w in op.writes()):
                last = i
        ready[name] = last
    return ready


def compile_subgraph(graph: Graph, quant_table: Any, cfg: HwConfig,
                     reuse_memory: bool = True, fuse: bool = True) -> CompiledSubgraph:
    """Lower and emit ``graph`` (every node DLA-supported) for ``cfg``.

    ``quant_table`` answers ``scale(tensor)`` or is a calibration mapping;
    ``reuse_memory=False`` gives every internal buffer its own arena block;
    ``fuse=False`` keeps every element-wise pass and lookup table in its own pass
    (:mod:`accel.compiler.fusion`; the results are the same).
    """
    lo = Lowering(graph, quant_table, cfg)
    ops = lo.run()
    fused_buffers: dict[str, str] = {}
    if fuse:
        internal = {n for n, b in lo.buffers.items() if b.kind == "internal"}
        ops, fused_buffers = fold_tables(ops, internal, cfg)
        ops, into_writers = fold_into_writers(ops, internal, cfg)
        fused_buffers.update(into_writers)
        ops, into_convs = fuse_lookups(ops, internal)
        fused_buffers.update(into_convs)
    buffers = {n: b for n, b in lo.buffers.items() if n not in fused_buffers}
    names = [t for t in dict.fromkeys([*graph.inputs, *(o for n in graph.nodes
                                                        for o in n.outputs if o)])]
    tensors, fused = {}, {}
    for t in names:
        if graph.is_constant(t):
            continue
        dla = lo.tensor(t)
        if dla.region.buffer in fused_buffers:
            fused[t] = fused_buffers[dla.region.buffer]
        else:
            tensors[t] = dla
    internal = [b for b in buffers.values() if b.kind == "internal"]
    arena = plan_arena(internal, lifetimes(ops, [b.name for b in internal]), ARENA_ALIGN,
                       reuse=reuse_memory)
    inputs = {t: lo.region(t) for t in graph.inputs}
    outputs = {t: lo.region(t) for t in graph.outputs}
    emitted = emit(cfg, ops, buffers, arena.offsets, arena.size, inputs, outputs)
    return CompiledSubgraph(graph.name, cfg, graph, ops, tensors, buffers, emitted.buffers,
                            emitted.fw_ops, _ready(ops, tensors, list(graph.inputs)), lo.plans,
                            emitted.loadable, emitted, arena.total, list(graph.inputs),
                            list(graph.outputs), fused)
