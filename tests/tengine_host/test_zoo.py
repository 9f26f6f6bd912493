"""Whole-model agreement with onnxruntime: the zoo (built with onnx.helper, seeded random
weights) and the real PP-OCR classifier from ../shared/models.

Agreement is the relative max error ``max|ours - ort| / max|ort|`` over the output,
required to be <= 1e-4.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from tengine_host.frontend import OnnxImportError, load_onnx
from tengine_host.interpreter import interpret
from tengine_host.zoo import MODELS, build
from tests.conftest import shared_path

TOLERANCE = 1e-4


def rel_max_error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got.astype(np.float64) - want).max() / np.abs(want).max())


def _agreement(model: onnx.ModelProto, shape: tuple[int, ...] | None = None) -> float:
    graph = load_onnx(model, input_shapes=None if shape is None else {
        model.graph.input[0].name: shape})
    name = graph.inputs[0]
    x = np.random.default_rng(7).standard_normal(graph.tensors[name].shape).astype(np.float32)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    wants = sess.run(None, {name: x})
    gots = interpret(graph, {name: x})
    errors = []
    for out, want in zip(graph.outputs, wants, strict=True):
        assert gots[out].shape == want.shape, f"{out}: {gots[out].shape} vs {want.shape}"
        errors.append(rel_max_error(gots[out], want))
    return max(errors)


def test_lenet5_agrees_with_onnxruntime():
    assert _agreement(build("lenet5")) <= TOLERANCE


@pytest.mark.conformance
@pytest.mark.parametrize("name", [n for n in MODELS if n != "lenet5"])
def test_zoo_model_agrees_with_onnxruntime(name):
    err = _agreement(build(name))
    print(f"{name}: relative max error {err:.2e}")
    assert err <= TOLERANCE


def test_zoo_is_reproducible_and_seeded():
    a, b, c = build("unet_small"), build("unet_small"), build("unet_small", seed=1)
    assert a.SerializeToString() == b.SerializeToString()
    assert a.SerializeToString() != c.SerializeToString()
    with pytest.raises(ValueError, match="zoo model 'vgg' not in lenet5"):
        build("vgg")


@pytest.mark.conformance
def test_ppocr_classifier_agrees_with_onnxruntime():
    model = onnx.load(str(shared_path("models", "ppocr_mobile_v2_cls_48x192.onnx")))
    # Its input is [-1, 3, ?, ?]: without the shape the loader must refuse clearly.
    with pytest.raises(OnnxImportError, match=r"input 'x' has dynamic dimensions.*--input-shape"):
        load_onnx(model)
    err = _agreement(model, (1, 3, 48, 192))
    print(f"ppocr_mobile_v2_cls: relative max error {err:.2e}")
    assert err <= TOLERANCE
