"""Take a Split apart from the concatenations that made its parts.

Detection heads often concatenate two branches only to split them again: YOLOv8
concatenates each level's box and class convolutions along channels, flattens the
levels, concatenates them along the anchors and splits the channels back into box
and class logits.  Computed as written, the two branches travel in one tensor:
they share one int8 scale, and the class logits (a few units around the decision)
take the step of the box logits (tens of units), or the other way round.

When every path from a Split's input back to a Concat along the Split's own axis
whose inputs the Split's sizes cut at their boundaries goes through

* Concats along another axis (a split along ``a`` of a concat along ``b != a`` is
  the concat of the splits), and
* Reshapes that keep every dimension up to and including the split axis (so the
  split's pieces stay whole: ``[1, C, H, W] -> [1, C, H*W]`` split on channels),

the Split goes: its outputs become the concatenations (and reshapes) of the
pieces, each branch apart.  Nothing changes where a tensor on the way has another
reader or is a graph output (it is still needed whole), where a boundary falls
inside a Concat input, or where a piece would be a Concat's input itself and the
Split's output is a graph output (whose name must stay).
"""

from __future__ import annotations

import numpy as np

from accel.ir import Graph, Node, Tensor, _toposort
from tengine_host.ops.split import sizes as split_sizes
from tengine_host.passes.edit import drop_unused, fresh_name, fresh_node_name, sole_consumer


def _axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _shape(graph: Graph, tensor: str) -> tuple[int, ...]:
    return tuple(graph.tensors[tensor].shape)


def _bounds(parts: list[int]) -> list[int]:
    return [int(v) for v in np.cumsum([0, *parts])]


def _keeps_prefix(graph: Graph, node: Node, axis: int) -> bool:
    """A Reshape whose input and output agree on every dimension up to ``axis``."""
    src, dst = _shape(graph, node.inputs[0]), _shape(graph, node.outputs[0])
    return len(src) > axis and len(dst) > axis and src[:axis + 1] == dst[:axis + 1]


def _chain(graph: Graph, tensor: str, axis: int, bounds: list[int], reader: Node
           ) -> list[Node] | None:
    """The nodes that build ``tensor`` (read only by ``reader``) down to where it can be
    cut along ``axis`` at ``bounds`` (see the module docstring), or None: it cannot."""
    if sole_consumer(graph, tensor) is not reader or reader.inputs.count(tensor) != 1:
        return None
    node = graph.producer(tensor)
    if node is None:
        return None
    rank = len(_shape(graph, tensor))
    if node.op_type == "Concat":
        if _axis(node.attrs["axis"], rank) == axis:
            edges = _bounds([_shape(graph, t)[axis] for t in node.inputs])
            return [node] if set(bounds) <= set(edges) else None
        below = [_chain(graph, t, axis, bounds, node) for t in node.inputs]
        return None if any(b is None for b in below) else [node, *(n for b in below for n in b)]
    if node.op_type == "Reshape" and _keeps_prefix(graph, node, axis):
        below = _chain(graph, node.inputs[0], axis, bounds, node)
        return None if below is None else [node, *below]
    return None


def _add(graph: Graph, op_type: str, inputs: list[str], shape: tuple[int, ...], attrs: dict,
         base: str, out: str | None = None) -> str:
    """Append one ``op_type`` node writing a float tensor of ``shape`` (``out`` or a fresh
    name); returns the tensor's name."""
    out = out or fresh_name(graph, base)
    graph.tensors[out] = Tensor(out, shape, np.dtype(np.float32))
    graph.nodes.append(Node(fresh_node_name(graph, base), op_type, inputs, [out], attrs))
    return out


def _pieces(graph: Graph, tensor: str, axis: int, bounds: list[int],
            outs: list[str | None]) -> list[str]:
    """The pieces of ``tensor`` between consecutive ``bounds`` along ``axis``, built from
    the tensors that made it (``outs``: the names to give them, None for fresh ones)."""
    node = graph.producer(tensor)
    shape = _shape(graph, tensor)
    sized = [shape[:axis] + (hi - lo,) + shape[axis + 1:]
             for lo, hi in zip(bounds, bounds[1:], strict=False)]
    if node.op_type == "Concat":
        if _axis(node.attrs["axis"], len(shape)) == axis:
            edges = _bounds([_shape(graph, t)[axis] for t in node.inputs])
            got = []
            for (lo, hi), name, want in zip(zip(bounds, bounds[1:], strict=False), outs, sized,
                                            strict=True):
                ins = node.inputs[edges.index(lo):edges.index(hi)]
                got.append(_add(graph, "Concat", ins, want, {"axis": axis},
                                f"{tensor}_part", name) if len(ins) > 1 else ins[0])
            return got
        per_input = [_pieces(graph, t, axis, bounds, [None] * len(outs)) for t in node.inputs]
        return [_add(graph, "Concat", list(ins), want, dict(node.attrs), f"{tensor}_part", name)
                for ins, name, want in zip(zip(*per_input, strict=True), outs, sized,
                                           strict=True)]
    # a Reshape keeping the dimensions up to the axis: reshape each piece alike
    inner = _pieces(graph, node.inputs[0], axis, bounds, [None] * len(outs))
    got = []
    for piece, name, want in zip(inner, outs, sized, strict=True):
        target = fresh_name(graph, f"{tensor}_shape")
        graph.tensors[target] = Tensor(target, (len(want),), np.dtype(np.int64),
                                       np.asarray(want, np.int64))
        got.append(_add(graph, "Reshape", [piece, target], want, {"allowzero": 0},
                        f"{tensor}_part", name))
    return got


def _sizes(graph: Graph, node: Node, dim: int) -> list[int] | None:
    """The sizes a Split cuts its axis of length ``dim`` into, or None when they are
    not known before running (a computed sizes input)."""
    given = node.attrs.get("split")
    if len(node.inputs) > 1 and node.inputs[1]:
        if not graph.is_constant(node.inputs[1]):
            return None
        given = graph.tensors[node.inputs[1]].data
    return split_sizes(dim, given, node.attrs["num_outputs"])


def apply(graph: Graph) -> bool:
    """Dissolve every Split the module docstring describes; True when any went."""
    changed = False
    for node in list(graph.nodes):
        if node.op_type != "Split" or not all(node.outputs):
            continue
        src = node.inputs[0]
        shape = _shape(graph, src)
        axis = _axis(node.attrs["axis"], len(shape))
        parts = _sizes(graph, node, shape[axis])
        if parts is None or len(parts) != len(node.outputs):
            continue
        bounds = _bounds(parts)
        chain = _chain(graph, src, axis, bounds, node)
        if chain is None or _axis(chain[0].attrs.get("axis", 0), len(shape)) == axis and \
                chain[0].op_type == "Concat" and any(o in graph.outputs for o in node.outputs):
            continue        # the pieces are the Concat's inputs: graph outputs keep their names
        pieces = _pieces(graph, src, axis, bounds, list(node.outputs))
        gone = {id(n) for n in (node, *chain)}
        graph.nodes = [n for n in graph.nodes if id(n) not in gone]
        for out, piece in zip(node.outputs, pieces, strict=True):
            if piece != out:            # a Concat input itself: its readers read it
                for reader in graph.nodes:
                    reader.inputs = [piece if t == out else t for t in reader.inputs]
        drop_unused(graph)
        graph.nodes = _toposort(graph.nodes, graph)
        changed = True
    return changed
