"""The compiled CACC/SDP/converter pass (:mod:`accel.cmod.fast.fused`) against the numpy form.

The numpy form (:func:`accel.cmod.cacc.clip_truncate`, :func:`accel.cmod.sdp.x_stage`,
:func:`accel.cmod.sdp.convert_inplace`) is the one NVIDIA's traces verify; here
it runs one operation at a time on the same inputs, and every output byte and
saturation count must agree.  The draws favour the edges: exact halves, sums
past 34 bits, operands at the int16 limits, large shifts, PReLU and ReLU.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accel.cmod import cacc, sdp, sdp_y
from accel.cmod.fast import lut_y
from accel.cmod.fast.fused import CHUNK, ROW_CHANNELS, PostProcess, eltwise_packed, stage_row
from accel.cmod.lut import LutRam
from accel.cmod.sdp import ALU_MAX, ALU_MIN, ALU_SUM, StageConfig
from tests.accel.cmod.fast.test_lut_y import CONFIGS as LUT_CONFIGS
from tests.accel.cmod.fast.test_lut_y import SLOPES as LUT_SLOPES
from tests.accel.cmod.fast.test_lut_y import sdp_group as lut_group

I16 = st.integers(-(1 << 15), (1 << 15) - 1)


def _stage(draw, usual: bool = False) -> StageConfig:
    """Any X stage; or with ``usual``, the compiler's kind (a bias sum and multiplier,
    either bypassed, ReLU or not: no MAX/MIN, no PReLU), which has a one-loop path."""
    return StageConfig(
        bypass=False if usual else draw(st.booleans()), alu_bypass=draw(st.booleans()),
        alu_algo=ALU_SUM if usual else draw(st.sampled_from([ALU_MAX, ALU_MIN, ALU_SUM])),
        mul_bypass=draw(st.booleans()), prelu=False if usual else draw(st.booleans()),
        relu_bypass=draw(st.booleans()), alu_src_mem=False,
        alu_shift=draw(st.sampled_from([0, 1, 7, 15, 31, 40, 63])), alu_operand=0,
        mul_src_mem=False, mul_shift=draw(st.sampled_from([0, 1, 8, 15, 31, 62, 63])),
        mul_operand=0)


def _bypassed() -> StageConfig:
    return StageConfig(True, True, ALU_SUM, True, False, True, False, 0, 0, False, 0, 0)


def _operand(draw, rng, n: int, c: int, h: int, w: int):
    """An operand in one of the forms the datapath takes, with its batch axis."""
    form = draw(st.sampled_from(["int", "launch", "channel", "element"]))
    if form == "int":
        return draw(I16)
    shape = {"launch": (n, 1, 1, 1), "channel": (n, c, 1, 1), "element": (n, c, h, w)}[form]
    edges = np.array([-(1 << 15), -1, 0, 1, (1 << 15) - 1])
    values = rng.integers(-(1 << 15), 1 << 15, size=shape)
    return np.where(rng.random(shape) < 0.3, rng.choice(edges, size=shape), values)


def _sums(rng, shape, kind: str) -> np.ndarray:
    """Sums of products: float32 (exact integers below 2**24, as BLAS gives them), int32
    (the integer engine's, the int32 extremes among them) or int64 up to past 34 bits,
    with exact halves of small shifts among them."""
    bound = {"int64": 1 << 36, "int32": 1 << 31, "float32": 1 << 24}[kind]
    x = rng.integers(-bound, bound, size=shape)
    halves = rng.integers(-64, 64, size=shape) * 2 + 1         # odd: x.5 after one shift
    x = np.where(rng.random(shape) < 0.3, halves, x)
    if kind == "int32":
        x = np.where(rng.random(shape) < 0.1, rng.choice([-(1 << 31), (1 << 31) - 1], shape), x)
    return x.astype(kind)


def _reference(acc, cacc_on, truncate, stages, operands, cvt, c, c_pad, h, w):
    """The numpy form, one operation at a time."""
    n, k = acc.shape[:2]
    outs, sats = [], []
    for b in range(n):
        def pick(v, b=b):
            return v[b] if isinstance(v, np.ndarray) else v
        if cacc_on:
            terms = None      # let it saturate at 34 bits whatever the sums are
            x, cacc_sat = cacc.clip_truncate(cacc.accumulate(acc[b].astype(np.int64), terms),
                                             pick(truncate), terms)
        else:
            x, cacc_sat = acc[b].astype(np.int64), 0
        y = np.zeros((c_pad, h * w), dtype=np.int64)
        y[:k] = x
        y = y.reshape(c_pad, h, w)
        for stg, (alu, mul, shifted) in zip(stages, operands, strict=True):
            y = sdp.x_stage(y, stg, pick(alu), pick(mul), alu_shifted=shifted)
        out, cvt_sat = sdp.convert_inplace(y.copy(), *(int(pick(v)) for v in cvt), c)
        outs.append(out.astype(np.int8))
        sats.append((cacc_sat, cvt_sat))
    return np.stack(outs), np.array(sats)


@st.composite
def _case(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    n = draw(st.integers(1, 3))
    c = draw(st.integers(1, 40))
    atom = draw(st.sampled_from([4, 8, 16, 32]))    # channels per memory atom
    c_pad = -(-c // atom) * atom
    h, w = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    cacc_on = draw(st.booleans())
    k = draw(st.integers(1, c)) if cacc_on else c_pad
    if cacc_on:
        acc = _sums(rng, (n, k, h * w), draw(st.sampled_from(["float32", "int32", "int64"])))
    else:
        acc = rng.integers(-128, 128, size=(n, k, h * w)).astype(np.int8)
    truncate = draw(st.one_of(st.just(0), st.integers(0, 16),
                              st.lists(st.integers(0, 16), min_size=n, max_size=n)))
    if isinstance(truncate, list):
        truncate = np.array(truncate, dtype=np.int64)
    if draw(st.booleans()):
        stages = [_stage(draw), _stage(draw)]
    else:                        # the compiler's usual X1, X2 off
        stages = [_stage(draw, usual=True), _bypassed()]
    operands = [(_operand(draw, rng, n, c_pad, h, w), _operand(draw, rng, n, c_pad, h, w),
                 False) for _ in stages]
    cvt = (draw(st.sampled_from([0, -3, 100, -(1 << 31), (1 << 31) - 1])), draw(I16),
           draw(st.sampled_from([0, 1, 12, 20, 31, 62, 63])))
    if draw(st.booleans()):      # the identity converter the compiler programs
        cvt = (0, 1, 0)
    if draw(st.booleans()):      # per-launch converters, as a batch of tiles has
        cvt = tuple(np.array([v] * n, dtype=np.int64) for v in cvt)
    return acc, cacc_on, truncate, stages, operands, cvt, c, c_pad, h, w, atom


@settings(max_examples=400, deadline=None)
@given(_case())
def test_fused_equals_numpy_form(case):
    acc, cacc_on, truncate, stages, operands, cvt, c, c_pad, h, w, atom = case
    want, want_sat = _reference(*case[:-1])
    post = PostProcess(truncate, stages, operands, cvt, c, (c_pad, h, w), atom)
    got, got_sat = post.run(acc, cacc_on)
    np.testing.assert_array_equal(got.reshape(want.shape), want)
    np.testing.assert_array_equal(got_sat, want_sat)
    # the packed form: channel s * atom + lane of pixel (y, x) at [s, y, x, lane]
    packed, _ = post.run_packed(acc, cacc_on)
    n = packed.shape[0]
    lanes = want.reshape(n, c_pad // atom, atom, h, w).transpose(0, 1, 3, 4, 2)
    np.testing.assert_array_equal(packed, lanes)


@pytest.mark.parametrize("value, truncate, expected", [
    (5, 1, 3), (-5, 1, -3), (4, 1, 2), (-4, 1, -2),      # halves go away from zero
    (383, 8, 1), (384, 8, 2), (-384, 8, -2), (-383, 8, -1),
    (1 << 40, 0, 127), (-(1 << 40), 0, -128),             # past 34 bits: saturated
])
def test_hand_computed_values(value, truncate, expected):
    """CACC then an identity converter (scale 1, shift 0): values worked out by hand."""
    acc = np.array([[[value]]], dtype=np.int64)
    post = PostProcess(truncate, [_bypassed(), _bypassed()], [(0, 0, False)] * 2, (0, 1, 0),
                       1, (8, 1, 1), 8)
    out, sat = post.run(acc)
    assert out[0, 0, 0, 0] == expected
    assert out[0, 1:].tolist() == [[[0]]] * 7          # disabled MAC cells deliver 0
    assert sat[0, 0] == (1 if abs(value) >= 1 << 34 else 0)
    assert sat[0, 1] == (1 if abs(value) >= 1 << 34 else 0)


def test_relu_then_converter_saturation_counts_only_real_channels():
    """Channel 0 is real, channels 1..7 padding: a converter whose offset pushes every
    value past 17 bits counts the real channel's saturations only."""
    relu = StageConfig(False, True, ALU_SUM, True, False, False, False, 0, 0, False, 0, 0)
    acc = np.array([[[-7, 9]]], dtype=np.int64)
    post = PostProcess(0, [relu, _bypassed()], [(0, 0, False)] * 2, (-(1 << 20), 1, 0), 1,
                       (8, 1, 2), 8)
    out, sat = post.run(acc)
    assert out[0, 0].tolist() == [[127, 127]]       # ReLU(-7) = 0, then 0 + 2**20: saturated
    assert sat[0].tolist() == [0, 2]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), relu=st.booleans(), alu_form=st.sampled_from(
    ["int", "channel", "element"]), mul_form=st.sampled_from(["int", "channel", "element"]),
    kind=st.sampled_from(["float32", "int32", "int64"]))
def test_bias_and_scale_in_range(seed, relu, alu_form, mul_form, kind):
    """The compiler's usual stage (a bias sum, then a multiplier and shift, ReLU or not)
    on values that mostly stay inside int8 after the converter: every error in the
    arithmetic shows in the bytes, none is hidden by saturation (the drawn cases above
    favour extremes)."""
    rng = np.random.default_rng(seed)
    n, c, h, w = 2, 16, 3, 5
    acc = rng.integers(-2000, 2000, (n, c, h * w)).astype(kind)
    forms = {"int": lambda lo, hi: int(rng.integers(lo, hi)),
             "channel": lambda lo, hi: rng.integers(lo, hi, (n, c, 1, 1)),
             "element": lambda lo, hi: rng.integers(lo, hi, (n, c, h, w))}
    alu, mul = forms[alu_form](-1000, 1000), forms[mul_form](-64, 64)
    stage = StageConfig(bypass=False, alu_bypass=False, alu_algo=ALU_SUM, mul_bypass=False,
                        prelu=False, relu_bypass=not relu, alu_src_mem=False, alu_shift=0,
                        alu_operand=0, mul_src_mem=False, mul_shift=8, mul_operand=0)
    operands = [(alu, mul, False), (0, 0, False)]
    cvt = (int(rng.integers(-20, 20)), int(rng.integers(1, 8)), 6)
    case = (acc, True, 0, [stage, _bypassed()], operands, cvt, c, c, h, w)
    want, want_sat = _reference(*case)
    got, got_sat = PostProcess(0, [stage, _bypassed()], operands, cvt, c, (c, h, w), 8).run(acc)
    np.testing.assert_array_equal(got.reshape(want.shape), want)
    np.testing.assert_array_equal(got_sat, want_sat)
    assert np.mean(np.abs(want.astype(np.int64)) >= 127) < 0.5


@pytest.mark.parametrize("usual, form, cvt, kind, atom", [
    (True, "channel", (0, 1, 0), "int32", 8),        # the one-loop path, identity converter
    (True, "channel", (-3, 517, 9), "float32", 32),  # the one-loop path, 4 words per point
    (True, "element", (5, 1234, 12), "int32", 8),    # per-point operands: row by row
    (False, "element", (0, 1, 0), "int64", 16),      # MAX/MIN/PReLU draws, 34-bit sums
])
def test_rows_longer_than_a_chunk(usual, form, cvt, kind, atom):
    """Planes of more than CHUNK points are processed a chunk at a time: operands
    indexed by point, the packed words and the counts must come out as in one piece."""
    rng = np.random.default_rng(7)
    n, c, h, w = 2, atom + 3, 3, (2 * CHUNK + 37) // 3
    c_pad, k = 2 * atom, atom + 2
    acc = _sums(rng, (n, k, h * w), kind)
    shape = {"channel": (n, c_pad, 1, 1), "element": (n, c_pad, h, w)}[form]
    operands = [(rng.integers(-5000, 5000, shape), rng.integers(-300, 300, shape), False),
                (0, 0, False)]
    stage = StageConfig(bypass=False, alu_bypass=False,
                        alu_algo=ALU_SUM if usual else ALU_MAX, mul_bypass=False,
                        prelu=not usual, relu_bypass=False, alu_src_mem=False, alu_shift=1,
                        alu_operand=0, mul_src_mem=False, mul_shift=14, mul_operand=0)
    case = (acc, True, 0 if kind != "int64" else 3, [stage, _bypassed()], operands, cvt, c,
            c_pad, h, w)
    want, want_sat = _reference(*case)
    post = PostProcess(case[2], case[3], operands, cvt, c, (c_pad, h, w), atom)
    got, got_sat = post.run(acc)
    np.testing.assert_array_equal(got.reshape(want.shape), want)
    np.testing.assert_array_equal(got_sat, want_sat)
    assert 0 < np.mean(np.abs(want.astype(np.int64)) >= 127) < 0.9   # not all saturated


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.one_of(st.integers(1, 3), st.integers(8, 24)),
       c=st.one_of(st.integers(1, 40), st.integers(ROW_CHANNELS - 7, ROW_CHANNELS + 40)),
       atom=st.sampled_from([4, 8, 16, 32]), hw=st.sampled_from([(1, 1), (2, 3), (5, 7)]),
       data=st.data())
def test_pixel_major_sums_equal_numpy_form(seed, n, c, atom, hw, data):
    """``run_pixels``: ``n`` operations of the compiler's usual program (a batch, each with
    its own operands), or with X1 bypassed, from pixel-major int32 sums (a pixel's
    channels side by side, operation after operation, zeros past the kernels), against
    the numpy form of the same sums one operation at a time; the int32 extremes and
    exact halves are among the sums, and each operation's saturations are counted
    apart.  Pixels of
    :data:`ROW_CHANNELS` channels or more (of whole 64-bit words per atom) take the
    two-pass form, the others the one-pass one: both are drawn."""
    rng = np.random.default_rng(seed)
    h, w = hw
    c_pad = -(-c // atom) * atom
    k = data.draw(st.integers(1, c))
    acc = _sums(rng, (n, k, h * w), "int32")
    # X1 the compiler's usual stage, or bypassed (an SDP that only converts) whatever its
    # other fields hold
    x1 = data.draw(st.sampled_from(["usual", "bypassed"]))
    stages = [_stage(data.draw, usual=True) if x1 == "usual"
              else replace(_stage(data.draw), bypass=True), _bypassed()]
    def per_channel():          # _operand's forms but the per-element one
        form = data.draw(st.sampled_from(["int", "launch", "channel", "shared"]))
        if form == "int":
            return data.draw(I16)
        shape = {"launch": (n, 1, 1, 1), "channel": (n, c_pad, 1, 1),
                 "shared": (1, c_pad, 1, 1)}[form]
        values = rng.integers(-(1 << 15), 1 << 15, size=shape)
        return np.where(rng.random(shape) < 0.3, rng.choice([-(1 << 15), -1, 0, 1,
                                                              (1 << 15) - 1], shape), values)

    operands = [(per_channel(), per_channel(), False), (0, 0, False)]
    cvt = data.draw(st.sampled_from([(0, 1, 0), (-3, 517, 9), (100, -2, 1),
                                     ((1 << 31) - 1, 1, 63)]))
    def each(v):                # the reference picks operation b's operands by index
        return np.broadcast_to(v, (n, *v.shape[1:])) if isinstance(v, np.ndarray) else v

    want, want_sat = _reference(acc, True, 0, stages,
                                [tuple(each(v) for v in op) for op in operands], cvt, c,
                                c_pad, h, w)
    post = PostProcess(0, stages, operands, cvt, c, (c_pad, h, w), atom)
    assert post.pixels_ready
    pixels = np.zeros((h * w, n, c_pad), dtype=np.int32)
    pixels[:, :, :k] = acc.transpose(2, 0, 1)
    got, sat = post.run_pixels(pixels.reshape(h * w, n * c_pad))
    lanes = want.reshape(n, c_pad // atom, atom, h, w).transpose(0, 1, 3, 4, 2)
    np.testing.assert_array_equal(got, lanes)
    assert want_sat[:, 0].tolist() == [0] * n
    assert want_sat[:, 1].tolist() == sat.tolist()


def _edge_sums(rng, alu, mul, shift, points):
    """int32 sums for channels of ALU operand ``alu`` and multiplier ``mul`` (arrays,
    ``[C]``) that put ``x * mul + alu * mul`` on and next to the exact halves of
    ``2**shift`` where the rounded value crosses -129..128 (the int8 clip) and the
    17-bit bounds, with sums anywhere in int32 among them: ``[points, C]``."""
    c = alu.shape[0]
    targets = np.concatenate([np.arange(-130, 130), [-(1 << 16) - 1, -(1 << 16), (1 << 16) - 1,
                                                     1 << 16]])
    out = rng.integers(-(1 << 31), 1 << 31, (points, c))
    for j in range(c):
        if mul[j] == 0:
            continue
        tie = (2 * targets[rng.integers(0, targets.size, points)] + 1) << shift >> 1
        x = (tie - int(alu[j]) * int(mul[j])) // int(mul[j]) + rng.integers(-2, 3, points)
        out[:, j] = np.where(rng.random(points) < 0.9, x, out[:, j])
    return np.clip(out, -(1 << 31), (1 << 31) - 1).astype(np.int32)


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 3), c=st.integers(1, 70),
       shift=st.one_of(st.sampled_from([0, 1, 2, 30, 31]), st.integers(14, 25)),
       relu=st.booleans(), mul_bits=st.sampled_from([2, 8, 16]))
def test_pixel_sums_at_every_rounding_and_clipping_edge(seed, n, c, shift, relu, mul_bits):
    """``run_pixels`` with the compiler's identity converter: sums placed on and next to
    each channel's exact halves where the output leaves int8 or the converter's 17 bits
    (the random sums of the test above mostly saturate), multipliers of both signs and
    0, ReLU or not, against the numpy form."""
    rng = np.random.default_rng(seed)
    atom, h, w = 8, 4, 17
    c_pad = -(-c // atom) * atom
    bound = 1 << (mul_bits - 1)
    mul = rng.integers(-bound, bound, (n, c_pad))
    mul[:, ::5] = 0                                  # every fifth channel: one value
    alu = rng.integers(-(1 << 15), 1 << 15, (n, c_pad))
    stage = StageConfig(False, False, ALU_SUM, False, False, not relu, False, 0, 0, False,
                        shift, 0)
    operands = [(alu[..., None, None], mul[..., None, None], False), (0, 0, False)]
    sums = _edge_sums(rng, alu.ravel(), mul.ravel(), shift, h * w)     # [points, n * c_pad]
    per_op = sums.reshape(h * w, n, c_pad).transpose(1, 2, 0)
    want, want_sat = _reference(per_op, True, 0, [stage, _bypassed()], operands, (0, 1, 0), c,
                                c_pad, h, w)
    post = PostProcess(0, [stage, _bypassed()], operands, (0, 1, 0), c, (c_pad, h, w), atom)
    got, sat = post.run_pixels(sums)
    lanes = want.reshape(n, c_pad // atom, atom, h, w).transpose(0, 1, 3, 4, 2)
    np.testing.assert_array_equal(got, lanes)
    assert sat.tolist() == want_sat[:, 1].tolist()
    assert 0 < np.mean(np.abs(want.astype(np.int64)) < 127)         # not all saturated


@pytest.mark.parametrize("atom", [8, 16])
def test_pixel_major_outputs_written_through_any_view_of_memory(atom):
    """``run_pixels(acc, out)`` with ``out`` a view of memory: surfaces apart with a gap
    between them (which stays as it was), or one byte off 64-bit alignment (the one-pass
    form then); the same bytes as a new array, and as the numpy form gives."""
    rng = np.random.default_rng(5)
    n, c, h, w = 2, ROW_CHANNELS + atom + 3, 3, 5
    c_pad = -(-c // atom) * atom
    acc = _sums(rng, (n, c, h * w), "int32")
    usual = StageConfig(False, False, ALU_SUM, False, False, False, False, 0, 0, False, 9, 0)
    bias = rng.integers(-(1 << 15), 1 << 15, (n, c_pad, 1, 1))
    scale = rng.integers(1, 1 << 15, (n, c_pad, 1, 1))
    stages, operands = [usual, _bypassed()], [(bias, scale, False), (0, 0, False)]
    cvt = (-3, 517, 9)
    want, want_sat = _reference(acc, True, 0, stages, operands, cvt, c, c_pad, h, w)
    lanes = want.reshape(n, c_pad // atom, atom, h, w).transpose(0, 1, 3, 4, 2)
    post = PostProcess(0, stages, operands, cvt, c, (c_pad, h, w), atom)
    pixels = np.zeros((h * w, n, c_pad), dtype=np.int32)
    pixels[:, :, :c] = acc.transpose(2, 0, 1)
    pixels = pixels.reshape(h * w, n * c_pad)
    surfaces, points = n * c_pad // atom, h * w
    for lead, surf in ((0, points * atom + 40), (1, points * atom)):
        memory = np.full(lead + surfaces * surf, 0x5A, dtype=np.uint8)
        out = np.lib.stride_tricks.as_strided(memory[lead:], (surfaces, points, atom),
                                              (surf, atom, 1)).view(np.int8)
        got, sat = post.run_pixels(pixels, out)
        np.testing.assert_array_equal(got, lanes)
        np.testing.assert_array_equal(out.reshape(got.shape), lanes)
        assert sat.tolist() == want_sat[:, 1].tolist()
        gaps = memory[lead:].reshape(surfaces, surf)[:, points * atom:]
        assert (gaps == 0x5A).all() and memory[:lead].tolist() == [0x5A] * lead


def test_pixel_major_sums_only_for_usual_operations_with_one_converter():
    """Per-element operands, a CACC truncate, a second stage or converters that differ
    between the operations take the channel-major pass; asked anyway, run_pixels refuses
    rather than computing wrong; so it does sums that are not whole operations."""
    usual = StageConfig(False, False, ALU_SUM, False, False, False, False, 0, 0, False, 8, 0)
    per_channel = (np.arange(8).reshape(1, 8, 1, 1), 3, False)
    element = (np.arange(16).reshape(1, 8, 1, 2), 3, False)

    def post(truncate=0, second=None, ops=per_channel, offsets=(0,)):
        cvt = (np.array(offsets), 1, 0)
        stages = [usual, second or _bypassed()]
        return PostProcess(truncate, stages, [ops, (0, 0, False)], cvt, 8, (8, 1, 2), 8)

    assert post().pixels_ready and post(offsets=(5, 5)).pixels_ready
    for other in (post(ops=element), post(truncate=2), post(second=usual),
                  post(offsets=(0, 1))):
        assert not other.pixels_ready
        with pytest.raises(ValueError, match="run_pixels"):
            other.run_pixels(np.zeros((2, 8), dtype=np.int32))
    for shape, dtype in (((2, 12), np.int32), ((3, 8), np.int32), ((2, 8), np.int64)):
        with pytest.raises(ValueError, match="run_pixels: sums"):
            post().run_pixels(np.zeros(shape, dtype=dtype))


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), c=st.integers(1, 40),
       atom=st.sampled_from([4, 8, 16, 32]), hw=st.sampled_from([(1, 1), (2, 3), (5, 7)]),
       data=st.data())
def test_element_wise_sum_equals_numpy_form(seed, c, atom, hw, data):
    """``eltwise_packed``: an SDP op reading memory whose X1 adds an int8 operand cube
    (shifted as the hardware shifts ALU operands, up to saturation past 31 bits), then
    the register multiplier or none, ReLU or not, then X2 off or with operands per
    channel, and the converter; against the numpy form of the same op (operands as
    per-element planes)."""
    rng = np.random.default_rng(seed)
    h, w = hw
    c_pad = -(-c // atom) * atom
    x = rng.choice([-128, -1, 0, 1, 127, *range(-128, 128, 37)], (1, c_pad, h * w))
    a = rng.choice([-128, -1, 0, 1, 127, *range(-128, 128, 29)], (1, c_pad, h, w))
    mul_bypass = data.draw(st.booleans())
    stage = StageConfig(
        bypass=False, alu_bypass=False, alu_algo=ALU_SUM, mul_bypass=mul_bypass,
        prelu=False, relu_bypass=data.draw(st.booleans()), alu_src_mem=True,
        alu_shift=data.draw(st.sampled_from([0, 1, 7, 15, 23, 31, 40, 63])), alu_operand=0,
        mul_src_mem=mul_bypass, mul_shift=data.draw(st.sampled_from([0, 1, 8, 15, 31, 63])),
        mul_operand=data.draw(I16))
    cvt = data.draw(st.sampled_from([(0, 1, 0), (0, 27769, 15), (-3, 517, 9),
                                     ((1 << 31) - 1, 1, 63), (100, -2, 1)]))
    # then X2 off, or any X2 stage with one operand and multiplier per channel (PReLU's
    # slopes after a residual sum), computed element by element
    stage2, x2 = _bypassed(), None
    alu2 = rng.integers(-(1 << 15), 1 << 15, (1, c_pad, 1, 1))
    mul2 = rng.choice([-(1 << 15), -1, 0, 1, 3, 200, (1 << 15) - 1], (1, c_pad, 1, 1))
    if data.draw(st.booleans()):
        stage2 = _stage(data.draw)
        x2 = (stage_row(stage2), sdp.alu_operand_shifted(alu2, stage2.alu_shift).reshape(-1),
              mul2.reshape(-1))
    operands = [(a, stage.mul_operand, False), (alu2, mul2, False)]
    want, want_sat = _reference(x.astype(np.int8), False, 0, [stage, stage2], operands,
                                cvt, c, c_pad, h, w)
    def packed(planes: np.ndarray) -> np.ndarray:      # [C_pad, H*W] -> [S, H, W, atom]
        return planes.astype(np.int8).reshape(c_pad // atom, atom, h, w).transpose(0, 2, 3, 1)

    got, sat = eltwise_packed(packed(x[0]), packed(a[0].reshape(c_pad, -1)), stage, cvt, c,
                              x2)
    np.testing.assert_array_equal(got, packed(want[0]))
    assert want_sat[0].tolist() == [0, sat]


def test_element_wise_sum_only_for_its_program():
    """A stage that is not an element-wise sum (MAX, a multiplier from memory, PReLU) is
    refused, not computed wrong."""
    base = StageConfig(False, False, ALU_SUM, True, False, True, True, 0, 0, True, 0, 0)
    pixels = np.zeros((1, 1, 2, 8), dtype=np.int8)
    assert eltwise_packed(pixels, pixels, base, (0, 1, 0), 8)[1] == 0
    for other in (replace(base, alu_algo=ALU_MAX), replace(base, alu_src_mem=False),
                  replace(base, mul_bypass=False, mul_src_mem=True),
                  replace(base, mul_bypass=False, mul_src_mem=False, prelu=True)):
        with pytest.raises(ValueError, match="eltwise_packed"):
            eltwise_packed(pixels, pixels, other, (0, 1, 0), 8)


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 2), c=st.integers(1, 40),
       atom=st.sampled_from([8, 32]), hw=st.tuples(st.integers(1, 3), st.integers(1, 4)),
       config=st.sampled_from(sorted(LUT_CONFIGS)), reach=st.sampled_from([200, 1 << 15, 40000]),
       data=st.data())
def test_lut_alone_y_stage_equals_numpy_form(seed, n, c, atom, hw, config, reach, data):
    """A Y stage that is a LUT alone, looked up through the table of the values around 0
    inside the compiled pass: the numpy form's bytes, saturations and LUT counters
    (:func:`accel.cmod.sdp_y.lookup`) whenever every value reaching the LUT lies in the
    table, and None (the caller then runs the numpy form) when one does not; on the
    one-loop path of the usual X1 (one converter for the operations: the LUT and the
    converter as one table; a converter each: the LUT's table, then the converter) and
    on the row-by-row one."""
    draw = data.draw
    stage = replace(_stage(draw, usual=True), mul_shift=draw(st.sampled_from([0, 1, 4])))
    # X2 bypassed, or any stage of register operands (a scale into the LUT's range) whose
    # shifts keep most values in the LUT's table
    x2 = _bypassed() if draw(st.integers(0, 3)) == 0 else replace(
        _stage(draw), alu_shift=draw(st.sampled_from([0, 1, 3])),
        mul_shift=draw(st.sampled_from([0, 1, 4])))
    # int32 sums take the one-loop path of the usual X1; int64 ones the row-by-row path
    _check_lut_alone(np.random.default_rng(seed), n, c, atom, hw, config, reach, stage,
                     draw(st.sampled_from([np.int32, np.int64])),
                     per_launch_cvt=n > 1 and draw(st.booleans()), x2=x2)


def test_lut_alone_counts_past_a_tally_block():
    """LUT counters and converter saturations of more values in one channel than a field
    of the one-loop path's tallies holds (4,095: a run of a channel's values is added up,
    then taken apart, block by block), every value on the same LUT entry, on both the
    one-loop and the row-by-row paths: the numpy form's counts (without the blocks, they
    would overflow into the next field)."""
    stage = StageConfig(False, True, ALU_SUM, True, False, True, False, 0, 0, False, 0, 0)
    for config in sorted(LUT_CONFIGS):
        for dtype in (np.int32, np.int64):      # the one-loop path, the row-by-row one
            _check_lut_alone(np.random.default_rng(7), 1, 2, 8, (70, 120), config, 3, stage,
                             dtype, per_launch_cvt=False, cvt=(-100, 300, 0))


def _check_lut_alone(rng, n, c, atom, hw, config, reach, stage, dtype, per_launch_cvt,
                     cvt=None, x2=None):
    """:meth:`PostProcess.run_lut` against the numpy form (:func:`accel.cmod.sdp.x_stage`,
    :func:`accel.cmod.sdp_y.lookup`, :func:`accel.cmod.sdp.convert_inplace`) on ``n``
    operations of ``c`` channels, sums in ``-reach .. reach``, random LUT entries and
    converter (one, or with ``per_launch_cvt`` one per operation), X2 ``x2`` (bypassed
    when None) with register operands; with one converter,
    :meth:`PostProcess.run_pixels_lut` on the same sums pixel by pixel too."""
    (h, w), c_pad = hw, -(-c // atom) * atom
    stages = [stage, x2 or _bypassed()]
    operands = [(int(rng.integers(-50, 50)), int(rng.integers(1, 4)), False),
                (int(rng.integers(-50, 50)), int(rng.integers(-4, 5)), False)]
    acc = rng.integers(-reach, reach, size=(n, c, h * w)).astype(dtype)
    if cvt is not None:
        cvts = [cvt] * n
    else:
        cvts = [(int(rng.integers(-100, 100)), int(rng.integers(-300, 300)),
                 int(rng.integers(0, 9))) for _ in range(n if per_launch_cvt else 1)] * (
            1 if per_launch_cvt else n)
    ram = LutRam()
    ram.le[:] = rng.integers(-32768, 32768, ram.le.size)
    ram.lo[:] = rng.integers(-32768, 32768, ram.lo.size)
    g = lut_group(**LUT_CONFIGS[config], **LUT_SLOPES)
    table = lut_y.y_table(ram, g)
    launch_cvt = tuple(np.array(column) for column in zip(*cvts, strict=True))
    post = PostProcess(0, stages, operands, launch_cvt if per_launch_cvt else cvts[0], c,
                       (c_pad, h, w), atom)
    got = post.run_lut(acc, table.values, table.flags)
    want, want_sats, in_table = [], [], True
    want_counts = dict.fromkeys(("uflow", "oflow", "le_hit", "lo_hit"), 0)
    for b in range(n):
        x = np.zeros((c_pad, h, w), dtype=np.int64)      # disabled MAC cells deliver 0
        x[:c] = acc[b].reshape(c, h, w)
        for stg, (alu, mul, _) in zip(stages, operands, strict=True):
            x = sdp.x_stage(x, stg, alu, mul)
        in_table &= bool(-lut_y.HALF <= x.min() and x.max() < lut_y.HALF)
        y, counts = sdp_y.lookup(x, ram, g)
        for key in want_counts:
            want_counts[key] += counts[key]
        out, sat = sdp.convert_inplace(y, *cvts[b], c)
        want.append(out.astype(np.int8))
        want_sats.append(sat)
    # the pixel-major pass, on the same sums a pixel's channels side by side, operation
    # after operation, zeros past the kernels (one converter for all: pixels_ready)
    got_pixels = None
    assert post.pixels_lut_ready == (len(set(cvts)) == 1)     # one converter for all
    if post.pixels_lut_ready:
        pixels = np.zeros((h * w, n, c_pad), dtype=np.int32)
        pixels[:, :, :c] = acc.transpose(2, 0, 1)
        got_pixels = post.run_pixels_lut(pixels.reshape(h * w, n * c_pad), table.values,
                                         table.flags)
    if not in_table:
        assert got is None and got_pixels is None
        return
    for packed, sats, counts in [got] + ([got_pixels] if post.pixels_lut_ready else []):
        planes = packed.transpose(0, 1, 4, 2, 3).reshape(n, c_pad, h, w)
        # the pass counts the operations' LUT counters together
        got_counts = lut_y.counters(counts, n * c_pad * h * w)
        assert {key: got_counts[key] for key in want_counts} == want_counts
        for b in range(n):
            np.testing.assert_array_equal(planes[b], want[b])
            assert (sats[b, 1] if sats.ndim == 2 else sats[b]) == want_sats[b]


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), c=st.integers(1, 40), atom=st.sampled_from([8, 32]),
       widths=st.integers(1, 3), lut=st.booleans(),
       config=st.sampled_from(sorted(LUT_CONFIGS)), data=st.data())
def test_channel_tables_equal_numpy_form(seed, c, atom, widths, lut, config, data):
    """An SDP op from memory as a table of each channel's 256 int8 codes (X stages with
    operands per channel, then a Y stage that is a LUT alone or none, then the
    converter): the numpy form's bytes, saturations and LUT counters on an input cube
    holding every code, whenever every value reaching the LUT lies in its table."""
    from types import SimpleNamespace

    from accel.cmod.fast.code_tables import byte_table, channel_table_apply
    from accel.cmod.fast.paths import _channel_code_table

    rng = np.random.default_rng(seed)
    c_pad, h, w = -(-c // atom) * atom, 16, 16 * widths
    draw = data.draw
    stages = [_stage(draw), _stage(draw)]
    per_channel = []
    for stage in stages:
        alu = rng.integers(-(1 << 15), 1 << 15, c_pad)
        mul = rng.integers(-(1 << 15), 1 << 15, c_pad)
        mul[rng.random(c_pad) < 0.2] = rng.choice([-(1 << 15), -1, 0, 1, (1 << 15) - 1])
        per_channel.append((stage, sdp.alu_operand_shifted(alu, stage.alu_shift), mul))
    cvt = (int(rng.integers(-100, 100)), int(rng.integers(-300, 300)), int(rng.integers(0, 12)))
    # every code in every channel (at its own place), then random ones
    codes = np.concatenate([np.arange(-128, 128), rng.integers(-128, 128, h * w - 256)])
    x = np.stack([np.roll(codes, 37 * ch) for ch in range(c_pad)]).reshape(c_pad, h, w)
    want = x.copy()
    for stage, alu, mul in per_channel:
        want = sdp.x_stage(want, stage, alu[:, None, None], mul[:, None, None],
                           alu_shifted=True)
    ram = g = y_table = None
    if lut:
        ram = LutRam()
        ram.le[:] = rng.integers(-32768, 32768, ram.le.size)
        ram.lo[:] = rng.integers(-32768, 32768, ram.lo.size)
        g = lut_group(**LUT_CONFIGS[config], **LUT_SLOPES)
        y_table = lut_y.y_table(ram, g)
    table = _channel_code_table(SimpleNamespace(c_pad=c_pad, cvt=cvt),
                                [s for s in per_channel if not s[0].bypass], y_table)
    if lut and not (-lut_y.HALF <= want.min() and want.max() < lut_y.HALF):
        assert table is None
        return
    counts = None
    if lut:
        want, counts = sdp_y.lookup(want, ram, g)
    out, sat = sdp.convert_inplace(want, *cvt, c)
    packed = np.ascontiguousarray(x.astype(np.int8).reshape(c_pad // atom, atom, h, w)
                                  .transpose(0, 2, 3, 1))
    if not lut:         # the datapath's form of a table without LUT counters
        table = byte_table(table, per_channel=True)
    got, got_sat, got_counts = channel_table_apply(packed, table, c)
    np.testing.assert_array_equal(got.transpose(0, 3, 1, 2).reshape(c_pad, h, w),
                                  out.astype(np.int8))
    assert got_sat == sat
    if lut:
        assert lut_y.counters(got_counts, c_pad * h * w) == counts
    else:
        assert not got_counts.any()


def test_channel_table_counts_past_a_16_bit_field():
    """The LUT counters of a row longer than a count field holds (65535): every element
    hits both tables and overflows, so each count is the number of elements."""
    from accel.cmod.fast.code_tables import channel_table_apply

    atom, w = 32, 4100
    table = np.full((atom, 256), 0b1111 << 9 | 0x7F, dtype=np.int16)
    x = np.zeros((1, 1, w, atom), dtype=np.int8)
    out, sat, counts = channel_table_apply(x, table, atom)
    assert (out == 0x7F).all() and sat == 0
    assert counts.tolist() == [atom * w] * 4
