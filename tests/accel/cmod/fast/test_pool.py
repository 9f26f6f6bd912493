"""The compiled PDP pass on packed cubes against the plain model's pooling."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from accel.arith import saturate
from accel.cmod import pdp
from accel.cmod.errors import ConfigError
from accel.cmod.fast.pool import pool_packed
from accel.cmod.pdp import AVERAGE, MAX, MIN, PAD_VALUE_BITS, PdpPlan


def _splits(draw, w: int, ow: int, kw: int, sw: int, pad_left: int) -> tuple:
    """One slice, or the output columns cut in up to three, each slice reading the input
    columns its windows cover (the first with the left padding)."""
    cuts = sorted(set(draw(st.lists(st.integers(1, ow - 1), max_size=2)))) if ow > 1 else []
    bounds = [0, *cuts, ow]
    out = []
    for out0, out1 in zip(bounds, bounds[1:], strict=False):
        in0 = 0 if out0 == 0 else out0 * sw - pad_left
        if not 0 <= in0 < w:
            return ((0, w, pad_left, 0, ow),)
        reach = (out1 - 1) * sw + kw - (pad_left if out0 == 0 else 0)
        out.append((in0, max(1, min(w - in0, reach)), pad_left if out0 == 0 else 0, out0,
                    out1 - out0))
    return tuple(out)


def _plain(x: np.ndarray, plan: PdpPlan) -> np.ndarray:
    """The plain model's output planes (as :meth:`PdpPlan.execute` computes them)."""
    planes = x if plan.method in (MAX, MIN) else x.astype(np.int64)
    out = np.empty((x.shape[0], plan.oh, plan.ow), dtype=np.int64)
    for in0, in_w, pad_left, out0, out_w in plan.splits:
        out[:, :, out0:out0 + out_w] = pdp.pool(
            planes[:, :, in0:in0 + in_w], plan.method, plan.kernel, plan.stride,
            (plan.pad_top, pad_left), (plan.oh, out_w), plan.pad_values, plan.recip)
    return saturate(out, 8)


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), atom=st.sampled_from([8, 32]), c=st.integers(1, 40),
       hw=st.tuples(st.integers(1, 12), st.integers(1, 12)),
       method=st.sampled_from([AVERAGE, MAX, MIN]),
       kernel=st.tuples(st.integers(1, 8), st.integers(1, 8)),
       stride=st.tuples(st.integers(1, 8), st.integers(1, 8)), data=st.data())
def test_packed_pooling_equals_plain(seed, atom, c, hw, method, kernel, stride, data):
    """Every method, kernel and stride of the PDP, padding on every side (windows wholly
    in it included), random pad values and reciprocals, split-width slices, atoms of 8
    and 32 lanes: the packed pass's bytes are the plain model's."""
    rng = np.random.default_rng(seed)
    (h, w), (kh, kw), sw = hw, kernel, stride[1]
    c_pad = -(-c // atom) * atom
    pad_top, pad_left = data.draw(st.integers(0, kh - 1)), data.draw(st.integers(0, kw - 1))
    oh, ow = data.draw(st.integers(1, 6)), data.draw(st.integers(1, 8))
    pad_values = np.array([0] + [int(rng.integers(-(1 << (b - 1)), 1 << (b - 1)))
                                 for b in PAD_VALUE_BITS], dtype=np.int64)
    recip = tuple(int(v) for v in rng.choice([0, 1, 1 << 16, 21845, 7282, (1 << 17) - 1,
                                              int(rng.integers(0, 1 << 17))], 2))
    plan = PdpPlan(c=c, h=h, w=w, oh=oh, ow=ow, c_pad=c_pad, src=(0, 0, 0), method=method,
                   kernel=kernel, stride=stride, pad_top=pad_top, recip=recip,
                   splits=_splits(data.draw, w, ow, kw, sw, pad_left), pad_values=pad_values,
                   dst=(0, 0, 0), cycles=0)
    x = rng.integers(-128, 128, (c_pad, h, w)).astype(np.int8)
    x.reshape(-1)[rng.random(x.size) < 0.2] = rng.choice([-128, 127], 1)
    packed = np.ascontiguousarray(x.reshape(c_pad // atom, atom, h, w).transpose(0, 2, 3, 1))
    got = pool_packed(packed, plan)
    try:
        want = _plain(x, plan)
    except ConfigError as e:      # an average window wholly in the padding: refused
        assert "wholly in the padding" in str(e) and got is None
        return
    np.testing.assert_array_equal(got.transpose(0, 3, 1, 2).reshape(c_pad, oh, ow), want)


def test_packed_pooling_by_hand():
    """A 2x2 average with one padded row (pad value -3) and a 3x3 max wholly in the
    padding, worked by hand."""
    x = np.array([[[4, 8], [2, 6]]], dtype=np.int8).repeat(8, axis=0)   # one atom of 8
    packed = np.ascontiguousarray(x.transpose(1, 2, 0))[None]
    pad_values = np.array([0, -3, 0, 0, 0, 0, 0, 0], dtype=np.int64)
    average = PdpPlan(c=8, h=2, w=2, oh=2, ow=1, c_pad=8, src=(0, 0, 0), method=AVERAGE,
                      kernel=(2, 2), stride=(1, 1), pad_top=1, recip=(1 << 15, 1 << 15),
                      splits=((0, 2, 0, 0, 1),), pad_values=pad_values, dst=(0, 0, 0),
                      cycles=0)
    # top window: row -1 padded (2 cells: KW * pv[1] = -6) + 4 + 8 = 6, / 4 = 1.5 -> 2;
    # bottom window: 4 + 8 + 2 + 6 = 20, / 4 = 5
    assert pool_packed(packed, average)[0, :, 0, 0].tolist() == [2, 5]
    wide = PdpPlan(c=8, h=2, w=2, oh=1, ow=2, c_pad=8, src=(0, 0, 0), method=MAX,
                   kernel=(3, 3), stride=(1, 3), pad_top=0, recip=(0, 0),
                   splits=((0, 2, 0, 0, 2),), pad_values=pad_values, dst=(0, 0, 0), cycles=0)
    # the second window starts at column 3: wholly outside, the neutral value, -128
    assert pool_packed(packed, wide)[0, 0, :, 0].tolist() == [8, -128]
