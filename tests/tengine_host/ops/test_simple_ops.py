"""Relu, Add, Flatten, Reshape, Softmax, Identity, Dropout against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest


def test_relu(against_ort, rng):
    got, want = against_ort("Relu", {"x": rng.standard_normal((2, 3, 4)).astype(np.float32)})
    np.testing.assert_array_equal(got, want)


def test_add_broadcasts(against_ort, rng):
    got, want = against_ort("Add", {"a": rng.standard_normal((2, 3, 4)).astype(np.float32)},
                            {"b": rng.standard_normal((3, 1)).astype(np.float32)})
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("axis", [0, 1, 2, -1, 3])
def test_flatten(against_ort, rng, axis):
    got, want = against_ort("Flatten", {"x": rng.standard_normal((2, 3, 4)).astype(np.float32)},
                            attrs={"axis": axis})
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape", [[0, -1], [4, 0, 2], [-1]])
def test_reshape(against_ort, rng, shape):
    got, want = against_ort("Reshape", {"x": rng.standard_normal((2, 3, 4)).astype(np.float32)},
                            {"s": np.array(shape, dtype=np.int64)})
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("opset, axis", [(13, None), (13, 1), (11, None), (11, 2)])
def test_softmax_both_semantics(against_ort, rng, opset, axis):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32) * 5
    got, want = against_ort("Softmax", {"x": x}, attrs={} if axis is None else {"axis": axis},
                            opset=opset)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_identity_and_dropout_pass_through(against_ort, rng):
    x = rng.standard_normal((2, 5)).astype(np.float32)
    for op in ("Identity", "Dropout"):
        got, want = against_ort(op, {"x": x})
        np.testing.assert_array_equal(got, want)
