"""Tiling, memory planning, placement and the dependency graph, each on hand-made cases."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from accel import cbuf
from accel.compiler.emitter import dependencies
from accel.compiler.memory import lifetimes, plan_arena
from accel.compiler.placement import Placement, identity
from accel.compiler.tensors import Region, RegionError
from accel.compiler.tiling import ConvGeom, plan_conv
from accel.config import get_preset
from accel.layout import cube_layout
from accel.loadable.descriptors import (
    EVENT_OP_COMPLETED,
    EVENT_OP_ENABLED,
    EVENT_OP_PROGRAMMED,
    OP_CONV,
    OP_PDP,
    OP_SDP,
)

SMALL = get_preset("nv_small")


# ------------------------------------------------------------------ tiling

def test_a_layer_that_fits_is_one_operation():
    plan = plan_conv(ConvGeom(16, 8, 8, 16, 3, 3, pads=(1, 1, 1, 1)), SMALL)
    (t,) = plan.tiles
    assert (t.out_rows, t.kernels, t.in_rows, t.pad_top, t.pad_bottom) == \
        ((0, 8), (0, 16), (0, 8), 1, 1)
    # hand-computed: 8 px x 2 atoms per row = 16 entries x 8 rows -> 1 bank; 16 x 144 bytes
    assert (t.entries_per_slice, t.data_banks, t.weight_banks) == (16, 1, 1)


def test_row_tiles_overlap_by_the_kernel_and_keep_their_own_padding():
    # 192 entries per row (96 px x 2 atoms); 31 data banks hold 82 rows of the 96
    g = ConvGeom(16, 96, 96, 16, 3, 3, pads=(1, 1, 1, 1))
    tiles = plan_conv(g, SMALL).tiles
    assert [t.out_rows for t in tiles] == [(0, 48), (48, 96)]
    assert [t.in_rows for t in tiles] == [(0, 49), (47, 96)]          # one row each side
    assert [(t.pad_top, t.pad_bottom) for t in tiles] == [(1, 0), (0, 1)]
    # both tiles take the banks of the taller (49 rows x 192 entries -> 19 banks): kept
    # weights stay only while DATA_BANK does not change
    assert [t.data_banks for t in tiles] == [19, 19] and tiles[0].weight_banks == 1
    # 2304 bytes of weights fit one bank: resident, fetched once, kept for the second tile
    assert [(t.weight_reuse, t.skip_weight_release) for t in tiles] == [(False, True),
                                                                         (True, False)]


def test_strided_rows_read_only_the_rows_they_need():
    g = ConvGeom(8, 400, 64, 8, 5, 5, stride=(2, 2), pads=(2, 2, 2, 2))
    tiles = plan_conv(g, SMALL).tiles
    assert len(tiles) > 1 and tiles[-1].out_rows[1] == g.out_hw[0] == 200
    for t in tiles:
        (o0, o1), (i0, i1) = t.out_rows, t.in_rows
        assert i0 == max(0, 2 * o0 - 2) and i1 == min(400, 2 * (o1 - 1) - 2 + 5)


def test_a_row_wider_than_the_cbuf_falls_back_with_the_reason():
    # one 8192-pixel row of 64 channels needs 65536 entries; the CBUF has 16384
    reason = plan_conv(ConvGeom(64, 4, 8192, 8, 3, 3), SMALL)
    assert isinstance(reason, str) and "CBUF has 32 banks of 512 entries" in reason


def test_weights_larger_than_the_cbuf_stream_one_kernel_group_at_a_time():
    g = ConvGeom(1024, 2, 2, 512, 3, 3, pads=(1, 1, 1, 1))   # 4.7 MB of weights
    plan = plan_conv(g, SMALL)
    assert not isinstance(plan, str)
    kg = cbuf.weight_banks_min(SMALL, 512, 1024 * 9)
    assert all(t.weight_banks >= kg for t in plan.tiles)


# ------------------------------------------------------------------ memory

def test_arena_reuses_memory_of_dead_buffers():
    bufs = [NS(name=n, size=s) for n, s in (("a", 1000), ("b", 600), ("c", 900))]
    ops = [NS(reads=lambda: [], writes=lambda r=r: [r]) for r in (
        NS(buffer="a"), NS(buffer="b"), NS(buffer="c"))]
    spans = lifetimes(ops, ["a", "b", "c"])
    assert spans == {"a": (0, 0), "b": (1, 1), "c": (2, 2)}
    plan = plan_arena(bufs, {"a": (0, 1), "b": (1, 2), "c": (2, 3)}, align=64)
    # a and b live together, b and c live together, a and c never: c reuses a's bytes
    assert plan.offsets["c"] == plan.offsets["a"] == 0 and plan.offsets["b"] == 1024
    assert plan.size == 1024 + 640 and plan.total == 1024 + 640 + 960
    solo = plan_arena(bufs, {"a": (0, 1), "b": (1, 2), "c": (2, 3)}, align=64, reuse=False)
    assert solo.size == solo.total


# ------------------------------------------------------------------ regions and placement

def _region(c, h, w):
    return Region("buf", 0, cube_layout(SMALL, c, h, w))


def test_views_address_surfaces_lines_and_atoms():
    r = _region(24, 4, 5)        # surface 160 bytes, line 40
    assert r.channels(16, 8).offset == 2 * 160
    assert r.rows(2, 2).offset == 80 and r.cols(3, 2).offset == 24
    col = r.column()
    assert (col.layout.height, col.layout.width, col.layout.line_stride) == (20, 1, 8)
    with pytest.raises(RegionError, match="does not start an atom"):
        r.channels(4, 8)
    with pytest.raises(RegionError, match="packed lines"):
        r.cols(0, 2).column()


def test_placement_nests_produced_tensors_and_refuses_bound_ones():
    p = Placement(inputs=["x"], outputs=["y"], produced={"a", "b", "cat", "y"})
    assert p.nest("a", "cat", identity)
    assert not p.nest("x", "cat", identity)          # a subgraph input is bound elsewhere
    assert not p.nest("a", "y", identity)            # already nested
    assert not p.nest("y", "cat", identity)          # an output keeps its own memory
    assert p.root("a") == "cat"
    # an alias of an output turns around: the input becomes the view
    assert p.alias("y", "b", (8, 1, 1)) and p.root("b") == "y"


# ------------------------------------------------------------------ dependencies

def test_serialized_dependencies_count_every_event():
    # conv pair, standalone SDP, PDP, conv pair
    types = [OP_CONV, OP_SDP, OP_SDP, OP_PDP, OP_CONV, OP_SDP]
    deps = dependencies([[0, 1], [2], [3], [4, 5]], types)
    slots = {(d.index, i): (c.index, c.event) for d in deps
             for i, c in enumerate(d.consumers) if c.index >= 0}
    assert slots[(0, OP_SDP)] == (1, EVENT_OP_PROGRAMMED)
    assert slots[(0, OP_CONV)] == (4, EVENT_OP_COMPLETED)      # conv chain
    assert slots[(1, OP_SDP)] == (2, EVENT_OP_COMPLETED)       # SDP chain = program order
    assert slots[(2, OP_PDP)] == (3, EVENT_OP_COMPLETED)
    assert slots[(3, OP_CONV)] == (4, EVENT_OP_COMPLETED)
    assert (deps[1].fused_parent.index, deps[1].fused_parent.event) == (0, EVENT_OP_ENABLED)
    # incoming: conv 4 <- conv 0, PDP 3, its SDP 5 (enabled); SDP 5 <- SDP 2, conv 4
    assert [d.dependency_count for d in deps] == [1, 1, 1, 1, 3, 2]


def test_an_operation_reads_at_most_4096_rows():
    """CSC D_RELEASE.RLS_SLICES (12 bits) releases at most 4096 rows: a 6400-pixel column
    (PP-OCR's 80 x 80 upsampling seen as one column) that fits the CBUF is still cut."""
    g = ConvGeom(24, 6400, 1, 24, 1, 1)
    assert cbuf.data_banks(get_preset("nv_large"), 24, 1, 6400) < 16
    tiles = plan_conv(g, get_preset("nv_large")).tiles
    assert len(tiles) == 2 and all(t.in_rows[1] - t.in_rows[0] <= 4096 for t in tiles)
