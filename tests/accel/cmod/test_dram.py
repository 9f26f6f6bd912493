"""Dram: mapped regions, bounds errors naming unit and address range."""

from __future__ import annotations

import numpy as np
import pytest

from accel.cmod.dram import Dram, DramAccessError


def test_read_write_inside_a_region():
    d = Dram()
    d.map(0x8000_0000, 0x100, "out")
    d.write(0x8000_0010, bytes([1, 2, 3]))
    assert d.read(0x8000_000F, 5).tolist() == [0, 1, 2, 3, 0]
    d.write(0x8000_00FE, np.array([0xAA, 0xBB], dtype=np.uint8))
    assert d.read(0x8000_00FE, 2).tolist() == [0xAA, 0xBB]


def test_out_of_bounds_names_unit_and_range():
    d = Dram()
    d.map(0x1000, 0x10)
    with pytest.raises(DramAccessError, match=r"SDP_WDMA: write of 4 bytes at \[0x100e, 0x1012\)"):
        d.write(0x100E, b"\0\0\0\0", unit="SDP_WDMA")
    with pytest.raises(DramAccessError, match=r"CDMA: read .* \[0xfff, 0x1000\).*0x1000\+0x10"):
        d.read(0xFFF, 1, unit="CDMA")
    with pytest.raises(DramAccessError, match="SDP_RDMA"):
        d.gather(0x1000, np.array([0, 16]), "SDP_RDMA")


def test_access_spanning_two_regions_is_rejected():
    d = Dram()
    d.map(0x0, 0x10)
    d.map(0x20, 0x10)
    with pytest.raises(DramAccessError):
        d.read(0x8, 0x20)


def test_remap_inside_zero_fills_and_overlap_merges():
    d = Dram()
    d.map(0x100, 0x20)
    d.write(0x100, bytes(range(1, 0x21)))
    d.map(0x108, 4)  # re-init of part of a region
    assert d.read(0x106, 8).tolist() == [7, 8, 0, 0, 0, 0, 13, 14]
    d.map(0x118, 0x10)  # overlaps the tail: merged, keeps old bytes before the new range
    assert d.regions == [(0x100, 0x28, "")]
    assert d.read(0x116, 4).tolist() == [0x17, 0x18, 0, 0]


def test_gather_scatter_wrap_negative_values_to_bytes():
    d = Dram()
    d.map(0x40, 8)
    d.scatter(0x40, np.array([[0, 7]]), np.array([[-1, -128]]), "SDP_WDMA")
    assert d.read(0x40, 8).tolist() == [255, 0, 0, 0, 0, 0, 0, 128]
    assert d.gather(0x40, np.array([7, 0]), "x").view(np.int8).tolist() == [-128, -1]


def test_strided_views_follow_a_region_merge():
    """A view handed out before a merge must not show the old region's array."""
    d = Dram()
    d.map(0x100, 8, "a")
    d.write(0x100, bytes(range(8)))
    before = d.strided(0x100, (2, 2), (4, 1), "t")
    assert before.tolist() == [[0, 1], [4, 5]]
    d.map(0x104, 16, "b")             # overlaps "a": one merged region, a new array
    d.write(0x100, bytes([9] * 8))
    assert d.strided(0x100, (2, 2), (4, 1), "t").tolist() == [[9, 9], [9, 9]]
    w = d.strided(0x100, (2, 2), (4, 1), "t", "write")
    w[...] = 7
    assert d.read(0x100, 8).tolist() == [7, 7, 9, 9, 7, 7, 9, 9]


def test_versions_change_exactly_when_a_watched_region_is_written():
    d = Dram()
    d.map(0x1000, 0x100, "weights")
    d.map(0x3000, 0x100, "other")
    watched = (0x1000, 0x1010, 0x10FF, 0x2000)       # two in one region, one unmapped
    first = d.versions(watched)
    assert first == (d.version(0x1000), -1)
    d.write(0x3000, b"\x01")                          # another region: no change
    assert d.versions(watched) == first
    d.write(0x1080, b"\x01")
    second = d.versions(watched)
    assert second != first and second == (d.version(0x1000), -1)
    d.map(0x10F0, 0x1000, "grown")         # merges 0x1000's region and maps 0x2000
    third = d.versions(watched)
    assert third not in (first, second) and third == (d.version(0x2000),)
    d.map(0x1000, 0x10)                    # zero-filling inside a region is a write
    assert d.versions(watched) != third
