from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from tengine_host.frontend import load_onnx
from tengine_host.quant import calibrate


def test_min_max_over_samples_for_every_activation(capsys):
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])])
    g = load_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    samples = [{"x": np.array([[-3.0, 2.0, 0.0]], np.float32)},
               {"x": np.array([[-1.0, 5.0, 0.5]], np.float32)}]
    table = calibrate(g, samples, algorithm="minmax")
    assert table["x"] == {"scale": pytest.approx(5 / 127), "min": -3.0, "max": 5.0}
    assert table["y"] == {"scale": pytest.approx(5 / 127), "min": 0.0, "max": 5.0}
    assert capsys.readouterr().err == ""   # progress bars only on a terminal
    with pytest.raises(ValueError, match="at least one"):
        calibrate(g, [])
