"""``gemm_int8`` is exact: float32 GEMMs over chunks of reduction terms, and the integer
engine (onnxruntime's uint8 x uint8 ``MatMulInteger``) for large GEMMs.

The largest int8 product is (-128) * (-128) = 2**14, so a chunk of 1024 such
products sums to 2**24, the last integer from which float32 still holds every
smaller one.  The operands here are the extremes (+127 / -128) in adversarial
sign patterns, with reduction lengths on both sides of every chunk boundary;
the reference is the plain int64 matrix product.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accel.cmod.fast import gemm
from accel.cmod.fast.gemm import EXACT_F32_TERMS, gemm_int8

BOUNDARY_R = sorted({n * EXACT_F32_TERMS + d for n in (1, 2, 3) for d in (-1, 0, 1)} | {1, 7})


def _reference(w: np.ndarray, p: np.ndarray) -> np.ndarray:
    return w.astype(np.int64) @ p.astype(np.int64)


@pytest.mark.parametrize("r", BOUNDARY_R)
def test_all_minus_128_sums_hit_two_to_the_24_per_chunk(r):
    w = np.full((3, r), -128, dtype=np.int8)
    p = np.full((r, 5), -128, dtype=np.int8)
    got = gemm_int8(w, p)
    assert got.dtype == np.int64
    assert (got == r * 16384).all()           # hand-computed: every product is 2**14
    np.testing.assert_array_equal(got, _reference(w, p))


@pytest.mark.parametrize("r", BOUNDARY_R)
def test_chunks_of_opposite_extreme_sums(r):
    # kernel 0: +2**14 products for the first half, -(127*128) for the rest; kernel 1 the
    # mirror: partial sums swing to both extremes around the chunk boundaries
    w = np.empty((2, r), dtype=np.int8)
    half = r // 2
    w[0, :half], w[0, half:] = -128, 127
    w[1, :half], w[1, half:] = 127, -128
    p = np.full((r, 1), -128, dtype=np.int8)
    got = gemm_int8(w, p)
    want = np.array([[half * 16384 - (r - half) * 127 * 128],
                     [-half * 127 * 128 + (r - half) * 16384]])
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, _reference(w, p))


@pytest.mark.parametrize("r", BOUNDARY_R)
def test_same_sign_products_with_odd_sums(r):
    """Products of 2**14 and 127*127 (odd), all positive: every chunk's partial sums climb
    to about 2**24 with odd values, the first ones float32 would round."""
    rng = np.random.default_rng(r)
    pick = rng.integers(0, 2, (2, r)).astype(bool)       # per kernel, per term
    w = np.where(pick, np.int8(127), np.int8(-128))
    p = np.where(pick[0], np.int8(127), np.int8(-128))[:, None]
    got = gemm_int8(w, p)
    want0 = int(pick[0].sum()) * 127 * 127 + int((~pick[0]).sum()) * 16384
    assert got[0, 0] == want0
    np.testing.assert_array_equal(got, _reference(w, p))


@settings(max_examples=60, deadline=None)
@given(r=st.sampled_from(BOUNDARY_R), k=st.integers(1, 4), n=st.integers(1, 4),
       seed=st.integers(0, 2**32 - 1), dense=st.booleans())
def test_random_extreme_operands(r, k, n, seed, dense):
    rng = np.random.default_rng(seed)
    values = np.array([-128, 127], dtype=np.int8) if dense else np.arange(-128, 128,
                                                                          dtype=np.int16)
    w = rng.choice(values, (k, r)).astype(np.int8)
    p = rng.choice(values, (r, n)).astype(np.int8)
    if dense:     # align the signs of kernel 0 and column 0: all their products positive
        p[:, 0] = np.where(w[0] < 0, np.int8(-128), np.int8(127))
    np.testing.assert_array_equal(gemm_int8(w, p), _reference(w, p))


def test_float32_operands_are_taken_as_they_are():
    """The convolution path hands in float32 weight matrices it keeps."""
    rng = np.random.default_rng(3)
    w = rng.choice(np.array([-128, 127]), (4, 2 * EXACT_F32_TERMS + 5)).astype(np.float32)
    p = rng.choice(np.array([-128, 127]), (w.shape[1], 6)).astype(np.int8)
    np.testing.assert_array_equal(gemm_int8(w, p), _reference(w.astype(np.int64), p))


# --- the integer engine (onnxruntime's uint8 x uint8 MatMulInteger) -------------------

def _engine():
    engine = gemm.int_engine()
    if engine is None:
        pytest.skip("onnxruntime's integer GEMM is missing or not exact here: BLAS takes "
                    "every GEMM")
    return engine


@pytest.mark.parametrize("r", [1031, 4099, gemm.INT_ENGINE_MAX_TERMS])
@pytest.mark.parametrize("wv,pv", [(-128, -128), (127, -128), (127, 127)])
def test_engine_extremes_at_its_longest_reductions(r, wv, pv):
    """Every product at an extreme (2**14, -127*128, 127*127) over the longest reductions
    the engine takes: the GEMM is large enough to go to it."""
    _engine()
    k, n = 8, max(1, gemm.INT_ENGINE_MIN_MACS // (8 * r) + 1)
    w = np.full((k, r), wv, dtype=np.int8)
    p = np.full((r, n), pv, dtype=np.int8)
    got = gemm.gemm_sums(w, p)
    assert got.dtype == np.int32                   # the engine's sums
    assert (got == wv * pv * r).all()


def test_engine_random_batched_and_broadcast():
    """A batch of convolutions sharing one weight matrix ([1, K, R] against [B, R, N]) and
    one with a matrix each, random int8: equal to int64 products."""
    _engine()
    rng = np.random.default_rng(11)
    p = rng.integers(-128, 128, (3, 300, 1200)).astype(np.int8)
    for w in (rng.integers(-128, 128, (1, 16, 300)), rng.integers(-128, 128, (3, 16, 300))):
        w = w.astype(np.int8)
        got = gemm.gemm_sums(gemm.Weights(w), p)
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, _reference(w, p))


@pytest.mark.parametrize("wv,pv", [(-128, -128), (127, -128), (-128, 127)])
def test_scratch_patches_give_the_same_sums_and_read_only_ones_stay(wv, pv):
    """Patches given as scratch become the engine's operand where they lie (in the offset
    form; the full-range kernels take int8 patches as they are): the sums are the int64
    products on extreme operands, and patches that cannot be written (a view of
    memory) are left as they were, with the same sums."""
    engine = _engine()
    r, n = 1031, 1500
    w = np.full((4, r), wv, dtype=np.int8)
    p = np.full((r, n), pv, dtype=np.int8)
    p[r // 2:, n // 2:] = 127 if pv == -128 else -128
    want = _reference(w, p)
    scratch = p.copy()
    np.testing.assert_array_equal(gemm.gemm_sums(gemm.Weights(w), scratch, scratch=True), want)
    assert np.array_equal(scratch, p) == engine.full_range   # the offset form's operand
    kept = p.copy()
    kept.flags.writeable = False
    np.testing.assert_array_equal(gemm.gemm_sums(gemm.Weights(w), kept, scratch=True), want)
    np.testing.assert_array_equal(kept, p)


def test_engine_check_rejects_saturating_pairs(monkeypatch):
    """An engine that adds products in pairs saturated to int16 (onnxruntime's uint8 x
    int8 kernels on AVX2 without VNNI) fails the check, and the GEMMs stay with BLAS."""
    engine = _engine()

    def saturating(weights, patches):
        a = weights.astype(np.int64)                              # w + 128
        x = gemm.to_offset_binary(patches).view(np.int8).astype(np.int64)
        if a.shape[-1] % 2:
            a = np.concatenate([a, np.zeros(a.shape[:-1] + (1,), np.int64)], axis=-1)
            x = np.concatenate([x, np.zeros((1,) + x.shape[1:], np.int64)], axis=0)
        prods = a[..., :, :, None] * x[None]                      # [M, R, N]
        pairs = np.clip(prods[:, 0::2] + prods[:, 1::2], -(1 << 15), (1 << 15) - 1)
        return pairs.sum(axis=1) - 128 * x.sum(axis=0)[None]

    assert engine.exact()
    monkeypatch.setattr(engine, "run", saturating)
    assert not engine.exact()
    monkeypatch.setattr(gemm, "_ENGINE", [])
    monkeypatch.setattr(gemm.IntEngine, "run", lambda self, w, p: saturating(w, p))
    assert gemm.int_engine() is None
    w = np.full((8, 1024), 127, dtype=np.int8)
    p = np.full((1024, 200), 127, dtype=np.int8)
    got = gemm.gemm_sums(w, p)
    assert got.dtype == np.float32 and (got == 127 * 127 * 1024).all()


def test_signed_kernels_on_non_negative_patches():
    """The uint8 x int8 kernels (``PackedWeights.run(..., signed=True)``) on non-negative
    patches at 127 against weights of -128 and 127 (pairs of products of 2 * 127 * 128,
    just inside int16) over long reductions, and on random ones: the int64 sums."""
    engine = _engine()
    if not engine.signed:
        pytest.skip("onnxruntime's uint8 x int8 kernels are not exact here: the offset "
                    "form takes every GEMM")
    rng = np.random.default_rng(12)
    for r in (1, 2, 1031, 4099):
        w = np.where(rng.random((16, r)) < 0.5, -128, 127).astype(np.int8)
        p = np.full((300, r), 127, dtype=np.int8)
        p[::7] = 0
        got = engine.packed(w).run(p, signed=True)
        np.testing.assert_array_equal(got, (w.astype(np.int64) @ p.T.astype(np.int64)).T)
    w = rng.integers(-128, 128, (40, 200)).astype(np.int8)
    p = rng.integers(0, 128, (500, 200)).astype(np.int8)
    packed = engine.packed(w)
    want = p.astype(np.int64) @ w.T.astype(np.int64)
    np.testing.assert_array_equal(packed.run(p, signed=True), want)
    np.testing.assert_array_equal(packed.run(p), want)              # the offset form


def test_check_leaves_signed_kernels_out_when_they_saturate(monkeypatch):
    """Kernels that would saturate pairs of products at 2**14 (worse than any real one)
    fail the check of the signed form: the engine stays, with the offset form only."""
    engine = _engine()
    real = gemm.PackedWeights.run

    def narrow(self, patches, signed=False):
        if not signed:
            return real(self, patches)
        a = patches.view(np.uint8).astype(np.int64)                    # [N, R]
        w = self._weights.astype(np.int64)                             # [K, R]
        if a.shape[1] % 2:
            a, w = np.pad(a, ((0, 0), (0, 1))), np.pad(w, ((0, 0), (0, 1)))
        prods = a[:, None, :] * w[None]                                # [N, K, R]
        pairs = np.clip(prods[..., 0::2] + prods[..., 1::2], -(1 << 14), (1 << 14) - 1)
        return pairs.sum(axis=-1)

    monkeypatch.setattr(gemm.PackedWeights, "run", narrow)
    assert engine.exact() and not engine.signed
    monkeypatch.setattr(gemm.PackedWeights, "run", real)
    assert engine.exact() and engine.signed


def _full_range_engine():
    engine = _engine()
    if not engine.full_range:
        pytest.skip("onnxruntime's uint8 x int8 kernels add products in 16 bits here: the "
                    "offset form takes the GEMMs")
    return engine


@pytest.mark.parametrize("r", [1, 2, 1031, 4099, gemm.INT_ENGINE_MAX_TERMS])
@pytest.mark.parametrize("wv,pv", [(-128, -128), (127, -128), (-128, 127), (127, 127)])
def test_full_range_kernels_at_the_extremes(r, wv, pv):
    """Offset weights of 0 and 255 (``-128 + 128``, ``127 + 128``) against patches of -128 and
    127, every pair of products at +-2 * 255 * 128 (far outside int16), over the longest
    reductions, in both forms: hand-computed sums, and the int64 products with mixed
    signs."""
    engine = _full_range_engine()
    n = max(2, gemm.INT_ENGINE_MIN_MACS // (8 * r) + 1)
    w = np.full((8, r), wv, dtype=np.int8)
    p = np.full((r, n), pv, dtype=np.int8)
    got = gemm.gemm_sums(w, p)
    assert got.dtype == np.int32 and (got == wv * pv * r).all()
    np.testing.assert_array_equal(engine.packed(w).run(np.ascontiguousarray(p.T)),
                                  np.full((n, 8), wv * pv * r))
    p[r // 2:, n // 2:] = 127 if pv == -128 else -128
    want = _reference(w, p)
    np.testing.assert_array_equal(gemm.gemm_sums(gemm.Weights(w), p), want)
    np.testing.assert_array_equal(engine.packed(w).run(np.ascontiguousarray(p.T)), want.T)


def test_full_range_kernels_random_batched_and_broadcast():
    engine = _full_range_engine()
    rng = np.random.default_rng(13)
    p = rng.integers(-128, 128, (3, 300, 1200)).astype(np.int8)
    for w in (rng.integers(-128, 128, (1, 16, 300)), rng.integers(-128, 128, (3, 16, 300))):
        w = w.astype(np.int8)
        np.testing.assert_array_equal(engine.run_full_range(gemm.Weights(w).offset, p),
                                      _reference(w, p))
    w = rng.integers(-128, 128, (40, 200)).astype(np.int8)
    x = rng.integers(-128, 128, (500, 200)).astype(np.int8)
    np.testing.assert_array_equal(engine.packed(w).run(x), _reference(x, w.T))


def test_full_range_arithmetic_on_operands_every_kernel_takes():
    """The offset form on the uint8 x int8 kernels, on any machine: with the uint8 operand
    at most 127 (int8 values of -128 .. -1, offset) no pair of products leaves int16, so
    the kernels are exact everywhere and the sums must be the int64 products: the
    offset's ``128 * sum`` taken back by the kernels' zero point."""
    engine = _engine()
    rng = np.random.default_rng(14)
    w = rng.integers(-128, 0, (2, 16, 700)).astype(np.int8)
    p = rng.integers(-128, 128, (2, 700, 90)).astype(np.int8)
    np.testing.assert_array_equal(engine.run_full_range(gemm.Weights(w).offset, p),
                                  _reference(w, p))
    x = rng.integers(-128, 0, (90, 700)).astype(np.int8)
    np.testing.assert_array_equal(engine.packed(w[0]).run_full_range(gemm.to_offset_binary(x)),
                                  _reference(x, w[0].T))


def test_check_leaves_the_full_range_out_when_pairs_saturate(monkeypatch):
    """uint8 x int8 kernels that add pairs of products in int16 with saturation (AVX2
    without VNNI) fail the full-range check: the engine stays, its GEMMs in the offset
    form, still exact."""
    engine = _engine()

    class Saturating:
        """AVX2's uint8 x int8 kernel: products added in pairs with int16 saturation, the
        pairs in int32, then the left operand's zero point of 128 taken back."""

        def run(self, names, feeds):
            a = feeds["a"].astype(np.int64)                            # uint8 [M, R]
            b = feeds["b"].astype(np.int64)                            # int8 [R, N]
            correction = b.sum(axis=0) << 7
            if a.shape[-1] % 2:
                a = np.concatenate([a, np.zeros(a.shape[:-1] + (1,), np.int64)], axis=-1)
                b = np.concatenate([b, np.zeros((1,) + b.shape[1:], np.int64)], axis=0)
            prods = a[..., :, :, None] * b[None]                       # [M, R, N]
            pairs = np.clip(prods[:, 0::2] + prods[:, 1::2], -(1 << 15), (1 << 15) - 1)
            return [(pairs.sum(axis=1) - correction).astype(np.int32)]

    monkeypatch.setattr(engine, "_full_session", Saturating())
    assert engine.exact() and not engine.full_range
    w = np.full((8, 1031), 127, dtype=np.int8)
    p = np.full((1031, 200), -128, dtype=np.int8)
    got = gemm.gemm_sums(gemm.Weights(w), p)
    assert got.dtype == np.int32 and (got == -127 * 128 * 1031).all()
    monkeypatch.undo()
    assert engine.exact()


def _selection_matrix(rng, k: int, c: int) -> np.ndarray:
    """0/1 ``[k, c]``: each row one 1 at a random input channel, or none."""
    w = np.zeros((k, c), dtype=np.int8)
    for row in range(k):
        if rng.random() < 0.8:
            w[row, rng.integers(c)] = 1
    return w


@pytest.mark.parametrize("seed", range(6))
def test_channel_moves_are_sums_of_one_product(seed):
    """A 0/1 matrix with at most one 1 per row (concat merges, channel permutations) takes
    the copying path; its sums equal the plain product, in both operand orders, with
    kernels past K summing to 0."""
    rng = np.random.default_rng(seed)
    k, c, n = (int(v) for v in rng.integers(1, 70, size=3))
    w = _selection_matrix(rng, k, c)
    if seed == 0:                               # runs of consecutive channels, and a gap
        w[:] = 0
        w[np.arange(min(k, c)) // 2 * 2, np.arange(min(k, c)) // 2 * 2] = 1
    weights = gemm.Weights(w, (k, c, 1, 1))
    assert weights.selection is not None
    p = rng.integers(-128, 128, size=(c, n), dtype=np.int8)
    np.testing.assert_array_equal(gemm.gemm_sums(weights, p), _reference(w, p))
    pixels = np.ascontiguousarray(p.T)
    got = gemm.select_sums(weights.selection, pixels, k + 5, 1)
    assert got.shape == (n, k + 5) and not got[:, k:].any()
    np.testing.assert_array_equal(got[:, :k], _reference(w, p).T)


@pytest.mark.parametrize("change", ["two", "minus_one", "two_ones", "kernel_3x3"])
def test_matrices_that_do_more_than_move_take_the_gemm(change):
    w = np.eye(6, dtype=np.int8)
    kernel = (6, 6, 1, 1)
    if change == "two":
        w[2, 2] = 2
    elif change == "minus_one":
        w[3, 3] = -1
    elif change == "two_ones":
        w[4, 1] = 1
    else:                                       # one 1 per row, but a tap of a 3x3 kernel
        w = np.zeros((6, 6 * 9), dtype=np.int8)
        w[np.arange(6), np.arange(6) * 9 + 4] = 1
        kernel = (6, 6, 3, 3)
    assert gemm.Weights(w, kernel).selection is None
