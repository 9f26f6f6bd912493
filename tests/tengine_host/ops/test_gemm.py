from __future__ import annotations

import numpy as np
import pytest


@pytest.mark.parametrize("attrs", [{}, {"transB": 1}, {"transA": 1, "alpha": 0.5, "beta": 2.0}])
def test_gemm_matches_onnxruntime(against_ort, rng, attrs):
    a = rng.standard_normal((5, 3) if attrs.get("transA") else (3, 5)).astype(np.float32)
    b = rng.standard_normal((4, 5) if attrs.get("transB") else (5, 4)).astype(np.float32)
    c = rng.standard_normal(4).astype(np.float32)
    got, want = against_ort("Gemm", {"a": a}, {"b": b, "c": c}, attrs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
