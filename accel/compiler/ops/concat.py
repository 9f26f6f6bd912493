"""Concat, Split and Slice in place: producers write into, consumers read from, views.

* **Concat** along channels, rows or columns: each input is nested into its
  slot of the output buffer (:meth:`accel.compiler.placement.Placement.nest`),
  so its producer writes there directly.  An input that cannot be nested (a
  subgraph input, a tensor already placed in another concat, an output) is
  copied into its slot by an SDP pass-through.  All inputs and the output
  share one scale.
* Channel slots that do not start and end on atoms share surfaces with their
  neighbours, and the DMAs write whole atoms, so no producer can write its
  slot alone.  Each run of inputs that shares surfaces is *merged*: its
  inputs are written (nested, or else copied) into a staging buffer, each
  from an atom of its own, and one 1x1 convolution with 0/1 weights moves
  every channel to its lane of the output (each sum one product: exact;
  the lanes past an input's channels meet zero weights).  Where that
  convolution does not fit the hardware, one 0/1 convolution per input and
  surface it reaches moves its channels, the SDP adding the lanes moved
  before read from memory (X2 element-wise sum: :func:`merge_chains`).
* **Split / Slice** along channels, rows or columns (step 1): every output is
  a view of the input; an output that must be a buffer of its own (a
  subgraph output) is copied out.  A channel piece that does not start on an
  atom cannot be a view (its lanes are not the lanes of a cube of its own):
  a 1x1 convolution with 0/1 weights moves its channels to lanes 0.. of a
  buffer of its own (:func:`move_channels`; YOLOv8's C2f splits 32 channels
  16 + 16, which on nv_large's 32-channel atoms puts the second half inside
  the first atom).
* **Slice with steps** on rows and columns (YOLOv5 / YOLOX's Focus, space to
  depth), or on several axes: rows by a view whose line stride skips the
  others; columns by the column view of a packed copy, as
  :mod:`accel.compiler.ops.resize` interleaves pixels: two SDP copies.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accel.compiler.ops.base import OpEntry, check_activation, constant, out_shape
from accel.compiler.ops.conv import lower_conv
from accel.compiler.ops.resize import MAX_DIM
from accel.compiler.program import IDENTITY, Operand, SdpProgram, XStage
from accel.compiler.tensors import Region
from accel.compiler.tiling import ConvGeom, plan_conv
from accel.config import HwConfig
from accel.ir import Graph, Node

AXES = {1: "channels", 2: "rows", 3: "cols"}


@dataclass(frozen=True)
class Piece:
    tensor: str
    start: int
    size: int


@dataclass(frozen=True)
class MovePlan:
    axis: int                       # 1 channels, 2 rows, 3 columns
    pieces: tuple[Piece, ...]       # concat inputs / split outputs along the axis
    shapes: tuple[tuple[int, ...], ...]   # host shapes of the outputs
    concat: bool = False


def _view(region, axis: int, start: int, size: int):
    return getattr(region, AXES[axis])(start, size)


def _axis(node: Node, graph: Graph, tensor: str) -> int | str:
    rank = len(graph.tensors[tensor].shape)
    ax = int(node.attrs.get("axis", 0))
    ax = ax + rank if ax < 0 else ax
    if rank != 4 or ax not in AXES:
        return (f"axis {node.attrs.get('axis')} of a rank-{rank} tensor (channels, rows or "
                f"columns of NCHW)")
    return ax


@dataclass(frozen=True)
class Window:
    """A Slice that keeps every ``step``-th row and column from ``start`` (and perhaps
    channels ``c0..c0+c``, step 1, from an atom): anything but one axis at step 1."""

    channels: tuple[int, int]             # first channel, count
    rows: tuple[int, int, int]            # first row, step, count
    cols: tuple[int, int, int]            # first column, step, count
    out_shape: tuple[int, ...]


def _slice_axes(node: Node, graph: Graph) -> list[tuple[int, int, int]] | str:
    """``(start, step, count)`` of each NCHW axis of a Slice, ONNX's clamping applied."""
    shape = tuple(graph.tensors[node.inputs[0]].shape)
    if len(shape) != 4:
        return f"input rank {len(shape)}"
    a = node.attrs
    vals = []
    for i, name in ((1, "starts"), (2, "ends"), (3, "axes"), (4, "steps")):
        v = constant(graph, node.inputs[i]) if len(node.inputs) > i and node.inputs[i] else None
        v = a.get(name) if v is None else v
        vals.append(None if v is None else [int(x) for x in np.asarray(v).reshape(-1)])
    starts, ends, axes, steps = vals
    if starts is None or ends is None:
        return "starts/ends are not constant"
    axes = list(range(len(starts))) if axes is None else [x + 4 if x < 0 else x for x in axes]
    steps = steps or [1] * len(starts)
    if any(st < 1 for st in steps):
        return f"steps {steps}: only positive steps"
    out = tuple(graph.tensors[node.outputs[0]].shape)
    window = [(0, 1, n) for n in shape]
    for ax, s, st in zip(axes, starts, steps, strict=True):
        s = s + shape[ax] if s < 0 else s
        window[ax] = (min(max(s, 0), shape[ax]), st, int(out[ax]))
    if window[0] != (0, 1, shape[0]):
        return "slices the batch"
    return window


def _slice_plan(node: Node, graph: Graph, cfg: HwConfig | None) -> MovePlan | Window | str:
    axes = _slice_axes(node, graph)
    if isinstance(axes, str):
        return axes
    shape = tuple(graph.tensors[node.inputs[0]].shape)
    cut = [ax for ax in AXES if axes[ax] != (0, 1, shape[ax])]
    if len(cut) == 1 and axes[cut[0]][1] == 1:
        ax = cut[0]
        return MovePlan(ax, (Piece(node.outputs[0], axes[ax][0], axes[ax][2]),),
                        (out_shape(graph, node.outputs[0]),))
    (c0, cstep, c), rows, cols = axes[1:]
    if cstep != 1:
        return f"channel step {cstep}: only rows and columns take steps"
    if cfg is not None and c0 % cfg.atom_size and c != shape[1]:
        return (f"channels {c0}..{c0 + c - 1} start inside a {cfg.atom_size}-channel atom "
                f"while rows or columns are sliced too")
    return Window((c0, c), rows, cols, out_shape(graph, node.outputs[0]))


def check(node: Node, graph: Graph, cfg: HwConfig) -> str | None:
    ins = [t for t in node.inputs if t]
    main = ins[0] if node.op_type != "Concat" else None
    for t in (ins if node.op_type == "Concat" else [main]):
        if graph.is_constant(t):
            return f"input {t!r} is a constant"
        why = check_activation(graph, t)
        if why:
            return why
    p = _plan(node, graph, cfg)
    if isinstance(p, str):
        return p
    if isinstance(p, Window):
        return _check_window(p)
    if p.axis == 1 and node.op_type != "Concat":
        h, w = graph.tensors[node.inputs[0]].shape[2:]
        for piece in p.pieces:
            if piece.start % cfg.atom_size:
                c0, span = _piece_span(piece, cfg.atom_size)
                why = plan_conv(ConvGeom(span, h, w, piece.size, 1, 1), cfg)
                if isinstance(why, str):
                    return (f"moving channels {piece.start}..{piece.start + piece.size - 1} "
                            f"of {piece.tensor!r} off their atoms: {why}")
    if p.axis == 1 and node.op_type == "Concat":
        h, w = graph.tensors[node.outputs[0]].shape[2:]
        for group in _groups(p, cfg.atom_size):
            if len(group) > 1 and _staging(group, cfg, h, w) is None:
                for chain in merge_chains(group, cfg.atom_size, h * w):
                    for step in chain:
                        why = plan_conv(step.geom(h, w), cfg)
                        if isinstance(why, str):
                            return (f"merging unaligned channels of {step.piece.tensor!r}: "
                                    f"{why}")
    return None


def _check_window(p: Window) -> str | None:
    if min(p.channels[1], p.rows[2], p.cols[2]) < 1:
        return f"the output would be empty ({p.out_shape})"
    return None


def _groups(p: MovePlan, atom: int) -> list[list[Piece]]:
    """Runs of consecutive channel pieces that share a surface (single pieces own theirs)."""
    groups: list[list[Piece]] = []
    for piece in p.pieces:
        if groups and piece.start % atom:      # starts inside the previous piece's last atom
            groups[-1].append(piece)
        else:
            groups.append([piece])
    return groups


def _group_span(group: list[Piece], atom: int) -> tuple[int, int]:
    """(first channel, channel count) of the whole surfaces a group covers."""
    c0 = group[0].start - group[0].start % atom
    end = group[-1].start + group[-1].size
    return c0, end - c0


def _piece_span(piece: Piece, atom: int) -> tuple[int, int]:
    """(first channel, channel count) of the input surfaces a split piece lies in."""
    c0 = piece.start - piece.start % atom
    return c0, piece.start + piece.size - c0


def channel_move_weights(k: int, c: int, dst_first: int, src_first: int,
                         n: int) -> np.ndarray:
    """``[k, c, 1, 1]`` 0/1 weights of a 1x1 convolution that puts input lanes
    ``src_first..+n`` on output lanes ``dst_first..+n`` (every other output 0)."""
    weight = np.zeros((k, c, 1, 1), dtype=np.int8)
    lanes = np.arange(n)
    weight[dst_first + lanes, src_first + lanes, 0, 0] = 1
    return weight


def move_channels(lo, node: Node, what: str, src, dst, dst_first: int, src_first: int,
                  n: int, fill: int = 0) -> None:
    """Input lanes ``src_first..+n`` of ``src`` onto lanes ``dst_first..+n`` of ``dst``
    (same rows and columns), every other lane of ``dst`` set to the code ``fill``.

    A 1x1 convolution with 0/1 weights: each sum has one product, so CACC holds the
    input code exactly; the SDP adds ``fill`` per kernel on the other lanes and
    passes the rest through (input and output share scale and zero point).  The
    DMAs read and write whole atoms, so this is how lanes change atoms.
    """
    k, h, w = dst.shape
    c = src.shape[0]
    weight = channel_move_weights(k, c, dst_first, src_first, n)
    program = IDENTITY
    if fill:
        bias = np.full(k, fill, dtype=np.int64)
        bias[dst_first:dst_first + n] = 0
        program = SdpProgram(XStage(alu_op="sum", alu=Operand.kernel(bias)))
    geom = ConvGeom(c, h, w, k, 1, 1)
    lower_conv(lo, node, lo.label(node, what), src, dst, geom, weight, 0, program,
               plan_conv(geom, lo.cfg))


def _plan(node: Node, graph: Graph, cfg: HwConfig | None = None) -> MovePlan | Window | str:
    if node.op_type == "Concat":
        ax = _axis(node, graph, node.outputs[0])
        if isinstance(ax, str):
            return ax
        pieces, at = [], 0
        for t in node.inputs:
            n = int(graph.tensors[t].shape[ax])
            pieces.append(Piece(t, at, n))
            at += n
        return MovePlan(ax, tuple(pieces), (out_shape(graph, node.outputs[0]),),
                        concat=True)
    if node.op_type == "Split":
        ax = _axis(node, graph, node.inputs[0])
        if isinstance(ax, str):
            return ax
        pieces, at = [], 0
        for t in node.outputs:
            n = int(graph.tensors[t].shape[ax])
            pieces.append(Piece(t, at, n))
            at += n
        return MovePlan(ax, tuple(pieces),
                        tuple(out_shape(graph, t) for t in node.outputs))
    return _slice_plan(node, graph, cfg)


def plan(node: Node, graph: Graph, cfg: HwConfig, scales) -> MovePlan | Window:
    return _plan(node, graph, cfg)


def place(lo, node: Node, p: MovePlan) -> None:
    """Split/Slice: outputs are views of the input (forward pass)."""
    if node.op_type == "Concat":
        return
    src = node.inputs[0]
    if isinstance(p, Window):
        if p.cols[1] == 1:     # every step but the pixel's is a stride of the view
            lo.placement.view(node.outputs[0], src, lambda r: _rows_view(r, p))
        return
    for piece in p.pieces:
        if p.axis == 1 and piece.start % lo.cfg.atom_size:
            continue       # moved into a buffer of its own (lower)
        lo.placement.view(piece.tensor, src,
                          lambda r, piece=piece: _view(r, p.axis, piece.start, piece.size))


def _rows_view(region, p: Window, width: int | None = None):
    """The rows and channels a Window keeps, its first column on: a view whose line
    stride skips ``step - 1`` lines (``width`` columns from there)."""
    (c0, c), (y0, sy, h), (x0, _, w) = p.channels, p.rows, p.cols
    if c != region.shape[0]:
        region = region.channels(c0, c)
    line = region.layout.line_stride
    return region.strided(y0 * line + x0 * region.layout.atom_bytes, sy * line, h,
                          w if width is None else width)


def _lower_window(lo, node: Node, p: Window) -> None:
    """A Slice with steps: rows by the line stride of a view; columns with step ``sx``
    by the column view (:meth:`Region.column`) of a packed ``H x W*sx`` copy, whose
    every ``sx``-th pixel is the output's next one."""
    src, out = lo.region(node.inputs[0]), lo.region(node.outputs[0])
    (_, c), (_, _, h), (_, sx, w) = p.channels, p.rows, p.cols
    if sx == 1:
        view = _rows_view(src, p)
        if view != out:
            lo.copy(node, view, out)
        return
    span = (w - 1) * sx + 1            # input columns from the first kept to the last
    wide = lo.temp(lo.label(node, "wide"), c, h, w * sx)
    lo.copy(node, _rows_view(src, p, span), wide.cols(0, span), "rows")
    dst = out if out.packed_lines else lo.temp(lo.label(node, "packed"), c, h, w)
    col, dcol = wide.column(), dst.column()
    a = col.layout.atom_bytes
    for p0 in range(0, h * w, MAX_DIM):
        n = min(MAX_DIM, h * w - p0)
        lo.copy(node, col.strided(p0 * sx * a, sx * a, n), dcol.rows(p0, n), f"cols{p0}")
    if dst is not out:
        lo.copy(node, dst, out, "out")


def nest(lo, node: Node, p: MovePlan) -> None:
    """Concat: inputs are written into their slots of the output (backward pass)."""
    if node.op_type != "Concat":
        return
    out = node.outputs[0]
    groups = _groups(p, lo.cfg.atom_size) if p.axis == 1 else [[piece] for piece in p.pieces]
    _, h, w = lo.cube(out)
    for group in groups:
        if len(group) == 1:
            (piece,) = group
            lo.placement.nest(piece.tensor, out,
                              lambda r, piece=piece: _view(r, p.axis, piece.start, piece.size))
            continue
        staging = _staging(group, lo.cfg, h, w)
        name = _staging_name(out, group, lo.cfg.atom_size)
        if staging is None or name in lo.graph.tensors:
            continue            # merged by chains: the pieces keep buffers of their own
        channels, slots = staging
        lo.placement.cubes[name] = (channels, h, w)
        for piece, slot in zip(group, slots, strict=True):
            lo.placement.nest(piece.tensor, name,
                              lambda r, slot=slot, n=piece.size: r.channels(slot, n))


#: atoms (pixels times output surfaces) worth one operation's fixed cost: a merge takes
#: more, narrower moves only where they save at least this much work per extra one (an
#: operation costs the cmodel about as much as moving a few thousand atoms, and the
#: hardware its register programming and pipeline fill)
OP_ATOMS = 4096


@dataclass(frozen=True)
class MergeStep:
    """One 0/1 convolution of a merge: channels ``src`` (first, count; whole atoms) of
    ``piece``'s tensor onto output channels ``out`` (first, count; whole surfaces,
    counted from the group's first channel), moving ``move`` = (first output lane,
    first input lane, lanes) of them."""

    piece: Piece
    src: tuple[int, int]
    out: tuple[int, int]
    move: tuple[int, int, int]

    def geom(self, h: int, w: int) -> ConvGeom:
        return ConvGeom(self.src[1], h, w, self.out[1], 1, 1)


def merge_chains(group: list[Piece], atom: int, pixels: int) -> list[list[MergeStep]]:
    """The moves of a merge, as chains: each chain writes one window of the group's
    output, every step after its first adding the step before's result.

    Either one chain over the group's whole span (a move per piece), or a chain per
    surface of the moves of the pieces that reach it, each reading only the piece's
    atoms that land there: fewer atoms computed (a piece is moved into each surface it
    reaches rather than into all), more operations when pieces share surfaces.  The
    surface chains are taken when they save at least :data:`OP_ATOMS` per extra
    operation."""
    c0, k = _group_span(group, atom)
    whole = [[MergeStep(piece, (0, piece.size), (0, k), (piece.start - c0, 0, piece.size))
              for piece in group]]
    surfaces = -(-k // atom)
    chains = []
    for s in range(surfaces):
        lo, hi = s * atom, min(k, (s + 1) * atom)
        chain = []
        for piece in group:
            a = piece.start - c0
            first, end = max(a, lo), min(a + piece.size, hi)
            if first >= end:
                continue
            s0 = (first - a) // atom * atom
            s1 = min(piece.size, -(-(end - a) // atom) * atom)
            chain.append(MergeStep(piece, (s0, s1 - s0), (lo, hi - lo),
                                   (first - lo, first - a - s0, end - first)))
        chains.append(chain)
    moves = sum(len(chain) for chain in chains)
    saved = (len(group) * surfaces - moves) * pixels
    extra = moves - len(group)
    return chains if saved > 0 and saved >= extra * OP_ATOMS else whole


def _slots(group: list[Piece], atom: int) -> tuple[int, list[int]]:
    """``(channels, each piece's first channel)`` of a merge's staging buffer, each piece
    from an atom of its own."""
    slots, channels = [], 0
    for piece in group:
        slots.append(channels)
        channels += -(-piece.size // atom) * atom
    return channels, slots


def _staging(group: list[Piece], cfg: HwConfig, h: int, w: int
             ) -> tuple[int, list[int]] | None:
    """:func:`_slots` of a merge's staging buffer; None when the one 0/1 convolution out
    of it does not fit the hardware."""
    channels, slots = _slots(group, cfg.atom_size)
    _, k = _group_span(group, cfg.atom_size)
    if isinstance(plan_conv(ConvGeom(channels, h, w, k, 1, 1), cfg), str):
        return None
    return channels, slots


def _staging_name(out: str, group: list[Piece], atom: int) -> str:
    return f"{out}.staging{_group_span(group, atom)[0]}"


def _merge_staged(lo, node: Node, group: list[Piece], whole) -> bool:
    """A merge through its staging buffer (:func:`_staging`), if :func:`nest` gave it
    one: the pieces not nested there copied in, then one 0/1 convolution."""
    atom = lo.cfg.atom_size
    name = _staging_name(node.outputs[0], group, atom)
    if name not in lo.placement.cubes or name in lo.graph.tensors:
        return False
    channels, h, w = lo.placement.cubes[name]
    _, slots = _slots(group, atom)
    staged = lo.region(name)
    c0, k = _group_span(group, atom)
    weight = np.zeros((k, channels, 1, 1), dtype=np.int8)
    for piece, slot in zip(group, slots, strict=True):
        src, dst = lo.region(piece.tensor), staged.channels(slot, piece.size)
        if src != dst:
            lo.copy(node, src, dst, f"stage{piece.start}")
        lanes = np.arange(piece.size)
        weight[piece.start - c0 + lanes, slot + lanes, 0, 0] = 1
    geom = ConvGeom(channels, h, w, k, 1, 1)
    lower_conv(lo, node, lo.label(node, f"merge{c0}"), staged, whole.channels(c0, k), geom,
               weight, 0, IDENTITY, plan_conv(geom, lo.cfg))
    return True


def _merge(lo, node: Node, group: list[Piece], whole) -> None:
    """Channel pieces sharing surfaces, merged by 0/1 convolutions and SDP sums."""
    c0, _ = _group_span(group, lo.cfg.atom_size)
    _, h, w = whole.shape
    for chain in merge_chains(group, lo.cfg.atom_size, h * w):
        prev = None
        for i, step in enumerate(chain):
            o0, on = step.out
            last = i == len(chain) - 1
            out = (whole.channels(c0 + o0, on) if last
                   else lo.temp(lo.label(node, f"merge{c0 + o0}.{i}"), on, h, w))
            src = lo.region(step.piece.tensor)
            if step.src != (0, step.piece.size):
                src = src.channels(*step.src)
            weight = channel_move_weights(on, step.src[1], *step.move)
            x2 = None if prev is None else XStage(alu_op="sum", alu=Operand.input(1))
            geom = step.geom(h, w)
            before = len(lo.ops)
            lower_conv(lo, node, lo.label(node, f"merge{step.piece.start}"), src, out, geom,
                       weight, 0, SdpProgram(None, x2), plan_conv(geom, lo.cfg))
            if prev is not None:    # every tile adds the same part of the previous move
                for op in lo.ops[before:]:
                    op.operands[1] = Region(prev.buffer, prev.offset + op.dst.offset
                                            - out.offset, op.dst.layout)
            prev = out


def lower(lo, node: Node, p: MovePlan) -> None:
    if node.op_type == "Concat":
        whole = lo.region(node.outputs[0])
        groups = _groups(p, lo.cfg.atom_size) if p.axis == 1 else [[q] for q in p.pieces]
        for group in groups:
            if len(group) > 1:
                if not _merge_staged(lo, node, group, whole):
                    _merge(lo, node, group, whole)
                continue
            (piece,) = group
            slot = _view(whole, p.axis, piece.start, piece.size)
            if lo.region(piece.tensor) != slot:
                lo.copy(node, lo.region(piece.tensor), slot, f"copy{piece.start}")
        return
    if isinstance(p, Window):
        _lower_window(lo, node, p)
        return
    src = lo.region(node.inputs[0])
    atom = lo.cfg.atom_size
    for piece in p.pieces:
        if p.axis == 1 and piece.start % atom:
            c0, span = _piece_span(piece, atom)
            move_channels(lo, node, f"move{piece.start}", src.channels(c0, span),
                          lo.region(piece.tensor), 0, piece.start - c0, piece.size)
            continue
        part = _view(src, p.axis, piece.start, piece.size)
        if lo.region(piece.tensor) != part:
            lo.copy(node, part, lo.region(piece.tensor), f"copy{piece.start}")


def reference(p: MovePlan | Window, inputs: list[np.ndarray]) -> list[np.ndarray]:
    if isinstance(p, Window):
        (c0, c), (y0, sy, h), (x0, sx, w) = p.channels, p.rows, p.cols
        x = np.asarray(inputs[0])
        return [x[:, c0:c0 + c, y0:y0 + (h - 1) * sy + 1:sy,
                  x0:x0 + (w - 1) * sx + 1:sx].copy().reshape(p.out_shape)]
    if p.concat:
        return [np.concatenate([np.asarray(x) for x in inputs], axis=p.axis)]
    x = np.asarray(inputs[0])
    out = []
    for piece in p.pieces:
        idx = [slice(None)] * 4
        idx[p.axis] = slice(piece.start, piece.start + piece.size)
        out.append(x[tuple(idx)].copy())
    return out


def ties(node: Node, graph: Graph) -> list[list[str]]:
    ins = node.inputs if node.op_type == "Concat" else node.inputs[:1]
    return [[t for t in (*ins, *node.outputs) if t]]


ENTRY = OpEntry(("Concat", "Split", "Slice"), check, plan, lower, reference, ties=ties,
                place=place, nest=nest)
