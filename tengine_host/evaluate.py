"""Dataset accuracy of a model in fp32 and on its int8 path, spread over Dask workers.

The work is cut into chunks of samples.  Each chunk is one task: a worker runs
the chunk through the fp32 graph and through the int8 path (the simulated
NVDLA with CPU fallback, or the int8 CPU reference) and returns the top-5
classes of both, nothing else.  The model travels once per task as bytes
with its calibration table (:class:`EvalSpec`); a worker process prepares
it once and keeps the prepared executors (:func:`_executors`), so every
worker compiles the model exactly once however many chunks it runs.

Chunks are pure functions of their samples: the results are the same for
any number of workers, any chunk size, and in this process without Dask.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

#: how many classes the top-k accuracy looks at
TOP_K = 5


@dataclass(frozen=True)
class EvalSpec:
    """Everything a worker needs to prepare the model: no paths, so remote workers work."""

    model: bytes                        # the ONNX file's bytes
    table: dict                         # calibration table (JSON-able)
    device: str = "nvdla"               # int8 path: "nvdla" (with CPU fallback) or "cpu"
    preset: str = "nv_small"
    input_shapes: tuple = ()            # ((name, shape), ...) fixing dynamic dims
    output: str | None = None           # the classifier output (default: the first)
    keep_float: tuple = ()              # nodes kept in fp32 on the CPU (--keep-float)

    @property
    def key(self) -> str:
        """Identity of the prepared model on a worker."""
        h = hashlib.sha256(self.model)
        h.update(json.dumps([self.table, self.device, self.preset, self.input_shapes,
                             self.output, self.keep_float], sort_keys=True,
                            default=str).encode())
        return h.hexdigest()

    @property
    def int8_label(self) -> str:
        return "nvdla" if self.device == "nvdla" else "int8_cpu"


#: per worker process: spec key -> (fp32 executor, int8 executor, input, output)
_PREPARED: dict[str, tuple] = {}


def prepared_models() -> int:
    """How many models this process has prepared (a worker: one per distinct spec)."""
    return len(_PREPARED)


def _executors(spec: EvalSpec):
    """The prepared executors of ``spec`` in this process (built on first use)."""
    prepared = _PREPARED.get(spec.key)
    if prepared is not None:
        return prepared
    from tengine_host.devices import get_device
    from tengine_host.executor import Executor
    from tengine_host.model import load_model
    from tengine_host.quant.table import table_from_json

    shapes = {name: tuple(shape) for name, shape in spec.input_shapes}
    graph = load_model(spec.model, input_shapes=shapes or None)
    table = table_from_json(spec.table)
    keep = frozenset(spec.keep_float)
    fp32 = Executor(graph, [get_device("cpu")])
    if spec.device == "nvdla":
        int8 = Executor(graph, [get_device("nvdla", preset=spec.preset, keep_float=keep),
                                get_device("cpu")], table)
    else:
        int8 = Executor(graph, [get_device("cpu", precision="int8", preset=spec.preset,
                                           keep_float=keep)], table)
    fp32.prerun()
    int8.prerun()
    output = spec.output or graph.outputs[0]
    prepared = _PREPARED[spec.key] = (fp32, int8, graph.inputs[0], output)
    return prepared


def _top(scores: np.ndarray) -> np.ndarray:
    """Indices of the ``TOP_K`` largest scores, best first (ties: lower index first)."""
    flat = np.asarray(scores, dtype=np.float64).reshape(-1)
    return np.argsort(-flat, kind="stable")[:TOP_K]


def evaluate_chunk(spec: EvalSpec, start: int, x: np.ndarray
                   ) -> tuple[int, np.ndarray, np.ndarray]:
    """Top-5 classes of samples ``x`` (``[n, ...]``, one model input each) in fp32 and on the
    int8 path: ``(start, fp32 [n, 5], int8 [n, 5])``.  Runs on a Dask worker."""
    fp32, int8, name, output = _executors(spec)
    top_fp, top_q = [], []
    for sample in x:
        feeds = {name: sample[None]}
        top_fp.append(_top(fp32.run(feeds)[output]))
        top_q.append(_top(int8.run(feeds)[output]))
    return start, np.stack(top_fp), np.stack(top_q)


@dataclass
class Accuracy:
    """Top-1/top-5 tallies of the fp32 and int8 paths against labels."""

    label: str                           # the int8 path's name ("nvdla", "int8_cpu")
    samples: int = 0
    top1: dict = field(default_factory=dict)
    top5: dict = field(default_factory=dict)
    agree: int = 0                       # int8 top-1 == fp32 top-1
    predictions: dict = field(default_factory=dict)   # sample index -> (fp32 top1, int8 top1)

    def __post_init__(self) -> None:
        for d in (self.top1, self.top5):
            d.setdefault("fp32", 0)
            d.setdefault(self.label, 0)

    def add(self, start: int, y: np.ndarray, top_fp: np.ndarray, top_q: np.ndarray) -> None:
        for i, (label, fp, q) in enumerate(zip(y, top_fp, top_q, strict=True)):
            self.samples += 1
            for key, top in (("fp32", fp), (self.label, q)):
                self.top1[key] += int(top[0] == label)
                self.top5[key] += int(label in top)
            self.agree += int(fp[0] == q[0])
            self.predictions[start + i] = (int(fp[0]), int(q[0]))

    def as_dict(self, seconds: float) -> dict:
        n = max(self.samples, 1)
        return {"samples": self.samples,
                "top1": {k: v / n for k, v in self.top1.items()},
                "top5": {k: v / n for k, v in self.top5.items()},
                "agreement": self.agree / n, "seconds": seconds}


def chunks(n: int, size: int) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` of consecutive chunks of ``size`` covering ``range(n)``."""
    for start in range(0, n, size):
        yield start, min(start + size, n)
