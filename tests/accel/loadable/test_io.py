"""Loadable reader/writer: round trips, the official files, malformed input, bindings."""

from __future__ import annotations

import filecmp
import shutil
from pathlib import Path

import pytest

from accel.loadable import generate
from accel.loadable.io import LoadableError, read_loadable, write_loadable
from accel.loadable.model import (
    AddressListEntry,
    Blob,
    EventListEntry,
    Loadable,
    MemoryFlags,
    MemoryListEntry,
    RelocListEntry,
    SubmitListEntry,
    TaskListEntry,
    TensorDescListEntry,
)
from tests.conftest import shared_path

KMD = ("nvdla", "loadables", "flatbufs", "kmd")


def _sample() -> Loadable:
    return Loadable(
        task_list=[TaskListEntry(0, 1, -1, [0, 1, 2], [], [0])],
        memory_list=[MemoryListEntry(1, 64, MemoryFlags.ALLOC | MemoryFlags.SET, 0, 256,
                                     ["w"], [16]),
                     MemoryListEntry(2, 128, MemoryFlags.ALLOC | MemoryFlags.INPUT, bind_id=3,
                                     tensor_desc_id=0)],
        address_list=[AddressListEntry(0, 0, 0, 0), AddressListEntry(1, 1, 8, 56)],
        event_list=[EventListEntry(0, 0, 7, 1, 1)],
        blobs=[Blob("w", bytes(range(40)), 1, 4, (0, 12, 0))],
        tensor_desc_list=[TensorDescListEntry("x", 0, 2, 128, 0, c=16, h=2, w=4,
                                              strides=[1, 32, 64, 0, 0, 0, 0, 0])],
        reloc_list=[RelocListEntry(1, 2, 44, 1, 4, 1)],
        submit_list=[SubmitListEntry(0, [0])],
    )


def test_round_trip():
    ld = _sample()
    assert read_loadable(write_loadable(ld)) == ld


@pytest.mark.parametrize("name, n_mem, n_blobs", [
    ("CONV/CONV_D_L0_0_small_fbuf", 7, 6), ("SDP/SDP_X1_L0_0_small_fbuf", 6, 5),
    ("PDP/PDP_L0_0_small_fbuf", 6, 5), ("CDP/CDP_L0_0_small_fbuf", 7, 6)])
def test_official_loadables_parse_and_round_trip(name, n_mem, n_blobs):
    raw = shared_path(*KMD, *name.split("/")).read_bytes()
    ld = read_loadable(raw)
    assert ld.version == (0, 7, 0)
    assert (len(ld.memory_list), len(ld.blobs), len(ld.task_list)) == (n_mem, n_blobs, 1)
    out = [m for m in ld.memory_list if m.flags & MemoryFlags.OUTPUT]
    assert len(out) == 1 and out[0].size == 2048  # 8x8x32 int8 output
    assert read_loadable(write_loadable(ld)) == ld


def test_truncated_raises_loadable_error():
    raw = write_loadable(_sample())
    with pytest.raises(LoadableError, match="at least 8"):
        read_loadable(raw[:4])
    with pytest.raises(LoadableError):
        read_loadable(raw[: len(raw) // 3])


def test_garbage_raises_loadable_error():
    with pytest.raises(LoadableError, match="outside"):
        read_loadable(b"\xff\xff\xff\x7f" + b"\x00" * 60)


def test_blob_lookup_lists_names():
    with pytest.raises(KeyError, match="have w"):
        _sample().blob("missing")


def test_committed_bindings_match_flatc(tmp_path: Path):
    if shutil.which("flatc") is None:
        pytest.skip("flatc not on PATH; cannot regenerate the bindings")
    generate.generate(tmp_path)
    ours = generate.HERE / "nvdla"
    fresh = tmp_path / "nvdla"
    names = sorted(p.relative_to(fresh) for p in fresh.rglob("*.py"))
    assert names == sorted(p.relative_to(ours) for p in ours.rglob("*.py"))
    mismatch = [str(n) for n in names if not filecmp.cmp(ours / n, fresh / n, shallow=False)]
    assert not mismatch, f"stale generated files: {mismatch}"
