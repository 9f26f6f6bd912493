"""Engine-op fusion after lowering: chains of element-wise passes as one table, a table
into the passes that write its input, and a convolution and the lookup table after it,
as one.

**Tables of tables** (:func:`fold_tables`).  A pass whose int8 output is a function
of each int8 input element alone, the same in every channel (an SDP pass with its
operands in registers, a lookup, the CDP as a table:
:func:`~accel.compiler.ops.lookup.codes_of`), is a 256-entry table, and two such
passes one after the other are the table of the first looked up in the second's.
PP-LCNet's learnable affine blocks (``x * a + b`` after each HardSwish) are two SDP
passes after the HardSwish's own: with a table they are one pass.  The table's
entries are the passes' own results for every code, so the folded pass is the
chain bit for bit and the op table's reference of the unfused nodes stays the
golden; the intermediates are no longer in DLA memory.  Folded when the preset
has a table (the SDP's Y stage or the CDP), the table pass is estimated cheaper
than the passes it replaces (:func:`pass_cycles`: on nv_large the SDP's Y stage
takes 4 elements a cycle and its X stages 16, so two X passes stay), and each
intermediate is an internal buffer that the pass before writes whole and only the
pass after reads, whole; no op in between touches the last pass's destination.

**Tables folded into the passes that write their input** (:func:`fold_into_writers`).
A transposed convolution's rows are interleaved into its output by copies, one per
row phase (:mod:`accel.compiler.ops.convtranspose`); a table after it (PP-OCR's text
map: ConvTranspose, then Sigmoid) read that output whole, one more pass over the
largest map of the network.  When every writer of a table pass's input is itself a
table pass (a copy is the identity table), each writing its part, each takes the
composed table and writes its part of the result where the table pass would have:
the same bytes, pads included, since the parts cover the input exactly once in
whole atoms (:func:`_tiles`), and the result's layout is the input's.  Folded under
the conditions of a chain (internal buffer, nothing else reads it, nothing in
between touches the result) and when the estimate is lower.

A lookup op (:mod:`accel.compiler.ops.lookup`: Sigmoid, Tanh, Swish...) is an
SDP pass that reads an int8 tensor and writes ``T[x + 128]``.  When that tensor
is a convolution's output and nothing else reads it, the convolution's own SDP
can apply the table on the way out - the Y stage runs after X1 and X2 - and
the intermediate never reaches memory: one pass and one tensor's DRAM traffic
less (every convolution of a SiLU network).

The fused result is the unfused one bit for bit.  The convolution's output
converter ``sat8(round(x * scale / 2**shift))`` (offset 0) moves into X2 as a
multiplier with truncate ``shift`` - the same product and the same rounding -
and the saturation to int8 is done by the table: it reads entry 0 for every
value up to -128 and entry 256 (= entry 255) from 128 up
(:mod:`accel.compiler.lut`), exactly what saturating first would give.  The
converter then passes the table's output through.  So the op table's int8
reference of the unfused nodes stays the golden; only the intermediate tensor
is no longer in DLA memory to compare.

Fused when: the lookup reads the whole of an internal buffer that only
convolutions write (every tile and kernel slice of one node) and only it
reads; each of those convolutions leaves X2 free, has converter offset 0 and
shift <= 62 (the X truncate's range), and writes with the buffer's strides;
no op in between touches the lookup's destination.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from accel.compiler.engine import CdpOp, ConvOp, EngineOp, SdpOp
from accel.compiler.ops.lookup import codes_of, sdp_route, table_op
from accel.compiler.program import MAX_TRUNCATE, Converter, Operand, SdpProgram, XStage
from accel.compiler.tensors import Region, RegionError
from accel.compiler.tiling import OP_OVERHEAD
from accel.config import HwConfig
from accel.layout import ceil_div, cube_offsets

#: register writes that load a table into a unit's LUT (its 65 + 257 entries and the
#: LUT's configuration; `opendla compile` counts 338 on the CDP, 334 on the SDP), each
#: at least a cycle: what a table pass costs beyond its data
TABLE_LOAD_CYCLES = 338


def pass_cycles(op: SdpOp | CdpOp, cfg: HwConfig) -> int:
    """Estimated cycles of an SDP or CDP pass from memory to memory on ``cfg``: its
    elements (padded channels included) at the slowest rate of the stages it uses, or
    its input and output over the memory interface if that takes longer, the load of
    its table if it has one, and the programming and pipeline fill of any operation
    (:data:`~accel.compiler.tiling.OP_OVERHEAD`, as the convolutions' plans count it)."""
    c, h, w = op.dst.shape
    atom = op.dst.layout.atom
    elems = ceil_div(c, atom) * atom * h * w
    table = 0
    if isinstance(op, CdpOp):
        rate, table = cfg.cdp_throughput, TABLE_LOAD_CYCLES
    else:
        p = op.program
        rates = [r for r, used in ((cfg.sdp_bs_throughput, p.x1 is not None),
                                   (cfg.sdp_bn_throughput, p.x2 is not None),
                                   (cfg.sdp_ew_throughput or 1, p.lut is not None)) if used]
        rate = min(rates, default=cfg.sdp_bs_throughput)
        table = TABLE_LOAD_CYCLES if p.lut is not None else 0
    return (max(ceil_div(elems, rate), ceil_div(2 * elems, cfg.dma_bytes_per_cycle)) + table
            + OP_OVERHEAD)


def fold_tables(ops: list[EngineOp], internal: set[str], cfg: HwConfig
                ) -> tuple[list[EngineOp], dict[str, str]]:
    """``(ops, fused)``: the operations with every chain of element-wise passes folded into
    one table pass (see the module docstring), and ``{buffer no longer written: the
    pass that computes past it}``.  ``internal`` names the buffers that are neither
    subgraph inputs nor outputs."""
    if not (sdp_route(cfg) or cfg.cdp):
        return list(ops), {}
    ops = list(ops)
    fused: dict[str, str] = {}
    # the operations that read or write each buffer (engine ops compare by identity),
    # kept as the chains fold
    users: dict[str, dict[EngineOp, None]] = {}
    for op in ops:
        for r in (*op.reads(), *op.writes()):
            users.setdefault(r.buffer, {})[op] = None
    i = 0
    while i < len(ops):
        chain: list[str] = []               # the buffers folded away
        table = None
        while True:
            first, whole = ops[i], ops[i].dst
            if whole.buffer not in internal or whole.offset != 0:
                break
            others = [op for op in users[whole.buffer] if op is not first]
            if len(others) != 1:
                break
            after = others[0]
            j = next((k for k in range(i + 1, len(ops)) if ops[k] is after), None)
            if j is None or after.src != whole or after.writes() != [after.dst] \
                    or after.dst.overlaps(first.src) or any(
                        r.overlaps(after.dst) for k in range(i + 1, j)
                        for r in (*ops[k].reads(), *ops[k].writes())):
                break
            table = codes_of(first) if table is None else table
            then = None if table is None else codes_of(after)
            if then is None:
                break
            composed = then[table + 128]
            folded = table_op(cfg, after.name, after.node, first.src, after.dst,
                              tuple(int(v) for v in composed))
            if pass_cycles(folded, cfg) >= pass_cycles(first, cfg) + pass_cycles(after, cfg):
                break
            table = composed
            chain.append(whole.buffer)
            del users[whole.buffer]
            for buffer, old in ((first.src.buffer, first), (after.dst.buffer, after)):
                users[buffer].pop(old, None)
                users[buffer][folded] = None
            ops[i] = folded
            del ops[j]
        fused.update(dict.fromkeys(chain, ops[i].name))
        i += 1
    return ops, fused


def _element_bytes(region: Region) -> np.ndarray:
    """The byte offsets of every element of ``region`` in its buffer (its channels only,
    not the lanes that pad the last atom)."""
    lay = region.layout
    return region.offset + cube_offsets(*region.shape, lay.atom, lay.line_stride,
                                        lay.surf_stride, lay.elem_bytes).reshape(-1)


def _tiles(whole: Region, parts: list[Region]) -> bool:
    """Whether ``parts`` hold every element of ``whole`` exactly once, each in whole atoms
    of its layout (so the lanes that pad them are the same bytes as well)."""
    if any(p.layout.atom != whole.layout.atom or p.layout.elem_bytes != whole.layout.elem_bytes
           or p.shape[0] != whole.shape[0] for p in parts):
        return False
    if sum(p.shape[1] * p.shape[2] for p in parts) != whole.shape[1] * whole.shape[2]:
        return False
    got = np.concatenate([_element_bytes(p) for p in parts])
    return bool(np.array_equal(np.sort(got), np.sort(_element_bytes(whole))))


def fold_into_writers(ops: list[EngineOp], internal: set[str], cfg: HwConfig
                      ) -> tuple[list[EngineOp], dict[str, str]]:
    """``(ops, fused)``: each table pass whose input several table passes write, part by
    part, folded into those passes (see the module docstring), and ``{buffer no longer
    written: the pass folded away}``.  ``internal`` names the buffers that are neither
    subgraph inputs nor outputs."""
    if not (sdp_route(cfg) or cfg.cdp):
        return list(ops), {}
    ops = list(ops)
    fused: dict[str, str] = {}
    users = _users(ops)
    j = 0
    while j < len(ops):
        folded = _folded_writers(ops, j, internal, cfg, users)
        if folded is None:
            j += 1
            continue
        for i, op in folded.items():
            ops[i] = op
        fused[ops[j].src.buffer] = ops[j].name
        del ops[j]
        users = _users(ops)                # the indexes past j moved
    return ops, fused


def _users(ops: list[EngineOp]) -> dict[str, list[int]]:
    """The indexes of the operations that read or write each buffer, in order."""
    users: dict[str, dict[int, None]] = {}
    for i, op in enumerate(ops):
        for r in (*op.reads(), *op.writes()):
            users.setdefault(r.buffer, {})[i] = None
    return {buffer: list(indexes) for buffer, indexes in users.items()}


def _folded_writers(ops: list[EngineOp], j: int, internal: set[str], cfg: HwConfig,
                    users: dict[str, list[int]]) -> dict[int, EngineOp] | None:
    """``{index: the pass that replaces it}`` when the table pass ``ops[j]`` folds into the
    passes that write its input (:func:`fold_into_writers`; ``users``: :func:`_users` of
    ``ops``), else None."""
    after = ops[j]
    if not isinstance(after, SdpOp | CdpOp):
        return None
    whole, dst = after.src, after.dst
    if (whole.buffer not in internal or after.writes() != [dst] or dst.layout != whole.layout
            or dst.buffer == whole.buffer):
        return None
    touching = [i for i in users[whole.buffer] if i != j]
    if len(touching) < 2 or touching[-1] > j:   # one writer: a chain (fold_tables)
        return None
    writers = [ops[i] for i in touching]
    if any(op.writes() != [op.dst] or any(r.buffer == whole.buffer for r in op.reads())
           for op in writers):
        return None
    then = codes_of(after)
    tables = [codes_of(op) for op in writers]
    if then is None or any(t is None for t in tables):
        return None
    if not _tiles(whole, [op.dst for op in writers]):
        return None
    # the folded passes write the result where and when their parts are written: nothing
    # from the first of them to the table pass may touch its destination
    if any(r.overlaps(dst) for op in ops[touching[0]:j] for r in (*op.reads(), *op.writes())):
        return None
    folded = {}
    for n, (i, op, table) in enumerate(zip(touching, writers, tables, strict=True)):
        view = Region(dst.buffer, dst.offset + op.dst.offset - whole.offset, op.dst.layout)
        folded[i] = table_op(cfg, f"{after.name}#{n}", after.node, op.src, view,
                             tuple(int(v) for v in then[table + 128]))
    before = sum(pass_cycles(op, cfg) for op in writers) + pass_cycles(after, cfg)
    if sum(pass_cycles(op, cfg) for op in folded.values()) >= before:
        return None
    return folded


def _is_lookup(op: EngineOp) -> bool:
    p = getattr(op, "program", None)
    return (isinstance(op, SdpOp) and p.lut is not None and p.x1 is None and p.x2 is None
            and p.cvt == Converter() and not op.operands and op.reads_src)


def _fusable_conv(op: EngineOp, whole: Region) -> bool:
    if not isinstance(op, ConvOp) or op.sdp.lut is not None or op.sdp.x2 is not None:
        return False
    cvt, lay, ref = op.sdp.cvt, op.dst.layout, whole.layout
    return (cvt.offset == 0 and cvt.shift <= MAX_TRUNCATE and lay.line_stride == ref.line_stride
            and lay.surf_stride == ref.surf_stride and lay.atom == ref.atom)


def _same_place(part: Region, whole: Region, dst: Region) -> Region | None:
    """The view of ``dst`` at ``part``'s position inside ``whole`` (same shapes), or None."""
    lay = whole.layout
    delta = part.offset - whole.offset
    surf, rest = divmod(delta, lay.surf_stride)
    y0, rest = divmod(rest, lay.line_stride)
    x0, rest = divmod(rest, lay.atom_bytes)
    c, h, w = part.shape
    if delta < 0 or rest:
        return None
    try:
        view = dst.channels(surf * lay.atom, c) if (surf, c) != (0, dst.shape[0]) else dst
        view = view.rows(y0, h) if (y0, h) != (0, dst.shape[1]) else view
        return view.cols(x0, w) if (x0, w) != (0, dst.shape[2]) else view
    except RegionError:
        return None


def _with_lut(program: SdpProgram, lut) -> SdpProgram:
    cvt = program.cvt
    return SdpProgram(program.x1, XStage(mul=Operand.layer(cvt.scale), truncate=cvt.shift),
                      Converter(), lut)


def fuse_lookups(ops: list[EngineOp], internal: set[str]) -> tuple[list[EngineOp], dict[str, str]]:
    """``(ops, fused)``: the operations with every fusable conv + lookup pair merged, and
    ``{buffer no longer written: the lookup op that read it}``.  ``internal`` names the
    buffers that are neither subgraph inputs nor outputs."""
    ops = list(ops)
    fused: dict[str, str] = {}
    for li in range(len(ops) - 1, -1, -1):
        look = ops[li]
        if not _is_lookup(look) or look.src.buffer not in internal:
            continue
        whole = look.src
        touching = [i for i, op in enumerate(ops) if any(
            r.buffer == whole.buffer for r in (*op.reads(), *op.writes()))]
        writers = [i for i in touching if i != li]
        if not writers or max(writers) > li or whole.offset != 0:
            continue
        if any(any(r.buffer == whole.buffer for r in ops[i].reads()) for i in writers):
            continue
        if not all(_fusable_conv(ops[i], whole) for i in writers):
            continue
        views = [_same_place(ops[i].dst, whole, look.dst) for i in writers]
        if any(v is None for v in views):
            continue
        between = range(writers[0], li)
        if any(any(r.overlaps(look.dst) for r in (*ops[i].reads(), *ops[i].writes()))
               for i in between if i not in writers):
            continue
        for i, view in zip(writers, views, strict=True):
            ops[i] = replace(ops[i], dst=view, sdp=_with_lut(ops[i].sdp, look.program.lut))
        fused[whole.buffer] = look.name
        del ops[li]
    return ops, fused
