from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from accel.arith import (
    saturate,
    scale_shift_factorize,
    shift_round,
    shift_round_int,
    shift_round_sat,
    sign_extend,
)


def test_round_half_away_from_zero_hand_cases():
    x = np.array([5, -5, 7, -7, 4, -4, 6, -6, 1, -1])
    # /2: 2.5->3, -2.5->-3, 3.5->4, -3.5->-4, 2, -2, 3, -3, 0.5->1, -0.5->-1
    assert shift_round(x, 1).tolist() == [3, -3, 4, -4, 2, -2, 3, -3, 1, -1]
    # /4: 1.25->1, -1.25->-1, 1.75->2, -1.75->-2
    assert shift_round(np.array([5, -5, 7, -7]), 2).tolist() == [1, -1, 2, -2]


def test_shift_zero_is_identity_and_negative_rejected():
    assert shift_round(np.array([-3, 0, 9]), 0).tolist() == [-3, 0, 9]
    with pytest.raises(ValueError, match="shift must be >= 0"):
        shift_round(np.array([1]), -1)


def test_saturation_bounds():
    assert saturate(np.array([-200, 200, 5]), 8).tolist() == [-128, 127, 5]
    assert shift_round_sat(np.array([2**40, -(2**40)]), 4, 32).tolist() == [2**31 - 1, -(2**31)]
    assert shift_round_sat(np.array([2**34]), 0, 34).tolist() == [2**33 - 1]


@given(st.integers(-(2**45), 2**45), st.integers(0, 20))
def test_matches_exact_rational_rounding(x, n):
    from fractions import Fraction

    q = Fraction(x, 2**n)
    mag = abs(q)
    r = int(mag) + (1 if mag - int(mag) >= Fraction(1, 2) else 0)
    expected = r if q >= 0 else -r
    assert int(shift_round(np.array([x]), n)[0]) == expected


@given(st.integers(-(2**49), 2**49), st.integers(0, 62))
def test_scalar_rule_matches_exact_rational_rounding(x, n):
    """shift_round_int (the compiled datapath's rule) against the rational result."""
    from fractions import Fraction

    q = Fraction(x, 2**n)
    mag = abs(q)
    r = int(mag) + (1 if mag - int(mag) >= Fraction(1, 2) else 0)
    assert shift_round_int(x, n) == (r if q >= 0 else -r)


def test_nonneg_rounding_hand_cases():
    # x >= 0: the same halves up as the signed rule (2.5 -> 3, 3.5 -> 4, 1.75 -> 2)
    assert shift_round(np.array([5, 7, 4, 1]), 1, nonneg=True).tolist() == [3, 4, 2, 1]
    assert shift_round(np.array([7, 5]), 2, nonneg=True).tolist() == [2, 1]
    # x < 0 gives <= 0 (-2.5 -> -2 here, -3 exactly): equal once clipped at 0, as a ReLU does
    got = shift_round(np.array([-5, -1, -6]), 1, nonneg=True)
    assert (got <= 0).all() and np.maximum(got, 0).tolist() == [0, 0, 0]


@given(st.integers(-(2**48), 2**48), st.integers(0, 40))
def test_nonneg_rounding_is_exact_where_it_may_be_used(x, n):
    """Exact for x >= 0, and for any x once negative results are clipped to 0."""
    fast = int(shift_round(np.array([x]), n, nonneg=True)[0])
    exact = int(shift_round(np.array([x]), n)[0])
    if x >= 0:
        assert fast == exact
    assert max(fast, 0) == max(exact, 0)


def test_sign_extend():
    assert sign_extend(np.array([0xFF, 0x7F, 0x80]), 8).tolist() == [-1, 127, -128]
    assert int(sign_extend(0x1FFFF, 17)) == -1


@given(st.floats(1e-6, 3e4))
def test_scale_shift_factorize_is_accurate(v):
    scale, shift = scale_shift_factorize(v)
    assert 0 < scale < 2**15 and 0 <= shift <= 63
    assert abs(scale / 2**shift - v) / v < 2**-13


def test_scale_shift_factorize_rejects_bad_values():
    with pytest.raises(ValueError, match="positive"):
        scale_shift_factorize(0.0)
    with pytest.raises(ValueError, match="exceeds"):
        scale_shift_factorize(40000.0)
