from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from PIL import Image

from tengine_host.frontend import load_onnx
from tengine_host.quant.dataset import load_arrays, load_images


@pytest.fixture
def graph():
    g = helper.make_graph([helper.make_node("Relu", ["img"], ["y"])], "g",
                          [helper.make_tensor_value_info("img", TensorProto.FLOAT, [1, 1, 2, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return load_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]))


def test_npz_rows_npy_stack_and_errors(graph, tmp_path):
    rows = np.arange(12, dtype=np.float32).reshape(3, 1, 2, 2)
    np.savez(tmp_path / "c.npz", img=rows)
    samples = load_arrays(tmp_path / "c.npz", graph)
    assert len(samples) == 3 and samples[2]["img"].shape == (1, 1, 2, 2)
    assert samples[2]["img"].ravel().tolist() == [8, 9, 10, 11]
    np.save(tmp_path / "c.npy", rows[:, None])  # [S, 1, 1, 2, 2]: a stack of whole inputs
    assert len(load_arrays(tmp_path / "c.npy", graph)) == 3
    np.savez(tmp_path / "bad.npz", other=rows)
    with pytest.raises(ValueError, match=r"missing model inputs \['img'\]"):
        load_arrays(tmp_path / "bad.npz", graph)


def test_image_folder_with_mean_and_scale(graph, tmp_path):
    Image.fromarray(np.array([[0, 255], [51, 102]], np.uint8), "L").save(tmp_path / "a.png")
    (tmp_path / "notes.txt").write_text("ignored")
    (s,) = load_images(tmp_path, graph, (1, 2, 2), mean=(51.0,), scale=(0.01,))
    # (pixel - 51) * 0.01 for pixels 0, 255, 51, 102
    np.testing.assert_allclose(s["img"].ravel(), [-0.51, 2.04, 0.0, 0.51], rtol=1e-6)
    with pytest.raises(ValueError, match="does not match input"):
        load_images(tmp_path, graph, (1, 3, 3))
