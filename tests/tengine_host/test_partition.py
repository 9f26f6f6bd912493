"""Partitioning with a stand-in accelerator that runs Conv only."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tengine_host.devices import CpuDevice
from tengine_host.executor import Executor
from tengine_host.frontend import load_onnx
from tengine_host.partition import partition


class ConvOnly(CpuDevice):
    """Runs Conv nodes (in fp32, through the CPU engine) and declines the rest."""

    def __init__(self):
        super().__init__()
        self.name = "convdev"

    def supports(self, node, graph):
        return (True, "") if node.op_type == "Conv" else (False, f"{node.op_type} is not Conv")


def _diamond():
    # c1 -> c2 ----------> add
    #   \-> pool -> c3 --/      c1, c2, c3 cannot share one subgraph: pool sits between c1 and c3.
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((2, 2, 3, 3)).astype(np.float32), f"w{i}")
             for i in range(3)]
    pads = [1, 1, 1, 1]
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c1"], name="c1", pads=pads),
             helper.make_node("Conv", ["c1", "w1"], ["c2"], name="c2", pads=pads),
             helper.make_node("MaxPool", ["c1"], ["p"], name="pool", kernel_shape=[3, 3],
                              pads=pads),
             helper.make_node("Conv", ["p", "w2"], ["c3"], name="c3", pads=pads),
             helper.make_node("Add", ["c2", "c3"], ["y"], name="add")]
    g = helper.make_graph(nodes, "diamond",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return load_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]))


def test_convex_ordered_subgraphs_and_report():
    g = _diamond()
    part = partition(g, [ConvOnly(), CpuDevice()])
    names = [(dev.name, [n.name for n in sub.nodes]) for dev, sub in part.parts]
    # Hand-derived: four is the minimum (c1..c3 cannot form one convex group).
    assert names == [("convdev", ["c1", "c2"]), ("cpu", ["pool"]), ("convdev", ["c3"]),
                     ("cpu", ["add"])]
    assert part.parts[0][1].outputs == ["c1", "c2"] and part.parts[1][1].inputs == ["c1"]
    assert part.parts[3][1].inputs == ["c2", "c3"] and part.parts[3][1].outputs == ["y"]
    # MACs by hand: each conv is 2 out ch * 5*5 pixels * 2 in ch * 3*3 = 900.
    assert part.macs == {"convdev": 2700, "cpu": 0} and part.ops == {"convdev": 3, "cpu": 2}
    assert [(f.node, f.reason) for f in part.fallbacks] == [("pool", "MaxPool is not Conv"),
                                                            ("add", "Add is not Conv")]
    text = part.report()
    assert text.startswith("4 subgraph(s) (2 convdev, 2 cpu), 3 transition(s)\n")
    assert "     1 x MaxPool: convdev declined: MaxPool is not Conv" in text
    assert "  convdev       3 ops ( 60.0%)           2,700 MACs (100.0%)" in text
    assert part.share("convdev") == (0.6, 1.0) and part.subgraph_counts() == {
        "convdev": 2, "cpu": 2}


def test_partitioned_run_equals_single_device_run():
    g = _diamond()
    x = {"x": np.random.default_rng(1).standard_normal((1, 2, 5, 5)).astype(np.float32)}
    with Executor(g, [CpuDevice()]) as ex:
        whole = ex.run(x)["y"]
    with Executor(g, [ConvOnly(), CpuDevice()]) as ex:
        split = ex.run(x)["y"]
        assert len(ex.subgraph_times) == 4 and set(ex.node_times) == {"c1", "c2", "pool",
                                                                       "c3", "add"}
    np.testing.assert_array_equal(split, whole)


def test_unsupported_everywhere_names_node_and_reasons():
    with pytest.raises(ValueError, match=r"no device runs node 'pool' \(MaxPool\): convdev: "):
        partition(_diamond(), [ConvOnly()])


class _ByName:
    """A stand-in device that runs the nodes named in ``names``."""

    def __init__(self, name, names=None):
        self.name, self.names = name, names

    def supports(self, node, graph):
        ok = self.names is None or node.name in self.names
        return (ok, "" if ok else "not mine")


def _random_dag(rng, n):
    from accel.ir import Graph, Node, Tensor

    nodes, tensors = [], {"x": Tensor("x", (1,), np.dtype(np.float32))}
    for i in range(n):
        preds = [f"t{j}" for j in range(i) if rng.random() < 0.3] or ["x"]
        nodes.append(Node(f"n{i}", "Op", preds, [f"t{i}"]))
        tensors[f"t{i}"] = Tensor(f"t{i}", (1,), np.dtype(np.float32))
    return Graph("g", nodes, tensors, ["x"], [f"t{n - 1}"])


def _fewest_groups(graph, on_dla):
    """Exhaustive minimum over every topological order: DP over finished-node sets."""
    names = [n.name for n in graph.nodes]
    pos = {t: i for i, n in enumerate(graph.nodes) for t in n.outputs}
    need = [sum(1 << pos[t] for t in n.inputs if t in pos) for n in graph.nodes]
    colour = [n in on_dla for n in names]
    best = {(0, None): 0}
    for mask in range(1 << len(names)):  # masks grow, so predecessors come first
        for last in (None, False, True):
            cost = best.get((mask, last))
            if cost is None:
                continue
            for i in range(len(names)):
                if not mask >> i & 1 and need[i] & mask == need[i]:
                    key = (mask | 1 << i, colour[i])
                    c = cost + (colour[i] != last)
                    if c < best.get(key, 1 << 30):
                        best[key] = c
    full = (1 << len(names)) - 1
    return min(best.get((full, c), 1 << 30) for c in (False, True))


def test_fewest_transitions_against_exhaustive_search():
    rng = np.random.default_rng(7)
    for _ in range(60):
        n = int(rng.integers(2, 10))
        g = _random_dag(rng, n)
        on_dla = {f"n{i}" for i in range(n) if rng.random() < 0.5}
        part = partition(g, [_ByName("dla", on_dla), _ByName("cpu")], merge_islands=False)
        order = [node.name for _, sub in part.parts for node in sub.nodes]
        assert sorted(order) == sorted(node.name for node in g.nodes)
        # every node runs after its producers (no cycles between subgraphs)
        seen = {"x"}
        for name in order:
            node = g.node(name)
            assert set(node.inputs) <= seen
            seen.update(node.outputs)
        # devices alternate, so each subgraph is maximal and transitions = groups - 1
        devs = [dev.name for dev, _ in part.parts]
        assert all(a != b for a, b in zip(devs, devs[1:], strict=False))
        assert len(part.parts) == _fewest_groups(g, on_dla)
        merged = partition(g, [_ByName("dla", on_dla), _ByName("cpu")])
        assert len(merged.parts) <= len(part.parts)
        assert part.transitions == len(part.parts) - 1


def test_starting_on_the_cpu_can_save_a_transition():
    # n0 (cpu) -> n2 (dla); n1 (dla, graph order first among dla) -> n2.
    # Earliest-node-first would run dla[n1], cpu[n0], dla[n2]: 3 groups; cpu first needs 2.
    from accel.ir import Graph, Node, Tensor

    f32 = np.dtype(np.float32)
    nodes = [Node("n1", "Op", ["x"], ["t1"]), Node("n0", "Op", ["x"], ["t0"]),
             Node("n2", "Op", ["t0", "t1"], ["t2"])]
    tensors = {t: Tensor(t, (1,), f32) for t in ("x", "t0", "t1", "t2")}
    g = Graph("g", nodes, tensors, ["x"], ["t2"])
    part = partition(g, [_ByName("dla", {"n1", "n2"}), _ByName("cpu")], merge_islands=False)
    assert [(d.name, [n.name for n in s.nodes]) for d, s in part.parts] == \
        [("cpu", ["n0"]), ("dla", ["n1", "n2"])]
    assert part.report().startswith("2 subgraph(s) (1 dla, 1 cpu), 1 transition(s)\n")


def test_a_mac_free_island_between_cpu_subgraphs_moves_to_the_cpu():
    """conv (dla) -> sigmoid (cpu) -> concat(sigmoid, conv) (dla, no MACs) -> reshape (cpu):
    four subgraphs as assigned; the concat on the CPU makes two."""
    from accel.ir import Graph, Node, Tensor

    f32 = np.dtype(np.float32)
    tensors = {t: Tensor(t, (1, 2, 3, 3), f32) for t in ("x", "c", "s", "y")}
    tensors["w"] = Tensor("w", (2, 2, 1, 1), f32, np.ones((2, 2, 1, 1), np.float32))
    tensors["cat"] = Tensor("cat", (1, 4, 3, 3), f32)
    tensors["r"] = Tensor("r", (1, 36), f32)
    nodes = [Node("conv", "Conv", ["x", "w"], ["c"]), Node("sig", "Sigmoid", ["c"], ["s"]),
             Node("cat", "Concat", ["s", "c"], ["cat"], {"axis": 1}),
             Node("flat", "Reshape", ["cat"], ["r"])]
    g = Graph("g", nodes, tensors, ["x"], ["r"])
    dla = _ByName("dla", {"conv", "cat"})
    kept = partition(g, [dla, CpuDevice()], merge_islands=False)
    assert [d.name for d, _ in kept.parts] == ["dla", "cpu", "dla", "cpu"]
    part = partition(g, [dla, CpuDevice()])
    assert [(d.name, [n.name for n in s.nodes]) for d, s in part.parts] == [
        ("dla", ["conv"]), ("cpu", ["sig", "cat", "flat"])]
    assert part.ops == {"dla": 1, "cpu": 3}
    (moved,) = [f for f in part.fallbacks if f.node == "cat"]
    assert moved.runs_on == "cpu" and "save transitions" in moved.reason


@pytest.mark.parametrize("kernels, moved", [(1, True), (2, False)])
def test_a_tiny_convolution_between_cpu_subgraphs_moves_to_the_cpu(kernels, moved):
    """conv 16 -> 32, 3x3 (dla) -> sigmoid (cpu) -> conv 32 -> k, 1x1 (dla) -> reshape (cpu).
    MACs by hand on 10x10: 32 * 100 * 16 * 9 = 460,800 and k * 100 * 32 = 3,200 k; the
    second is 0.69 % of the total for k = 1 (moved: at most 1 %), 1.37 % for k = 2 (kept)."""
    from accel.ir import Graph, Node, Tensor

    f32 = np.dtype(np.float32)
    tensors = {"x": Tensor("x", (1, 16, 10, 10), f32),
               "w1": Tensor("w1", (32, 16, 3, 3), f32, np.ones((32, 16, 3, 3), np.float32)),
               "c": Tensor("c", (1, 32, 10, 10), f32), "s": Tensor("s", (1, 32, 10, 10), f32),
               "w2": Tensor("w2", (kernels, 32, 1, 1), f32,
                            np.ones((kernels, 32, 1, 1), np.float32)),
               "d": Tensor("d", (1, kernels, 10, 10), f32),
               "r": Tensor("r", (1, kernels * 100), f32)}
    nodes = [Node("big", "Conv", ["x", "w1"], ["c"], {"pads": [1, 1, 1, 1]}),
             Node("sig", "Sigmoid", ["c"], ["s"]), Node("tiny", "Conv", ["s", "w2"], ["d"]),
             Node("flat", "Reshape", ["d"], ["r"])]
    g = Graph("g", nodes, tensors, ["x"], ["r"])
    part = partition(g, [_ByName("dla", {"big", "tiny"}), CpuDevice()])
    assert part.macs["dla"] == 460_800 + (0 if moved else 3_200 * kernels)
    if moved:
        assert [(d.name, [n.name for n in s.nodes]) for d, s in part.parts] == [
            ("dla", ["big"]), ("cpu", ["sig", "tiny", "flat"])]
        (fb,) = [f for f in part.fallbacks if f.node == "tiny"]
        assert fb.reason == "moved to save transitions (<= 1% of the MACs between cpu subgraphs)"
    else:
        assert [d.name for d, _ in part.parts] == ["dla", "cpu", "dla", "cpu"]


def test_convolutions_of_any_rank_count_their_macs():
    """A 1-D convolution (audio, time series) counts ``outputs x taps`` and falls back with
    its reason: 8 kernels x 40 outputs x 16 channels x 3 taps = 15,360 MACs (it raised a
    ValueError unpacking its 3-D shape)."""
    from accel.ir import Graph, Node, Tensor
    from tengine_host.devices import get_device
    from tengine_host.partition import node_macs

    f32 = np.dtype(np.float32)
    tensors = {"x": Tensor("x", (1, 16, 40), f32), "y": Tensor("y", (1, 8, 40), f32),
               "w": Tensor("w", (8, 16, 3), f32, np.ones((8, 16, 3), np.float32))}
    g = Graph("g", [Node("c", "Conv", ["x", "w"], ["y"], {"kernel_shape": [3], "pads": [1, 1],
                                                          "strides": [1], "dilations": [1],
                                                          "group": 1})],
              tensors, ["x"], ["y"])
    assert node_macs(g.nodes[0], g) == 15_360
    part = partition(g, [get_device("nvdla", preset="nv_small"), CpuDevice()])
    assert part.macs == {"nvdla": 0, "cpu": 15_360}
    ((n, op, why),) = part.fallback_reasons()
    assert op == "Conv" and "(1, 16, 40)" in why
