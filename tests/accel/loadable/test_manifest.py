"""The manifest blob: what it records, that it survives the flatbuffer, what it catches,
and that an official loadable runs the same with or without one."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from accel.loadable.io import LoadableError, read_loadable, write_loadable
from accel.loadable.manifest import (
    MANIFEST_BLOB,
    ChecksumError,
    ManifestError,
    TensorQuant,
    attach_manifest,
    read_manifest,
    verify_checksums,
)
from accel.loadable.model import Blob, Interface, Loadable
from tests.conftest import shared_path

X = TensorQuant("x", (1, 3, 4, 4), 0.0125, -3)
Y = TensorQuant("y", (1, 10), 0.25, 0)


def _loadable() -> Loadable:
    return Loadable(blobs=[Blob("weights", bytes(range(200))), Blob("task-0-op_list", b"\x07" * 9,
                                                                   interface=Interface.DLA1)])


def test_round_trip_through_the_flatbuffer_records_preset_scales_and_sha256():
    ld = read_loadable(write_loadable(attach_manifest(_loadable(), "nv_small", [X], [Y])))
    blob = ld.blob(MANIFEST_BLOB)
    assert blob.interface == Interface.NONE        # no DLA1/EMU1 task claims it
    man = read_manifest(ld)
    assert (man.preset, man.inputs, man.outputs) == ("nv_small", (X,), (Y,))
    assert man.tensor("y") == Y and man.tensor("z") is None
    # SHA-256 of each other blob's bytes, computed here from the bytes themselves
    assert man.checksums == {"weights": hashlib.sha256(bytes(range(200))).hexdigest(),
                             "task-0-op_list": hashlib.sha256(b"\x07" * 9).hexdigest()}
    # it is plain JSON anyone can read
    assert json.loads(blob.data)["inputs"][0] == {"name": "x", "shape": [1, 3, 4, 4],
                                                 "scale": 0.0125, "zero_point": -3}
    verify_checksums(ld, man)


def test_attaching_again_replaces_the_manifest():
    ld = attach_manifest(attach_manifest(_loadable(), "nv_small", [X], [Y]), "nv_large", [X], [])
    assert [b.name for b in ld.blobs].count(MANIFEST_BLOB) == 1
    assert read_manifest(ld).preset == "nv_large"
    assert MANIFEST_BLOB not in read_manifest(ld).checksums


def test_an_altered_missing_or_added_blob_is_named():
    ld = attach_manifest(_loadable(), "nv_small", [X], [Y])
    man = read_manifest(ld)
    altered = bytearray(ld.blobs[0].data)
    altered[17] ^= 0x01
    ld.blobs[0] = Blob("weights", bytes(altered))
    with pytest.raises(ChecksumError, match="blob 'weights' has SHA-256") as exc:
        verify_checksums(ld, man)
    assert exc.value.blobs == ["weights"]
    assert isinstance(exc.value, LoadableError)
    ld.blobs = [b for b in ld.blobs if b.name != "task-0-op_list"]
    ld.blobs.append(Blob("extra", b"1"))
    with pytest.raises(ChecksumError) as exc:
        verify_checksums(ld, man)
    assert sorted(exc.value.blobs) == ["extra", "task-0-op_list", "weights"]
    assert "'task-0-op_list' is missing" in str(exc.value)


@pytest.mark.parametrize("data, message", [
    (b"\xff\xfe", "is not JSON"),
    (b"[1, 2]", "has format 'list'"),
    (b'{"format": "other/9"}', "has format 'other/9'"),
    (b'{"format": "opendla-manifest/1", "preset": "nv_small", "inputs": []}',
     "is malformed: 'outputs'"),
    (b'{"format": "opendla-manifest/1", "preset": "nv_small", "outputs": [], "sha256": {},'
     b' "inputs": [{"name": "x", "shape": [1], "scale": -1, "zero_point": 0}]}',
     "scale -1.0 must be a positive"),
])
def test_a_malformed_manifest_is_refused_with_the_reason(data, message):
    ld = Loadable(blobs=[Blob(MANIFEST_BLOB, data)])
    with pytest.raises(ManifestError, match=message):
        read_manifest(ld)


def test_zero_point_outside_int8_is_refused():
    with pytest.raises(ValueError, match="zero point 128 is outside the int8 range"):
        TensorQuant("x", (1, 1), 1.0, 128)


def test_official_loadable_has_no_manifest_and_runs_the_same_with_one():
    """NVIDIA's SDP_X1 loadable (ReLU with a unit converter) reads its input from its own
    blob; with a manifest blob added it parses and computes max(source, 0) as before."""
    try:
        from accel.cmod import Dla  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"cmod backend unavailable: {exc}")
    from accel.backends import get_backend
    from accel.config import get_preset
    from accel.runtime.umd import Runtime

    raw = shared_path("nvdla", "loadables", "flatbufs", "kmd", "SDP",
                      "SDP_X1_L0_0_small_fbuf").read_bytes()
    official = read_loadable(raw)
    assert read_manifest(official) is None
    described = read_loadable(write_loadable(attach_manifest(official, "nv_small", [], [])))
    verify_checksums(described, read_manifest(described))
    cfg = get_preset("nv_small")
    outputs = []
    for ld in (official, described):
        rt = Runtime(cfg, get_backend("cmod", cfg))
        rt.load(ld)
        rt.submit()
        outputs.append(rt.read_output(0).view(np.int8))
    source = np.frombuffer(official.blob("m4_SDPSrc_i4").data, dtype=np.int8)
    np.testing.assert_array_equal(outputs[1], np.maximum(source, 0))
    np.testing.assert_array_equal(outputs[0], outputs[1])
