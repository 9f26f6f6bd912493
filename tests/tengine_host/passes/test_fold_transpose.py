"""fold_transpose: a Transpose flattened into a Gemm becomes a permutation of the Gemm's
weights, checked against onnxruntime before and after; an MTCNN-ONet-shaped network
then runs on the DLA as one subgraph, bit-exact to the int8 reference."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tengine_host.passes import fold_transpose, fuse_bias
from tengine_host.passes.fold_transpose import feature_order
from tests.accel.compiler.op_cases import G
from tests.tengine_host.passes.graphs import check, const, model, node, ops, unchanged

RNG = np.random.default_rng(11)
SHAPE = (1, 2, 3, 4)           # distinct sizes: a wrong permutation cannot pass


def _w(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _fc(perm, flatten="Reshape", trans_b=1, shape=SHAPE, extra=(), outputs=("y",), k=5):
    """x -> Relu -> Transpose(perm) -> Flatten / Reshape(0, -1) -> Gemm(k) (+ ``extra``)."""
    d = int(np.prod(shape[1:]))
    flat = (node("flat", "Flatten", ["t"], ["f"], axis=1) if flatten == "Flatten" else
            node("flat", "Reshape", ["t", "shape"], ["f"]))
    nodes = [node("relu", "Relu", ["x"], ["a"]),
             node("tr", "Transpose", ["a"], ["t"], perm=list(perm)), flat,
             node("fc", "Gemm", ["f", "w", "b"], ["y"], transB=trans_b), *extra]
    inits = [const("shape", np.array([0, -1], np.int64)),
             const("w", _w(k, d) if trans_b else _w(d, k)), const("b", _w(k))]
    return model(nodes, inits, list(shape), outputs=outputs)


PERMS = [(0, *p) for p in itertools.permutations(range(1, 4))]


@pytest.mark.parametrize("perm", PERMS, ids=lambda p: "".join(map(str, p)))
def test_every_perm_keeping_the_batch_first_folds_into_the_weights(perm):
    g = check(_fc(perm), fold_transpose.apply)
    assert ops(g) == ["Relu", "Reshape", "Gemm"]
    assert g.node("flat").inputs[0] == "a" and g.tensors["f"].shape == (1, 24)
    assert "t" not in g.tensors and g.outputs == ["y"]


@pytest.mark.parametrize("flatten, trans_b, shape", [
    ("Flatten", 1, SHAPE), ("Reshape", 0, SHAPE), ("Flatten", 0, (2, 3, 4, 5)),
    ("Reshape", 1, (3, 4, 5))])
def test_flatten_or_reshape_either_weight_layout_batches_and_ranks(flatten, trans_b, shape):
    perm = (0, 2, 1) if len(shape) == 3 else (0, 3, 1, 2)
    g = check(_fc(perm, flatten, trans_b, shape), fold_transpose.apply)
    assert "Transpose" not in ops(g)


def test_a_matmul_folds_once_it_is_a_gemm():
    nodes = [node("tr", "Transpose", ["x"], ["t"], perm=[0, 3, 2, 1]),
             node("flat", "Reshape", ["t", "shape"], ["f"]),
             node("mm", "MatMul", ["f", "w"], ["y"])]
    m = model(nodes, [const("shape", np.array([1, -1], np.int64)), const("w", _w(24, 6))],
              list(SHAPE))
    g = check(m, fold_transpose.apply, prepare=fuse_bias.apply)
    assert ops(g) == ["Reshape", "Gemm"]


def test_the_transposed_cube_may_have_other_readers():
    g = check(_fc((0, 3, 2, 1), extra=[node("keep", "Sigmoid", ["a"], ["z"])],
                  outputs=("y", "z")), fold_transpose.apply)
    assert "Transpose" not in ops(g) and g.outputs == ["y", "z"]


def test_chains_it_cannot_fold_stay():
    # the batch axis moves
    unchanged(_fc((1, 0, 2, 3), shape=(1, 1, 3, 4)), fold_transpose.apply)
    # the transposed tensor is read again, or is a graph output
    unchanged(_fc((0, 3, 2, 1), extra=[node("keep", "Sigmoid", ["t"], ["z"])],
                  outputs=("y", "z")), fold_transpose.apply)
    unchanged(_fc((0, 3, 2, 1), outputs=("y", "t")), fold_transpose.apply)
    # the flattened tensor is read again, or is a graph output
    unchanged(_fc((0, 3, 2, 1), extra=[node("keep", "Sigmoid", ["f"], ["z"])],
                  outputs=("y", "z")), fold_transpose.apply)
    unchanged(_fc((0, 3, 2, 1), outputs=("y", "f")), fold_transpose.apply)
    # the flattening is the Gemm's weight operand, not its input
    nodes = [node("tr", "Transpose", ["x"], ["t"], perm=[0, 3, 2, 1]),
             node("flat", "Flatten", ["t"], ["f"], axis=1),
             node("fc", "Gemm", ["a", "f"], ["y"], transB=1)]
    unchanged(model(nodes, [const("a", _w(5, 24))], list(SHAPE)), fold_transpose.apply)
    # a reshape that keeps a transposed axis is no flattening
    nodes = [node("tr", "Transpose", ["x"], ["t"], perm=[0, 3, 2, 1]),
             node("flat", "Reshape", ["t", "shape"], ["f"]),
             node("fc", "MatMul", ["f", "w"], ["y"])]
    unchanged(model(nodes, [const("shape", np.array([4, 6], np.int64)), const("w", _w(6, 5))],
                    list(SHAPE)), fold_transpose.apply, prepare=fuse_bias.apply)


def test_feature_order_is_where_each_transposed_feature_sits():
    x = np.arange(24).reshape(SHAPE)
    for perm in PERMS:
        order = feature_order(SHAPE, list(perm))
        np.testing.assert_array_equal(x.reshape(1, -1)[:, order],
                                      x.transpose(perm).reshape(1, -1))


# ------------------------------------------------------------------ MTCNN ONet

def onet():
    """MTCNN's ONet (48 x 48 face crops) with seeded weights: four PReLU convolutions and
    pools down to 128 x 3 x 3, flattened through Transpose(0, 3, 2, 1), Gemm 1152 -> 256,
    PReLU, and the face / box / landmark heads (Softmax on the first)."""
    g = G(5)
    x = g.input((1, 3, 48, 48))

    def prelu(y, c, shape):
        return g.op("PRelu", [y, g.const(g.rng.uniform(0.05, 0.3, (c, *shape)))])

    y = x
    for cin, cout, k, pool in ((3, 32, 3, 3), (32, 64, 3, 3), (64, 64, 3, 2), (64, 128, 2, 0)):
        y = prelu(g.conv(y, cin, cout, k, pad=0), cout, (1, 1))
        if pool:
            y = g.op("MaxPool", [y], kernel_shape=[pool, pool], strides=[2, 2], ceil_mode=1)
    y = g.op("Reshape", [g.op("Transpose", [y], perm=[0, 3, 2, 1]), g.const([1, -1])])
    y = g.op("Gemm", [y, g.const(g.rng.normal(0, 0.03, (256, 1152))),
                      g.const(g.rng.normal(0, 0.1, 256))], transB=1)
    y = prelu(y, 256, ())
    heads = [g.op("Gemm", [y, g.const(g.rng.normal(0, 0.06, (k, 256))),
                           g.const(g.rng.normal(0, 0.1, k))], transB=1) for k in (2, 4, 10)]
    return g.model([g.op("Softmax", [heads[0]], axis=1), *heads[1:]])


def test_onet_flattening_folds_and_agrees_with_onnxruntime():
    g = check(onet(), fold_transpose.apply)
    assert "Transpose" not in ops(g)
    (fc,) = [n for n in g.nodes if n.op_type == "Gemm" and g.tensors[n.inputs[1]].shape[1] == 1152]
    flat = g.producer(fc.inputs[0])
    assert flat.op_type == "Reshape" and g.tensors[flat.inputs[0]].shape == (1, 128, 3, 3)


@pytest.fixture(scope="module")
def onet_graph(tmp_path_factory):
    import onnx

    from tengine_host.model import load_model

    path = tmp_path_factory.mktemp("onet") / "onet.onnx"
    onnx.save(onet(), path)
    return load_model(path)


@pytest.mark.parametrize("preset", ["nv_small", "nv_large"])
def test_onet_is_one_dla_subgraph_and_bit_exact(onet_graph, preset):
    from tengine_host.devices import get_device
    from tengine_host.executor import Executor
    from tengine_host.quant import calibrate
    from tengine_host.quant.fidelity import dla_partition
    from tengine_host.verify import verify_run

    graph = onet_graph
    part = dla_partition(graph, preset)
    assert part.subgraph_counts() == {"nvdla": 1, "cpu": 1}, part.fallback_reasons()
    assert [op for _, op, _ in part.fallback_reasons()] == ["Softmax"]
    rng = np.random.default_rng(7)
    samples = [{"x": rng.normal(0, 1, (1, 3, 48, 48)).astype(np.float32)} for _ in range(4)]
    table = calibrate(graph, samples, progress=False)
    devices = [get_device("nvdla", preset=preset, capture=True), get_device("cpu")]
    with Executor(graph, devices, table) as ex:
        _, _, report = verify_run(ex, samples[0])
    assert report.bit_exact and report.layers_checked >= 10, report.summary()
