"""fc_strips: a fully-connected layer over a cube higher or wider than a kernel (32)
runs on the DLA as strips copied into channel slots, bit-exact to the int8 reference
of the plain Gemm (whose kernel is the whole cube), on nv_small and nv_large."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from accel.compiler.engine import ConvOp, SdpOp
from accel.compiler.ops import supports
from accel.compiler.ops.fc_strips import strips
from accel.config import get_preset
from accel.ir import Graph, Node, Tensor
from tengine_host.devices import get_device
from tengine_host.executor import Executor
from tengine_host.model import load_model
from tengine_host.quant import calibrate
from tengine_host.verify import verify_run

from .op_cases import G


def test_a_cube_within_a_kernel_stays_as_it_is():
    assert strips((512, 32, 32), 32, 8) is None


def test_the_worked_example():
    # nv_small (atom 8): 8 x 2 x 64 is two 2 x 32 strips in channels [0, 8) and [8, 16)
    st = strips((8, 2, 64), 32, 8)
    assert (st.count, st.channels, st.r, st.s) == (2, 16, 2, 32)
    w = np.arange(3 * 8 * 2 * 64).reshape(3, 8, 2, 64)
    got = st.weights(w)
    k, c, y, x = np.meshgrid(*(np.arange(n) for n in w.shape), indexing="ij")
    np.testing.assert_array_equal(got[k, 8 * (x // 32) + c, y, x % 32], w)


@pytest.mark.parametrize("cube, atom", [((3, 33, 40), 8), ((5, 48, 7), 32), ((8, 1, 100), 32)])
def test_strips_hold_every_pixel_once_and_keep_the_dot_product(cube, atom):
    c, h, w = cube
    st = strips(cube, 32, atom)
    assert st.r <= 32 and st.s <= 32 and st.channels <= st.count * st.slot
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, cube)
    wt = rng.integers(-127, 128, (4, *cube))
    # the cube as the copies lay it out: strip n's pixels in channels [n * slot, n * slot + c)
    relaid = np.zeros((st.channels, st.r, st.s), np.int64)
    for n, (y0, _, _), (x0, _, _) in st.pieces():
        assert 0 <= y0 <= h - st.r and 0 <= x0 <= w - st.s
        relaid[n * st.slot:n * st.slot + c] = x[:, y0:y0 + st.r, x0:x0 + st.s]
    rw = st.weights(wt)
    assert np.count_nonzero(rw) == np.count_nonzero(wt)
    np.testing.assert_array_equal(np.sort(rw[rw != 0]), np.sort(wt[wt != 0]))
    np.testing.assert_array_equal(np.einsum("kchw,chw->k", rw, relaid),
                                  np.einsum("kchw,chw->k", wt, x))


def _fc_model(shape, cout, k=10):
    """Conv (3x3, ``cout`` channels) -> Flatten -> Gemm(k): the Gemm's kernel is the
    conv's whole ``cout x H x W`` output cube."""
    g = G(2)
    x = g.input(shape)
    y = g.op("Flatten", [g.op("Relu", [g.conv(x, shape[1], cout, 3)])], axis=1)
    n = cout * shape[2] * shape[3]
    return g.model([g.op("Gemm", [y, g.const(g.rng.normal(0, 1 / np.sqrt(n), (k, n))),
                                  g.const(g.rng.normal(0, 0.1, k))], transB=1)])


@pytest.mark.parametrize("preset", ["nv_small", "nv_large"])
@pytest.mark.parametrize("shape, cout, count", [
    ((1, 4, 2, 64), 8, 2),        # W = 64: two strips of 32 columns
    ((1, 4, 48, 5), 12, 2),       # H = 48: two strips of 24 rows
    ((1, 3, 33, 40), 5, 4),       # 2 x 2 overlapping strips of 17 x 20
])
def test_a_gemm_over_a_wide_or_tall_cube_is_bit_exact(shape, cout, count, preset, tmp_path):
    path = tmp_path / "fc.onnx"
    onnx.save(_fc_model(shape, cout), path)
    graph = load_model(path)
    rng = np.random.default_rng(7)
    samples = [{"x": rng.normal(0, 1, shape).astype(np.float32)} for _ in range(4)]
    table = calibrate(graph, samples, progress=False)
    with Executor(graph, [get_device("nvdla", preset=preset, capture=True),
                          get_device("cpu")], table) as ex:
        _, _, report = verify_run(ex, samples[0])
        parts = [dev.name for dev, _ in ex.partition.parts]
        handle = next(h for d, _, h in ex.prepared if d.name == "nvdla")
    assert parts == ["nvdla"], ex.partition.fallback_reasons()
    assert report.bit_exact and report.layers_checked == 3, report.summary()
    (fc,) = [n for n in graph.nodes if n.op_type == "Gemm"]
    ops = [op for op in handle.compiled.ops if op.node == fc.name]
    copies = [op for op in ops if isinstance(op, SdpOp)]
    convs = [op for op in ops if isinstance(op, ConvOp)]
    assert len(copies) == count and convs
    assert all(max(op.kernel[2:]) <= 32 for op in convs)


def _fc_graph(x_shape: tuple[int, ...]) -> Graph:
    """``x`` (flattened when 4-D) -> Gemm with 2 outputs (zero weights)."""
    f32 = np.dtype(np.float32)
    d = int(np.prod(x_shape[1:]))
    flat = len(x_shape) == 2
    nodes = [Node("fc", "Gemm", ["x" if flat else "f", "w"], ["y"],
                  {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 1})]
    tensors = {"x": Tensor("x", x_shape, f32), "y": Tensor("y", (1, 2), f32),
               "w": Tensor("w", (2, d), f32, np.zeros((2, d), np.float32))}
    if not flat:
        nodes.insert(0, Node("flat", "Flatten", ["x"], ["f"], {"axis": 1}))
        tensors["f"] = Tensor("f", (1, d), f32)
    return Graph("fc", nodes, tensors, ["x"], ["y"])


@pytest.mark.parametrize("x_shape, reason", [
    # nv_small: two strips of 17 columns of 8192 channels need 16384 channels
    ((1, 8192, 1, 33), "the 8192x1x33 input cube (C x H x W) as 2 strips of 1x17: input "
                       "channels 16384 outside 1..8192"),
    # a flat input holds its features as channels: past 8192 they are read as a line of
    # 8-lane pixels and cut into strips (9216 features fit), up to 8192 channels of slots
    ((1, 300_000), "the 8x1x37500 input cube (C x H x W) as 1172 strips of 1x32: input "
                   "channels 9376 outside 1..8192"),
])
def test_too_many_channels_are_declined_naming_them(x_shape, reason):
    graph = _fc_graph(x_shape)
    assert supports(graph.node("fc"), graph, get_preset("nv_small")) == (False, reason)


def test_a_flat_input_past_a_cubes_channels_is_accepted():
    graph = _fc_graph((1, 9216))
    assert supports(graph.node("fc"), graph, get_preset("nv_small")) == (True, "")
