"""How a model runs on the simulated DLA: the numbers of the README's zoo table.

:func:`evaluate` calibrates a model on seeded samples, partitions it between
the ``nvdla`` device and the CPU, runs one more sample with verification
(:mod:`tengine_host.verify`: every DLA tensor against the int8 CPU reference)
and compares the result with the fp32 host engine.

>>> row = evaluate("resnet18_cifar", "nv_small")          # doctest: +SKIP
>>> row.dla_subgraphs, row.bit_exact, round(row.cosine, 3)   # doctest: +SKIP
(1, True, 1.0)
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import onnx

CLOCK_HZ = 100e6


@dataclass
class ZooRow:
    model: str
    preset: str
    subgraphs: int
    dla_subgraphs: int
    dla_op_share: float
    dla_mac_share: float
    bit_exact: bool
    layers_checked: int
    cosine: float             # smallest over the outputs, DLA path vs fp32
    cycles: int               # estimated DLA cycles of one inference
    fallbacks: list[tuple[int, str, str]]

    @property
    def latency_ms(self) -> float:
        """Estimated DLA latency at :data:`CLOCK_HZ`."""
        return self.cycles / CLOCK_HZ * 1e3

    def as_dict(self) -> dict:
        return {**asdict(self), "latency_ms_100mhz": self.latency_ms}


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    denom = np.linalg.norm(a) * np.linalg.norm(b)
    return float(a @ b / denom) if denom else float(np.array_equal(a, b))


def random_samples(graph, n: int, seed: int = 0) -> list[dict[str, np.ndarray]]:
    """``n`` feeds of standard-normal inputs (the zoo's weights are seeded, not trained)."""
    rng = np.random.default_rng(seed)
    return [{t: rng.standard_normal(graph.tensors[t].shape).astype(np.float32)
             for t in graph.inputs} for _ in range(n)]


def evaluate(model: str | Path | onnx.ModelProto, preset: str, *,
             calibration: list[Mapping[str, np.ndarray]] | None = None,
             sample: Mapping[str, np.ndarray] | None = None,
             input_shapes: dict | None = None) -> ZooRow:
    """One row of the zoo table for ``model`` (a zoo name, an ONNX path or proto) on ``preset``.

    ``calibration`` and ``sample`` default to seeded random inputs (8 and 1).
    """
    from tengine_host.devices import get_device
    from tengine_host.executor import Executor
    from tengine_host.interpreter import interpret
    from tengine_host.model import load_model
    from tengine_host.quant import calibrate
    from tengine_host.verify import verify_run
    from tengine_host.zoo import MODELS, build

    name = str(model)
    with tempfile.TemporaryDirectory() as tmp:
        if isinstance(model, onnx.ModelProto) or str(model) in MODELS:
            proto = model if isinstance(model, onnx.ModelProto) else build(str(model))
            name = proto.graph.name if isinstance(model, onnx.ModelProto) else str(model)
            path = Path(tmp) / "model.onnx"
            onnx.save(proto, path)
        else:
            path = Path(model)
            name = path.stem
        graph = load_model(path, input_shapes=input_shapes)
    if calibration is None or sample is None:
        feeds = random_samples(graph, 9)
        calibration = calibration if calibration is not None else feeds[:8]
        sample = sample if sample is not None else feeds[8]
    table = calibrate(graph, calibration, progress=False)
    want = interpret(graph, sample)
    dla = get_device("nvdla", preset=preset, capture=True)
    with Executor(graph, [dla, get_device("cpu")], table) as ex:
        got, _, report = verify_run(ex, sample)
        cycles = sum(int(h.cycles) for d, _, h in ex.prepared if d is dla)
        part = ex.partition
    counts = part.subgraph_counts()
    ops, macs = part.share("nvdla")
    return ZooRow(name, preset, len(part.parts), counts.get("nvdla", 0), ops, macs,
                  report.bit_exact, report.layers_checked,
                  min(cosine(got[t], want[t]) for t in graph.outputs), cycles,
                  part.fallback_reasons())


def markdown(rows: list[ZooRow]) -> str:
    """The rows as the README's table."""
    lines = ["| model | preset | DLA subgraphs (all) | DLA share of MACs | bit-exact | "
             "cosine to fp32 | est. DLA latency @ 100 MHz |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.model} | {r.preset} | {r.dla_subgraphs} ({r.subgraphs}) | "
                     f"{r.dla_mac_share:.1%} | {'yes' if r.bit_exact else 'NO'} "
                     f"({r.layers_checked} tensors) | {r.cosine:.4f} | "
                     f"{r.latency_ms:.2f} ms |")
    return "\n".join(lines)
