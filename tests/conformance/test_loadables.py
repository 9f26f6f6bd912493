"""Official NVDLA loadables through Runtime + firmware + the cmod backend vs golden DIMGs."""

from __future__ import annotations

import hashlib

import pytest

from accel.config import get_preset
from accel.loadable.dimg import read_dimg
from accel.loadable.io import read_loadable
from accel.runtime.umd import Runtime
from tests.conftest import shared_path

pytestmark = pytest.mark.conformance

CASES = {
    "CONV_D_L0_0": ("CONV/CONV_D_L0_0_small_fbuf", "CONV_D_L0_0_small_3c77f6", None),
    "SDP_X1_L0_0": ("SDP/SDP_X1_L0_0_small_fbuf", "SDP_X1_L0_0_small_c9894d", None),
    "PDP_L0_0": ("PDP/PDP_L0_0_small_fbuf", "PDP_L0_0_small_fbdf76",
                 "the firmware does not program PDP yet"),
    "CDP_L0_0": ("CDP/CDP_L0_0_small_fbuf", "CDP_L0_0_small_4531af",
                 "the firmware does not program CDP (LRN LUT) yet"),
}


# The goldens were produced by NVDLA's regression harness with an input it wrote
# itself: PDP_L0_0 (1x1 max pooling, an identity) has a golden whose 8-byte atoms
# share none with the loadable's SET source blob, so the input is not in the
# loadable and not in ../shared.  Strict xfail: if the data ever appears and
# the run matches, the marker must go.
_NO_INPUT = pytest.mark.xfail(strict=True, reason="golden input data not in the loadable")


@pytest.mark.parametrize("case", [pytest.param(c, marks=_NO_INPUT) for c in CASES])
def test_official_loadable_matches_golden(case):
    fbuf, golden, missing = CASES[case]
    if missing:
        pytest.skip(missing)
    raw = shared_path("nvdla", "loadables", "flatbufs", "kmd", *fbuf.split("/")).read_bytes()
    gdir = shared_path("nvdla", "loadables", "golden", golden, "dla")
    try:
        from accel.cmod import Dla  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"cmod backend unavailable: {exc}")
    from accel.runtime.backend import get_backend

    cfg = get_preset("nv_small")
    rt = Runtime(cfg, get_backend("cmod", cfg))
    rt.load(read_loadable(raw))
    rt.submit()
    (out,) = rt.outputs
    gold_raw = (gdir / "o_000000.dimg").read_bytes()
    gold = read_dimg(gold_raw)
    # the golden's md5 is the lead.md5 line; check we compare against the right file
    assert hashlib.md5(gold_raw).hexdigest() == (gdir / "lead.md5").read_text().split()[0]
    got = rt.read_output(out.name).tobytes()
    assert len(got) == len(gold.data)
    mismatch = sum(a != b for a, b in zip(got, gold.data, strict=True))
    assert mismatch == 0, f"{case}: {mismatch} of {len(got)} output bytes differ from golden"
    # our output, written as a DIMG with the golden's metadata, has the golden md5
    ours = gold.__class__(gold.surface_format, gold.width, gold.height, gold.channel,
                          gold.line_stride, gold.surf_stride, got, gold.version).to_bytes()
    assert hashlib.md5(ours).hexdigest() == (gdir / "lead.md5").read_text().split()[0]


def test_sdp_x1_relu_matches_plain_reference():
    """SDP_X1_L0_0 is ReLU with unit converter: output == max(source blob, 0) per byte."""
    try:
        from accel.cmod import Dla  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"cmod backend unavailable: {exc}")
    import numpy as np

    from accel.runtime.backend import get_backend

    ld = read_loadable(shared_path("nvdla", "loadables", "flatbufs", "kmd", "SDP",
                                   "SDP_X1_L0_0_small_fbuf").read_bytes())
    cfg = get_preset("nv_small")
    rt = Runtime(cfg, get_backend("cmod", cfg))
    rt.load(ld)
    rt.submit()
    src = np.frombuffer(ld.blob("m4_SDPSrc_i4").data, dtype=np.int8)
    got = rt.read_output(0).view(np.int8)
    np.testing.assert_array_equal(got, np.maximum(src, 0))
