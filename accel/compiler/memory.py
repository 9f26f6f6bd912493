"""Memory planning: internal buffers share one arena by liveness.

A buffer is live from the first operation that touches it (any view of it)
to the last; two buffers whose lifetimes overlap must not overlap in the
arena.  Offsets are chosen greedily, largest buffer first, each at the lowest
aligned offset free for its whole lifetime (the classic best-first heuristic
for offline dynamic storage allocation; optimal packing is NP-hard).
Subgraph inputs and outputs keep memories of their own (they are bound by
the runtime), so only internal buffers are planned.

>>> from types import SimpleNamespace as NS
>>> bufs = [NS(name="a", size=100), NS(name="b", size=100), NS(name="c", size=50)]
>>> plan = plan_arena(bufs, {"a": (0, 1), "b": (1, 2), "c": (2, 3)}, align=64)
>>> plan.offsets["a"] != plan.offsets["b"], plan.offsets["c"] == plan.offsets["a"]
(True, True)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from accel.layout import align_up


@dataclass(frozen=True)
class ArenaPlan:
    offsets: dict[str, int]
    size: int                 # bytes of the arena (the peak of live buffers, aligned)
    total: int                # bytes without reuse (every buffer its own block)


def lifetimes(ops: Sequence, names: Iterable[str]) -> dict[str, tuple[int, int]]:
    """``{buffer: (first op index, last op index)}`` over the regions each op reads/writes."""
    wanted = set(names)
    span: dict[str, tuple[int, int]] = {}
    for i, op in enumerate(ops):
        for region in (*op.reads(), *op.writes()):
            b = region.buffer
            if b in wanted:
                lo, hi = span.get(b, (i, i))
                span[b] = (min(lo, i), max(hi, i))
    return span


def plan_arena(buffers: Sequence, spans: dict[str, tuple[int, int]], align: int,
               reuse: bool = True) -> ArenaPlan:
    """Offsets of ``buffers`` (objects with ``name`` and ``size``) in one arena."""
    placed: list[tuple[int, int, int, int]] = []     # (offset, end, first, last)
    offsets: dict[str, int] = {}
    order = sorted(buffers, key=lambda b: (-b.size, b.name))
    total = 0
    for buf in order:
        size = align_up(max(buf.size, 1), align)
        total += size
        first, last = spans.get(buf.name, (0, 0))
        if not reuse:
            first, last = 0, 1 << 30
        busy = sorted((o, e) for o, e, f, la in placed if not (la < first or last < f))
        offset = 0
        for o, e in busy:
            if offset + size <= o:
                break
            offset = max(offset, e)
        offsets[buf.name] = offset
        placed.append((offset, offset + size, first, last))
    size = max((e for _, e, _, _ in placed), default=0)
    return ArenaPlan(offsets, size, total)
