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
    "CONV_D_L0_0": ("CONV/CONV_D_L0_0_small_fbuf", "CONV_D_L0_0_small_3c77f6"),
    "SDP_X1_L0_0": ("SDP/SDP_X1_L0_0_small_fbuf", "SDP_X1_L0_0_small_c9894d"),
    "PDP_L0_0": ("PDP/PDP_L0_0_small_fbuf", "PDP_L0_0_small_fbdf76"),
    "CDP_L0_0": ("CDP/CDP_L0_0_small_fbuf", "CDP_L0_0_small_4531af"),
}


# The goldens were produced by NVDLA's regression harness with an input it wrote
# itself: PDP_L0_0 (1x1 max pooling, an identity) has a golden whose 8-byte atoms
# share none with the loadable's SET source blob, so the input is not in the
# loadable and not in ../shared.  CDP_L0_0's golden holds only -128, 0 and 127,
# the three values its descriptors allow (see the CDP property test), but not at
# the positions its source blob gives.  Strict xfail: if the data ever appears
# and the run matches, the marker must go.
_NO_INPUT = pytest.mark.xfail(strict=True, reason="golden input data not in the loadable")


@pytest.mark.parametrize("case", [pytest.param(c, marks=_NO_INPUT) for c in CASES])
def test_official_loadable_matches_golden(case):
    fbuf, golden = CASES[case]
    raw = shared_path("nvdla", "loadables", "flatbufs", "kmd", *fbuf.split("/")).read_bytes()
    gdir = shared_path("nvdla", "loadables", "golden", golden, "dla")
    try:
        from accel.cmod import Dla  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"cmod backend unavailable: {exc}")
    from accel.backends import get_backend

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

    from accel.backends import get_backend

    ld = read_loadable(shared_path("nvdla", "loadables", "flatbufs", "kmd", "SDP",
                                   "SDP_X1_L0_0_small_fbuf").read_bytes())
    cfg = get_preset("nv_small")
    rt = Runtime(cfg, get_backend("cmod", cfg))
    rt.load(ld)
    rt.submit()
    src = np.frombuffer(ld.blob("m4_SDPSrc_i4").data, dtype=np.int8)
    got = rt.read_output(0).view(np.int8)
    np.testing.assert_array_equal(got, np.maximum(src, 0))


def _run_official(fbuf: str):
    try:
        from accel.cmod import Dla  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"cmod backend unavailable: {exc}")
    from accel.backends import get_backend

    ld = read_loadable(shared_path("nvdla", "loadables", "flatbufs", "kmd",
                                   *fbuf.split("/")).read_bytes())
    cfg = get_preset("nv_small")
    rt = Runtime(cfg, get_backend("cmod", cfg))
    rt.load(ld)
    rt.submit()
    return ld, rt


def test_pdp_1x1_max_pool_is_the_identity():
    """PDP_L0_0 is a 1x1, stride 1, unpadded max pool with equal in/out strides: the output
    memory must be the source blob byte for byte (values and layout)."""
    from accel.loadable.containers import decode_op
    from accel.loadable.descriptors import OP_PDP

    ld, rt = _run_official("PDP/PDP_L0_0_small_fbuf")
    op = decode_op(OP_PDP, ld.blob("m1_OpList_i1").data, 0)
    assert (op.pool_mode, op.pool_width, op.pool_height, op.stride_x, op.stride_y,
            op.pad_left, op.pad_top, op.split_num) == (1, 0, 0, 1, 1, 0, 0, 1)
    src = ld.blob("m4_PDPSrc_i4").data
    got = rt.read_output(0).tobytes()
    assert len(got) == len(src) == 2048
    assert got == src


def test_cdp_lrn_with_zero_lut_matches_plain_derivation():
    """CDP_L0_0 derived from its descriptors (checked below): unit input converter, square
    sum over 3 channels ``s``, a linear LUT whose LE (65) and LO (257) tables are all zero
    with start = end = 0, index select 0, slopes scale 1 shift 0 and LO chosen on every
    tie.  So the LO table hits (value 0) for 0 < s < 256, and for s >= 256 both tables
    overflow and LO extrapolates 0 + (s - 0) * 1 = s; s = 0 gives 0 either way.  The
    product L * x is scaled by 2 and saturated to int8: 0 where x == 0 or s < 256, else
    127 / -128 by the sign of x (|2 * x * s| >= 512)."""
    import numpy as np

    from accel.layout import CubeLayout, unpack_feature
    from accel.loadable.containers import decode_op
    from accel.loadable.descriptors import OP_CDP
    from accel.loadable.descriptors_aux import LutParam

    ld, rt = _run_official("CDP/CDP_L0_0_small_fbuf")
    op = decode_op(OP_CDP, ld.blob("m1_OpList_i1").data, 0)
    lut = LutParam.unpack(ld.blob("m4_LUTList_i4").data)
    # the facts the derivation rests on
    assert (op.local_size, op.bypass_sqsum, op.bypass_out_mul, op.lut_index) == (3, 0, 0, 0)
    assert (op.in_cvt.offset, op.in_cvt.scale, op.in_cvt.truncate) == (0, 1, 0)
    assert (op.out_cvt.offset, op.out_cvt.scale, op.out_cvt.truncate) == (0, 2, 0)
    assert lut.method == 1 and not any(lut.linear_exp_table) and not any(lut.linear_only_table)
    assert (lut.linear_exp_offset, lut.linear_only_offset, lut.linear_exp_start,
            lut.linear_exp_end, lut.linear_only_start, lut.linear_only_end) == (0,) * 6
    for slope in (lut.linear_exp_underflow_slope, lut.linear_exp_overflow_slope,
                  lut.linear_only_underflow_slope, lut.linear_only_overflow_slope):
        assert (slope.scale, slope.shifter) == (1, 0)
    assert (lut.hybrid_priority, lut.underflow_priority, lut.overflow_priority) == (1, 1, 1)

    layout = CubeLayout(32, 8, 8, 8, 64, 512)
    x = unpack_feature(ld.blob("m6_CDPSrc_i6").data, layout).astype(np.int64)
    sq = np.pad(x * x, ((1, 1), (0, 0), (0, 0)))
    s = sq[:-2] + sq[1:-1] + sq[2:]
    want = np.where((s >= 256) & (x != 0), np.where(x > 0, 127, -128), 0)
    got = unpack_feature(rt.read_output(0), layout).astype(np.int64)
    np.testing.assert_array_equal(got, want)
    # not a degenerate cube: both branches occur
    assert 0 < np.count_nonzero(want) < want.size
    # NVIDIA's golden (made from another input) holds only values this derivation allows
    gold = read_dimg(shared_path("nvdla", "loadables", "golden", "CDP_L0_0_small_4531af", "dla",
                                 "o_000000.dimg").read_bytes())
    assert set(np.frombuffer(gold.data, np.int8).tolist()) <= {-128, 0, 127}
